import Foundation
import HealthLedgerSDK
import Ledger
import Testing

@Suite("Ledger isolation and wrong credentials", .timeLimit(.minutes(3)))
struct IsolationTests {
    /// A second ledger "bob" with an owner and an app of the same bundle id as alice's app,
    /// which bob let read heart rate.
    static func withBob(_ server: TestServer) async throws -> (bob: Ledger, owner: String, app: String) {
        let bob = try server.store.createLedger(id: "bob")
        let owner = try await bob.issueCredential(for: .owner)
        let (_, app) = try await server.addApp(TestServer.appSource.bundleIdentifier, name: "Walk", in: bob)
        try await bob.requestAuthorization(toShare: [], read: [Types.heartRate], by: .app(TestServer.appSource))
        try await bob.decideAuthorization(app: TestServer.appSource.bundleIdentifier, type: Types.heartRate, direction: .read, decision: .granted, by: .owner)
        return (bob, owner, app)
    }

    /// Credential strings that must never authenticate.
    static func forgeries(_ server: TestServer, bobOwner: String, bobApp: String) -> [(String, String)] {
        let aliceOwner = server.ownerCredential
        let aliceApp = server.appCredential
        let (ownerID, ownerSecret) = (credentialID(aliceOwner), credentialSecret(aliceOwner))
        let (bobID, bobSecret) = (credentialID(bobOwner), credentialSecret(bobOwner))
        var flipped = Array(ownerSecret)
        flipped[flipped.count / 2] = flipped[flipped.count / 2] == "A" ? "B" : "A"
        // An id of digits only is its own upper case (about one in 2,000): then a letter stands in.
        let upperID = ownerID.uppercased() != ownerID ? ownerID.uppercased() : "A" + ownerID.dropFirst()
        return [
            ("alice's owner for bob", "hl1:bob:\(ownerID):\(ownerSecret)"),
            ("alice's app for bob", "hl1:bob:\(credentialID(aliceApp)):\(credentialSecret(aliceApp))"),
            ("bob's owner for alice", "hl1:alice:\(bobID):\(bobSecret)"),
            ("bob's app for alice", "hl1:alice:\(credentialID(bobApp)):\(credentialSecret(bobApp))"),
            ("alice's id, bob's secret", "hl1:alice:\(ownerID):\(bobSecret)"),
            ("bob's id, alice's secret", "hl1:bob:\(bobID):\(ownerSecret)"),
            ("one character of the secret changed", "hl1:alice:\(ownerID):\(String(flipped))"),
            ("secret cut short", "hl1:alice:\(ownerID):\(ownerSecret.dropLast())"),
            ("secret with a character more", "hl1:alice:\(ownerID):\(ownerSecret)x"),
            ("secret of the app for the owner's id", "hl1:alice:\(ownerID):\(credentialSecret(aliceApp))"),
            ("an unknown id", "hl1:alice:0123456789abcdef:\(ownerSecret)"),
            ("the id in upper case", "hl1:alice:\(upperID):\(ownerSecret)"),
            ("a ledger that does not exist", "hl1:carol:\(ownerID):\(ownerSecret)"),
            ("the ledger in upper case", "hl1:ALICE:\(ownerID):\(ownerSecret)"),
            ("a path for a ledger", "hl1:./alice:\(ownerID):\(ownerSecret)"),
            ("another version", "hl2:alice:\(ownerID):\(ownerSecret)"),
            ("no secret", "hl1:alice:\(ownerID):"),
            ("empty", ""),
            ("garbage", "not a credential"),
        ]
    }

    @Test("credentials name their ledger: every forgery is unauthenticated, every method")
    func forgeriesAreRefused() async throws {
        try await withTestServer { server in
            let (_, bobOwner, bobApp) = try await Self.withBob(server)
            let owner = server.client()
            let saved = Samples.heartRate(70, at: 0)
            try await owner.save(saved)
            for (what, credential) in Self.forgeries(server, bobOwner: bobOwner, bobApp: bobApp) {
                let store = server.client(credential)
                await expectRPCError(.unauthenticated, .some(nil), "\(what): ping") { _ = try await store.ping() }
                await expectRPCError(.unauthenticated, .some(nil), "\(what): fetch") { _ = try await store.object(with: saved.uuid) }
                await expectRPCError(.unauthenticated, .some(nil), "\(what): query") { _ = try await store.result(for: SampleQueryDescriptor(type: Types.heartRate)) }
                await expectRPCError(.unauthenticated, .some(nil), "\(what): save") { try await store.save(Samples.heartRate(1, at: 1)) }
                await expectRPCError(.unauthenticated, .some(nil), "\(what): delete") { _ = try await store.delete([saved.uuid]) }
                await expectRPCError(.unauthenticated, .some(nil), "\(what): history") { _ = try await store.authorizationHistory() }
                await store.close()
            }
            #expect(try await owner.result(for: SampleQueryDescriptor(type: Types.heartRate)).map(\.uuid) == [saved.uuid], "nothing saved or deleted")
            // The genuine credentials still work, each in its own ledger.
            let bobStore = server.client(bobOwner)
            #expect(try await bobStore.ping().ledgerID == "bob")
            #expect(try await owner.ping().ledgerID == "alice")
            await bobStore.close()
            await owner.close()
        }
    }

