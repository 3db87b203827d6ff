import CLibPQ
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A throw-away PostgreSQL cluster, reached over its Unix socket through libpq.
///
/// ``start(in:)`` runs `initdb` (trust authentication, superuser `postgres`, UTF8, C locale) in a new
/// directory, then `postgres` with durable settings (fsync, synchronous_commit and
/// full_page_writes on), no TCP listener, and the benchmark schema. When the process runs as
/// root, both run as the `postgres` user through `runuser`, since PostgreSQL refuses to run as root.
public final class PostgresPeer: PeerDatabase {
    /// `"PostgreSQL "` and the server's own version (`SHOW server_version`).
    public let name: String
    /// The cluster's directory: `data/`, the logs and the socket.
    private let clusterDirectory: URL
    /// The libpq connection string (socket directory, port, user, database).
    private let conninfo: String
    /// The same over TCP on the loopback address.
    private let tcpConninfo: String
    /// The process started for the server (`runuser` when root, else `postgres` itself).
    private let serverProcess: pid_t
    private let stopped = Mutex(false)

    private init(name: String, clusterDirectory: URL, conninfo: String, tcpConninfo: String, serverProcess: pid_t) {
        self.name = name
        self.clusterDirectory = clusterDirectory
        self.conninfo = conninfo
        self.tcpConninfo = tcpConninfo
        self.serverProcess = serverProcess
    }

    /// Starts a new cluster in a new directory under `directory`, waits until it accepts
    /// connections (at most 60 s) and creates the schema.
    public static func start(in directory: URL) throws -> PostgresPeer {
        let binaries = try postgresBinDirectory()
        let asRoot = getuid() == 0
        let clusterDirectory = directory.appendingPathComponent("postgres-\(UUID().uuidString.prefix(8).lowercased())")
        let dataDirectory = clusterDirectory.appendingPathComponent("data").path
        let socketDirectory = clusterDirectory.path
        let port = freePortNumber()
        // A Unix socket path holds at most 107 bytes.
        guard socketDirectory.utf8.count + "/.s.PGSQL.\(port)".utf8.count < 108 else {
            throw PeerError("PostgreSQL: the socket path under \(socketDirectory) is longer than a Unix socket allows")
        }

        do {
            try FileManager.default.createDirectory(at: clusterDirectory, withIntermediateDirectories: true)
        } catch {
            throw PeerError("PostgreSQL: cannot create \(clusterDirectory.path): \(error.localizedDescription)")
        }
        var serverProcess: pid_t?
        do {
            chmod(socketDirectory, 0o700)
            if asRoot {
                guard let user = getpwnam("postgres") else {
                    throw PeerError("PostgreSQL: running as root needs a `postgres` user to run the server as")
                }
                guard chown(socketDirectory, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                    throw PeerError("PostgreSQL: cannot hand \(socketDirectory) to the postgres user: \(String(cString: strerror(errno)))")
                }
            }
            let asServerUser: [String] = asRoot ? [runuserPath(), "-u", "postgres", "--"] : []

            // initdb --no-sync only skips flushing the brand-new cluster's files once at the end;
            // the server itself then runs with fsync on.
            let initdbLog = clusterDirectory.appendingPathComponent("initdb.log").path
            let initdb = try spawn(
                asServerUser + [
                    binaries + "/initdb", "-D", dataDirectory, "-U", "postgres", "-A", "trust",
                    "-E", "UTF8", "--locale=C", "--no-sync",
                ],
                log: initdbLog)
            let status = waitForExit(initdb)
            guard status == 0 else {
                var message = "PostgreSQL: initdb failed (status \(status)):\n\(tail(of: initdbLog))"
                if asRoot {
                    message += "\n(as root, initdb runs as the postgres user: every directory above \(socketDirectory) must be searchable by it)"
                }
                throw PeerError(message)
            }

            let serverLog = clusterDirectory.appendingPathComponent("server.log").path
            let settings = [
                "fsync=on", "synchronous_commit=on", "full_page_writes=on",
                "listen_addresses=127.0.0.1", "unix_socket_directories=\(socketDirectory)", "port=\(port)",
                "max_connections=100", "shared_buffers=256MB",
            ]
            serverProcess = try spawn(
                asServerUser + [binaries + "/postgres", "-D", dataDirectory] + settings.flatMap { ["-c", $0] },
                log: serverLog)
            let conninfo = "host=\(quoted(socketDirectory)) port=\(port) user=postgres dbname=postgres"

            // Poll until the server accepts connections.
            let deadline = ContinuousClock.now + .seconds(60)
            while PQping(conninfo) != PQPING_OK {
                var status: Int32 = 0
                if let pid = serverProcess, waitpid(pid, &status, WNOHANG) == pid {
                    serverProcess = nil
                    throw PeerError("PostgreSQL: the server exited while starting:\n\(tail(of: serverLog))")
                }
                if ContinuousClock.now > deadline {
                    throw PeerError("PostgreSQL: the server did not accept connections within 60 s:\n\(tail(of: serverLog))")
                }
                usleep(10_000)
            }

            let connection = try PostgresConnection(conninfo: conninfo)
            try connection.execute(PostgresConnection.schema)
            let version = try connection.query("SHOW server_version", [])
            // e.g. "15.18 (Debian 15.18-0+deb12u1)": keep the number.
            let number = version.rows > 0 ? version.text(0, 0).split(separator: " ").first.map(String.init) ?? "" : ""
            guard let serverProcess else { throw PeerError("PostgreSQL: the server is gone") }
            return PostgresPeer(
                name: "PostgreSQL \(number)", clusterDirectory: clusterDirectory,
                conninfo: conninfo, tcpConninfo: "host=127.0.0.1 port=\(port) user=postgres dbname=postgres", serverProcess: serverProcess)
        } catch {
            if let serverProcess {
                stopServer(process: serverProcess, dataDirectory: dataDirectory)
            }
            try? FileManager.default.removeItem(at: clusterDirectory)
            throw error
        }
    }

