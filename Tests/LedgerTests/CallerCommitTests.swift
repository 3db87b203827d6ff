import Dispatch
import Foundation
import HealthModel
import LedgerSchema
import Synchronization
import Testing

@testable import Ledger

/// Small saves committed on their submitter's own thread (the server's event loop, through a
/// ``CallerExecutor``) when the committer is idle, and handed to the committing queue when
/// anything else comes first (docs/LEDGER.md, "Writes").
struct CallerCommitTests {
    /// Keeps the work a committer hands to "the caller's thread" until the test runs it.
    final class HeldWork: Sendable {
        private let work = Mutex<[@Sendable () -> Void]>([])

        var executor: CallerExecutor { { work in self.work.withLock { $0.append(work) } } }

        /// Runs what was handed over, on the test's thread; how many pieces there were.
        func run() -> Int {
            let items = work.withLock { work in
                defer { work = [] }
                return work
            }
            for item in items { item() }
            return items.count
        }
    }

    /// Answers of saves, by their index.
    final class Answers: Sendable {
        private let results = Mutex<[Int: Bool]>([:])
        func record(_ index: Int, _ result: Result<[SaveResult], any Error>) { results.withLock { $0[index] = (try? result.get()) != nil } }
        var succeeded: [Int] { results.withLock { $0.filter(\.value).keys.sorted() } }
        var count: Int { results.withLock { $0.count } }
    }

    static func sample(_ index: Int) -> [ReceivedObject] { [ReceivedObject(object: Fixtures.heartRate(Double(60 + index), at: Double(index)))] }

    @Test("saves for an idle committer wait for their caller's thread, then commit there in one transaction, each answered before the work returns")
    func committedOnTheCallersThread() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "caller")
        let held = HeldWork()
        let answers = Answers()
        let start = try ledger.head().sequence
        for index in 0..<3 {
            ledger.save(received: Self.sample(index), by: .owner, committingOn: held.executor) { answers.record(index, $0) }
        }
        // Only the first found the committer idle; nothing is committed until its thread runs the work.
        #expect(answers.count == 0)
        #expect(try ledger.head().sequence == start)
        #expect(held.run() == 1)
        #expect(answers.succeeded == [0, 1, 2])
        #expect(try ledger.head().sequence == start + 3)
        // Idle again: the next save hands its thread work again.
        ledger.save(received: Self.sample(3), by: .owner, committingOn: held.executor) { answers.record(3, $0) }
        #expect(held.run() == 1)
        #expect(answers.succeeded == [0, 1, 2, 3])
        #expect(try ledger.replay().identical)
    }

    @Test("a write submitted any other way while small saves wait takes them all to the queue; the caller's work then finds nothing to do")
    func theQueueTakesOver() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "takeover")
        let held = HeldWork()
        let answers = Answers()
        ledger.save(received: Self.sample(0), by: .owner, committingOn: held.executor) { answers.record(0, $0) }
        // A save through the task API (no executor): the queue commits both, in order.
        _ = try await ledger.save([Fixtures.heartRate(99, at: 500)], by: .owner)
        #expect(answers.succeeded == [0])
        #expect(held.run() == 1)
        #expect(answers.count == 1)
        #expect(try ledger.replay().identical)
    }

    @Test("while an exclusive body holds the committer's turn, the caller's thread leaves its saves to the queue, which commits them after the body")
    func exclusiveBodiesComeFirst() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "exclusive")
        let held = HeldWork()
        let answers = Answers()
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let body = Task {
            try await ledger.committer.exclusive {
                entered.signal()
                release.wait()
                return answers.count
            }
        }
        await Task.detached { entered.wait() }.value
        ledger.save(received: Self.sample(0), by: .owner, committingOn: held.executor) { answers.record(0, $0) }
        #expect(held.run() == 1)
        #expect(answers.count == 0)
        release.signal()
        // The body saw no answer: the save waited for it.
        #expect(try await body.value == 0)
        // The queue commits it (a save after it is committed in the same drain or the next).
        _ = try await ledger.save([Fixtures.heartRate(99, at: 500)], by: .owner)
        #expect(answers.succeeded == [0])
        #expect(try ledger.replay().identical)
    }
}
