import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HealthModel
import LMDB
import Logging

/// What one ledger's backup holds, written as `backup.json` next to the copied files.
///
/// The head is read from the copy itself once it is written, so it names exactly the
/// last event the backup holds:
///
/// ```json
/// {
///   "createdAt" : "2026-11-21T03:00:00Z",
///   "files" : ["data.mdb"],
///   "formatVersion" : 1,
///   "headHash" : "9f2c…",
///   "headSequence" : 5120,
///   "ledgerID" : "alice"
/// }
/// ```
public struct BackupManifest: Codable, Sendable, Hashable {
    /// The manifest's file name inside a backup directory.
    public static let fileName = "backup.json"
    /// The format this version writes and reads.
    public static let currentFormatVersion = 1

    /// The backup layout's version (``currentFormatVersion`` when written by this version).
    public var formatVersion: Int
    /// The id of the ledger that was backed up.
    public var ledgerID: String
    /// The sequence number of the last event in the backup.
    public var headSequence: UInt64
    /// The SHA-256 hash of the last event in the backup, as 64 lowercase hex digits.
    public var headHash: String
    /// When the backup was taken.
    public var createdAt: Date
    /// The ledger's files in the backup directory (`data.mdb`, the compacted LMDB copy,
    /// and whatever else the ledger directory held besides its LMDB files).
    public var files: [String]
    /// The server it was taken from: the name in its data directory's `node.json`
    /// (``NodeIdentity``), or the host name where there is none; nil in older backups.
    public var node: String?
    /// That server's cluster, when it is a member of one.
    public var cluster: String?

    /// A manifest; ``Ledger/backup(to:)`` makes the one it writes.
    public init(formatVersion: Int = Self.currentFormatVersion, ledgerID: String, headSequence: UInt64, headHash: String, createdAt: Date, files: [String]) {
        self.formatVersion = formatVersion
        self.ledgerID = ledgerID
        self.headSequence = headSequence
        self.headHash = headHash
        self.createdAt = createdAt
        self.files = files
    }

    /// Where a backup taken in the data directory `dataDirectory` comes from.
    static func origin(dataDirectory: URL) -> (node: String, cluster: String?) {
        let identity = NodeIdentity.read(from: dataDirectory)
        return (identity?.node ?? ProcessInfo.processInfo.hostName, identity?.cluster)
    }

    /// The manifest as written to `backup.json`: pretty-printed JSON with sorted keys.
    public func encoded() throws -> Data {
        try BackupFiles.encoder.encode(self)
    }

    /// Reads and checks the manifest of the backup in `directory`.
    ///
    /// - Throws: ``LedgerFailure`` `notFound` when `directory` does not exist,
    ///   `invalidArgument` when it is not a backup (no `backup.json`), `corrupted` when the
    ///   manifest does not decode or holds impossible values.
    public static func read(from directory: URL) throws -> BackupManifest {
        let url = try BackupFiles.manifestURL(fileName, in: directory)
        let manifest: BackupManifest = try BackupFiles.decode(url)
        try manifest.check(url)
        return manifest
    }

    private func check(_ url: URL) throws {
        func damaged(_ reason: String) -> LedgerFailure { .corrupted("the manifest \(url.path) is damaged: \(reason)") }
        guard formatVersion == Self.currentFormatVersion else {
            throw LedgerFailure(
                .invalidArgument, "the backup in \(url.deletingLastPathComponent().path) has format version \(formatVersion); this version reads \(Self.currentFormatVersion)")
        }
        guard (try? LedgerStore.validate(id: ledgerID)) != nil else { throw damaged("'\(ledgerID)' is not a ledger id") }
        guard headSequence >= 1 else { throw damaged("its head sequence is 0: a ledger has at least one event") }
        guard headHash.utf8.count == 64, headHash.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw damaged("its head hash is not 64 lowercase hex digits")
        }
        guard files.contains(BackupFiles.dataFile) else { throw damaged("its files do not include \(BackupFiles.dataFile)") }
        for name in files where !BackupFiles.isPlainName(name) || name == Self.fileName || name == BackupFiles.lockFile {
            throw damaged("it lists a file named '\(name)'")
        }
    }

    fileprivate func write(to directory: URL) throws {
        try BackupFiles.writeDurably(try encoded() + Data("\n".utf8), to: directory.appending(path: Self.fileName))
    }
}

