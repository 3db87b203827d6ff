import LMDB

// The rows of the indexes every saved sample gets, one type each: where every field sits in
// the key and the value is said here and nowhere else. ``Projector`` writes the rows with the
// static builders; the scans read them in place through the accessors (no copy, except a
// UUID asked for). All fields are fixed-width and big-endian (``KeyEncoding``), so LMDB's byte
// order is the order the queries need.

/// A row of a start index, read in place from a cursor's entry.
///
/// - `by_start`, every source's samples of a type in start order:
///   type(4) start(8) uuid(16) → end(8) sequence(8) value(8) source(4)
/// - `by_source`, the same per source: type(4) source(4) start(8) uuid(16) → end(8)
///   sequence(8) value(8) (by_start's value without the source, which the key holds)
///
/// `value` is a quantity sample's value in its type's canonical unit, a category sample's
/// value, or 0; in an encrypted ledger, its bits XOR the pad of the row's sequence
/// (``LedgerCipher/valuePad(sequence:)``). The stored sequence's top bit
/// (``StartIndexRow/seriesFlag``) marks a quantity series sample, whose values statistics
/// count one by one (``SeriesValues``); sequences never reach it.
struct StartIndexRow {
    /// The bit of the stored sequence that marks a series sample.
    static let seriesFlag: UInt64 = 1 << 63

    let key: UnsafeRawBufferPointer
    let valueBytes: UnsafeRawBufferPointer
    /// A row of `by_source` (the source in the key), not of `by_start`.
    let bySource: Bool
    /// The ledger's cipher, when its values are masked.
    let cipher: LedgerCipher?

    static func keyLength(bySource: Bool) -> Int { bySource ? 32 : 28 }
    static func valueLength(bySource: Bool) -> Int { bySource ? 24 : 28 }

    /// The entry as a row of `type` (and `source`, for `by_source`); nil when the entry is
    /// past the rows of that type (and source), where a scan stops.
    /// - Throws: ``LedgerFailure`` when the row's value has the wrong length.
    init?(_ entry: Cursor.Entry, type: UInt32, source: UInt32?, cipher: LedgerCipher?) throws {
        let bySource = source != nil
        guard entry.key.count == Self.keyLength(bySource: bySource), KeyEncoding.uint32(entry.key, at: 0) == type,
            source == nil || KeyEncoding.uint32(entry.key, at: 4) == source!
        else { return nil }
        let length = Self.valueLength(bySource: bySource)
        guard entry.value.count == length else {
            throw LedgerFailure.corrupted("a start-index entry is \(entry.value.count) bytes, not \(length): replay the ledger")
        }
        (key, valueBytes, self.bySource, self.cipher) = (entry.key, entry.value, bySource, cipher)
    }

    private var startOffset: Int { bySource ? 8 : 4 }

    var startUs: Int64 { KeyEncoding.time(key, at: startOffset) }
    var uuid: [UInt8] { Array(key[(startOffset + 8)..<(startOffset + 24)]) }
    var endUs: Int64 { KeyEncoding.time(valueBytes, at: 0) }
    var sequence: UInt64 { KeyEncoding.uint64(valueBytes, at: 8) & ~Self.seriesFlag }
    /// Whether the row's sample is a quantity series sample.
    var isSeries: Bool { KeyEncoding.uint64(valueBytes, at: 8) & Self.seriesFlag != 0 }
    var value: Double { Double(bitPattern: LedgerCipher.masked(KeyEncoding.uint64(valueBytes, at: 16), sequence: sequence, by: cipher)) }
    var source: UInt32 { bySource ? KeyEncoding.uint32(key, at: 4) : KeyEncoding.uint32(valueBytes, at: 24) }

    /// The row as a scan hands it on; `uuid: false` leaves the UUID empty (statistics never
    /// need it, and save an allocation per sample).
    func entry(uuid withUUID: Bool) -> IndexEntry {
        IndexEntry(uuid: withUUID ? uuid : [], startUs: startUs, endUs: endUs, sequence: sequence, source: source, value: value, isSeries: isSeries)
    }

    /// The key of a row of `by_source` when `source` is given, of `by_start` otherwise. An
    /// empty `uuid` makes the key that sorts before every row starting at `start`.
    static func key(type: UInt32, source: UInt32?, start: Int64, uuid: [UInt8]) -> InlineBytes {
        var key = InlineBytes()
        key.append(type)
        if let source { key.append(source) }
        key.appendTime(start)
        key.append(uuid)
        return key
    }

