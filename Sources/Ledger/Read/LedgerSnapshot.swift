import LMDB

/// One transaction's view of a ledger's databases: the one value a read takes, as GRDB hands
/// one `Database` to its closures, instead of a transaction and the database handles passed
/// side by side.
///
/// ``Ledger/read(_:)`` opens one on a read transaction; a write reads through its context's
/// (``WriteContext/reads``), which sees the write's own changes. Like the transaction under
/// it, a snapshot is valid only inside the closure that made it, and on its thread.
///
/// ```swift
/// let head = try ledger.read { snapshot in try LogHead.read(snapshot) }
/// ```
struct LedgerSnapshot {
    /// The transaction the view reads through.
    let txn: Transaction
    /// The ledger's database handles.
    let databases: LedgerDatabases

    init(_ txn: Transaction, _ databases: LedgerDatabases) {
        (self.txn, self.databases) = (txn, databases)
    }

    /// The value under `key` in `database`, valid until the transaction ends.
    func get(_ key: some ContiguousBytesKey, in database: Database) throws -> UnsafeRawBufferPointer? {
        try txn.get(key, in: database)
    }

    /// Visits the entries of `database` whose keys start with `prefix` and are `keyLength`
    /// bytes long, in key order, until `visit` returns false.
    func forEach(
        prefix: [UInt8], keyLength: Int, in database: Database,
        _ visit: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try txn.forEach(prefix: prefix, keyLength: keyLength, in: database, visit)
    }

    /// Whether `database` holds `key`.
    func contains(_ key: some ContiguousBytesKey, in database: Database) throws -> Bool {
        try txn.contains(key, in: database)
    }

    /// Runs `body` with a cursor on `database`, closed when it returns.
    func withCursor<Result>(on database: Database, _ body: (Cursor) throws -> Result) throws -> Result {
        try txn.withCursor(on: database, body)
    }
}

@available(*, unavailable)
extension LedgerSnapshot: Sendable {}

extension Ledger {
    /// Runs `body` on a snapshot of the ledger as last committed, in one read transaction.
    func read<Result>(_ body: (LedgerSnapshot) throws -> Result) throws -> Result {
        try environment.read(databases, body)
    }
}

extension Environment {
    /// Runs `body` on a snapshot of the ledger whose handles are `databases`, in one read
    /// transaction of this environment.
    func read<Result>(_ databases: LedgerDatabases, _ body: (LedgerSnapshot) throws -> Result) throws -> Result {
        try read { txn in try body(LedgerSnapshot(txn, databases)) }
    }
}
