import Crypto
import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import Logging
import Synchronization

/// One person's health ledger: a hash-chained event log and the projections built from it.
///
/// Obtain ledgers from a ``LedgerStore``. Writes (``save(_:by:)``, ``delete(_:by:)``,
/// ``deleteObjects(of:overlapping:by:)``) are group-committed and return once durable;
/// reads run on a consistent snapshot of the projections.
///
/// ```swift
/// let store = try LedgerStore(directory: URL(filePath: "data"))
/// let ledger = try await store.createLedger(id: "alice")
/// try await ledger.save([.quantitySample(sample)], by: .owner)
/// let samples = try ledger.samples(SampleQuery(type: sample.objectType), as: .owner)
/// ```
public final class Ledger: Sendable {
    /// Most objects (or UUIDs) one save or delete may carry.
    public static let maximumBatchSize = 100_000

    public let id: String
    public let directory: URL
    let environment: Environment
    let databases: LedgerDatabases
    let committer: GroupCommitter
    let logger: Logger
    /// Announces authorization changes and credential revocations once durable.
    public let accessWatchers = AccessWatchers()
    /// Announces committed changes per type, once durable (for long-running queries).
    public let changeWatchers: ChangeWatchers
    /// Seals and opens query anchors (``QueryAnchor``).
    let anchors: AnchorSeal
    /// Route builders in progress.
    let routeBuilders = RouteBuilders()
    /// Polls for other processes' commits (see ``LogFollower``); stopped with the ledger, which waits for a poll under way.
    private let following: FollowLoop?
    /// Announces events this process did not write itself (another process's, a primary's
    /// shipped to this follower) to the watchers.
    let logFollower: LogFollower
    /// This ledger's followers, as its primary hears from them.
    public let followers = Followers()
    /// The largest tree this process signed a head of: a later head is never smaller (a
    /// follower reconnecting behind it does not take it back).
    let largestSignedTree = Atomic<UInt64>(0)
    /// Credential records read to authenticate calls, reused while nothing commits.
    let credentialRecords = CredentialRecordCache()
    /// The access records noted and not yet written (``AccessLog``).
    let accessLog = AccessLog()
    /// Whether the store's follower hands this ledger's access records to a primary (nil: never).
    let accessForwarding: AccessForwarding?
    /// Writes them every ``LedgerConfiguration/accessFlushInterval``.
    let accessFlushing = AccessFlushLoop()
    /// Set once the ledger is being erased whole (``LedgerStore/eraseLedger(_:reason:waitingUpTo:ignoringHold:)``):
    /// streams that begin after it end at once, and it writes nothing more.
    let beingErased = Atomic<Bool>(false)
    /// Set, with ``beingErased``, when what goes is only this copy (``LedgerStore/releaseCopy(of:waitingUpTo:)``).
    let beingReleased = Atomic<Bool>(false)
    /// For a point-in-time view, the last event it holds; it is read-only. Nil for the ledger itself.
    public let viewOf: UInt64?
    /// Signs the tree heads.
    let signingKey: SigningKey
    /// The settings it was opened with (its views and maintenance copies open with the same key).
    let configuration: LedgerConfiguration
    /// Called after each erasure, with its report and reason (the store journals it and drops
    /// the ledger's point-in-time views, built from the log before it).
    package let afterErasure = Mutex<Callback<(ErasureReport, String), any Error>?>(nil)

    /// The term of ledger `id` among `terms` (its placement group's), read at each commit.
    private static func term(of id: String) -> (PrimaryTerms) -> @Sendable () -> PrimaryTerm? {
        let group = Placement.group(of: id)
        return { terms in { terms[group] } }
    }

