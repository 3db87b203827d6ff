import Foundation
import Logging
import LMDB
#if canImport(Glibc)
import Glibc
#endif

/// The store's record of what was erased, kept outside every ledger's directory and so
/// outside its backups: `<data-dir>/erasures/<ledger>.jsonl`, one JSON object a line, synced
/// before an erasure is answered. It holds UUIDs, times and reasons, never a value.
///
/// A restore applies it: a backup taken before an erasure gets the same objects erased
/// before it becomes the ledger, and a backup of a ledger erased whole is refused
/// (Deploy/README.md, "Erasure and backups").
struct ErasureJournal: Sendable {
    /// One erasure: the objects it named (its correlations' members and workouts' routes are
    /// found again from them), or the whole ledger.
    struct Entry: Codable, Sendable, Hashable {
        var time: Date
        /// The erasure's last event in the ledger (0 for a whole ledger).
        var sequence: UInt64
        var objects: [UUID]
        var reason: String
        /// The ledger itself was erased (`admin erase-ledger`).
        var ledgerErased: Bool?
        /// The types of the characteristics whose values set before `sequence` were erased.
        var characteristics: [String]?
    }

    let directory: URL

    init(store: URL) { directory = store.appending(path: "erasures", directoryHint: .isDirectory) }

    private func file(of ledger: String) -> URL { directory.appending(path: "\(ledger).jsonl") }

    /// Appends `entry` for `ledger` and syncs it (and the directory, when the file is new).
    func append(_ entry: Entry, ledger: String) throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            encoder.outputFormatting = [.sortedKeys]
            let line = try encoder.encode(entry) + Data("\n".utf8)
            let path = file(of: ledger).path
            let existed = FileManager.default.fileExists(atPath: path)
            let descriptor = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT, 0o600)
            guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            defer { Glibc.close(descriptor) }
            let written = line.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard written == line.count, fsync(descriptor) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            if !existed { try LedgerStore.syncDirectory(directory) }
        } catch {
            throw LedgerFailure(
                .storage,
                "the erasure of ledger '\(ledger)' is done, but its erasure journal (\(file(of: ledger).path)) could not be written, so a restored older backup would bring the values back: \(error)",
                cause: error)
        }
    }

    /// The entries of `ledger`, oldest first (none when it has no journal).
    func entries(of ledger: String) throws -> [Entry] {
        let url = file(of: ledger)
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map { try decoder.decode(Entry.self, from: Data($0.utf8)) }
        } catch {
            throw LedgerFailure(.corrupted, "the erasure journal \(url.path) does not read: \(error)", cause: error)
        }
    }
}

extension LedgerStore {
    /// The longest a reason for an erasure may be, in bytes.
    public static let maximumErasureReason = 1_000

    /// Erases a whole ledger that no process has open, for a person who leaves: journals it
    /// (so that no backup of it is ever restored into this store), overwrites its data file
    /// with zeros and removes its directory. A running server erases through
    /// ``eraseLedger(_:reason:waitingUpTo:)``.
    ///
    /// - Throws: ``LedgerFailure`` `notFound`; `storage` when the ledger is open in this
    ///   process or another one (stop the server first); `failedPrecondition` under a legal hold.
    public func eraseLedger(_ id: String, reason: String) throws {
        let target = try erasable(id, reason: reason)
        try reserving(id) {
            guard !isOpenInProcess(id) else { throw LedgerFailure(.storage, "ledger '\(id)' is open in this process: it cannot be erased while in use") }
            guard !Self.isOpenByAnotherProcess(target) else {
                throw LedgerFailure(.storage, "ledger '\(id)' is open in another process (is healthledgerd running?): stop it before erasing the ledger")
            }
            let hold = try {
                let ledger = try Ledger(id: id, directory: target, configuration: configuration.maintenance, logger: logger)
                return try ledger.legalHold()
            }()
            if let hold { throw Ledger.heldRefusal(ledger: id, reason: hold) }
            try destroy(id, at: target, reason: reason)
        }
    }