    /// The value of a row of `by_start` when `source` is given, of `by_source` otherwise;
    /// `valueBits` are the value's bits as stored (masked in an encrypted ledger).
    static func value(end: Int64, sequence: UInt64, valueBits: UInt64, source: UInt32?, series: Bool) -> InlineBytes {
        var bytes = InlineBytes()
        bytes.appendTime(end)
        bytes.append(series ? sequence | seriesFlag : sequence)
        bytes.append(valueBits)
        if let source { bytes.append(source) }
        return bytes
    }
}

/// A row of `by_end`, every source's samples of a type in end order, read in place:
/// type(4) end(8) uuid(16) → start(8) sequence(8) source(4). The sequence's top bit marks a
/// series sample, as in ``StartIndexRow``.
struct EndIndexRow {
    static let keyLength = 28
    static let valueLength = 20

    let key: UnsafeRawBufferPointer
    let valueBytes: UnsafeRawBufferPointer

    /// The entry as a row of `type`; nil when the entry is past that type's rows.
    /// - Throws: ``LedgerFailure`` when the row's value has the wrong length.
    init?(_ entry: Cursor.Entry, type: UInt32) throws {
        guard entry.key.count == Self.keyLength, KeyEncoding.uint32(entry.key, at: 0) == type else { return nil }
        guard entry.value.count == Self.valueLength else {
            throw LedgerFailure.corrupted("an end-index entry is \(entry.value.count) bytes, not \(Self.valueLength): replay the ledger")
        }
        (key, valueBytes) = (entry.key, entry.value)
    }

    var endUs: Int64 { KeyEncoding.time(key, at: 4) }
    var uuid: [UInt8] { Array(key[12..<28]) }
    var startUs: Int64 { KeyEncoding.time(valueBytes, at: 0) }
    var sequence: UInt64 { KeyEncoding.uint64(valueBytes, at: 8) & ~StartIndexRow.seriesFlag }
    var isSeries: Bool { KeyEncoding.uint64(valueBytes, at: 8) & StartIndexRow.seriesFlag != 0 }
    var source: UInt32 { KeyEncoding.uint32(valueBytes, at: 16) }

    /// The row as a scan hands it on (an end index holds no value: NaN).
    var entry: IndexEntry { IndexEntry(uuid: uuid, startUs: startUs, endUs: endUs, sequence: sequence, source: source, isSeries: isSeries) }

    /// The key of a row. An empty `uuid` makes the key that sorts before every row ending at `end`.
    static func key(type: UInt32, end: Int64, uuid: [UInt8]) -> InlineBytes {
        var key = InlineBytes()
        key.append(type)
        key.appendTime(end)
        key.append(uuid)
        return key
    }

    static func value(start: Int64, sequence: UInt64, source: UInt32, series: Bool) -> InlineBytes {
        var bytes = InlineBytes()
        bytes.appendTime(start)
        bytes.append(series ? sequence | StartIndexRow.seriesFlag : sequence)
        bytes.append(source)
        return bytes
    }
}

/// A row of a change index, read in place: what the event `sequence` did to an object of a
/// type, in log order.
///
/// `source_changes`: type(4) source(4) sequence(8) → op(1) uuid(16)
///
/// `op` is ``ChangeIndexRow/added`` for a save, ``ChangeIndexRow/removed`` for a delete; a
/// save's row is removed with the object (its delete's row stays).
struct ChangeIndexRow {
    static let added: UInt8 = 1
    static let removed: UInt8 = 2
    static let valueLength = 17
    /// type(4) source(4) sequence(8).
    static let sourceKeyLength = 16

    let sequence: UInt64
    let valueBytes: UnsafeRawBufferPointer

    /// The entry as a row under `prefix` (``prefix(type:source:)``); nil when the entry is
    /// past those rows.
    /// - Throws: ``LedgerFailure`` when the row's value has the wrong length.
    init?(_ entry: Cursor.Entry, prefix: [UInt8]) throws {
        guard entry.key.count == prefix.count + 8, entry.key.starts(with: prefix) else { return nil }
        guard entry.value.count == Self.valueLength else { throw LedgerFailure.corrupted("a change-index entry is damaged: replay the ledger") }
        sequence = KeyEncoding.uint64(entry.key, at: prefix.count)
        valueBytes = entry.value
    }

