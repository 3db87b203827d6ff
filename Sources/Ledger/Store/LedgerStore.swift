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
///
/// Ledgers open on first use and close when idle (``LedgerConfiguration/ledgerIdleLifetime``)
/// or when more than ``LedgerConfiguration/maximumOpenLedgers`` are open (the least recently
/// used first). The store then only lets go of it: a ledger a call, a stream or a backup still
/// holds stays open, and is the one the next ``ledger(_:)`` returns, until the last holder is
/// done; then its environment closes.
public final class LedgerStore: Sendable {
    public let directory: URL
    let configuration: LedgerConfiguration
    let logger: Logger
    private let open = Mutex<OpenLedgers>(OpenLedgers())
    /// Closes idle ledgers every so often (nil without an idle lifetime).
    private let idleSweep = Mutex<Task<Void, Never>?>(nil)
    /// Credential strings that authenticated, ready to be checked again cheaply.
    let presented = PresentedCredentials()
    private let creating = Mutex<Set<String>>([])
    /// Point-in-time views, in `<directory>/views/` (see ``view(of:at:)``).
    let views: PointInTimeViews
    /// Which ledgers changed, for followers that watch the store (``LedgerChanges``).
    public let changes = LedgerChanges()
    /// The followers watching the store, as this primary hears from them.
    public let watchers = FollowerPresence()

    /// The cluster leaderships this store's ledgers are written under, by placement group:
    /// set for each group while this server leads it, none otherwise (and outside a cluster).
    /// Each ledger records its group's in a `primaryChanged` event before its first write
    /// under a new epoch.
    public let primaryTerms: PrimaryTerms