    /// - Parameters:
    ///   - terms: the cluster leaderships the ledger is written under (its store's), if any.
    ///   - forwarding: which ledgers' access records go to a primary (its store's), if any.
    init(
        id: String, directory: URL, configuration: LedgerConfiguration, logger: Logger, viewOf: UInt64? = nil, terms: PrimaryTerms? = nil,
        forwarding: AccessForwarding? = nil
    ) throws {
        self.id = id
        self.accessForwarding = viewOf == nil ? forwarding : nil
        self.viewOf = viewOf
        self.configuration = configuration
        self.directory = directory
        var logger = logger
        logger[metadataKey: "ledger.id"] = "\(id)"
        self.logger = logger
        let environment = try Self.openEnvironment(at: directory, configuration: configuration)
        self.environment = environment
        let (cipher, clear) = try Self.loadCipher(
            environment, ledger: id, masterKey: configuration.masterKey, encryptingClear: configuration.encryptsClearLedgers && viewOf == nil)
        let databases = try LedgerDatabases(environment: environment, cipher: cipher)
        self.databases = databases
        if clear, let masterKey = configuration.masterKey { try Self.encryptLog(databases, masterKey: masterKey, in: environment, ledger: id, logger: logger) }
        let changeWatchers = ChangeWatchers()
        self.changeWatchers = changeWatchers
        let follower = try LogFollower(
            environment: environment, databases: databases, accessWatchers: accessWatchers, changeWatchers: changeWatchers)
        self.logFollower = follower
        self.committer = GroupCommitter(
            environment: environment, databases: databases,
            label: id, logger: logger, changeWatchers: changeWatchers, follower: follower, readOnly: viewOf != nil,
            maintainsMerkleTree: configuration.maintainsMerkleTree, term: viewOf == nil ? terms.map(Self.term(of: id)) : nil, onCommit: configuration.onCommit)
        self.anchors = try AnchorSeal(environment: environment, databases: databases)
        signingKey = try SigningKey.load(environment: environment, databases: databases)
        following = configuration.followInterval.map { FollowLoop(follower, every: $0) }
        try upgradeProjections()
        if viewOf == nil, let interval = configuration.accessFlushInterval { accessFlushing.start(self, every: interval) }
        // Records written before the process stopped may still be waiting for the primary.
        if let accessForwarding, try !accessOutboxIsEmpty { accessForwarding.note(id) }
    }

    deinit {
        following?.stop()
        accessFlushing.stop()
        if !accessLog.isEmpty, !isBeingErased { flushAccessRecordsLogging() }
    }

    /// Whether the ledger is being erased whole: whoever uses it should let go.
    public var isBeingErased: Bool { beingErased.load(ordering: .acquiring) }

    /// Whether what goes is only this copy of the ledger, which other members of a cluster keep.
    public var isBeingReleased: Bool { beingReleased.load(ordering: .acquiring) }

    /// Rebuilds the projections from the log when another version laid them out.
    private func upgradeProjections() throws {
        if viewOf == nil, try read({ snapshot in try snapshot.get(Self.erasureRebuildKey, in: snapshot.databases.meta) != nil }) {
            logger.notice("rebuilding the projections from the log: the rebuild after an erasure or an encryption did not finish")
            try rebuildAfterErasure()
            try scrubUnshared()
        }
        let recorded = try read { snapshot in try ProjectionLayout.recorded(in: snapshot) }
        guard recorded != ProjectionLayout.current else { return }
        logger.notice("rebuilding the projections from the log: their layout is \(recorded), this version's is \(ProjectionLayout.current)")
        for name in ProjectionLayout.retiredDatabases { try environment.dropDatabase(name) }
        let report = try replay(install: true)
        if !report.installed {
            try environment.write { txn in try ProjectionLayout.recordCurrent(in: txn, databases) }
        }
    }

