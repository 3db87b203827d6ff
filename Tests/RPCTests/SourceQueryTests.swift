import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Source queries (HealthKit's HKSourceQuery) over RPC and the CLI", .timeLimit(.minutes(3)))
struct SourceQueryTests {
    @Test("the sources of a type in order of first save, narrowed by interval and predicate; an app without read sees only itself; deleted objects name no source; on the record; as of a past point")
    func sources() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let walk = server.client(server.appCredential)
            let (run, runCredential) = try await server.addApp("com.example.run", name: "Run")
            let runner = server.client(runCredential)
            let (peek, peekCredential) = try await server.addApp("com.example.peek", name: "Peek", share: [])
            let peeker = server.client(peekCredential)
            let heartRate = Samples.heartRate.objectType

            try await owner.save(Samples.heartRate(60, at: 0))
            try await walk.save(Samples.heartRate(150, at: 60))
            let runs = Samples.heartRate(80, at: 7_200)
            try await runner.save(runs)
            let all = [Source.owner.bundleIdentifier, TestServer.appSource.bundleIdentifier, run.bundleIdentifier]
            #expect(try await SourceQueryDescriptor(type: heartRate).result(for: owner).map(\.bundleIdentifier) == all)
            let fast = try await SourceQueryDescriptor(type: heartRate, predicate: .quantity(.greater, try Quantity(100, "count/min"))).result(for: owner)
            #expect(fast.map(\.bundleIdentifier) == [TestServer.appSource.bundleIdentifier] && fast.first?.name == "Walk")
            let early = DateInterval(start: Samples.base, duration: 3_600)
            #expect(try await SourceQueryDescriptor(type: heartRate, interval: early).result(for: owner).map(\.bundleIdentifier) == Array(all.prefix(2)))
            #expect(try await SourceQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierStepCount")).result(for: owner).isEmpty)
            let before = try server.ledger.head().sequence

            // Apps: without read authorization, only themselves (nothing for one that saved none).
            #expect(try await SourceQueryDescriptor(type: heartRate).result(for: runner).map(\.bundleIdentifier) == [run.bundleIdentifier])
            #expect(try await SourceQueryDescriptor(type: heartRate).result(for: peeker).isEmpty)
            #expect(try await peeker.requestAuthorization(toShare: [], read: [heartRate]) == 1)
            try await owner.decideAuthorization(app: peek.bundleIdentifier, type: heartRate, direction: .read, decision: .granted)
            #expect(try await SourceQueryDescriptor(type: heartRate).result(for: peeker).map(\.bundleIdentifier) == all)
            try await owner.decideAuthorization(app: peek.bundleIdentifier, type: heartRate, direction: .read, decision: .revoked)
            #expect(try await SourceQueryDescriptor(type: heartRate).result(for: peeker).isEmpty)

            // A source whose objects are all deleted is not a source of the type any more, but
            // was as of before the deletion.
            try await runner.delete([runs.uuid])
            #expect(try await SourceQueryDescriptor(type: heartRate).result(for: owner).map(\.bundleIdentifier) == Array(all.prefix(2)))
            #expect(try await SourceQueryDescriptor(type: heartRate).result(for: owner.asOf(.sequence(before))).map(\.bundleIdentifier) == all)

            // On the owner's record of reads, as a read of the type.
            await expectRPCError(.invalidArgument, .invalidArgument, "a characteristic type") {
                _ = try await SourceQueryDescriptor(type: .dateOfBirth).result(for: owner)
            }
            _ = try server.ledger.flushAccessRecords()
            let records = try await owner.accessRecords().records
            #expect(records.contains { $0.method == "healthledger.v1.Ledger/QuerySources" && $0.principal == .app(peek) && $0.types == [heartRate.identifier] })

            // The CLI.
            let cli = AuthCLITests.Session(server: server)
            let listed = try await cli.run(server.ownerCredential, ["sources", "--type", "HeartRate"])
            #expect(listed.status == 0 && listed.output == "\(all[0])\tOwner\n\(all[1])\tWalk\n", "\(listed.output) \(listed.error)")
            let narrowed = try await cli.run(server.ownerCredential, ["sources", "--type", "HeartRate", "--where", "value > 100 count/min"])
            #expect(narrowed.output == "\(all[1])\tWalk\n", "\(narrowed.output) \(narrowed.error)")
            let unknown = try await cli.run(server.ownerCredential, ["sources", "--type", "Nothing"])
            #expect(unknown.status != 0 && unknown.error.contains("Nothing"), "\(unknown.error)")
            for store in [owner, walk, runner, peeker] { await store.close() }
        }
    }
}
