import CLMDB
import Foundation

/// An open LMDB transaction. Valid only inside the closure that received it.
///
/// Byte buffers returned by ``get(_:in:)`` and cursors point into the memory map and are
/// valid until the transaction ends; copy them (``bytes(forKey:in:)``) to keep them.
public final class Transaction {
    let handle: OpaquePointer
    public let isReadOnly: Bool
    private var finished = false
    /// A write transaction's cursors, one per database (indexed by its handle), through
    /// which it reads, puts and deletes single keys. LMDB begins a cursor's search on the
    /// page it is on when the key falls inside that page (or after the last page), so keys
    /// written near the previous one — time-ordered indexes, appends — skip the descent from
    /// the root that `mdb_put` makes every time. LMDB closes them when the transaction ends,
    /// and lends them to a nested transaction while it runs.
    private var cursors: [OpaquePointer?] = []
    /// Memory handed out by ``retain(_:)``, freed when the transaction ends.
    private var retained: [UnsafeMutableRawBufferPointer] = []
    /// For a write transaction of an environment with a ``CommitJournal``: that environment,
    /// which journals ``operations`` before the transaction commits.
    let journaling: Environment?
    /// The transaction a nested one joins when it commits.
    private let parent: Transaction?
    /// The changes made so far, when ``journaling``.
    var operations = JournalOperations()
    /// Set when a transaction too large for the journal committed without a record: the
    /// environment takes a checkpoint at once, before another transaction commits.
    private(set) var needsCheckpoint = false

    /// The environment's page size (the one its file was made with), for cursors' prefetch.
    private lazy var pageSize: UInt = {
        var stat = MDB_stat()
        guard let environment = mdb_txn_env(handle), mdb_env_stat(environment, &stat) == 0, stat.ms_psize > 0 else { return 4096 }
        return UInt(stat.ms_psize)
    }()

    /// The transaction's id: for a read-only one, the id of the last commit it sees
    /// (``Environment/lastCommittedTransaction`` when it began).
    public var id: UInt64 { UInt64(mdb_txn_id(handle)) }

    init(handle: OpaquePointer, readOnly: Bool, journaling: Environment? = nil, parent: Transaction? = nil) {
        self.handle = handle
        self.isReadOnly = readOnly
        self.journaling = readOnly ? nil : journaling
        self.parent = parent
    }

    func commit() throws {
        finished = true
        defer { releaseRetained() }
        if let parent {
            try check(mdb_txn_commit(handle), "mdb_txn_commit(nested)")
            if journaling != nil { parent.operations.append(operations) }
            return
        }
        guard let journaling, !operations.isEmpty else {
            try check(mdb_txn_commit(handle), "mdb_txn_commit")
            return
        }
        if operations.isOversized {
            // Writing it all again to the journal would cost more than syncing the data
            // file now: LMDB's pages are synced by the checkpoint that follows.
            try check(mdb_txn_commit(handle), "mdb_txn_commit")
            needsCheckpoint = true
            return
        }
        do {
            try journaling.journal(operations)
        } catch {
            mdb_txn_abort(handle)
            throw error
        }
        let result = mdb_txn_commit(handle)
        if result != MDB_SUCCESS {
            // Never redo what did not commit; if even that fails, the environment stops
            // journaling rather than risk it (see ``Environment/withdrawJournalRecord()``).
            journaling.withdrawJournalRecord()
            try check(result, "mdb_txn_commit")
        }
    }

    func abort() {
        guard !finished else { return }
        finished = true
        mdb_txn_abort(handle)
        releaseRetained()
    }

    deinit { releaseRetained() }

    /// Copies `bytes` into memory the transaction owns until it ends, and returns a view of
    /// it: for values a reader derives from what it read (an opened sealed value), which then
    /// live exactly as long as the views LMDB itself returns.
    public func retain(_ bytes: some ContiguousBytes) -> UnsafeRawBufferPointer {
        bytes.withUnsafeBytes { source in
            let copy = retainedBuffer(count: source.count)
            if let base = source.baseAddress { copy.baseAddress!.copyMemory(from: base, byteCount: source.count) }
            return UnsafeRawBufferPointer(copy)
        }
    }

