import Foundation
import HealthModel
import Ledger
import Testing

@Suite("Credentials")
struct CredentialTests {
    @Test("issued credentials authenticate their principal until revoked")
    func lifecycle() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let ledger = try store.createLedger(id: "cred")
        let owner = try await ledger.issueCredential(for: .owner)
        let app = try await ledger.issueCredential(for: .app(Fixtures.appA), label: "phone")

        #expect(store.authenticate(owner)?.1 == .owner)
        #expect(store.authenticate(app)?.1 == .app(Fixtures.appA))
        #expect(store.authenticate(app)?.0.id == "cred")

        // Only the hash is stored: the secret appears nowhere in the log.
        let secret = String(app.split(separator: ":").last!)
        for event in try ledger.events(from: 1, limit: 100) {
            #expect(!String(decoding: event.body, as: UTF8.self).contains(secret))
        }

        var wrong = app
        wrong.removeLast()
        wrong.append(app.last == "A" ? "B" : "A")
        #expect(store.authenticate(wrong) == nil)
        #expect(store.authenticate("hl1:cred:0000000000000000:nope") == nil)
        #expect(store.authenticate("hl1:nobody:\(app.split(separator: ":")[2]):\(secret)") == nil)
        #expect(store.authenticate("garbage") == nil)
        #expect(store.authenticate("") == nil)

        let id = String(app.split(separator: ":")[2])
        try await ledger.revokeCredential(id: id)
        #expect(store.authenticate(app) == nil)
        #expect(store.authenticate(owner)?.1 == .owner)
        let listed = try ledger.credentials()
        #expect(listed.count == 2)
        #expect(listed.first { $0.id == id }?.revoked == true)
        await #expect(throws: HealthError.self) { try await ledger.revokeCredential(id: id) }
        await #expect(throws: HealthError.self) { try await ledger.revokeCredential(id: "ffffffffffffffff") }
        await #expect(throws: HealthError.self) { try await ledger.issueCredential(for: .operator) }

        let kinds = try ledger.events(from: 1, limit: 100).map(\.kind)
        #expect(kinds == [.ledgerCreated, .credentialIssued, .credentialIssued, .credentialRevoked])
        #expect(try ledger.replay().identical)
        #expect(try ledger.verify().isValid)
    }
}
