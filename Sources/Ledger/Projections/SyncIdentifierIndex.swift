import Crypto
import LMDB

/// `sync_ids`: which stored object holds each (source, type, sync identifier), and at which
/// sync version (SEMANTICS §4: a save with the same identifier and a higher version replaces
/// it, an equal or lower one is ignored).
///
/// A key is the source code (4 bytes, ``SourceRegistry``), the type code (4), then the
/// identifier's UTF-8 when it is at most ``longestInKey`` bytes, or 0xFF followed by the
/// SHA-256 of a longer one (UTF-8 never holds 0xFF, so the two forms cannot meet). Keys are
/// in the identifiers' own order, so identifiers that grow with time (an import's, many
/// apps' record ids) are written to the end of their source's and type's range: a batch of
/// saves rewrites a few pages of the index, not one page per object as hashed keys did. The
/// value is the object's UUID (16 bytes) and its sync version (8, big-endian, two's complement).
enum SyncIdentifierIndex {
    static let longestInKey = 400

    static func key(source: UInt32, type: UInt32, identifier: String) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(8 + min(identifier.utf8.count, longestInKey))
        KeyEncoding.append(source, to: &key)
        KeyEncoding.append(type, to: &key)
        if identifier.utf8.count <= longestInKey {
            key.append(contentsOf: identifier.utf8)
        } else {
            key.append(0xFF)
            key.append(contentsOf: SHA256.hash(data: Array(identifier.utf8)))
        }
        return key
    }

    /// The object holding `object`'s sync identifier in its source and type, and its sync
    /// version; nil when the object has no sync identifier or no object holds it.
    static func holder(of object: ObjectSummary, in context: WriteContext) throws -> (uuid: [UInt8], version: Int64)? {
        guard let identifier = object.syncIdentifier,
            let source = try context.stats.existingSourceCode(bundle: object.sourceBundle, in: context.reads),
            let entry = try context.txn.get(key(source: source, type: object.typeCode, identifier: identifier), in: context.databases.syncIdentifiers)
        else { return nil }
        guard entry.count == 24 else { throw LedgerFailure.corrupted("a sync_ids entry is \(entry.count) bytes, not 24") }
        return (Array(entry[0..<16]), Int64(bitPattern: KeyEncoding.uint64(entry, at: 16)))
    }

    /// Records that the object just saved, of source code `source`, holds its sync identifier.
    static func record(_ object: ObjectSummary, source: UInt32, in txn: Transaction, _ databases: LedgerDatabases) throws {
        guard let identifier = object.syncIdentifier else { return }
        var value = object.uuid
        KeyEncoding.append(UInt64(bitPattern: object.syncVersion ?? 0), to: &value)
        try txn.put(value, forKey: key(source: source, type: object.typeCode, identifier: identifier), in: databases.syncIdentifiers)
    }

    /// Forgets the deleted object's sync identifier, unless another object holds it now.
    static func remove(_ object: ObjectSummary, uuid: [UInt8], source: UInt32, in txn: Transaction, _ databases: LedgerDatabases) throws {
        guard let identifier = object.syncIdentifier else { return }
        let key = key(source: source, type: object.typeCode, identifier: identifier)
        if let entry = try txn.get(key, in: databases.syncIdentifiers), entry.count >= 16, entry[0..<16].elementsEqual(uuid) {
            try txn.delete(key, in: databases.syncIdentifiers)
        }
    }
}
