import CLedgerAEAD
import Foundation
import HealthModel
import LMDB
import LedgerSchema

/// The state of one group-commit transaction: appends events to the log, extending the
/// hash chain, and applies each to the projections in the same transaction.
final class WriteContext {
    /// The transaction of the request being applied (a nested one when batching).
    var txn: Transaction
    let databases: LedgerDatabases
    let projector: Projector
    var head: LogHead
    /// Type statistics and touched rollup hours gathered in this transaction, written by ``finish()``.
    var stats = DeferredProjections()
    let commitTimeUs: Int64
    /// The types whose per-object read selections this transaction changed.
    var selectionChanges = Set<UInt32>()
    /// The seed of this transaction's body salts (``EventCodec/salt(seed:sequence:)``), never
    /// stored: 32 bytes of the system's random source, in one `getrandom` call
    /// (`ledger_random_bytes`) where the standard library's generator makes four.
    private let saltSeed: [UInt8] = {
        var seed = [UInt8](repeating: 0, count: 32)
        if seed.withUnsafeMutableBytes({ ledger_random_bytes($0.baseAddress, $0.count) }) == 1 { return seed }
        var generator = SystemRandomNumberGenerator()
        return (0..<4).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
    }()

    /// Whether appends extend the Merkle tree (always, except to measure what that costs).
    let maintainsMerkleTree: Bool
    /// Extends the Merkle tree from the frontier loaded at the first append.
    private var merkle: MerkleAppender?
    /// The tree's frontier at the head this transaction started from, when the committer
    /// kept it from its last commit (otherwise the first append loads it).
    var startFrontier: Frontier?
    /// The tree's frontier once ``finish()`` has run.
    private(set) var finalFrontier: Frontier?

    init(txn: Transaction, databases: LedgerDatabases, projector: Projector, now: Date, maintainsMerkleTree: Bool = true) throws {
        self.maintainsMerkleTree = maintainsMerkleTree
        self.txn = txn
        self.databases = databases
        self.projector = projector
        let head = try LogHead.read(LedgerSnapshot(txn, databases))
        self.head = head
        // The commit time never goes backwards along the log.
        self.commitTimeUs = max(microseconds(now), head.commitTimeUs)
    }

    /// Appends one event and applies its change to the projections.
    @discardableResult
    func append(
        kind: EventKind, actor: Principal, objectType: String?, objectUUID: [UInt8]?, body: [UInt8],
        change: Projector.Change
    ) throws -> UInt64 {
        let sequence = head.sequence + 1
        let (stored, hash) = EventCodec.encode(
            sequence: sequence, previousHash: head.hash, commitTimeUs: commitTimeUs, actor: actor,
            kind: kind, objectType: objectType, objectUUID: objectUUID, body: body, salt: EventCodec.salt(seed: saltSeed, sequence: sequence))
        let key = KeyEncoding.sequenceKey(sequence)
        try txn.put(databases.storable(event: stored, key: key), forKey: key, in: databases.events, append: true)
        try project(change, sequence: sequence, hash: hash)
        head = LogHead(sequence: sequence, hash: hash, commitTimeUs: commitTimeUs)
        return sequence
    }

    /// Appends an event another ledger committed (its primary's, shipped to this follower)
    /// as it is, and applies its change to the projections, as replay does: it must be the
    /// next event after this ledger's head and link to it.
    ///
    /// - Returns: the event, decoded when it is an erasure (which empties the events it
    ///   names: the caller acts on it), nil otherwise.
    /// - Throws: ``LedgerFailure`` `corrupted` for bytes that are not an event, or
    ///   `failedPrecondition` for an event that does not extend this ledger's chain.
    func appendShipped(_ stored: [UInt8]) throws -> LedgerEvent? {
        let sequence = head.sequence + 1
        let (layout, hash, change, erasure) = try stored.withUnsafeBytes { bytes in
            guard let fields = EventCodec.chainFields(bytes) else { throw LedgerFailure.corrupted("a shipped event is not a well-formed event") }
            guard fields.sequence == sequence else {
                throw LedgerFailure(.failedPrecondition, "the shipped event is event \(fields.sequence), but this ledger's next is \(sequence)")
            }
            guard fields.previousHash.elementsEqual(head.hash) else {
                throw LedgerFailure(.diverged, "shipped event \(sequence) does not link to this ledger's event \(sequence - 1): the histories diverged")
            }
            let layout = try EventCodec.layout(bytes)
            let erasure = layout.kind == UInt64(EventKind.objectsErased.rawValue) ? try LedgerEvent(stored: bytes) : nil
            return (layout, try EventCodec.hash(bytes), try projector.change(stored: bytes).change, erasure)
        }
        let key = KeyEncoding.sequenceKey(sequence)
        try txn.put(databases.storable(event: stored, key: key), forKey: key, in: databases.events, append: true)
        try project(change, sequence: sequence, hash: hash)
        head = LogHead(sequence: sequence, hash: hash, commitTimeUs: layout.commitTimeUs)
        return erasure
    }