/// The index of a backup of every ledger of a store (``LedgerStore/backupAll(to:)``),
/// written as `backup-set.json`; each ledger's backup is in the subdirectory named by its id.
public struct BackupSetManifest: Codable, Sendable, Hashable {
    /// The index's file name inside a backup directory.
    public static let fileName = "backup-set.json"

    /// The backup layout's version (``BackupManifest/currentFormatVersion``).
    public var formatVersion: Int
    /// When the backup of the first ledger began.
    public var createdAt: Date
    /// The ids of the ledgers backed up, sorted; each has a subdirectory of that name.
    public var ledgers: [String]
    /// The ledgers of the store that could not be backed up, with why; they have no
    /// subdirectory, and verifying the set reports each.
    public var failed: [Failure]

    /// A ledger left out of a backup set.
    public struct Failure: Codable, Sendable, Hashable {
        public var ledgerID: String
        public var problem: String

        public init(ledgerID: String, problem: String) {
            self.ledgerID = ledgerID
            self.problem = problem
        }
    }

    /// An index; ``LedgerStore/backupAll(to:)`` makes the one it writes.
    public init(formatVersion: Int = BackupManifest.currentFormatVersion, createdAt: Date, ledgers: [String], failed: [Failure] = []) {
        self.formatVersion = formatVersion
        self.createdAt = createdAt
        self.ledgers = ledgers
        self.failed = failed
    }

    private enum CodingKeys: String, CodingKey { case formatVersion, createdAt, ledgers, failed }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        formatVersion = try container.decode(Int.self, forKey: .formatVersion)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        ledgers = try container.decode([String].self, forKey: .ledgers)
        // Sets written before failures were recorded have none.
        failed = try container.decodeIfPresent([Failure].self, forKey: .failed) ?? []
    }

    /// Reads and checks the index of the backup set in `directory`.
    ///
    /// - Throws: ``LedgerFailure`` as ``BackupManifest/read(from:)`` does.
    public static func read(from directory: URL) throws -> BackupSetManifest {
        let url = try BackupFiles.manifestURL(fileName, in: directory)
        let manifest: BackupSetManifest = try BackupFiles.decode(url)
        guard manifest.formatVersion == BackupManifest.currentFormatVersion else {
            throw LedgerFailure(
                .invalidArgument,
                "the backup in \(directory.path) has format version \(manifest.formatVersion); this version reads \(BackupManifest.currentFormatVersion)")
        }
        for id in manifest.ledgers where (try? LedgerStore.validate(id: id)) == nil {
            throw LedgerFailure.corrupted("the manifest \(url.path) is damaged: '\(id)' is not a ledger id")
        }
        return manifest
    }

    /// Whether `directory` holds a backup set (a `backup-set.json`).
    public static func isPresent(in directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: directory.appending(path: fileName).path)
    }
}

/// The outcome of checking one ledger's backup: its hash chain, its projections against
/// a fresh replay of its log, and its head against the manifest.
public struct BackupVerification: Sendable, Hashable {
    /// The backup directory checked.
    public var directory: URL
    /// The ledger the backup is of (from the manifest, or the set's index when the
    /// manifest could not be read).
    public var ledgerID: String
    /// The backup's manifest, when it could be read.
    public var manifest: BackupManifest?
    /// Events whose chain link was checked.
    public var eventsChecked: UInt64
    /// Objects in the backup.
    public var objects: Int
    /// The first problem found, or nil when the backup is intact.
    public var problem: String?

