import Foundation
import HealthModel
import Ledger

/// `healthledger-bench ledger --only history`: what the verifiable history costs on a ledger of
/// `samples` events. Batched ingest with the Merkle tree against the same ingest without it
/// (rounds alternate, so both see the same machine); tree-head signing, inclusion and
/// consistency proofs (median time and size); a point-in-time view at the middle of the
/// log against a full replay.
struct HistoryBench {
    let store: LedgerStore
    let rounds: Int
    let samples: Int
    let batchSize: Int
    let pipeline: Int
    let sample: @Sendable (Int) -> HealthObject

    func run() async throws {
        let plainStore = try LedgerStore(directory: store.directory.appending(path: "without-tree"), configuration: {
            var configuration = LedgerConfiguration()
            configuration.maintainsMerkleTree = false
            return configuration
        }())
        let withTree = try store.createLedger(id: "history")
        let withoutTree = try plainStore.createLedger(id: "history")
        let perRound = max(samples / rounds, batchSize)
        var rates: (with: [Double], without: [Double]) = ([], [])
        var written = 0
        for round in 0..<rounds {
            // Alternate which goes first.
            for ledger in round % 2 == 0 ? [withTree, withoutTree] : [withoutTree, withTree] {
                let rate = try await ingest(ledger, first: written, count: perRound)
                if ledger === withTree { rates.with.append(rate) } else { rates.without.append(rate) }
            }
            written += perRound
            print(String(format: "  history round %d: %d samples/s with the tree, %d without", round + 1, Int(rates.with.last!), Int(rates.without.last!)))
        }
        let ratio = median(rates.without) / median(rates.with)
        print(String(format: "RESULT batched ingest with the Merkle tree: median %d samples/s | without it %d/s | cost ratio %.3f (target ≤ 1.10)",
            Int(median(rates.with)), Int(median(rates.without)), ratio))

        let clock = ContinuousClock()
        let size = try withTree.head().sequence
        var generator = SystemRandomNumberGenerator()
        func timed<T>(_ count: Int, _ body: () throws -> T) rethrows -> (Double, T) {
            var times: [Double] = []
            var last: T?
            for _ in 0..<count {
                let started = clock.now
                last = try body()
                times.append(seconds(clock.now - started) * 1e6)
            }
            return (median(times), last!)
        }
        let (signing, head) = try timed(200) { try withTree.signedTreeHead(as: .owner) }
        print(String(format: "RESULT signed tree head of %d events: median %.1f µs", size, signing))
        var inclusionSizes: [Int] = []
        let (inclusion, _) = try timed(1_000) { () -> InclusionProof in
            let proof = try withTree.inclusionProof(sequence: UInt64.random(in: 1...size, using: &generator), as: .owner)
            inclusionSizes.append(proof.path.count * 32)
            return proof
        }
        var consistencySizes: [Int] = []
        let (consistency, _) = try timed(1_000) { () -> ConsistencyProof in
            let proof = try withTree.consistencyProof(from: UInt64.random(in: 1...size, using: &generator), as: .owner)
            consistencySizes.append(proof.path.count * 32)
            return proof
        }
        print(String(format: "RESULT inclusion proof in %d events: median %.1f µs, median %d bytes (%d hashes)", size, inclusion,
            Int(median(inclusionSizes.map(Double.init))), Int(median(inclusionSizes.map(Double.init))) / 32))
        print(String(format: "RESULT consistency proof to %d events: median %.1f µs, median %d bytes (%d hashes)", size, consistency,
            Int(median(consistencySizes.map(Double.init))), Int(median(consistencySizes.map(Double.init))) / 32))
        _ = head

        var views: [Double] = []
        var replays: [Double] = []
        for round in 0..<max(1, rounds / 2) {
            let target = store.directory.appending(path: "view-\(round)")
            let started = clock.now
            try withTree.materialize(upTo: size / 2, at: target)
            views.append(seconds(clock.now - started))
            try? FileManager.default.removeItem(at: target)
            let replay = try withTree.replay()
            replays.append(seconds(replay.rebuildDuration))
        }
        print(String(format: "RESULT point-in-time view at event %d of %d: median %.2f s | full replay (rebuild) %.2f s | ratio %.2f",
            size / 2, size, median(views), median(replays), median(views) / median(replays)))
    }

    private func ingest(_ ledger: Ledger, first: Int, count: Int) async throws -> Double {
        let clock = ContinuousClock()
        let started = clock.now
        let next = Counter()
        let batches = (count + batchSize - 1) / batchSize
        let (size, sample) = (batchSize, self.sample)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<pipeline {
                group.addTask {
                    while let batch = next.take(below: batches) {
                        let start = batch * size
                        _ = try await ledger.save((0..<min(size, count - start)).map { sample(first + start + $0) }, by: .owner)
                    }
                }
            }
            try await group.waitForAll()
        }
        return Double(count) / seconds(clock.now - started)
    }
}