    /// `count` bytes of memory the transaction owns until it ends, for the caller to fill.
    public func retainedBuffer(count: Int) -> UnsafeMutableRawBufferPointer {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 8)
        retained.append(buffer)
        return UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
    }

    private func releaseRetained() {
        for buffer in retained { buffer.deallocate() }
        retained.removeAll()
    }

    /// Runs `body` in a nested write transaction: its changes join this transaction if
    /// `body` returns, and are discarded if it throws (this transaction stays usable).
    public func nested<R>(_ body: (Transaction) throws -> R) throws -> R {
        var child: OpaquePointer?
        try check(mdb_txn_begin(mdb_txn_env(handle), handle, 0, &child), "mdb_txn_begin(nested)")
        let txn = Transaction(handle: child!, readOnly: false, journaling: journaling, parent: self)
        do {
            let result = try body(txn)
            try txn.commit()
            return result
        } catch {
            txn.abort()
            throw error
        }
    }

    /// This write transaction's cursor on `database`, opened on first use.
    private func cursor(on database: Database) throws -> OpaquePointer {
        precondition(!isReadOnly, "a read-only transaction's cursors are not closed with it")
        let index = Int(database.dbi)
        if index < cursors.count, let cursor = cursors[index] { return cursor }
        if index >= cursors.count { cursors.append(contentsOf: repeatElement(nil, count: index + 1 - cursors.count)) }
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, database.dbi, &cursor), "mdb_cursor_open(\(database.name))")
        cursors[index] = cursor
        return cursor!
    }

    // The generic entry points below are inlinable shims over the byte-buffer versions:
    // called from another module, a generic function runs unspecialized, through witness
    // tables and a closure per key, and the ledger makes several of these calls per object.

    /// The value for `key`, pointing into the map, or nil.
    @inlinable
    public func get(_ key: some ContiguousBytesKey, in database: Database) throws -> UnsafeRawBufferPointer? {
        try key.withKeyBytes { try get(keyBytes: $0, in: database) }
    }

    @usableFromInline
    func get(keyBytes keyBuffer: UnsafeRawBufferPointer, in database: Database) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: keyBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: keyBuffer.baseAddress))
        var v = MDB_val()
        let result = isReadOnly ? mdb_get(handle, database.dbi, &k, &v) : mdb_cursor_get(try cursor(on: database), &k, &v, MDB_SET_KEY)
        if result == MDB_NOTFOUND { return nil }
        try check(result, "mdb_get(\(database.name))")
        return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    }

    /// A copy of the value for `key`, or nil.
    @inlinable
    public func bytes(forKey key: some ContiguousBytesKey, in database: Database) throws -> [UInt8]? {
        try get(key, in: database).map { Array($0) }
    }

    /// Whether `key` is present.
    @inlinable
    public func contains(_ key: some ContiguousBytesKey, in database: Database) throws -> Bool {
        try get(key, in: database) != nil
    }

    /// Stores `value` under `key`. With `append`, the key must sort after every existing key
    /// (a fast path for monotonically increasing keys).
    @inlinable
    public func put(
        _ value: some ContiguousBytesKey, forKey key: some ContiguousBytesKey, in database: Database,
        append: Bool = false
    ) throws {
        try key.withKeyBytes { keyBuffer in
            try value.withKeyBytes { try put(valueBytes: $0, keyBytes: keyBuffer, in: database, append: append) }
        }
    }

    @usableFromInline
    func put(valueBytes valueBuffer: UnsafeRawBufferPointer, keyBytes keyBuffer: UnsafeRawBufferPointer, in database: Database, append: Bool) throws {
        var k = MDB_val(mv_size: keyBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: keyBuffer.baseAddress))
        var v = MDB_val(mv_size: valueBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: valueBuffer.baseAddress))
        try check(mdb_cursor_put(try cursor(on: database), &k, &v, append ? UInt32(MDB_APPEND) : 0), "mdb_put(\(database.name))")
        if journaling != nil { operations.put(keyBuffer, valueBuffer, in: database.name) }
    }

    /// Removes `key`; returns whether it was present.
    @inlinable @discardableResult
    public func delete(_ key: some ContiguousBytesKey, in database: Database) throws -> Bool {
        try key.withKeyBytes { try delete(keyBytes: $0, in: database) }
    }

    @usableFromInline
    func delete(keyBytes keyBuffer: UnsafeRawBufferPointer, in database: Database) throws -> Bool {
        var k = MDB_val(mv_size: keyBuffer.count, mv_data: UnsafeMutableRawPointer(mutating: keyBuffer.baseAddress))
        if isReadOnly {
            // No kept cursors here: LMDB itself answers (it refuses, EACCES).
            let result = mdb_del(handle, database.dbi, &k, nil)
            if result == MDB_NOTFOUND { return false }
            try check(result, "mdb_del(\(database.name))")
            return true
        }
        var v = MDB_val()
        let cursor = try cursor(on: database)
        let result = mdb_cursor_get(cursor, &k, &v, MDB_SET)
        if result == MDB_NOTFOUND { return false }
        try check(result, "mdb_del(\(database.name))")
        try check(mdb_cursor_del(cursor, 0), "mdb_del(\(database.name))")
        if journaling != nil { operations.delete(keyBuffer, in: database.name) }
        return true
    }

    /// Removes every entry of `database`.
    public func removeAll(in database: Database) throws {
        try check(mdb_drop(handle, database.dbi, 0), "mdb_drop(\(database.name))")
        if journaling != nil { operations.removeAll(in: database.name) }
    }

    /// Number of entries in `database`.
    public func count(in database: Database) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(handle, database.dbi, &stat), "mdb_stat(\(database.name))")
        return stat.ms_entries
    }

    /// Opens a cursor over `database`, closed when `body` returns.
    public func withCursor<R>(on database: Database, _ body: (Cursor) throws -> R) throws -> R {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(handle, database.dbi, &cursor), "mdb_cursor_open(\(database.name))")
        defer { mdb_cursor_close(cursor) }
        return try body(Cursor(handle: cursor!, database: database, pageSize: pageSize, transaction: self))
    }

    /// Opens `count` cursors over `database` (walks side by side, as a merge of key ranges
    /// needs), all closed when `body` returns.
    public func withCursors<R>(on database: Database, count: Int, _ body: ([Cursor]) throws -> R) throws -> R {
        var handles: [OpaquePointer] = []
        defer { for handle in handles { mdb_cursor_close(handle) } }
        for _ in 0..<count {
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(handle, database.dbi, &cursor), "mdb_cursor_open(\(database.name))")
            handles.append(cursor!)
        }
        let pageSize = pageSize
        return try body(handles.map { Cursor(handle: $0, database: database, pageSize: pageSize, transaction: self) })
    }

    /// Visits, in key order, the entries of `database` whose keys are `keyLength` bytes and
    /// start with `prefix`, until `visit` returns false.
    public func forEach(
        prefix: [UInt8], keyLength: Int, in database: Database, _ visit: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try withCursor(on: database) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.count == keyLength, current.key.starts(with: prefix) {
                guard try visit(current.key, current.value) else { return }
                entry = try cursor.next()
            }
        }
    }
}

@available(*, unavailable)
extension Transaction: Sendable {}

/// Something whose bytes can serve as an LMDB key or value.
public protocol ContiguousBytesKey {
    func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousBytesKey where Element == UInt8 {
    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(body)
    }
}

extension ArraySlice: ContiguousBytesKey where Element == UInt8 {
    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(body)
    }
}

extension UnsafeRawBufferPointer: ContiguousBytesKey {
    public func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(self)
    }
}
