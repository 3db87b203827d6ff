import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging

extension LedgerStore {
    /// Restores a ledger from the backup in `backup` (made by ``Ledger/backup(to:)``).
    ///
    /// The backup is copied into a hidden sibling of the ledger's directory and verified
    /// there — hash chain, head against the manifest, projections against a fresh replay —
    /// before it becomes the ledger with one rename. When the ledger exists and `replace`
    /// is true, the rename swaps the two directories atomically (`renameat2` with
    /// `RENAME_EXCHANGE`) and the old ledger is then removed.
    ///
    /// ```swift
    /// try store.restore(from: URL(filePath: "/backups/alice-2026-11-21"))
    /// try store.restore(from: backup, as: "alice-copy")          // a second ledger from it
    /// try store.restore(from: backup, replace: true)             // roll alice back
    /// ```
    ///
    /// A ledger restored under another id keeps its credentials: they work with the new id
    /// in place of the old one in the credential string (`hl1:<id>:…`).
    ///
    /// - Parameters:
    ///   - backup: the backup directory of one ledger.
    ///   - id: the id to restore as; the manifest's ledger id when nil.
    ///   - replace: whether to replace an existing ledger of that id. A ledger open in this
    ///     process or another one (a running server) is never replaced.
    /// - Returns: the verification of the restored copy.
    /// - Throws: ``LedgerFailure``: `alreadyExists` when the ledger exists and `replace` is
    ///   false, `corrupted` when the backup does not verify, `invalidArgument` or
    ///   `notFound` when `backup` is not a backup, `storage` when the ledger is in use or
    ///   the copy fails. The store is unchanged whenever this throws.
    @discardableResult
    public func restore(from backup: URL, as id: String? = nil, replace: Bool = false) throws -> BackupVerification {
        try restore(from: backup, as: id, replace: replace, afterVerifying: {})
    }

    /// ``restore(from:as:replace:)``, calling `afterVerifying` once the copy has verified,
    /// before it is installed (a test opens the ledger there, as a server may while a long
    /// verification runs).
    package func restore(from backup: URL, as id: String?, replace: Bool, afterVerifying: () throws -> Void) throws -> BackupVerification {
        let manifest = try BackupManifest.read(from: backup)
        let id = id ?? manifest.ledgerID
        try Self.validate(id: id)
        if let unusable = BackupFiles.unusableFile(of: manifest, in: backup) {
            throw LedgerFailure.corrupted("the backup in \(backup.path) cannot be restored: \(unusable)")
        }
        return try reserving(id) {
            let target = directory(of: id)
            let exists = FileManager.default.fileExists(atPath: target.path)
            if exists {
                guard replace else { throw LedgerFailure(.alreadyExists, "ledger '\(id)' already exists in \(directory.path)") }
                try requireNotInUse(id)
            }
            let staging = ledgersDirectory.appending(path: ".restoring-\(id)-\(UUID().uuidString)", directoryHint: .isDirectory)
            var swapped = false
            do {
                try BackupFiles.copy(manifest.files, from: backup, to: staging, sync: true)
                let verification = Self.check(ledgerAt: staging, manifest: manifest, backup: backup, masterKey: configuration.masterKey)
                try? FileManager.default.removeItem(at: staging.appending(path: BackupFiles.lockFile))
                if let problem = verification.problem {
                    throw LedgerFailure.corrupted("the backup in \(backup.path) does not verify, so nothing was restored: \(problem)")
                }
                try applyErasures(toRestored: staging, id: id, from: manifest.ledgerID)
                try afterVerifying()
                if exists {
                    // Copying and verifying may take minutes, and a server opens a ledger when
                    // a credential first needs it: asked again just before the swap.
                    try requireNotInUse(id)
                    try Self.exchange(staging, target)
                } else {
                    try FileManager.default.moveItem(at: staging, to: target)
                }
                swapped = true
                do {
                    try Self.syncDirectory(ledgersDirectory)
                } catch {
                    let replaced = exists ? " (the replaced ledger is in \(staging.path))" : ""
                    throw LedgerFailure(
                        .storage,
                        "ledger '\(id)' was restored, but syncing \(ledgersDirectory.path) failed, so the restore may not survive a power loss\(replaced): \(error)",
                        cause: error)
                }
                // After an exchange, the staging path holds the replaced ledger.
                try? FileManager.default.removeItem(at: staging)
                // A ledger that came whole, with no commit here (a follower's copy from a
                // snapshot), is news to whoever watches this store: its own followers.
                changes.note(id)
                return verification
            } catch {
                if !swapped { try? FileManager.default.removeItem(at: staging) }
                if let failure = error as? LedgerFailure { throw failure }
                throw LedgerFailure(.storage, "cannot restore ledger '\(id)' from \(backup.path): \(error.localizedDescription)", cause: error)
            }
        }
    }

