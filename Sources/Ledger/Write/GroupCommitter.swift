import Dispatch
import Foundation
import HealthModel
import LMDB
import Logging
import Synchronization

/// Schedules work on a submitter's own thread, after what that thread is doing now (an event
/// loop's `execute`): where a write committed for it may run (``Ledger/save(received:by:committingOn:completion:)``).
package typealias CommitDeferral = @Sendable (_ work: @escaping @Sendable () -> Void) -> Void

/// Coalesces concurrent write requests into one LMDB write transaction and one fsync.
///
/// Requests queue up while a commit is in progress; the next commit takes all of them.
/// They run one after another in the transaction. When one fails (a duplicate UUID, say),
/// the transaction is abandoned and the batch runs again with each request in its own
/// nested transaction, so the failing request is rolled back alone while the rest of the
/// batch commits (nesting costs, so only a batch that needs it pays for it). Nobody is
/// answered before the transaction holding their data is durable.
final class GroupCommitter: Sendable {
    private struct Pending: @unchecked Sendable {
        let run: (WriteContext) throws -> Void
        let complete: (Result<Void, any Error>) -> Void
    }

    private struct State {
        var pending: [Pending] = []
        var draining = false
    }

    private let environment: Environment
    private let databases: LedgerDatabases
    private let state = Mutex(State())
    /// Held around each commit and each ``exclusive(_:)`` body, wherever they run: the
    /// committing queue or a submitter's own thread (``submit(_:committingOn:completion:)``).
    private let turn = Mutex(())
    private let queue: DispatchQueue
    private let logger: Logger
    /// Called after every commit with the batch size and the commit duration.
    private let onCommit: @Sendable (_ requests: Int, _ duration: Duration) -> Void
    /// Told, after each durable commit, which types it changed.
    private let changeWatchers: ChangeWatchers
    /// Told, after each durable commit, which head it started from and which it left, to
    /// announce what other processes committed before it.
    private let follower: LogFollower?
    /// A point-in-time view's committer refuses every write.
    private let readOnly: Bool
    private let maintainsMerkleTree: Bool
    /// The cluster leadership this server writes under, if any: recorded in the ledger
    /// before its first write under each epoch (``PrimaryTerm``).
    private let term: (@Sendable () -> PrimaryTerm?)?
    /// The Merkle tree's frontier after the last commit, with the head it belongs to: the
    /// next transaction starting from that head need not load it.
    private let lastFrontier = Mutex<(head: LogHead, frontier: Frontier)?>(nil)
    /// The ledger's id, for messages.
    private let label: String
    /// Whether the last commit failed for a full disk (then the next that succeeds says so).
    private let diskWasFull = Atomic(false)
    private let lastCommitted = Atomic<UInt64>(0)

    /// The head the last durable commit of this committer left (0 before its first): set
    /// before its requests are answered.
    var committedSequence: UInt64 { lastCommitted.load(ordering: .acquiring) }

    /// The log was cut back to `sequence` (``Ledger/discardTail(after:)``), on the committing queue.
    func truncated(to sequence: UInt64) {
        lastCommitted.store(min(lastCommitted.load(ordering: .acquiring), sequence), ordering: .releasing)
        lastFrontier.withLock { $0 = nil }
    }

    init(
        environment: Environment, databases: LedgerDatabases, label: String, logger: Logger,
        changeWatchers: ChangeWatchers = ChangeWatchers(), follower: LogFollower? = nil, readOnly: Bool = false,
        maintainsMerkleTree: Bool = true, term: (@Sendable () -> PrimaryTerm?)? = nil, onCommit: @escaping @Sendable (Int, Duration) -> Void = { _, _ in }
    ) {
        self.maintainsMerkleTree = maintainsMerkleTree
        self.term = term
        self.changeWatchers = changeWatchers
        self.follower = follower
        self.readOnly = readOnly
        self.environment = environment
        self.databases = databases
        self.queue = DispatchQueue(label: "healthledger.commit.\(label)")
        self.label = label
        self.logger = logger
        self.onCommit = onCommit
    }

