import CLMDB
import Foundation
import Synchronization

/// An LMDB environment: one directory holding named databases, opened once per process.
///
/// All access is closure-scoped: ``read(_:)`` runs a read-only snapshot, ``write(_:)``
/// runs one write transaction that commits (and, unless ``Options/durable`` is off,
/// reaches the disk) when the closure returns, and aborts when it throws. A reader that
/// pauses between reads of one snapshot keeps a ``Snapshot``.
///
/// ```swift
/// let env = try Environment(path: dir, options: .init(mapSize: 64 << 20))
/// let objects = try env.openDatabase("objects")
/// try env.write { txn in try txn.put(value, forKey: key, in: objects) }
/// let bytes = try env.read { txn in try txn.bytes(forKey: key, in: objects) }
/// ```
///
/// The environment is opened with `MDB_NOTLS`, so read transactions are not tied to
/// threads. When a write runs out of map space the map is doubled and the write closure
/// runs again from the start, so it must not have effects outside the transaction.
/// Never `await` inside a transaction closure, and never start a transaction inside
/// another transaction's closure on the same environment (resizing waits for both).
public final class Environment: @unchecked Sendable {
    /// How to open an environment.
    public struct Options: Sendable {
        /// Initial map size in bytes; the map grows by doubling when full.
        public var mapSize: Int
        /// Largest map the environment may grow to.
        public var maximumMapSize: Int
        public var maxDatabases: UInt32
        public var maxReaders: UInt32
        /// When false, commits skip fsync (`MDB_NOSYNC`): for scratch environments only.
        public var durable: Bool
        /// Whether a durable environment makes its commits durable through a
        /// ``CommitJournal`` (one small sync per commit) rather than LMDB's own two syncs.
        /// A process that finds the journal held by another commits the usual way.
        public var journaled: Bool
        /// How often the journal takes a checkpoint (at the first commit after this much time).
        public var checkpointInterval: Duration

        public init(
            mapSize: Int = 256 << 20, maximumMapSize: Int = 1 << 40,
            maxDatabases: UInt32 = 32, maxReaders: UInt32 = 510, durable: Bool = true, journaled: Bool = true,
            checkpointInterval: Duration = .seconds(1)
        ) {
            self.checkpointInterval = checkpointInterval
            self.mapSize = mapSize
            self.maximumMapSize = maximumMapSize
            self.maxDatabases = maxDatabases
            self.maxReaders = maxReaders
            self.durable = durable
            self.journaled = journaled
        }
    }

    /// The raw `MDB_env*`; replaced only by ``reopen()``, holding ``resizeLock`` exclusively.
    private(set) var handle: OpaquePointer
    public let path: String
    private let options: Options
    /// Held shared by every transaction, exclusively while the map is resized.
    let resizeLock = ReadWriteLock()
    private let mapSize: Mutex<Int>
    private let databases = Mutex<[String: Database]>([:])
    /// The open ``Snapshot``s, which the environment ends while they are paused when it must.
    private let snapshots = Mutex<[ObjectIdentifier: WeakSnapshot]>([:])
    private let uses = Atomic<UInt64>(0)

    /// The key under which ``OpenPaths`` knows this environment's directory.
    private let openPath: String
    /// The write-ahead journal, when this process holds it. Used by one thread at a time:
    /// the committing writer (LMDB's writer lock held), or a resize or reopen (the resize
    /// lock held exclusively, so no transaction runs).
    private var journal: CommitJournal?
    /// A read transaction on the state of the journal's last checkpoint, which keeps LMDB
    /// from reusing that state's pages until the next checkpoint (see ``CommitJournal``).
    private var pin: Transaction?
    /// Set when a failed commit's journal record could not be taken back: no commit is
    /// journaled after it (recovery would redo that record).
    private var journalFailure: LMDBError?
    /// Set when a transaction committed without a record and its checkpoint failed: the
    /// next journaled commit takes one first (its record must not follow a state recovery
    /// cannot reach).
    private var checkpointOwed = false
    /// Held by ``write(_:)`` around a journaled environment's transactions (and by anything
    /// else that takes a checkpoint holding the writer's lock), before LMDB's writer lock.
    let committing = NSLock()
    /// The name of the ``CommitJournal`` file a durable environment keeps beside `data.mdb`
    /// while it is open (or after a crash, until it opens again): part of the environment
    /// like `lock.mdb`, never to be copied.
    public static let journalFileName = CommitJournal.fileName
    /// Whether this process journals the environment's commits.
    var isJournaled: Bool { journal != nil }
    private var dataFile: String { path.hasSuffix("/") ? path + "data.mdb" : path + "/data.mdb" }

