import ArgumentParser
import Foundation
import Ledger

/// `healthledger backup`: hot, compacted, consistent copies of ledgers, and their verification.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Back up ledgers while the server runs, or verify a backup.",
        usage: """
            healthledger backup <ledger> <dest> [--data-dir <dir>] [--json]
            healthledger backup --all <dest> [--data-dir <dir>] [--json]
            healthledger backup --verify <dest> [--json]
            """,
        discussion: """
            A backup is a compacted copy of the ledger's LMDB file taken in one read \
            transaction: it holds every write acknowledged before it began, while writes go \
            on. <dest> must not exist or be empty; backup.json there records the ledger id, \
            the head (sequence and hash) of the copy, and the time. --all writes each ledger \
            into <dest>/<ledger-id>/ and an index, backup-set.json; a ledger that cannot be \
            backed up is named there and on the output, the others are kept, and the exit \
            status is 1.

            --verify checks a backup on a temporary copy: the hash chain, the projections \
            against a fresh replay of the log, and the head against backup.json (each \
            ledger of a --all backup). It exits with 2 and names the first problem when a \
            backup is damaged. Restore with `healthledger restore`.
            """)

    @OptionGroup var store: StoreOptions
    @Flag(help: "Back up every ledger of the data directory, each into <dest>/<ledger-id>/.")
    var all = false
    @Flag(help: "Verify the backup in <dest> (for a --all backup, each ledger's) instead of making one.")
    var verify = false
    @Flag(help: "Print the manifest (with --all, every manifest; with --verify, the results) as JSON.")
    var json = false
    @Argument(help: ArgumentHelp("<ledger> <dest>, or <dest> alone with --all or --verify.", valueName: "paths"))
    var paths: [String] = []

    func run() async throws {
        if verify {
            guard !all else { throw ValidationErrorExit("--verify takes the backup directory alone: healthledger backup --verify <dest>") }
            guard paths.count == 1 else { throw ValidationErrorExit("--verify takes one backup directory: healthledger backup --verify <dest>") }
            return try verifyBackups(at: Self.url(paths[0]))
        }
        if all {
            guard paths.count == 1 else { throw ValidationErrorExit("--all takes one destination directory: healthledger backup --all <dest>") }
            return try backupAll(to: Self.url(paths[0]))
        }
        guard paths.count == 2 else {
            throw ValidationErrorExit("give a ledger and a destination: healthledger backup <ledger> <dest> (or --all <dest>, --verify <dest>)")
        }
        let destination = Self.url(paths[1])
        let manifest: BackupManifest
        do {
            manifest = try store.openStore().ledger(paths[0]).backup(to: destination)
        } catch { throw fail(error) }
        if json {
            print(String(decoding: try manifest.encoded(), as: UTF8.self))
        } else {
            print("backed up ledger '\(manifest.ledgerID)'\(Self.origin(manifest)): head event \(manifest.headSequence), hash \(manifest.headHash), in \(destination.path)")
        }
    }

    private func backupAll(to destination: URL) throws {
        let outcome: BackupSetOutcome
        do {
            let store = try store.openStore()
            guard try !store.ledgerIDs().isEmpty else {
                throw ValidationErrorExit("no ledgers in \(store.directory.path): nothing to back up")
            }
            outcome = try store.backupAll(to: destination)
        } catch { throw fail(error) }
        if json {
            var objects = try outcome.manifests.map { try JSONSerialization.jsonObject(with: try $0.encoded()) }
            objects += outcome.failed.map { ["ledgerID": $0.ledgerID, "problem": $0.problem] as [String: Any] }
            printJSON(objects)
        } else {
            for manifest in outcome.manifests {
                print("backed up ledger '\(manifest.ledgerID)'\(Self.origin(manifest)): head event \(manifest.headSequence), hash \(manifest.headHash)")
            }
            for failure in outcome.failed { print("FAILED: ledger '\(failure.ledgerID)' was not backed up: \(failure.problem)") }
            let failed = outcome.failed.isEmpty ? "" : "; \(outcome.failed.count) could not be backed up (listed in backup-set.json)"
            print("\(outcome.manifests.count) ledger(s) in \(destination.path)\(failed)")
        }
        if !outcome.failed.isEmpty { throw ExitCode(1) }
    }

    private func verifyBackups(at directory: URL) throws {
        let results: [BackupVerification]
        do {
            results = try LedgerStore.verifyBackups(at: directory, masterKey: try store.configuration().masterKey)
        } catch let failure as LedgerFailure where failure.kind == .corrupted {
            if json { printJSON([["directory": directory.path, "valid": false, "problem": failure.message]]) } else { print("FAILED: \(failure.message)") }
            throw ExitCode(2)
        } catch { throw fail(error) }
        if json {
            printJSON(results.map { result -> [String: Any] in
                var object: [String: Any] = [
                    "ledgerID": result.ledgerID, "directory": result.directory.path, "valid": result.isValid,
                    "eventsChecked": result.eventsChecked, "objects": result.objects,
                ]
                if let manifest = result.manifest {
                    object["headSequence"] = manifest.headSequence
                    object["headHash"] = manifest.headHash
                }
                if let problem = result.problem { object["problem"] = problem }
                return object
            })
        } else {
            for result in results {
                if let problem = result.problem {
                    print("FAILED: \(result.ledgerID) (\(result.directory.path)): \(problem)")
                } else {
                    print(
                        "OK: \(result.ledgerID): \(result.eventsChecked) events, hash chain intact, projections equal a fresh replay, head event \(result.manifest?.headSequence ?? 0) as recorded"
                    )
                }
            }
            if results.isEmpty { print("OK: the backup set in \(directory.path) holds no ledgers") }
        }
        if results.contains(where: { !$0.isValid }) { throw ExitCode(2) }
    }

    /// The store, refusing a data directory that does not exist (rather than creating it).
    /// " from node n2 of cluster care", as the manifest names it (nothing for older backups).
    static func origin(_ manifest: BackupManifest) -> String {
        guard let node = manifest.node else { return "" }
        return " from node \(node)" + (manifest.cluster.map { " of cluster \($0)" } ?? "")
    }

    static func url(_ path: String) -> URL {
        URL(filePath: path, directoryHint: .isDirectory).standardizedFileURL
    }
}