    /// Erases a whole ledger this store serves, for a person who leaves: new calls to it are
    /// refused (`notFound`), its streams end, and once the calls, backups and replicas holding
    /// it are done (at most `timeout`), it is erased as ``eraseLedger(_:reason:)`` erases a
    /// closed one. Watching followers hear of it (``erasedLedgerIDs()``) and erase their copies.
    ///
    /// - Parameter ignoringHold: erase it under a legal hold too: a follower's copy of a ledger
    ///   its primary erased (the hold it copied may have been lifted there since).
    /// - Returns: where the store's changes (``changes``) are once the erasure is noted: a
    ///   follower that applied an answer at or past it has erased its copy.
    /// - Throws: ``LedgerFailure`` `notFound`; `failedPrecondition` under a legal hold;
    ///   `storage` when something still holds the ledger after `timeout` (nothing is erased,
    ///   and the ledger serves again) or it is open in another process; `CancellationError`.
    @discardableResult
    public func eraseLedger(_ id: String, reason: String, waitingUpTo timeout: Duration, ignoringHold: Bool = false) async throws
        -> LedgerChanges.Cursor
    {
        let target = try erasable(id, reason: reason)
        return try await removing(id, waitingUpTo: timeout, what: "erased", releasing: false) { ledger in
            if !ignoringHold, let hold = try ledger.legalHold() { throw Ledger.heldRefusal(ledger: id, reason: hold) }
        } then: {
            try destroy(id, at: target, reason: reason)
            return changes.note(id)
        }
    }

    /// Removes this store's copy of ledger `id`, which other members of its cluster keep
    /// (this member no longer keeps its placement group): closed and removed as
    /// ``eraseLedger(_:reason:waitingUpTo:ignoringHold:)`` removes a ledger, but with no
    /// erasure journaled — the ledger lives on elsewhere, and a copy of it may come back here.
    /// Its streams end (``AccessChange/copyReleased``). The access records of the reads it
    /// answered must have gone to the ledger's primary first: it is not removed while any
    /// wait to be forwarded (``forwardableAccessRecords(limit:)``).
    ///
    /// - Parameter stillWanted: asked last, once nothing holds the copy: false keeps it (the
    ///   member keeps its group again).
    /// - Throws: ``UnforwardedAccessRecords``; ``LedgerFailure`` `notFound`;
    ///   `failedPrecondition` when no longer `stillWanted`; `storage` when something still
    ///   holds it after `timeout`; `CancellationError`. Nothing is removed then.
    public func releaseCopy(of id: String, waitingUpTo timeout: Duration, stillWanted: () -> Bool = { true }) async throws {
        let target = try erasable(id, reason: "")
        try await removing(id, waitingUpTo: timeout, what: "removed", releasing: true) { ledger in
            try ledger.flushAccessRecords()
            guard try ledger.forwardableAccessRecords(limit: 1).records.isEmpty else { throw UnforwardedAccessRecords(ledger: id) }
        } then: {
            guard stillWanted() else { throw LedgerFailure(.failedPrecondition, "this copy of ledger '\(id)' is wanted again: kept") }
            // Moved aside first: a crash half-way leaves no broken ledger behind (purged on start).
            let aside = target.deletingLastPathComponent().appending(path: Self.releasedPrefix + id)
            try? FileManager.default.removeItem(at: aside)
            do { try FileManager.default.moveItem(at: target, to: aside) } catch {
                throw LedgerFailure(.storage, "cannot move ledger '\(id)' aside to remove it: \(error)", cause: error)
            }
            try destroy(id, at: aside, reason: nil)
        }
    }

    /// A copy not released: access records of reads it answered wait to go to the primary.
    public struct UnforwardedAccessRecords: Error, CustomStringConvertible {
        public let ledger: String
        public var description: String { "ledger '\(ledger)' has access records not yet forwarded to its primary: this copy is kept until they are" }
    }

    /// What a released copy's directory is renamed to before it is removed.
    static let releasedPrefix = ".released-"

