import BenchmarkPeers
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger

/// HealthLedger's figures over RPC.
struct HealthLedgerFigures: Sendable {
    /// Pings from a task preferring the store's executor (``HealthStore/executor``).
    var pingP50 = Figure([])
    var pingP99 = Figure([])
    /// The same pings from a task on the default executor, in the same rounds.
    var pingP50DefaultExecutor = Figure([])
    /// Pings over the server's Unix domain socket (from a task preferring the store's executor).
    var pingUnixSocketP50 = Figure([])
    var callsInFlight = Figure([])
    var callsInFlightUnixSocket = Figure([])
    /// The same calls from tasks on the default executor, over TCP.
    var callsInFlightDefaultExecutor = Figure([])
    /// 64 pings pipelined per batch by a client of the protocol alone, as PostgreSQL's are.
    var callsPipelined = Figure([])
    var callsPipelinedUnixSocket = Figure([])
    /// Pings one at a time from that client (``ProtocolPinger``), over TCP and the Unix socket.
    var pingProtocolClient = Figure([])
    var pingProtocolClientUnixSocket = Figure([])
    /// The peer's pings and pipelined pings, measured in the same rounds (nil without a peer).
    var peerPingTCP: Figure?
    var peerPingUnixSocket: Figure?
    var peerPipelinedTCP: Figure?
    var peerPipelinedUnixSocket: Figure?
    var batchedIngest = Figure([])
    var serverResidentMiB: [Double]?
    var concurrentSaves = Figure([])
    /// Saves from a task preferring the store's executor.
    var sequentialSaves = Figure([])
    /// The same saves from a task on the default executor, in alternate rounds.
    var sequentialSavesDefaultExecutor = Figure([])
    var hourlyAverage = Figure([])
    var dailyMergedSteps = Figure([])
    /// The merged daily step sums, for the peers' check that they did the same work.
    var dailySums: [Double] = []
    /// The steps' sources, highest priority first.
    var sourcePriority: [String] = []
    var anchoredPage = Figure([])
    var anchoredPageDeniedApp = Figure([])
    /// The soak: the server's anonymous memory (MiB) read once a second, and what was saved.
    var soakAnonymousMiB: [Double] = []
    var soakSamples = 0
    var soakSeconds = 0.0
}

/// The TARGETS scenarios against `healthledgerd` running as its own process, through the SDK.
final class RPCScenarios: Sendable {
    static let ingestLedger = "ingest"
    static let statisticsLedger = "statistics"
    static let pagesLedger = "pages"
    static let soakLedger = "soak"
    static let app = Source(bundleIdentifier: "com.example.bench", name: "Bench")

    let server: ServerProcess
    /// The server's Unix domain socket (`--unix-socket`).
    let unixSocket: String
    let workload: Workload
    /// Owner credentials by ledger id, and the app's on the pages ledger.
    let owners: [String: String]
    let appCredential: String

    private init(server: ServerProcess, unixSocket: String, workload: Workload, owners: [String: String], appCredential: String) {
        self.server = server
        self.unixSocket = unixSocket
        self.workload = workload
        self.owners = owners
        self.appCredential = appCredential
    }

