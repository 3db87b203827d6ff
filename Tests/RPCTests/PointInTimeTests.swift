import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

@Suite("Point-in-time views", .timeLimit(.minutes(3)))
struct PointInTimeTests {
    static let app = TestServer.appSource.bundleIdentifier

    @Test("reads as of a past event or time return the past state, with the authorization of then and now; writes are refused")
    func pastState() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let deletedLater = Samples.heartRate(60, at: 0)
            let kept = Samples.heartRate(70, at: 60)
            try await owner.save([deletedLater, kept])
            let appOwn = Samples.heartRate(80, at: 120)
            try await app.save(appOwn)
            try await owner.setCharacteristic(of: .bloodType, to: .bloodType(.aPositive))
            _ = try await app.requestAuthorization(toShare: [], read: [Types.heartRate])
            let before = try server.ledger.head()
            let beforeTime = try #require(try await owner.audit(AuditFilter(fromSequence: before.sequence)).reduce(into: [AuditEvent]()) { $0 += $1.events }.first).time

            // Then: a save, a delete, a new characteristic value, and the app's read grant.
            let savedLater = Samples.heartRate(90, at: 180)
            try await owner.save(savedLater)
            #expect(try await owner.delete([deletedLater.uuid]) == 1)
            try await owner.setCharacteristic(of: .bloodType, to: .bloodType(.oNegative))
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .granted)
            let granted = try server.ledger.head()

            let query = SampleQueryDescriptor(type: Types.heartRate)
            #expect(try await owner.result(for: query).map(\.uuid) == [kept, appOwn, savedLater].map(\.uuid))
            for point in [PointInTime.sequence(before.sequence), .time(beforeTime)] {
                let past = owner.asOf(point)
                #expect(try await past.result(for: query).map(\.uuid) == [deletedLater, kept, appOwn].map(\.uuid), "\(point): the deleted one present, the later one absent")
                #expect(try await past.object(with: deletedLater.uuid) != nil)
                #expect(try await past.object(with: savedLater.uuid) == nil)
                let changes = try await past.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate))
                #expect(changes.addedObjects.map(\.uuid) == [deletedLater, kept, appOwn].map(\.uuid) && changes.deletedObjects.isEmpty)
                let statistics = try #require(try await past.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, options: .discreteMax)))
                #expect(try statistics.maximumQuantity()?.doubleValue(for: HealthUnit("count/min")) == 80)
                #expect(try await past.bloodType() == .aPositive)
                let events = try await past.audit().reduce(into: [AuditEvent]()) { $0 += $1.events }
                #expect(events.last?.sequence == before.sequence, "the audit trail ends at the point")
            }
            #expect(try await owner.bloodType() == .oNegative)

            // The app: the grant came after `before`, so there it reads only its own; at `granted` it reads all.
            #expect(try await app.asOf(.sequence(before.sequence)).result(for: query).map(\.uuid) == [appOwn.uuid])
            #expect(try await app.asOf(.sequence(granted.sequence)).result(for: query).map(\.uuid) == [kept, appOwn, savedLater].map(\.uuid))
            // Revoked now: the past closes too.
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .revoked)
            #expect(try await app.asOf(.sequence(granted.sequence)).result(for: query).map(\.uuid) == [appOwn.uuid])
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's audit as of") { _ = try await app.asOf(.sequence(granted.sequence)).audit().reduce(0) { $0 + $1.events.count } }

            // Writes and long-running calls are refused; points outside the ledger too.
            let past = owner.asOf(.sequence(before.sequence))
            await expectRPCError(.invalidArgument, .invalidArgument, "save as of") { try await past.save(Samples.heartRate(1, at: 999)) }
            await expectRPCError(.invalidArgument, .invalidArgument, "delete as of") { _ = try await past.delete([kept.uuid]) }
            await expectRPCError(.invalidArgument, .invalidArgument, "decide as of") {
                try await past.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .granted)
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "watch as of") {
                for try await _ in try await past.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)) {}
            }
            let head = try server.ledger.head().sequence
            await expectRPCError(.invalidArgument, .invalidArgument, "past the head") { _ = try await owner.asOf(.sequence(head + 10)).result(for: query) }
            await expectRPCError(.invalidArgument, .invalidArgument, "before the ledger") {
                _ = try await owner.asOf(.time(Date(timeIntervalSince1970: 0))).result(for: query)
            }
            // The earliest time the protocol carries is named as it is, not as a made-up year.
            do {
                _ = try await owner.asOf(.time(Date(timeIntervalSince1970: -1e13))).result(for: query)
                Issue.record("a read as of Int64.min µs was answered")
            } catch let error as RPCError {
                #expect(error.message.contains("9223372036855 seconds from 1970 (before the years 1 to 9999)"), "\(error.message)")
            }
            #expect(try await owner.result(for: query).map(\.uuid) == [kept, appOwn, savedLater].map(\.uuid), "nothing changed")
            await owner.close()
            await app.close()
        }
    }

    @Test("healthledger --as-of reads the past through the server; replay --until writes it as a data directory the tools open")
    func cli() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let first = Samples.heartRate(60, at: 0)
            try await owner.save(first)
            let point = try server.ledger.head().sequence
            try await owner.save(Samples.heartRate(61, at: 60))
            let cli = AuthCLITests.executable
            let connection = ["--port", "\(server.port)", "--credential", server.ownerCredential, "--json"]

            let now = try await runProcess(cli, ["query", "--type", "HeartRate"] + connection)
            let then = try await runProcess(cli, ["query", "--type", "HeartRate", "--as-of", "\(point)"] + connection)
            #expect(now.status == 0 && then.status == 0, "\(then.error)")
            #expect(now.output.components(separatedBy: "\"uuid\"").count - 1 == 2)
            #expect(then.output.components(separatedBy: "\"uuid\"").count - 1 == 1 && then.output.contains(first.uuid.uuidString), "\(then.output)")
            let refused = try await runProcess(cli, ["save", "--type", "HeartRate", "--value", "70", "--unit", "count/min", "--as-of", "\(point)"] + connection)
            #expect(refused.status != 0 && refused.error.contains("cannot be asked as of"), "\(refused.error)")

            let output = server.directory.appending(path: "march")
            let replay = try await runProcess(cli, ["replay", "alice", "--data-dir", server.directory.path, "--until", "\(point)", "--output", output.path])
            #expect(replay.status == 0 && replay.output.contains("as of event \(point)"), "\(replay.output)\(replay.error)")
            let audit = try await runProcess(cli, ["audit", "alice", "--data-dir", output.path, "--json"])
            #expect(audit.output.split(separator: "\n").count == Int(point), "\(audit.output)")
            let verify = try await runProcess(cli, ["verify", "alice", "--data-dir", output.path])
            #expect(verify.status == 0 && verify.output.contains("OK: \(point) events"), "\(verify.output)")
            let again = try await runProcess(cli, ["replay", "alice", "--data-dir", server.directory.path, "--until", "\(point)", "--output", output.path])
            #expect(again.status != 0 && again.error.contains("exists"))
            let file = server.directory.appending(path: "a-file")
            try Data("x".utf8).write(to: file)
            let onFile = try await runProcess(cli, ["replay", "alice", "--data-dir", server.directory.path, "--until", "\(point)", "--output", file.path])
            #expect(onFile.status != 0 && onFile.error.contains("is a file, not a directory"), "\(onFile.error)")
            await owner.close()
        }
    }
}
