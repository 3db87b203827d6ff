import Crypto
import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

@Suite("Signed tree heads and proofs", .timeLimit(.minutes(3)))
struct TreeHeadTests {
    /// The hashes of every event, from the owner's audit trail.
    static func eventHashes(_ store: HealthStore) async throws -> [[UInt8]] {
        var hashes: [[UInt8]] = []
        for try await batch in try await store.audit(includeStored: true) {
            for event in batch.events {
                #expect(eventHash(event.stored!) == event.hash)
                hashes.append(event.hash)
            }
        }
        return hashes
    }

    @Test("tree heads are signed roots of the event hashes; inclusion and consistency proofs match the definition; tampered ones fail")
    func proofs() async throws {
        try await withTestServer { server in
            let owner = server.client()
            for round in 0..<6 { try await owner.save((0..<(round + 1)).map { Samples.heartRate(Double(60 + $0), at: Double(round * 10 + $0)) }) }
            let first = try await owner.treeHead()
            for round in 6..<9 { try await owner.save((0..<round).map { Samples.heartRate(Double(60 + $0), at: Double(round * 10 + $0)) }) }
            let second = try await owner.treeHead()
            #expect(owner.lastTreeHead == second)

            let leaves = try await Self.eventHashes(owner).map(ReferenceTree.leaf)
            #expect(UInt64(leaves.count) == second.size && first.size < second.size)
            for head in [first, second] {
                #expect(head.rootHash == ReferenceTree.root(leaves.prefix(Int(head.size))))
                let key = try Curve25519.Signing.PublicKey(rawRepresentation: head.publicKey)
                #expect(key.isValidSignature(head.signature, for: ReferenceTree.signed(ledger: "alice", size: head.size, time: head.timestampUs, root: head.rootHash)))
            }
            // The ledger-created event names the key.
            let created = try #require(try await owner.audit(AuditFilter(toSequence: 1)).reduce(into: [AuditEvent]()) { $0 += $1.events }.first)
            #expect(created.sentence.hasSuffix(second.publicKey.map { String(format: "%02x", $0) }.joined()))

            for sequence in [1, 2, 7, Int(first.size), Int(second.size)] {
                let proof = try await owner.inclusionProof(of: UInt64(sequence), in: second)
                #expect(proof.path == ReferenceTree.path(sequence - 1, leaves[...]), "inclusion of \(sequence)")
                #expect(ReferenceTree.leaf(proof.eventHash) == leaves[sequence - 1])
            }
            for size in [1, 2, 3, 4, 5, Int(first.size), Int(second.size) - 1] {
                let proof = try await owner.consistencyProof(
                    from: SignedTreeHead(ledgerID: "alice", size: UInt64(size), rootHash: ReferenceTree.root(leaves.prefix(size)), timestampUs: 0, signature: [], publicKey: []),
                    to: second)
                #expect(proof.path == ReferenceTree.subproof(size, leaves[...], true), "consistency from \(size)")
            }

            // Tampered proofs and heads are refused.
            var inclusion = try await owner.inclusionProof(of: 7, in: second)
            inclusion.path[0][0] ^= 1
            #expect(throws: TreeProofs.Failure.self) { try TreeProofs.verify(inclusion, root: second.rootHash) }
            let other = try await owner.inclusionProof(of: 8, in: second)
            #expect(throws: TreeProofs.Failure.self) { try TreeProofs.verify(InclusionProof(sequence: 7, treeSize: second.size, eventHash: other.eventHash, path: other.path), root: second.rootHash) }
            var consistency = try await owner.consistencyProof(from: first, to: second)
            consistency.path[consistency.path.count - 1][5] ^= 1
            #expect(throws: TreeProofs.Failure.self) { try TreeProofs.verify(consistency, firstRoot: first.rootHash, secondRoot: second.rootHash) }
            var forged = second
            forged.rootHash[0] ^= 1
            #expect(throws: TreeProofs.Failure.self) { try TreeProofs.verify(forged) }
            #expect(throws: TreeProofs.Failure.self) { try TreeProofs.verify(second, publicKey: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)) }

            // The owner's only; bad sizes are refused.
            let app = server.client(server.appCredential)
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's tree head") { _ = try await app.treeHead() }
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's proof") { _ = try await app.inclusionProof(of: 1, in: second) }
            await expectRPCError(.invalidArgument, .invalidArgument, "past the tree") { _ = try await owner.inclusionProof(of: second.size + 1, in: second) }
            var bigger = second
            bigger.size += 100
            await expectRPCError(.invalidArgument, .invalidArgument, "a tree larger than the ledger") { _ = try await owner.consistencyProof(from: first, to: bigger) }
            await app.close()
            await owner.close()
        }
    }

