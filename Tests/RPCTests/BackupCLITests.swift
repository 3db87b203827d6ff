import Foundation
import HealthLedgerSDK
import Ledger
import Synchronization
import TestSupport
import Testing

/// `healthledger backup` and `healthledger restore` as an operator runs them, against a
/// live server and on data directories.
@Suite("healthledger backup and restore", .timeLimit(.minutes(3)))
struct BackupCLITests {
    static func run(_ arguments: [String]) async throws -> ProcessRun {
        try await runProcess(AuthCLITests.executable, arguments)
    }

    /// A temporary working directory, removed when the value is released.
    final class Workspace: @unchecked Sendable {
        let url = URL(filePath: NSTemporaryDirectory(), directoryHint: .isDirectory)
            .appending(path: "healthledger-backup-cli-\(UUID().uuidString)", directoryHint: .isDirectory)

        func path(_ name: String) -> String { url.appending(path: name).path }

        deinit { try? FileManager.default.removeItem(at: url) }
    }

    /// What the writers have had acknowledged, and when to stop.
    final class Writes: Sendable {
        private let acknowledged = Mutex<[UUID]>([])
        private let stopped = Atomic<Bool>(false)

        func acknowledge(_ uuid: UUID) { acknowledged.withLock { $0.append(uuid) } }
        var snapshot: [UUID] { acknowledged.withLock { $0 } }
        var isStopped: Bool { stopped.load(ordering: .acquiring) }
        func stop() { stopped.store(true, ordering: .releasing) }
    }

    /// A data directory with ledgers made by `healthledger ledger create` and `debug ingest`.
    static func dataDirectory(_ workspace: Workspace, _ name: String, ledgers: [String]) async throws -> [String] {
        let dataDir = ["--data-dir", workspace.path(name)]
        for id in ledgers {
            #expect(try await run(["ledger", "create", id] + dataDir).status == 0)
            #expect(try await run(["debug", "ingest", id, "--batches", "2", "--batch-size", "10"] + dataDir).status == 0)
        }
        return dataDir
    }

    static func isOneLine(_ text: String) -> Bool { text.split(separator: "\n").count == 1 }

    @Test("a backup taken while clients keep writing restores to a ledger that verifies and holds every write acknowledged before it began")
    func hotBackup() async throws {
        try await withTestServer { server in
            let workspace = Workspace()
            let writes = Writes()
            let writers = 4
            // Some history first, so the copy takes a while.
            for batch in 0..<20 {
                let objects = (0..<1000).map { Samples.heartRate(60, at: -Double(batch * 1000 + $0 + 1)) }
                _ = try await server.ledger.save(objects, by: .owner)
                objects.forEach { writes.acknowledge($0.uuid) }
            }
            let (warm, warmed) = AsyncStream.makeStream(of: Void.self)
            let writing = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for writer in 0..<writers {
                        let client = server.client(writer % 2 == 0 ? server.ownerCredential : server.appCredential)
                        group.addTask {
                            defer { warmed.yield() }
                            var count = 0
                            do {
                                while !writes.isStopped {
                                    let uuid = UUID()
                                    let date = Samples.base.addingTimeInterval(Double(writer * 1_000_000 + count))
                                    let sample = QuantitySample(
                                        type: Samples.heartRate, quantity: try Quantity(Double(50 + count % 100), "count/min"), start: date, end: date, uuid: uuid)
                                    let result = try await client.save(.quantitySample(sample))
                                    #expect(result.uuid == uuid)
                                    writes.acknowledge(uuid)
                                    count += 1
                                    // Each writer says once that it is under way (or, via the defer, that it stopped).
                                    if count == 20 { warmed.yield() }
                                }
                            } catch {
                                await client.close()
                                throw error
                            }
                            await client.close()
                        }
                    }
                    try await group.waitForAll()
                }
            }
            // Wait until every writer has had 20 writes acknowledged (a writer that fails also counts, and fails the test below).
            var signals = 0
            for await _ in warm {
                signals += 1
                if signals == writers { break }
            }

            let acknowledged = writes.snapshot
            let destination = workspace.path("backup")
            let backup = try await Self.run(["backup", "alice", destination, "--data-dir", server.directory.path, "--json"])
            writes.stop()
            try await writing.value
            #expect(backup.status == 0, "\(backup.error)")
            let manifest = try JSONDecoder.iso8601.decode(BackupManifest.self, from: Data(backup.output.utf8))
            #expect(manifest.ledgerID == "alice" && acknowledged.count >= 20_000 + writers * 20)
            #expect(try BackupManifest.read(from: URL(filePath: destination)) == manifest)

