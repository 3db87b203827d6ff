import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

@Suite("Revocation ends live streams", .timeLimit(.minutes(3)))
struct RevocationTests {
    static let app = TestServer.appSource.bundleIdentifier
    static let total = 3000

    /// Runs `body` on a server whose owner saved `total` heart-rate samples and whose app
    /// saved 5 (`own`), with the app granted read of heart rate; the server is stopped after
    /// it, as ``withTestServer(configuration:isolation:_:)`` does.
    static func withSeeded<T>(
        _ body: (_ server: TestServer, _ owner: HealthStore, _ app: HealthStore, _ own: [HealthObject]) async throws -> T
    ) async throws -> T {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await owner.save((0..<total).map { Samples.heartRate(Double(50 + $0 % 100), at: Double($0)) })
            let own = (0..<5).map { Samples.heartRate(99, at: Double(total + $0)) }
            try await app.save(own)
            _ = try await app.requestAuthorization(toShare: [], read: [Types.heartRate, Types.bodyMass])
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .granted)
            try await owner.decideAuthorization(app: Self.app, type: Types.bodyMass, direction: .read, decision: .granted)
            return try await body(server, owner, app, own)
        }
    }

    @Test("revoking a read grant ends the app's stream with permissionDenied; the next query reads only its own")
    func readRevocation() async throws {
        try await Self.withSeeded { server, owner, app, own in
            let query = SampleQueryDescriptor(type: Types.heartRate, batchSize: 10)
            var iterator = try await app.results(for: query).makeAsyncIterator()
            var received = try #require(try await iterator.next()).count
            #expect(received == 10)
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .revoked)
            let error = await expectRPCError(.permissionDenied, .authorizationDenied, "revoked mid-stream") {
                while let batch = try await iterator.next() { received += batch.count }
            }
            #expect(error?.message.contains(Types.heartRate.identifier) == true)
            #expect(received < Self.total, "the stream ended early (got \(received))")
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate)).map(\.uuid) == own.map(\.uuid))
            // The connection is still usable, and the app may still save.
            try await app.save(Samples.heartRate(100, at: -1))
            await owner.close()
            await app.close()
        }
    }

    @Test("revoking a read grant ends the app's watched anchored query and its observer")
    func longRunningRevocation() async throws {
        try await Self.withSeeded { server, owner, app, own in
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, batchSize: 5000)).makeAsyncIterator()
            let initial = try await initialChanges(&watch)
            #expect(initial.addedObjects.count == Self.total + own.count)
            var observer = try await app.observe(Types.heartRate).makeAsyncIterator()
            // A watch of another type the app may read is not affected.
            var weights = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.bodyMass)).makeAsyncIterator()
            #expect(try #require(try await weights.next()).caughtUp)

            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .revoked)
            await expectRPCError(.permissionDenied, .authorizationDenied, "watched query") { while try await watch.next() != nil {} }
            await expectRPCError(.permissionDenied, .authorizationDenied, "observer") { while try await observer.next() != nil {} }

            // Watching again reads only the app's own, and lives on.
            var ownWatch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)).makeAsyncIterator()
            #expect(try #require(try await ownWatch.next()).addedObjects.map(\.uuid) == own.map(\.uuid))
            let weight = HealthObject.quantitySample(QuantitySample(
                type: try QuantityType(Types.bodyMass.identifier), quantity: try Quantity(70, "kg"), start: Samples.base, end: Samples.base))
            try await owner.save(weight)
            #expect(try #require(try await weights.next()).addedObjects == [weight])
            let mine = Samples.heartRate(98, at: -10)
            try await app.save(mine)
            #expect(try #require(try await ownWatch.next()).addedObjects.map(\.uuid) == [mine.uuid])
            await owner.close()
            await app.close()
        }
    }

    @Test("unrelated decisions do not end streams")
    func unrelatedDecisions() async throws {
        try await Self.withSeeded { server, owner, app, own in
            let (run, runCredential) = try await server.addApp("com.example.run", name: "Run")
            let runner = server.client(runCredential)
            _ = try await runner.requestAuthorization(toShare: [], read: [Types.heartRate])
            try await owner.decideAuthorization(app: run.bundleIdentifier, type: Types.heartRate, direction: .read, decision: .granted)

            // A granted stream survives decisions on another type, another app, and a new grant.
            var iterator = try await app.results(for: SampleQueryDescriptor(type: Types.heartRate, batchSize: 10)).makeAsyncIterator()
            var received = try #require(try await iterator.next()).count
            try await owner.decideAuthorization(app: Self.app, type: Types.bodyMass, direction: .read, decision: .revoked)
            try await owner.decideAuthorization(app: run.bundleIdentifier, type: Types.heartRate, direction: .read, decision: .revoked)
            _ = try await app.requestAuthorization(toShare: [Types.stepCount], read: [Types.stepCount])
            try await owner.decideAuthorization(app: Self.app, type: Types.stepCount, direction: .read, decision: .granted)
            try await owner.decideAuthorization(app: Self.app, type: Types.stepCount, direction: .share, decision: .denied)
            while let batch = try await iterator.next() { received += batch.count }
            #expect(received == Self.total + own.count)

            // A stream of only the app's own objects depends on no grant: revoking the read grant does not end it.
            try await app.save((0..<2000).map { Samples.heartRate(70, at: Double(10_000 + $0)) })
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .revoked)
            var ownStream = try await app.results(for: SampleQueryDescriptor(type: Types.heartRate, batchSize: 10)).makeAsyncIterator()
            var ownReceived: [HealthObject] = try #require(try await ownStream.next())
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .granted)
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .revoked)
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .denied)
            while let batch = try await ownStream.next() { ownReceived += batch }
            #expect(ownReceived.count == own.count + 2000)
            #expect(ownReceived.allSatisfy { $0.sourceRevision.source == TestServer.appSource })

            await runner.close()
            await owner.close()
            await app.close()
        }
    }

    @Test("revoking the app's credential ends its streams; its next call is unauthenticated; its other credential is unaffected")
    func credentialRevocation() async throws {
        try await Self.withSeeded { server, owner, app, own in
            let secondCredential = try await server.ledger.issueCredential(for: .app(TestServer.appSource))
            let second = server.client(secondCredential)

            var revokedStream = try await app.results(for: SampleQueryDescriptor(type: Types.heartRate, batchSize: 10)).makeAsyncIterator()
            var keptStream = try await second.results(for: SampleQueryDescriptor(type: Types.heartRate, batchSize: 10)).makeAsyncIterator()
            var received = try #require(try await revokedStream.next()).count
            var kept = try #require(try await keptStream.next()).count
            try await server.ledger.revokeCredential(id: credentialID(server.appCredential))
            await expectRPCError(.permissionDenied, .authorizationDenied, "stream of a revoked credential") {
                while let batch = try await revokedStream.next() { received += batch.count }
            }
            #expect(received < Self.total)
            await expectRPCError(.unauthenticated, nil, "next call") { _ = try await app.ping() }
            await expectRPCError(.unauthenticated, nil, "next query") { _ = try await app.result(for: SampleQueryDescriptor(type: Types.heartRate)) }
            await expectRPCError(.unauthenticated, nil, "next save") { try await app.save(Samples.heartRate(1, at: -5)) }
            // The same app's other credential keeps its stream and its access.
            while let batch = try await keptStream.next() { kept += batch.count }
            #expect(kept == Self.total + own.count)
            #expect(try await second.ping().principal == "app com.example.walk")
            await second.close()
            await owner.close()
            await app.close()
        }
    }

    @Test("revoking the credential ends a watch of only the app's own objects, which no read grant ended")
    func credentialRevocationOwnObjects() async throws {
        try await Self.withSeeded { server, owner, app, own in
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .revoked)
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)).makeAsyncIterator()
            #expect(try #require(try await watch.next()).addedObjects.map(\.uuid) == own.map(\.uuid))
            var observer = try await app.observe(Types.heartRate).makeAsyncIterator()
            try await server.ledger.revokeCredential(id: credentialID(server.appCredential))
            await expectRPCError(.permissionDenied, .authorizationDenied, "own-objects watch of a revoked credential") { while try await watch.next() != nil {} }
            await expectRPCError(.permissionDenied, .authorizationDenied, "observer of a revoked credential") { while try await observer.next() != nil {} }
            await owner.close()
            await app.close()
        }
    }

    @Test("revoking an owner credential ends its streams too")
    func ownerCredentialRevocation() async throws {
        try await Self.withSeeded { server, owner, app, _ in
            let ownerCredential = try await server.ledger.issueCredential(for: .owner)
            let revoked = server.client(ownerCredential)
            var stream = try await revoked.results(for: SampleQueryDescriptor(type: Types.heartRate, batchSize: 10)).makeAsyncIterator()
            var received = try #require(try await stream.next()).count
            try await server.ledger.revokeCredential(id: credentialID(ownerCredential))
            await expectRPCError(.permissionDenied, nil, "owner stream of a revoked credential") {
                while let batch = try await stream.next() { received += batch.count }
            }
            #expect(received < Self.total, "a revoked owner credential streamed \(received) objects after its revocation")
            await expectRPCError(.unauthenticated, nil, "next call") { _ = try await revoked.ping() }
            await revoked.close()
            await owner.close()
            await app.close()
        }
    }

    @Test("a credential revoked by another process (healthledger admin on the data directory) ends the app's live streams; its next call is refused")
    func revocationByAnotherProcess() async throws {
        try await Self.withSeeded { server, owner, app, _ in
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, batchSize: 5000)).makeAsyncIterator()
            _ = try await initialChanges(&watch)
            var observer = try await app.observe(Types.heartRate).makeAsyncIterator()
            // The owner's streams of the same type live on.
            var ownerWatch = try await owner.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, batchSize: 5000)).makeAsyncIterator()
            _ = try await initialChanges(&ownerWatch)

            let clock = ContinuousClock()
            let revoke = try await runProcess(
                AuthCLITests.executable,
                ["admin", "revoke-credential", "alice", credentialID(server.appCredential), "--data-dir", server.directory.path])
            #expect(revoke.status == 0, "\(revoke.error)")
            let revoked = clock.now
            // Nothing in the server's process announces it: the streams end because the ledger
            // saw the other process's event.
            await expectRPCError(.permissionDenied, .authorizationDenied, "watched query") { while try await watch.next() != nil {} }
            await expectRPCError(.permissionDenied, .authorizationDenied, "observer") { while try await observer.next() != nil {} }
            let ended = clock.now - revoked
            // The ledger checks every 250 ms; the bound is loose so that a loaded machine passes.
            #expect(ended < .seconds(10), "the streams ended \(ended) after the revocation")
            await expectRPCError(.unauthenticated, nil, "next call") { _ = try await app.ping() }

            // So does revoking the owner's credential: the owner's watch ends too.
            let ownerRevoke = try await runProcess(
                AuthCLITests.executable,
                ["admin", "revoke-credential", "alice", credentialID(server.ownerCredential), "--data-dir", server.directory.path])
            #expect(ownerRevoke.status == 0, "\(ownerRevoke.error)")
            await expectRPCError(.permissionDenied, nil, "owner watch") { while try await ownerWatch.next() != nil {} }
            await owner.close()
            await app.close()
        }
    }

    @Test("an owner's decision made through another server process on the same data directory ends the app's stream")
    func decisionByAnotherProcess() async throws {
        try await Self.withSeeded { server, owner, app, _ in
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, batchSize: 5000)).makeAsyncIterator()
            _ = try await initialChanges(&watch)
            var weights = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.bodyMass)).makeAsyncIterator()
            #expect(try #require(try await weights.next()).caughtUp)

            let other = try await DaemonProcess(dataDirectory: server.directory)
            defer { other.stop() }
            let otherOwner = HealthStore(configuration: .init(port: other.port, credential: server.ownerCredential))
            // A save through the other process reaches this server's watch of the type.
            let weight = HealthObject.quantitySample(QuantitySample(
                type: try QuantityType(Types.bodyMass.identifier), quantity: try Quantity(71, "kg"), start: Samples.base, end: Samples.base))
            try await otherOwner.save(weight)
            #expect(try #require(try await weights.next()).addedObjects == [weight])
            // A revocation through the other process ends the stream that relied on the grant.
            try await otherOwner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .revoked)
            await expectRPCError(.permissionDenied, .authorizationDenied, "watched query") { while try await watch.next() != nil {} }
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate)).allSatisfy { $0.sourceRevision.source == TestServer.appSource })
            // This server's next commit extends the Merkle tree past the other process's events,
            // not from the frontier it kept after its own last commit (40 events complete stored
            // nodes, of sixteen leaves and up).
            try await owner.save((0..<40).map { index in
                HealthObject.quantitySample(QuantitySample(
                    type: try QuantityType(Types.bodyMass.identifier), quantity: try Quantity(72, "kg"),
                    start: Samples.base.addingTimeInterval(Double(index)), end: Samples.base.addingTimeInterval(Double(index))))
            })
            let head = try await owner.treeHead()
            let leaves = try await TreeHeadTests.eventHashes(owner).map(ReferenceTree.leaf)
            #expect(head.size == UInt64(leaves.count))
            #expect(head.rootHash == ReferenceTree.root(leaves[...]))
            await otherOwner.close()
            await owner.close()
            await app.close()
        }
    }
}