    var wasAdded: Bool { valueBytes[0] == Self.added }
    /// Where the row stands in the reader's order of changes.
    var position: ChangePosition { ChangePosition(sequence: sequence, uuidIn: valueBytes, at: 1) }

    /// type(4), then source(4) when given: the part of a row's key before its sequence.
    static func prefix(type: UInt32, source: UInt32? = nil) -> [UInt8] { KeyEncoding.typeKey(type, source: source) }

    /// The key of a row of `source_changes`.
    static func key(type: UInt32, source: UInt32, sequence: UInt64) -> InlineBytes {
        var key = InlineBytes()
        key.append(type)
        key.append(source)
        key.append(sequence)
        return key
    }

    static func value(_ op: UInt8, uuid: [UInt8]) -> InlineBytes {
        var value = InlineBytes()
        value.append(op)
        value.append(uuid)
        return value
    }
}

/// The rows saves add to the time and change indexes (`by_start`, `by_source`, `by_end`,
/// `source_changes`), held back and put in key order, each index's rows together.
///
/// Objects that interleave types (an import's records, in time order) land all over these
/// indexes: put one by one, each row would be searched for from its tree's root. In key order,
/// a row mostly lands beside the one before, on the page LMDB's cursor already holds, and the
/// pages a batch dirties are touched in one pass. The indexes end up holding the same rows
/// either way.
///
/// The rows are kept in runs by their key's first four bytes (the type); a run that arrived in
/// key order, as time-ordered data does, is put as it is, and only a run that did not is sorted.
///
/// Nothing may read these indexes in the transaction while rows are held: ``put(in:_:)``
/// runs before a delete, at the end of every request of a group commit, before the deferred
/// statistics are written, and whenever ``limit`` rows are held.
struct HeldIndexRows {
    enum Index: Int, CaseIterable {
        case byStart, bySource, byEnd, sourceChanges

        func database(in databases: LedgerDatabases) -> Database {
            switch self {
            case .byStart: databases.byStart
            case .bySource: databases.bySource
            case .byEnd: databases.byEnd
            case .sourceChanges: databases.sourceChanges
            }
        }
    }

    private struct Row {
        var key: InlineBytes
        var value: InlineBytes
    }

    /// One type's rows of one index, in the order they came, and whether that is key order.
    private struct Run {
        var rows: [Row] = []
        var inKeyOrder = true

        mutating func append(_ row: Row) {
            if inKeyOrder, let last = rows.last, !last.key.precedes(row.key) { inKeyOrder = false }
            rows.append(row)
        }

        /// Puts the rows in key order and empties the run, keeping its storage for the next.
        mutating func put(in txn: Transaction, _ database: Database) throws {
            if !inKeyOrder { rows.sort { $0.key.precedes($1.key) } }
            for row in rows { try txn.put(row.value, forKey: row.key, in: database) }
            rows.removeAll(keepingCapacity: true)
            inKeyOrder = true
        }
    }

    /// Rows held at most: past this many, ``isFull`` asks for them to be put, so that a long
    /// transaction (a replay's) holds a bounded amount of memory, reused from batch to batch.
    static let limit = 8192

    private var runs: [[UInt32: Run]] = Array(repeating: [:], count: Index.allCases.count)
    private var count = 0

    /// Whether enough rows are held that they should be put now.
    var isFull: Bool { count >= Self.limit }

    mutating func add(_ value: InlineBytes, forKey key: InlineBytes, in index: Index) {
        let type = UInt32(truncatingIfNeeded: key.leadingWords.0 >> 32)
        runs[index.rawValue][type, default: Run()].append(Row(key: key, value: value))
        count += 1
    }

    /// Puts the held rows, each index's in key order, and forgets them.
    mutating func put(in txn: Transaction, _ databases: LedgerDatabases) throws {
        guard count > 0 else { return }
        for index in Index.allCases {
            let database = index.database(in: databases)
            for type in runs[index.rawValue].keys.sorted() where !runs[index.rawValue][type]!.rows.isEmpty {
                try runs[index.rawValue][type]!.put(in: txn, database)
            }
        }
        count = 0
    }
}