    /// Whether the backup verified.
    public var isValid: Bool { problem == nil }
}

extension Ledger {
    /// Copies the ledger, as of one consistent moment, into `directory` while writes go
    /// on, and records what the copy holds in `backup.json` there.
    ///
    /// The LMDB environment is copied compacted (`mdb_env_copy2` with `MDB_CP_COMPACT`)
    /// in one read transaction: the copy holds every write acknowledged before the backup
    /// began and none that committed after its snapshot. Anything else the ledger
    /// directory holds besides its LMDB files is copied too. The manifest's head is read
    /// from the copy, and every file is synced to disk before this returns.
    ///
    /// ```swift
    /// let manifest = try store.ledger("alice").backup(to: URL(filePath: "/backups/alice-2026-11-21"))
    /// print(manifest.headSequence, manifest.headHash)
    /// ```
    ///
    /// - Parameter directory: where to write the backup; it must not exist (it is
    ///   created) or be empty.
    /// - Returns: the manifest written.
    /// - Throws: ``LedgerFailure`` `alreadyExists` when `directory` is a file or is not
    ///   empty, `storage` when copying fails (nothing is left behind then).
    @discardableResult
    public func backup(to directory: URL) throws -> BackupManifest {
        let destination = try BackupFiles.Destination(directory)
        do {
            do {
                try environment.copyCompacted(to: directory.path)
            } catch let error as LMDBError {
                throw LedgerFailure(.storage, "cannot copy ledger '\(id)' to \(directory.path): \(error.message)", cause: error)
            }
            var files = [BackupFiles.dataFile]
            for name in try extraFiles() {
                do {
                    try FileManager.default.copyItem(at: self.directory.appending(path: name), to: directory.appending(path: name))
                } catch {
                    throw LedgerFailure(.storage, "cannot copy \(self.directory.appending(path: name).path) to \(directory.path): \(error.localizedDescription)", cause: error)
                }
                files.append(name)
            }
            for name in files { try BackupFiles.sync(directory.appending(path: name)) }
            let head = try Self.head(ofCopyAt: directory)
            var manifest = BackupManifest(
                ledgerID: id, headSequence: head.sequence, headHash: head.hash.hexString, createdAt: BackupFiles.now(), files: files)
            // A store's ledger lives in <data directory>/ledgers/<id>.
            (manifest.node, manifest.cluster) = BackupManifest.origin(dataDirectory: self.directory.deletingLastPathComponent().deletingLastPathComponent())
            try manifest.write(to: directory)
            try LedgerStore.syncDirectory(directory)
            // The directory's own entry, when the backup created it, is durable only once its
            // parent is synced too.
            try LedgerStore.syncDirectory(directory.deletingLastPathComponent())
            return manifest
        } catch {
            destination.discard()
            throw error
        }
    }

    /// What the ledger directory holds besides its LMDB files, sorted.
    private func extraFiles() throws -> [String] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw LedgerFailure(.storage, "cannot list \(directory.path): \(error.localizedDescription)", cause: error)
        }
        let lmdbFiles: Set = [BackupFiles.dataFile, BackupFiles.lockFile, Environment.journalFileName, BackupManifest.fileName]
        return names.filter { !lmdbFiles.contains($0) }.sorted()
    }

    /// The log head of the LMDB copy in `directory`; leaves no lock file behind.
    static func head(ofCopyAt directory: URL) throws -> (sequence: UInt64, hash: [UInt8]) {
        defer { try? FileManager.default.removeItem(at: directory.appending(path: BackupFiles.lockFile)) }
        return try readHead(ofCopyAt: directory)
    }

    /// Opens the copy in its own call, so its environment is closed when this returns.
    private static func readHead(ofCopyAt directory: URL) throws -> (sequence: UInt64, hash: [UInt8]) {
        let environment = try openEnvironment(at: directory, configuration: LedgerConfiguration())
        // The head is kept clear, in `meta`: no key needed.
        let databases = try LedgerDatabases(environment: environment, cipher: nil)
        let head = try environment.read { txn in try LogHead.read(LedgerSnapshot(txn, databases)) }
        return (head.sequence, head.hash)
    }
}

