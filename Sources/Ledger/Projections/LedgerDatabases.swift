import LMDB

/// The named LMDB databases of one ledger environment.
///
/// Layouts (all integers big-endian; times are microseconds with the sign bit flipped):
///
/// | database | key | value |
/// |---|---|---|
/// | `events` | sequence(8) | stored `LedgerEvent` bytes (the log) |
/// | `meta` | name | log head, projection layout (``ProjectionLayout``), the projections' checkpoint (`applied`: sequence(8) of the last event applied), the anchor-sealing and signing keys, a follower's place in its primary's access records (`access_copied`: number(8) key(16)) |
/// | `objects` | uuid(16) | sequence(8) of the save event, type(4), source(4): see ``StoredObject`` |
/// | `by_start` | type(4) start(8) uuid(16) | end(8) sequence(8) value(8, canonical unit, IEEE bits) source(4) |
/// | `by_end` | type(4) end(8) uuid(16) | start(8) sequence(8) source(4): samples that last (end after start) only; an instant's end is its start, so `by_start` orders it by end |
/// | `by_source` | type(4) source(4) start(8) uuid(16) | end(8) sequence(8) value(8) |
/// | `source_changes` | type(4) source(4) sequence(8) | op(1: 1 added, 2 deleted) uuid(16): each source's changes of a type in log order; a reader of every source merges the type's ranges |
/// | `tombstones` | uuid(16) | see ``Tombstone`` |
/// | `sync_ids` | source(4) type(4) sync id (its UTF-8 up to 400 bytes, else 0xFF and its SHA-256) | uuid(16) version(8): see ``SyncIdentifierIndex`` |
/// | `credentials` | credential id (UTF-8) | SHA-256 of the secret, principal, label, issue, expiry and revocation times: see ``CredentialRecord`` |
/// | `sources` | see ``SourceRegistry`` | source codes (4) by bundle id, and back |
/// | `type_sources` | type(4) source(4) | sequence(8) of the source's first save of the type, its longest duration(8): the type's longest is the longest of its sources' |
/// | `source_priority` | type(4) | the owner's order: length-prefixed bundle ids |
/// | `authorizations` | app bundle(1+n) direction(1) type(4) | see ``AuthorizationRecord`` |
/// | `object_reads` | app bundle(1+n) type(4) uuid(16) | state(1: 1 selected, 2 deselected) sequence(8): see ``SelectionEntry`` |
/// | `authorization_log` | app bundle(1+n) sequence(8) | empty: the app's authorization events |
/// | `characteristics` | type(4) | the owner's `Characteristic` message (absent: not set) |
/// | `attachments` | attachment uuid(16) | object uuid(16) sequence(8) of the `attachmentAdded` event |
/// | `object_attachments` | object uuid(16) attachment uuid(16) | empty: the object's attachments |
/// | `workout_members` | parent uuid(16) type(4) source(4) member uuid(16) | start(8) end(8) sequence(8) value(8) of the member: a workout's associated samples and routes, a correlation's members |
/// | `member_workouts` | member uuid(16) parent uuid(16) | empty: `workout_members` the other way |
/// | `route_data` | route uuid(16) chunk(4) | sequence(8) of the chunk's `routeLocationsAdded` event |
/// | `rollups` | type(4) source(4) hour start(8) | see ``StatisticsPartial``: the source's samples of the type starting in that hour, summarised (``Rollups``) |
/// | `access_log` | time(8) random(8) | a `healthledger.v1.AccessRecord`: one call that returned health data (``AccessLog``); not a projection |
/// | `access_feed` | number(8) | an `access_log` key: the records in the order they arrived here (``Ledger/accessFeed(after:afterKey:limit:)``); not a projection |
/// | `access_outbox` | an `access_log` key | empty: a follower's records not yet handed to its primary (``AccessForwarding``); not a projection |
///
/// In an encrypted ledger (``LedgerCipher``) the events, the rollups' and characteristics'
/// values, `meta`'s secrets and tombstones' sync identifiers are sealed, the value columns
/// masked and `sync_ids` keyed by a keyed digest (docs/LEDGER.md, "Encryption at rest").
///
/// Everything but `events`, `meta` and the three `access_` databases is a projection: derived
/// from the log, rebuilt identically by replay. (`meta`'s checkpoint says how far the
/// projections are.)
///
/// A class, so that handing the handles to a snapshot or a context (several times per saved
/// object) is one reference, not a copy of every handle.
final class LedgerDatabases: Sendable {
    let events: Database
    let meta: Database
    let objects: Database
    let byStart: Database
    let byEnd: Database
    let bySource: Database
    let sourceChanges: Database
    let tombstones: Database
    let syncIdentifiers: Database
    let credentials: Database
    let sources: Database
    let typeSources: Database
    let sourcePriority: Database
    let authorizations: Database
    let objectReads: Database
    let authorizationLog: Database
    let characteristics: Database
    let attachments: Database
    let objectAttachments: Database
    let workoutMembers: Database
    let memberWorkouts: Database
    let routeData: Database
    /// The Merkle tree over the event hashes (``MerkleTree``).
    let merkle: Database
    /// Statistics per type, source and hour (``Rollups``).
    let rollups: Database
    /// The owner's access records (``AccessLog``): neither log nor projection.
    let accessLog: Database
    /// On a follower, the keys of its access records not yet handed to the primary (``AccessForwarding``).
    let accessOutbox: Database
    /// The keys of `access_log` in the order they arrived here, by an 8-byte number (``Ledger/accessFeed(after:afterKey:limit:)``).
    let accessFeed: Database
    /// Seals and opens the health data stored, when the ledger is encrypted (``LedgerCipher``).
    let cipher: LedgerCipher?

