import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf
import TestSupport
import Testing

@Suite("Encryption at rest (docs/LEDGER.md, \"Encryption at rest\"): no value in the clear, wrong keys refused", .timeLimit(.minutes(5)))
struct EncryptionTests {
    static let cli = AuthCLITests.executable

    /// A master key file in a directory of its own (outside every data directory).
    static func masterKey() throws -> MasterKey {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try MasterKey.create(at: directory.appending(path: "master.key").path)
    }

    static func encrypted(_ key: MasterKey) -> LedgerConfiguration {
        var configuration = LedgerConfiguration()
        configuration.masterKey = key
        return configuration
    }

    /// Every byte pattern a stored value could take: its IEEE bits either way round, in the
    /// unit saved and per second.
    static func patterns(of value: Double) -> [Data] {
        [value, value / 60].flatMap { value in
            [Data(withUnsafeBytes(of: value.bitPattern.bigEndian, Array.init)), Data(withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init))]
        }
    }

    static func file(_ url: URL, holds needle: Data) throws -> Bool {
        try Data(contentsOf: url).range(of: needle) != nil
    }

    @Test("an encrypted ledger keeps no value, metadata entry, sync identifier, attachment byte or characteristic in the clear, and reads them all back")
    func nothingInTheClear() async throws {
        let key = try Self.masterKey()
        try await withTestServer(ledgers: Self.encrypted(key)) { server in
            #expect(server.ledger.isEncrypted)
            let owner = server.client()
            let marker = "secret-\(UUID().uuidString)"
            let syncID = "sync-\(UUID().uuidString)"
            let value = 187.4321
            let sample = Samples.heartRate(value, at: 0, metadata: ["marker": .string(marker)])
            // A later hour's sample closes the first hour: its statistics get a rollup row.
            let later = Samples.heartRate(61, at: 7_200)
            let synced = Samples.heartRate(99.5, at: 30, metadata: [MetadataKey.syncIdentifier: .string(syncID), MetadataKey.syncVersion: .number(1)])
            try await owner.save([sample, later, synced])
            // Deleted, the synced sample leaves a tombstone with its sync identifier.
            try await owner.delete([synced.uuid])
            let scan = Array("%PDF-1.4 \(marker)".utf8) + (0..<5_000).map { UInt8($0 % 251) }
            let attachment = try await owner.addAttachment(to: sample.uuid, name: "scan.pdf", contentType: "application/pdf", data: scan)
            let birth = Characteristic.dateOfBirth(year: 1957, month: 3, day: 14)
            try await owner.setCharacteristic(of: .dateOfBirth, to: birth)

            // Everything reads back.
            #expect(try await owner.object(with: sample.uuid) == sample)
            let maximum = try #require(try await owner.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, options: .discreteMax)))
            let perMinute = try #require(try maximum.values.maximum?.doubleValue(for: try Quantity(1, "count/min").unit))
            #expect(abs(perMinute - value) < 1e-9, "\(perMinute)")
            #expect(try await owner.data(of: attachment.uuid).1 == scan)
            #expect(try await owner.dateOfBirthComponents()?.year == 1957)
            #expect(try server.ledger.verify().isValid)
            #expect(try server.ledger.replay().identical)

            // None of it is in the data file, nor in a backup of it.
            let backup = server.directory.appending(path: "backup")
            _ = try server.ledger.backup(to: backup)
            let characteristicBytes: [UInt8] = try Healthledger_V1_Characteristic(birth).serializedBytes()
            let characteristic = Data(characteristicBytes)
            for file in [server.directory.appending(path: "ledgers/alice/data.mdb"), backup.appending(path: "data.mdb")] {
                #expect(try !Self.file(file, holds: Data(marker.utf8)), "\(file.path)")
                #expect(try !Self.file(file, holds: Data(syncID.utf8)), "\(file.path)")
                #expect(try !Self.file(file, holds: characteristic), "\(file.path)")
                for pattern in Self.patterns(of: value) { #expect(try !Self.file(file, holds: pattern), "\(file.path)") }
            }
        }
    }

    @Test("a clear ledger is encrypted when first opened with a master key: its head, pinned heads and proofs still verify, and its clear bytes leave data.mdb")
    func clearLedgerEncryptedOnOpen() async throws {
        let marker = "before-\(UUID().uuidString)"
        let (directory, pinned, before, inclusion) = try await withTestServer { server in
            let owner = server.client()
            try await owner.save([Samples.heartRate(72, at: 0, metadata: ["marker": .string(marker)]), Samples.heartRate(73, at: 7_200)])
            let before = try await owner.treeHead()
            // The server's directory goes when it stops: keep a copy, as an operator's upgrade would find it.
            let copy = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-upgrade-\(UUID().uuidString)")
            try FileManager.default.copyItem(at: server.directory, to: copy)
            return (copy, try server.ledger.head(), before, try await owner.inclusionProof(of: 2, in: before))
        }
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appending(path: "ledgers/alice/data.mdb")
        #expect(try Self.file(data, holds: Data(marker.utf8)))

        let key = try Self.masterKey()
        let ledger = try LedgerStore(directory: directory, configuration: Self.encrypted(key)).ledger("alice")
        #expect(ledger.isEncrypted)
        #expect(try ledger.head() == pinned)
        #expect(try ledger.verify(expectedHead: pinned).isValid)
        #expect(try ledger.replay().identical)
        let after = try ledger.signedTreeHead(as: .owner)
        let consistency = try ledger.consistencyProof(from: before.size, as: .owner)
        try TreeProofs.verify(consistency, firstRoot: before.rootHash, secondRoot: after.rootHash)
        try TreeProofs.verify(inclusion, root: before.rootHash)
        #expect(try ledger.inclusionProof(sequence: 2, treeSize: before.size, as: .owner).eventHash == inclusion.eventHash)
        #expect(try !Self.file(data, holds: Data(marker.utf8)))
        #expect(try ledger.samples(SampleQuery(type: Samples.heartRate.objectType), as: .owner).count == 2)
    }

    @Test("the server and the CLI refuse an encrypted data directory without its key or with another, saying which; a rotated key takes over")
    func wrongKeysRefused() async throws {
        let key = try Self.masterKey()
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-keys-dir-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let dataDir = directory.path
        let created = try await runProcess(Self.cli, ["admin", "create-ledger", "alice", "--data-dir", dataDir, "--master-key-file", key.path])
        #expect(created.status == 0, "\(created.error)")

        let none = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir])
        #expect(none.status != 0 && none.error.contains("is encrypted (master key \(key.id)), and no master key was given"), "\(none.error)")
        // An empty variable is no key, not a file named "".
        let empty = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir], environment: ["HEALTHLEDGER_MASTER_KEY_FILE": ""])
        #expect(empty.status != 0 && empty.error.contains("no master key was given"), "\(empty.error)")
        let other = try Self.masterKey()
        let wrong = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir], environment: ["HEALTHLEDGER_MASTER_KEY_FILE": other.path])
        #expect(wrong.status != 0 && wrong.error.contains("(id \(other.id)) is not the one the data directory") && wrong.error.contains(key.id), "\(wrong.error)")
        let daemon = try await runProcess(DaemonProcess.executable, ["--data-dir", dataDir, "--port", "0", "--metrics-port=-1", "--grpc-port=-1", "--web-port=-1"])
        #expect(daemon.status != 0 && daemon.error.contains("no master key was given"), "\(daemon.error)")

        // A key file others may read is refused, naming the fix.
        let loose = URL(filePath: other.path).deletingLastPathComponent().appending(path: "loose.key")
        try Data(repeating: UInt8(ascii: "a"), count: 64).write(to: loose)
        chmod(loose.path, 0o644)
        let looseRun = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir, "--master-key-file", loose.path])
        #expect(looseRun.status != 0 && looseRun.error.contains("is open to others (mode 644)"), "\(looseRun.error)")
        // Readable by its group only when root owns it: a secret Kubernetes mounts for a pod's
        // fsGroup (0440, owner root, the group the pod's).
        let shared = URL(filePath: other.path).deletingLastPathComponent().appending(path: "shared.key")
        try FileManager.default.copyItem(at: URL(filePath: key.path), to: shared)
        chmod(shared.path, 0o440)
        if getuid() == 0 {
            chown(shared.path, 0, 999)
            let byRoot = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir, "--master-key-file", shared.path])
            #expect(byRoot.status == 0 && byRoot.output.contains("hash chain intact"), "\(byRoot.output) \(byRoot.error)")
            chown(shared.path, 999, 999)
            let byOther = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir, "--master-key-file", shared.path])
            #expect(byOther.status != 0 && byOther.error.contains("is owned by user 999, neither the server's user (0) nor root"), "\(byOther.error)")
        } else {
            let byOwner = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir, "--master-key-file", shared.path])
            #expect(byOwner.status != 0 && byOwner.error.contains("is readable by its group (mode 440)"), "\(byOwner.error)")
        }
        if getuid() == 0 { chown(shared.path, 0, 999) }
        chmod(shared.path, 0o460)
        let groupWritable = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir, "--master-key-file", shared.path])
        #expect(groupWritable.status != 0 && groupWritable.error.contains("is open to its group beyond reading (mode 460)"), "\(groupWritable.error)")

        // A key of zeros, or a directory, is refused as the new key; nothing is re-wrapped.
        let zeros = directory.appending(path: "zeros.key")
        try Data((String(repeating: "0", count: 64) + "\n").utf8).write(to: zeros)
        chmod(zeros.path, 0o600)
        let weak = try await runProcess(Self.cli, ["admin", "rotate-master-key", "--data-dir", dataDir, "--master-key-file", key.path, "--new-key-file", zeros.path])
        #expect(weak.status != 0 && weak.error.contains("is not random"), "\(weak.error)")
        let folder = try await runProcess(Self.cli, ["admin", "rotate-master-key", "--data-dir", dataDir, "--master-key-file", key.path, "--new-key-file", NSTemporaryDirectory()])
        #expect(folder.status != 0 && folder.error.contains("is a directory, not a key file"), "\(folder.error)")
        // Rotation re-wraps the data keys: the old key is refused after, the new one opens.
        let rotated = try await runProcess(Self.cli, ["admin", "rotate-master-key", "--data-dir", dataDir, "--master-key-file", key.path, "--new-key-file", other.path])
        #expect(rotated.status == 0 && rotated.output.contains("re-wrapped 1 ledger"), "\(rotated.output) \(rotated.error)")
        let old = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir, "--master-key-file", key.path])
        #expect(old.status != 0 && old.error.contains("is not the one the data directory"), "\(old.error)")
        let new = try await runProcess(Self.cli, ["verify", "alice", "--data-dir", dataDir, "--master-key-file", other.path])
        #expect(new.status == 0 && new.output.contains("hash chain intact"), "\(new.output) \(new.error)")
        // Copied out alone, the ledger's wrapped data key names the key it needs.
        let alone = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-alone-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: alone) }
        try FileManager.default.createDirectory(at: alone.appending(path: "ledgers"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: directory.appending(path: "ledgers/alice"), to: alone.appending(path: "ledgers/alice"))
        #expect(throws: LedgerFailure.self) { try LedgerStore(directory: alone).ledger("alice") }
        do {
            _ = try LedgerStore(directory: alone).ledger("alice")
        } catch let failure as LedgerFailure {
            #expect(failure.message.contains("is encrypted (under master key \(other.id)), and no master key was given"), "\(failure.message)")
        }
    }
}
