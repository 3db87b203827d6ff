import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HealthModel
import LMDB
import Logging
import Synchronization

/// A directory of ledgers, one per person, each in its own LMDB environment
/// (`<directory>/ledgers/<id>/`), so one person's data can be backed up, exported or
/// erased on its own.
///
/// ```swift
/// let store = try LedgerStore(directory: URL(filePath: "./data"))
/// let ledger = try store.createLedger(id: "alice")
/// let again = try store.ledger("alice")   // the same open instance
/// ```
public final class LedgerStore: Sendable {
    public let directory: URL
    let configuration: LedgerConfiguration
    let logger: Logger
    private let open = Mutex<[String: Ledger]>([:])
    /// Credential strings that authenticated, ready to be checked again cheaply.
    let presented = PresentedCredentials()
    private let creating = Mutex<Set<String>>([])
    /// Point-in-time views, in `<directory>/views/` (see ``view(of:at:)``).
    let views: PointInTimeViews

    /// Opens (creating if needed) the store in `directory`.
    /// - Throws: ``LedgerFailure`` `failedPrecondition` when the directory is encrypted and
    ///   the configuration has no master key, or another one (``MasterKey``).
    public convenience init(directory: URL, configuration: LedgerConfiguration = .init(), logger: Logger = Logger(label: "healthledger.store")) throws {
        try self.init(directory: directory, configuration: configuration, logger: logger, checkingMasterKey: true)
    }

    init(directory: URL, configuration: LedgerConfiguration, logger: Logger = Logger(label: "healthledger.store"), checkingMasterKey: Bool) throws {
        self.directory = directory
        self.configuration = configuration
        self.logger = logger
        views = PointInTimeViews(
            root: directory.appending(path: "views", directoryHint: .isDirectory), capacity: configuration.viewCapacity,
            diskLimit: configuration.viewDiskLimit,
            idleLifetime: configuration.viewIdleLifetime, logger: logger)
        do {
            try FileManager.default.createDirectory(at: ledgersDirectory, withIntermediateDirectories: true)
        } catch {
            throw LedgerFailure(.storage, "cannot create the data directory \(ledgersDirectory.path): \(error.localizedDescription)", cause: error)
        }
        if checkingMasterKey { try Self.checkMasterKey(configuration.masterKey, directory: directory) }
    }

    var ledgersDirectory: URL { directory.appending(path: "ledgers", directoryHint: .isDirectory) }

    /// What was erased, kept outside the ledgers (and their backups), for restores.
    var erasureJournal: ErasureJournal { ErasureJournal(store: directory) }

    func directory(of id: String) -> URL { ledgersDirectory.appending(path: id, directoryHint: .isDirectory) }