    /// The projections, in digest order.
    var projections: [Database] {
        [
            objects, byStart, byEnd, bySource, sourceChanges, tombstones, syncIdentifiers, credentials, sources, typeSources, sourcePriority,
            authorizations, objectReads, authorizationLog, characteristics, attachments, objectAttachments, workoutMembers, memberWorkouts, routeData,
            merkle, rollups,
        ]
    }

    init(environment: Environment, cipher: LedgerCipher?) throws {
        self.cipher = cipher
        events = try environment.openDatabase("events")
        meta = try environment.openDatabase("meta")
        objects = try environment.openDatabase("objects")
        byStart = try environment.openDatabase("by_start")
        byEnd = try environment.openDatabase("by_end")
        bySource = try environment.openDatabase("by_source")
        sourceChanges = try environment.openDatabase("source_changes")
        tombstones = try environment.openDatabase("tombstones")
        syncIdentifiers = try environment.openDatabase("sync_ids")
        credentials = try environment.openDatabase("credentials")
        sources = try environment.openDatabase("sources")
        typeSources = try environment.openDatabase("type_sources")
        sourcePriority = try environment.openDatabase("source_priority")
        authorizations = try environment.openDatabase("authorizations")
        objectReads = try environment.openDatabase("object_reads")
        authorizationLog = try environment.openDatabase("authorization_log")
        characteristics = try environment.openDatabase("characteristics")
        attachments = try environment.openDatabase("attachments")
        objectAttachments = try environment.openDatabase("object_attachments")
        workoutMembers = try environment.openDatabase("workout_members")
        memberWorkouts = try environment.openDatabase("member_workouts")
        routeData = try environment.openDatabase("route_data")
        merkle = try environment.openDatabase("merkle")
        rollups = try environment.openDatabase("rollups")
        accessLog = try environment.openDatabase("access_log")
        accessOutbox = try environment.openDatabase("access_outbox")
        accessFeed = try environment.openDatabase("access_feed")
    }
}

