import Foundation
import HealthModel
import LMDB
import Ledger
import Testing

/// `Ledger.backup(to:)`, `LedgerStore.backupAll(to:)`, `verifyBackup(s)(at:)` and `restore(from:as:replace:)`.
@Suite("Backup and restore", .timeLimit(.minutes(3)))
struct BackupTests {
    /// A fresh temporary directory (not created), removed when the value is released.
    final class Scratch: @unchecked Sendable {
        let url = URL(filePath: NSTemporaryDirectory(), directoryHint: .isDirectory)
            .appending(path: "healthledger-backup-\(UUID().uuidString)", directoryHint: .isDirectory)

        func path(_ name: String) -> URL { url.appending(path: name, directoryHint: .isDirectory) }

        deinit { try? FileManager.default.removeItem(at: url) }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func contents(_ directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    static func heartRates(_ ledger: Ledger) throws -> Set<UUID> {
        Set(try ledger.samples(SampleQuery(type: Fixtures.heartRate.objectType), as: .owner).map(\.uuid))
    }

    /// Rewrites the manifest in `directory` through `edit`.
    static func editManifest(in directory: URL, _ edit: (inout [String: Any]) -> Void) throws {
        let url = directory.appending(path: BackupManifest.fileName)
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        edit(&object)
        try JSONSerialization.data(withJSONObject: object).write(to: url)
    }

    @Test("a backup holds the ledger as of its head, verifies without being changed, and restores under its own id or another, announced to the store's watchers")
    func backupAndRestore() async throws {
        let temporary = try TemporaryStore()
        let scratch = Scratch()
        let ledger = try temporary.ledgerStore.createLedger(id: "alice", displayName: "Alice")
        try await ReplayAndVerifyTests.mixedWorkload(ledger)
        let credential = try await ledger.issueCredential(for: .owner)
        let before = try Self.heartRates(ledger)
        let head = try ledger.head()

        let destination = scratch.path("alice-backup")
        let manifest = try ledger.backup(to: destination)
        #expect(manifest.ledgerID == "alice" && manifest.formatVersion == BackupManifest.currentFormatVersion)
        #expect(manifest.headSequence == head.sequence && manifest.headHash == Self.hex(head.hash))
        #expect(manifest.files == ["data.mdb"])
        #expect(abs(manifest.createdAt.timeIntervalSinceNow) < 3600)
        #expect(Self.contents(destination) == ["backup.json", "data.mdb"], "no lock file is left in the backup")
        #expect(try BackupManifest.read(from: destination) == manifest)
        // With no node.json in the data directory, a backup names the host.
        #expect(manifest.node == ProcessInfo.processInfo.hostName && manifest.cluster == nil)
        // With one (healthledgerd writes it), the server and its cluster.
        try NodeIdentity(node: "n2", cluster: "care").write(to: temporary.directory)
        let named = try ledger.backup(to: scratch.path("alice-backup-n2"))
        #expect(named.node == "n2" && named.cluster == "care")
        #expect(try BackupManifest.read(from: scratch.path("alice-backup-n2")) == named)

        // The ledger moves on; the backup does not.
        let later = Fixtures.heartRate(99, at: 1_000_000)
        _ = try await ledger.save([later], by: .owner)

        let data = try Data(contentsOf: destination.appending(path: "data.mdb"))
        let verification = try LedgerStore.verifyBackup(at: destination)
        #expect(verification.isValid, "\(verification.problem ?? "")")
        #expect(verification.eventsChecked == head.sequence && verification.ledgerID == "alice")
        #expect(verification.objects > 0)
        #expect(Self.contents(destination) == ["backup.json", "data.mdb"])
        #expect(try Data(contentsOf: destination.appending(path: "data.mdb")) == data, "verifying leaves the backup as it was")

        let other = try TemporaryStore()
        let beforeRestore = other.ledgerStore.changes.cursor
        let restored = try other.ledgerStore.restore(from: destination)
        #expect(restored.isValid && restored.manifest == manifest)
        let announced = other.ledgerStore.changes.lastChanges(after: beforeRestore).changed?.map(\.ledger)
        #expect(announced == ["alice"], "a restored ledger is news to the store's watchers (a follower's own followers)")
        let alice = try other.ledgerStore.ledger("alice")
        #expect(try alice.head().sequence == head.sequence && alice.head().hash == head.hash)
        #expect(try Self.heartRates(alice) == before)
        #expect(try alice.object(with: later.uuid, as: .owner) == nil)
        #expect(try alice.verify().isValid && alice.replay().identical)
        #expect(other.ledgerStore.authenticate(credential)?.1 == .owner, "credentials live in the ledger and come back with it")
        #expect(Self.contents(other.directory.appending(path: "ledgers")) == ["alice"], "no staging directory is left")

        try other.ledgerStore.restore(from: destination, as: "alice-copy")
        let copy = try other.ledgerStore.ledger("alice-copy")
        #expect(try copy.head().sequence == head.sequence && Self.heartRates(copy) == before)
        #expect(try other.ledgerStore.ledgerIDs() == ["alice", "alice-copy"])
        _ = try await copy.save([Fixtures.heartRate(70, at: 2_000_000)], by: .owner)
        #expect(try copy.verify().isValid)
        let renamed = credential.replacingOccurrences(of: "hl1:alice:", with: "hl1:alice-copy:")
        #expect(other.ledgerStore.authenticate(renamed)?.1 == .owner, "under another id, a credential works with the new id in it")
    }

    @Test("restore refuses an existing ledger unless told to replace it, and never one in use; replacing rolls the ledger back")
    func restoreOverExisting() async throws {
        let temporary = try TemporaryStore()
        let scratch = Scratch()
        let destination = scratch.path("backup")
        let manifest: BackupManifest
        let atBackup: Set<UUID>
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "alice")
            _ = try await ledger.save((0..<10).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
            manifest = try ledger.backup(to: destination)
            atBackup = try Self.heartRates(ledger)
            _ = try await ledger.save((0..<10).map { Fixtures.heartRate(80, at: 100 + Double($0)) }, by: .owner)
            let head = try ledger.head().sequence
            #expect(head > manifest.headSequence)

            let refused = #expect(throws: LedgerFailure.self) { try temporary.ledgerStore.restore(from: destination) }
            #expect(refused?.kind == .alreadyExists && refused?.message.contains("already exists") == true)
            let inUse = #expect(throws: LedgerFailure.self) { try temporary.ledgerStore.restore(from: destination, replace: true) }
            #expect(inUse?.message.contains("open in this process") == true)
            #expect(try ledger.head().sequence == head, "nothing changed")
        }
        #expect(Self.contents(temporary.directory.appending(path: "ledgers")) == ["alice"])
        temporary.close()

        let store = try temporary.reopen()
        #expect(try store.restore(from: destination, replace: true).isValid)
        let alice = try store.ledger("alice")
        #expect(try alice.head().sequence == manifest.headSequence)
        #expect(try Self.heartRates(alice) == atBackup)
        #expect(try alice.verify().isValid)
        #expect(Self.contents(temporary.directory.appending(path: "ledgers")) == ["alice"], "the replaced ledger is gone")
    }

