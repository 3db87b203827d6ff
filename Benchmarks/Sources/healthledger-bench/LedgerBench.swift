import ArgumentParser
import Foundation
import HealthModel
import Ledger
import Synchronization

/// `healthledger-bench ledger`: the ledger library alone, in this process (no RPC), each
/// figure quoted next to the raw LMDB reference measured in the same run; and the scenarios
/// that have no peer: a read-denied app's reads, predicate queries, the verifiable history.
struct LedgerBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "The ledger in process: ingest, group commit, replay, verify, denied reads, predicates, history (against raw LMDB).")

    @Option(help: "Samples to ingest in the batched scenario (heart rate, or the types of --types).") var samples = 1_000_000
    @Option(name: .customLong("batch-size"), help: "Samples per durable save.") var batchSize = 1000
    @Option(help: "Concurrent tasks saving single samples.") var concurrency = 64
    @Option(help: "Batches in flight at once in the batched ingest (an ingest pipeline keeps several).") var pipeline = 4
    @Flag(name: .customLong("random-uuids"), help: "Give samples random (v4) UUIDs instead of the default time-ordered (v7) ones.")
    var randomUUIDs = false
    @Option(help: """
        Quantity types the samples cycle through, one after another in time order, as an export's records interleave \
        them (1: heart rate alone; at most \(LedgerBenchCommand.mixedTypes.count)).
        """)
    var types = 1
    @Option(name: .customLong("concurrent-saves"), help: "Single-sample saves in the concurrent scenario.") var concurrentSaves = 20_000
    @Option(name: .customLong("sequential-saves"), help: "Single-sample saves by one client, one after another.") var sequentialSaves = 2_000
    @Option(help: "Rounds per scenario; medians are reported.") var rounds = 5
    @Option(name: .customLong("erase"), help: "erasure: samples to erase from the ingest ledger.") var erase = 10_000
    @Option(help: "The reference script (raw LMDB and TCP limits).") var limits = "../shared/tools/limits.sh"
    @Option(name: .customLong("work-dir"), help: "Scratch directory (default: a temporary one).") var workDirectory: String?
    @Option(name: .customLong("denied-own"), help: "denied-read: the app's own samples.") var deniedOwn = 1_000
    @Option(name: .customLong("denied-others"), help: "denied-read: other sources' samples next to them.") var deniedOthers = 1_000_000
    @Option(help: """
        Scenarios to run, comma-separated: ingest, concurrent, sequential, replay (needs ingest), denied-read, predicates, history, \
        erasure (needs ingest; not run by default: it changes the ingest ledger).
        """)
    var only = "ingest,concurrent,sequential,replay,denied-read,predicates,history"
    @Flag(help: "Encrypt the ledgers at rest (a master key made for the run), to compare with a run without.") var encrypted = false

    /// The types `--types` cycles through, each with a unit its values (50–169) fit.
    static let mixedTypes: [(type: String, unit: String)] = [
        ("HKQuantityTypeIdentifierHeartRate", "count/min"), ("HKQuantityTypeIdentifierStepCount", "count"),
        ("HKQuantityTypeIdentifierActiveEnergyBurned", "kcal"), ("HKQuantityTypeIdentifierDistanceWalkingRunning", "m"),
        ("HKQuantityTypeIdentifierBasalEnergyBurned", "kcal"), ("HKQuantityTypeIdentifierRespiratoryRate", "count/min"),
        ("HKQuantityTypeIdentifierHeartRateVariabilitySDNN", "ms"), ("HKQuantityTypeIdentifierFlightsClimbed", "count"),
    ]

    private func wants(_ scenario: String) -> Bool { only.split(separator: ",").contains { $0 == scenario } }

    func run() async throws {
        let scratch = URL(filePath: workDirectory ?? NSTemporaryDirectory(), directoryHint: .isDirectory)
            .appending(path: "healthledger-bench-\(UUID().uuidString)", directoryHint: .isDirectory)
        defer { try? FileManager.default.removeItem(at: scratch) }
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        if encrypted { try BenchEncryption.enable(in: scratch) }
        let store = try LedgerStore(directory: scratch, configuration: BenchEncryption.configuration())

        print("== reference: \(limits)")
        let reference = limits.isEmpty ? Reference(output: "") : Reference.measure(script: limits)
        print(reference.summary)

        guard (1...Self.mixedTypes.count).contains(types) else { throw ValidationError("--types takes 1 to \(Self.mixedTypes.count)") }
        let kinds = try Self.mixedTypes.prefix(types).map { (try QuantityType($0.type), try HealthUnit($0.unit)) }
        let clock = ContinuousClock()
        let randomUUIDs = self.randomUUIDs
        @Sendable func sample(_ index: Int) -> HealthObject {
            let date = Date(timeIntervalSince1970: 1_600_000_000 + Double(index) * 60)
            let (type, unit) = kinds[index % kinds.count]
            return .quantitySample(QuantitySample(
                type: type, quantity: Quantity(Double(50 + index % 120), unit), start: date, end: date,
                uuid: randomUUIDs ? .random() : .timeOrdered()))
        }

        // 1. Batched durable ingest.
        let ingest = try store.createLedger(id: "ingest")
        if wants("ingest") {
        let perRound = max(samples / rounds, batchSize)
        var ingestRates: [Double] = []
        var written = 0
        for round in 0..<rounds {
            let started = clock.now
            let next = Counter()
            let batches = (perRound + batchSize - 1) / batchSize
            let (size, first, total) = (batchSize, written, perRound)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<pipeline {
                    group.addTask {
                        while let batch = next.take(below: batches) {
                            let start = batch * size
                            let count = min(size, total - start)
                            _ = try await ingest.save((0..<count).map { sample(first + start + $0) }, by: .owner)
                        }
                    }
                }
                try await group.waitForAll()
            }
            written += perRound
            let rate = Double(perRound) / seconds(clock.now - started)
            ingestRates.append(rate)
            print("  ingest round \(round + 1): \(Int(rate)) samples/s")
        }
        report("batched ingest (\(batchSize)/save, durable, \(pipeline) in flight)", median(ingestRates), "samples/s", reference.batchedAppends, "raw LMDB 1000/commit")
        }

        // 2. Concurrent single-sample saves (group commit).
        if wants("concurrent") {
        let concurrent = try store.createLedger(id: "concurrent")
        var concurrentRates: [Double] = []
        for round in 0..<rounds {
            let next = Counter()
            let saves = concurrentSaves
            let base = round * concurrentSaves
            let started = clock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<concurrency {
                    group.addTask {
                        while true {
                            guard let index = next.take(below: saves) else { return }
                            _ = try await concurrent.save([sample(base + index)], by: .owner)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let rate = Double(concurrentSaves) / seconds(clock.now - started)
            concurrentRates.append(rate)
            print("  concurrent round \(round + 1): \(Int(rate)) saves/s")
        }
        report("\(concurrency) tasks, single-sample saves", median(concurrentRates), "saves/s", reference.singleCommits, "raw LMDB 1/commit")
        }

        // 3. One client, sequential single-sample saves.
        if wants("sequential") {
        let sequential = try store.createLedger(id: "sequential")
        var sequentialRates: [Double] = []
        for round in 0..<rounds {
            let started = clock.now
            for index in 0..<sequentialSaves {
                _ = try await sequential.save([sample(round * sequentialSaves + index)], by: .owner)
            }
            sequentialRates.append(Double(sequentialSaves) / seconds(clock.now - started))
        }
        report("1 client, sequential single saves", median(sequentialRates), "saves/s", reference.singleCommits, "raw LMDB 1/commit")
        }

        // 4. Replay and verify of the ingest ledger.
        if wants("replay") {
        var replayRates: [Double] = []
        var verifyRates: [Double] = []
        for _ in 0..<max(1, rounds / 2) {
            let replayed = try ingest.replay()
            guard replayed.identical else { throw BenchFailure("replay differs from the live projections") }
            replayRates.append(Double(replayed.events) / seconds(replayed.rebuildDuration))
            let verified = try ingest.verify()
            guard verified.isValid else { throw BenchFailure("verify failed: \(verified.problem!)") }
            verifyRates.append(Double(verified.eventsChecked) / seconds(verified.duration))
        }
        report("replay (rebuild all projections; digest comparison not timed)", median(replayRates), "events/s", reference.scan, "raw LMDB cursor scan")
        report("verify (hash chain)", median(verifyRates), "events/s", reference.scan, "raw LMDB cursor scan")
        }

        // 4b. Erasure of part of the ingest ledger, online.
        if wants("erasure") {
            try await ErasureBench(ledger: ingest, count: erase, sample: sample).run()
        }

        // 5. A read-denied app's reads: their cost must not depend on others' data.
        if wants("denied-read") {
            try await PrivacyBench(store: store, rounds: rounds, own: deniedOwn, others: deniedOthers).run()
        }

        // 6. Predicate queries among a million samples, against the same queries without one.
        if wants("predicates") {
            try await PredicateBench(store: store, rounds: rounds, samples: samples).run()
        }

        // 7. The verifiable history: the Merkle tree's cost, proofs, point-in-time views.
        if wants("history") {
            try await HistoryBench(store: store, rounds: rounds, samples: samples, batchSize: batchSize, pipeline: pipeline, sample: sample).run()
        }

    }

    private func report(_ name: String, _ value: Double, _ unit: String, _ reference: Double?, _ referenceName: String) {
        var line = "RESULT \(name): median \(Int(value)) \(unit)"
        if let reference, reference > 0 {
            line += String(format: " | %@ %d/s | ratio %.3f", referenceName, Int(reference), value / reference)
        }
        print(line)
    }
}