/// `healthledger restore`: a backup back into a data directory, verified before it is installed.
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a ledger from a backup into the data directory.",
        discussion: """
            The backup is copied next to the ledgers and verified there (hash chain, \
            projections, head against backup.json) before it becomes the ledger. An existing \
            ledger is only replaced with --force, atomically, and never while a server has it \
            open: stop healthledgerd first. Nothing changes when restore fails. --all restores \
            every ledger of a backup --all set: one that fails is named and left unchanged, \
            the others are restored, and the exit status is 1.
            """)

    @OptionGroup var store: StoreOptions
    @Argument(help: "The backup directory of one ledger (for a --all backup, <dest>/<ledger-id>; with --all, <dest>).")
    var source: String
    @Option(name: .customLong("as"), help: "Restore under this ledger id instead of the backed-up ledger's.")
    var id: String?
    @Flag(help: "Restore every ledger of a backup set (backup --all).")
    var all = false
    @Flag(help: "Replace the ledger when it exists.")
    var force = false
    @Flag(help: "Print the restored backup's manifest as JSON (with --all, one object per ledger).")
    var json = false

    func run() async throws {
        let backup = BackupCommand.url(source)
        if all {
            guard id == nil else { throw ValidationErrorExit("--as names one ledger: it does not go with --all") }
            return try restoreAll(from: backup)
        }
        let store: LedgerStore
        let verification: BackupVerification
        let replaced: Bool
        let existed = self.store.exists
        do {
            store = try self.store.createStore()
            let target = id ?? (try? BackupManifest.read(from: backup))?.ledgerID
            replaced = try target.map { try store.ledgerIDs().contains($0) } ?? false
            verification = try store.restore(from: backup, as: id, replace: force)
        } catch let failure as LedgerFailure where failure.kind == .alreadyExists && !force {
            throw ValidationErrorExit("\(failure.message); nothing was changed (add --force to replace it)")
        } catch {
            // A data directory made for this restore goes again: nothing changes when it fails.
            if !existed { try? FileManager.default.removeItem(at: self.store.directory) }
            throw fail(error)
        }
        let ledgerID = id ?? verification.ledgerID
        if json, let manifest = verification.manifest {
            print(String(decoding: try manifest.encoded(), as: UTF8.self))
        } else {
            let head = verification.manifest.map { "head event \($0.headSequence), hash \($0.headHash)" } ?? ""
            print("\(replaced ? "replaced" : "restored") ledger '\(ledgerID)' in \(store.directory.path): \(head)")
        }
    }

    /// Each ledger of the set in turn: one failing leaves it unchanged, the rest go on; the
    /// exit status is 1 when any failed.
    private func restoreAll(from backup: URL) throws {
        let store: LedgerStore
        let results: [(ledgerID: String, result: Result<BackupVerification, LedgerFailure>)]
        let existed = self.store.exists
        do {
            guard BackupSetManifest.isPresent(in: backup) else {
                throw ValidationErrorExit("\(backup.path) is not a backup set (it has no backup-set.json): restore it without --all")
            }
            store = try self.store.createStore()
            results = try store.restoreAll(from: backup, replace: force)
        } catch {
            if !existed { try? FileManager.default.removeItem(at: self.store.directory) }
            throw fail(error)
        }
        if !existed, !results.contains(where: { if case .success = $0.result { true } else { false } }) {
            try? FileManager.default.removeItem(at: self.store.directory)
        }
        var objects: [Any] = []
        for (ledgerID, result) in results {
            switch result {
            case .success(let verification):
                let manifest = verification.manifest
                if json {
                    objects.append(["ledgerID": ledgerID, "headSequence": manifest?.headSequence ?? 0, "headHash": manifest?.headHash ?? ""] as [String: Any])
                } else {
                    print("restored ledger '\(ledgerID)' in \(store.directory.path): head event \(manifest?.headSequence ?? 0), hash \(manifest?.headHash ?? "")")
                }
            case .failure(let failure):
                let hint = failure.kind == .alreadyExists && !force ? " (add --force to replace it)" : ""
                if json {
                    objects.append(["ledgerID": ledgerID, "problem": failure.message + hint] as [String: Any])
                } else {
                    print("FAILED: ledger '\(ledgerID)': \(failure.message)\(hint); it was not changed")
                }
            }
        }
        if json { printJSON(objects) }
        if results.contains(where: { if case .failure = $0.result { true } else { false } }) { throw ExitCode(1) }
    }
}