    /// Which ledgers' access records this server hands to a primary (none unless told).
    public let accessForwarding: AccessForwarding

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
        let terms = PrimaryTerms()
        (primaryTerms, accessForwarding) = (terms, AccessForwarding(terms: terms))
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
        if let lifetime = configuration.ledgerIdleLifetime { startIdleSweep(every: max(lifetime / 4, .milliseconds(10))) }
    }

    deinit { idleSweep.withLock { $0?.cancel() } }

    private func startIdleSweep(every interval: Duration) {
        idleSweep.withLock { task in
            task = Task.detached { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard let self else { return }
                    self.closeIdleLedgers()
                }
            }
        }
    }

    var ledgersDirectory: URL { directory.appending(path: "ledgers", directoryHint: .isDirectory) }

    /// What was erased, kept outside the ledgers (and their backups), for restores.
    var erasureJournal: ErasureJournal { ErasureJournal(store: directory) }

    func directory(of id: String) -> URL { ledgersDirectory.appending(path: id, directoryHint: .isDirectory) }

    /// Ledger ids: 1–64 characters from `a-z 0-9 . _ -`, starting with a letter or digit.
    public static func validate(id: String) throws {
        let valid = (1...64).contains(id.utf8.count) && id.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        guard valid, let first = id.first, first.isLetter || first.isNumber
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
        if let erased = try erasureJournal.entries(of: id).first(where: { $0.ledgerErased == true }) {
            throw LedgerFailure(
                .failedPrecondition,
                "ledger '\(id)' was erased on \(erased.time.formatted(.iso8601)): its id is not used again (no backup of it may come back), so choose another")
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
        let created = try ledger(id)
        changes.note(id)
        return created
    }

    /// The open ledger `id`, opening it on first use (or again after it was closed).
    /// - Throws: ``LedgerFailure`` `notFound` when there is no such ledger.
    public func ledger(_ id: String) throws -> Ledger {
        if let ledger = open.withLock({ $0.use(id) }) { return ledger }
        try Self.validate(id: id)
        let url = directory(of: id)
        guard FileManager.default.fileExists(atPath: url.appending(path: "data.mdb").path) else {
            throw LedgerFailure(.notFound, "no ledger '\(id)' in \(directory.path)")
        }
        var evicted: [Ledger] = []
        defer {
            // Released outside the lock: the last reference's deinit closes the environment.
            evicted.removeAll()
        }
        return try open.withLock { open in
            if let ledger = open.use(id) { return ledger }
            guard !open.isClosing(id) else { throw LedgerFailure(.notFound, "ledger '\(id)' is being erased") }
            let changes = self.changes
            let ledger = try Self.process.ledger(at: url) {
                let ledger = try Ledger(
                    id: id, directory: url, configuration: configuration, logger: logger, terms: primaryTerms, forwarding: accessForwarding)
                ledger.changeWatchers.storeNote.withLock { $0 = Callback { _ = changes.note(id) } }
                return ledger
            }
            // Views were built from the log before an erasure: they go with it. The journal
            // keeps what was erased outside the ledger's backups, for restores.
            let (views, journal) = (self.views, erasureJournal)
            ledger.afterErasure.withLock {
                $0 = Callback { [weak self] (report: ErasureReport, reason: String) in
                    views.discard(ledgerID: id)
                    self?.removeSnapshots(of: id)
                    try journal.append(
                        ErasureJournal.Entry(
                            time: Date(), sequence: report.sequence, objects: report.erasedObjects, reason: reason, ledgerErased: nil,
                            characteristics: report.erasedCharacteristics.isEmpty ? nil : report.erasedCharacteristics),
                        ledger: id)
                }
            }
            evicted = open.insert(ledger, limit: configuration.maximumOpenLedgers)
            return ledger
        }
    }

    /// Lets go of the ledgers unused for ``LedgerConfiguration/ledgerIdleLifetime`` (each
    /// closes once no call, stream or backup holds it any more). Runs on its own every
    /// quarter of that lifetime.
    /// - Returns: how many the store let go of.
    @discardableResult
    public func closeIdleLedgers() -> Int {
        guard let lifetime = configuration.ledgerIdleLifetime else { return 0 }
        var released = open.withLock { $0.removeUnused(since: .now - lifetime) }
        let count = released.count
        // Released outside the lock: the last reference's deinit closes the environment.
        released.removeAll()
        _ = Self.process.prune()
        return count
    }

    /// Lets go of every ledger the store holds, each closing once nothing else holds it (a
    /// last checkpoint; its commit journal zeroed and removed): for a server that stops.
    public func closeAllLedgers() {
        var released = open.withLock { $0.removeUnused(since: .now + .seconds(365 * 86_400)) }
        released.removeAll()
        _ = Self.process.prune()
    }

    /// Ledgers open in this process: those the store holds, and those it let go of that a
    /// call, a stream or a backup still holds (of every store in the process).
    public static var liveLedgerCount: Int { process.prune() }

    /// Ledgers the store holds open now.
    public var openLedgerCount: Int { open.withLock { $0.count } }

    /// The ledgers open now.
    public var openLedgers: [Ledger] { open.withLock { $0.ledgers } }

    /// Whether ledger `id` is open in this process, through this store or another one on
    /// the same directory.
    package func isOpenInProcess(_ id: String) -> Bool {
        open.withLock { $0.contains(id) } || Self.process.isOpen(at: directory(of: id))
    }

    /// Runs `body` with `id` reserved: no creation, restore or erasure of the same id runs meanwhile.
    func reserving<R>(_ id: String, _ body: () throws -> R) throws -> R {
        try reserve(id)
        defer { release(id) }
        return try body()
    }

    /// Runs `body` with `id` reserved, as the synchronous ``reserving(_:_:)-(_,()->R)`` does.
    func reserving<R>(_ id: String, _ body: () async throws -> R) async throws -> R {
        try reserve(id)
        defer { release(id) }
        return try await body()
    }

    private func reserve(_ id: String) throws {
        let reserved = creating.withLock { $0.insert(id).inserted }
        guard reserved else { throw LedgerFailure(.alreadyExists, "ledger '\(id)' is being created, restored or erased") }
    }

    private func release(_ id: String) { _ = creating.withLock { $0.remove(id) } }

    /// How long an erasure of a ledger in use waits for its calls, streams and replicas to end.
    public static let erasureDrain: Duration = .seconds(10)

    /// Lets go of `ledger` for its erasure: the store no longer returns it (``ledger(_:)``
    /// refuses its id until ``reopenAfterErasure(_:)``), and its streams and waits end.
    /// - Returns: whether its environment has closed (its deinit is over).
    func closeForErasure(_ ledger: Ledger, asReleasedCopy released: Bool = false) -> @Sendable () -> Bool {
        open.withLock { $0.close(ledger.id) }
        ledger.endUseForErasure(asReleasedCopy: released)
        let environment = WeakEnvironment(ledger.environment)
        return { environment.value == nil }
    }

    /// Serves ledger `id` again (after its erasure, from a new copy, if one is made).
    func reopenAfterErasure(_ id: String) { open.withLock { $0.reopen(id) } }

    /// Whether ledger `id` is open in this process (held by anything) at its directory.
    func isHeld(_ id: String) -> Bool { Self.process.isOpen(at: directory(of: id)) }

    /// The ledgers open in this process, by path: LMDB forbids opening one environment
    /// twice in a process, so stores on the same directory share their ledgers, and a ledger
    /// a store let go of while something still used it is found again.
    private static let process = ProcessLedgers()

    private final class ProcessLedgers: Sendable {
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

        /// Forgets the ledgers that closed; returns how many are open.
        func prune() -> Int {
            entries.withLock { entries in
                entries = entries.filter { $0.value.ledger != nil }
                return entries.count
            }
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
        for ledger in open.withLock({ $0.ledgers }) { ledger.flushAccessRecordsLogging() }
    }

    /// The ids of every ledger in the store, sorted.
    /// Whether this store holds a copy of ledger `id` (a valid id with a data file).
    public func holds(_ id: String) -> Bool {
        (try? Self.validate(id: id)) != nil && FileManager.default.fileExists(atPath: directory(of: id).appending(path: "data.mdb").path)
    }

    public func ledgerIDs() throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: ledgersDirectory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") && (try? Self.validate(id: $0)) != nil }.sorted()
    }
}

