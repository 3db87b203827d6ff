import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import Ledger
import LedgerSchema
import TestSupport
import Testing

@Suite("Access records (docs/PROTOCOL.md §7.15a): every read of health data on the record, for the owner's eyes", .timeLimit(.minutes(5)))
struct AccessRecordTests {
    typealias Read = (method: String, types: [String], objects: UInt64)

    static func reads(_ records: [AccessRecord]) -> [String] {
        records.map { "\($0.principal) \($0.methodName) \($0.types.map(ObjectType.shortName).joined(separator: ",")) \($0.objects)" }
    }

    @Test("each read path leaves one record naming its method, types and objects; an as-of read names its point; an app's refused calls leave none")
    func everyReadPath() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let heartRate = Samples.heartRate.objectType
            let samples = (0..<3).map { Samples.heartRate(Double(60 + $0), at: Double($0) * 60) }
            try await owner.save(samples)
            let attachment = try await owner.addAttachment(to: samples[0].uuid, name: "ecg.pdf", contentType: "application/pdf", data: Array("%PDF-1.4\n".utf8) + Array(repeating: 7, count: 64))
            try await owner.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: 1980, month: 5, day: 17))
            let workout = WorkoutRPCTests.run()
            try await owner.save(.workout(workout))
            let builder = try await owner.makeRouteBuilder()
            try await builder.insertRouteData((0..<300).map(WorkoutRPCTests.location))
            let route = try await owner.finishRoute(builder, workout.uuid)
            try await app.save(Samples.heartRate(90, at: 600))
            let point = try server.ledger.head().sequence
            // Nothing read yet: saves are not reads.
            server.store.flushAccessRecords()
            #expect(try await owner.accessRecords().records.isEmpty)

            _ = try await owner.object(with: samples[0].uuid)
            _ = try await SampleQueryDescriptor(type: heartRate).result(for: owner)
            _ = try await owner.result(for: AnchoredObjectQueryDescriptor(type: heartRate))
            _ = try await owner.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, options: .discreteMax))
            _ = try await owner.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: Samples.heartRate, range: DateInterval(start: Samples.base, duration: 3_600),
                intervals: try StatisticsIntervals(anchor: Samples.base, every: 1, .minute, timeZone: .gmt), options: [.discreteMax]))
            _ = try await owner.attachments(of: samples[0].uuid)
            _ = try await owner.data(of: attachment.uuid)
            _ = try await owner.dateOfBirthComponents()
            _ = try await owner.statistics(for: workout.uuid)
            var locations = 0
            for try await batch in try await owner.routeLocations(of: route.uuid) { locations += batch.locations.count }
            #expect(locations == 300)
            _ = try await owner.asOf(.sequence(point - 1)).object(with: samples[1].uuid)
            // The app reads what it may: its own sample.
            #expect(try await SampleQueryDescriptor(type: heartRate).result(for: app).count == 1)
            // Refused calls of the app leave no record (nor does asking for the records).
            await expectRPCError(.permissionDenied) { _ = try await app.accessRecords() }
            await #expect(throws: RPCError.self) { _ = try await app.data(of: attachment.uuid) }

            server.store.flushAccessRecords()
            let records = try await owner.accessRecords().records
            // Each call is noted as it ends on the server: a stream's end may come after the
            // next call's, so the records are compared as a set of reads, in time order each.
            #expect(
                Self.reads(records).sorted() == [
                    "owner Fetch HeartRate 1", "owner QuerySamples HeartRate 4", "owner QueryChanges HeartRate 4", "owner Statistics HeartRate 1",
                    "owner StatisticsCollection HeartRate 4", "owner Attachments Attachment 1", "owner AttachmentData Attachment 1",
                    "owner Characteristics DateOfBirth 1", "owner WorkoutStatistics Workout 1",
                    "owner RouteLocations WorkoutRoute 300", "owner Fetch HeartRate 1",
                    "app com.example.walk QuerySamples HeartRate 1",
                ].sorted(), "\(Self.reads(records))")
            let credentials = Set(records.map(\.credentialID))
            #expect(credentials == [CredentialString(server.ownerCredential)!.id, CredentialString(server.appCredential)!.id])
            #expect(records.compactMap(\.asOfSequence) == [point - 1])
            #expect(records.last { $0.asOfSequence != nil }.map { "\($0.methodName) \($0.objects)" } == "Fetch 1")
            #expect(zip(records, records.dropFirst()).allSatisfy { $0.time <= $1.time })

            // Filters, pages and the summary.
            let apps = try await owner.accessRecords(AccessRecordFilter(app: "com.example.walk"))
            #expect(Self.reads(apps.records) == ["app com.example.walk QuerySamples HeartRate 1"] && !apps.hasMore)
            let routes = try await owner.accessRecords(AccessRecordFilter(type: ObjectType.workoutRoute.identifier))
            #expect(routes.records.count == 1 && routes.records[0].objects == 300)
            let first = try await owner.accessRecords(limit: 5)
            #expect(first.records.count == 5 && first.hasMore)
            let rest = try await owner.accessRecords(after: first.next, limit: 100)
            #expect(first.records + rest.records == records && !rest.hasMore)
            #expect(try await owner.accessRecords(AccessRecordFilter(since: Date().addingTimeInterval(60))).records.isEmpty)
            let summary = try await owner.accessSummary()
            #expect(summary.lines.first.map { "\($0.principal) \($0.type) \($0.objects) \($0.calls)" } == "owner HKWorkoutRouteTypeIdentifier 300 1")
            #expect(summary.lines.contains { $0.principal == .owner && $0.type == heartRate.identifier && $0.objects == 15 && $0.calls == 6 })
        }
    }

    @Test("a watched query is on the record as it delivers")
    func watchedReads() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await app.save(Samples.heartRate(70, at: 0))
            var batches = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Samples.heartRate.objectType)).makeAsyncIterator()
            #expect(try await batches.next()?.addedObjects.count == 1)
            try await app.save([Samples.heartRate(71, at: 60), Samples.heartRate(72, at: 120)])
            #expect(try await batches.next()?.addedObjects.count == 2)
            // Still open: both deliveries are on the record already (in one record when they
            // came in the same second, which counts them).
            server.store.flushAccessRecords()
            let records = try await owner.accessRecords().records
            #expect(Set(records.map { "\($0.principal) \($0.methodName)" }) == ["app com.example.walk WatchChanges"])
            #expect(records.reduce(0) { $0 + $1.calls } == 2 && records.reduce(0) { $0 + $1.objects } == 3, "\(records)")
            await app.close()
        }
    }

    @Test("calls alike answered within the same second share one record that counts them; another method, credential or point has its own")
    func callsAlike() async throws {
        var configuration = try LedgerConfiguration.forTests()
        configuration.accessFlushInterval = nil
        try await withTestServer(ledgers: configuration) { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await app.save((0..<3).map { Samples.heartRate(Double(70 + $0), at: Double($0)) })
            let query = SampleQueryDescriptor(type: Samples.heartRate.objectType)
            let clock = ContinuousClock()
            let started = clock.now
            for _ in 0..<20 { #expect(try await query.result(for: app).count == 3) }
            let elapsed = clock.now - started
            _ = try await query.result(for: owner)
            try server.ledger.flushAccessRecords()
            let records = try await owner.accessRecords().records
            let apps = records.filter { $0.principal == .app(TestServer.appSource) }
            #expect(apps.reduce(0) { $0 + $1.calls } == 20 && apps.reduce(0) { $0 + $1.objects } == 60, "\(apps)")
            // One record per second the calls spanned, at most.
            #expect(apps.count <= Int(elapsed.components.seconds) + 2, "\(apps.count) records for 20 calls in \(elapsed)")
            #expect(apps.allSatisfy { $0.methodName == "QuerySamples" && $0.objects == 3 * $0.calls })
            #expect(records.filter { $0.principal == .owner }.map(\.calls) == [1])
            let summary = try await owner.accessSummary()
            #expect(summary.lines.contains { $0.principal == .app(TestServer.appSource) && $0.calls == 20 && $0.objects == 60 })
        }
    }

    @Test("records older than the retention period are pruned when records are written; the CLI shows them, as JSON, summed, and on the data directory")
    func retentionAndCLI() async throws {
        var configuration = try LedgerConfiguration.forTests()
        configuration.accessRetention = 30 * 86_400
        configuration.accessFlushInterval = nil
        try await withTestServer(ledgers: configuration) { server in
            let old = AccessRecord(
                time: Date().addingTimeInterval(-31 * 86_400), credentialID: "0123456789abcdef", principal: .owner,
                method: RPCMethod.fetch.rawValue, types: [Samples.heartRate.identifier], objects: 1)
            server.ledger.recordAccess(old)
            var kept = old
            kept.time = Date().addingTimeInterval(-29 * 86_400)
            server.ledger.recordAccess(kept)
            #expect(try server.ledger.flushAccessRecords() == 2)
            // The expired one went with the write that brought it.
            let left = try server.ledger.accessRecords(AccessRecordFilter(), as: .owner).records
            #expect(left.count == 1 && abs(left[0].time.timeIntervalSince(kept.time)) < 1e-5 && left[0].credentialID == kept.credentialID)

            let owner = server.client()
            _ = try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: owner)
            server.store.flushAccessRecords()
            let connection = ["--port", "\(server.port)", "--credential", server.ownerCredential]
            let json = try await runProcess(AuthCLITests.executable, ["audit", "--reads", "--json", "--type", "HeartRate"] + connection)
            #expect(json.status == 0, "\(json.error)")
            let lines = json.output.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(lines.count == 2 && lines.last??["method"] as? String == "QuerySamples" && lines.last??["principal"] as? String == "owner")
            let summary = try await runProcess(AuthCLITests.executable, ["audit", "--reads", "--summary"] + connection)
            #expect(summary.status == 0 && summary.output == "owner read 0 HeartRate samples today (1 call)\n", "\(summary.output)\(summary.error)")
            let onDisk = try await runProcess(AuthCLITests.executable, ["audit", "alice", "--reads", "--app", "owner", "--data-dir", server.directory.path])
            #expect(onDisk.status == 0 && onDisk.output.split(separator: "\n").count == 2 && onDisk.output.contains("\towner\tQuerySamples\t0\tHeartRate"), "\(onDisk.output)\(onDisk.error)")
            let app = try await runProcess(AuthCLITests.executable, ["audit", "--reads", "--port", "\(server.port)", "--credential", server.appCredential])
            #expect(app.status != 0 && app.error.contains("the access records are the owner's"), "\(app.error)")
            let mixed = try await runProcess(AuthCLITests.executable, ["audit", "--reads", "--kind", "objectSaved"] + connection)
            #expect(mixed.status != 0 && mixed.error.contains("--reads filters by --app, --type, --since and --until"), "\(mixed.error)")
        }
    }

    @Test("audit --reads --follow takes the records as they arrive: one that lands late, dated ten minutes back (as a follower's may), is printed after those read before it, and each once")
    func followTakesLateRecords() async throws {
        var configuration = try LedgerConfiguration.forTests()
        configuration.accessFlushInterval = nil
        try await withTestServer(ledgers: configuration) { server in
            func arrive(_ method: RPCMethod, secondsAgo: TimeInterval) throws {
                server.ledger.recordAccess(
                    AccessRecord(
                        time: Date().addingTimeInterval(-secondsAgo), credentialID: "0123456789abcdef", principal: .owner, method: method.rawValue,
                        types: [Samples.heartRate.identifier], objects: 1))
                #expect(try server.ledger.flushAccessRecords() == 1)
            }
            try arrive(.fetch, secondsAgo: 30)
            let follow = try LineProcess(
                AuthCLITests.executable, ["audit", "--reads", "--follow", "--json", "--port", "\(server.port)", "--credential", server.ownerCredential])
            defer { follow.stop() }
            func nextMethod() async -> String? {
                guard let line = await follow.nextLine() else { return nil }
                return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["method"] as? String
            }
            var methods = [await nextMethod()]
            // Behind the record printed already, by a minute and more, and then one of now.
            try arrive(.statistics, secondsAgo: 600)
            try arrive(.querySamples, secondsAgo: 0)
            methods.append(await nextMethod())
            methods.append(await nextMethod())
            // Nothing comes twice: the next line is the next record.
            try arrive(.fetch, secondsAgo: 0)
            methods.append(await nextMethod())
            #expect(methods == ["Fetch", "Statistics", "QuerySamples", "Fetch"])

            // The order of arrival through the SDK: without a place, the end; from a place, what
            // came after it; a place not this server's, the end again, said so.
            let owner = server.client()
            let end = try await owner.accessRecords(inArrivalOrder: true)
            #expect(end.records.isEmpty && end.next?.count == 24 && !end.restarted)
            try arrive(.statistics, secondsAgo: 3_600)
            let after = try await owner.accessRecords(after: end.next, inArrivalOrder: true)
            #expect(after.records.map(\.methodName) == ["Statistics"] && !after.restarted)
            let elsewhere = try await owner.accessRecords(after: [UInt8](repeating: 7, count: 24), inArrivalOrder: true)
            #expect(elsewhere.records.isEmpty && elsewhere.restarted && elsewhere.next == after.next)
            await expectRPCError(.invalidArgument) { _ = try await owner.accessRecords(after: [1, 2, 3], inArrivalOrder: true) }
            let app = server.client(server.appCredential)
            await expectRPCError(.permissionDenied) { _ = try await app.accessRecords(inArrivalOrder: true) }
        }
    }


    @Test("records forwarded to a server that hands its own to a primary (a member that no longer leads the group) go on: its outbox names them; a primary keeps them")
    func forwardedRecordsGoOn() async throws {
        try await withTestServer { server throws in
            func forwarded(secondsAgo: TimeInterval) -> ForwardedAccessRecord {
                let time = Date().addingTimeInterval(-secondsAgo)
                var key = [UInt8](repeating: 0, count: 16)
                let microseconds = UInt64(bitPattern: LedgerSchema.microseconds(time)) ^ (1 << 63)
                for index in 0..<8 { key[index] = UInt8(truncatingIfNeeded: microseconds >> (56 - 8 * UInt64(index))) }
                key[15] = 9
                return ForwardedAccessRecord(
                    key: key, record: AccessRecord(time: time, credentialID: "c1", principal: .owner, method: RPCMethod.fetch.rawValue, types: [], objects: 1))
            }
            #expect(try server.ledger.keepForwardedAccessRecords([forwarded(secondsAgo: 2)]) == 1)
            #expect(try server.ledger.accessOutboxIsEmpty)
            server.store.accessForwarding.forward(.everyLedger)
            defer { server.store.accessForwarding.forward(.none) }
            let onward = forwarded(secondsAgo: 1)
            #expect(try server.ledger.keepForwardedAccessRecords([onward]) == 1)
            #expect(try server.ledger.forwardableAccessRecords().keys == [onward.key])
        }
    }

}