    /// A new libpq connection over the cluster's socket.
    public func connect() throws -> any PeerConnection {
        try PostgresConnection(conninfo: conninfo)
    }

    /// A new libpq connection over TCP on the loopback address.
    public func connectOverTCP() throws -> any PeerConnection {
        try PostgresConnection(conninfo: tcpConninfo)
    }

    /// Stops the server (fast shutdown: open sessions are ended) and deletes the cluster's directory.
    public func stop() {
        let alreadyStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !alreadyStopped else { return }
        Self.stopServer(process: serverProcess, dataDirectory: clusterDirectory.appendingPathComponent("data").path)
        try? FileManager.default.removeItem(at: clusterDirectory)
    }

    /// Sends the postmaster SIGINT (PostgreSQL's fast shutdown) and waits for the started process
    /// to exit (`runuser` exits when its `postgres` child has).
    private static func stopServer(process: pid_t, dataDirectory: String) {
        var status: Int32 = 0
        if waitpid(process, &status, WNOHANG) != 0 {
            return  // already gone (or reaped): its postmaster.pid may name an unrelated process by now
        }
        let pidFile = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8)
        if let line = pidFile?.split(separator: "\n").first, let postmaster = pid_t(line) {
            kill(postmaster, SIGINT)
        } else {
            kill(process, SIGINT)
        }
        _ = waitForExit(process)
    }

    /// The directory of `initdb` and `postgres`: the newest `/usr/lib/postgresql/N/bin` (Debian's
    /// layout), else the first directory on PATH holding both.
    private static func postgresBinDirectory() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let newest = versions.compactMap(Int.init).sorted().last { version in
            FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/postgres")
        }
        if let newest { return "\(root)/\(newest)/bin" }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            if FileManager.default.isExecutableFile(atPath: "\(directory)/postgres"),
                FileManager.default.isExecutableFile(atPath: "\(directory)/initdb")
            {
                return String(directory)
            }
        }
        throw PeerError("PostgreSQL: no `postgres` and `initdb` found (install Debian's postgresql package)")
    }

    private static func runuserPath() -> String {
        ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        } ?? "runuser"
    }

    /// A TCP port nobody listens on, asked of the kernel: the server listens on it on 127.0.0.1, and it names its socket file.
    private static func freePortNumber() -> Int { unusedLoopbackPort() ?? 54321 }

    /// Starts `arguments` (the first one a path, or a name looked up on PATH), stdin from
    /// /dev/null, stdout and stderr appended to `log`.
    private static func spawn(_ arguments: [String], log: String) throws -> pid_t {
        #if canImport(Glibc)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        // The child starts with no signal blocked and the usual ones at their defaults, whatever
        // the calling thread had (Dispatch's worker threads block signals).
        #if canImport(Glibc)
        var attributes = posix_spawnattr_t()
        #else
        var attributes: posix_spawnattr_t?
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        for signal in [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2] {
            sigaddset(&defaultSignals, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw PeerError("PostgreSQL: cannot start \(arguments[0]): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// A value for a libpq connection string, in single quotes.
    private static func quoted(_ value: String) -> String {
        "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// Waits for a child process; returns its exit code, or -1 when it did not exit normally.
    private static func waitForExit(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        // WIFEXITED / WEXITSTATUS, which Swift does not import.
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : -1
    }

    /// The end of a log file, for error messages.
    private static func tail(of path: String) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no log at \(path))"
        return String(text.suffix(4000))
    }
}

/// One libpq connection. Batches go in with COPY, a single sample with one prepared statement;
/// queries are prepared statements with text parameters and text results.
final class PostgresConnection: PipelinedPeerConnection {
    static let schema = """
        CREATE TABLE events (
            seq bigserial PRIMARY KEY,
            kind text NOT NULL,
            type text NOT NULL,
            uuid uuid NOT NULL,
            body jsonb NOT NULL
        );
        CREATE TABLE samples (
            uuid uuid PRIMARY KEY,
            type text NOT NULL,
            source text NOT NULL,
            start_us bigint NOT NULL,
            end_us bigint NOT NULL,
            value double precision NOT NULL,
            unit text NOT NULL,
            sync_id text,
            anchor bigint NOT NULL,
            metadata jsonb NOT NULL
        );
        \(PeerSchema.indexes)
        """



    private let connection: OpaquePointer
    /// The statements prepared on this connection: SQL text to statement name.
    private var prepared: [String: String] = [:]

    init(conninfo: String) throws {
        guard let connection = PQconnectdb(conninfo) else {
            throw PeerError("PostgreSQL: cannot allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = libpqMessage(PQerrorMessage(connection))
            PQfinish(connection)
            throw PeerError("PostgreSQL: cannot connect: \(message)")
        }
        self.connection = connection
    }

    deinit {
        PQfinish(connection)
    }

    func save(_ samples: [PeerSample]) throws {
        if samples.isEmpty { return }
        if samples.count == 1 {
            try saveOne(samples[0])
        } else {
            try saveBatch(samples)
        }
    }

    /// One sample: a single prepared statement inserting both rows, committed on its own.
    private func saveOne(_ sample: PeerSample) throws {
        let sql = """
            WITH event AS (
                INSERT INTO events (kind, type, uuid, body) VALUES ('save', $1, $2::uuid, $3::jsonb)
                RETURNING seq)
            INSERT INTO samples (uuid, type, source, start_us, end_us, value, unit, sync_id, anchor, metadata)
            SELECT $2::uuid, $1, $4, $5::bigint, $6::bigint, $7::float8, $8, $9, event.seq, $10::jsonb FROM event
            """
        _ = try query(sql, [
            sample.type, sample.uuid.uuidString, String(decoding: try sample.jsonBody(), as: UTF8.self),
            sample.source, String(sample.start), String(sample.end), sample.value.description, sample.unit,
            sample.syncIdentifier, String(decoding: sample.metadataJSON(), as: UTF8.self),
        ])
    }

    /// A batch: reserve the events' sequence numbers, COPY the events, COPY the samples, commit.
    private func saveBatch(_ samples: [PeerSample]) throws {
        let bodies = try samples.map { try $0.jsonBody() }
        var events: [UInt8] = []
        var rows: [UInt8] = []
        events.reserveCapacity(bodies.reduce(0) { $0 + $1.count + 120 })
        rows.reserveCapacity(samples.count * 200)
        do {
            let sequence = try query(
                "BEGIN; SELECT nextval('events_seq_seq') FROM generate_series(1, \(samples.count))",
                prepare: false)
            guard sequence.rows == samples.count else {
                throw PeerError("PostgreSQL: asked for \(samples.count) sequence numbers, got \(sequence.rows)")
            }
            for (index, (sample, body)) in zip(samples, bodies).enumerated() {
                let seq = try sequence.int64(index, 0)
                // events: seq, kind, type, uuid, body
                events += String(seq).utf8
                events += "\tsave\t".utf8
                appendCopyField(sample.type.utf8, to: &events)
                events.append(0x09)
                events += sample.uuid.uuidString.utf8
                events.append(0x09)
                appendCopyField(body, to: &events)
                events.append(0x0A)
                // samples: uuid, type, source, start_us, end_us, value, unit, sync_id, anchor, metadata
                rows += sample.uuid.uuidString.utf8
                rows.append(0x09)
                appendCopyField(sample.type.utf8, to: &rows)
                rows.append(0x09)
                appendCopyField(sample.source.utf8, to: &rows)
                rows += "\t\(sample.start)\t\(sample.end)\t\(sample.value)\t".utf8
                appendCopyField(sample.unit.utf8, to: &rows)
                rows.append(0x09)
                if let syncIdentifier = sample.syncIdentifier {
                    appendCopyField(syncIdentifier.utf8, to: &rows)
                } else {
                    rows += #"\N"#.utf8
                }
                rows += "\t\(seq)\t".utf8
                appendCopyField(sample.metadataJSON(), to: &rows)
                rows.append(0x0A)
            }
            try copy("COPY events (seq, kind, type, uuid, body) FROM STDIN", events)
            try copy(
                "COPY samples (uuid, type, source, start_us, end_us, value, unit, sync_id, anchor, metadata) FROM STDIN",
                rows)
            try execute("COMMIT")
        } catch {
            rollBack()
            throw error
        }
    }

    func averages(type: String, from: Int64, to: Int64, bucket: Int64) throws -> [(start: Int64, average: Double)] {
        let result = try query(
            """
            SELECT $2::bigint + (start_us - $2::bigint) / $4::bigint * $4::bigint, avg(value)
            FROM samples
            WHERE type = $1 AND start_us >= $2::bigint AND start_us < $3::bigint
            GROUP BY 1 ORDER BY 1
            """,
            [type, String(from), String(to), String(bucket)])
        return try (0..<result.rows).map { row in
            (start: try result.int64(row, 0), average: try result.double(row, 1))
        }
    }

    func samples(type: String, overlapping from: Int64, _ to: Int64) throws -> [PeerSample] {
        let result = try query(
            """
            SELECT \(PeerSchema.sampleColumns) FROM samples
            WHERE type = $1 AND start_us < $3::bigint
              AND (end_us > $2::bigint OR (start_us = $2::bigint AND end_us = $2::bigint))
            ORDER BY start_us, anchor
            """,
            [type, String(from), String(to)])
        return try (0..<result.rows).map { try sample(from: result, row: $0) }
    }

    func changes(type: String, after anchor: Int64, limit: Int) throws -> (samples: [PeerSample], anchor: Int64) {
        let result = try query(
            """
            SELECT \(PeerSchema.sampleColumns), anchor FROM samples
            WHERE type = $1 AND anchor > $2::bigint
            ORDER BY anchor LIMIT $3::bigint
            """,
            [type, String(anchor), String(limit)])
        let samples = try (0..<result.rows).map { try sample(from: result, row: $0) }
        let last = result.rows > 0 ? try result.int64(result.rows - 1, 9) : anchor
        return (samples, last)
    }

    func rebuildProjection() throws -> Int {
        do {
            try execute("""
                BEGIN;
                TRUNCATE samples;
                DROP INDEX samples_type_start, samples_type_anchor, samples_source_type_sync;
                """)
            let insert = try query(
                """
                INSERT INTO samples (uuid, type, source, start_us, end_us, value, unit, sync_id, anchor, metadata)
                SELECT uuid, body->>'type', body->>'source', (body->>'start')::bigint, (body->>'end')::bigint,
                       (body->>'value')::float8, body->>'unit', body->>'sync_id', seq,
                       coalesce(body->'metadata', '{}'::jsonb)
                FROM events WHERE kind = 'save' ORDER BY seq
                """,
                prepare: false)
            guard let count = Int(String(cString: PQcmdTuples(insert.result))) else {
                throw PeerError("PostgreSQL: INSERT reported no row count")
            }
            try execute(PeerSchema.indexes)
            try execute("COMMIT")
            return count
        } catch {
            rollBack()
            throw error
        }
    }

    func ping() throws {
        _ = try query("SELECT 1", [])
    }

    /// `count` no-op queries (`SELECT 1`) in flight at once on this one connection: sent in
    /// libpq's pipeline mode, then one sync, then every answer read.
    func pipelinedPings(_ count: Int) throws {
        guard PQenterPipelineMode(connection) == 1 else { throw PeerError("cannot enter pipeline mode: \(libpqMessage(PQerrorMessage(connection)))") }
        defer { PQexitPipelineMode(connection) }
        for _ in 0..<count {
            guard PQsendQueryParams(connection, "SELECT 1", 0, nil, nil, nil, nil, 0) == 1 else {
                throw PeerError("cannot send a pipelined query: \(libpqMessage(PQerrorMessage(connection)))")
            }
        }
        guard PQpipelineSync(connection) == 1 else { throw PeerError("cannot sync the pipeline: \(libpqMessage(PQerrorMessage(connection)))") }
        var answered = 0
        while true {
            // Each query's results end with a null; the sync's own result ends the pipeline.
            guard let result = PQgetResult(connection) else { continue }
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
            guard status == PGRES_TUPLES_OK else { throw PeerError("a pipelined SELECT 1 failed: \(libpqMessage(PQerrorMessage(connection)))") }
            answered += 1
        }
        guard answered == count else { throw PeerError("\(answered) of \(count) pipelined queries answered") }
    }

    // MARK: libpq plumbing

    /// Runs commands that return no rows (several may be separated by semicolons).
    func execute(_ sql: String) throws {
        _ = try query(sql, prepare: false)
    }

    /// Runs `sql` with text parameters (`nil` is SQL NULL) as a named prepared statement, prepared
    /// on this connection the first time; `prepare: false` sends it as plain text instead (which
    /// allows several statements and no parameters).
    func query(_ sql: String, _ parameters: [String?] = [], prepare: Bool = true) throws -> PostgresResult {
        let raw: OpaquePointer?
        if prepare {
            let name: String
            if let known = prepared[sql] {
                name = known
            } else {
                name = "s\(prepared.count)"
                try check(PQprepare(connection, name, sql, Int32(parameters.count), nil), sql)
                prepared[sql] = name
            }
            let values: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
            defer { for value in values { free(value) } }
            let constValues: [UnsafePointer<CChar>?] = values.map { $0.map { UnsafePointer($0) } }
            raw = PQexecPrepared(connection, name, Int32(parameters.count), constValues, nil, nil, 0)
        } else {
            raw = PQexec(connection, sql)
        }
        return try check(raw, sql)
    }

    /// Wraps a result, throwing the server's message unless it succeeded.
    @discardableResult
    private func check(_ raw: OpaquePointer?, _ sql: String) throws -> PostgresResult {
        guard let raw else {
            throw PeerError("PostgreSQL: \(libpqMessage(PQerrorMessage(connection)))")
        }
        let result = PostgresResult(raw)
        let status = PQresultStatus(raw)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let firstLine = sql.split(separator: "\n").first.map(String.init) ?? sql
            throw PeerError("PostgreSQL: \(libpqMessage(PQresultErrorMessage(raw))) (in: \(firstLine))")
        }
        return result
    }

    /// Runs one `COPY ... FROM STDIN` with text-format `data`.
    private func copy(_ sql: String, _ data: [UInt8]) throws {
        guard let start = PQexec(connection, sql) else {
            throw PeerError("PostgreSQL: \(libpqMessage(PQerrorMessage(connection)))")
        }
        let startStatus = PQresultStatus(start)
        let startMessage = libpqMessage(PQresultErrorMessage(start))
        PQclear(start)
        guard startStatus == PGRES_COPY_IN else {
            throw PeerError("PostgreSQL: \(startMessage) (in: \(sql))")
        }
        var sendError: String?
        data.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self) else { return }
            let chunk = 256 * 1024
            var offset = 0
            while offset < buffer.count {
                let length = min(chunk, buffer.count - offset)
                if PQputCopyData(connection, base + offset, Int32(length)) != 1 {
                    sendError = libpqMessage(PQerrorMessage(connection))
                    return
                }
                offset += length
            }
        }
        if PQputCopyEnd(connection, sendError == nil ? nil : "client failed to send data") != 1 {
            sendError = sendError ?? libpqMessage(PQerrorMessage(connection))
        }
        var serverError: String?
        while let result = PQgetResult(connection) {
            if PQresultStatus(result) != PGRES_COMMAND_OK, serverError == nil {
                serverError = libpqMessage(PQresultErrorMessage(result))
            }
            PQclear(result)
        }
        if let message = serverError ?? sendError {
            throw PeerError("PostgreSQL: \(message) (in: \(sql))")
        }
    }

    /// Ends a failed transaction so that the connection can be used again.
    private func rollBack() {
        if PQtransactionStatus(connection) != PQTRANS_IDLE {
            PQclear(PQexec(connection, "ROLLBACK"))
        }
    }

    /// Reads the columns of `PeerSchema.sampleColumns` from one row.
    private func sample(from result: PostgresResult, row: Int) throws -> PeerSample {
        let uuidText = result.text(row, 0)
        guard let uuid = UUID(uuidString: uuidText) else {
            throw PeerError("PostgreSQL: \(uuidText) is not a UUID")
        }
        return PeerSample(
            uuid: uuid,
            type: result.text(row, 1),
            source: result.text(row, 2),
            start: try result.int64(row, 3),
            end: try result.int64(row, 4),
            value: try result.double(row, 5),
            unit: result.text(row, 6),
            syncIdentifier: result.isNull(row, 7) ? nil : result.text(row, 7),
            metadata: try PeerSample.decodeMetadata(result.text(row, 8)))
    }
}

