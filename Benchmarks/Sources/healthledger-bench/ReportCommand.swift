import ArgumentParser
import BenchmarkPeers
import Foundation
import HealthExport
import HealthLedgerSDK
import HealthModel
import Ledger

/// `healthledger-bench report`: every scenario of TARGETS.md, HealthLedger reached over RPC
/// in a `healthledgerd` process of its own, next to raw LMDB and loopback TCP
/// (`limits.sh`), the ledger library in process, PostgreSQL and SQLite doing the same work,
/// all in one run.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "The TARGETS report: HealthLedger over RPC against raw LMDB, TCP, PostgreSQL and SQLite, in one run.")

    @Flag(help: "A short run (under two minutes): fewer rounds and samples, a month of statistics instead of a year.")
    var quick = false
    @Option(help: "Rounds per scenario (default 5, quick 3); medians are reported.") var rounds: Int?
    @Option(help: "The reference script (raw LMDB and TCP limits).") var limits = "../shared/tools/limits.sh"
    @Option(help: "The folder holding a release build of healthledgerd.") var binaries = ".build/release"
    @Option(help: "Peers to run, comma-separated: postgresql, sqlite (empty for none).") var peers = "postgresql,sqlite"
    @Option(name: .customLong("work-dir"), help: "Scratch directory (default: a temporary one).") var workDirectory: String?
    @Option(help: "Write the report as Markdown to this file (with the plot next to it, as .svg).") var write: String?
    @Option(help: """
        Only these of HealthLedger's scenarios, comma-separated (ping, calls, ingest, concurrent, sequential, statistics, pages, \
        soak, replay, import), without the peers: for profiling one path.
        """)
    var only: String?
    @Flag(help: "Encrypt the ledgers at rest (a master key made for the run), to compare with a run without.") var encrypted = false

    func run() async throws {
        let started = ContinuousClock.now
        let scratch = URL(filePath: workDirectory ?? NSTemporaryDirectory(), directoryHint: .isDirectory)
            .appending(path: "healthledger-report-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        if encrypted { try BenchEncryption.enable(in: scratch) }
        var plan = Plan(quick: quick, rounds: rounds)
        plan.binaries = binaries
        plan.only = only.map { Set($0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) }
        let workload = try Workload(days: plan.days)
        let report = BenchReport()
        report.mode = quick ? "quick" : "full"
        report.machine = Self.machine()

        print("== reference: \(limits)")
        let reference = limits.isEmpty ? Reference(output: "") : Reference.measure(script: limits)
        report.referenceOutput = reference.output
        print(reference.summary)

        // The peers start first: PostgreSQL's pings are measured in HealthLedger's rounds.
        var peerDatabases: [any PeerDatabase] = []
        var peerDirectories: [URL] = []
        defer {
            for peer in peerDatabases { peer.stop() }
            for directory in peerDirectories { try? FileManager.default.removeItem(at: directory) }
        }
        for name in peers.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) where !name.isEmpty && plan.only == nil {
            // A short path: PostgreSQL's socket lives in it, and socket paths are limited to 107 bytes.
            let directory = URL(filePath: "/tmp/hl-\(name)-\(UInt32.random(in: 0...UInt32.max))", directoryHint: .isDirectory)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            peerDirectories.append(directory)
            switch name {
            case "postgresql": peerDatabases.append(try PostgresPeer.start(in: directory))
            case "sqlite": peerDatabases.append(try SQLitePeer.open(in: directory))
            default: throw BenchFailure("unknown peer '\(name)': postgresql or sqlite")
            }
        }
        let postgres = peerDatabases.lazy.compactMap { $0 as? PostgresPeer }.first
        var peerConnections = try postgres.map { postgres in
            guard let tcp = try postgres.connectOverTCP() as? any PipelinedPeerConnection,
                  let unixSocket = try postgres.connect() as? any PipelinedPeerConnection
            else { throw BenchFailure("\(postgres.name) does not pipeline") }
            return PeerPingConnections(tcp: tcp, unixSocket: unixSocket)
        }

        // HealthLedger: the server as a process of its own, reached over loopback.
        let server = try await RPCScenarios.start(
            executable: URL(filePath: binaries).appending(path: "healthledgerd"), dataDirectory: scratch.appending(path: "server"), workload: workload)
        let healthLedger: HealthLedgerFigures
        do {
            healthLedger = try await server.run(plan, peerConnections: peerConnections)
            peerConnections = nil
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
        // Replay and verify (the operator's tools) and the statistics in process, on the
        // server's data once it has stopped.
        let offline = try Self.offline(dataDirectory: scratch.appending(path: "server"), workload: workload, plan: plan)
        // The ledger alone, in this process: what the RPC layer costs.
        let inProcess = plan.wants("ingest")
            ? try await Self.ingestInProcess(scratch.appending(path: "in-process"), workload: workload, plan: plan) : Figure([])

        var peerFigures: [(name: String, figures: PeerFigures)] = []
        for peer in peerDatabases {
            print("== peer: \(peer.name)")
            var figures = try PeerScenarios(
                peer: peer, workload: workload, plan: plan, sourcePriority: healthLedger.sourcePriority, expectedDailySums: healthLedger.dailySums
            ).run()
            if let peer = peer as? PostgresPeer, peer === postgres {
                (figures.pingTCP, figures.pingUnixSocket) = (healthLedger.peerPingTCP, healthLedger.peerPingUnixSocket)
                (figures.callsInFlightTCP, figures.callsInFlightUnixSocket) = (healthLedger.peerPipelinedTCP, healthLedger.peerPipelinedUnixSocket)
            }
            peerFigures.append((peer.name, figures))
            // Stopped once done (the defer above is for an early exit): no peer idles beside the import.
            peer.stop()
        }
        // The Apple Health import, through a server of its own on a data directory of its own.
        let imported = plan.wants("import") ? try await Self.appleHealthImport(scratch.appending(path: "import"), plan: plan) : nil

        for result in Self.results(healthLedger, offline, inProcess, peerFigures, imported, reference, plan) where result.healthLedger?.values.isEmpty == false {
            report.add(result)
        }
        report.runTime = ContinuousClock.now - started
        print("RUN TIME \(Self.minutesAndSeconds(report.runTime)) (\(report.mode); builds not counted)")

        if let write {
            let markdown = URL(filePath: write)
            let plot = markdown.deletingPathExtension().appendingPathExtension("svg")
            try Data(report.svg().utf8).write(to: plot)
            // The analysis below the marker is written by hand and kept across runs.
            var kept = ""
            if let previous = try? String(contentsOf: markdown, encoding: .utf8), let marker = previous.range(of: Self.analysisMarker) {
                kept = String(previous[marker.lowerBound...])
            }
            try Data((Self.document(report, plot: plot.lastPathComponent) + kept).utf8).write(to: markdown)
            print("wrote \(markdown.path) and \(plot.path)")
        }
    }

    /// The scenarios with their targets (TARGETS.md) and every reference measured.
    static func results(
        _ hl: HealthLedgerFigures, _ offline: OfflineFigures, _ inProcess: Figure,
        _ peers: [(name: String, figures: PeerFigures)], _ imported: ImportFigures?, _ reference: Reference, _ plan: Plan
    ) -> [ScenarioResult] {
        func peer(_ path: KeyPath<PeerFigures, Figure?>) -> [(name: String, figure: Figure)] {
            peers.compactMap { name, figures in figures[keyPath: path].map { (name, $0) } }
        }
        var results: [ScenarioResult] = []
        var ping = ScenarioResult(
            name: "unary ping, one connection, TCP (p50)", unit: "µs", direction: .lowerIsBetter, target: 50, targetText: "p50 ≤ 50 µs, p99 ≤ 200 µs",
            healthLedger: hl.pingP50)
        if let tcp = reference.pingPongMicroseconds {
            ping.references.append(("C TCP ping-pong", Figure(tcp)))
            ping.notes.append(String(format: "p50 is %.2f× the C ping-pong (target ≤ 2.5×)", hl.pingP50.median / tcp))
        }
        ping.references += peer(\.pingTCP)
        ping.notes.append(String(format: "p99 median %.1f µs (target ≤ 200 µs: %@)", hl.pingP99.median, hl.pingP99.median <= 200 ? "met" : "NOT met"))
        ping.notes.append(String(
            format: "the caller's task prefers the store's executor (its connection's event loop); on the default executor, in the same rounds: p50 %.1f µs",
            hl.pingP50DefaultExecutor.median))
        results.append(ping)
        var localPing = ScenarioResult(
            name: "unary ping, one connection, Unix socket (p50)", unit: "µs", direction: .lowerIsBetter, target: 50, targetText: "p50 ≤ 50 µs",
            healthLedger: hl.pingUnixSocketP50)
        localPing.references += peer(\.pingUnixSocket)
        localPing.notes.append("healthledgerd --unix-socket, the client at unix:PATH; PostgreSQL over its own Unix socket")
        results.append(localPing)
        var plainPing = ScenarioResult(
            name: "unary ping from a client of the protocol alone, TCP (p50)", unit: "µs", direction: .lowerIsBetter, target: 50,
            targetText: "p50 ≤ 50 µs", healthLedger: hl.pingProtocolClient)
        plainPing.references += peer(\.pingTCP)
        plainPing.notes.append("one Ping frame at a time on a blocking socket, as libpq sends SELECT 1: the server's part of a ping, without the SDK's; in the same rounds as the SDK's and PostgreSQL's")
        results.append(plainPing)
        var plainLocalPing = ScenarioResult(
            name: "unary ping from a client of the protocol alone, Unix socket (p50)", unit: "µs", direction: .lowerIsBetter, target: 50,
            targetText: "p50 ≤ 50 µs", healthLedger: hl.pingProtocolClientUnixSocket)
        plainLocalPing.references += peer(\.pingUnixSocket)
        results.append(plainLocalPing)
        var calls = ScenarioResult(
            name: "64 calls in flight, one connection, TCP", unit: "calls/s", direction: .higherIsBetter, target: 50_000, targetText: "≥ 50,000 calls/s",
            healthLedger: hl.callsInFlight)
        if let tcp = reference.pingPongMicroseconds { calls.references.append(("C TCP ping-pong, one at a time", Figure(1e6 / tcp))) }
        calls.references += peer(\.callsInFlightTCP)
        if !peer(\.callsInFlightTCP).isEmpty { calls.notes.append("PostgreSQL: SELECT 1 in libpq's pipeline mode, 64 per sync, on one connection") }
        calls.notes.append(String(
            format: "64 tasks, each preferring the store's executor (as the pings); on the default executor, in the same rounds: %.0f calls/s",
            hl.callsInFlightDefaultExecutor.median))
        results.append(calls)
        var localCalls = ScenarioResult(
            name: "64 calls in flight, one connection, Unix socket", unit: "calls/s", direction: .higherIsBetter, target: 50_000,
            targetText: "≥ 50,000 calls/s", healthLedger: hl.callsInFlightUnixSocket)
        localCalls.references += peer(\.callsInFlightUnixSocket)
        results.append(localCalls)
        var pipelined = ScenarioResult(
            name: "64 pings pipelined per batch, one connection, TCP", unit: "calls/s", direction: .higherIsBetter, target: 50_000,
            targetText: "≥ 50,000 calls/s", healthLedger: hl.callsPipelined)
        pipelined.references += peer(\.callsInFlightTCP)
        pipelined.notes.append("a client of the protocol alone on a blocking socket writes 64 Ping frames at once, then reads their answers, as PostgreSQL's libpq pipelines 64 SELECT 1 per sync: the server's cost per call, without the SDK's")
        results.append(pipelined)
        var localPipelined = ScenarioResult(
            name: "64 pings pipelined per batch, one connection, Unix socket", unit: "calls/s", direction: .higherIsBetter, target: 50_000,
            targetText: "≥ 50,000 calls/s", healthLedger: hl.callsPipelinedUnixSocket)
        localPipelined.references += peer(\.callsInFlightUnixSocket)
        results.append(localPipelined)
        var ingest = ScenarioResult(
            name: "batched ingest, 1,000 per call, durable", unit: "samples/s", direction: .higherIsBetter, target: 250_000,
            targetText: "≥ 250,000 samples/s", healthLedger: hl.batchedIngest)
        ingest.references.append(("the ledger in process", inProcess))
        if let raw = reference.batchedAppends { ingest.references.append(("raw LMDB, 1,000 per commit", Figure(raw))) }
        ingest.references += peer(\.batchedIngest)
        ingest.notes.append("4 calls in flight (PostgreSQL: 4 connections; SQLite: 4 threads sharing its one writer)")
        if let rss = hl.serverResidentMiB { ingest.notes.append("server resident memory after each ingest round (MiB): \(rss.map { String(format: "%.0f", $0) }.joined(separator: ", "))") }
        results.append(ingest)
        var concurrent = ScenarioResult(
            name: "64 clients, single durable saves", unit: "saves/s", direction: .higherIsBetter, target: 20_000, targetText: "≥ 20,000 saves/s",
            healthLedger: hl.concurrentSaves)
        if let raw = reference.singleCommits { concurrent.references.append(("raw LMDB, 1 per commit", Figure(raw))) }
        concurrent.references += peer(\.concurrentSaves)
        results.append(concurrent)
        var sequential = ScenarioResult(
            name: "one client, sequential durable saves", unit: "saves/s", direction: .higherIsBetter, target: 2_000, targetText: "≥ 2,000 saves/s",
            healthLedger: hl.sequentialSaves)
        if let raw = reference.singleCommits { sequential.references.append(("raw LMDB, 1 per commit", Figure(raw))) }
        sequential.references += peer(\.sequentialSaves)
        sequential.notes.append(String(
            format: "the caller's task prefers the store's executor; on the default executor, in alternate rounds: %.0f saves/s",
            hl.sequentialSavesDefaultExecutor.median))
        results.append(sequential)
        var hourly = ScenarioResult(
            name: "hourly average heart rate, \(plan.days) days of per-minute samples", unit: "ms", direction: .lowerIsBetter, target: 20,
            targetText: "≤ 20 ms (a year)", healthLedger: hl.hourlyAverage)
        hourly.references.append(("the ledger in process", offline.hourlyAverage))
        hourly.references += peer(\.hourlyAverage)
        results.append(hourly)
        var daily = ScenarioResult(
            name: "daily step sums, \(plan.days) days, 3 overlapping sources merged", unit: "ms", direction: .lowerIsBetter, target: 20,
            targetText: "≤ 20 ms (a year)", healthLedger: hl.dailyMergedSteps)
        daily.references.append(("the ledger in process", offline.dailyMergedSteps))
        daily.references += peer(\.dailyMergedSteps)
        daily.notes.append("the peers return the samples (SQL) and merge them in the client with the same rule")
        for (name, figures) in peers where figures.mergeMismatch != nil {
            daily.notes.append("\(name)'s merged sums differ from HealthLedger's: \(figures.mergeMismatch!)")
        }
        results.append(daily)
        var page = ScenarioResult(
            name: "anchored page of 1,000 changes (owner)", unit: "ms", direction: .lowerIsBetter, target: 1, targetText: "p50 ≤ 1 ms",
            healthLedger: hl.anchoredPage)
        page.references += peer(\.anchoredPage)
        page.notes.append(String(format: "a read-denied app's page (its own changes among 10× others'): p50 %.2f ms", hl.anchoredPageDeniedApp.median))
        results.append(page)
        var replay = ScenarioResult(
            name: "replay: rebuild every projection from the log", unit: "events/s", direction: .higherIsBetter, target: 500_000,
            targetText: "≥ 500,000 events/s", healthLedger: offline.replay)
        if let scan = reference.scan { replay.references.append(("raw LMDB cursor scan", Figure(scan))) }
        replay.references += peer(\.rebuild)
        replay.notes.append("the peers rebuild their samples table from their events table in SQL")
        results.append(replay)
        var verify = ScenarioResult(
            name: "verify: recompute the hash chain", unit: "events/s", direction: .higherIsBetter, target: 2_000_000,
            targetText: "≥ 2,000,000 events/s", healthLedger: offline.verify)
        if let scan = reference.scan { verify.references.append(("raw LMDB cursor scan", Figure(scan))) }
        results.append(verify)
        if let imported {
            var result = ScenarioResult(
                name: "Apple Health import, \(imported.megabytes) MiB export.xml (\(imported.records.formatted()) records)", unit: "records/s",
                direction: .higherIsBetter, target: 200_000, targetText: "≥ 200,000 records/s, memory flat", healthLedger: imported.rate)
            result.references.append(("xmllint --stream, reading only", imported.xmllint))
            result.references.append(("the importer's reader alone (libxml2 SAX, objects made)", imported.reader))
            result.notes.append(
                "the CLI importing over RPC into healthledgerd; importer peak RSS \(imported.importerPeakMiB) MiB, server anonymous memory at most "
                    + "\(imported.serverAnonymousPeakMiB) MiB (the mapped ledger not counted)")
            results.append(result)
        }
        if !hl.soakAnonymousMiB.isEmpty {
            let readings = hl.soakAnonymousMiB
            // The second tenth of the run (after warming up) against the last tenth.
            let tenth = max(1, readings.count / 10)
            let early = Bench.median(Array(readings[min(tenth, readings.count - 1)..<min(2 * tenth, readings.count)]))
            let late = Bench.median(Array(readings.suffix(tenth)))
            var soak = ScenarioResult(
                name: "server memory under ingest, \(Int(hl.soakSeconds.rounded())) s soak", unit: "% heap growth", direction: .lowerIsBetter, target: 10,
                targetText: "heap flat (≤ 10 % growth) over 10 minutes", healthLedger: Figure(100 * (late - early) / max(early, 1)))
            soak.notes.append(String(
                format: "RssAnon (heap and stacks) median %.0f MiB in the second tenth, %.0f MiB in the last; %@ samples saved, paced at %@/s (1,000 per call, 4 in flight)",
                early, late, hl.soakSamples.formatted(), plan.soakRate.formatted()))
            let step = max(1, readings.count / 10)
            soak.notes.append("RssAnon every \(step) s (MiB): " + stride(from: step - 1, to: readings.count, by: step).map { String(format: "%.0f", readings[$0]) }.joined(separator: ", "))
            results.append(soak)
        }
        return results
    }

    /// The import's figures: records a second through the server, and the references.
    struct ImportFigures {
        var records: Int
        var megabytes: Int
        var rate: Figure
        var xmllint: Figure
        var reader: Figure
        var importerPeakMiB: Int
        var serverAnonymousPeakMiB: Int
    }

    /// Generates an export of `plan.importRecords` records, times `xmllint --stream` and the
    /// importer's reader on it, and imports it with the CLI into a server of its own.
    static func appleHealthImport(_ directory: URL, plan: Plan) async throws -> ImportFigures {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appending(path: "export.xml")
        print("== import: generating an export of \(plan.importRecords) records")
        try SyntheticExport(records: plan.importRecords).write(to: file)
        let records = try ImportScenario.countRecords(file)
        let rounds = max(1, plan.rounds / 2)
        let lint = try ImportScenario.xmllint(file, rounds: rounds)
        var reader: [Double] = []
        for _ in 0..<rounds {
            let started = ContinuousClock.now
            _ = try ImportScenario.countRecords(file)
            reader.append(Double(records) / seconds(ContinuousClock.now - started))
        }
        let result = try await ImportScenario.importThroughServer(file, scratch: directory.appending(path: "server"), binaries: plan.binaries)
        return ImportFigures(
            records: records, megabytes: ImportScenario.fileSize(file) >> 20, rate: Figure(Double(result.elements) / result.seconds),
            xmllint: Figure(lint.values.map { Double(records) / $0 }), reader: Figure(reader), importerPeakMiB: result.importerPeakKiB >> 10,
            serverAnonymousPeakMiB: result.serverAnonymousPeakKiB >> 10)
    }

    /// What is measured on the server's data directory once the server has stopped: replay
    /// (a rebuild into a scratch copy, compared with the live projections) and verify of the
    /// ledger the batched ingest wrote; the statistics collections by the ledger in process.
    struct OfflineFigures {
        var replay: Figure
        var verify: Figure
        var hourlyAverage: Figure
        var dailyMergedSteps: Figure
    }

    static func offline(dataDirectory: URL, workload: Workload, plan: Plan) throws -> OfflineFigures {
        let rounds = plan.rounds
        let store = try LedgerStore(directory: dataDirectory, configuration: BenchEncryption.configuration())
        let ledger = try store.ledger(RPCScenarios.ingestLedger)
        var replays: [Double] = []
        var verifies: [Double] = []
        for _ in 0..<(plan.wants("replay") ? max(1, rounds / 2) : 0) {
            let replayed = try ledger.replay()
            guard replayed.identical else { throw BenchFailure("replay differs from the live projections") }
            replays.append(Double(replayed.events) / seconds(replayed.rebuildDuration))
            let verified = try ledger.verify()
            guard verified.isValid else { throw BenchFailure("verify failed: \(verified.problem.map { "\($0)" } ?? "")") }
            verifies.append(Double(verified.eventsChecked) / seconds(verified.duration))
        }
        let statistics = try store.ledger(RPCScenarios.statisticsLedger)
        var hourly: [Double] = []
        var daily: [Double] = []
        let clock = ContinuousClock()
        for _ in 0..<(plan.wants("statistics") ? max(rounds, 3) : 0) {
            var started = clock.now
            _ = try statistics.statisticsCollection(RPCScenarios.hourly(workload), as: .owner)
            hourly.append(seconds(clock.now - started) * 1e3)
            started = clock.now
            _ = try statistics.statisticsCollection(RPCScenarios.daily(workload), as: .owner)
            daily.append(seconds(clock.now - started) * 1e3)
        }
        return OfflineFigures(replay: Figure(replays), verify: Figure(verifies), hourlyAverage: Figure(hourly), dailyMergedSteps: Figure(daily))
    }

    /// The batched ingest into the ledger library in this process, with the same samples,
    /// batches and pipeline as over RPC.
    static func ingestInProcess(_ directory: URL, workload: Workload, plan: Plan) async throws -> Figure {
        let store = try LedgerStore(directory: directory, configuration: BenchEncryption.configuration())
        let ledger = try store.createLedger(id: "ingest")
        var rates: [Double] = []
        for round in 0..<plan.rounds {
            let first = round * plan.ingestPerRound
            let started = ContinuousClock.now
            try await pipelinedBatches(count: plan.ingestPerRound) { range in
                _ = try await ledger.save(range.map { workload.ingest(first + $0).object }, by: .owner)
            }
            rates.append(Double(plan.ingestPerRound) / seconds(ContinuousClock.now - started))
        }
        return Figure(rates)
    }

    /// "23 min 5 s", "58 s".
    static func minutesAndSeconds(_ duration: Duration) -> String {
        let seconds = Int(duration.components.seconds)
        return seconds >= 60 ? "\(seconds / 60) min \(seconds % 60) s" : "\(seconds) s"
    }

    static func machine() -> String {
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        let memory = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("MemTotal") }?.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        // A virtual machine's idle CPUs halt unless the guest polls first: waking one then
        // costs tens of microseconds, most of a ping's time between two processes.
        let haltPoll = (try? String(contentsOfFile: "/sys/module/haltpoll/parameters/guest_halt_poll_ns", encoding: .utf8))
            .map { ", guest halt polling \($0.trimmingCharacters(in: .whitespacesAndNewlines)) ns" } ?? ""
        return "\(ProcessInfo.processInfo.activeProcessorCount) cores (\(cpu)), \(memory >> 20) GiB, \(ProcessInfo.processInfo.operatingSystemVersionString)\(haltPoll)"
    }

    /// Where the hand-written analysis of a report begins; `--write` keeps it.
    static let analysisMarker = "<!-- analysis: written by hand, kept by --write -->"

    static func document(_ report: BenchReport, plot: String) -> String {
        """
        # Benchmarks

        The latest full report of `tools/bench.sh` (generated by `healthledger-bench report --write BENCHMARKS.md`;
        do not edit by hand). Every figure comes from one run on one machine: HealthLedger reached over RPC in a
        `healthledgerd` process of its own (over TCP loopback, and for the ping and calls in flight also over its
        Unix domain socket), and in the same run the references: raw LMDB and a C loopback ping-pong
        (`../shared/tools/limits.sh`), the ledger library in process, PostgreSQL (a throw-away cluster, fsync on,
        its Unix socket, and TCP loopback for the rows that name it; COPY in transactions of 1,000) and SQLite
        (WAL, `synchronous=FULL`), loaded with the same samples through their C client libraries. Medians of the rounds, with min–max; ×N is HealthLedger's
        advantage (above 1: better, below 1: worse).

        - Date: \(ISO8601DateFormatter().string(from: Date()))
        - Machine: \(report.machine)
        - Mode: \(report.mode); the run took \(minutesAndSeconds(report.runTime)) (the release builds before it not counted)

        \(report.markdown(plot: plot))
        ## Reproduce

        On a Debian machine with Swift 6, from the repository's root: `tools/bench.sh` (installs PostgreSQL,
        libpq-dev and libsqlite3-dev when missing, builds `healthledgerd` and the benchmark package in release,
        and runs the report; `tools/bench.sh --quick` runs in under two minutes once those builds are done, and
        each run prints how long it took). `tools/bench.sh --write
        BENCHMARKS.md` rewrites this file. The ledger-only scenarios (denied reads, predicates, the Merkle tree's
        cost) are `Benchmarks/.build/release/healthledger-bench ledger`; the import with both parsers compared and
        a quarter of the file as well is `tools/bench-import.sh`.

        """
    }
}