/// What ``LedgerStore/backupAll(to:)`` did: the ledgers backed up and those it could not.
public struct BackupSetOutcome: Sendable {
    /// Each backed-up ledger's manifest, in the order of ``LedgerStore/ledgerIDs()``.
    public var manifests: [BackupManifest]
    /// The ledgers left out, with why.
    public var failed: [BackupSetManifest.Failure]
}

extension LedgerStore {
    /// Backs up every ledger of the store, each into `directory/<ledger-id>/` as
    /// ``Ledger/backup(to:)`` does, and writes the index `backup-set.json`.
    ///
    /// Each ledger's copy is consistent on its own; the ledgers are copied one after another.
    /// A ledger that cannot be backed up (a damaged file, say) does not cost the others: it
    /// is left out, named in the index with its problem, and reported in the outcome.
    ///
    /// - Parameter directory: where to write the backups; it must not exist or be empty.
    /// - Throws: ``LedgerFailure`` when the destination is unusable, when the index cannot be
    ///   written, or (with the first ledger's error) when no ledger could be backed up;
    ///   nothing is left behind then.
    @discardableResult
    public func backupAll(to directory: URL) throws -> BackupSetOutcome {
        let ids = try ledgerIDs()
        let destination = try BackupFiles.Destination(directory)
        do {
            let started = BackupFiles.now()
            var outcome = BackupSetOutcome(manifests: [], failed: [])
            var firstError: (any Error)?
            for id in ids {
                do {
                    outcome.manifests.append(try ledger(id).backup(to: directory.appending(path: id, directoryHint: .isDirectory)))
                } catch {
                    firstError = firstError ?? error
                    let problem = (error as? LedgerFailure)?.message ?? "\(error)"
                    outcome.failed.append(BackupSetManifest.Failure(ledgerID: id, problem: problem))
                }
            }
            if outcome.manifests.isEmpty, let firstError { throw firstError }
            let index = BackupSetManifest(createdAt: started, ledgers: outcome.manifests.map(\.ledgerID), failed: outcome.failed)
            try BackupFiles.writeDurably(
                try BackupFiles.encoder.encode(index) + Data("\n".utf8), to: directory.appending(path: BackupSetManifest.fileName))
            try Self.syncDirectory(directory)
            try Self.syncDirectory(directory.deletingLastPathComponent())
            return outcome
        } catch {
            destination.discard()
            throw error
        }
    }

    /// Restores every ledger of the backup set in `directory` (``backupAll(to:)``), each as
    /// ``restore(from:as:replace:)`` does: one ledger's failure leaves it unchanged and does
    /// not stop the others.
    ///
    /// - Returns: per ledger of the set's index, its verification or the error that stopped
    ///   its restore; the ledgers the set left out come back as ``LedgerFailure/Kind/notFound``.
    /// - Throws: ``LedgerFailure`` when `directory` holds no readable backup set.
    public func restoreAll(from directory: URL, replace: Bool = false) throws -> [(ledgerID: String, result: Result<BackupVerification, LedgerFailure>)] {
        let index = try BackupSetManifest.read(from: directory)
        var results: [(ledgerID: String, result: Result<BackupVerification, LedgerFailure>)] = index.ledgers.map { id in
            do {
                return (id, .success(try restore(from: directory.appending(path: id, directoryHint: .isDirectory), replace: replace)))
            } catch let failure as LedgerFailure {
                return (id, .failure(failure))
            } catch {
                return (id, .failure(LedgerFailure(.storage, "\(error)")))
            }
        }
        results += index.failed.map { ($0.ledgerID, .failure(LedgerFailure(.notFound, "it is not in the backup set: \($0.problem)"))) }
        return results
    }