/// A libpq result (text format), cleared when released.
final class PostgresResult {
    let result: OpaquePointer
    /// The number of rows.
    let rows: Int

    init(_ result: OpaquePointer) {
        self.result = result
        self.rows = Int(PQntuples(result))
    }

    deinit {
        PQclear(result)
    }

    func isNull(_ row: Int, _ column: Int) -> Bool {
        PQgetisnull(result, Int32(row), Int32(column)) != 0
    }

    func text(_ row: Int, _ column: Int) -> String {
        String(cString: PQgetvalue(result, Int32(row), Int32(column)))
    }

    func int64(_ row: Int, _ column: Int) throws -> Int64 {
        guard !isNull(row, column), let value = Int64(text(row, column)) else {
            throw PeerError("PostgreSQL: column \(column) of row \(row) is not an integer: \(text(row, column))")
        }
        return value
    }

    func double(_ row: Int, _ column: Int) throws -> Double {
        guard !isNull(row, column), let value = Double(text(row, column)) else {
            throw PeerError("PostgreSQL: column \(column) of row \(row) is not a number: \(text(row, column))")
        }
        return value
    }
}

/// A libpq message without its trailing newline.
private func libpqMessage(_ message: UnsafePointer<CChar>?) -> String {
    guard let message else { return "unknown error" }
    return String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Appends `bytes` as one field of COPY's text format: backslash, tab, newline and carriage return escaped.
private func appendCopyField(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
    for byte in bytes {
        switch byte {
        case UInt8(ascii: "\\"): out += [0x5C, 0x5C]
        case 0x09: out += [0x5C, UInt8(ascii: "t")]
        case 0x0A: out += [0x5C, UInt8(ascii: "n")]
        case 0x0D: out += [0x5C, UInt8(ascii: "r")]
        default: out.append(byte)
        }
    }
}

/// A loopback TCP port nothing listens on now, asked of the kernel (for servers that take no
/// port 0); nil when the kernel gives none.
public func unusedLoopbackPort() -> Int? {
    #if canImport(Glibc)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
            bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
        }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}