    /// Removes what a crash left of copies being released (``releaseCopy(of:waitingUpTo:stillWanted:)``):
    /// called by a cluster member as it starts.
    public func purgeReleasedCopies() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: ledgersDirectory.path)) ?? []
        for name in names where name.hasPrefix(Self.releasedPrefix) {
            let id = String(name.dropFirst(Self.releasedPrefix.count))
            do { try destroy(id, at: ledgersDirectory.appending(path: name), reason: nil) } catch {
                logger.warning("cannot remove what is left of a released copy", metadata: ["ledger.id": "\(id)", "error": "\(error)"])
            }
        }
    }

    /// Runs `remove` on ledger `id` once new calls to it are refused (`notFound`), its streams
    /// ended, and the calls, backups and replicas holding it let go of it (at most
    /// `timeout`), after `check` of the ledger; the ledger serves again afterwards if it is
    /// still there.
    private func removing<R>(
        _ id: String, waitingUpTo timeout: Duration, what: String, releasing: Bool, check: (Ledger) throws -> Void, then remove: () throws -> R
    ) async throws -> R {
        try await reserving(id) {
            let closed: @Sendable () -> Bool
            do {
                let ledger = try self.ledger(id)
                try check(ledger)
                closed = closeForErasure(ledger, asReleasedCopy: releasing)
            }
            defer { reopenAfterErasure(id) }
            views.discard(ledgerID: id)
            let deadline = ContinuousClock.now + timeout
            // Until its environment has closed, not only its last holder let go: the ledger's
            // deinit runs between the two.
            while !closed() || isHeld(id) {
                guard ContinuousClock.now < deadline else {
                    throw LedgerFailure(
                        .storage, "ledger '\(id)' is still in use after \(timeout) (a call, a backup or a replica holds it): nothing was \(what); try again")
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            guard !Self.isOpenByAnotherProcess(directory(of: id)) else {
                throw LedgerFailure(.storage, "ledger '\(id)' is open in another process: stop it before it is \(what)")
            }
            return try remove()
        }
    }

    /// Whether ledger `id` was erased whole here (``eraseLedger(_:reason:)``) and has not been
    /// restored since (which the journal refuses).
    public func wasErasedWhole(_ id: String) throws -> Bool {
        try erasureJournal.entries(of: id).contains { $0.ledgerErased == true }
    }

    /// The ledgers erased whole here, sorted (a journal that does not read is logged and left out).
    public func erasedLedgerIDs() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: erasureJournal.directory.path)) ?? []
        return names.filter { $0.hasSuffix(".jsonl") }.map { String($0.dropLast(6)) }.filter { (try? Self.validate(id: $0)) != nil }
            .filter { id in
                do { return try wasErasedWhole(id) } catch {
                    logger.error("an erasure journal does not read", metadata: ["ledger.id": "\(id)", "error": "\(error)"])
                    return false
                }
            }.sorted()
    }

    /// Records that ledger `id`, of which this store holds no copy, was erased whole on the
    /// primary it follows: so that no backup or snapshot of it is restored here afterwards.
    public func recordErasure(ofAbsentLedger id: String, reason: String) throws {
        try Self.validate(id: id)
        guard try !wasErasedWhole(id) else { return }
        try journalWholeErasure(of: id, reason: reason)
    }

    private func journalWholeErasure(of id: String, reason: String) throws {
        try erasureJournal.append(ErasureJournal.Entry(time: Date(), sequence: 0, objects: [], reason: reason, ledgerErased: true), ledger: id)
    }

    /// The directory of ledger `id` when it may be erased with `reason`.
    private func erasable(_ id: String, reason: String) throws -> URL {
        try Self.validate(id: id)
        guard reason.utf8.count <= Self.maximumErasureReason else {
            throw LedgerFailure(.invalidArgument, "an erasure's reason is at most \(Self.maximumErasureReason) bytes, got \(reason.utf8.count)")
        }
        let target = directory(of: id)
        guard FileManager.default.fileExists(atPath: target.appending(path: "data.mdb").path) else {
            throw LedgerFailure(.notFound, "no ledger '\(id)' in \(directory.path)")
        }
        return target
    }

    /// Journals the erasure of ledger `id` for `reason` (none: a copy released, not an
    /// erasure), overwrites its data file with zeros and removes its directory; nothing may
    /// hold it open.
    private func destroy(_ id: String, at target: URL, reason: String?) throws {
        if let reason { try journalWholeErasure(of: id, reason: reason) }
        views.discard(ledgerID: id)
        removeSnapshots(of: id)
        // The files' bytes first: removing them alone leaves them on the disk. (A commit
        // journal is there only when the ledger's last process did not close it.)
        for name in ["data.mdb", Environment.journalFileName] {
            try Self.overwriteWithZeros(target.appending(path: name).path)
        }
        do {
            try FileManager.default.removeItem(at: target)
            try Self.syncDirectory(ledgersDirectory)
        } catch {
            throw LedgerFailure(.storage, "ledger '\(id)' was overwritten but its directory could not be removed: \(error)", cause: error)
        }
    }

    /// Overwrites the file at `path` (if there is one) with zeros, and syncs it.
    private static func overwriteWithZeros(_ path: String) throws {
        let descriptor = Glibc.open(path, O_WRONLY)
        guard descriptor >= 0 else { return }
        defer { Glibc.close(descriptor) }
        var remaining = Int(lseek(descriptor, 0, SEEK_END))
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        while remaining > 0 {
            let length = min(remaining, zeros.count)
            guard zeros.withUnsafeBytes({ pwrite(descriptor, $0.baseAddress, length, off_t(offset)) }) == length else {
                throw LedgerFailure(.storage, "cannot overwrite \(path): \(String(cString: strerror(errno)))")
            }
            offset += length
            remaining -= length
        }
        guard fsync(descriptor) == 0 else { throw LedgerFailure(.storage, "cannot sync \(path): \(String(cString: strerror(errno)))") }
    }
}
