import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

@Suite("The operator over RPC", .timeLimit(.minutes(3)))
struct OperatorTests {
    @Test("an operator credential creates and lists ledgers, issues, lists and revokes credentials, and reads no health data")
    func operatorCalls() async throws {
        try await withTestServer { server in
            let operatorCredential = try server.store.issueOperatorCredential(label: "ops")
            #expect(operatorCredential.hasPrefix("hl1:_operator:"))
            let ops = server.client(operatorCredential)

            #expect(try await ops.createLedger(id: "bob", displayName: "Bob") == "bob")
            #expect(try await ops.ledgers() == ["alice", "bob"])
            await expectRPCError(.alreadyExists, nil, "an existing ledger") { _ = try await ops.createLedger(id: "bob") }
            await expectRPCError(.invalidArgument, nil, "a bad ledger id") { _ = try await ops.createLedger(id: "Bad Id") }

            // Bob's owner and app, issued over RPC, work at once.
            let ownerCredential = try await ops.issueCredential(ledger: "bob", for: .owner, label: "phone")
            let walk = Source(bundleIdentifier: "com.example.walk", name: "Walk")
            let appCredential = try await ops.issueCredential(ledger: "bob", for: .app(walk))
            let owner = server.client(ownerCredential)
            let app = server.client(appCredential)
            #expect(try await owner.ping().ledgerID == "bob")
            #expect(try await app.ping().principal == "app com.example.walk")
            let listed = try await ops.credentials(ledger: "bob")
            #expect(Set(listed.map(\.principal)) == [.owner, .app(walk)] && listed.count == 2)
            #expect(listed.allSatisfy { $0.refusal() == nil && $0.revocation == nil && $0.issued != nil })
            #expect(listed.first { $0.principal == .owner }?.label == "phone")
            await expectRPCError(.invalidArgument, nil, "a reserved bundle id") {
                _ = try await ops.issueCredential(ledger: "bob", for: .app(Source(bundleIdentifier: "org.healthledger.import.x", name: "X")))
            }
            await expectRPCError(.notFound, nil, "an unknown ledger") { _ = try await ops.credentials(ledger: "carol") }

            // Revoked over RPC: the app's stream ends and its next call is refused.
            try await owner.save(Samples.heartRate(70, at: 0))
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)).makeAsyncIterator()
            _ = try await watch.next()
            try await ops.revokeCredential(ledger: "bob", id: credentialID(appCredential))
            await expectRPCError(.permissionDenied, .authorizationDenied, "the revoked app's watch") { while try await watch.next() != nil {} }
            await expectRPCError(.unauthenticated, nil, "the revoked app's next call") { _ = try await app.ping() }
            let revokedEntry = try await ops.credentials(ledger: "bob").first { $0.id == credentialID(appCredential) }
            #expect(revokedEntry?.revocation != nil && revokedEntry?.refusal() != nil)
            await expectRPCError(.invalidArgument, .invalidArgument, "a credential revoked already") {
                try await ops.revokeCredential(ledger: "bob", id: credentialID(appCredential))
            }
            await expectRPCError(.notFound, .noData, "a credential id never issued") {
                try await ops.revokeCredential(ledger: "bob", id: "0123456789abcdef")
            }

            // The operator reads no health data, and the others cannot call the operator's methods.
            await expectRPCError(.unauthenticated, nil, "an operator credential on a ledger method") { _ = try await ops.ping() }
            await expectRPCError(.unauthenticated, nil, "an operator credential on a query") {
                _ = try await ops.result(for: SampleQueryDescriptor(type: Types.heartRate))
            }
            await expectRPCError(.unauthenticated, nil, "an owner on an operator method") { _ = try await owner.ledgers() }

