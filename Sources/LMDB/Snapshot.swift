import CLMDB
import Foundation

/// A read snapshot that stays open between uses: for a reader that pauses between pieces
/// of its work, such as a stream waiting for its client to take more.
///
/// Each ``read(_:)`` runs in the same read transaction, so every piece sees the same
/// committed state, with one exception: a paused snapshot holds nothing the environment
/// must wait for. When the environment needs its open transactions gone (to grow or adopt
/// the map, or because too many paused snapshots hold reader slots), it ends the
/// transactions of paused snapshots, and their next ``read(_:)`` starts a newer snapshot
/// and says so (`fresh` is true), so the reader can pick up where it was.
///
/// ```swift
/// let snapshot = env.snapshot()
/// defer { snapshot.close() }
/// let first = try snapshot.read { txn, _ in try txn.bytes(forKey: key, in: objects) }
/// // … await something; writers go on …
/// let again = try snapshot.read { txn, fresh in try txn.bytes(forKey: key, in: objects) }  // same bytes unless fresh
/// ```
public final class Snapshot: @unchecked Sendable {
    private let environment: Environment
    /// Guards `transaction` and `lastUse`; taken inside the environment's resize lock.
    private let lock = NSLock()
    private var transaction: Transaction?
    private var lastUse: UInt64 = 0
    private var closed = false

    init(_ environment: Environment) {
        self.environment = environment
    }

    deinit {
        transaction?.abort()
        environment.forget(ObjectIdentifier(self))
    }

    /// Runs `body` in the snapshot's read transaction, starting one if it has none.
    ///
    /// - Parameter body: told whether the transaction was started for this call (the first
    ///   call, or the first after the environment ended the previous transaction).
    /// - Throws: ``LMDBError`` from LMDB, or whatever `body` throws; `EINVAL` after ``close()``.
    public func read<R>(_ body: (_ txn: Transaction, _ fresh: Bool) throws -> R) throws -> R {
        try environment.withSnapshotLock(self) {
            guard !closed else { throw LMDBError(EINVAL, "the snapshot is closed") }
            let fresh = transaction == nil
            if fresh { transaction = try environment.beginSnapshotTransaction(releasingIdleFor: self) }
            lastUse = environment.nextUse()
            return try body(transaction!, fresh)
        }
    }

    /// Ends the snapshot's transaction; later reads throw.
    public func close() {
        lock.withLock {
            closed = true
            transaction?.abort()
            transaction = nil
        }
        environment.forget(ObjectIdentifier(self))
    }

    /// Runs `body` holding the snapshot's lock (the environment's resize lock must be held).
    func locked<R>(_ body: () throws -> R) rethrows -> R {
        try lock.withLock(body)
    }

    /// Ends the transaction if the snapshot is paused (its lock is free); returns whether
    /// it held one. With `wait`, waits for a read in progress to finish first.
    func endTransaction(wait: Bool) -> Bool {
        if wait { lock.lock() } else if !lock.try() { return false }
        defer { lock.unlock() }
        guard let transaction else { return false }
        transaction.abort()
        self.transaction = nil
        return true
    }

    /// When the snapshot was last read, for choosing which paused snapshot to end first;
    /// nil while it holds no transaction or is being read.
    var pausedSince: UInt64? {
        guard lock.try() else { return nil }
        defer { lock.unlock() }
        return transaction == nil ? nil : lastUse
    }
}
