import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger

/// What a follower costs the primary's writers: two primaries as processes of their own, one
/// alone and one with a follower (`healthledgerd --follow`, semi-synchronous acknowledgement,
/// the default), measured in alternating rounds on the same host: one client's sequential
/// durable saves (saves/s and p50 latency), 64 clients' concurrent single saves, and batched
/// ingest (1,000 samples per save, 4 in flight). Each figure as a ratio to the single node.
struct ReplicationBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replication", abstract: "Semi-synchronous replication against a single node: sequential and concurrent saves, batched ingest.")

    @Option(help: "Rounds; each measures both servers, and medians are reported.") var rounds = 5
    @Option(name: .customLong("sequential-saves"), help: "One client's saves per round and server.") var sequentialSaves = 1_000
    @Option(name: .customLong("concurrent-saves"), help: "Single-sample saves by 64 clients per round and server.") var concurrentSaves = 10_000
    @Option(help: "Samples per round and server in the batched ingest.") var samples = 100_000
    @Option(help: "The folder holding a release build of healthledgerd.") var binaries = ".build/release"
    @Option(name: .customLong("acks"), help: "The replicated primary's --replication-acks: semi-sync or async.") var acknowledgement = "semi-sync"

    func run() async throws {
        let scratch = FileManager.default.temporaryDirectory.appending(path: "healthledger-replication-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let executable = URL(filePath: binaries).appending(path: "healthledgerd")

        // The single node, and the primary with its follower: the same ledger on each.
        var credentials: [String] = []
        var operators: [String] = []
        for name in ["single", "primary"] {
            let store = try LedgerStore(directory: scratch.appending(path: name))
            let ledger = try store.createLedger(id: "bench")
            credentials.append(try await ledger.issueCredential(for: .owner))
            operators.append(try store.issueOperatorCredential(label: "bench"))
        }
        let single = try ServerProcess(executable: executable, dataDirectory: scratch.appending(path: "single"))
        defer { single.stop() }
        let primary = try ServerProcess(
            executable: executable, dataDirectory: scratch.appending(path: "primary"), arguments: ["--replication-acks", acknowledgement])
        defer { primary.stop() }
        let credentialFile = scratch.appending(path: "operator")
        try operators[1].write(to: credentialFile, atomically: true, encoding: .utf8)
        let follower = try ServerProcess(
            executable: executable, dataDirectory: scratch.appending(path: "follower"),
            arguments: ["--follow", "127.0.0.1:\(primary.port)", "--follow-credential-file", credentialFile.path, "--node-name", "bench-follower"])
        defer { follower.stop() }
        print("== single node on port \(single.port); primary on \(primary.port) (--replication-acks \(acknowledgement)) with a follower on \(follower.port)")

        let stores = [
            HealthStore(configuration: .init(port: single.port, credential: credentials[0], timeout: .seconds(300))),
            HealthStore(configuration: .init(port: primary.port, credential: credentials[1], timeout: .seconds(300))),
        ]
        // The follower has the ledger (from a snapshot) and tails it before the rounds start.
        try await stores[1].save(Workload(days: 1).ingest(0).object)
        let reader = HealthStore(configuration: .init(port: follower.port, credential: credentials[1], timeout: .seconds(300)))
        for attempt in 0... {
            if (try? await reader.ping()) != nil { break }
            if attempt == 600 { throw BenchFailure("the follower never served the ledger") }
            try await Task.sleep(for: .milliseconds(100))
        }
        await reader.close()

        let workload = try Workload(days: 30)
        var figures = [Figures(), Figures()]
        var next = 1
        for round in 0..<rounds {
            for index in round.isMultiple(of: 2) ? [0, 1] : [1, 0] {
                let measured = try await measure(stores[index], workload: workload, first: next)
                next += sequentialSaves + concurrentSaves + samples
                figures[index].add(measured)
                print(
                    String(
                        format: "  round %d %@: sequential %.0f saves/s (p50 %.2f ms), 64 clients %.0f saves/s, ingest %.0f samples/s", round + 1,
                        index == 0 ? "single node" : "replicated ", measured.sequential, measured.sequentialP50, measured.concurrent, measured.ingest))
            }
        }
        for store in stores { await store.close() }
        func row(_ name: String, _ values: (Figures) -> [Double], unit: String, higherIsBetter: Bool = true, target: String) {
            let (alone, replicated) = (median(values(figures[0])), median(values(figures[1])))
            let ratio = higherIsBetter ? replicated / alone : alone / replicated
            print(String(format: "RESULT %@: single node %.2f %@, replicated %.2f %@ — ×%.2f of single node (%@)", name, alone, unit, replicated, unit, ratio, target))
        }
        row("one client's sequential durable saves", { $0.sequential }, unit: "saves/s", target: "at most one extra round trip")
        row("sequential save p50", { $0.sequentialP50 }, unit: "ms", higherIsBetter: false, target: "no target")
        row("64 clients' single saves", { $0.concurrent }, unit: "saves/s", target: "no target")
        row("batched ingest", { $0.ingest }, unit: "samples/s", target: "target ≥ ×0.8")
    }

    struct Round {
        var sequential: Double
        var sequentialP50: Double
        var concurrent: Double
        var ingest: Double
    }

    struct Figures {
        var sequential: [Double] = []
        var sequentialP50: [Double] = []
        var concurrent: [Double] = []
        var ingest: [Double] = []

        mutating func add(_ round: Round) {
            sequential.append(round.sequential)
            sequentialP50.append(round.sequentialP50)
            concurrent.append(round.concurrent)
            ingest.append(round.ingest)
        }
    }

    private func measure(_ store: HealthStore, workload: Workload, first: Int) async throws -> Round {
        let clock = ContinuousClock()
        var times: [Double] = []
        var started = clock.now
        for index in 0..<sequentialSaves {
            let one = clock.now
            try await store.save(workload.ingest(first + index).object)
            times.append(seconds(clock.now - one) * 1e3)
        }
        let sequential = Double(sequentialSaves) / seconds(clock.now - started)
        times.sort()
        let concurrentFirst = first + sequentialSaves
        let next = Counter()
        started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<64 {
                group.addTask {
                    while let index = next.take(below: concurrentSaves) { try await store.save(workload.ingest(concurrentFirst + index).object) }
                }
            }
            try await group.waitForAll()
        }
        let concurrent = Double(concurrentSaves) / seconds(clock.now - started)
        let ingestFirst = concurrentFirst + concurrentSaves
        started = clock.now
        try await pipelinedBatches(count: samples) { range in
            try await store.save(range.map { workload.ingest(ingestFirst + $0).object })
        }
        let ingest = Double(samples) / seconds(clock.now - started)
        return Round(sequential: sequential, sequentialP50: percentile(times, 0.5), concurrent: concurrent, ingest: ingest)
    }
}
