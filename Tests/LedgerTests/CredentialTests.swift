import Crypto
import Foundation
import HealthModel
@testable import Ledger
import LMDB
import LedgerSchema
import SwiftProtobuf
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
        #expect(listed.first { $0.id == id }?.refusal().map { if case .revoked = $0 { true } else { false } } == true)
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
            guard case .credentialIssued(let issue) = try event.decodedBody() else { return nil }
            return issue.secretHash
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

    @Test("a credential issued with a lifetime authenticates until it expires, then is refused as expired; the log and the listing keep its times")
    func expiry() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let ledger = try store.createLedger(id: "expiry")
        let before = Date()
        let lasting = try await ledger.issueCredential(for: .app(Fixtures.appA), label: "phone", lifetime: .expiring(after: .seconds(90 * 86_400)))
        let after = Date()
        let info = try #require(try ledger.credential(id: credentialID(lasting)))
        let issued = try #require(info.issued)
        let expires = try #require(info.expires)
        #expect(issued >= before.addingTimeInterval(-0.001) && issued <= after.addingTimeInterval(0.001))
        #expect(abs(expires.timeIntervalSince(issued) - 90 * 86_400) < 0.001)
        #expect(info.label == "phone" && info.revocation == nil && info.refusal() == nil && info.end == expires)
        #expect(info.refusal(at: expires.addingTimeInterval(-1)) == nil)
        #expect(info.refusal(at: expires) == .expired(at: expires))
        #expect(store.authenticate(lasting)?.1 == .app(Fixtures.appA))

        // A short lifetime, waited out: refused with the reason, to the holder of the secret only.
        let short = try await ledger.issueCredential(for: .owner, lifetime: .expiring(after: .milliseconds(20)))
        let shortExpiry = try #require(try ledger.credential(id: credentialID(short))?.expires)
        while Date() <= shortExpiry { try await Task.sleep(for: .milliseconds(10)) }
        #expect(throws: CredentialRefusal.expired(at: shortExpiry)) { try store.authentication(of: short) }
        #expect(store.authenticate(short) == nil)
        var wrongSecret = short
        wrongSecret.removeLast()
        wrongSecret.append(short.last == "A" ? "B" : "A")
        #expect(throws: CredentialRefusal.unknown) { try store.authentication(of: wrongSecret) }

        for refused in [CredentialLifetime.expiring(after: .zero), .expiring(after: .seconds(-5)), .expiring(after: .seconds(3651 * 86_400))] {
            await #expect(throws: HealthError.self) { try await ledger.issueCredential(for: .owner, lifetime: refused) }
        }
        guard case .credentialIssued(let issue) = try #require(try ledger.events(from: 1, limit: 10).last(where: { $0.kind == .credentialIssued })).decodedBody()
        else { throw CredentialTestFailure.noIssue }
        #expect(issue.expiresUs == Int64((shortExpiry.timeIntervalSince1970 * 1e6).rounded()) && issue.issuedUs > 0 && issue.replaces.isEmpty)
        #expect(try ledger.replay().identical)
        #expect(try ledger.verify().isValid)
    }

    @Test("rotation issues a new credential for the same principal and label; the old one works through its grace period, then is refused as rotated")
    func rotation() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let ledger = try store.createLedger(id: "rotation")
        let old = try await ledger.issueCredential(for: .app(Fixtures.appA), label: "watch", lifetime: .expiring(after: .seconds(30 * 86_400)))
        let oldID = credentialID(old)
        let rotated = try await ledger.rotateCredential(id: oldID, grace: .seconds(3600))
        let newID = credentialID(rotated)
        #expect(store.authenticate(rotated)?.1 == .app(Fixtures.appA))
        #expect(store.authenticate(old)?.1 == .app(Fixtures.appA), "the old credential works during its grace period")
        let oldInfo = try #require(try ledger.credential(id: oldID))
        let newInfo = try #require(try ledger.credential(id: newID))
        #expect(newInfo.label == "watch" && newInfo.principal == .app(Fixtures.appA))
        // The new one lives as long as the old one did, from its own issue.
        let lifetime = try #require(newInfo.expires).timeIntervalSince(try #require(newInfo.issued))
        #expect(abs(lifetime - 30 * 86_400) < 0.001)
        let graceEnd = try #require(oldInfo.revocation)
        #expect(abs(graceEnd.timeIntervalSince(try #require(newInfo.issued)) - 3600) < 0.001)
        #expect(oldInfo.replacedBy == newID && oldInfo.end == graceEnd)
        #expect(oldInfo.refusal(at: graceEnd) == .revoked(at: graceEnd, replacedBy: newID))
        // Rotating it again, or rotating an unknown one, is refused; revoking it ends the grace at once.
        await #expect(throws: HealthError.self) { try await ledger.rotateCredential(id: oldID, grace: .zero) }
        await #expect(throws: HealthError.self) { try await ledger.rotateCredential(id: "ffffffffffffffff", grace: .zero) }
        await #expect(throws: HealthError.self) { try await ledger.rotateCredential(id: newID, grace: .seconds(366 * 86_400)) }
        try await ledger.revokeCredential(id: oldID, by: .owner)
        #expect(throws: CredentialRefusal.self) { try store.authentication(of: old) }
        #expect(try ledger.credential(id: oldID)?.replacedBy == newID)

        // With no grace and a lifetime of its own, the old one stops at once.
        let third = try await ledger.rotateCredential(id: newID, grace: .zero, lifetime: .unlimited)
        #expect(try ledger.credential(id: credentialID(third))?.expires == nil)
        do {
            _ = try store.authentication(of: rotated)
            Issue.record("a credential rotated with no grace period still authenticates")
        } catch let refusal as CredentialRefusal {
            guard case .revoked(_, let replacedBy) = refusal else { throw refusal }
            #expect(replacedBy == credentialID(third))
            #expect(refusal.description.contains("rotated") && refusal.description.contains(credentialID(third)))
        }
        #expect(store.authenticate(third)?.1 == .app(Fixtures.appA))

        let trail = try ledger.audit(AuditFilter(), limit: 100, as: .owner).events.map(\.sentence)
        #expect(trail.contains { $0.contains("replacing credential \(oldID)") }, "\(trail)")
        #expect(trail.contains { $0.contains("credential \(oldID) of app com.example.a (App A) was rotated by the operator: replaced by \(newID)") }, "\(trail)")
        #expect(try ledger.replay().identical)
        #expect(try ledger.verify().isValid)
    }

    @Test("credentials from before lifetimes (issue and revocation events without times, projection layout 13) work after the upgrade: the issued one authenticates, the revoked one is refused")
    func legacyEvents() async throws {
        let temporary = try TemporaryStore()
        // In a function of its own, so that nothing holds the ledger open when the store closes.
        func writeLegacy() async throws -> (kept: String, revoked: String) {
            let ledger = try temporary.ledgerStore.createLedger(id: "legacy")
            // Events as the previous release wrote them: no issue, expiry or effective time.
            func legacyIssue(_ principal: Principal) async throws -> String {
                let credential = CredentialString.random(ledgerID: "legacy")
                var body = Healthledger_V1_CredentialIssued()
                body.credentialID = credential.id
                body.secretSha256 = Data(SHA256.hash(data: Array(credential.secret.utf8)))
                body.principal = principal.schema
                let bytes: [UInt8] = try body.serializedBytes()
                try await ledger.committer.submit { context in
                    try context.append(
                        kind: .credentialIssued, actor: .operator, objectType: nil, objectUUID: nil, body: bytes,
                        change: try Projector.change(kind: .credentialIssued, actor: .operator, body: bytes))
                }
                return credential.text
            }
            let kept = try await legacyIssue(.owner)
            let revoked = try await legacyIssue(.app(Fixtures.appA))
            let revocation: [UInt8] = try Healthledger_V1_CredentialRevoked.with { $0.credentialID = credentialID(revoked) }.serializedBytes()
            try await ledger.committer.submit { context in
                try context.append(
                    kind: .credentialRevoked, actor: .operator, objectType: nil, objectUUID: nil, body: revocation,
                    change: try Projector.change(kind: .credentialRevoked, actor: .operator, body: revocation))
            }
            try ledger.environment.write { txn in try txn.put([0, 0, 0, 13], forKey: ProjectionLayout.key, in: ledger.databases.meta) }
            return (kept, revoked)
        }
        let (kept, revoked) = try await writeLegacy()
        temporary.close()

        let store = try temporary.reopen()
        let reopened = try store.ledger("legacy")
        #expect(try reopened.read { try ProjectionLayout.recorded(in: $0) } == ProjectionLayout.current)
        #expect(store.authenticate(kept)?.1 == .owner)
        #expect(throws: CredentialRefusal.revoked(at: nil, replacedBy: "")) { try store.authentication(of: revoked) }
        let listed = try reopened.credentials()
        #expect(listed.first { $0.id == credentialID(kept) } == CredentialInfo(id: credentialID(kept), principal: .owner))
        #expect(listed.first { $0.id == credentialID(revoked) }?.revocation == .distantPast)
        // An old credential can be rotated: the new one has no expiry, as the old one had none.
        let rotated = try await reopened.rotateCredential(id: credentialID(kept), grace: .zero)
        #expect(try reopened.credential(id: credentialID(rotated))?.expires == nil)
        #expect(store.authenticate(rotated)?.1 == .owner)
        #expect(try reopened.replay().identical)
        #expect(try reopened.verify().isValid)
    }

    private func credentialID(_ credential: String) -> String { String(credential.split(separator: ":")[2]) }

    private enum CredentialTestFailure: Error { case noIssue }
}