/// A ledger's environment, not kept alive by whoever waits for it to close.
private final class WeakEnvironment: @unchecked Sendable {
    weak var value: Environment?
    init(_ value: Environment) { self.value = value }
}

/// The ledgers a store holds open, with when each was last asked for, and those being
/// erased (opened by nobody until their erasure ends).
private struct OpenLedgers {
    private var entries: [String: (ledger: Ledger, lastUsed: ContinuousClock.Instant)] = [:]
    private var closing = Set<String>()

    var count: Int { entries.count }
    var ledgers: [Ledger] { entries.values.map(\.ledger) }
    func contains(_ id: String) -> Bool { entries[id] != nil }

    /// The ledger, marked as used now.
    mutating func use(_ id: String) -> Ledger? {
        // One look-up: every call authenticates through here.
        guard let index = entries.index(forKey: id) else { return nil }
        entries.values[index].lastUsed = .now
        return entries.values[index].ledger
    }

    /// Adds a ledger just opened; past `limit`, the least recently used go (an eighth of the
    /// limit at once, so that a scan is not paid on every open), and are returned.
    mutating func insert(_ ledger: Ledger, limit: Int) -> [Ledger] {
        entries[ledger.id] = (ledger, .now)
        guard entries.count > limit else { return [] }
        let excess = entries.count - limit + max(limit / 8, 1) - 1
        let oldest = entries.sorted { $0.value.lastUsed < $1.value.lastUsed }.prefix(excess).map(\.key)
        return oldest.filter { $0 != ledger.id }.compactMap { entries.removeValue(forKey: $0)?.ledger }
    }

    func isClosing(_ id: String) -> Bool { closing.contains(id) }

    /// Removes ledger `id` (its caller holds it: it does not close here, under the lock) and
    /// opens it to nobody until ``reopen(_:)``.
    mutating func close(_ id: String) {
        closing.insert(id)
        entries[id] = nil
    }

    mutating func reopen(_ id: String) { closing.remove(id) }

    /// Removes those last used before `cutoff`, and returns them.
    mutating func removeUnused(since cutoff: ContinuousClock.Instant) -> [Ledger] {
        let idle = entries.filter { $0.value.lastUsed < cutoff }
        for id in idle.keys { entries[id] = nil }
        return idle.values.map(\.ledger)
    }
}