/// The version of the projections' byte layout, recorded in `meta`. A ledger whose
/// projections were laid out by another version has them rebuilt from its log on opening.
///
/// 1 (unrecorded): before `by_source`. 2: `by_source`, `objects` naming type and source,
/// `type_sources` with the source's longest duration. 3: `source_changes`, `object_reads`
/// remembering when each object was selected or deselected, `characteristics`, `attachments`,
/// `object_attachments`. 4: `workout_members`, `member_workouts`, `route_data`. 6: `merkle` (5, its first
/// layout, stored every level; 6 from level 2). 7: `rollups`. 8: `merkle` from level 4. 9: `sync_ids` keyed in
/// order by source code, type code and identifier (``SyncIdentifierIndex``), no longer hashed. 10: `by_end` without
/// instants; the checkpoint in `meta` instead of a `checkpoint` database of its own (dropped on upgrading). 11: no
/// `changes` (every source's changes of a type in one range): `source_changes` alone, merged across sources by a
/// reader of the whole type. 12: no `rollups` row for a source's newest hour (``Rollups``). 13: no `type_stats`
/// (a type's longest duration is its sources' longest, from `type_sources`; its count is counted). 14: `credentials`
/// records keep issue, expiry and revocation times, label and replacement (``CredentialRecord``). 15: an encrypted
/// ledger's `rollups` sealed with AES-256-GCM under a synthetic nonce (``LedgerCipher/sealRollup(_:context:)``), not GCM-SIV.
/// 16: a series sample marked in `by_start`, `by_source`, `by_end` and `workout_members` (``StartIndexRow/seriesFlag``), its
/// rollups counting its values one by one (``SeriesValues``).
enum ProjectionLayout {
    static let current: UInt32 = 16
    /// Databases earlier layouts kept that this one does not: dropped when a ledger's projections are rebuilt for it.
    static let retiredDatabases = ["checkpoint", "changes", "type_stats"]
    static let key: [UInt8] = Array("projections".utf8)

    /// The recorded version; 1 when none is (ledgers from before the record).
    static func recorded(in snapshot: LedgerSnapshot) throws -> UInt32 {
        guard let value = try snapshot.get(key, in: snapshot.databases.meta) else { return 1 }
        guard value.count == 4 else { throw LedgerFailure.corrupted("the projection layout record is \(value.count) bytes, not 4") }
        return KeyEncoding.uint32(value, at: 0)
    }

    static func recordCurrent(in txn: Transaction, _ databases: LedgerDatabases) throws {
        var value: [UInt8] = []
        KeyEncoding.append(current, to: &value)
        try txn.put(value, forKey: key, in: databases.meta)
    }
}

/// The head of the log: the last event's sequence, hash and commit time.
struct LogHead: Sendable, Equatable {
    var sequence: UInt64
    var hash: [UInt8]
    var commitTimeUs: Int64

    static let empty = LogHead(sequence: 0, hash: EventCodec.zeroHash, commitTimeUs: Int64.min)
    static let key: [UInt8] = Array("head".utf8)

    init(sequence: UInt64, hash: [UInt8], commitTimeUs: Int64) {
        self.sequence = sequence
        self.hash = hash
        self.commitTimeUs = commitTimeUs
    }

    static func read(_ snapshot: LedgerSnapshot) throws -> LogHead {
        guard let value = try snapshot.get(key, in: snapshot.databases.meta) else { return .empty }
        guard value.count == 48 else { throw LedgerFailure.corrupted("the log head record is \(value.count) bytes, not 48") }
        return LogHead(
            sequence: KeyEncoding.uint64(value, at: 0), hash: Array(value[8..<40]),
            commitTimeUs: Int64(bitPattern: KeyEncoding.uint64(value, at: 40)))
    }

    func write(_ txn: Transaction, _ databases: LedgerDatabases) throws {
        var value: [UInt8] = []
        value.reserveCapacity(48)
        KeyEncoding.append(sequence, to: &value)
        value.append(contentsOf: hash)
        KeyEncoding.append(UInt64(bitPattern: commitTimeUs), to: &value)
        try txn.put(value, forKey: Self.key, in: databases.meta)
    }
}