    static func openEnvironment(at directory: URL, configuration: LedgerConfiguration) throws -> Environment {
        let environment: Environment
        do {
            environment = try Environment(
                path: directory.path,
                options: .init(
                    mapSize: configuration.initialMapSize, maximumMapSize: configuration.maximumMapSize,
                    checkpointInterval: configuration.checkpointInterval))
        } catch let error as LMDBError where error.code == .invalid || error.code == .corrupted || error.code == .versionMismatch {
            throw LedgerFailure.corrupted("the ledger file in \(directory.path) is damaged: \(error.message)", cause: error)
        }
        try checkFileLength(of: environment, at: directory)
        return environment
    }

    /// Refuses a data file shorter than its own last page: reading past the end of a
    /// memory-mapped file would crash the process instead of reporting the damage.
    static func checkFileLength(of environment: Environment, at directory: URL) throws {
        let info = environment.info
        let needed = (info.lastPage + 1) * info.pageSize
        let file = directory.appending(path: "data.mdb").path
        let length = ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.intValue ?? 0
        guard length >= needed else {
            throw LedgerFailure.corrupted("the ledger file \(file) is truncated: \(length) bytes, but its pages need \(needed)")
        }
    }

    /// Initializes a new ledger's environment in `directory` with its first event,
    /// the ledger-created event, and closes it again.
    static func initialize(at directory: URL, id: String, displayName: String, configuration: LedgerConfiguration) throws {
        let environment = try openEnvironment(at: directory, configuration: configuration)
        let cipher = configuration.masterKey.map { _ in LedgerCipher.generate() }
        let databases = try LedgerDatabases(environment: environment, cipher: cipher)
        let projector = Projector(databases: databases, units: SummaryCache())
        try environment.write { txn in
            if let cipher, let masterKey = configuration.masterKey {
                try txn.put(masterKey.wrap(cipher.rawKey), forKey: Self.dataKeyKey, in: databases.meta)
            }
            let context = try WriteContext(txn: txn, databases: databases, projector: projector, now: Date())
            guard context.head.sequence == 0 else { throw LedgerFailure(.alreadyExists, "ledger '\(id)' already has events") }
            // The key that signs the ledger's tree heads: its public half is part of the log.
            let key = SigningKey(key: Curve25519.Signing.PrivateKey())
            try txn.put(databases.storable(secret: Array(key.key.rawRepresentation), name: SigningKey.metaKey), forKey: SigningKey.metaKey, in: databases.meta)
            var body = Healthledger_V1_LedgerCreated()
            body.ledgerID = id
            body.displayName = displayName
            body.signingPublicKey = Data(key.publicKey)
            try context.append(
                kind: .ledgerCreated, actor: .system, objectType: nil, objectUUID: nil, body: try body.serializedBytes(),
                change: .none)
            try context.finish()
            try ProjectionLayout.recordCurrent(in: context.txn, databases)
        }
    }

    /// The sequence number and hash of the last event.
    public func head() throws -> (sequence: UInt64, hash: [UInt8]) {
        try read { snapshot in
            let head = try LogHead.read(snapshot)
            return (head.sequence, head.hash)
        }
    }

    /// Up to `limit` events starting at sequence `from`, in order.
    public func events(from: UInt64 = 1, limit: Int = 100) throws -> [LedgerEvent] {
        try read { snapshot in
            var events: [LedgerEvent] = []
            try snapshot.withCursor(on: snapshot.databases.events) { cursor in
                var entry = try cursor.seek(atLeast: KeyEncoding.sequenceKey(from))
                while let current = entry, events.count < limit {
                    events.append(try snapshot.databases.withEvent(current.value, key: current.key) { try LedgerEvent(stored: $0) })
                    entry = try cursor.next()
                }
            }
            return events
        }
    }

    /// The hashes (SHA-256 of the stored bytes) of up to `limit` events from sequence `from`.
    public func eventHashes(from: UInt64, limit: Int) throws -> [[UInt8]] {
        try read { snapshot in
            var hashes: [[UInt8]] = []
            try snapshot.withCursor(on: snapshot.databases.events) { cursor in
                var entry = try cursor.seek(atLeast: KeyEncoding.sequenceKey(from))
                while let current = entry, hashes.count < limit {
                    hashes.append(try snapshot.databases.withEvent(current.value, key: current.key) { try EventCodec.hash($0) })
                    entry = try cursor.next()
                }
            }
            return hashes
        }
    }

