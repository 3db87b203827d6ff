import CSQLite
import Foundation

/// A SQLite database file in its own directory: WAL journal, `synchronous=FULL` (every commit
/// reaches the disk), the benchmark schema.
///
/// SQLite allows one writer at a time, so the peer's connections take one shared lock around
/// each write transaction (how one process normally shares a database file); readers do not take
/// it. Every connection also sets a busy timeout, as a safety net against other processes.
public final class SQLitePeer: PeerDatabase {
    /// `"SQLite "` and the library's version (`sqlite3_libversion()`).
    public let name: String
    /// The directory holding the database file and its `-wal` and `-shm` files.
    private let directory: URL
    /// The database file.
    let path: String
    /// Serialises the write transactions of all connections to this database. A pthread mutex
    /// (`NSLock`): with dozens of writers on few cores it measured faster than `Mutex` of the
    /// Synchronization module, whose Linux priority-inheritance futex hands the lock over in strict order.
    let writeLock = NSLock()

    private init(directory: URL, path: String) {
        self.name = "SQLite \(String(cString: sqlite3_libversion()))"
        self.directory = directory
        self.path = path
    }

    /// Creates a new database in a new directory under `directory`, in WAL mode, with the schema.
    public static func open(in directory: URL) throws -> SQLitePeer {
        let ownDirectory = directory.appendingPathComponent("sqlite-\(UUID().uuidString.prefix(8).lowercased())")
        do {
            try FileManager.default.createDirectory(at: ownDirectory, withIntermediateDirectories: true)
        } catch {
            throw PeerError("SQLite: cannot create \(ownDirectory.path): \(error.localizedDescription)")
        }
        let peer = SQLitePeer(directory: ownDirectory, path: ownDirectory.appendingPathComponent("peer.sqlite").path)
        do {
            let connection = try SQLiteConnection(peer: peer)
            let mode = try connection.text(of: "PRAGMA journal_mode = WAL")  // stays set in the file
            guard mode == "wal" else {
                throw PeerError("SQLite: \(ownDirectory.path) does not allow WAL mode (journal_mode is \(mode ?? "unknown"))")
            }
            try connection.execute(SQLiteConnection.schema)
        } catch {
            try? FileManager.default.removeItem(at: ownDirectory)
            throw error
        }
        return peer
    }

    /// A new connection to the database file.
    public func connect() throws -> any PeerConnection {
        try SQLiteConnection(peer: self)
    }

    /// Removes the database's directory (SQLite has no server to stop).
    public func stop() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// One SQLite connection, with its prepared statements kept for reuse.
final class SQLiteConnection: PeerConnection {
    static let schema = """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            type TEXT NOT NULL,
            uuid TEXT NOT NULL,
            body TEXT NOT NULL
        );
        CREATE TABLE samples (
            uuid TEXT PRIMARY KEY,
            type TEXT NOT NULL,
            source TEXT NOT NULL,
            start_us INTEGER NOT NULL,
            end_us INTEGER NOT NULL,
            value REAL NOT NULL,
            unit TEXT NOT NULL,
            sync_id TEXT,
            anchor INTEGER NOT NULL,
            metadata TEXT NOT NULL
        );
        \(PeerSchema.indexes)
        """



    private let peer: SQLitePeer
    private let database: OpaquePointer
    /// Prepared statements by SQL text, finalized with the connection.
    private var statements: [String: OpaquePointer] = [:]

    init(peer: SQLitePeer) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(peer.path, &handle, flags, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            sqlite3_close_v2(handle)
            throw PeerError("SQLite: cannot open \(peer.path): \(message)")
        }
        self.peer = peer
        self.database = handle
        sqlite3_busy_timeout(handle, 10_000)
        try execute("PRAGMA synchronous = FULL")
    }

    deinit {
        for statement in statements.values {
            sqlite3_finalize(statement)
        }
        sqlite3_close_v2(database)
    }

