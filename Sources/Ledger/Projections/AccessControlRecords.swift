import HealthModel
import LMDB

/// Source codes: a 4-byte number per source (bundle id), assigned in the order sources
/// first save, so the time indexes can name an object's source in 4 bytes and reads can
/// tell an app's own objects from others' without loading them.
///
/// `sources` keys: `b` bundle → code(4) name; `c` code(4) → bundle; `n` → the last code(4).
/// Code 0 means "no source" (an app that never saved anything).
enum SourceRegistry {
    static func code(of bundle: String, in snapshot: LedgerSnapshot) throws -> UInt32? {
        guard let stored = try snapshot.get(Array("b".utf8) + Array(bundle.utf8), in: snapshot.databases.sources), stored.count >= 4 else { return nil }
        return KeyEncoding.uint32(stored, at: 0)
    }

    /// The code of `bundle`, assigning the next one on its first save.
    static func assign(bundle: String, name: String, in txn: Transaction, _ databases: LedgerDatabases) throws -> UInt32 {
        if let code = try code(of: bundle, in: LedgerSnapshot(txn, databases)) { return code }
        let last = try txn.get(Array("n".utf8), in: databases.sources).map { KeyEncoding.uint32($0, at: 0) } ?? 0
        let code = last + 1
        var value: [UInt8] = []
        KeyEncoding.append(code, to: &value)
        try txn.put(value, forKey: Array("n".utf8), in: databases.sources)
        try txn.put(value + Array(name.utf8), forKey: Array("b".utf8) + Array(bundle.utf8), in: databases.sources)
        try txn.put(Array(bundle.utf8), forKey: Array("c".utf8) + value, in: databases.sources)
        return code
    }

    static func source(code: UInt32, in snapshot: LedgerSnapshot) throws -> Source? {
        var key = Array("c".utf8)
        KeyEncoding.append(code, to: &key)
        guard let bundle = try snapshot.get(key, in: snapshot.databases.sources).map({ String(decoding: $0, as: UTF8.self) }) else { return nil }
        return try source(bundle: bundle, in: snapshot)
    }

    static func source(bundle: String, in snapshot: LedgerSnapshot) throws -> Source? {
        guard let stored = try snapshot.get(Array("b".utf8) + Array(bundle.utf8), in: snapshot.databases.sources), stored.count >= 4 else { return nil }
        return Source(bundleIdentifier: bundle, name: String(decoding: stored[4...], as: UTF8.self))
    }

    /// Records that `code` saved an object of `type` lasting `duration` microseconds: the
    /// first save (the default priority order is the order of first saves) and the longest
    /// duration (bounds the source's range scans).
    ///
    /// - Returns: the longest duration recorded now.
    static func noteSave(type: UInt32, code: UInt32, sequence: UInt64, duration: Int64, in txn: Transaction, _ databases: LedgerDatabases) throws -> Int64 {
        let key = typeSourceKey(type: type, code: code)
        var first = sequence
        if let stored = try txn.get(key, in: databases.typeSources) {
            guard stored.count == 16 else { throw LedgerFailure.corrupted("a type_sources entry is \(stored.count) bytes, not 16: replay the ledger") }
            let longest = Int64(bitPattern: KeyEncoding.uint64(stored, at: 8))
            guard duration > longest else { return longest }
            first = KeyEncoding.uint64(stored, at: 0)
        }
        var value: [UInt8] = []
        value.reserveCapacity(16)
        KeyEncoding.append(first, to: &value)
        KeyEncoding.append(UInt64(bitPattern: max(duration, 0)), to: &value)
        try txn.put(value, forKey: key, in: databases.typeSources)
        return max(duration, 0)
    }

    /// The longest duration (microseconds) of the samples of `type` that `code` saved.
    static func longestDuration(type: UInt32, code: UInt32, in snapshot: LedgerSnapshot) throws -> Int64 {
        guard let stored = try snapshot.get(typeSourceKey(type: type, code: code), in: snapshot.databases.typeSources), stored.count == 16 else { return 0 }
        return Int64(bitPattern: KeyEncoding.uint64(stored, at: 8))
    }

    /// The longest duration (microseconds) of the samples of `type` any source ever saved: bounds
    /// a scan of the type's time indexes (a sample can start that long before a range).
    static func longestDuration(type: UInt32, in snapshot: LedgerSnapshot) throws -> Int64 {
        var longest: Int64 = 0
        try snapshot.forEach(prefix: KeyEncoding.typeKey(type), keyLength: 8, in: snapshot.databases.typeSources) { _, value in
            guard value.count == 16 else { throw LedgerFailure.corrupted("a type_sources entry is \(value.count) bytes, not 16: replay the ledger") }
            longest = max(longest, Int64(bitPattern: KeyEncoding.uint64(value, at: 8)))
            return true
        }
        return longest
    }

    private static func typeSourceKey(type: UInt32, code: UInt32) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(8)
        KeyEncoding.append(type, to: &key)
        KeyEncoding.append(code, to: &key)
        return key
    }

    /// The sources that saved objects of `type`, in the order of their first save.
    static func sources(of type: UInt32, in snapshot: LedgerSnapshot) throws -> [Source] {
        var prefix: [UInt8] = []
        KeyEncoding.append(type, to: &prefix)
        var firsts: [(sequence: UInt64, code: UInt32)] = []
        try snapshot.withCursor(on: snapshot.databases.typeSources) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.count == 8, current.key.starts(with: prefix) {
                firsts.append((KeyEncoding.uint64(current.value, at: 0), KeyEncoding.uint32(current.key, at: 4)))
                entry = try cursor.next()
            }
        }
        return try firsts.sorted { $0.sequence < $1.sequence }.compactMap { try source(code: $0.code, in: snapshot) }
    }
}

