import Dispatch
import Foundation
import HealthModel
import LMDB
import Logging
import Synchronization

/// Runs work on a submitter's own thread once that thread is done with what it is doing now
/// (an event loop's `execute`): where a small save may be committed for it
/// (``Ledger/save(received:by:committingOn:completion:)``).
package typealias CallerExecutor = @Sendable (_ work: @escaping @Sendable () -> Void) -> Void

/// Coalesces concurrent write requests into one LMDB write transaction and one fsync.
///
/// Requests queue up while a commit is in progress; the next commit takes all of them.
/// They run one after another in the transaction. When one fails (a duplicate UUID, say),
/// the transaction is abandoned and the batch runs again with each request in its own
/// nested transaction, so the failing request is rolled back alone while the rest of the
/// batch commits (nesting costs, so only a batch that needs it pays for it). Nobody is
/// answered before the transaction holding their data is durable. Commits run on the
/// committer's queue, or, for small saves that find it idle, on their submitter's thread
/// (``submit(_:committingOn:completion:)``).
final class GroupCommitter: Sendable {
    private struct Pending: @unchecked Sendable {
        let run: (WriteContext) throws -> Void
        let complete: (Result<Void, any Error>) -> Void
    }

    /// Who commits what is pending.
    private enum Phase {
        /// Nobody: nothing is pending.
        case idle
        /// The submitter's thread of the first request, through its ``CallerExecutor``, once it
        /// gets to it: every request pending is a small save submitted the same way.
        case onCaller
        /// The committing queue (or the submitter's thread, committing a batch it took).
        case draining
    }

    private struct State {
        var pending: [Pending] = []
        var phase = Phase.idle
    }

    /// What a submit sets going: nothing (a commit is coming), the submitter's thread, or the queue.
    private enum Start { case none, onCaller, queue }

    private let environment: Environment
    private let databases: LedgerDatabases
    private let state = Mutex(State())
    /// Held around each commit and each ``exclusive(_:)`` body, wherever they run: the
    /// committing queue or a submitter's own thread (``submit(_:committingOn:completion:)``).
    private let commitTurn = Mutex(())
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
    /// With `committingOn` (a small save answered from an event loop), a request that finds the
    /// committer idle is committed on the submitter's thread, through `committingOn`, once that
    /// thread is done with what it is doing, instead of on the committing queue; `completion` is
    /// called there. Small saves submitted the same way until then (an event loop's other saves
    /// of the same read) join its transaction. That saves a single save the two thread
    /// hand-overs to the queue and back, which cost more than its sync on a small machine. A
    /// request submitted any other way meanwhile (a large save, an erasure, a follower's batch)
    /// hands everything pending to the queue at once, so that the submitter's thread never
    /// commits more than small saves; requests submitted while it commits go to the queue.
    func submit<R: Sendable>(
        _ body: @escaping @Sendable (WriteContext) throws -> R, committingOn executor: CallerExecutor? = nil,
        completion: @escaping @Sendable (Result<R, any Error>) -> Void
    ) {
        guard !readOnly else {
            return completion(.failure(HealthError.invalidArgument("a point-in-time view is read-only: write to the ledger itself", field: "as_of")))
        }
        let box = ResultBox<R>()
        let pending = Pending(
            run: { context in box.value = try body(context) },
            complete: { result in completion(result.map { box.value! }) })
        let start = state.withLock { state -> Start in
            state.pending.append(pending)
            switch (state.phase, executor) {
            case (.draining, _), (.onCaller, .some): return .none
            case (.idle, .some):
                state.phase = .onCaller
                return .onCaller
            case (.idle, nil), (.onCaller, nil):
                state.phase = .draining
                return .queue
            }
        }
        switch start {
        case .none: break
        case .onCaller: executor! { self.commitOnCaller() }
        case .queue: queue.async { self.drain() }
        }
    }

    /// Runs `body` on the committing queue between two commits: no write of this ledger's
    /// committer runs meanwhile (requests submitted wait for the next commit after it).
    func exclusive<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try self.commitTurn.withLock { _ in try body() } }) }
        }
    }

    /// Most requests one transaction takes; the rest wait for the next commit.
    static let maximumRequestsPerCommit = 512

    /// The committing queue's loop: commits what is pending until nothing is.
    private func drain() {
        while let batch = nextBatch() {
            commitTurn.withLock { _ in commit(batch) }
        }
    }

    /// On the thread of the submitter that found the committer idle (``Phase/onCaller``):
    /// commits the small saves pending, then leaves what was submitted meanwhile to the queue.
    /// Nothing to do when the queue took over in between; the queue's turn when an
    /// ``exclusive(_:)`` body runs (it commits them after the body).
    private func commitOnCaller() {
        let committed: Bool? = commitTurn.withLockIfAvailable { _ in
            let batch = state.withLock { state -> [Pending]? in
                guard state.phase == .onCaller else { return nil }
                state.phase = .draining
                return Self.take(from: &state.pending)
            }
            guard let batch else { return false }
            commit(batch)
            return true
        }
        let toQueue = state.withLock { state -> Bool in
            switch committed {
            case nil:
                // An exclusive body holds the turn: the queue commits after it, unless it took over.
                guard state.phase == .onCaller else { return false }
                state.phase = .draining
                return true
            case false?: return false
            case true?:
                if !state.pending.isEmpty { return true }
                state.phase = .idle
                return false
            }
        }
        if toQueue { queue.async { self.drain() } }
    }

    /// The next requests to commit, at most ``maximumRequestsPerCommit``; nil (and the
    /// committer idle) when none are waiting.
    private func nextBatch() -> [Pending]? {
        state.withLock { state -> [Pending]? in
            if state.pending.isEmpty {
                state.phase = .idle
                return nil
            }
            return Self.take(from: &state.pending)
        }
    }

    /// Takes the first ``maximumRequestsPerCommit`` requests of `pending`.
    private static func take(from pending: inout [Pending]) -> [Pending] {
        let count = min(pending.count, maximumRequestsPerCommit)
        defer { pending.removeFirst(count) }
        return Array(pending.prefix(count))
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

/// Carries a result from the commit to the completion (both on the committing thread).
private final class ResultBox<R>: @unchecked Sendable {
    var value: R?
}