    func save(_ samples: [PeerSample]) throws {
        if samples.isEmpty { return }
        let insertEvent = try statement("INSERT INTO events (kind, type, uuid, body) VALUES ('save', ?1, ?2, ?3)")
        let insertSample = try statement("""
            INSERT INTO samples (uuid, type, source, start_us, end_us, value, unit, sync_id, anchor, metadata)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
            """)
        let bodies = try samples.map { try $0.jsonBody() }
        try peer.writeLock.withLock {
            try execute("BEGIN IMMEDIATE")
            do {
                for (sample, body) in zip(samples, bodies) {
                    let uuid = sample.uuid.uuidString
                    bindText(insertEvent, 1, sample.type)
                    bindText(insertEvent, 2, uuid)
                    bindText(insertEvent, 3, body)
                    try stepToEnd(insertEvent)
                    let anchor = sqlite3_last_insert_rowid(database)

                    bindText(insertSample, 1, uuid)
                    bindText(insertSample, 2, sample.type)
                    bindText(insertSample, 3, sample.source)
                    sqlite3_bind_int64(insertSample, 4, sample.start)
                    sqlite3_bind_int64(insertSample, 5, sample.end)
                    sqlite3_bind_double(insertSample, 6, sample.value)
                    bindText(insertSample, 7, sample.unit)
                    if let syncIdentifier = sample.syncIdentifier {
                        bindText(insertSample, 8, syncIdentifier)
                    } else {
                        sqlite3_bind_null(insertSample, 8)
                    }
                    sqlite3_bind_int64(insertSample, 9, anchor)
                    bindText(insertSample, 10, sample.metadataJSON())
                    try stepToEnd(insertSample)
                }
                try execute("COMMIT")
            } catch {
                sqlite3_reset(insertEvent)
                sqlite3_reset(insertSample)
                sqlite3_exec(database, "ROLLBACK", nil, nil, nil)
                throw error
            }
        }
    }

    func averages(type: String, from: Int64, to: Int64, bucket: Int64) throws -> [(start: Int64, average: Double)] {
        let query = try statement("""
            SELECT ?2 + (start_us - ?2) / ?4 * ?4 AS bucket_start, avg(value)
            FROM samples
            WHERE type = ?1 AND start_us >= ?2 AND start_us < ?3
            GROUP BY bucket_start ORDER BY bucket_start
            """)
        defer { sqlite3_reset(query) }
        bindText(query, 1, type)
        sqlite3_bind_int64(query, 2, from)
        sqlite3_bind_int64(query, 3, to)
        sqlite3_bind_int64(query, 4, bucket)
        var averages: [(start: Int64, average: Double)] = []
        while try step(query) {
            averages.append((start: sqlite3_column_int64(query, 0), average: sqlite3_column_double(query, 1)))
        }
        return averages
    }

    func samples(type: String, overlapping from: Int64, _ to: Int64) throws -> [PeerSample] {
        let query = try statement("""
            SELECT \(PeerSchema.sampleColumns) FROM samples
            WHERE type = ?1 AND start_us < ?3 AND (end_us > ?2 OR (start_us = ?2 AND end_us = ?2))
            ORDER BY start_us, anchor
            """)
        defer { sqlite3_reset(query) }
        bindText(query, 1, type)
        sqlite3_bind_int64(query, 2, from)
        sqlite3_bind_int64(query, 3, to)
        var samples: [PeerSample] = []
        while try step(query) {
            samples.append(try sample(from: query))
        }
        return samples
    }

    func changes(type: String, after anchor: Int64, limit: Int) throws -> (samples: [PeerSample], anchor: Int64) {
        let query = try statement("""
            SELECT \(PeerSchema.sampleColumns), anchor FROM samples
            WHERE type = ?1 AND anchor > ?2
            ORDER BY anchor LIMIT ?3
            """)
        defer { sqlite3_reset(query) }
        bindText(query, 1, type)
        sqlite3_bind_int64(query, 2, anchor)
        sqlite3_bind_int64(query, 3, Int64(limit))
        var samples: [PeerSample] = []
        var last = anchor
        while try step(query) {
            samples.append(try sample(from: query))
            last = sqlite3_column_int64(query, 9)
        }
        return (samples, last)
    }