            let verify = try await Self.run(["backup", "--verify", destination])
            #expect(verify.status == 0 && verify.output.hasPrefix("OK: alice: \(manifest.headSequence) events"), "\(verify.output)\(verify.error)")

            let restoredDirectory = workspace.path("restored")
            let restore = try await Self.run(["restore", destination, "--data-dir", restoredDirectory])
            #expect(restore.status == 0 && restore.output.contains("restored ledger 'alice'"), "\(restore.error)")
            let restored = try LedgerStore(directory: URL(filePath: restoredDirectory), configuration: .forTests()).ledger("alice")
            #expect(try restored.head().sequence == manifest.headSequence)
            #expect(try restored.verify().isValid && restored.replay().identical)
            let missing = try acknowledged.filter { try restored.object(with: $0, as: .owner) == nil }
            #expect(missing.isEmpty, "\(missing.count) of \(acknowledged.count) acknowledged writes are not in the restored ledger")

            // The live ledger is untouched, and no restore replaces it while the server has it open.
            #expect(try server.ledger.verify().isValid)
            let replace = try await Self.run(["restore", destination, "--data-dir", server.directory.path, "--force"])
            #expect(replace.status != 0 && replace.error.contains("open in another process") && Self.isOneLine(replace.error), "\(replace.error)")
            #expect(try server.ledger.head().sequence >= manifest.headSequence)
        }
    }

    @Test("restore refuses an existing ledger without --force and changes nothing; --force replaces it")
    func restoreForce() async throws {
        let workspace = Workspace()
        let dataDir = try await Self.dataDirectory(workspace, "data", ledgers: ["alice"])
        let destination = workspace.path("backup")
        let backup = try await Self.run(["backup", "alice", destination] + dataDir)
        #expect(backup.status == 0 && backup.output.hasPrefix("backed up ledger 'alice' from node \(ProcessInfo.processInfo.hostName): head event 21, hash "), "\(backup.error)")
        #expect(backup.output.contains(" in \(destination)\n"))
        #expect(try await Self.run(["debug", "ingest", "alice", "--batches", "1", "--batch-size", "10", "--offset", "2"] + dataDir).status == 0)

        let refused = try await Self.run(["restore", destination] + dataDir)
        #expect(refused.status != 0 && Self.isOneLine(refused.error))
        #expect(refused.error.contains("ledger 'alice' already exists") && refused.error.contains("--force"), "\(refused.error)")
        #expect(try await Self.run(["verify", "alice"] + dataDir).output.contains("OK: 31 events"), "nothing changed")

        let forced = try await Self.run(["restore", destination, "--force"] + dataDir)
        #expect(forced.status == 0 && forced.output.contains("replaced ledger 'alice'") && forced.output.contains("head event 21"), "\(forced.error)")
        #expect(try await Self.run(["verify", "alice"] + dataDir).output.contains("OK: 21 events"))

        let renamed = try await Self.run(["restore", destination, "--as", "alice-2"] + dataDir)
        #expect(renamed.status == 0 && renamed.output.contains("restored ledger 'alice-2'"), "\(renamed.error)")
        let list = try await Self.run(["ledger", "list"] + dataDir)
        #expect(list.output.contains("alice-2") && list.output.split(separator: "\n").count == 3)
    }

    @Test("backup --verify passes an intact backup and fails a tampered one, naming the problem")
    func verifyTampered() async throws {
        let workspace = Workspace()
        let dataDir = try await Self.dataDirectory(workspace, "data", ledgers: ["alice"])
        let destination = workspace.path("backup")
        #expect(try await Self.run(["backup", "alice", destination] + dataDir).status == 0)
        let intact = try await Self.run(["backup", "--verify", destination])
        #expect(intact.status == 0 && intact.output.hasPrefix("OK: alice: 21 events, hash chain intact"), "\(intact.output)\(intact.error)")

        let manifestURL = URL(filePath: destination).appending(path: "backup.json")
        let original = try String(contentsOf: manifestURL, encoding: .utf8)
        let manifest = try BackupManifest.read(from: URL(filePath: destination))
        let forged = String(manifest.headHash.reversed())
        try original.replacingOccurrences(of: manifest.headHash, with: forged).write(to: manifestURL, atomically: true, encoding: .utf8)
        let tampered = try await Self.run(["backup", "--verify", destination])
        #expect(tampered.status == 2)
        #expect(tampered.output.hasPrefix("FAILED: alice (") && tampered.output.contains("head:") && tampered.output.contains(forged), "\(tampered.output)")
        let json = try await Self.run(["backup", "--verify", destination, "--json"])
        let results = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]])
        #expect(json.status == 2 && results.first?["valid"] as? Bool == false && (results.first?["problem"] as? String)?.contains("manifest records") == true)

        let restore = try await Self.run(["restore", destination, "--data-dir", workspace.path("elsewhere")])
        #expect(restore.status != 0 && restore.error.contains("does not verify") && Self.isOneLine(restore.error), "\(restore.error)")
        #expect(!FileManager.default.fileExists(atPath: workspace.path("elsewhere/ledgers/alice")))

        try Data("not json".utf8).write(to: manifestURL)
        let garbled = try await Self.run(["backup", "--verify", destination])
        #expect(garbled.status == 2 && garbled.output.contains("backup.json is damaged"), "\(garbled.output)\(garbled.error)")
    }

    @Test("backup --all copies every ledger into DEST/<id>/, and --verify checks each")
    func backupAll() async throws {
        let workspace = Workspace()
        let dataDir = try await Self.dataDirectory(workspace, "data", ledgers: ["alice", "bob"])
        let destination = workspace.path("all")
        let all = try await Self.run(["backup", "--all", destination] + dataDir)
        #expect(all.status == 0, "\(all.error)")
        #expect(all.output.contains("backed up ledger 'alice'") && all.output.contains("backed up ledger 'bob'") && all.output.contains("2 ledger(s) in \(destination)"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination).sorted() == ["alice", "backup-set.json", "bob"])

        let verify = try await Self.run(["backup", "--verify", destination])
        let lines = verify.output.split(separator: "\n")
        #expect(verify.status == 0 && lines.count == 2, "\(verify.output)")
        #expect(lines.first?.hasPrefix("OK: alice: 21 events") == true && lines.last?.hasPrefix("OK: bob: 21 events") == true, "\(verify.output)")

        let bob = try await Self.run(["restore", destination + "/bob", "--data-dir", workspace.path("restored"), "--json"])
        #expect(bob.status == 0, "\(bob.error)")
        let restoredBob = try JSONDecoder.iso8601.decode(BackupManifest.self, from: Data(bob.output.utf8))
        #expect(restoredBob.ledgerID == "bob")
        let whole = try await Self.run(["restore", destination, "--data-dir", workspace.path("restored")])
        #expect(whole.status != 0 && whole.error.contains("several ledgers") && Self.isOneLine(whole.error))

        // restore --all puts every ledger of the set back; again, it refuses the existing ones
        // (each named, nothing changed) unless --force.
        let both = try await Self.run(["restore", "--all", destination, "--data-dir", workspace.path("restored-all")])
        #expect(both.status == 0 && both.output.contains("restored ledger 'alice'") && both.output.contains("restored ledger 'bob'"), "\(both.output)\(both.error)")
        let again = try await Self.run(["restore", "--all", destination, "--data-dir", workspace.path("restored-all"), "--json"])
        let refusals = try #require(try JSONSerialization.jsonObject(with: Data(again.output.utf8)) as? [[String: Any]])
        #expect(again.status == 1 && refusals.count == 2 && refusals.allSatisfy { ($0["problem"] as? String)?.contains("--force") == true }, "\(again.output)")
        let forced = try await Self.run(["restore", "--all", destination, "--data-dir", workspace.path("restored-all"), "--force"])
        #expect(forced.status == 0, "\(forced.output)\(forced.error)")
        let notASet = try await Self.run(["restore", "--all", destination + "/bob", "--data-dir", workspace.path("restored-all")])
        #expect(notASet.status != 0 && notASet.error.contains("not a backup set") && Self.isOneLine(notASet.error), "\(notASet.error)")

        // A ledger that cannot be read is left out of backup --all: the others are kept, it
        // is named, and the exit status is 1; restore --all names it too.
        let data = try await Self.dataDirectory(workspace, "damaged-data", ledgers: ["carol", "dave"])
        let carolFile = workspace.path("damaged-data") + "/ledgers/carol/data.mdb"
        let handle = try #require(FileHandle(forWritingAtPath: carolFile))
        try handle.truncate(atOffset: try handle.seekToEnd() / 2)
        try handle.close()
        let partial = try await Self.run(["backup", "--all", workspace.path("partial")] + data)
        #expect(partial.status == 1 && partial.output.contains("FAILED: ledger 'carol' was not backed up") && partial.output.contains("backed up ledger 'dave'"), "\(partial.output)")
        let partialVerify = try await Self.run(["backup", "--verify", workspace.path("partial")])
        #expect(partialVerify.status == 2 && partialVerify.output.contains("FAILED: carol") && partialVerify.output.contains("OK: dave"), "\(partialVerify.output)")
        let partialRestore = try await Self.run(["restore", "--all", workspace.path("partial"), "--data-dir", workspace.path("partial-restored")])
        #expect(partialRestore.status == 1 && partialRestore.output.contains("restored ledger 'dave'") && partialRestore.output.contains("FAILED: ledger 'carol'"), "\(partialRestore.output)")

        // Damage bob's copy: verify names bob and exits 2, alice still passes.
        try FileManager.default.removeItem(atPath: destination + "/bob/data.mdb")
        let damaged = try await Self.run(["backup", "--verify", destination])
        #expect(damaged.status == 2 && damaged.output.contains("OK: alice") && damaged.output.contains("FAILED: bob"), "\(damaged.output)")
        #expect(damaged.output.contains("data.mdb, listed in the manifest, is missing"))
    }

    @Test("bad input gets one clear error line and a non-zero exit, never a crash")
    func badInput() async throws {
        let workspace = Workspace()
        let dataDir = try await Self.dataDirectory(workspace, "data", ledgers: ["alice"])
        let destination = workspace.path("backup")
        #expect(try await Self.run(["backup", "alice", destination] + dataDir).status == 0)
        try FileManager.default.createDirectory(atPath: workspace.path("empty"), withIntermediateDirectories: true)

        let cases: [(arguments: [String], message: String)] = [
            (["backup", "alice"] + dataDir, "give a ledger and a destination"),
            (["backup"], "give a ledger and a destination"),
            (["backup", "--all"] + dataDir, "--all takes one destination"),
            (["backup", "--verify"], "--verify takes one backup directory"),
            (["backup", "bob", workspace.path("bob")] + dataDir, "no ledger 'bob'"),
            (["backup", "alice", workspace.path("x"), "--data-dir", workspace.path("no-data")], "no data directory"),
            (["backup", "--all", workspace.path("x"), "--data-dir", workspace.path("empty")], "no ledgers"),
            (["backup", "alice", destination] + dataDir, "is not empty"),
            (["backup", "--all", destination] + dataDir, "is not empty"),
            (["backup", "--verify", workspace.path("nowhere")], "does not exist"),
            (["backup", "--verify", workspace.path("empty")], "is not a backup"),
            (["restore", workspace.path("nowhere")] + dataDir, "does not exist"),
            (["restore", workspace.path("empty")] + dataDir, "is not a backup"),
            (["restore", destination, "--as", "Not/Valid"] + dataDir, "invalid ledger id"),
        ]
        for (arguments, message) in cases {
            let run = try await Self.run(arguments)
            #expect(run.status == 1, "\(arguments): exit \(run.status)")
            #expect(run.error.contains(message) && Self.isOneLine(run.error), "\(arguments): \(run.error)")
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.path("no-data")), "a missing data directory is not created")
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination).sorted() == ["backup.json", "data.mdb"])

        let manifestURL = URL(filePath: destination).appending(path: "backup.json")
        try Data("{\"formatVersion\": 1}".utf8).write(to: manifestURL)
        let damaged = try await Self.run(["restore", destination, "--data-dir", workspace.path("other")])
        #expect(damaged.status == 1 && damaged.error.contains("backup.json is damaged: it has no 'ledgerID'") && Self.isOneLine(damaged.error), "\(damaged.error)")
    }
}

extension JSONDecoder {
    /// A decoder for HealthLedger's JSON (ISO 8601 dates).
    static var iso8601: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
