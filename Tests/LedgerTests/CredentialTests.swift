import Crypto
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

    @Test("a credential reads hl1:<ledger>:<16 hex digits>:<43 base64url characters>; the log keeps only the SHA-256 of the secret's characters; an app's bundle identifier has 1–255 bytes and its name at most 255")
    func format() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let ledger = try store.createLedger(id: "format")
        let credential = try await ledger.issueCredential(for: .owner)
        #expect(credential.wholeMatch(of: /hl1:format:[0-9a-f]{16}:[A-Za-z0-9_-]{43}/) != nil, "\(credential)")
        let secret = String(credential.split(separator: ":")[3])
        let hashes = try ledger.events(from: 1, limit: 10).compactMap { event -> [UInt8]? in
            guard case .credentialIssued(_, _, _, let hash) = try event.decodedBody() else { return nil }
            return hash
        }
        #expect(hashes == [Array(SHA256.hash(data: Array(secret.utf8)))])

        let refused = [
            Source(bundleIdentifier: "", name: "Empty"), Source(bundleIdentifier: String(repeating: "a", count: 256), name: "Long"),
            Source(bundleIdentifier: "com.example.long-name", name: String(repeating: "n", count: 256)),
        ]
        for source in refused {
            await #expect(throws: HealthError.self, "\(source.bundleIdentifier.count) \(source.name.count)") { try await ledger.issueCredential(for: .app(source)) }
        }
        let longest = Source(bundleIdentifier: String(repeating: "a", count: 255), name: String(repeating: "n", count: 255))
        #expect(store.authenticate(try await ledger.issueCredential(for: .app(longest)))?.1 == .app(longest))
    }
}