    /// The size of the memory map now (it grows on demand).
    public var mapSize: Int { environment.currentMapSize }
}

/// Settings for the ledgers of a store.
public struct LedgerConfiguration: Sendable {
    /// The map each ledger starts with; it doubles whenever it fills.
    public var initialMapSize: Int
    public var maximumMapSize: Int
    /// Observes each group commit: requests in the batch and the commit time (for metrics).
    public var onCommit: @Sendable (Int, Duration) -> Void
    /// How often each open ledger checks for events other processes committed, to tell its
    /// watchers (a revocation by `healthledger admin` ends this process's streams within
    /// about this time); nil never checks.
    public var followInterval: Duration?
    /// Most point-in-time views kept on disk at once (the least recently used goes first).
    public var viewCapacity: Int
    /// Most bytes the point-in-time views take on disk together (the newest always stays).
    public var viewDiskLimit = 8 << 30
    /// A view unused for this long is removed.
    public var viewIdleLifetime: Duration
    /// Most ledgers a store holds open (about four descriptors and 90 KiB each): past it, the
    /// least recently used are closed. The default keeps 8,192 open, which 65,536 descriptors
    /// serve with room for connections, however many ledgers the store holds.
    public var maximumOpenLedgers = 8_192
    /// A ledger unused for this long is closed (it opens again on its next call, in a few
    /// milliseconds); nil keeps every ledger open until ``maximumOpenLedgers``.
    public var ledgerIdleLifetime: Duration? = .seconds(60)
    /// The key that wraps each ledger's data key: with one, new ledgers are encrypted, and
    /// clear ones are encrypted when they are opened (``MasterKey``); nil keeps them clear.
    public var masterKey: MasterKey?
    /// Whether a clear ledger opened with ``masterKey`` is encrypted then (not when only a
    /// copy is checked).
    public var encryptsClearLedgers = true
    /// How long access records are kept (default six years, as HIPAA keeps audit records).
    public var accessRetention: TimeInterval = 6 * 365.25 * 86_400
    /// How often each ledger's commit journal takes a checkpoint (docs/LEDGER.md,
    /// "Durability"): the most of the journal a power loss makes recovery redo.
    public var checkpointInterval: Duration = .seconds(1)
    /// How often access records noted in memory are written; nil: only by
    /// ``Ledger/flushAccessRecords(now:)`` (and when the ledger closes).
    public var accessFlushInterval: Duration? = .seconds(1)

    /// These settings for a ledger opened for one job (a restore, a check): no following.
    var maintenance: LedgerConfiguration {
        var configuration = LedgerConfiguration(followInterval: nil)
        configuration.masterKey = masterKey
        configuration.accessRetention = accessRetention
        configuration.accessFlushInterval = nil
        configuration.checkpointInterval = checkpointInterval
        return configuration
    }
    /// Whether writes extend the Merkle tree. Only the ledger benchmark (`healthledger-bench
    /// ledger`) turns it off, to measure what the tree costs: such a ledger's tree heads and
    /// proofs are wrong.
    public var maintainsMerkleTree = true

    public init(
        initialMapSize: Int = 64 << 20, maximumMapSize: Int = 1 << 40, followInterval: Duration? = .milliseconds(250),
        viewCapacity: Int = 8, viewIdleLifetime: Duration = .seconds(600),
        onCommit: @escaping @Sendable (Int, Duration) -> Void = { _, _ in }
    ) {
        self.initialMapSize = initialMapSize
        self.maximumMapSize = maximumMapSize
        self.followInterval = followInterval
        self.viewCapacity = viewCapacity
        self.viewIdleLifetime = viewIdleLifetime
        self.onCommit = onCommit
    }
}