/// The stored state of one (app, type, direction) pair.
///
/// Value: requested(1) decision(1, 0 = none) request sequence(8) decision sequence(8)
/// range flags(1: bit 0 start, bit 1 end) start(8) end(8): the range is a per-object read
/// request's.
struct AuthorizationRecord: Equatable {
    var requested = false
    var decision: AuthorizationDecision?
    var requestSequence: UInt64 = 0
    var decisionSequence: UInt64 = 0
    var rangeStartUs: Int64?
    var rangeEndUs: Int64?

    init() {}

    init?(_ stored: UnsafeRawBufferPointer) {
        guard stored.count == 35 else { return nil }
        requested = stored[0] == 1
        decision = AuthorizationDecision(rawValue: stored[1])
        requestSequence = KeyEncoding.uint64(stored, at: 2)
        decisionSequence = KeyEncoding.uint64(stored, at: 10)
        if stored[18] & 1 != 0 { rangeStartUs = Int64(bitPattern: KeyEncoding.uint64(stored, at: 19)) }
        if stored[18] & 2 != 0 { rangeEndUs = Int64(bitPattern: KeyEncoding.uint64(stored, at: 27)) }
    }

    var encoded: [UInt8] {
        var value: [UInt8] = [requested ? 1 : 0, decision?.rawValue ?? 0]
        value.reserveCapacity(35)
        KeyEncoding.append(requestSequence, to: &value)
        KeyEncoding.append(decisionSequence, to: &value)
        value.append((rangeStartUs == nil ? 0 : 1) | (rangeEndUs == nil ? 0 : 2))
        KeyEncoding.append(UInt64(bitPattern: rangeStartUs ?? 0), to: &value)
        KeyEncoding.append(UInt64(bitPattern: rangeEndUs ?? 0), to: &value)
        return value
    }

    /// The key of a pair: app bundle (length-prefixed) direction(1) type(4).
    static func key(app: String, direction: AuthorizationDirection, type: UInt32) -> [UInt8] {
        var key = appPrefix(app)
        key.append(direction.rawValue)
        KeyEncoding.append(type, to: &key)
        return key
    }

    /// A bundle id as a key prefix: length(1) bytes. Bundle ids are at most 255 bytes.
    static func appPrefix(_ app: String) -> [UInt8] {
        let bytes = Array(app.utf8.prefix(255))
        return [UInt8(bytes.count)] + bytes
    }

    static func load(app: String, direction: AuthorizationDirection, type: UInt32, in snapshot: LedgerSnapshot) throws
        -> AuthorizationRecord
    {
        guard let stored = try snapshot.get(key(app: app, direction: direction, type: type), in: snapshot.databases.authorizations) else { return AuthorizationRecord() }
        guard let record = AuthorizationRecord(stored) else { throw LedgerFailure.corrupted("an authorization record of '\(app)' is damaged") }
        return record
    }

    func store(app: String, direction: AuthorizationDirection, type: UInt32, in txn: Transaction, _ databases: LedgerDatabases) throws {
        try txn.put(encoded, forKey: Self.key(app: app, direction: direction, type: type), in: databases.authorizations)
    }

    /// The key prefix of the objects selected for `app`: app bundle (length-prefixed) type(4);
    /// each key adds the uuid(16).
    static func selectionPrefix(app: String, type: UInt32) -> [UInt8] {
        var key = appPrefix(app)
        KeyEncoding.append(type, to: &key)
        return key
    }

    /// The UUIDs the owner selected for `app` to read, in byte order.
    static func selection(app: String, type: UInt32, in snapshot: LedgerSnapshot) throws -> [[UInt8]] {
        try SelectionEntry.all(app: app, type: type, in: snapshot).filter(\.selected).map(\.uuid)
    }
}

/// An object that is, or was, in an app's per-object read selection (`object_reads`), and
/// the sequence since which it is in that state: the selection event, or for a deselected
/// object that is gone, the event that deleted it. Anchored queries report selected objects
/// as added and deselected ones as deleted at that sequence.
struct SelectionEntry {
    var uuid: [UInt8]
    var selected: Bool
    var sequence: UInt64

    static func value(selected: Bool, sequence: UInt64) -> [UInt8] {
        var value: [UInt8] = [selected ? 1 : 2]
        KeyEncoding.append(sequence, to: &value)
        return value
    }

    /// Every entry of `app` and `type`, in UUID byte order.
    static func all(app: String, type: UInt32, in snapshot: LedgerSnapshot) throws -> [SelectionEntry] {
        let prefix = AuthorizationRecord.selectionPrefix(app: app, type: type)
        var entries: [SelectionEntry] = []
        try snapshot.forEach(prefix: prefix, keyLength: prefix.count + 16, in: snapshot.databases.objectReads) { key, value in
            guard value.count == 9, value[0] == 1 || value[0] == 2 else {
                throw LedgerFailure.corrupted("an object_reads entry of '\(app)' is damaged: replay the ledger")
            }
            entries.append(SelectionEntry(uuid: Array(key[prefix.count...]), selected: value[0] == 1, sequence: KeyEncoding.uint64(value, at: 1)))
            return true
        }
        return entries
    }
}