/// How much work each scenario does.
struct Plan: Sendable {
    var rounds: Int
    var ingestPerRound: Int
    var concurrentSaves: Int
    var sequentialSaves: Int
    var pings: Int
    var callsInFlight: Int
    var days: Int
    var pageSamples: Int
    /// How long the memory soak runs, and the samples a second it saves.
    var soakSeconds: Int
    var soakRate: Int
    /// Records in the generated export the import reads (3,500,000 is about 1 GB).
    var importRecords: Int
    /// The folder holding release builds of `healthledgerd` and `healthledger`.
    var binaries = ".build/release"
    /// The scenarios to run; nil for all.
    var only: Set<String>?

    func wants(_ scenario: String) -> Bool { only?.contains(scenario) ?? true }

    init(quick: Bool, rounds: Int?) {
        self.rounds = max(1, rounds ?? (quick ? 3 : 5))
        ingestPerRound = quick ? 40_000 : 200_000
        concurrentSaves = quick ? 4_000 : 20_000
        sequentialSaves = quick ? 400 : 2_000
        pings = quick ? 2_000 : 5_000
        callsInFlight = quick ? 10_000 : 50_000
        days = quick ? 30 : 365
        pageSamples = quick ? 22_000 : 110_000
        soakSeconds = quick ? 10 : 600
        soakRate = 10_000
        importRecords = quick ? 50_000 : 3_500_000
    }
}

extension Plan {
    /// Pages of 1,000 the owner walks in each round (of the pages ledger's changes).
    var ownerPages: Int { pageSamples / 1000 * 10 / 11 }
}