    /// Bootstraps an operator credential on a new data directory, starts the server on it and
    /// creates the ledgers and credentials through the operator's RPCs.
    static func start(executable: URL, dataDirectory: URL, workload: Workload) async throws -> RPCScenarios {
        let operatorCredential = try LedgerStore(directory: dataDirectory, configuration: BenchEncryption.configuration()).issueOperatorCredential(label: "bench")
        let unixSocket = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-bench-\(UUID().uuidString.prefix(8)).sock").path
        let server = try ServerProcess(executable: executable, dataDirectory: dataDirectory, arguments: ["--unix-socket", unixSocket])
        print("== healthledgerd (pid \(server.processIdentifier)) listening on port \(server.port) and on \(unixSocket)")
        let operatorClient = HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: operatorCredential))
        var owners: [String: String] = [:]
        for id in [ingestLedger, statisticsLedger, pagesLedger, soakLedger] {
            _ = try await operatorClient.createLedger(id: id)
            owners[id] = try await operatorClient.issueCredential(ledger: id, for: .owner, label: "bench")
        }
        let appCredential = try await operatorClient.issueCredential(ledger: pagesLedger, for: .app(app), label: "bench")
        await operatorClient.close()
        return RPCScenarios(server: server, unixSocket: unixSocket, workload: workload, owners: owners, appCredential: appCredential)
    }

    func stop() async { server.stop() }

    private func client(_ ledger: String) -> HealthStore {
        HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: owners[ledger]!))
    }

    /// A client of `ledger` over the server's Unix domain socket.
    private func localClient(_ ledger: String) -> HealthStore {
        HealthStore(configuration: HealthStoreConfiguration(host: "unix:\(unixSocket)", credential: owners[ledger]!))
    }

    /// Runs each of `measurements` once per round, each round starting one further along the
    /// list and every other round going through it backwards, so that none is always first or
    /// always after the same one (what ran just before can leave a CPU awake or asleep).
    private static func inTurns(_ rounds: Int, _ measurements: [() async throws -> Void]) async throws {
        for round in 0..<rounds {
            let order = measurements.indices.map { measurements[(round + $0) % measurements.count] }
            for measurement in round.isMultiple(of: 2) ? order : order.reversed() { try await measurement() }
        }
    }

    /// - Parameter peerConnections: a peer's connections over TCP and its Unix socket, whose
    ///   pings and pipelined pings are measured in the same rounds as HealthLedger's.
    func run(_ plan: Plan, peerConnections: PeerPingConnections? = nil) async throws -> HealthLedgerFigures {
        var figures = HealthLedgerFigures()
        let clock = ContinuousClock()
        let workload = self.workload
        let client = client(Self.ingestLedger)
        _ = try await client.ping()
        let local = localClient(Self.ingestLedger)
        defer { Task { await local.close() } }
        _ = try await local.ping()

        // Unary pings, one after another on one connection, and 64 pings pipelined per batch:
        // through the SDK, from a client of the protocol alone on a blocking socket, and from
        // the peer's own client (PostgreSQL's libpq) when one is given, each over TCP and over
        // the Unix socket, all in the same rounds (``inTurns(_:_:)``). A ping's time on this
        // host is mostly the wake-up of an idle CPU, which swings with whatever else runs: only
        // figures taken in the same minutes compare.
        let credential = owners[Self.ingestLedger]!
        func pingers() throws -> (tcp: ProtocolPinger, unix: ProtocolPinger) {
            (try ProtocolPinger(tcpPort: server.port, credential: credential), try ProtocolPinger(unixSocket: unixSocket, credential: credential))
        }
        if plan.wants("ping") {
            let pingers = try pingers()
            var sdk: (p50: [Double], p99: [Double], unix: [Double], defaultExecutor: [Double]) = ([], [], [], [])
            var plain: (tcp: [Double], unix: [Double]) = ([], [])
            var peer: (tcp: [Double], unix: [Double]) = ([], [])
            func pings(_ client: HealthStore) async throws -> [Double] {
                var times: [Double] = []
                for _ in 0..<plan.pings {
                    let started = clock.now
                    _ = try await client.ping()
                    times.append(seconds(clock.now - started) * 1e6)
                }
                return times.sorted()
            }
            func p50(_ ping: () throws -> Void) throws -> Double {
                var times: [Double] = []
                for _ in 0..<plan.pings {
                    let started = clock.now
                    try ping()
                    times.append(seconds(clock.now - started) * 1e6)
                }
                return percentile(times.sorted(), 0.5)
            }
            var turns: [() async throws -> Void] = [
                {
                    let times = try await withTaskExecutorPreference(client.executor) { try await pings(client) }
                    sdk.p50.append(percentile(times, 0.5))
                    sdk.p99.append(percentile(times, 0.99))
                },
                { sdk.unix.append(percentile(try await withTaskExecutorPreference(local.executor) { try await pings(local) }, 0.5)) },
                { sdk.defaultExecutor.append(percentile(try await pings(client), 0.5)) },
                { plain.tcp.append(try p50 { try pingers.tcp.ping() }) },
                { plain.unix.append(try p50 { try pingers.unix.ping() }) },
            ]
            if let peerConnections {
                turns.append { peer.tcp.append(try p50 { try peerConnections.tcp.ping() }) }
                turns.append { peer.unix.append(try p50 { try peerConnections.unixSocket.ping() }) }
            }
            try await Self.inTurns(plan.rounds, turns)
            figures.pingP50 = Figure(sdk.p50)
            figures.pingP99 = Figure(sdk.p99)
            figures.pingP50DefaultExecutor = Figure(sdk.defaultExecutor)
            figures.pingUnixSocketP50 = Figure(sdk.unix)
            figures.pingProtocolClient = Figure(plain.tcp)
            figures.pingProtocolClientUnixSocket = Figure(plain.unix)
            if !peer.tcp.isEmpty {
                figures.peerPingTCP = Figure(peer.tcp)
                figures.peerPingUnixSocket = Figure(peer.unix)
            }
        }
        // 64 calls in flight on the one connection: through the SDK, and pipelined by the
        // protocol's client and the peer's, over TCP and the Unix socket, in the same rounds.
        if plan.wants("calls") {
            let pingers = try pingers()
            var rates: (tcp: [Double], unix: [Double], defaultExecutor: [Double]) = ([], [], [])
            var pipelined: (tcp: [Double], unix: [Double]) = ([], [])
            var peer: (tcp: [Double], unix: [Double]) = ([], [])
            /// 64 tasks calling at once, each preferring the store's executor (as the pings
            /// do), or on the default executor.
            func inFlight(_ client: HealthStore, preferringItsExecutor: Bool = true) async throws -> Double {
                let next = Counter()
                let total = plan.callsInFlight
                let started = clock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<64 {
                        group.addTask(executorPreference: preferringItsExecutor ? client.executor : nil) {
                            while next.take(below: total) != nil { _ = try await client.ping() }
                        }
                    }
                    try await group.waitForAll()
                }
                return Double(total) / seconds(clock.now - started)
            }
            /// Calls per second of `plan.callsInFlight` pings sent 64 per batch.
            func pipelinedRate(_ batch: (Int) throws -> Void) throws -> Double {
                let started = clock.now
                var done = 0
                while done < plan.callsInFlight {
                    let count = min(64, plan.callsInFlight - done)
                    try batch(count)
                    done += count
                }
                return Double(plan.callsInFlight) / seconds(clock.now - started)
            }
            var turns: [() async throws -> Void] = [
                { rates.tcp.append(try await inFlight(client)) },
                { rates.unix.append(try await inFlight(local)) },
                { rates.defaultExecutor.append(try await inFlight(client, preferringItsExecutor: false)) },
                { pipelined.tcp.append(try pipelinedRate { try pingers.tcp.ping($0) }) },
                { pipelined.unix.append(try pipelinedRate { try pingers.unix.ping($0) }) },
            ]
            if let peerConnections {
                turns.append { peer.tcp.append(try pipelinedRate { try peerConnections.tcp.pipelinedPings($0) }) }
                turns.append { peer.unix.append(try pipelinedRate { try peerConnections.unixSocket.pipelinedPings($0) }) }
            }
            try await Self.inTurns(plan.rounds, turns)
            figures.callsInFlight = Figure(rates.tcp)
            figures.callsInFlightDefaultExecutor = Figure(rates.defaultExecutor)
            figures.callsInFlightUnixSocket = Figure(rates.unix)
            figures.callsPipelined = Figure(pipelined.tcp)
            figures.callsPipelinedUnixSocket = Figure(pipelined.unix)
            if !peer.tcp.isEmpty {
                figures.peerPipelinedTCP = Figure(peer.tcp)
                figures.peerPipelinedUnixSocket = Figure(peer.unix)
            }
        }
        if plan.wants("ingest") {
            // Batched durable ingest: 1,000 samples per call, 4 calls in flight.
            var rates: [Double] = []
            var resident: [Double] = []
            let workload = self.workload
            for round in 0..<plan.rounds {
                let first = round * plan.ingestPerRound
                let started = clock.now
                try await pipelinedBatches(count: plan.ingestPerRound) { range in
                    _ = try await client.save(range.map { workload.ingest(first + $0).object })
                }
                rates.append(Double(plan.ingestPerRound) / seconds(clock.now - started))
                resident.append(Double(residentKiB(of: server.processIdentifier).now) / 1024)
            }
            figures.batchedIngest = Figure(rates)
            figures.serverResidentMiB = resident
        }
        if plan.wants("concurrent") {
            // 64 clients, each on its own connection, saving one sample per call.
            let clients = (0..<64).map { _ in self.client(Self.ingestLedger) }
            for store in clients { _ = try await store.ping() }
            var rates: [Double] = []
            var base = 50_000_000
            for _ in 0..<plan.rounds {
                let total = plan.concurrentSaves
                let next = Counter()
                let first = base
                let started = clock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in clients {
                        group.addTask { while let index = next.take(below: total) { _ = try await store.save(workload.ingest(first + index).object) } }
                    }
                    try await group.waitForAll()
                }
                base += total
                rates.append(Double(total) / seconds(clock.now - started))
            }
            for store in clients { await store.close() }
            figures.concurrentSaves = Figure(rates)
        }
        if plan.wants("sequential") {
            // One client, one durable save after another: each round from a task preferring
            // the store's executor, then from one on the default executor.
            var rates: [Double] = []
            var defaultRates: [Double] = []
            var base = 60_000_000
            func saves() async throws -> Double {
                let started = clock.now
                for index in 0..<plan.sequentialSaves { _ = try await client.save(workload.ingest(base + index).object) }
                base += plan.sequentialSaves
                return Double(plan.sequentialSaves) / seconds(clock.now - started)
            }
            for _ in 0..<plan.rounds {
                rates.append(try await withTaskExecutorPreference(client.executor) { try await saves() })
                defaultRates.append(try await saves())
            }
            figures.sequentialSaves = Figure(rates)
            figures.sequentialSavesDefaultExecutor = Figure(defaultRates)
        }
        await client.close()

        if plan.wants("statistics") { try await statistics(plan, into: &figures) }
        if plan.wants("pages") { try await anchoredPages(plan, into: &figures) }
        if plan.wants("soak") { try await soak(plan, into: &figures) }
        // Not a TARGETS row: run when named (`--only reads`), to weigh the access records.
        if plan.only?.contains("reads") == true { try await reads(plan) }
        return figures
    }

    /// The memory soak, after every other scenario: the batched ingest (1,000 samples per call,
    /// 4 in flight) paced to `plan.soakRate` samples a second into a ledger of its own for
    /// `plan.soakSeconds`, with the server's `RssAnon` (its heap and stacks, not the pages of
    /// the mapped ledger) read once a second. Paced, because ten minutes at full speed would
    /// write some 150 million samples: more disk than the machine has.
    private func soak(_ plan: Plan, into figures: inout HealthLedgerFigures) async throws {
        let store = client(Self.soakLedger)
        let workload = self.workload
        let clock = ContinuousClock()
        let started = clock.now
        var readings: [Double] = []
        var saved = 0
        for second in 0..<plan.soakSeconds {
            let first = 100_000_000 + saved
            try await pipelinedBatches(count: plan.soakRate) { range in
                _ = try await store.save(range.map { workload.ingest(first + $0).object })
            }
            saved += plan.soakRate
            let due = started + .seconds(second + 1)
            if clock.now < due { try await Task.sleep(until: due, clock: clock) }
            readings.append(Double(ImportScenario.statusKiB("RssAnon:", of: server.processIdentifier)) / 1024)
        }
        figures.soakSeconds = seconds(clock.now - started)
        await store.close()
        figures.soakAnonymousMiB = readings
        figures.soakSamples = saved
    }

    /// A read-heavy load: 64 clients, each on its own connection, asking for one hour of
    /// per-minute heart rates (60 samples) of a day, as fast as they are answered.
    private func reads(_ plan: Plan) async throws {
        let loader = client(Self.pagesLedger)
        let workload = self.workload
        let minutes = 24 * 60
        try await load(loader, count: minutes) { workload.minuteOfYear($0).object }
        await loader.close()
        let clients = (0..<64).map { _ in self.client(Self.pagesLedger) }
        for store in clients { _ = try await store.ping() }
        let type = workload.minuteOfYear(0).object.objectType
        let start = workload.minuteOfYear(0).object.startDate
        let clock = ContinuousClock()
        var rates: [Double] = []
        for round in 0..<plan.rounds {
            let next = Counter()
            let total = 20_000
            let started = clock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in clients {
                    group.addTask {
                        while let index = next.take(below: total) {
                            let hour = DateInterval(start: start.addingTimeInterval(Double(index % 24) * 3_600), duration: 3_600)
                            let found = try await SampleQueryDescriptor(type: type, interval: hour).result(for: store)
                            guard found.count == 60 else { throw BenchFailure("an hour's query found \(found.count) samples, not 60") }
                        }
                    }
                }
                try await group.waitForAll()
            }
            rates.append(Double(total) / seconds(clock.now - started))
            print("  reads round \(round + 1): \(Int(rates.last!)) queries/s")
        }
        for store in clients { await store.close() }
        print("RESULT 64 clients querying (one hour, 60 samples, each): median \(Int(Figure(rates).median)) queries/s")
    }

    /// Loads `count` objects in batches of 1,000, 4 calls in flight.
    private func load(_ store: HealthStore, count: Int, _ object: @escaping @Sendable (Int) -> HealthObject) async throws {
        try await pipelinedBatches(count: count) { range in _ = try await store.save(range.map(object)) }
    }

    /// The statistics collections: hourly average heart rate over the year's per-minute
    /// samples; daily step sums from three overlapping sources, merged by priority.
    private func statistics(_ plan: Plan, into figures: inout HealthLedgerFigures) async throws {
        let store = client(Self.statisticsLedger)
        let workload = self.workload
        try await load(store, count: workload.minutes) { workload.minuteOfYear($0).object }
        for source in 0..<3 {
            try await load(store, count: workload.stepsPerSource) { workload.steps(source: source, $0).object }
        }
        figures.sourcePriority = try await store.sourcePriority(for: workload.steps.objectType).map(\.bundleIdentifier)
        let clock = ContinuousClock()
        var hourly: [Double] = []
        var daily: [Double] = []
        for _ in 0..<max(plan.rounds, 3) {
            var started = clock.now
            let averages = try await store.statisticsCollection(for: Self.hourly(workload))
            hourly.append(seconds(clock.now - started) * 1e3)
            guard averages.statistics.count == workload.days * 24 else { throw BenchFailure("hourly averages: \(averages.statistics.count) intervals") }
            started = clock.now
            let sums = try await store.statisticsCollection(for: Self.daily(workload))
            daily.append(seconds(clock.now - started) * 1e3)
            guard sums.statistics.count == workload.days else { throw BenchFailure("daily sums: \(sums.statistics.count) intervals") }
            figures.dailySums = sums.statistics.map { $0.sumQuantity()?.value ?? 0 }
        }
        await store.close()
        figures.hourlyAverage = Figure(hourly)
        figures.dailyMergedSteps = Figure(daily)
    }

    static func hourly(_ workload: Workload) throws -> StatisticsCollectionQueryDescriptor {
        StatisticsCollectionQueryDescriptor(
            type: workload.heartRate, range: workload.year,
            intervals: try StatisticsIntervals(anchor: workload.year.start, every: 1, .hour, timeZone: TimeZone(identifier: "UTC")!), options: .discreteAverage)
    }

    static func daily(_ workload: Workload) throws -> StatisticsCollectionQueryDescriptor {
        StatisticsCollectionQueryDescriptor(
            type: workload.steps, range: workload.year,
            intervals: try StatisticsIntervals(anchor: workload.year.start, every: 1, .day, timeZone: TimeZone(identifier: "UTC")!), options: .cumulativeSum)
    }

    /// Anchored pages of 1,000 changes, walked from the beginning: the owner's (every source's
    /// changes) and a read-denied app's (its own, interleaved with ten times as many of others').
    private func anchoredPages(_ plan: Plan, into figures: inout HealthLedgerFigures) async throws {
        let owner = client(Self.pagesLedger)
        let app = HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: appCredential))
        let type = workload.restingHeartRate.objectType
        _ = try await app.requestAuthorization(toShare: [type], read: [type])
        try await owner.decideAuthorization(app: Self.app.bundleIdentifier, type: type, direction: .share, decision: .granted)
        try await owner.decideAuthorization(app: Self.app.bundleIdentifier, type: type, direction: .read, decision: .denied)
        // 10 owner batches for each app batch, so the app's changes are spread through the log.
        let workload = self.workload
        for batch in 0..<plan.pageSamples / 1000 {
            _ = try await (batch % 11 == 10 ? app : owner).save((0..<1000).map { workload.resting(batch * 1000 + $0).object })
        }
        let clock = ContinuousClock()
        func walk(_ store: HealthStore, pages: Int) async throws -> Double {
            var anchor: QueryAnchor?
            var times: [Double] = []
            for _ in 0..<pages {
                let started = clock.now
                let page = try await store.result(for: AnchoredObjectQueryDescriptor(type: type, anchor: anchor, limit: 1000, batchSize: 1000))
                times.append(seconds(clock.now - started) * 1e3)
                guard page.addedObjects.count + page.deletedObjects.count == 1000 else { throw BenchFailure("a short page") }
                anchor = page.newAnchor
            }
            return percentile(times.sorted(), 0.5)
        }
        var ownerP50s: [Double] = []
        var appP50s: [Double] = []
        for _ in 0..<plan.rounds {
            ownerP50s.append(try await walk(owner, pages: plan.ownerPages))
            appP50s.append(try await walk(app, pages: plan.pageSamples / 11_000))
        }
        await owner.close()
        await app.close()
        figures.anchoredPage = Figure(ownerP50s)
        figures.anchoredPageDeniedApp = Figure(appP50s)
    }
}

/// A peer's connections for the pings measured beside HealthLedger's: over TCP loopback and
/// over its Unix socket.
struct PeerPingConnections {
    let tcp: any PipelinedPeerConnection
    let unixSocket: any PipelinedPeerConnection
}