    /// Opens (creating if needed) the environment in directory `path`.
    ///
    /// LMDB forbids one environment open twice in a process: closing either drops the
    /// process's file locks on it, and its lock file's mutexes would be reached through two
    /// mappings. An environment of the same directory still closing (its last owner let go
    /// of it a moment ago) is waited for, a few seconds at most.
    public init(path: String, options: Options = Options()) throws {
        openPath = OpenPaths.enter(path)
        let env: OpaquePointer
        var journal: CommitJournal?
        var recovery = CommitJournal.Recovery.none
        do {
            var isDirectory: ObjCBool = false
            if options.durable, options.journaled, FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                journal = try CommitJournal.open(directory: path, checkpointInterval: options.checkpointInterval)
                let dataFile = path.hasSuffix("/") ? path + "data.mdb" : path + "/data.mdb"
                if let journal { recovery = try journal.recover(dataFile: dataFile) }
                if case .restore(let metaBytes, let pageSize, _) = recovery {
                    try Self.restore(metaBytes: metaBytes, pageSize: pageSize, of: dataFile)
                }
            }
            env = try Self.open(path: path, options: options, mapSize: options.mapSize, syncing: journal == nil)
        } catch {
            OpenPaths.leave(openPath)
            throw error
        }
        self.handle = env
        self.path = path
        self.options = options
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        // Another process may have grown the map beyond what we asked for.
        self.mapSize = Mutex(max(options.mapSize, info.me_mapsize))
        guard let journal else { return }
        // The journal joins once its records are redone (the redo itself is not journaled:
        // the checkpoint after it makes it durable, and until then the records stay).
        if case .restore(_, _, let records) = recovery, !records.isEmpty { try redo(records) }
        self.journal = journal
        if case .none = recovery { try journal.syncDirectory() }
        try resizeLock.withWriteLock { try checkpoint() }
    }

    /// Writes a checkpoint's meta pages back over the data file's (the first
    /// ``CommitJournal/metaBytes`` of each), which makes the file that state again (its pages
    /// were kept intact since; see ``CommitJournal``), and syncs them.
    private static func restore(metaBytes: [UInt8], pageSize: Int, of dataFile: String) throws {
        let fd = Glibc.open(dataFile, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw LMDBError(errno, "open(\(dataFile))") }
        defer { Glibc.close(fd) }
        let count = CommitJournal.metaBytes
        for page in 0..<2 {
            let written = metaBytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + page * count, count, off_t(page * pageSize)) }
            guard written == count else { throw LMDBError(errno, "pwrite(\(dataFile), meta page \(page))") }
        }
        guard fdatasync(fd) == 0 else { throw LMDBError(errno, "fdatasync(\(dataFile))") }
    }

    /// Applies journal records after recovery restored their checkpoint's state.
    private func redo(_ records: [[UInt8]]) throws {
        try write { txn in
            var handles: [String: MDB_dbi] = [:]
            func database(_ name: String, create: Bool) throws -> MDB_dbi? {
                if let dbi = handles[name] { return dbi }
                var dbi = MDB_dbi()
                let result = mdb_dbi_open(txn.handle, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
                if result == MDB_NOTFOUND { return nil }
                try check(result, "mdb_dbi_open(\(name))")
                handles[name] = dbi
                return dbi
            }
            for record in records {
                try JournalOperations.forEach(in: record) { kind, name, key, value in
                    var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
                    var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
                    switch kind {
                    case .put:
                        try check(mdb_put(txn.handle, try database(name, create: true)!, &k, &v, 0), "redo mdb_put(\(name))")
                    case .delete:
                        guard let dbi = try database(name, create: false) else { return }
                        let result = mdb_del(txn.handle, dbi, &k, nil)
                        if result != MDB_NOTFOUND { try check(result, "redo mdb_del(\(name))") }
                    case .removeAll:
                        guard let dbi = try database(name, create: false) else { return }
                        try check(mdb_drop(txn.handle, dbi, 0), "redo mdb_drop(\(name))")
                    case .createDatabase:
                        _ = try database(name, create: true)
                    case .dropDatabase:
                        guard let dbi = try database(name, create: false) else { return }
                        try check(mdb_drop(txn.handle, dbi, 1), "redo mdb_drop(\(name))")
                        handles[name] = nil
                    }
                }
            }
        }
    }

    /// Journals a write transaction's changes before it commits (``Transaction``), first
    /// taking a checkpoint when one is due.
    func journal(_ operations: JournalOperations) throws {
        guard let journal else { return }
        if let journalFailure { throw journalFailure }
        if checkpointOwed || journal.checkpointDue { try checkpoint() }
        do {
            try journal.append(operations.bytes)
        } catch {
            withdrawJournalRecord()
            throw error
        }
    }

    /// Takes back the journal record of a transaction that did not commit; failing that, a
    /// checkpoint (its new generation leaves the record behind); failing both, no commit is
    /// journaled any more.
    func withdrawJournalRecord() {
        guard let journal else { return }
        do {
            try journal.withdrawLast()
        } catch {
            do {
                try checkpoint()
            } catch {
                journalFailure = LMDBError(EIO, "a commit that failed left its record in the commit journal, which could not be taken back (\(error)); reopen the ledger")
            }
        }
    }

    /// Syncs the data file and starts the journal's next generation from its state, pinned;
    /// runs holding the writer's lock (inside a write transaction, before it commits) or
    /// with no transaction of this process open.
    /// - Parameter erasingRecords: overwrite the records before with zeros (an erasure).
    /// - Parameter pinning: keep a new pin on the state checkpointed (without it, the pin
    ///   before is let go too: for a resize, a reopen or closing, which need no transaction
    ///   open; ``repin()`` after).
    func checkpoint(pinning: Bool = true, erasingRecords: Bool = false) throws {
        guard let journal else { return }
        // The pin first: a reader on the last commit keeps the pages of that state and of
        // every later one, so the state whose meta pages are read next stays whole.
        let pinned = pinning ? try begin(readOnly: true) : nil
        do {
            var fd: Int32 = -1
            try check(mdb_env_get_fd(handle, &fd), "mdb_env_get_fd")
            let pageSize = info.pageSize
            let count = CommitJournal.metaBytes
            var metaBytes = [UInt8](repeating: 0, count: 2 * count)
            for page in 0..<2 {
                let read = metaBytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + page * count, count, off_t(page * pageSize)) }
                guard read == count else { throw LMDBError(read < 0 ? errno : EIO, "pread(\(dataFile), meta page \(page))") }
            }
            try check(mdb_env_sync(handle, 1), "mdb_env_sync")
            try journal.checkpoint(metaBytes: metaBytes, pageSize: pageSize, dataDescriptor: fd, erasingRecords: erasingRecords)
        } catch {
            pinned?.abort()
            throw error
        }
        pin?.abort()
        pin = pinned
        checkpointOwed = false
    }

    private func repin() throws {
        guard journal != nil, pin == nil else { return }
        pin = try begin(readOnly: true)
    }

    private static func open(path: String, options: Options, mapSize: Int, syncing: Bool) throws -> OpaquePointer {
        var env: OpaquePointer?
        try check(mdb_env_create(&env), "mdb_env_create")
        guard let env else { throw LMDBError(MDB_PANIC, "mdb_env_create") }
        do {
            try check(mdb_env_set_maxdbs(env, options.maxDatabases), "mdb_env_set_maxdbs")
            try check(mdb_env_set_maxreaders(env, options.maxReaders), "mdb_env_set_maxreaders")
            try check(mdb_env_set_mapsize(env, mapSize), "mdb_env_set_mapsize")
            var flags = UInt32(MDB_NOTLS)
            if !options.durable || !syncing { flags |= UInt32(MDB_NOSYNC) }
            try check(mdb_env_open(env, path, flags, 0o644), "mdb_env_open(\(path))")
        } catch {
            mdb_env_close(env)
            throw error
        }
        return env
    }

    /// Closes the environment and opens it again on the same file, once no transaction of
    /// this process is open (paused snapshots are ended; their next read starts a new
    /// transaction). The databases keep their handles.
    ///
    /// LMDB keeps the page buffers of past write transactions for later ones, and copies only
    /// the used parts of a page into a buffer: the rest of the buffer still holds bytes of the
    /// pages it held before, which later commits write into the unused gaps of new pages. A
    /// reopened environment starts with no such buffers, so bytes removed before it never come
    /// back through them.
    /// - Throws: ``LMDBError`` when the file cannot be opened again, or a database does not
    ///   get its handle back (the environment is then unusable).
    public func reopen() throws {
        try resizeLock.withWriteLock {
            endSnapshotTransactions()
            try checkpoint(pinning: false)
            let opened = databases.withLock { $0.values.sorted { $0.dbi < $1.dbi } }
            mdb_env_close(handle)
            handle = try Self.open(path: path, options: options, mapSize: mapSize.withLock { $0 }, syncing: journal == nil)
            let txn = try begin(readOnly: false)
            do {
                for database in opened {
                    var dbi = MDB_dbi()
                    try check(mdb_dbi_open(txn.handle, database.name, 0, &dbi), "mdb_dbi_open(\(database.name))")
                    guard dbi == database.dbi else {
                        throw LMDBError(MDB_BAD_DBI, "database \(database.name) got handle \(dbi) instead of \(database.dbi) on reopening")
                    }
                }
                try txn.commit()
            } catch {
                txn.abort()
                throw error
            }
            // The file may be another one now (a compacted copy swapped in): its own checkpoint.
            try checkpoint()
        }
    }

    deinit {
        // A last checkpoint makes the data file durable as it is; the journal then holds
        // nothing recovery needs, and goes (an idle ledger keeps no journal).
        let checkpointed = (try? checkpoint(pinning: false)) != nil
        pin?.abort()
        mdb_env_close(handle)
        if checkpointed { journal?.remove() }
        journal = nil
        OpenPaths.leave(openPath)
    }

    /// Opens (creating if needed) the named database.
    public func openDatabase(_ name: String) throws -> Database {
        if let existing = databases.withLock({ $0[name] }) { return existing }
        let database = try write { txn in
            var dbi = MDB_dbi()
            let existing = mdb_dbi_open(txn.handle, name, 0, &dbi)
            if existing == MDB_NOTFOUND {
                try check(mdb_dbi_open(txn.handle, name, UInt32(MDB_CREATE), &dbi), "mdb_dbi_open(\(name))")
                if txn.journaling != nil { txn.operations.createDatabase(name) }
            } else {
                try check(existing, "mdb_dbi_open(\(name))")
            }
            return Database(dbi: dbi, name: name)
        }
        databases.withLock { $0[name] = database }
        return database
    }

    /// Deletes the named database and everything in it.
    ///
    /// - Returns: false when the environment has no database of that name.
    @discardableResult
    public func dropDatabase(_ name: String) throws -> Bool {
        let dropped = try write { txn -> Bool in
            var dbi = MDB_dbi()
            let opened = mdb_dbi_open(txn.handle, name, 0, &dbi)
            if opened == MDB_NOTFOUND { return false }
            try check(opened, "mdb_dbi_open(\(name))")
            try check(mdb_drop(txn.handle, dbi, 1), "mdb_drop(\(name))")
            if txn.journaling != nil { txn.operations.dropDatabase(name) }
            return true
        }
        if dropped { databases.withLock { $0[name] = nil } }
        return dropped
    }

    /// Runs `body` in a read-only snapshot.
    public func read<R>(_ body: (Transaction) throws -> R) throws -> R {
        while true {
            do {
                return try resizeLock.withReadLock {
                    let txn = try begin(readOnly: true)
                    defer { txn.abort() }
                    return try body(txn)
                }
            } catch let error as LMDBError where error.code == .mapResized {
                try adoptResizedMap()
            }
        }
    }

    /// Runs `body` in another read-only snapshot, on any thread, while the caller holds a
    /// snapshot of ``read(_:)`` on this environment open until `body` returns: that hold
    /// keeps the map from being resized meanwhile, so no lock is taken. (``read(_:)`` would
    /// take it, and wait behind a resize that waits for the holder to finish: a deadlock when
    /// the holder waits for `body`.) For a read split across threads, such as hashing the log
    /// in segments.
    ///
    /// - Throws: ``LMDBError`` `mapResized` when another process grew the map since the
    ///   holder began.
    package func readAlongsideHeldSnapshot<R>(_ body: (Transaction) throws -> R) throws -> R {
        let txn = try begin(readOnly: true)
        defer { txn.abort() }
        return try body(txn)
    }

    /// Runs `body` in a write transaction and commits it; aborts if `body` throws.
    ///
    /// On `MDB_MAP_FULL` the transaction is aborted, the map doubled, and `body` run again.
    public func write<R>(_ body: (Transaction) throws -> R) throws -> R {
        while true {
            do {
                return try resizeLock.withReadLock {
                    // A journaled environment's writes take turns here as well as in LMDB,
                    // so that a transaction committed without a record is checkpointed
                    // before any other commits (recovery could not redo one after it).
                    let journaled = journal != nil
                    if journaled { committing.lock() }
                    defer { if journaled { committing.unlock() } }
                    let txn = try begin(readOnly: false)
                    do {
                        let result = try body(txn)
                        try txn.commit()
                        if txn.needsCheckpoint {
                            do {
                                try checkpoint()
                            } catch {
                                checkpointOwed = true
                                throw LMDBError(EIO, "the transaction committed, but the checkpoint that makes it durable failed (\(error)); it is not durable until the next checkpoint")
                            }
                        }
                        return result
                    } catch {
                        txn.abort()
                        throw error
                    }
                }
            } catch let error as LMDBError where error.code == .mapFull {
                try grow()
            } catch let error as LMDBError where error.code == .mapResized {
                try adoptResizedMap()
            }
        }
    }

    /// A read snapshot that stays open between reads (see ``Snapshot``).
    public func snapshot() -> Snapshot {
        let snapshot = Snapshot(self)
        snapshots.withLock { $0[ObjectIdentifier(snapshot)] = WeakSnapshot(value: snapshot) }
        return snapshot
    }

    /// At most this many snapshots hold a transaction at once; beyond it the one paused
    /// longest gives its transaction (and reader slot) up.
    var maximumOpenSnapshots: Int { max(Int(options.maxReaders) / 4, 1) }

    /// Runs a snapshot's read under the resize lock, then the snapshot's own lock.
    func withSnapshotLock<R>(_ snapshot: Snapshot, _ body: () throws -> R) throws -> R {
        while true {
            do {
                return try resizeLock.withReadLock { try snapshot.locked(body) }
            } catch let error as LMDBError where error.code == .mapResized {
                try adoptResizedMap()
            }
        }
    }

    /// A read transaction for `snapshot`, first ending the transaction of the snapshot
    /// paused longest if too many are open.
    func beginSnapshotTransaction(releasingIdleFor snapshot: Snapshot) throws -> Transaction {
        let others = snapshots.withLock { $0.values.compactMap(\.value) }.filter { $0 !== snapshot }
        let paused = others.compactMap { other in other.pausedSince.map { (other, $0) } }
        if paused.count >= maximumOpenSnapshots, let oldest = paused.min(by: { $0.1 < $1.1 }) {
            _ = oldest.0.endTransaction(wait: false)
        }
        return try begin(readOnly: true)
    }

    /// A counter for ordering snapshots' reads.
    func nextUse() -> UInt64 { uses.add(1, ordering: .relaxed).newValue }

    func forget(_ snapshot: ObjectIdentifier) {
        _ = snapshots.withLock { $0.removeValue(forKey: snapshot) }
    }

    /// Ends every snapshot's transaction; called holding the resize lock exclusively, so
    /// none is being read.
    func endSnapshotTransactions() {
        for snapshot in snapshots.withLock({ $0.values.compactMap(\.value) }) { _ = snapshot.endTransaction(wait: true) }
    }

    /// The current map size in bytes.
    public var currentMapSize: Int { mapSize.withLock { $0 } }

    /// Doubles the map (waits until no transaction of this process is open).
    func grow() throws {
        try resizeLock.withWriteLock {
            let current = mapSize.withLock { $0 }
            guard current < options.maximumMapSize else {
                throw LMDBError(MDB_MAP_FULL, "grow map beyond the maximum of \(options.maximumMapSize) bytes")
            }
            let next = min(current * 2, options.maximumMapSize)
            endSnapshotTransactions()
            try checkpoint(pinning: false)
            try check(mdb_env_set_mapsize(handle, next), "mdb_env_set_mapsize(\(next))")
            mapSize.withLock { $0 = next }
            try repin()
        }
    }

    func begin(readOnly: Bool) throws -> Transaction {
        var txn: OpaquePointer?
        let result = mdb_txn_begin(handle, nil, readOnly ? UInt32(MDB_RDONLY) : 0, &txn)
        if result == MDB_MAP_RESIZED { throw LMDBError(result, "mdb_txn_begin") }
        try check(result, readOnly ? "mdb_txn_begin(read)" : "mdb_txn_begin(write)")
        return Transaction(handle: txn!, readOnly: readOnly, journaling: journal == nil ? nil : self)
    }

    /// Another process grew the map: adopt its size once no transaction of ours is open.
    private func adoptResizedMap() throws {
        try resizeLock.withWriteLock {
            endSnapshotTransactions()
            try checkpoint(pinning: false)
            try check(mdb_env_set_mapsize(handle, 0), "mdb_env_set_mapsize(0)")
            var info = MDB_envinfo()
            mdb_env_info(handle, &info)
            mapSize.withLock { $0 = info.me_mapsize }
            try repin()
        }
    }

    /// Writes a compacted copy of the environment to `data.mdb` in `directory`
    /// (`mdb_env_copy2` with `MDB_CP_COMPACT`).
    ///
    /// The copy is hot and consistent: it runs in a read transaction, so it holds exactly
    /// the last commit before it began while writers (of this process or others) go on.
    /// Compaction leaves out free pages and renumbers the rest, so the copy is usually
    /// smaller than the environment's own file. The copy does not include a lock file.
    ///
    /// ```swift
    /// try FileManager.default.createDirectory(atPath: "/backups/alice", withIntermediateDirectories: true)
    /// try env.copyCompacted(to: "/backups/alice")   // writes /backups/alice/data.mdb
    /// ```
    ///
    /// A write of this process that must grow the map waits until the copy is done.
    /// The copy is not synced to disk: call `fsync` on the file for durability.
    ///
    /// - Parameter directory: an existing directory without a `data.mdb`.
    /// - Throws: ``LMDBError`` when the copy fails (`EEXIST` when `data.mdb` exists
    ///   there, `ENOENT` when the directory does not); a partial `data.mdb` may be left.
    public func copyCompacted(to directory: String) throws {
        while true {
            do {
                try resizeLock.withReadLock {
                    let result = mdb_env_copy2(handle, directory, UInt32(MDB_CP_COMPACT))
                    if result == MDB_MAP_RESIZED { throw LMDBError(result, "mdb_env_copy2(\(directory))") }
                    try check(result, "mdb_env_copy2(\(directory))")
                }
                return
            } catch let error as LMDBError where error.code == .mapResized {
                // The copy failed before writing anything, but after creating the file.
                unlink(directory.hasSuffix("/") ? directory + "data.mdb" : directory + "/data.mdb")
                try adoptResizedMap()
            }
        }
    }

    /// Flushes buffers to disk (for environments opened with `durable: false`).
    public func sync() throws {
        try check(mdb_env_sync(handle, 1), "mdb_env_sync")
    }

    /// The id of the last transaction committed to the environment, by this process or
    /// another: what a read-only transaction begun now would see (``Transaction/id``). An
    /// unchanged id means nothing was written since: a value read then is still current.
    /// Reads the meta pages only; no transaction is begun.
    public var lastCommittedTransaction: UInt64 {
        resizeLock.withReadLock {
            var info = MDB_envinfo()
            mdb_env_info(handle, &info)
            return UInt64(info.me_last_txnid)
        }
    }

    /// Page size, last used page, and map size, for integrity checks before reading.
    public var info: (pageSize: Int, lastPage: Int, mapSize: Int, lastTransaction: Int) {
        var info = MDB_envinfo()
        mdb_env_info(handle, &info)
        var stat = MDB_stat()
        mdb_env_stat(handle, &stat)
        return (Int(stat.ms_psize), info.me_last_pgno, info.me_mapsize, info.me_last_txnid)
    }
}

private struct WeakSnapshot {
    weak var value: Snapshot?
}

/// A handle to a named database inside an ``Environment``.
public struct Database: Sendable, Hashable {
    let dbi: MDB_dbi
    public let name: String
}

/// The directories with an environment open in this process, so that a new environment of
/// a directory waits for the one closing there (``Environment/init(path:options:)``).
private enum OpenPaths {
    private static let condition = NSCondition()
    nonisolated(unsafe) private static var open: [String: Int] = [:]
    /// How long a new environment waits for another of its directory to close.
    private static let patience: TimeInterval = 5

    /// Registers `path`, once no other environment of it is open (or after ``patience``:
    /// one open on purpose, by a tool or test, is not waited for forever). Returns its key.
    static func enter(_ path: String) -> String {
        let key = URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL.resolvingSymlinksInPath().path
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: patience)
        while open[key, default: 0] > 0, condition.wait(until: deadline) {}
        open[key, default: 0] += 1
        return key
    }

    static func leave(_ key: String) {
        condition.lock()
        defer { condition.unlock() }
        open[key, default: 1] -= 1
        if open[key] == 0 { open[key] = nil }
        condition.broadcast()
    }
}