    /// Ledger ids: 1–64 characters from `a-z 0-9 . _ -`, starting with a letter or digit.
    public static func validate(id: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789._-")
        guard (1...64).contains(id.count), id.allSatisfy(allowed.contains), let first = id.first, first.isLetter || first.isNumber
        else {
            throw LedgerFailure(
                .invalidArgument, "invalid ledger id '\(id)': use 1–64 characters from a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
        }
    }

    /// Creates a ledger and records its creation as event 1.
    ///
    /// - Parameter id: the ledger's id; a random UUID when nil.
    /// - Throws: ``LedgerFailure`` `alreadyExists` or `invalidArgument`.
    public func createLedger(id: String? = nil, displayName: String = "") throws -> Ledger {
        let id = id ?? UUID().uuidString.lowercased()
        try Self.validate(id: id)
        let reserved = creating.withLock { $0.insert(id).inserted }
        guard reserved else { throw LedgerFailure(.alreadyExists, "ledger '\(id)' is being created") }
        defer { _ = creating.withLock { $0.remove(id) } }
        let url = directory(of: id)
        guard !FileManager.default.fileExists(atPath: url.path) else {
            throw LedgerFailure(.alreadyExists, "ledger '\(id)' already exists")
        }
        // Build in a hidden directory, then rename: a crash never leaves a half-created ledger.
        let staging = ledgersDirectory.appending(path: ".creating-\(id)-\(UUID().uuidString)", directoryHint: .isDirectory)
        do {
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            try Ledger.initialize(at: staging, id: id, displayName: displayName, configuration: configuration)
            try FileManager.default.moveItem(at: staging, to: url)
            try Self.syncDirectory(ledgersDirectory)
        } catch {
            try? FileManager.default.removeItem(at: staging)
            if let failure = error as? LedgerFailure { throw failure }
            throw LedgerFailure(.storage, "cannot create ledger '\(id)': \(error)", cause: error)
        }
        return try ledger(id)
    }

    /// The open ledger `id`, opening it on first use.
    /// - Throws: ``LedgerFailure`` `notFound` when there is no such ledger.
    public func ledger(_ id: String) throws -> Ledger {
        try Self.validate(id: id)
        if let ledger = open.withLock({ $0[id] }) { return ledger }
        let url = directory(of: id)
        guard FileManager.default.fileExists(atPath: url.appending(path: "data.mdb").path) else {
            throw LedgerFailure(.notFound, "no ledger '\(id)' in \(directory.path)")
        }
        return try open.withLock { open in
            if let ledger = open[id] { return ledger }
            let ledger = try Self.process.ledger(at: url) {
                try Ledger(id: id, directory: url, configuration: configuration, logger: logger)
            }
            // Views were built from the log before an erasure: they go with it. The journal
            // keeps what was erased outside the ledger's backups, for restores.
            let (views, journal) = (self.views, erasureJournal)
            ledger.afterErasure.withLock {
                $0 = { report, reason in
                    views.discard(ledgerID: id)
                    try journal.append(
                        ErasureJournal.Entry(
                            time: Date(), sequence: report.sequence, objects: report.erasedObjects, reason: reason, ledgerErased: nil,
                            characteristics: report.erasedCharacteristics.isEmpty ? nil : report.erasedCharacteristics),
                        ledger: id)
                }
            }
            open[id] = ledger
            return ledger
        }
    }

    /// Whether ledger `id` is open in this process, through this store or another one on
    /// the same directory.
    func isOpenInProcess(_ id: String) -> Bool {
        open.withLock { $0[id] != nil } || Self.process.isOpen(at: directory(of: id))
    }

    /// Runs `body` with `id` reserved: no creation or restore of the same id runs meanwhile.
    func reserving<R>(_ id: String, _ body: () throws -> R) throws -> R {
        let reserved = creating.withLock { $0.insert(id).inserted }
        guard reserved else { throw LedgerFailure(.alreadyExists, "ledger '\(id)' is being created or restored") }
        defer { _ = creating.withLock { $0.remove(id) } }
        return try body()
    }

    /// The ledgers open in this process, by path: LMDB forbids opening one environment
    /// twice in a process, so stores on the same directory share their ledgers.
    private static let process = OpenLedgers()

    private final class OpenLedgers: Sendable {
        private struct Entry { weak var ledger: Ledger? }
        private let entries = Mutex<[String: Entry]>([:])

        func ledger(at url: URL, open: () throws -> Ledger) throws -> Ledger {
            let key = url.standardizedFileURL.resolvingSymlinksInPath().path
            return try entries.withLock { entries in
                if let ledger = entries[key]?.ledger { return ledger }
                let ledger = try open()
                entries[key] = Entry(ledger: ledger)
                return ledger
            }
        }

        func isOpen(at url: URL) -> Bool {
            let key = url.standardizedFileURL.resolvingSymlinksInPath().path
            return entries.withLock { $0[key]?.ledger != nil }
        }
    }

    /// Makes a rename in `directory` durable.
    static func syncDirectory(_ directory: URL) throws {
        let descriptor = Glibc.open(directory.path, O_RDONLY | O_DIRECTORY)
        guard descriptor >= 0 else { throw LedgerFailure(.storage, "cannot open \(directory.path) to sync it") }
        defer { Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw LedgerFailure(.storage, "cannot sync \(directory.path)") }
    }

    /// `ledger` as it stood at `point`: a read-only ledger materialized from its log up to
    /// that event, with the projections (authorizations included) as they were then. Built
    /// on first use and reused by later reads at the same event; see
    /// ``LedgerConfiguration/viewCapacity``.
    /// - Throws: ``HealthError`` `invalidArgument` for a point before the ledger or past its head.
    public func view(of ledger: Ledger, at point: PointInTime) throws -> Ledger {
        guard ledger.viewOf == nil else { throw HealthError.invalidArgument("a view has no views of its own", field: "as_of") }
        return try views.view(of: ledger, at: try ledger.sequence(at: point))
    }

    /// Writes the access records every open ledger holds in memory (on shutdown: they are
    /// otherwise written within ``LedgerConfiguration/accessFlushInterval``).
    public func flushAccessRecords() {
        for ledger in open.withLock({ Array($0.values) }) { ledger.flushAccessRecordsLogging() }
    }

    /// The ids of every ledger in the store, sorted.
    public func ledgerIDs() throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: ledgersDirectory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") && (try? Self.validate(id: $0)) != nil }.sorted()
    }
}