    @Test("the SDK catches a server whose history was rewritten since a tree head it kept")
    func rewrittenHistory() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-tree-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let ownerCredential: String
        do {
            let store = try LedgerStore(directory: directory, configuration: LedgerConfiguration(followInterval: nil))
            let ledger = try store.createLedger(id: "alice")
            ownerCredential = try await ledger.issueCredential(for: .owner)
        }
        var daemon = try await DaemonProcess(dataDirectory: directory)
        var owner = HealthStore(configuration: .init(port: daemon.port, credential: ownerCredential))
        for round in 0..<5 { try await owner.save((0..<3).map { Samples.heartRate(Double(60 + $0), at: Double(round * 10 + $0)) }) }
        let kept = try await owner.treeHead()
        try await owner.save(Samples.heartRate(99, at: 500))
        #expect(try await owner.treeHead().size == kept.size + 1, "an honest server's next head extends the one kept")
        await owner.close()
        daemon.stop()

        // Someone with the data directory changes event 4 and re-links everything after it,
        // the Merkle tree included (a replay rebuilds it): the chain verifies on its own.
        try rewriteHistory(ledgerAt: directory.appending(path: "ledgers/alice"), from: 4)
        do {
            let ledger = try LedgerStore(directory: directory, configuration: LedgerConfiguration(followInterval: nil)).ledger("alice")
            #expect(try ledger.replay(install: true).installed)
            #expect(try ledger.verify().isValid)
        }

        daemon = try await DaemonProcess(dataDirectory: directory)
        defer { daemon.stop() }
        // A client that kept the tree head from before is not fooled…
        owner = HealthStore(configuration: .init(port: daemon.port, credential: ownerCredential, trustedTreeHead: kept))
        let caught = await #expect(throws: TreeProofs.Failure.self) { _ = try await owner.treeHead() }
        #expect(caught?.description.contains("rewritten") == true, "\(String(describing: caught))")
        #expect(owner.lastTreeHead == kept, "the rejected head is not trusted")
        await owner.close()
        // …while a client that never saw it has nothing to compare with.
        let newcomer = HealthStore(configuration: .init(port: daemon.port, credential: ownerCredential))
        #expect(try await newcomer.treeHead().size == kept.size + 1)
        await newcomer.close()
    }

    @Test("healthledger proof: tree-head, inclusion and consistency files that proof check verifies offline; tampered files fail")
    func cli() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save((0..<10).map { Samples.heartRate(Double(60 + $0), at: Double($0)) })
            let cli = AuthCLITests.executable
            let connection = ["--port", "\(server.port)", "--credential", server.ownerCredential]
            let directory = server.directory.appending(path: "proofs")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            func file(_ name: String) -> String { directory.appending(path: name).path }

            #expect(try await runProcess(cli, ["proof", "tree-head", "-o", file("head.json")] + connection).status == 0)
            try await owner.save(Samples.heartRate(99, at: 100))
            let inclusion = try await runProcess(cli, ["proof", "inclusion", "--sequence", "5", "--tree-head", file("head.json"), "-o", file("inclusion.json")] + connection)
            #expect(inclusion.status == 0, "\(inclusion.error)")
            let consistency = try await runProcess(cli, ["proof", "consistency", "--from", file("head.json"), "-o", file("consistency.json")] + connection)
            #expect(consistency.status == 0, "\(consistency.error)")

            let key = try await owner.treeHead().publicKey.map { String(format: "%02x", $0) }.joined()
            for (name, expected) in [("head.json", "OK: tree head of ledger alice"), ("inclusion.json", "OK: event 5"), ("consistency.json", "OK: the tree of 17 events extends the tree of 16 events of ledger alice")] {
                let checked = try await runProcess(cli, ["proof", "check", file(name), "--public-key", key])
                #expect(checked.status == 0 && checked.output.hasPrefix(expected), "\(name): \(checked.output)\(checked.error)")
            }
            // A changed hash anywhere fails; so does another key.
            for name in ["head.json", "inclusion.json", "consistency.json"] {
                var text = try String(contentsOfFile: file(name), encoding: .utf8)
                let root = try #require(text.firstRange(of: /"root" : "([0-9a-f])/))
                let digit = text[text.index(root.upperBound, offsetBy: -1)]
                text.replaceSubrange(text.index(root.upperBound, offsetBy: -1)..<root.upperBound, with: digit == "0" ? "1" : "0")
                try text.write(toFile: file("bad-" + name), atomically: true, encoding: .utf8)
                let checked = try await runProcess(cli, ["proof", "check", file("bad-" + name)])
                #expect(checked.status == 2 && checked.output.hasPrefix("FAILED"), "\(name): \(checked.output)")
            }
            let otherKey = String(repeating: "ab", count: 32)
            #expect(try await runProcess(cli, ["proof", "check", file("head.json"), "--public-key", otherKey]).status == 2)
            let app = try await runProcess(cli, ["proof", "tree-head", "--port", "\(server.port)", "--credential", server.appCredential])
            #expect(app.status != 0 && app.error.contains("permissionDenied"))
            await owner.close()
        }
    }
}