    /// Runs `body` in the next group commit and returns its result once it is durable.
    ///
    /// `body` may run more than once (when the map grows mid-batch): it must have no
    /// effects outside the transaction.
    @discardableResult
    func submit<R: Sendable>(_ body: @escaping @Sendable (WriteContext) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in submit(body) { continuation.resume(with: $0) } }
    }

    /// ``submit(_:)`` for a caller that is not a task: `completion` is called with the result
    /// once it is durable (or with the error), on the committing thread, so it must be quick.
    ///
    /// With `committingOn`, a request that finds the committer idle is committed on the
    /// submitter's thread, through `committingOn`, instead of the committing queue's: with
    /// whatever else was submitted until then (an event loop's other requests of the same
    /// read), and `completion` is called there. That saves a single save the two thread
    /// hand-overs to the queue and back, which cost more than its sync on a small machine;
    /// the thread is busy meanwhile, as the submitter would have waited anyway. Requests
    /// submitted while it commits go to the queue.
    func submit<R: Sendable>(
        _ body: @escaping @Sendable (WriteContext) throws -> R, committingOn deferral: CommitDeferral? = nil,
        completion: @escaping @Sendable (Result<R, any Error>) -> Void
    ) {
        guard !readOnly else {
            return completion(.failure(HealthError.invalidArgument("a point-in-time view is read-only: write to the ledger itself", field: "as_of")))
        }
        let box = ResultBox<R>()
        let pending = Pending(
            run: { context in box.value = try body(context) },
            complete: { result in completion(result.map { box.value! }) })
        let start = state.withLock { state in
            state.pending.append(pending)
            if state.draining { return false }
            state.draining = true
            return true
        }
        guard start else { return }
        if let deferral { deferral { self.drainOnce() } } else { queue.async { self.drain() } }
    }

    /// Runs `body` on the committing queue between two commits: no write of this ledger's
    /// committer runs meanwhile (requests submitted wait for the next commit after it).
    func exclusive<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try self.turn.withLock { _ in try body() } }) }
        }
    }

    /// Most requests one transaction takes; the rest wait for the next commit.
    static let maximumRequestsPerCommit = 512

    private func drain() {
        while let batch = nextBatch() {
            turn.withLock { _ in commit(batch) }
        }
    }

    /// Commits one batch on the calling thread (a submitter's, through its deferral), then
    /// leaves what was submitted meanwhile to the queue. While an ``exclusive(_:)`` body
    /// runs, the queue commits it instead, after the body.
    private func drainOnce() {
        let committed: Bool? = turn.withLockIfAvailable { _ in
            guard let batch = nextBatch() else { return false }
            commit(batch)
            return true
        }
        guard let committed else { return queue.async { self.drain() } }
        guard committed else { return }
        let more = state.withLock { state in
            if !state.pending.isEmpty { return true }
            state.draining = false
            return false
        }
        if more { queue.async { self.drain() } }
    }

    /// The next requests to commit, at most ``maximumRequestsPerCommit``; nil (and the
    /// committer idle) when none are waiting.
    private func nextBatch() -> [Pending]? {
        state.withLock { state -> [Pending]? in
            if state.pending.isEmpty {
                state.draining = false
                return nil
            }
            let count = min(state.pending.count, Self.maximumRequestsPerCommit)
            defer { state.pending.removeFirst(count) }
            return Array(state.pending.prefix(count))
        }
    }

    private func commit(_ batch: [Pending]) {
        let clock = ContinuousClock()
        let started = clock.now
        var outcome = Outcome()
        do {
            do {
                try environment.write { txn in try run(batch, in: txn, nesting: false, into: &outcome) }
            } catch is RequestFailed {
                // A request failed with the batch sharing one transaction: again, each request
                // nested, so that it alone is rolled back.
                try environment.write { txn in try run(batch, in: txn, nesting: true, into: &outcome) }
            }
            lastFrontier.withLock { $0 = outcome.frontier }
            if outcome.heads.end > outcome.heads.start { lastCommitted.store(outcome.heads.end, ordering: .releasing) }
            if diskWasFull.exchange(false, ordering: .relaxed) {
                DiskSpace.recovered(label)
                logger.notice("the disk has room again: commits resumed")
            }
            onCommit(batch.count, clock.now - started)
            follower?.committed(from: outcome.heads.start, to: outcome.heads.end)
            if outcome.heads.end > outcome.heads.start { changeWatchers.notify(outcome.changedTypes) }
            for index in batch.indices { batch[index].complete(outcome.failed[index].map { .failure($0) } ?? .success(())) }
        } catch {
            if batch.count > 1 {
                logger.error("group commit failed", metadata: ["ledger.commit.requests": "\(batch.count)", "error": "\(error)"])
            }
            // Nothing was committed: answer everyone, with their own error when they had one.
            let failure = storageError(error)
            for index in batch.indices { batch[index].complete(.failure(outcome.failed[index] ?? failure)) }
        }
    }

    /// What a run of a batch's transaction left for the answers and the notifications.
    private struct Outcome {
        /// The requests refused, by index in the batch, with their errors.
        var failed: [Int: any Error] = [:]
        var changedTypes = Set<UInt32>()
        var heads: (start: UInt64, end: UInt64) = (0, 0)
        /// The Merkle frontier after the commit, with its head, for the next transaction.
        var frontier: (head: LogHead, frontier: Frontier)?
    }

    /// Runs the batch's requests in `txn`, each in a nested transaction when `nesting`;
    /// without it, a refused request throws ``RequestFailed`` and the transaction is abandoned.
    /// (A map that fills aborts the transaction; ``Environment/write(_:)`` runs this again.)
    private func run(_ batch: [Pending], in txn: Transaction, nesting: Bool, into outcome: inout Outcome) throws {
        outcome = Outcome()
        let context = try WriteContext(
            txn: txn, databases: databases, projector: Projector(databases: databases, units: SummaryCache()), now: Date(),
            maintainsMerkleTree: maintainsMerkleTree)
        outcome.heads = (context.head.sequence, context.head.sequence)
        if let last = lastFrontier.withLock({ $0 }), last.head == context.head { context.startFrontier = last.frontier }
        // Outside the requests' nesting: it commits even if every request fails.
        if let term = term?() { try context.enter(term) }
        for (index, request) in batch.enumerated() {
            if !nesting {
                do {
                    try request.run(context)
                    try context.endRequest()
                } catch let error as LMDBError {
                    throw error
                } catch {
                    // Alone in the batch, its failure is the batch's.
                    if batch.count == 1 { throw error }
                    throw RequestFailed()
                }
                continue
            }
            let savepoint = context.savepoint
            do {
                try txn.nested { child in
                    context.txn = child
                    defer { context.txn = txn }
                    try request.run(context)
                    try context.endRequest()
                }
            } catch let error as LMDBError {
                // A transaction-level condition (map full, I/O): the whole batch retries or fails.
                throw error
            } catch {
                context.restore(savepoint)
                outcome.failed[index] = error
            }
        }
        guard outcome.failed.count < batch.count || context.head.sequence > outcome.heads.start else { return }
        outcome.changedTypes = context.changedTypes
        outcome.heads.end = context.head.sequence
        try context.finish()
        outcome.frontier = context.finalFrontier.map { (context.head, $0) }
    }

    /// Storage errors become a ``LedgerFailure`` (a full disk named as one); caller errors pass through.
    private func storageError(_ error: any Error) -> any Error {
        guard let error = error as? LMDBError else { return error }
        let (failure, diskFull) = DiskSpace.failure(error, ledger: label, directory: environment.path)
        if diskFull, !diskWasFull.exchange(true, ordering: .relaxed) {
            logger.error("the disk is full: commits fail until space returns", metadata: ["error": "\(failure.message)"])
        }
        return failure
    }
}

/// A request of a batch run without nesting failed: the batch runs again, nested.
private struct RequestFailed: Error {}

/// Carries a result from the commit queue to the continuation (both on the commit queue).
private final class ResultBox<R>: @unchecked Sendable {
    var value: R?
}