    /// Erases from a restored copy, before it is installed, what the store's erasure journal
    /// says was erased from the ledger it comes from (`origin`) or the one it becomes (`id`);
    /// refuses a copy of a ledger erased whole.
    private func applyErasures(toRestored staging: URL, id: String, from origin: String) throws {
        let entries = try Set([origin, id]).sorted().flatMap { try erasureJournal.entries(of: $0) }.sorted { $0.time < $1.time }
        if let whole = entries.first(where: { $0.ledgerErased == true }) {
            throw LedgerFailure(
                .failedPrecondition,
                "ledger '\(origin)' was erased on \(whole.time.formatted(.iso8601)) (\(whole.reason)): a backup of it must not bring it back, so nothing was restored")
        }
        guard !entries.isEmpty else { return }
        let ledger = try Ledger(id: id, directory: staging, configuration: configuration.maintenance, logger: logger)
        let erased = try ledger.applyErasureJournal(entries)
        if erased > 0 { logger.notice("erased again what the erasure journal names", metadata: ["ledger.id": "\(id)", "ledger.erasure.objects": "\(erased)"]) }
    }

    /// Throws `storage` when ledger `id` is open in this process or another one.
    private func requireNotInUse(_ id: String) throws {
        guard !isOpenInProcess(id) else {
            throw LedgerFailure(.storage, "ledger '\(id)' is open in this process: it cannot be replaced while in use")
        }
        guard !Self.isOpenByAnotherProcess(directory(of: id)) else {
            throw LedgerFailure(.storage, "ledger '\(id)' is open in another process (is healthledgerd running?): stop it before replacing the ledger")
        }
    }

    /// Whether another process has the LMDB environment in `ledgerDirectory` open.
    ///
    /// Every process with the environment open holds a shared `fcntl` lock on the first
    /// byte of its `lock.mdb`; a write lock there would conflict with it. Call only when
    /// this process does not have the environment open: closing any descriptor of a file
    /// drops the process's `fcntl` locks on it.
    static func isOpenByAnotherProcess(_ ledgerDirectory: URL) -> Bool {
        let descriptor = Glibc.open(ledgerDirectory.appending(path: BackupFiles.lockFile).path, O_RDONLY)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        var probe = flock()
        probe.l_type = Int16(F_WRLCK)
        probe.l_whence = Int16(SEEK_SET)
        probe.l_start = 0
        probe.l_len = 1
        guard fcntl(descriptor, F_GETLK, &probe) == 0 else { return false }
        return probe.l_type != Int16(F_UNLCK)
    }

    /// Swaps directories `a` and `b` atomically when the system can (`renameat2` with
    /// `RENAME_EXCHANGE`, Linux 3.15+); otherwise moves `b` aside, `a` into its place and
    /// removes nothing (the caller removes what is left at `a`).
    static func exchange(_ a: URL, _ b: URL) throws {
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        let renameExchange: UInt32 = 2
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") {
            let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
            if renameat2(AT_FDCWD, a.path, AT_FDCWD, b.path, renameExchange) == 0 { return }
            let error = errno
            guard error == ENOSYS || error == EINVAL else {
                throw LedgerFailure(.storage, "cannot swap \(a.path) and \(b.path): \(String(cString: strerror(error)))")
            }
        }
        // No atomic exchange here: two renames, undone if the second fails.
        let aside = b.deletingLastPathComponent().appending(path: ".replaced-\(b.lastPathComponent)-\(UUID().uuidString)", directoryHint: .isDirectory)
        guard rename(b.path, aside.path) == 0 else {
            throw LedgerFailure(.storage, "cannot move \(b.path) aside: \(String(cString: strerror(errno)))")
        }
        guard rename(a.path, b.path) == 0 else {
            let error = errno
            _ = rename(aside.path, b.path)
            throw LedgerFailure(.storage, "cannot move \(a.path) to \(b.path): \(String(cString: strerror(error)))")
        }
        guard rename(aside.path, a.path) == 0 else {
            try? FileManager.default.removeItem(at: aside)
            return
        }
    }
}