    /// Applies event `sequence`'s change to the projections and extends the Merkle tree with its hash.
    private func project(_ change: Projector.Change, sequence: UInt64, hash: [UInt8]) throws {
        try projector.apply(change, sequence: sequence, in: txn, stats: &stats, loadSaved: loadSaved)
        if case .objectReadSelectionChanged(_, let type, _) = change { selectionChanges.insert(type) }
        guard maintainsMerkleTree else { return }
        if merkle == nil {
            let start = startFrontier?.size == sequence - 1 ? startFrontier! : try MerkleTree.frontier(size: sequence - 1, in: reads)
            merkle = MerkleAppender(frontier: start)
        }
        merkle!.append(eventHash: hash)
    }

    /// The summary of the object saved by event `sequence`, read from the log.
    func loadSaved(_ sequence: UInt64) throws -> ObjectSummary {
        let stored = try Ledger.storedEvent(sequence, in: reads)
        return try projector.savedSummary(stored: stored, sequence: sequence)
    }

    /// The type codes whose objects (saved or deleted, through ``stats``) or per-object
    /// selections this transaction changed, for ``ChangeWatchers``. Read before ``finish()``.
    var changedTypes: Set<UInt32> { selectionChanges.union(stats.changedTypes) }

    /// The ledger as this transaction sees it, its own writes included.
    var reads: LedgerSnapshot { LedgerSnapshot(txn, databases) }

    /// The state a failed request must not leave behind.
    var savepoint: Savepoint { Savepoint(head: head, stats: stats, selectionChanges: selectionChanges, merkle: merkle.map { ($0, $0.mark()) }) }

    func restore(_ savepoint: Savepoint) {
        (head, stats, selectionChanges) = (savepoint.head, savepoint.stats, savepoint.selectionChanges)
        if let (appender, mark) = savepoint.merkle { appender.rollBack(to: mark) } else { merkle = nil }
    }

    /// What ``restore(_:)`` returns to: the head, the deferred projections and the Merkle
    /// tree's size before a request.
    struct Savepoint {
        let head: LogHead
        let stats: DeferredProjections
        let selectionChanges: Set<UInt32>
        let merkle: (MerkleAppender, mark: UInt64)?
    }

    /// The longest duration of `type`'s samples, counting this transaction's saves (each
    /// noted in `type_sources` as it is applied).
    func longestDuration(type: UInt32) throws -> Int64 {
        try SourceRegistry.longestDuration(type: type, in: reads)
    }

    /// Ends a request of the group commit: puts the index rows its saves held back, so that
    /// the next request reads them (and a request rolled back in its nested transaction takes
    /// its rows with it).
    func endRequest() throws {
        try stats.indexRows.put(in: txn, databases)
    }

    /// Records the new head, type statistics and checkpoint (once per transaction).
    func finish() throws {
        finalFrontier = try merkle.map { try $0.finish(in: txn, databases.merkle) } ?? startFrontier
        try stats.flush(in: txn, databases) { [reads] in try SeriesValues.samples(sequence: $0, source: $1, in: reads) }
        try head.write(txn, databases)
        try Projector.writeCheckpoint(head.sequence, in: txn, projector.databases)
    }
}