            // A revoked operator credential is refused at its next call.
            try server.store.revokeOperatorCredential(id: credentialID(operatorCredential))
            await expectRPCError(.unauthenticated, nil, "a revoked operator") { _ = try await ops.ledgers() }
            for store in [ops, owner, app] { await store.close() }
        }
    }

    @Test("the operator erases a whole ledger through the server: its streams end, its calls are refused, its bytes go, its id is not used again; bad input erases nothing")
    func eraseLedger() async throws {
        try await withTestServer { server in
            let ops = server.client(try server.store.issueOperatorCredential(label: "ops"))
            _ = try await ops.createLedger(id: "bob")
            let owner = server.client(try await ops.issueCredential(ledger: "bob", for: .owner))
            let marker = "erase-ledger-marker-\(UUID().uuidString)"
            try await owner.save(Samples.heartRate(71, at: 0, metadata: ["marker": .string(marker)]))
            var watch = try await owner.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)).makeAsyncIterator()
            _ = try await watch.next()

            await expectRPCError(.invalidArgument, nil, "a reason over 1,000 bytes") {
                try await ops.eraseLedger("bob", reason: String(repeating: "x", count: 1_001))
            }
            await expectRPCError(.notFound, nil, "a ledger that is not there") { try await ops.eraseLedger("carol") }
            await expectRPCError(.invalidArgument, nil, "a bad ledger id") { try await ops.eraseLedger("../alice") }
            await expectRPCError(.unauthenticated, nil, "the owner") { try await owner.eraseLedger("bob") }
            try server.store.ledger("bob").setLegalHold(reason: "litigation 2026-88")
            let held = await expectRPCError(.failedPrecondition, nil, "a ledger under a legal hold") { try await ops.eraseLedger("bob") }
            #expect(held?.message.contains("litigation 2026-88") == true)
            try server.store.ledger("bob").setLegalHold(reason: nil)
            #expect(try await owner.ping().ledgerID == "bob", "refused erasures leave the ledger served")

            try await ops.eraseLedger("bob", reason: "left the service")
            let ended = await expectRPCError(.notFound, nil, "the erased ledger's open watch") { while try await watch.next() != nil {} }
            #expect(ended?.message.contains("being erased") == true)
            await expectRPCError(.unauthenticated, nil, "the erased ledger's owner") { _ = try await owner.ping() }
            #expect(try await ops.ledgers() == ["alice"])
            #expect(!FileManager.default.fileExists(atPath: server.directory.appending(path: "ledgers/bob").path))
            let journal = try String(contentsOf: server.directory.appending(path: "erasures/bob.jsonl"), encoding: .utf8)
            #expect(journal.contains("left the service") && !journal.contains(marker))
            let reused = await expectRPCError(.failedPrecondition, nil, "the erased id, again") { _ = try await ops.createLedger(id: "bob") }
            #expect(reused?.message.contains("was erased on") == true)
            await expectRPCError(.notFound, nil, "an erasure asked twice") { try await ops.eraseLedger("bob") }
            #expect(try server.ledger.verify().isValid, "the other ledgers are untouched")

            // The same through the command line.
            let cli = AuthCLITests.executable
            _ = try await ops.createLedger(id: "carol")
            let remote = ["--server", "--port", "\(server.port)", "--credential", ops.configuration.credential]
            let erased = try await runProcess(cli, ["admin", "erase-ledger", "carol", "--reason", "asked by email"] + remote)
            #expect(erased.status == 0 && erased.output == "erased ledger carol\n", "\(erased.error)")
            let again = try await runProcess(cli, ["admin", "erase-ledger", "carol"] + remote)
            #expect(again.status != 0 && again.error.contains("no ledger 'carol'"), "\(again.error)")
            #expect(try await ops.ledgers() == ["alice"])
            for store in [ops, owner] { await store.close() }
        }
    }

    @Test("healthledger admin --server: the same commands through the server, bootstrapped on the data directory")
    func cli() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.executable
            let dataDir = ["--data-dir", server.directory.path]
            let issued = try await runProcess(cli, ["admin", "issue-operator-credential", "--label", "ops"] + dataDir)
            #expect(issued.status == 0, "\(issued.error)")
            let credential = issued.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let remote = ["--server", "--port", "\(server.port)", "--credential", credential]

            #expect(try await runProcess(cli, ["admin", "create-ledger", "carol"] + remote).output == "carol\n")
            #expect(try await runProcess(cli, ["admin", "ledgers"] + remote).output == "alice\ncarol\n")
            let owner = try await runProcess(cli, ["admin", "issue-owner-credential", "carol"] + remote)
            #expect(owner.status == 0 && owner.output.hasPrefix("hl1:carol:"))
            let listed = try await runProcess(cli, ["admin", "credentials", "carol"] + remote)
            #expect(listed.output.contains("\towner\tactive"))
            let id = credentialID(owner.output.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(try await runProcess(cli, ["admin", "revoke-credential", "carol", id] + remote).output == "revoked \(id)\n")
            #expect(try await runProcess(cli, ["admin", "credentials", "carol"] + dataDir).output.contains("\(id)\towner\trevoked"))
            #expect(try await runProcess(cli, ["admin", "operator-credentials"] + dataDir).output.contains("\(credentialID(credential))\toperator\tactive"))
            let wrong = try await runProcess(cli, ["admin", "ledgers", "--server", "--port", "\(server.port)", "--credential", server.ownerCredential])
            #expect(wrong.status != 0 && wrong.error.contains("unauthenticated"))
        }
    }
}
