import LMDB

/// An object's entry in `objects`: its save event and its type and source codes, so that
/// reads and deletes check the reader's scope before loading the object.
///
/// Value: sequence(8) type(4) source(4).
struct StoredObject: Sendable, Equatable {
    /// The sequence of the event that saved the object.
    var sequence: UInt64
    var type: UInt32
    var source: UInt32

    init(sequence: UInt64, type: UInt32, source: UInt32) {
        self.sequence = sequence
        self.type = type
        self.source = source
    }

    var encoded: InlineBytes {
        var value = InlineBytes()
        value.append(sequence)
        value.append(type)
        value.append(source)
        return value
    }

    /// The entry of `uuid`, or nil when no such object is stored (never saved, or deleted).
    static func load(_ uuid: [UInt8], in snapshot: LedgerSnapshot) throws -> StoredObject? {
        guard let value = try snapshot.get(uuid, in: snapshot.databases.objects) else { return nil }
        guard value.count == 16 else { throw LedgerFailure.corrupted("an objects entry is \(value.count) bytes, not 16: replay the ledger") }
        return StoredObject(sequence: KeyEncoding.uint64(value, at: 0), type: KeyEncoding.uint32(value, at: 8), source: KeyEncoding.uint32(value, at: 12))
    }
}