    func rebuildProjection() throws -> Int {
        try peer.writeLock.withLock {
            try execute("BEGIN IMMEDIATE")
            do {
                try execute("""
                    DELETE FROM samples;
                    DROP INDEX samples_type_start;
                    DROP INDEX samples_type_anchor;
                    DROP INDEX samples_source_type_sync;
                    """)
                try execute("""
                    INSERT INTO samples (uuid, type, source, start_us, end_us, value, unit, sync_id, anchor, metadata)
                    SELECT uuid, json_extract(body, '$.type'), json_extract(body, '$.source'),
                           json_extract(body, '$.start'), json_extract(body, '$.end'), json_extract(body, '$.value'),
                           json_extract(body, '$.unit'), json_extract(body, '$.sync_id'), seq,
                           coalesce(json_extract(body, '$.metadata'), '{}')
                    FROM events WHERE kind = 'save' ORDER BY seq
                    """)
                let count = Int(sqlite3_changes64(database))
                try execute(PeerSchema.indexes)
                try execute("COMMIT")
                return count
            } catch {
                sqlite3_exec(database, "ROLLBACK", nil, nil, nil)
                throw error
            }
        }
    }

    func ping() throws {
        let query = try statement("SELECT 1")
        defer { sqlite3_reset(query) }
        while try step(query) {}
    }

    // MARK: SQLite plumbing

    /// Runs SQL without results (several statements may be separated by semicolons).
    func execute(_ sql: String) throws {
        guard sqlite3_exec(database, sql, nil, nil, nil) == SQLITE_OK else {
            throw error(in: sql)
        }
    }

    /// The first column of the first row of a one-off statement (for pragmas).
    func text(of sql: String) throws -> String? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(database, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw error(in: sql)
        }
        defer { sqlite3_finalize(statement) }
        return try step(statement) ? text(statement, 0) : nil
    }

    /// The prepared statement for `sql`, prepared on first use.
    private func statement(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(database, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw error(in: sql)
        }
        statements[sql] = statement
        return statement
    }

    /// Steps once: true when a row is ready, false when done (the statement then needs a reset).
    private func step(_ statement: OpaquePointer) throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw error(in: String(cString: sqlite3_sql(statement)))
        }
    }

    /// Runs a statement without results to its end and resets it.
    private func stepToEnd(_ statement: OpaquePointer) throws {
        defer { sqlite3_reset(statement) }
        while try step(statement) {}
    }

    private func error(in sql: String) -> PeerError {
        let firstLine = sql.split(separator: "\n").first.map(String.init) ?? sql
        return PeerError("SQLite: \(String(cString: sqlite3_errmsg(database))) (in: \(firstLine))")
    }

    private func bindText(_ statement: OpaquePointer, _ index: Int32, _ text: String) {
        sqlite3_bind_text(statement, index, text, -1, sqliteTransient)
    }

    private func bindText(_ statement: OpaquePointer, _ index: Int32, _ utf8: [UInt8]) {
        _ = utf8.withUnsafeBytes { buffer in
            if let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self) {
                sqlite3_bind_text(statement, index, base, Int32(buffer.count), sqliteTransient)
            } else {
                sqlite3_bind_text(statement, index, "", 0, sqliteTransient)
            }
        }
    }

    private func text(_ statement: OpaquePointer, _ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(statement, column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// Reads the columns of `PeerSchema.sampleColumns` from the current row.
    private func sample(from statement: OpaquePointer) throws -> PeerSample {
        guard let uuidText = text(statement, 0), let uuid = UUID(uuidString: uuidText) else {
            throw PeerError("SQLite: \(text(statement, 0) ?? "NULL") is not a UUID")
        }
        return PeerSample(
            uuid: uuid,
            type: text(statement, 1) ?? "",
            source: text(statement, 2) ?? "",
            start: sqlite3_column_int64(statement, 3),
            end: sqlite3_column_int64(statement, 4),
            value: sqlite3_column_double(statement, 5),
            unit: text(statement, 6) ?? "",
            syncIdentifier: text(statement, 7),
            metadata: try PeerSample.decodeMetadata(text(statement, 8) ?? "{}"))
    }
}

/// SQLITE_TRANSIENT: SQLite copies bound text before the call returns.
private var sqliteTransient: sqlite3_destructor_type {
    unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}