    @Test("a ledger opened while a restore verifies its copy is not replaced: asked again at the swap, nothing installed")
    func restoreRechecksBeforeTheSwap() async throws {
        let temporary = try TemporaryStore()
        let scratch = Scratch()
        let destination = scratch.path("backup")
        let head: UInt64
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "alice")
            _ = try await ledger.save((0..<5).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
            _ = try ledger.backup(to: destination)
            _ = try await ledger.save((0..<5).map { Fixtures.heartRate(80, at: 100 + Double($0)) }, by: .owner)
            head = try ledger.head().sequence
        }
        temporary.close()

        let store = try temporary.reopen()
        var opened: Ledger?
        let refused = #expect(throws: LedgerFailure.self) {
            try store.restore(from: destination, as: nil, replace: true) { opened = try store.ledger("alice") }
        }
        #expect(refused?.kind == .storage && refused?.message.contains("open in this process") == true, "\(String(describing: refused))")
        let alice = try #require(opened)
        #expect(try alice.head().sequence == head && alice.verify().isValid, "the ledger in use is the one it was")
        #expect(Self.contents(temporary.directory.appending(path: "ledgers")) == ["alice"], "no staging copy is left")
    }

    /// A ledger with the mixed workload, backed up into `scratch`'s "backup" (the store and the
    /// scratch directory live as long as the caller holds them).
    static func backedUp() async throws -> (temporary: TemporaryStore, scratch: Scratch, ledger: Ledger, destination: URL, manifest: BackupManifest) {
        let temporary = try TemporaryStore()
        let scratch = Scratch()
        let ledger = try temporary.ledgerStore.createLedger(id: "alice")
        try await ReplayAndVerifyTests.mixedWorkload(ledger)
        let destination = scratch.path("backup")
        return (temporary, scratch, ledger, destination, try ledger.backup(to: destination))
    }

    @Test("a backup whose listed file is a symbolic link (or a directory) is refused by verify and restore: nothing is written where the link points")
    func linkedFilesRefused() async throws {
        let backup = try await Self.backedUp()
        let (scratch, destination) = (backup.scratch, backup.destination)
        let victim = scratch.path("victim.txt")
        try Data("keep me".utf8).write(to: victim)
        try FileManager.default.createSymbolicLink(at: destination.appending(path: "commits.journal"), withDestinationURL: victim)
        try FileManager.default.createDirectory(at: destination.appending(path: "nested"), withIntermediateDirectories: true)
        for (listed, kind) in [("commits.journal", "a symbolic link"), ("nested", "a directory")] {
            try Self.editManifest(in: destination) { $0["files"] = ["data.mdb", listed] }
            #expect(try LedgerStore.verifyBackup(at: destination).problem == "\(listed), listed in the manifest, is \(kind)")
            let target = try TemporaryStore()
            let refused = #expect(throws: LedgerFailure.self) { try target.ledgerStore.restore(from: destination, as: "victim") }
            #expect(refused?.kind == .corrupted && refused?.message.contains("\(listed), listed in the manifest, is \(kind)") == true, "\(refused?.message ?? "")")
            #expect(try target.ledgerStore.ledgerIDs().isEmpty)
        }
        #expect(try String(contentsOf: victim, encoding: .utf8) == "keep me")
        withExtendedLifetime(backup.temporary) {}
    }

    @Test("verify names a tampered manifest, damaged projections, a missing file; restore installs none of them")
    func damagedBackups() async throws {
        let backup = try await Self.backedUp()
        let (scratch, ledger, destination, manifest) = (backup.scratch, backup.ledger, backup.destination, backup.manifest)
        let target = try TemporaryStore()

        // The manifest's head no longer matches the copy.
        try Self.editManifest(in: destination) { $0["headHash"] = String(repeating: "0", count: 64) }
        let tampered = try LedgerStore.verifyBackup(at: destination)
        #expect(tampered.problem?.hasPrefix("head:") == true && tampered.problem?.contains(String(repeating: "0", count: 64)) == true)
        let refused = #expect(throws: LedgerFailure.self) { try target.ledgerStore.restore(from: destination) }
        #expect(refused?.kind == .corrupted && refused?.message.contains("nothing was restored") == true)
        #expect(try target.ledgerStore.ledgerIDs().isEmpty && Self.contents(target.directory.appending(path: "ledgers")).isEmpty)
        try manifest.encoded().write(to: destination.appending(path: BackupManifest.fileName))
        #expect(try LedgerStore.verifyBackup(at: destination).isValid)

        // A projection edited behind the log's back.
        do {
            let environment = try Environment(path: destination.path)
            let byStart = try environment.openDatabase("by_start")
            try environment.write { txn in
                let first = try txn.withCursor(on: byStart) { cursor in try cursor.first().map { Array($0.key) } }
                #expect(try txn.delete(try #require(first), in: byStart))
            }
        }
        try FileManager.default.removeItem(at: destination.appending(path: "lock.mdb"))
        let projections = try LedgerStore.verifyBackup(at: destination)
        #expect(projections.problem?.hasPrefix("projections:") == true, "\(projections.problem ?? "")")
        #expect(throws: LedgerFailure.self) { try target.ledgerStore.restore(from: destination) }

        // Manifests that do not decode, or are missing their data file.
        try Data("{\"ledgerID\": ".utf8).write(to: destination.appending(path: BackupManifest.fileName))
        let garbled = #expect(throws: LedgerFailure.self) { try LedgerStore.verifyBackup(at: destination) }
        #expect(garbled?.kind == .corrupted && garbled?.message.contains("is damaged: it is not valid JSON") == true)
        try manifest.encoded().write(to: destination.appending(path: BackupManifest.fileName))
        try Self.editManifest(in: destination) { $0["headSequence"] = "many" }
        let wrongType = #expect(throws: LedgerFailure.self) { try BackupManifest.read(from: destination) }
        #expect(wrongType?.message.contains("'headSequence' has the wrong type") == true)
        try Self.editManifest(in: destination) { $0["headSequence"] = 3; $0["files"] = ["../../etc/passwd", "data.mdb"] }
        let escaping = #expect(throws: LedgerFailure.self) { try BackupManifest.read(from: destination) }
        #expect(escaping?.message.contains("'../../etc/passwd'") == true)
        try manifest.encoded().write(to: destination.appending(path: BackupManifest.fileName))
        try FileManager.default.removeItem(at: destination.appending(path: "data.mdb"))
        #expect(try LedgerStore.verifyBackup(at: destination).problem == "data.mdb, listed in the manifest, is missing")

        // Not backups at all; a destination in use.
        let empty = scratch.path("empty")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        let notBackup = #expect(throws: LedgerFailure.self) { try LedgerStore.verifyBackup(at: empty) }
        #expect(notBackup?.kind == .invalidArgument && notBackup?.message.contains("is not a backup") == true)
        let missing = #expect(throws: LedgerFailure.self) { try LedgerStore.verifyBackup(at: scratch.path("nowhere")) }
        #expect(missing?.kind == .notFound)
        let full = #expect(throws: LedgerFailure.self) { try ledger.backup(to: destination) }
        #expect(full?.kind == .alreadyExists && full?.message.contains("is not empty") == true)
        #expect(Self.contents(destination) == ["backup.json"], "a refused backup leaves the destination alone")
        try ledger.backup(to: empty)
        #expect(try LedgerStore.verifyBackup(at: empty).isValid, "an empty existing directory is a fine destination")
        withExtendedLifetime(backup.temporary) {}
    }

    @Test("backupAll copies every ledger under its id with an index; verifyBackups checks each and names a missing one")
    func backupAll() async throws {
        let temporary = try TemporaryStore()
        let scratch = Scratch()
        for id in ["alice", "bob"] {
            let ledger = try temporary.ledgerStore.createLedger(id: id)
            _ = try await ledger.save((0..<5).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
        }
        let destination = scratch.path("all")
        let outcome = try temporary.ledgerStore.backupAll(to: destination)
        let manifests = outcome.manifests
        #expect(manifests.map(\.ledgerID) == ["alice", "bob"] && outcome.failed.isEmpty)
        #expect(Self.contents(destination) == ["alice", "backup-set.json", "bob"])
        #expect(try BackupSetManifest.read(from: destination).ledgers == ["alice", "bob"])
        let results = try LedgerStore.verifyBackups(at: destination)
        #expect(results.map(\.ledgerID) == ["alice", "bob"] && results.allSatisfy(\.isValid))

        let whole = #expect(throws: LedgerFailure.self) { try TemporaryStore().ledgerStore.restore(from: destination) }
        #expect(whole?.message.contains("several ledgers") == true)
        let other = try TemporaryStore()
        try other.ledgerStore.restore(from: destination.appending(path: "bob"))
        #expect(try other.ledgerStore.ledger("bob").head().sequence == manifests[1].headSequence)

        try FileManager.default.removeItem(at: destination.appending(path: "bob"))
        let damaged = try LedgerStore.verifyBackups(at: destination)
        #expect(damaged[0].isValid && damaged[1].problem?.contains("does not exist") == true)
    }

    @Test("a ledger that cannot be backed up does not cost the others: the set keeps them and names it; restoreAll restores what the set holds")
    func backupAllWithADamagedLedger() async throws {
        let temporary = try TemporaryStore()
        let scratch = Scratch()
        for id in ["alice", "bob", "carol"] {
            let ledger = try temporary.ledgerStore.createLedger(id: id)
            _ = try await ledger.save((0..<500).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
        }
        temporary.close()
        let file = temporary.directory.appending(path: "ledgers/bob/data.mdb")
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: try handle.seekToEnd() / 2)
        try handle.close()
        let store = try temporary.reopen()

        let destination = scratch.path("all")
        let outcome = try store.backupAll(to: destination)
        #expect(outcome.manifests.map(\.ledgerID) == ["alice", "carol"])
        #expect(outcome.failed.map(\.ledgerID) == ["bob"] && outcome.failed[0].problem.contains("truncated"))
        #expect(Self.contents(destination) == ["alice", "backup-set.json", "carol"])
        let index = try BackupSetManifest.read(from: destination)
        #expect(index.ledgers == ["alice", "carol"] && index.failed == outcome.failed)
        let verified = try LedgerStore.verifyBackups(at: destination)
        #expect(verified.map(\.ledgerID) == ["bob", "alice", "carol"])
        #expect(verified[0].problem?.hasPrefix("it was not backed up: ") == true && verified[1...].allSatisfy(\.isValid))

        let other = try TemporaryStore()
        try await other.ledgerStore.createLedger(id: "carol").save([Fixtures.heartRate(70, at: 0)], by: .owner)
        let restored = try other.ledgerStore.restoreAll(from: destination)
        #expect(restored.map(\.ledgerID) == ["alice", "carol", "bob"])
        #expect((try? restored[0].result.get())?.isValid == true)
        #expect(throws: LedgerFailure.self) { try restored[1].result.get() }
        #expect(try other.ledgerStore.ledger("carol").head().sequence < outcome.manifests[1].headSequence, "carol was not replaced")
        #expect(throws: LedgerFailure.self) { try restored[2].result.get() }
        #expect(try other.ledgerStore.ledger("alice").head().sequence == outcome.manifests[0].headSequence)
        #expect(try other.ledgerStore.ledgerIDs().sorted() == ["alice", "carol"])

        // Every ledger unusable: nothing is written.
        let broken = try TemporaryStore()
        _ = try broken.ledgerStore.createLedger(id: "dave")
        broken.close()
        try FileHandle(forWritingTo: broken.directory.appending(path: "ledgers/dave/data.mdb")).truncate(atOffset: 100)
        let none = scratch.path("none")
        #expect(throws: LedgerFailure.self) { try broken.reopen().backupAll(to: none) }
        #expect(!FileManager.default.fileExists(atPath: none.path) || Self.contents(none).isEmpty)
    }
}