    @Test("one ledger's credentials never read another's data")
    func crossLedgerReads() async throws {
        try await withTestServer { server in
            let (bob, bobOwnerCredential, bobAppCredential) = try await Self.withBob(server)
            let aliceOwner = server.client()
            let aliceApp = server.client(server.appCredential)
            let bobOwner = server.client(bobOwnerCredential)
            let bobApp = server.client(bobAppCredential)
            let aliceOwners = (0..<5).map { Samples.heartRate(70, at: Double($0)) }
            let aliceApps = (0..<3).map { Samples.heartRate(80, at: Double(10 + $0)) }
            let bobs = (0..<4).map { Samples.heartRate(90, at: Double($0)) }
            try await aliceOwner.save(aliceOwners)
            try await aliceApp.save(aliceApps)
            try await bobOwner.save(bobs)
            let bobsOwnApp = Samples.heartRate(91, at: 20)
            try await bobApp.save(bobsOwnApp)

            // Bob's app (same bundle id, and a read grant in bob) sees bob's data only.
            #expect(try await bobApp.ping().ledgerID == "bob")
            #expect(try await bobApp.result(for: SampleQueryDescriptor(type: Types.heartRate)).map(\.uuid) == bobs.map(\.uuid) + [bobsOwnApp.uuid])
            for object in aliceOwners + aliceApps {
                #expect(try await bobApp.object(with: object.uuid) == nil)
                #expect(try await bobOwner.object(with: object.uuid) == nil)
                let error = await expectRPCError(.notFound, .noData, "bob deletes alice's") { _ = try await bobOwner.delete([object.uuid]) }
                #expect(messageShape(error, naming: object.uuid) == "no object with UUID <uuid>")
            }
            // Alice's app (no read grant in alice) sees its own only, nothing of bob's, not even its namesake's.
            #expect(try await aliceApp.result(for: SampleQueryDescriptor(type: Types.heartRate)).map(\.uuid) == aliceApps.map(\.uuid))
            for object in bobs + [bobsOwnApp] { #expect(try await aliceApp.object(with: object.uuid) == nil) }
            // Alice's owner sees all of alice and nothing of bob; decisions in one ledger do not touch the other.
            #expect(try await aliceOwner.result(for: SampleQueryDescriptor(type: Types.heartRate)).count == 8)
            #expect(try await aliceOwner.object(with: bobsOwnApp.uuid) == nil)
            #expect(try await aliceOwner.authorizations(app: TestServer.appSource.bundleIdentifier).contains { $0.direction == .read } == false)
            #expect(try await bobOwner.authorizations(app: TestServer.appSource.bundleIdentifier).contains { $0.direction == .read && $0.decision == .granted })
            // Deletes by type stay in their ledger.
            #expect(try await bobApp.deleteObjects(of: Types.heartRate) == 1)
            #expect(try await aliceApp.result(for: SampleQueryDescriptor(type: Types.heartRate)).count == 3)
            #expect(try server.ledger.count(of: Types.heartRate) == 8 && bob.count(of: Types.heartRate) == 4)
            for store in [aliceOwner, aliceApp, bobOwner, bobApp] { await store.close() }
        }
    }

    @Test("2,000 wrong-credential calls from concurrent clients while a legitimate client works")
    func bruteForce() async throws {
        try await withTestServer { server in
            let (_, bobOwner, bobApp) = try await Self.withBob(server)
            let target = Samples.heartRate(70, at: -60)
            let setup = server.client()
            try await setup.save(target)
            await setup.close()
            let forgeries = Self.forgeries(server, bobOwner: bobOwner, bobApp: bobApp).map(\.1)
            let port = server.port
            let ownerSecret = credentialSecret(server.ownerCredential)
            let ownerID = credentialID(server.ownerCredential)
            let clients = 8
            let perClient = 250

            let legitimate = Task { () -> (saves: Int, queries: Int) in
                let store = server.client(server.appCredential)
                var (saves, queries) = (0, 0)
                for index in 0..<200 {
                    try await store.save(Samples.heartRate(Double(60 + index % 40), at: Double(index)))
                    saves += 1
                    let seen = try await store.result(for: SampleQueryDescriptor(type: Types.heartRate))
                    if seen.count == index + 1 { queries += 1 }
                }
                await store.close()
                return (saves, queries)
            }
            let attackers = try await withThrowingTaskGroup(of: [String].self) { group in
                for client in 0..<clients {
                    group.addTask {
                        var failures: [String] = []
                        var stores: [String: HealthStore] = [:]
                        for attempt in 0..<perClient {
                            // Known forgeries, and random secrets for alice's owner id.
                            let credential = attempt % 2 == 0
                                ? forgeries[(client * perClient + attempt) % forgeries.count]
                                : "hl1:alice:\(ownerID):\(String(ownerSecret.shuffled()))"
                            let store = stores[credential] ?? HealthStore(configuration: .init(port: port, credential: credential, connectAttempts: 1))
                            stores[credential] = store
                            do {
                                switch attempt % 4 {
                                case 0: _ = try await store.ping()
                                case 1: _ = try await store.object(with: target.uuid)
                                case 2: _ = try await store.result(for: SampleQueryDescriptor(type: Types.heartRate, limit: 1))
                                default: _ = try await store.delete([target.uuid])
                                }
                                failures.append("\(credential): the call succeeded")
                            } catch let error as RPCError where error.code == .unauthenticated {
                            } catch {
                                failures.append("\(credential): \(error)")
                            }
                            if stores.count > 8 { for store in stores.values { await store.close() }; stores = [:] }
                        }
                        for store in stores.values { await store.close() }
                        return failures
                    }
                }
                var all: [String] = []
                for try await failures in group { all += failures }
                return all
            }
            #expect(attackers.isEmpty, "\(attackers.count) wrong-credential calls did not fail unauthenticated: \(attackers.prefix(5))")
            let outcome = try await legitimate.value
            #expect(outcome.saves == 200 && outcome.queries == 200)
            let owner = server.client()
            #expect(try await owner.result(for: SampleQueryDescriptor(type: Types.heartRate)).count == 201)
            #expect(try await owner.object(with: target.uuid) == target)
            await owner.close()
        }
    }
}
