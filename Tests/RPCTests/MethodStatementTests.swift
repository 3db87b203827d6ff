import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import Ledger
import LedgerSchema
import SwiftProtobuf
import Testing

/// PROTOCOL.md §7's statements about single methods that the other suites leave out, each
/// checked on the wire (raw frames) where the SDK would hide it.
@Suite("The protocol document, method by method")
struct MethodStatementTests {
    typealias Statements = ProtocolStatementTests

    /// Sends one request and reads its frames: the messages before its status, and the status.
    static func call(
        _ raw: RawConnection, _ id: UInt64, _ method: RPCMethod, _ credential: String, _ message: some SwiftProtobuf.Message
    ) async throws -> (messages: [Data], status: Healthledger_V1_CallStatus?) {
        try await raw.send(try Statements.request(id, method, credential, message))
        let (before, status) = await Statements.frames(until: id, on: raw)
        return (before.compactMap { frame in if case .message(let bytes) = frame.kind, frame.callID == id { bytes } else { nil } }, status)
    }

    @Test("§7.1: Ping echoes its data and names the ledger and the principal")
    func pingEcho() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let (messages, status) = try await Self.call(raw, 1, .ping, server.appCredential, Healthledger_V1_PingRequest.with { $0.data = Data([0, 1, 0xFF]) })
            #expect(status?.code == .ok)
            let response = try Healthledger_V1_PingResponse(serializedBytes: try #require(messages.first))
            #expect(response.data == Data([0, 1, 0xFF]) && response.ledgerID == "alice" && response.principal == "app com.example.walk")
            // A call id is free again once its status has arrived.
            let again = try await Self.call(raw, 1, .ping, server.ownerCredential, Healthledger_V1_PingRequest())
            #expect(again.status?.code == .ok && again.messages.count == 1)
            await raw.close()
        }
    }

    @Test("§7.2/§7.3/§7.5: an empty save or delete, a UUID not 16 bytes and an empty fetch are invalidArgument; a delete counts each UUID once")
    func saveDeleteFetchEdges() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let owner = server.ownerCredential
            var id: UInt64 = 0
            func refused(_ method: RPCMethod, _ message: some SwiftProtobuf.Message, _ reason: String) async throws {
                id += 1
                let (messages, status) = try await Self.call(raw, id, method, owner, message)
                #expect(messages.isEmpty && status?.code == .invalidArgument && status?.healthErrorCode == 3 && status?.message == reason, "\(method): \(String(describing: status))")
            }
            try await refused(.save, Healthledger_V1_SaveRequest(), "nothing to save: the list of objects is empty")
            try await refused(.delete, Healthledger_V1_DeleteRequest(), "nothing to delete: the list of UUIDs is empty")
            try await refused(.delete, Healthledger_V1_DeleteRequest.with { $0.uuids = [Data(repeating: 1, count: 15)] }, "a UUID must be 16 bytes")
            try await refused(.fetch, Healthledger_V1_FetchRequest(), "a UUID must be 16 bytes")
            try await refused(.fetch, Healthledger_V1_FetchRequest.with { $0.uuid = Data(repeating: 1, count: 17) }, "a UUID must be 16 bytes")

            let samples = (0..<2).map { Samples.heartRate(60, at: Double($0)) }
            try await server.client().save(samples)
            let first = Data(samples[0].uuid.bytes), second = Data(samples[1].uuid.bytes)
            id += 1
            let (messages, status) = try await Self.call(raw, id, .delete, owner, Healthledger_V1_DeleteRequest.with { $0.uuids = [first, first, second, first] })
            #expect(status?.code == .ok)
            #expect(try Healthledger_V1_DeleteResponse(serializedBytes: try #require(messages.first)).deleted == 2, "duplicates are counted once")
            await raw.close()
        }
    }

    @Test("§7.2: a stored object sent again, sync identifier and all, is alreadyExists (the UUID comes before the sync identifier), and nothing is saved")
    func resentObject() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let weight = AuditTests.weight(70, version: 1)
            try await owner.save(weight)
            let head = try server.ledger.head()
            let other = AuditTests.weight(72, version: 2)
            let error = await expectRPCError(.alreadyExists, .invalidArgument, "the same object again") { try await owner.save([other, weight]) }
            #expect(error?.message == "object 1: an object with UUID \(weight.uuid.uuidString) already exists")
            #expect(try server.ledger.head() == head)
            await owner.close()
        }
    }

    @Test("§7.6: batch_size 0 is 500 and above 10,000 is 10,000; an unknown sort is start ascending; no match sends no message")
    func sampleBatches() async throws {
        try await withTestServer { server in
            try await Statements.saveHeartRates(10_500, on: server)
            let raw = try await RawConnection(port: server.port)
            var id: UInt64 = 0
            func batches(_ change: (inout Healthledger_V1_SampleQueryRequest) -> Void) async throws -> [[Healthledger_V1_HealthObject]] {
                var request = Healthledger_V1_SampleQueryRequest.with { $0.type = Statements.heartRate }
                change(&request)
                id += 1
                // Window large enough for every batch.
                try await raw.send(try Statements.request(id, .querySamples, server.ownerCredential, request, window: 1_000))
                let (before, status) = await Statements.frames(until: id, on: raw)
                #expect(status?.code == .ok, "\(String(describing: status))")
                return try before.compactMap { frame in
                    guard case .message(let bytes) = frame.kind else { return nil }
                    return try Healthledger_V1_SampleBatch(serializedBytes: bytes).objects
                }
            }
            let byDefault = try await batches { _ in }
            #expect(byDefault.map(\.count) == Array(repeating: 500, count: 21))
            #expect(try await batches { $0.batchSize = 500 }.map(\.count) == byDefault.map(\.count))
            let capped = try await batches { $0.batchSize = 10_000 }
            #expect(try await batches { $0.batchSize = 1_000_000 }.map(\.count) == capped.map(\.count), "above 10,000 is 10,000")
            #expect(capped.reduce(0) { $0 + $1.count } == 10_500 && capped.allSatisfy { $0.count <= 10_000 })
            // Each batch but the last is full: 10,000 objects, or 1 MiB with the one that reached it.
            for batch in capped.dropLast() {
                let size: [UInt8] = try Healthledger_V1_SampleBatch.with { $0.objects = batch }.serializedBytes()
                let withoutLast: [UInt8] = try Healthledger_V1_SampleBatch.with { $0.objects = Array(batch.dropLast()) }.serializedBytes()
                #expect(batch.count == 10_000 || (size.count >= 1 << 20 && withoutLast.count < 1 << 20), "\(batch.count) objects, \(size.count) bytes")
            }

            let sorted = try await batches { $0.limit = 700; $0.sort = .startAscending }.flatMap { $0 }
            let unknownSort = try await batches { $0.limit = 700; $0.sort = .UNRECOGNIZED(7) }.flatMap { $0 }
            #expect(unknownSort.map(\.uuid) == sorted.map(\.uuid) && sorted.count == 700)

            let none = try await batches { $0.startUs = 1; $0.endUs = 2 }
            #expect(none.isEmpty, "no matches: no message frames, then OK")
            await raw.close()
        }
    }

    @Test("§7.7: a query of no changes still sends one batch, empty, with the anchor that resumes after it; a damaged anchor is named")
    func emptyChangePage() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let (messages, status) = try await Self.call(
                raw, 1, .queryChanges, server.ownerCredential, Healthledger_V1_ChangeQueryRequest.with { $0.type = Statements.heartRate })
            #expect(status?.code == .ok && messages.count == 1)
            let batch = try Healthledger_V1_ChangeBatch(serializedBytes: try #require(messages.first))
            #expect(batch.added.isEmpty && batch.deleted.isEmpty && !batch.anchor.isEmpty && batch.caughtUp)

            try await Statements.saveHeartRates(3, on: server)
            let resumed = try await Self.call(raw, 2, .queryChanges, server.ownerCredential, Healthledger_V1_ChangeQueryRequest.with {
                $0.type = Statements.heartRate
                $0.anchor = batch.anchor
            })
            #expect(try resumed.messages.map { try Healthledger_V1_ChangeBatch(serializedBytes: $0).added.count } == [3])

            var damaged = batch.anchor
            damaged[damaged.count / 2] ^= 0x01
            let refused = try await Self.call(raw, 3, .queryChanges, server.ownerCredential, Healthledger_V1_ChangeQueryRequest.with {
                $0.type = Statements.heartRate
                $0.anchor = damaged
            })
            #expect(refused.messages.isEmpty && refused.status?.code == .invalidArgument)
            #expect(refused.status?.message == "the anchor was not issued by this ledger, or is damaged")
            await raw.close()
        }
    }

    @Test("§7.16: a tree size of 0 is the current one; sequence 0, first size 0 and a first size past the second are invalidArgument")
    func treeSizes() async throws {
        try await withTestServer { server in
            try await Statements.saveHeartRates(5, on: server)
            let head = try server.ledger.head().sequence
            let raw = try await RawConnection(port: server.port)
            let owner = server.ownerCredential
            let inclusion = try await Self.call(raw, 1, .inclusionProof, owner, Healthledger_V1_InclusionProofRequest.with { $0.sequence = 2 })
            #expect(inclusion.status?.code == .ok)
            #expect(try Healthledger_V1_InclusionProof(serializedBytes: try #require(inclusion.messages.first)).treeSize == head)
            let consistency = try await Self.call(raw, 2, .consistencyProof, owner, Healthledger_V1_ConsistencyProofRequest.with { $0.firstSize = 2 })
            #expect(consistency.status?.code == .ok)
            #expect(try Healthledger_V1_ConsistencyProof(serializedBytes: try #require(consistency.messages.first)).secondSize == head)

            let refusals: [(RPCMethod, any SwiftProtobuf.Message, String)] = [
                (.inclusionProof, Healthledger_V1_InclusionProofRequest(), "event 0 is not in a tree of \(head) events"),
                (.consistencyProof, Healthledger_V1_ConsistencyProofRequest(), "first_size must be 1 to second_size (\(head)), not 0"),
                (.consistencyProof, Healthledger_V1_ConsistencyProofRequest.with { $0.firstSize = 4; $0.secondSize = 3 }, "first_size must be 1 to second_size (3), not 4"),
            ]
            for (index, (method, message, reason)) in refusals.enumerated() {
                let (messages, status) = try await Self.call(raw, UInt64(3 + index), method, owner, message)
                #expect(messages.isEmpty && status?.code == .invalidArgument && status?.healthErrorCode == 3 && status?.message == reason, "\(String(describing: status))")
            }
            await raw.close()
        }
    }

    @Test("§7.17: CreateLedger with no id makes a random one; IssueCredential refuses the system and operator principals")
    func operatorEdges() async throws {
        try await withTestServer { server in
            let operatorCredential = try server.store.issueOperatorCredential(label: "ops")
            let raw = try await RawConnection(port: server.port)
            let created = try await Self.call(raw, 1, .createLedger, operatorCredential, Healthledger_V1_CreateLedgerRequest())
            #expect(created.status?.code == .ok)
            let createdBytes = try #require(created.messages.first)
            let id = try #require(try Healthledger_V1_LedgerList(serializedBytes: createdBytes).ledgerIds.first)
            #expect(!id.isEmpty && id != "alice")
            #expect(try server.store.ledgerIDs().contains(id))
            let another = try await Self.call(raw, 2, .createLedger, operatorCredential, Healthledger_V1_CreateLedgerRequest())
            #expect(try Healthledger_V1_LedgerList(serializedBytes: try #require(another.messages.first)).ledgerIds != [id], "random, not fixed")

            for (index, kind) in [Healthledger_V1_Actor.Kind.system, .operator, .unspecified].enumerated() {
                let (messages, status) = try await Self.call(raw, UInt64(3 + index), .issueCredential, operatorCredential, Healthledger_V1_IssueCredentialRequest.with {
                    $0.ledgerID = id
                    $0.principal.kind = kind
                })
                #expect(messages.isEmpty && status?.code == .invalidArgument, "\(kind): \(String(describing: status))")
            }
            #expect(try server.store.ledger(id).credentials().isEmpty, "nothing issued")
            await raw.close()
        }
    }

    @Test("§6.1: metadata with a key twice or an entry without a value is refused; a correlation holds 1 to 128 members, and its member_uuids is ignored on save and empty on read")
    func objectShapes() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let owner = server.ownerCredential
            var id: UInt64 = 0
            func save(_ objects: [Healthledger_V1_HealthObject]) async throws -> Healthledger_V1_CallStatus? {
                id += 1
                return try await Self.call(raw, id, .save, owner, Healthledger_V1_SaveRequest.with { $0.objects = objects }).status
            }
            let head = try server.ledger.head()
            var twice = Healthledger_V1_HealthObject(Samples.heartRate(70, at: 0, metadata: ["note": .string("a")]))
            twice.metadata.append(.with { $0.key = "note"; $0.stringValue = "b" })
            let duplicate = try await save([twice])
            #expect(duplicate?.code == .invalidArgument && duplicate?.message.contains("note") == true, "\(String(describing: duplicate))")
            var valueless = Healthledger_V1_HealthObject(Samples.heartRate(70, at: 0))
            valueless.metadata = [.with { $0.key = "note" }]
            let empty = try await save([valueless])
            #expect(empty?.code == .invalidArgument && empty?.message.contains("note") == true, "\(String(describing: empty))")

            let date = Samples.base
            func meal(_ count: Int) throws -> Correlation {
                Correlation(type: try CorrelationType("HKCorrelationTypeIdentifierFood"), start: date, end: date, objects: try (0..<count).map { _ in
                    QuantitySample(type: CorrelationRPCTests.energy, quantity: try Quantity(10, "kcal"), start: date, end: date)
                })
            }
            let none = try await save([Healthledger_V1_HealthObject(.correlation(try meal(0)))])
            #expect(none?.code == .invalidArgument && none?.message.contains("at least one member") == true, "\(String(describing: none))")
            var tooMany = Healthledger_V1_HealthObject(.correlation(try meal(128)))
            tooMany.correlation.objects.append(Healthledger_V1_HealthObject(.quantitySample(
                QuantitySample(type: CorrelationRPCTests.energy, quantity: try Quantity(10, "kcal"), start: date, end: date))))
            let refused = try await save([tooMany])
            #expect(refused?.code == .resourceExhausted && refused?.healthErrorCode == 13, "\(String(describing: refused))")
            #expect(try server.ledger.head() == head, "nothing refused was saved")

            // 128 members, with member_uuids that name nothing: saved, and read back without them.
            let full = try meal(128)
            var named = Healthledger_V1_HealthObject(.correlation(full))
            named.correlation.memberUuids = [Data(UUID().bytes), Data(UUID().bytes)]
            #expect(try await save([named])?.code == .ok)
            id += 1
            let (messages, status) = try await Self.call(raw, id, .fetch, owner, Healthledger_V1_FetchRequest.with { $0.uuid = Data(full.uuid.bytes) })
            #expect(status?.code == .ok)
            let read = try Healthledger_V1_FetchResponse(serializedBytes: try #require(messages.first)).object.correlation
            #expect(read.objects.count == 128 && read.memberUuids.isEmpty)
            #expect(Set(read.objects.map(\.uuid)) == Set(full.objects.map { Data($0.uuid.bytes) }))
            await raw.close()
        }
    }

    @Test("§7.9: an option that does not fit the type names both; collection batches are 1,000 by default and at most 10,000")
    func statisticsEdges() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let owner = server.ownerCredential
            let mismatches: [(String, UInt32, String)] = [
                (Statements.heartRate, 16, "cumulativeSum needs a cumulative type; HKQuantityTypeIdentifierHeartRate is discrete"),
                ("HKQuantityTypeIdentifierStepCount", 2, "discreteAverage needs a discrete type; HKQuantityTypeIdentifierStepCount is cumulative"),
            ]
            for (index, (type, options, reason)) in mismatches.enumerated() {
                let (messages, status) = try await Self.call(raw, UInt64(1 + index), .statistics, owner, Healthledger_V1_StatisticsRequest.with {
                    $0.type = type
                    $0.options = options
                })
                #expect(messages.isEmpty && status?.code == .invalidArgument && status?.message == reason, "\(String(describing: status))")
            }

            try await Statements.saveHeartRates(10_500, on: server)
            var id: UInt64 = 10
            func batches(_ batchSize: UInt32) async throws -> [Int] {
                id += 1
                let request = Healthledger_V1_StatisticsCollectionRequest.with {
                    $0.type = Statements.heartRate
                    $0.startUs = Int64(Samples.base.timeIntervalSince1970 * 1_000_000)
                    $0.endUs = $0.startUs + 10_500 * 60_000_000
                    $0.anchorUs = $0.startUs
                    $0.intervalCount = 1
                    $0.intervalUnit = .minute
                    $0.options = 2
                    $0.batchSize = batchSize
                }
                try await raw.send(try Statements.request(id, .statisticsCollection, owner, request, window: 1_000))
                let (before, status) = await Statements.frames(until: id, on: raw)
                #expect(status?.code == .ok, "\(String(describing: status))")
                return try before.compactMap { frame in
                    guard case .message(let bytes) = frame.kind else { return nil }
                    return try Healthledger_V1_StatisticsBatch(serializedBytes: bytes).results.count
                }
            }
            #expect(try await batches(0) == Array(repeating: 1_000, count: 10) + [500])
            #expect(try await batches(20_000) == [10_000, 500])
            await raw.close()
        }
    }

    @Test("§6: an explicit start_us of 0 is 1970-01-01, an absent one unbounded")
    func explicitZero() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let early = HealthObject.quantitySample(QuantitySample(
                type: Samples.heartRate, quantity: try Quantity(70, "count/min"), start: Date(timeIntervalSince1970: -60), end: Date(timeIntervalSince1970: -60)))
            try await owner.save([early, Samples.heartRate(71, at: 0)])
            let raw = try await RawConnection(port: server.port)
            func count(_ change: (inout Healthledger_V1_SampleQueryRequest) -> Void, id: UInt64) async throws -> Int {
                var request = Healthledger_V1_SampleQueryRequest.with { $0.type = Statements.heartRate }
                change(&request)
                return try await Self.call(raw, id, .querySamples, server.ownerCredential, request).messages
                    .reduce(0) { $0 + (try Healthledger_V1_SampleBatch(serializedBytes: $1).objects.count) }
            }
            #expect(try await count({ _ in }, id: 1) == 2)
            #expect(try await count({ $0.startUs = 0 }, id: 2) == 1)
            #expect(try await count({ $0.endUs = 0 }, id: 3) == 1)
            await raw.close()
            await owner.close()
        }
    }

    @Test("§7.10: an attachment's name is 1 to 255 bytes without control characters, its metadata 64 entries of keys up to 256 and values up to 4,096 bytes; at the limits it is taken")
    func attachmentLimits() async throws {
        try await withTestServer { server in
            let sample = Samples.heartRate(70, at: 0)
            try await server.client().save(sample)
            let raw = try await RawConnection(port: server.port)
            let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3])
            func add(_ id: UInt64, name: String, metadata: [(String, String)] = []) async throws -> Healthledger_V1_CallStatus? {
                try await Self.call(raw, id, .addAttachment, server.ownerCredential, Healthledger_V1_AddAttachmentRequest.with {
                    $0.objectUuid = Data(sample.uuid.bytes)
                    $0.name = name
                    $0.contentType = "image/png"
                    $0.data = png
                    $0.metadata = metadata.map { key, value in .with { $0.key = key; $0.value = value } }
                }).status
            }
            let badName = "an attachment's name is 1 to 255 bytes, without '/' or control characters"
            let badMetadata = "attachment metadata: at most 64 entries, keys of 1 to 256 bytes, values up to 4096"
            let head = try server.ledger.head()
            for (index, (name, metadata, reason)) in [
                (String(repeating: "n", count: 256), [], badName),
                ("scan\u{7}.png", [], badName),
                ("a.png", (0..<65).map { ("k\($0)", "v") }, badMetadata),
                ("a.png", [(String(repeating: "k", count: 257), "v")], badMetadata),
                ("a.png", [("", "v")], badMetadata),
                ("a.png", [("k", String(repeating: "v", count: 4_097))], badMetadata),
            ].enumerated() {
                let status = try await add(UInt64(1 + index), name: name, metadata: metadata)
                #expect(status?.code == .invalidArgument && status?.message == reason, "case \(index): \(String(describing: status))")
            }
            #expect(try server.ledger.head() == head, "nothing refused was written")
            let atLimits = try await add(
                20, name: String(repeating: "n", count: 255),
                metadata: (0..<63).map { ("k\($0)", "v") } + [(String(repeating: "k", count: 256), String(repeating: "v", count: 4_096))])
            #expect(atLimits?.code == .ok, "\(String(describing: atLimits))")
            await raw.close()
        }
    }

    @Test("§7.12: QuerySamples' older workout_uuid and workout_predicate fields select associated samples and matching workouts, ANDed with predicate; workout_predicate needs the workout type and at most 64 terms")
    func olderWorkoutFields() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let run = WorkoutRPCTests.run()
            let ride = Workout(
                configuration: WorkoutConfiguration(activityType: .cycling, locationType: .outdoor),
                start: Samples.base.addingTimeInterval(7_200), end: Samples.base.addingTimeInterval(9_000))
            let heartRates = (0..<4).map { Samples.heartRate(Double(100 + 20 * $0), at: Double(60 * $0)) }
            try await owner.save([.workout(run), .workout(ride)] + heartRates)
            try await owner.add(heartRates.prefix(3).map(\.uuid), to: run.uuid)
            let raw = try await RawConnection(port: server.port)
            var id: UInt64 = 0
            func query(_ change: (inout Healthledger_V1_SampleQueryRequest) -> Void) async throws -> (uuids: [UUID], status: Healthledger_V1_CallStatus?) {
                var request = Healthledger_V1_SampleQueryRequest()
                change(&request)
                id += 1
                let (messages, status) = try await Self.call(raw, id, .querySamples, server.ownerCredential, request)
                let objects = try messages.flatMap { try Healthledger_V1_SampleBatch(serializedBytes: $0).objects }
                return (objects.compactMap { UUID(bytes: $0.uuid) }, status)
            }
            func activity(_ type: WorkoutActivityType) -> Healthledger_V1_WorkoutPredicate { .with { $0.activityType = UInt32(type.rawValue) } }

            let associated = try await query { $0.type = Statements.heartRate; $0.workoutUuid = Data(run.uuid.bytes) }
            #expect(associated.status?.code == .ok && associated.uuids == heartRates.prefix(3).map(\.uuid))
            let above = try await query {
                $0.type = Statements.heartRate
                $0.workoutUuid = Data(run.uuid.bytes)
                $0.predicate = .with { $0.quantity = .with { $0.comparison = .greater; $0.quantity = .with { $0.value = 110; $0.unit = "count/min" } } }
            }
            #expect(above.uuids == [heartRates[1].uuid, heartRates[2].uuid], "ANDed with predicate")
            let rides = try await query { $0.type = "HKWorkoutTypeIdentifier"; $0.workoutPredicate = activity(.cycling) }
            #expect(rides.status?.code == .ok && rides.uuids == [ride.uuid])
            let neither = try await query {
                $0.type = "HKWorkoutTypeIdentifier"
                $0.workoutPredicate = activity(.cycling)
                $0.predicate = .with { $0.workout = activity(.running) }
            }
            #expect(neither.status?.code == .ok && neither.uuids.isEmpty, "ANDed with predicate")
            let sixtyFour = try await query {
                $0.type = "HKWorkoutTypeIdentifier"
                $0.workoutPredicate = .with { $0.anyOf.predicates = Array(repeating: activity(.running), count: 63) }
            }
            #expect(sixtyFour.status?.code == .ok && sixtyFour.uuids == [run.uuid], "64 terms (63 and the any-of)")
            let sixtyFive = try await query {
                $0.type = "HKWorkoutTypeIdentifier"
                $0.workoutPredicate = .with { $0.anyOf.predicates = Array(repeating: activity(.running), count: 64) }
            }
            #expect(sixtyFive.status?.code == .invalidArgument && sixtyFive.status?.message == "a workout predicate has at most 64 terms", "\(String(describing: sixtyFive.status))")
            let wrongType = try await query { $0.type = Statements.heartRate; $0.workoutPredicate = activity(.running) }
            #expect(wrongType.status?.code == .invalidArgument && wrongType.uuids.isEmpty, "\(String(describing: wrongType.status))")
            await raw.close()
            await owner.close()
        }
    }

    @Test("§7.13: a predicate nests 16 levels, holds 256 terms and lists 10,000 values; one more of each is refused with its message")
    func predicateLimits() async throws {
        try await withTestServer { server in
            let sample = Samples.heartRate(70, at: 0)
            try await server.client().save(sample)
            let raw = try await RawConnection(port: server.port)
            let match: Healthledger_V1_Predicate = .with { $0.uuids.uuids = [Data(sample.uuid.bytes)] }
            func nested(_ levels: Int) -> Healthledger_V1_Predicate {
                (1..<levels).reduce(match) { inner, _ in .with { $0.allOf.predicates = [inner] } }
            }
            func terms(_ count: Int) -> Healthledger_V1_Predicate { .with { $0.anyOf.predicates = Array(repeating: match, count: count - 1) } }
            func values(_ count: Int) -> Healthledger_V1_Predicate {
                .with { $0.uuids.uuids = [Data(sample.uuid.bytes)] + (1..<count).map { _ in Data(UUID().bytes) } }
            }
            let cases: [(Healthledger_V1_Predicate, String?)] = [
                (nested(16), nil), (nested(17), "a predicate nests at most 16 levels"),
                (terms(256), nil), (terms(257), "a predicate has at most 256 terms"),
                (values(10_000), nil), (values(10_001), "a predicate lists at most 10000 UUIDs"),
            ]
            for (index, (predicate, refusal)) in cases.enumerated() {
                let (messages, status) = try await Self.call(raw, UInt64(1 + index), .querySamples, server.ownerCredential, Healthledger_V1_SampleQueryRequest.with {
                    $0.type = Statements.heartRate
                    $0.predicate = predicate
                })
                if let refusal {
                    #expect(messages.isEmpty && status?.code == .invalidArgument && status?.message == refusal, "case \(index): \(String(describing: status))")
                } else {
                    #expect(status?.code == .ok && messages.count == 1, "case \(index): \(String(describing: status))")
                }
            }
            await raw.close()
        }
    }
}
