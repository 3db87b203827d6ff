import CLMDB

/// A position in a database, valid inside ``Transaction/withCursor(on:_:)``.
///
/// Each move returns the entry it lands on (key and value pointing into the map) or nil
/// at either end.
public final class Cursor {
    public typealias Entry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

    let handle: OpaquePointer
    let database: Database
    /// The environment's page size (a power of two).
    private let pageSize: UInt
    /// The page of the last entry read (its address rounded down to a page).
    private var page: UInt = 0
    /// The transaction the cursor moves in (its deletes are journaled there).
    private unowned let transaction: Transaction

    init(handle: OpaquePointer, database: Database, pageSize: UInt, transaction: Transaction) {
        self.handle = handle
        self.database = database
        self.pageSize = pageSize
        self.transaction = transaction
    }

    @usableFromInline
    func move(_ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws -> Entry? {
        var k = MDB_val(mv_size: key?.count ?? 0, mv_data: UnsafeMutableRawPointer(mutating: key?.baseAddress))
        var v = MDB_val()
        let result = mdb_cursor_get(handle, &k, &v, op)
        if result == MDB_NOTFOUND { return nil }
        try check(result, "mdb_cursor_get(\(database.name))")
        // Entering another page, ask the processor for all of it at once: a scan then finds
        // the rest of the page's entries in cache rather than waiting on memory for each one
        // in turn (most of a long scan's time, measured). Only a hint: it never faults.
        // (A write transaction's changed pages are copies in memory, not aligned to a page:
        // there the hint covers part of one and part of its neighbour, and is merely weaker.)
        let start = UInt(bitPattern: k.mv_data) & ~(pageSize - 1)
        if start != page {
            page = start
            healthledger_prefetch(UnsafeRawPointer(bitPattern: start), Int(pageSize))
        }
        return (UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
                UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    public func first() throws -> Entry? { try move(MDB_FIRST) }
    public func last() throws -> Entry? { try move(MDB_LAST) }
    public func next() throws -> Entry? { try move(MDB_NEXT) }
    public func previous() throws -> Entry? { try move(MDB_PREV) }

    /// Moves to the first entry whose key is ≥ `key`.
    @inlinable
    public func seek(atLeast key: some ContiguousBytesKey) throws -> Entry? {
        try key.withKeyBytes { try move(MDB_SET_RANGE, key: $0) }
    }

    /// Moves to the entry whose key is `key`, nil when there is none. From a placed cursor,
    /// LMDB looks in the page it is on first when the key falls within it: lookups in key
    /// order skip most descents from the root.
    @inlinable
    public func seek(exactly key: some ContiguousBytesKey) throws -> Entry? {
        try key.withKeyBytes { try move(MDB_SET_KEY, key: $0) }
    }

    /// Moves to the last entry whose key is ≤ `key`.
    public func seek(atMost key: some ContiguousBytesKey) throws -> Entry? {
        let keyBytes = key.withKeyBytes { Array($0) }
        guard let entry = try seek(atLeast: keyBytes) else { return try last() }
        if entry.key.elementsEqual(keyBytes) { return entry }
        return try previous()
    }

    /// Deletes the entry under the cursor.
    public func deleteCurrent() throws {
        guard transaction.journaling != nil, !transaction.operations.isOversized else {
            try check(mdb_cursor_del(handle, 0), "mdb_cursor_del(\(database.name))")
            return
        }
        var key = MDB_val()
        var value = MDB_val()
        try check(mdb_cursor_get(handle, &key, &value, MDB_GET_CURRENT), "mdb_cursor_get(\(database.name))")
        // The key points into the page the delete changes: copy it first.
        let deleted = Array(UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size))
        try check(mdb_cursor_del(handle, 0), "mdb_cursor_del(\(database.name))")
        deleted.withUnsafeBytes { transaction.operations.delete($0, in: database.name) }
    }
}

@available(*, unavailable)
extension Cursor: Sendable {}
