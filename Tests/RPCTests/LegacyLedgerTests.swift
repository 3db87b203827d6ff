import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

/// A ledger written before events committed to their bodies (format 1), made by the release
/// before (`ffcd469`): `healthledger admin create-ledger alice`, three heart rates saved
/// through its server (one with the metadata marker `legacy-erase-me-4c1d`, UUID …A001),
/// and its signed tree head, `proof tree-head`, at head 5.
@Suite("A ledger from before body commitments opens, keeps its heads and proofs, and can be erased", .timeLimit(.minutes(3)))
struct LegacyLedgerTests {
    static let fixture = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "Fixtures/legacy-format1-ledger.tar.gz")
    static let pinnedHead = (sequence: UInt64(5), hash: [UInt8](hexString: "7774f65269918ec1540e9e4ccb9940ecea827dac3b480335baa65966a427112e")!)
    static let erased = UUID(uuidString: "0195F0A0-0000-7000-8000-00000000A001")!
    static let kept = UUID(uuidString: "0195F0A0-0000-7000-8000-00000000A002")!

    /// The fixture unpacked into a new directory: its data directory and its signed tree head at 5.
    static func unpack() async throws -> (directory: URL, oldHead: SignedTreeHead) {
        let directory = FileManager.default.temporaryDirectory.appending(path: "legacy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let untar = try await runProcess(URL(filePath: "/usr/bin/tar"), ["xzf", Self.fixture.path, "-C", directory.path])
        #expect(untar.status == 0, "\(untar.error)")
        let headFile = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appending(path: "head.json"))) as! [String: Any]
        let fields = headFile["treeHead"] as! [String: Any]
        let oldHead = SignedTreeHead(
            ledgerID: "alice", size: 5, rootHash: [UInt8](hexString: fields["root"] as! String)!, timestampUs: (fields["timestampUs"] as! NSNumber).int64Value,
            signature: [UInt8](hexString: fields["signature"] as! String)!, publicKey: [UInt8](hexString: fields["publicKey"] as! String)!)
        try TreeProofs.verify(oldHead)
        return (directory, oldHead)
    }

    @Test("format-1 events verify; new events are format 2; a format-1 event is erased with its hash kept; the old tree head extends")
    func upgradeAndErase() async throws {
        let (directory, oldHead) = try await Self.unpack()
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appending(path: "data/ledgers/alice/data.mdb")
        #expect(try ErasureTests.file(data, contains: "legacy-erase-me-4c1d"))

        let store = try LedgerStore(directory: directory.appending(path: "data"))
        let ledger = try store.ledger("alice")
        #expect(try ledger.verify(expectedHead: Self.pinnedHead).isValid)

        // New events are written in format 2 beside the old ones.
        try await ledger.save([Samples.heartRate(70, at: 0)], by: .owner)
        let erasure = try await ledger.erase(.objects([Self.erased]), reason: "legacy erasure", by: .owner)
        #expect(erasure.objects == 1 && erasure.events == 1)
        #expect(try !ErasureTests.file(data, contains: "legacy-erase-me-4c1d"))
        #expect(try ErasureTests.file(data, contains: "legacy-kept-9e2b"))
        #expect(try ledger.object(with: Self.erased, as: .owner) == nil)
        #expect(try ledger.object(with: Self.kept, as: .owner) != nil)

        let report = try ledger.verify(expectedHead: Self.pinnedHead)
        #expect(report.isValid, "\(String(describing: report.problem))")
        #expect(try ledger.replay().identical)
        let now = try ledger.signedTreeHead(as: .owner)
        let proof = try ledger.consistencyProof(from: 5, to: now.size, as: .owner)
        try TreeProofs.verify(proof, firstRoot: oldHead.rootHash, secondRoot: now.rootHash)
        #expect(now.publicKey == oldHead.publicKey)

        // The data directory verifies with the command line too, from the pinned head.
        let cli = try await runProcess(
            AuthCLITests.executable, ["verify", "alice", "--data-dir", directory.appending(path: "data").path, "--expect-head", "5:\(Self.pinnedHead.hash.hexString)"])
        #expect(cli.status == 0 && cli.output.contains("extends the pinned head 5"), "\(cli.output) \(cli.error)")
    }

    @Test("opened with a master key, the format-1 ledger is encrypted: its heads and proofs still verify, its clear bytes leave data.mdb, and its old events can still be erased")
    func encryptOnUpgrade() async throws {
        let (directory, oldHead) = try await Self.unpack()
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appending(path: "data/ledgers/alice/data.mdb")
        let key = try EncryptionTests.masterKey()
        let ledger = try LedgerStore(directory: directory.appending(path: "data"), configuration: EncryptionTests.encrypted(key)).ledger("alice")
        #expect(ledger.isEncrypted)
        for marker in ["legacy-erase-me-4c1d", "legacy-kept-9e2b"] { #expect(try !ErasureTests.file(data, contains: marker)) }
        #expect(try ledger.verify(expectedHead: Self.pinnedHead).isValid)
        #expect(try ledger.object(with: Self.kept, as: .owner) != nil)

        try await ledger.save([Samples.heartRate(70, at: 0)], by: .owner)
        let erasure = try await ledger.erase(.objects([Self.erased]), reason: "legacy erasure", by: .owner)
        #expect(erasure.objects == 1 && erasure.events == 1)
        #expect(try ledger.object(with: Self.erased, as: .owner) == nil)
        let report = try ledger.verify(expectedHead: Self.pinnedHead)
        #expect(report.isValid, "\(String(describing: report.problem))")
        #expect(try ledger.replay().identical)
        let now = try ledger.signedTreeHead(as: .owner)
        try TreeProofs.verify(try ledger.consistencyProof(from: 5, to: now.size, as: .owner), firstRoot: oldHead.rootHash, secondRoot: now.rootHash)

        let cli = try await runProcess(
            AuthCLITests.executable,
            ["verify", "alice", "--data-dir", directory.appending(path: "data").path, "--master-key-file", key.path, "--expect-head", "5:\(Self.pinnedHead.hash.hexString)"])
        #expect(cli.status == 0 && cli.output.contains("extends the pinned head 5"), "\(cli.output) \(cli.error)")
    }
}