    /// Verifies the backup in `directory`, whether of one ledger (``Ledger/backup(to:)``)
    /// or of every ledger of a store (``backupAll(to:)``, each checked in turn).
    ///
    /// - Parameter scratch: where to make the temporary copies checked (the system's
    ///   temporary directory when nil).
    /// - Returns: one verification per ledger; a ledger of a set whose backup is missing
    ///   or whose manifest is damaged is reported as a problem.
    /// - Throws: ``LedgerFailure`` when `directory` is not a backup, or (for one
    ///   ledger's backup) its manifest is damaged.
    public static func verifyBackups(at directory: URL, scratch: URL? = nil, masterKey: MasterKey? = nil) throws -> [BackupVerification] {
        let single = directory.appending(path: BackupManifest.fileName)
        if FileManager.default.fileExists(atPath: single.path) || !BackupSetManifest.isPresent(in: directory) {
            return [try verifyBackup(at: directory, scratch: scratch, masterKey: masterKey)]
        }
        let index = try BackupSetManifest.read(from: directory)
        let leftOut = index.failed.map { failure in
            BackupVerification(
                directory: directory.appending(path: failure.ledgerID, directoryHint: .isDirectory), ledgerID: failure.ledgerID, manifest: nil,
                eventsChecked: 0, objects: 0, problem: "it was not backed up: \(failure.problem)")
        }
        return leftOut + index.ledgers.map { id in
            let member = directory.appending(path: id, directoryHint: .isDirectory)
            do {
                var verification = try verifyBackup(at: member, scratch: scratch, masterKey: masterKey)
                if verification.problem == nil, verification.manifest?.ledgerID != id {
                    verification.problem = "it is a backup of ledger '\(verification.ledgerID)', but the set lists it as '\(id)'"
                }
                return verification
            } catch let failure as LedgerFailure {
                return BackupVerification(directory: member, ledgerID: id, manifest: nil, eventsChecked: 0, objects: 0, problem: failure.message)
            } catch {
                return BackupVerification(directory: member, ledgerID: id, manifest: nil, eventsChecked: 0, objects: 0, problem: "\(error)")
            }
        }
    }

    /// Verifies one ledger's backup offline, without changing it: on a temporary copy,
    /// recomputes the hash chain (``Ledger/verify(progress:)``), checks that the head
    /// equals the manifest's, and compares the projections with a fresh replay of the log
    /// (``Ledger/replay(install:progress:)``).
    ///
    /// ```swift
    /// let result = try LedgerStore.verifyBackup(at: URL(filePath: "/backups/alice-2026-11-21"))
    /// if let problem = result.problem { print("FAILED: \(problem)") }
    /// ```
    ///
    /// - Parameter scratch: where to make the temporary copy (the system's temporary
    ///   directory when nil); it needs room for the backup's files.
    /// - Returns: the verification; its ``BackupVerification/problem`` names the first problem.
    /// - Throws: ``LedgerFailure`` when `directory` is not a backup or its manifest is
    ///   damaged, or the temporary copy cannot be made.
    public static func verifyBackup(at directory: URL, scratch: URL? = nil, masterKey: MasterKey? = nil) throws -> BackupVerification {
        let manifest = try BackupManifest.read(from: directory)
        var result = BackupVerification(directory: directory, ledgerID: manifest.ledgerID, manifest: manifest, eventsChecked: 0, objects: 0, problem: nil)
        if let unusable = BackupFiles.unusableFile(of: manifest, in: directory) {
            result.problem = unusable
            return result
        }
        let root = (scratch ?? FileManager.default.temporaryDirectory)
            .appending(path: "healthledger-verify-\(UUID().uuidString)", directoryHint: .isDirectory)
        defer { try? FileManager.default.removeItem(at: root) }
        let copy = root.appending(path: manifest.ledgerID, directoryHint: .isDirectory)
        try BackupFiles.copy(manifest.files, from: directory, to: copy, sync: false)
        return check(ledgerAt: copy, manifest: manifest, backup: directory, masterKey: masterKey)
    }

