import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

/// Credentials that expire and rotate, and the owner's own view of them, through the server,
/// the SDK and the CLI. Expiry is waited out, never raced: a test that opens a stream just
/// before its credential ends accepts either outcome a slow machine can give (refused at
/// the start, or ended when the time comes), and checks the reason each way.
@Suite("Credential lifetimes, rotation and the owner's listing", .timeLimit(.minutes(3)))
struct CredentialLifecycleTests {
    static let walk = TestServer.appSource

    /// Waits until `date` has passed on this machine's clock.
    static func wait(until date: Date) async throws {
        while Date() <= date { try await Task.sleep(for: .milliseconds(max(Int(date.timeIntervalSinceNow * 1000), 0) + 20)) }
    }

    /// Streams the app's heart-rate changes until the stream ends; the error it ends with.
    static func watchUntilEnd(_ store: HealthStore) async -> RPCError? {
        do {
            var watch = try await store.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)).makeAsyncIterator()
            while try await watch.next() != nil {}
            return nil
        } catch let error as RPCError {
            return error
        } catch {
            Issue.record("the stream ended with \(error)")
            return nil
        }
    }

    @Test("an expired credential is refused with UNAUTHENTICATED \"credential expired\"; its watch ends when it expires; a long-lived one works and lists its expiry")
    func expiry() async throws {
        try await withTestServer { server in
            let ops = server.client(try server.store.issueOperatorCredential(label: "ops"))
            let lasting = try await ops.issueCredential(ledger: "alice", for: .app(Self.walk), label: "tablet", lifetime: .expiring(after: .seconds(90 * 86_400)))
            let short = try await ops.issueCredential(ledger: "alice", for: .app(Self.walk), label: "kiosk", lifetime: .expiring(after: .seconds(2)))
            #expect(try await server.client(lasting).ping().principal == "app com.example.walk")

            let listed = try await ops.credentials(ledger: "alice")
            let lastingInfo = try #require(listed.first { $0.id == credentialID(lasting) })
            let expires = try #require(lastingInfo.expires)
            let lifetime = expires.timeIntervalSince(try #require(lastingInfo.issued))
            #expect(abs(lifetime - 90 * 86_400) < 0.001)
            #expect(lastingInfo.label == "tablet" && lastingInfo.refusal() == nil)
            let shortExpiry = try #require(listed.first { $0.id == credentialID(short) }?.expires)

            // The short one's watch of the app's own data ends when it expires (or, on a machine
            // too slow to open it in time, it is refused as expired at the start).
            let kiosk = server.client(short)
            let ended = await Self.watchUntilEnd(kiosk)
            #expect(ended?.code == .unauthenticated && ended?.message.contains("credential expired") == true, "\(String(describing: ended))")
            #expect(Date() >= shortExpiry)
            let refused = await expectRPCError(.unauthenticated, nil, "a call after expiry") { _ = try await kiosk.ping() }
            #expect(refused?.message.hasPrefix("credential expired at ") == true, "\(String(describing: refused))")
            #expect(refused?.healthErrorCode == nil)
            #expect(try await ops.credentials(ledger: "alice").first { $0.id == credentialID(short) }?.refusal() == .expired(at: shortExpiry))
            // A wrong secret for the same id learns nothing of the expiry.
            let guessed = String(short.dropLast(3)) + (short.hasSuffix("AAA") ? "BBB" : "AAA")
            let unknown = await expectRPCError(.unauthenticated, nil, "a wrong secret") { _ = try await server.client(guessed).ping() }
            #expect(unknown?.message == "the credential is invalid or unknown")
            // Bad lifetimes are refused with the reason.
            let tooLong = await expectRPCError(.invalidArgument, .invalidArgument, "ten years and a day") {
                _ = try await ops.issueCredential(ledger: "alice", for: .owner, lifetime: .expiring(after: .seconds(3651 * 86_400)))
            }
            #expect(tooLong?.message.contains("3650 days") == true)

            // Operator credentials expire the same way.
            let briefOperator = try server.store.issueOperatorCredential(label: "brief", lifetime: .expiring(after: .milliseconds(10)))
            let operatorExpiry = try #require(try server.store.operatorCredentials().first { $0.id == credentialID(briefOperator) }?.expires)
            try await Self.wait(until: operatorExpiry)
            let brief = server.client(briefOperator)
            let operatorRefused = await expectRPCError(.unauthenticated, nil, "an expired operator credential") { _ = try await brief.ledgers() }
            #expect(operatorRefused?.message.hasPrefix("credential expired at ") == true, "\(String(describing: operatorRefused))")
            for store in [ops, kiosk, brief] { await store.close() }
        }
    }

    @Test("rotation over RPC: the new credential works at once, the old one through its grace period, then it is refused as rotated and its watch ends")
    func rotation() async throws {
        try await withTestServer { server in
            let ops = server.client(try server.store.issueOperatorCredential())
            let first = try await ops.issueCredential(ledger: "alice", for: .app(Self.walk), label: "phone", lifetime: .expiring(after: .seconds(30 * 86_400)))
            let second = try await ops.rotateCredential(ledger: "alice", id: credentialID(first), grace: .seconds(3600))
            #expect(second.hasPrefix("hl1:alice:") && second != first)
            #expect(try await server.client(first).ping().principal == "app com.example.walk")
            #expect(try await server.client(second).ping().principal == "app com.example.walk")
            var listed = try await ops.credentials(ledger: "alice")
            let old = try #require(listed.first { $0.id == credentialID(first) })
            let new = try #require(listed.first { $0.id == credentialID(second) })
            #expect(old.replacedBy == credentialID(second) && old.refusal() == nil)
            let grace = try #require(old.revocation).timeIntervalSince(try #require(new.issued))
            #expect(abs(grace - 3600) < 0.001)
            let newLifetime = try #require(new.expires).timeIntervalSince(try #require(new.issued))
            #expect(new.label == "phone" && abs(newLifetime - 30 * 86_400) < 0.001)
            await expectRPCError(.invalidArgument, .invalidArgument, "rotating a credential already rotated") {
                _ = try await ops.rotateCredential(ledger: "alice", id: credentialID(first), grace: .zero)
            }
            await expectRPCError(.notFound, .noData, "rotating an unknown credential") {
                _ = try await ops.rotateCredential(ledger: "alice", id: "0123456789abcdef", grace: .zero)
            }

            // Rotated again with a grace period of 2 s: a watch with the old one ends when it does.
            let third = try await ops.rotateCredential(ledger: "alice", id: credentialID(second), grace: .seconds(2), lifetime: .unlimited)
            listed = try await ops.credentials(ledger: "alice")
            let graceEnd = try #require(listed.first { $0.id == credentialID(second) }?.revocation)
            #expect(listed.first { $0.id == credentialID(third) }?.expires == nil)
            let during = server.client(second)
            let ended = await Self.watchUntilEnd(during)
            #expect(Date() >= graceEnd)
            // Ended by the revocation (PERMISSION_DENIED, as any revocation ends a stream), or
            // refused at the start as rotated on a machine too slow to open it in time.
            #expect(
                ended?.code == .permissionDenied || (ended?.code == .unauthenticated && ended?.message.contains("rotated") == true),
                "\(String(describing: ended))")
            let refused = await expectRPCError(.unauthenticated, nil, "the old credential after its grace period") { _ = try await during.ping() }
            #expect(refused?.message.contains("rotated (replaced by \(credentialID(third)))") == true, "\(String(describing: refused))")
            #expect(try await server.client(third).ping().principal == "app com.example.walk")

            let trail = try await server.client().audit().reduce(into: [String]()) { $0 += $1.events.map(\.sentence) }
            #expect(trail.contains { $0.contains("replacing credential \(credentialID(first))") }, "\(trail)")
            for store in [ops, during] { await store.close() }
        }
    }

    @Test("the owner lists every credential of the ledger and revokes an app's; an app may do neither")
    func ownersView() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let listed = try await owner.credentials()
            #expect(Set(listed.map(\.id)) == [credentialID(server.ownerCredential), credentialID(server.appCredential)])
            #expect(listed.first { $0.id == credentialID(server.appCredential) }?.principal == .app(Self.walk))

            await expectRPCError(.permissionDenied, .authorizationDenied, "an app listing credentials") { _ = try await app.credentials() }
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app revoking the owner's credential") {
                try await app.revokeCredential(id: credentialID(server.ownerCredential))
            }
            await expectRPCError(.notFound, .noData, "an unknown id") { try await owner.revokeCredential(id: "0123456789abcdef") }
            // A revocation that takes effect later: the credential works until then, and a later
            // revocation brings the time forward, never back; a year at most.
            let later = try await server.ledger.issueCredential(for: .app(Self.walk), label: "later")
            try await owner.revokeCredential(id: credentialID(later), effectiveIn: .seconds(3600))
            let scheduled = try #require(try await owner.credentials().first { $0.id == credentialID(later) }?.revocation)
            #expect(abs(scheduled.timeIntervalSinceNow - 3600) < 600, "\(scheduled)")
            _ = try await server.client(later).ping()
            let laterStill = await expectRPCError(.invalidArgument, .invalidArgument, "a revocation later than the one recorded") {
                try await owner.revokeCredential(id: credentialID(later), effectiveIn: .seconds(7200))
            }
            #expect(laterStill?.message.contains("already to be refused from") == true, "\(laterStill?.message ?? "")")
            #expect(try await owner.credentials().first { $0.id == credentialID(later) }?.revocation == scheduled)
            let listing = try await runProcess(AuthCLITests.executable, ["auth", "credentials", "--port", "\(server.port)", "--credential", server.ownerCredential])
            let laterLine = "\(credentialID(later))\tapp com.example.walk\tactive until "
            #expect(listing.output.contains(laterLine) && listing.output.contains("(revocation recorded for "), "\(listing.output)")
            let sentences: [String] = try await owner.audit().reduce(into: [String]()) { $0 += $1.events.map(\.sentence) }
            let revokedLater = "credential \(credentialID(later))"
            #expect(sentences.contains { $0.contains(revokedLater) && $0.contains("revoked by the owner, refused from ") }, "\(sentences)")
            await expectRPCError(.invalidArgument, .invalidArgument, "more than a year") {
                try await owner.revokeCredential(id: credentialID(later), effectiveIn: .seconds(366 * 86_400))
            }
            try await owner.revokeCredential(id: credentialID(later))
            await expectRPCError(.unauthenticated, nil, "revoked at once") { _ = try await server.client(later).ping() }
            // No credential has an empty id or one longer than a key: not found, not a storage failure to retry.
            await expectRPCError(.notFound, .noData, "an empty id") { try await owner.revokeCredential(id: "") }
            await expectRPCError(.notFound, .noData, "a 600-byte id") { try await owner.revokeCredential(id: String(repeating: "a", count: 600)) }

            try await owner.save(Samples.heartRate(70, at: 0))
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)).makeAsyncIterator()
            _ = try await watch.next()
            try await owner.revokeCredential(id: credentialID(server.appCredential))
            await expectRPCError(.permissionDenied, .authorizationDenied, "the revoked app's watch") { while try await watch.next() != nil {} }
            let refused = await expectRPCError(.unauthenticated, nil, "the revoked app's next call") { _ = try await app.ping() }
            #expect(refused?.message.hasPrefix("credential revoked at ") == true, "\(String(describing: refused))")
            await expectRPCError(.invalidArgument, .invalidArgument, "revoking it twice") {
                try await owner.revokeCredential(id: credentialID(server.appCredential))
            }
            #expect(try await owner.credentials().first { $0.id == credentialID(server.appCredential) }?.refusal() != nil)
            let trail = try await owner.audit().reduce(into: [String]()) { $0 += $1.events.map(\.sentence) }
            #expect(trail.contains("credential \(credentialID(server.appCredential)) of app com.example.walk (Walk) was revoked by the owner"), "\(trail)")
            for store in [owner, app] { await store.close() }
        }
    }

    @Test("the CLI: --expires-in and rotate-credential (on the data directory and through the server), auth credentials and revoke-credential, bad durations refused")
    func cli() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.executable
            let dataDir = ["--data-dir", server.directory.path]
            let issued = try await runProcess(
                cli, ["admin", "issue-app-credential", "alice", "--bundle-id", "com.example.walk", "--name", "Walk", "--expires-in", "90d", "--label", "watch"]
                    + dataDir)
            #expect(issued.status == 0, "\(issued.error)")
            let credential = issued.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let id = credentialID(credential)
            let listed = try await runProcess(cli, ["admin", "credentials", "alice"] + dataDir)
            #expect(listed.output.contains("\(id)\tapp com.example.walk\tactive until ") && listed.output.contains("\twatch\n"), "\(listed.output)")

            let rotated = try await runProcess(cli, ["admin", "rotate-credential", "alice", id, "--grace", "0"] + dataDir)
            #expect(rotated.status == 0 && rotated.output.hasPrefix("hl1:alice:"), "\(rotated.error)")
            let replacement = rotated.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let refused = await expectRPCError(.unauthenticated, nil, "the rotated credential") { _ = try await server.client(credential).ping() }
            #expect(refused?.message.contains("rotated") == true)
            #expect(try await server.client(replacement).ping().principal == "app com.example.walk")

            // Through the server with an operator credential.
            let operatorCredential = try server.store.issueOperatorCredential()
            let remote = ["--server", "--port", "\(server.port)", "--credential", operatorCredential]
            let again = try await runProcess(cli, ["admin", "rotate-credential", "alice", credentialID(replacement), "--grace", "2h", "--expires-in", "12h"] + remote)
            #expect(again.status == 0 && again.output.hasPrefix("hl1:alice:"), "\(again.error)")
            #expect(again.error.contains("works for 2h more"))
            let opsIssued = try await runProcess(cli, ["admin", "issue-operator-credential", "--expires-in", "1h"] + dataDir)
            #expect(opsIssued.status == 0, "\(opsIssued.error)")
            let operators = try await runProcess(cli, ["admin", "operator-credentials"] + dataDir)
            #expect(operators.output.contains("\(credentialID(opsIssued.output.trimmingCharacters(in: .whitespacesAndNewlines)))\toperator\tactive until "))

            // A revocation that takes effect later, through the server and as the owner.
            let kiosk = try await server.ledger.issueCredential(for: .app(Self.walk), label: "kiosk")
            let scheduled = try await runProcess(cli, ["admin", "revoke-credential", "alice", credentialID(kiosk), "--after", "2h"] + remote)
            #expect(scheduled.status == 0 && scheduled.output.hasPrefix("revoked \(credentialID(kiosk)), from "), "\(scheduled.error)")
            #expect(try await server.client(kiosk).ping().principal == "app com.example.walk")
            let ownerTooLong = try await runProcess(
                cli, ["auth", "revoke-credential", credentialID(kiosk), "--after", "400d", "--port", "\(server.port)", "--credential", server.ownerCredential])
            #expect(ownerTooLong.status != 0 && ownerTooLong.error.contains("0 s to 365 days"), "\(ownerTooLong.error)")
            let ownerNow = try await runProcess(cli, ["auth", "revoke-credential", credentialID(kiosk), "--port", "\(server.port)", "--credential", server.ownerCredential])
            #expect(ownerNow.status == 0 && ownerNow.output == "revoked \(credentialID(kiosk))\n", "\(ownerNow.error)")
            await expectRPCError(.unauthenticated, nil, "revoked at once after all") { _ = try await server.client(kiosk).ping() }

            // The owner's view.
            let owner = ["--port", "\(server.port)", "--credential", server.ownerCredential]
            let ownersList = try await runProcess(cli, ["auth", "credentials"] + owner)
            #expect(ownersList.status == 0, "\(ownersList.error)")
            #expect(ownersList.output.contains("\(id)\tapp com.example.walk\trotated "), "\(ownersList.output)")
            #expect(ownersList.output.contains("\(credentialID(replacement))\tapp com.example.walk\tactive until "), "\(ownersList.output)")
            let json = try await runProcess(cli, ["auth", "credentials", "--json"] + owner)
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]])
            #expect(rows.count == 6 && rows.contains { $0["id"] as? String == id && $0["replacedBy"] as? String == credentialID(replacement) })
            let revoke = try await runProcess(cli, ["auth", "revoke-credential", credentialID(server.appCredential)] + owner)
            #expect(revoke.status == 0 && revoke.output == "revoked \(credentialID(server.appCredential))\n", "\(revoke.error)")
            let asApp = try await runProcess(cli, ["auth", "credentials", "--port", "\(server.port)", "--credential", replacement])
            #expect(asApp.status != 0 && asApp.error.contains("only the owner"), "\(asApp.error)")

            // Bad input: a clear error, nothing issued.
            let before = try server.ledger.credentials().count
            for (arguments, message) in [
                (["admin", "issue-owner-credential", "alice", "--expires-in", "5x"], "is not a duration"),
                (["admin", "issue-owner-credential", "alice", "--expires-in", "0d"], "longer than 0 s"),
                (["admin", "issue-owner-credential", "alice", "--expires-in", "3651d"], "at most 3650d"),
                (["admin", "issue-owner-credential", "alice", "--expires-in", "99999999999d"], "longer than 100,000 days"),
                (["admin", "issue-owner-credential", "alice", "--expires-in=-5d"], "is not a duration"),
                (["admin", "rotate-credential", "alice", credentialID(replacement), "--grace", "400d"], "at most 365d"),
                (["admin", "rotate-credential", "alice", "0123456789abcdef"], "no credential"),
            ] {
                let run = try await runProcess(cli, arguments + dataDir)
                #expect(run.status != 0 && run.error.contains(message), "\(arguments): \(run.error)")
            }
            #expect(try server.ledger.credentials().count == before)
        }
    }
}
