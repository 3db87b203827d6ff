import Crypto
import LMDB

/// `sync_ids`: which stored object holds each (source, type, sync identifier), and at which
/// sync version (docs/SEMANTICS.md §4: a save with the same identifier and a higher version replaces
/// it, an equal or lower one is ignored).
///
/// A key is the source code (4 bytes, ``SourceRegistry``), the type code (4), then the
/// identifier's UTF-8 when it is at most ``longestInKey`` bytes, or 0xFF followed by the
/// SHA-256 of a longer one (UTF-8 never holds 0xFF, so the two forms cannot meet). Keys are
/// in the identifiers' own order, so identifiers that grow with time (an import's, many
/// apps' record ids) are written to the end of their source's and type's range: a batch of
/// saves rewrites a few pages of the index, not one page per object as hashed keys did. The
/// value is the object's UUID (16 bytes) and its sync version (8, big-endian, two's complement).
///
/// In an encrypted ledger the identifier (an app's metadata) is never in a key: 0xFE and its
/// HMAC under a key derived from the ledger's data key (``LedgerCipher/keyedDigest(_:)``) stand for it.
enum SyncIdentifierIndex {
    static let longestInKey = 400

    static func key(source: UInt32, type: UInt32, identifier: String, cipher: LedgerCipher?) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(8 + min(identifier.utf8.count, longestInKey))
        KeyEncoding.append(source, to: &key)
        KeyEncoding.append(type, to: &key)
        if let cipher {
            key.append(0xFE)
            key.append(contentsOf: cipher.keyedDigest(Array(identifier.utf8)))
        } else if identifier.utf8.count <= longestInKey {
            key.append(contentsOf: identifier.utf8)
        } else {
            key.append(0xFF)
            key.append(contentsOf: SHA256.hash(data: Array(identifier.utf8)))
        }
        return key
    }

    /// The object holding `object`'s sync identifier in its source and type, and its sync
    /// version; nil when the object has no sync identifier or no object holds it.
    ///
    /// An identifier whose key sorts after every key of its source's and type's range is held
    /// by no one, and is answered without a look-up (``SyncKeyBounds``): an import's
    /// identifiers, like many apps' record ids, grow with time, so most are.
    static func holder(of object: ObjectSummary, in context: WriteContext) throws -> (uuid: [UInt8], version: Int64)? {
        guard let identifier = object.syncIdentifier,
            let source = try context.stats.existingSourceCode(bundle: object.sourceBundle, in: context.reads)
        else { return nil }
        let key = key(source: source, type: object.typeCode, identifier: identifier, cipher: context.databases.cipher)
        if try context.stats.syncKeyBounds.isPast(key, source: source, type: object.typeCode, in: context.txn, context.databases) { return nil }
        guard let entry = try context.txn.get(key, in: context.databases.syncIdentifiers) else { return nil }
        guard entry.count == 24 else { throw LedgerFailure.corrupted("a sync_ids entry is \(entry.count) bytes, not 24") }
        return (Array(entry[0..<16]), Int64(bitPattern: KeyEncoding.uint64(entry, at: 16)))
    }

    /// Records that the object just saved, of source code `source`, holds its sync identifier.
    static func record(_ object: ObjectSummary, source: UInt32, in txn: Transaction, _ databases: LedgerDatabases, bounds: inout SyncKeyBounds) throws {
        guard let identifier = object.syncIdentifier else { return }
        var value = object.uuid
        KeyEncoding.append(UInt64(bitPattern: object.syncVersion ?? 0), to: &value)
        let key = key(source: source, type: object.typeCode, identifier: identifier, cipher: databases.cipher)
        try txn.put(value, forKey: key, in: databases.syncIdentifiers)
        bounds.note(key, source: source, type: object.typeCode)
    }

    /// Forgets the deleted object's sync identifier, unless another object holds it now.
    static func remove(_ object: ObjectSummary, uuid: [UInt8], source: UInt32, in txn: Transaction, _ databases: LedgerDatabases) throws {
        guard let identifier = object.syncIdentifier else { return }
        let key = key(source: source, type: object.typeCode, identifier: identifier, cipher: databases.cipher)
        if let entry = try txn.get(key, in: databases.syncIdentifiers), entry.count >= 16, entry[0..<16].elementsEqual(uuid) {
            try txn.delete(key, in: databases.syncIdentifiers)
        }
    }
}

/// For each (source, type) whose `sync_ids` range a write transaction has looked at, a key no
/// smaller than any key in that range: the range's last key when first asked, raised as the
/// transaction puts keys past it. A delete leaves it where it is, still an upper bound, and a
/// request rolled back restores it with the rest of ``DeferredProjections``.
struct SyncKeyBounds {
    private var bounds: [UInt64: [UInt8]] = [:]

    /// Whether `key` (of `source` and `type`) sorts after every key of its range, so that no
    /// object holds it.
    mutating func isPast(_ key: [UInt8], source: UInt32, type: UInt32, in txn: Transaction, _ databases: LedgerDatabases) throws -> Bool {
        let range = UInt64(source) << 32 | UInt64(type)
        if let bound = bounds[range] { return Self.sortsAfter(key, bound) }
        let bound = try Self.lastKey(of: range, in: txn, databases)
        bounds[range] = bound
        return Self.sortsAfter(key, bound)
    }

    /// A key just put: the bound rises to it when the range's bound is known and below it.
    mutating func note(_ key: [UInt8], source: UInt32, type: UInt32) {
        let range = UInt64(source) << 32 | UInt64(type)
        if let bound = bounds[range], Self.sortsAfter(key, bound) { bounds[range] = key }
    }

    /// The range's last key, or its prefix alone when it is empty (every key of the range,
    /// its identifier never empty, sorts after that).
    private static func lastKey(of range: UInt64, in txn: Transaction, _ databases: LedgerDatabases) throws -> [UInt8] {
        var prefix: [UInt8] = []
        KeyEncoding.append(range, to: &prefix)
        return try txn.withCursor(on: databases.syncIdentifiers) { cursor in
            let last: Cursor.Entry?
            if range == .max {
                last = try cursor.last()
            } else {
                var next: [UInt8] = []
                KeyEncoding.append(range + 1, to: &next)
                last = try cursor.seek(atLeast: next) != nil ? cursor.previous() : cursor.last()
            }
            guard let last, last.key.starts(with: prefix) else { return prefix }
            return Array(last.key)
        }
    }

    /// Whether `key` sorts after `bound` in LMDB's order.
    private static func sortsAfter(_ key: [UInt8], _ bound: [UInt8]) -> Bool {
        key.withUnsafeBytes { key in bound.withUnsafeBytes { KeyEncoding.precedes($0, key) } }
    }
}