    /// Opens the ledger copy at `ledgerDirectory` and checks its chain, its head against
    /// `manifest`, and its projections against a fresh replay. The copy's environment is
    /// closed when this returns.
    static func check(ledgerAt ledgerDirectory: URL, manifest: BackupManifest, backup: URL, masterKey: MasterKey?) -> BackupVerification {
        var result = BackupVerification(directory: backup, ledgerID: manifest.ledgerID, manifest: manifest, eventsChecked: 0, objects: 0, problem: nil)
        do {
            // An encrypted backup opens with the master key; a clear one is checked as it is.
            var configuration = LedgerConfiguration(followInterval: nil)
            configuration.masterKey = masterKey
            configuration.encryptsClearLedgers = false
            let ledger = try Ledger(id: manifest.ledgerID, directory: ledgerDirectory, configuration: configuration, logger: Logger(label: "healthledger.backup"))
            let chain = try ledger.verify()
            result.eventsChecked = chain.eventsChecked
            if let problem = chain.problem {
                result.problem = "hash chain: \(problem)"
                return result
            }
            let head = try ledger.head()
            let hash = head.hash.hexString
            guard head.sequence == manifest.headSequence, hash == manifest.headHash else {
                result.problem =
                    "head: the copy ends at event \(head.sequence) with hash \(hash), but the manifest records event \(manifest.headSequence) with hash \(manifest.headHash)"
                return result
            }
            let replay = try ledger.replay()
            result.objects = replay.objects
            guard replay.identical else {
                result.problem =
                    "projections: they differ from a fresh replay of the log (digest \(replay.liveDigest.hexString), rebuilt \(replay.rebuiltDigest.hexString))"
                return result
            }
        } catch let failure as LedgerFailure {
            result.problem = failure.message
        } catch let error as LMDBError {
            result.problem = "the ledger file cannot be read: \(error.message)"
        } catch {
            result.problem = "\(error)"
        }
        return result
    }
}

/// File handling shared by backup, verify and restore.
enum BackupFiles {
    static let dataFile = "data.mdb"
    static let lockFile = "lock.mdb"

    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    /// A backup destination: created when missing, refused when not empty. ``discard()``
    /// undoes what the backup wrote.
    struct Destination {
        let url: URL
        let created: Bool

        init(_ url: URL) throws {
            self.url = url
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else { throw LedgerFailure(.alreadyExists, "the backup destination \(url.path) is a file, not a directory") }
                let contents: [String]
                do {
                    contents = try FileManager.default.contentsOfDirectory(atPath: url.path)
                } catch {
                    throw LedgerFailure(.storage, "cannot read the backup destination \(url.path): \(error.localizedDescription)")
                }
                guard contents.isEmpty else { throw LedgerFailure(.alreadyExists, "the backup destination \(url.path) is not empty") }
                created = false
            } else {
                do {
                    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
                } catch {
                    throw LedgerFailure(.storage, "cannot create the backup destination \(url.path): \(error.localizedDescription)")
                }
                created = true
            }
        }

        func discard() {
            if created {
                try? FileManager.default.removeItem(at: url)
            } else {
                for name in (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? [] {
                    try? FileManager.default.removeItem(at: url.appending(path: name))
                }
            }
        }
    }

    /// The manifest file `name` in the backup `directory`.
    static func manifestURL(_ name: String, in directory: URL) throws -> URL {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) else {
            throw LedgerFailure(.notFound, "no backup at \(directory.path): it does not exist")
        }
        guard isDirectory.boolValue else { throw LedgerFailure(.invalidArgument, "\(directory.path) is not a backup: it is a file, not a directory") }
        let url = directory.appending(path: name)
        guard FileManager.default.fileExists(atPath: url.path) else {
            if name == BackupManifest.fileName, BackupSetManifest.isPresent(in: directory) {
                throw LedgerFailure(
                    .invalidArgument, "\(directory.path) holds the backups of several ledgers: use one of its subdirectories, \(directory.path)/<ledger-id>")
            }
            throw LedgerFailure(.invalidArgument, "\(directory.path) is not a backup: it has no \(BackupManifest.fileName)")
        }
        return url
    }

    /// Decodes the JSON manifest at `url`, reporting damage in one line.
    static func decode<T: Decodable>(_ url: URL) throws -> T {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw LedgerFailure(.storage, "cannot read \(url.path): \(error.localizedDescription)")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(T.self, from: data)
        } catch let error as DecodingError {
            let reason: String
            switch error {
            case .keyNotFound(let key, _): reason = "it has no '\(key.stringValue)'"
            case .typeMismatch(_, let context), .valueNotFound(_, let context):
                reason = "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type"
            case .dataCorrupted(let context) where !context.codingPath.isEmpty:
                reason = "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' is malformed"
            default: reason = "it is not valid JSON"
            }
            throw LedgerFailure.corrupted("the manifest \(url.path) is damaged: \(reason)")
        } catch {
            throw LedgerFailure.corrupted("the manifest \(url.path) is damaged: \(error)")
        }
    }

    /// A single path component naming an entry inside a directory.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\0")
    }

    /// What is wrong with the first file the manifest lists that the backup lacks or holds as
    /// anything but a regular file: a symbolic link (which a copy would follow to write, or
    /// keep, pointing out of the ledger's directory), a directory, a device. Nil when none is.
    static func unusableFile(of manifest: BackupManifest, in directory: URL) -> String? {
        for name in manifest.files {
            // Read without following a link: the entry itself.
            guard let type = (try? FileManager.default.attributesOfItem(atPath: directory.appending(path: name).path))?[.type] as? FileAttributeType else {
                return "\(name), listed in the manifest, is missing"
            }
            guard type == .typeRegular else {
                let kind = type == .typeSymbolicLink ? "a symbolic link" : type == .typeDirectory ? "a directory" : "not a regular file"
                return "\(name), listed in the manifest, is \(kind)"
            }
        }
        return nil
    }

    /// Copies `files` from `source` into `target` (created), syncing them when asked.
    static func copy(_ files: [String], from source: URL, to target: URL, sync: Bool) throws {
        do {
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
            for name in files { try FileManager.default.copyItem(at: source.appending(path: name), to: target.appending(path: name)) }
        } catch {
            throw LedgerFailure(.storage, "cannot copy the backup in \(source.path) to \(target.path): \(error.localizedDescription)")
        }
        if sync {
            for name in files { try Self.sync(target.appending(path: name)) }
            try LedgerStore.syncDirectory(target)
        }
    }

    /// Writes `data` to `url` through a temporary file and a rename, synced.
    static func writeDurably(_ data: Data, to url: URL) throws {
        let temporary = url.deletingLastPathComponent().appending(path: ".\(url.lastPathComponent).\(UUID().uuidString)")
        do {
            try data.write(to: temporary)
            try sync(temporary)
            try FileManager.default.moveItem(at: temporary, to: url)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            if let failure = error as? LedgerFailure { throw failure }
            throw LedgerFailure(.storage, "cannot write \(url.path): \(error.localizedDescription)")
        }
    }

    /// Flushes a regular file to disk (directories are left alone).
    static func sync(_ url: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else { return }
        let descriptor = Glibc.open(url.path, O_RDONLY)
        guard descriptor >= 0 else { throw LedgerFailure(.storage, "cannot open \(url.path) to sync it") }
        defer { Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw LedgerFailure(.storage, "cannot sync \(url.path)") }
    }

    /// Now, in whole seconds: what the manifest's ISO 8601 time holds, so a manifest read
    /// back equals the one written.
    static func now() -> Date {
        Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
    }

}
