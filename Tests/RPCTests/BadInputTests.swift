import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import LedgerSchema
import NIOCore
import NIOEmbedded
import SwiftProtobuf
import Testing

@Suite("Bad input", .timeLimit(.minutes(3)))
struct BadInputTests {
    /// The status a refused request gets.
    struct Refusal {
        let code: Healthledger_V1_StatusCode
        let message: String
        init(_ code: Healthledger_V1_StatusCode, _ message: String) {
            self.code = code
            self.message = message
        }
    }

    static func request(_ id: UInt64, _ method: String, credential: String, payload: [UInt8] = []) -> Healthledger_V1_Frame {
        var frame = Healthledger_V1_Frame()
        frame.callID = id
        frame.request = .with {
            $0.method = method
            $0.credential = credential
            $0.payload = Data(payload)
        }
        return frame
    }

    /// Sends each of `methods` a payload that is not protobuf, on the next ids after `id`, and
    /// expects each refused with `invalidArgument` (whose message contains `saying`, when given).
    static func expectGarbageRefused(
        _ methods: [RPCMethod], on raw: RawConnection, after id: inout UInt64, credential: String, saying: String? = nil
    ) async throws {
        for method in methods {
            id += 1
            try await raw.send(request(id, method.rawValue, credential: credential, payload: [0xFF, 0xFF, 0xFF]))
            let status = try #require(await raw.status(of: id))
            #expect(status.code == .invalidArgument && saying.map(status.message.contains) != false, "\(method) \(status)")
        }
    }

    @Test("the decoder refuses an oversize frame as soon as its header arrives")
    func oversizeAtHeader() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameSize: 1024)))
        var header = channel.allocator.buffer(capacity: 5)
        header.writeInteger(UInt8(0))
        header.writeInteger(UInt32(1 << 30))
        // Only the 5 header bytes: no body was sent, yet the frame is refused.
        let error = #expect(throws: FrameError.self) { try channel.writeInbound(header) }
        #expect(error == .frameTooLarge(declared: 1 << 30, limit: 1024))
        _ = try? channel.finish()
    }

    @Test("the decoder reassembles split frames, flags malformed bodies, and rejects bad flags and truncation")
    func decoderCases() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameSize: 1024)))
        let bytes = RawConnection.encode(Self.request(7, RPCMethod.ping.rawValue, credential: "x"))
        for byte in bytes { try channel.writeInbound(channel.allocator.buffer(bytes: [byte])) }
        guard case .frame(let frame)? = try channel.readInbound(as: InboundFrame.self) else { Issue.record("no frame"); return }
        #expect(frame.callID == 7)
        try channel.writeInbound(channel.allocator.buffer(bytes: [0, 0, 0, 0, 3, 0xFF, 0xFF, 0xFF]))
        guard case .malformed? = try channel.readInbound(as: InboundFrame.self) else { Issue.record("not flagged malformed"); return }
        #expect(throws: FrameError.self) { try channel.writeInbound(channel.allocator.buffer(bytes: [9, 0, 0, 0, 1, 0])) }
        _ = try? channel.finish()

        let truncated = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder()))
        try truncated.writeInbound(truncated.allocator.buffer(bytes: Array(bytes.prefix(bytes.count - 2))))
        #expect(throws: FrameError.self) { try truncated.finish() }
    }

    @Test("property: 100,000 random and mutated frames through the decoder never crash it")
    func decoderFuzz() throws {
        var rng = SystemRandomNumberGenerator()
        let valid = RawConnection.encode(Self.request(1, RPCMethod.save.rawValue, credential: "hl1:a:0123456789abcdef:s", payload: Array(repeating: 7, count: 40)))
        var frames = 0
        var channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameSize: 4096)))
        for round in 0..<100_000 {
            var bytes: [UInt8]
            switch round % 4 {
            case 0: bytes = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            case 1:
                bytes = valid
                for _ in 0..<Int.random(in: 1...4, using: &rng) { bytes[Int.random(in: 5..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            case 2: bytes = Array(valid.prefix(Int.random(in: 0...valid.count, using: &rng)))
            default:
                bytes = valid
                bytes[Int.random(in: 0..<5, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            do {
                try channel.writeInbound(channel.allocator.buffer(bytes: bytes))
                while let _ = try channel.readInbound(as: InboundFrame.self) { frames += 1 }
            } catch {
                // The stream is no longer trustworthy: a real connection closes here. Start a new one.
                _ = try? channel.finish()
                channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maximumFrameSize: 4096)))
            }
        }
        #expect(frames > 1000)
        _ = try? channel.finish()
    }

    @Test("each bad call gets a clear status; the connection lives on while its bytes can be trusted")
    func badCalls() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, maximumFrameSize: 64 << 10, maximumConcurrentCalls: 2)) { server in
            let raw = try await RawConnection(port: server.port)

            try await raw.send(Self.request(1, "healthledger.v1.Ledger/Nope", credential: server.ownerCredential))
            #expect(await raw.status(of: 1)?.code == .unimplemented)

            try await raw.send(Self.request(2, RPCMethod.save.rawValue, credential: server.ownerCredential, payload: [0xFF, 0xFF, 0xFF]))
            let invalid = await raw.status(of: 2)
            #expect(invalid?.code == .invalidArgument && invalid?.message.contains("SaveRequest") == true)

            try await raw.send(Self.request(3, RPCMethod.ping.rawValue, credential: ""))
            #expect(await raw.status(of: 3)?.code == .unauthenticated)

            // A body that is not a Frame: answered on call 0, connection kept.
            try await raw.send([0, 0, 0, 0, 3, 0xFF, 0xFF, 0xFF])
            #expect(await raw.status(of: 0)?.code == .invalidArgument)
            try await raw.send(Self.request(4, RPCMethod.ping.rawValue, credential: server.ownerCredential))
            #expect(await raw.status(of: 4)?.code == .ok)

            // The per-connection call limit (2): two streams held open by their window, a third refused.
            try await server.client().save((0..<100).map { Samples.heartRate(60, at: Double($0)) })
            let query: [UInt8] = try Healthledger_V1_SampleQueryRequest.with {
                $0.type = Samples.heartRate.identifier
                $0.batchSize = 1
            }.serializedBytes()
            for id: UInt64 in [10, 11] {
                var frame = Self.request(id, RPCMethod.querySamples.rawValue, credential: server.ownerCredential, payload: query)
                frame.request.initialWindow = 1
                try await raw.send(frame)
            }
            // (Frames of one connection are taken in order: both streams are open when 12 arrives.)
            try await raw.send(Self.request(12, RPCMethod.ping.rawValue, credential: server.ownerCredential))
            let refused = await raw.status(of: 12)
            #expect(refused?.code == .resourceExhausted && refused?.message == "2 calls are already open on this connection, its limit")
            // A request on an id still open is answered on call 0, never on the running call's id.
            try await raw.send(Self.request(10, RPCMethod.ping.rawValue, credential: server.ownerCredential))
            let reused = await raw.status(of: 0)
            #expect(reused?.code == .invalidArgument && reused?.message == "call id 10 is already in use")

            // An oversize frame: the header alone gets a go-away and the connection closes.
            try await raw.send([0] + withUnsafeBytes(of: UInt32(1 << 30).bigEndian, Array.init))
            var sawGoAway = false
            while let frame = await raw.next() {
                if case .frame(let frame) = frame, case .goAway(let goAway) = frame.kind {
                    sawGoAway = goAway.reason.contains("exceeds the limit")
                }
            }
            #expect(sawGoAway)
            // The server is still up for everyone else.
            #expect(try await server.client().ping().ledgerID == "alice")
        }
    }

    @Test("authorization methods answer malformed and hostile requests with a clear status and record nothing")
    func badAuthorizationCalls() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let head = try server.ledger.head()
            let unknownType = "HKQuantityTypeIdentifierNope"
            // Each request with what the owner and the app get: a method reserved to one of them refuses the
            // other before it looks at the fields (PROTOCOL.md §4.2).
            let hostile: [(RPCMethod, any SwiftProtobuf.Message, owner: Refusal, app: Refusal)] = [
                (.requestAuthorization, Healthledger_V1_AuthorizationRequest.with { $0.readTypes = [unknownType] },
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.invalidArgument, "Unknown object type 'HKQuantityTypeIdentifierNope'")),
                (.requestAuthorization, Healthledger_V1_AuthorizationRequest.with { $0.shareTypes = Array(repeating: Samples.heartRate.identifier, count: 1) + ["", "\u{0}"] },
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.invalidArgument, "Unknown object type ''")),
                (.requestAuthorization, Healthledger_V1_AuthorizationRequest(),
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.invalidArgument, "nothing requested: both the share and the read sets are empty")),
                // Refused before a type is read: the status is answered on the event loop.
                (.getRequestStatus, Healthledger_V1_AuthorizationRequest.with { $0.readTypes = Array(repeating: Samples.heartRate.identifier, count: 1_001) },
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.resourceExhausted, "a request names at most 1000 types")),
                (.requestAuthorization, Healthledger_V1_AuthorizationRequest.with { $0.shareTypes = Array(repeating: Samples.heartRate.identifier, count: 1_001) },
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.resourceExhausted, "a request names at most 1000 types")),
                (.getRequestStatus, Healthledger_V1_AuthorizationRequest.with { $0.readTypes = [unknownType] },
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.invalidArgument, "Unknown object type 'HKQuantityTypeIdentifierNope'")),
                (.authorizationStatus, Healthledger_V1_AuthorizationStatusRequest(),
                 owner: Refusal(.invalidArgument, "ask for 1 to 1000 types"), app: Refusal(.invalidArgument, "ask for 1 to 1000 types")),
                (.authorizationStatus, Healthledger_V1_AuthorizationStatusRequest.with { $0.types = Array(repeating: Samples.heartRate.identifier, count: 1_001) },
                 owner: Refusal(.invalidArgument, "ask for 1 to 1000 types"), app: Refusal(.invalidArgument, "ask for 1 to 1000 types")),
                (.requestObjectReadAuthorization, Healthledger_V1_ObjectReadAuthorizationRequest.with { $0.type = Samples.heartRate.identifier },
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.invalidArgument, "HKQuantityTypeIdentifierHeartRate is not read per object; request it with requestAuthorization")),
                (.requestObjectReadAuthorization, Healthledger_V1_ObjectReadAuthorizationRequest.with {
                    $0.type = "HKVisionPrescriptionTypeIdentifier"
                    $0.startUs = 10
                    $0.endUs = 5
                },
                 owner: Refusal(.invalidArgument, "only apps request authorization; the owner has it all"), app: Refusal(.invalidArgument, "the interval ends before it starts")),
                (.decideAuthorization, Healthledger_V1_DecideAuthorizationRequest.with {
                    $0.app = TestServer.appSource.bundleIdentifier
                    $0.type = Samples.heartRate.identifier
                    $0.direction = .read
                },
                 owner: Refusal(.invalidArgument, "the decision must be granted, denied or revoked"), app: Refusal(.permissionDenied, "only the owner manages authorization")),
                (.decideAuthorization, Healthledger_V1_DecideAuthorizationRequest.with {
                    $0.app = String(repeating: "x", count: 300)
                    $0.type = Samples.heartRate.identifier
                    $0.direction = .read
                    $0.decision = .granted
                },
                 owner: Refusal(.invalidArgument, "an app is named by its bundle identifier (1–255 bytes)"), app: Refusal(.permissionDenied, "only the owner manages authorization")),
                (.decideAuthorization, Healthledger_V1_DecideAuthorizationRequest.with {
                    $0.app = TestServer.appSource.bundleIdentifier
                    $0.type = Samples.heartRate.identifier
                    $0.decision = .granted
                },
                 owner: Refusal(.invalidArgument, "the direction must be share or read"), app: Refusal(.permissionDenied, "only the owner manages authorization")),
                (.setObjectReadSelection, Healthledger_V1_ObjectReadSelectionRequest.with {
                    $0.app = TestServer.appSource.bundleIdentifier
                    $0.type = "HKVisionPrescriptionTypeIdentifier"
                    $0.uuids = [Data([1, 2, 3])]
                },
                 owner: Refusal(.invalidArgument, "a UUID must be 16 bytes"), app: Refusal(.permissionDenied, "only the owner manages authorization")),
                (.setObjectReadSelection, Healthledger_V1_ObjectReadSelectionRequest.with {
                    $0.app = TestServer.appSource.bundleIdentifier
                    $0.type = "HKVisionPrescriptionTypeIdentifier"
                    $0.uuids = (0..<10_001).map { _ in Data(UUID().bytes) }
                },
                 owner: Refusal(.resourceExhausted, "a selection holds at most 10000 objects, got 10001"), app: Refusal(.permissionDenied, "only the owner manages authorization")),
                (.sourcePriority, Healthledger_V1_SourcePriorityRequest.with { $0.type = unknownType },
                 owner: Refusal(.invalidArgument, "Unknown object type 'HKQuantityTypeIdentifierNope'"), app: Refusal(.permissionDenied, "only the owner manages authorization")),
                (.setSourcePriority, Healthledger_V1_SetSourcePriorityRequest.with {
                    $0.type = Samples.heartRate.identifier
                    $0.bundleIdentifiers = ["com.example.nobody"]
                },
                 owner: Refusal(.notFound, "'com.example.nobody' has saved no HKQuantityTypeIdentifierHeartRate"), app: Refusal(.permissionDenied, "only the owner manages authorization")),
                (.characteristics, Healthledger_V1_CharacteristicsRequest(),
                 owner: Refusal(.invalidArgument, "ask for at least one characteristic"), app: Refusal(.invalidArgument, "ask for at least one characteristic")),
                (.characteristics, Healthledger_V1_CharacteristicsRequest.with { $0.types = Array(repeating: ObjectType.bloodType.identifier, count: 17) },
                 owner: Refusal(.invalidArgument, "ask for at most 16 characteristics"), app: Refusal(.invalidArgument, "ask for at most 16 characteristics")),
                (.characteristics, Healthledger_V1_CharacteristicsRequest.with { $0.types = [Samples.heartRate.identifier] },
                 owner: Refusal(.invalidArgument, "HKQuantityTypeIdentifierHeartRate is not a characteristic type"), app: Refusal(.invalidArgument, "HKQuantityTypeIdentifierHeartRate is not a characteristic type")),
                (.setCharacteristic, Healthledger_V1_Characteristic.with { $0.type = ObjectType.bloodType.identifier; $0.value = 99 },
                 owner: Refusal(.invalidArgument, "value must be one of notSet 0, aPositive 1, aNegative 2, bPositive 3, bNegative 4, abPositive 5, abNegative 6, oPositive 7, oNegative 8, got 99"), app: Refusal(.permissionDenied, "only the owner sets characteristics")),
                (.setCharacteristic, Healthledger_V1_Characteristic.with { $0.type = ObjectType.bloodType.identifier; $0.value = Int64.min },
                 owner: Refusal(.invalidArgument, "value must be one of notSet 0, aPositive 1, aNegative 2, bPositive 3, bNegative 4, abPositive 5, abNegative 6, oPositive 7, oNegative 8, got -9223372036854775808"), app: Refusal(.permissionDenied, "only the owner sets characteristics")),
                (.setCharacteristic, Healthledger_V1_Characteristic.with { $0.type = ObjectType.dateOfBirth.identifier; $0.year = 2024; $0.month = 2; $0.day = 30 },
                 owner: Refusal(.invalidArgument, "2024-2-30 is not a date of birth (a calendar date from 1850)"), app: Refusal(.permissionDenied, "only the owner sets characteristics")),
                (.setCharacteristic, Healthledger_V1_Characteristic.with { $0.type = ObjectType.dateOfBirth.identifier; $0.year = Int32.max; $0.month = -1; $0.day = 1 },
                 owner: Refusal(.invalidArgument, "2147483647--1-1 is not a date of birth (a calendar date from 1850)"), app: Refusal(.permissionDenied, "only the owner sets characteristics")),
                (.setCharacteristic, Healthledger_V1_Characteristic.with { $0.type = Samples.heartRate.identifier; $0.value = 1 },
                 owner: Refusal(.invalidArgument, "HKQuantityTypeIdentifierHeartRate is not a characteristic type"), app: Refusal(.permissionDenied, "only the owner sets characteristics")),
            ]
            var id: UInt64 = 0
            for (method, message, owner, app) in hostile {
                for (credential, expected) in [(server.ownerCredential, owner), (server.appCredential, app)] {
                    id += 1
                    try await raw.send(Self.request(id, method.rawValue, credential: credential, payload: try message.serializedBytes()))
                    let status = try #require(await raw.status(of: id))
                    #expect(status.code == expected.code && status.message == expected.message, "\(method), \(credential == server.ownerCredential ? "owner" : "app"): \(status)")
                }
            }
            // Bytes that are no message at all, to every authorization method.
            let authorizationMethods: [RPCMethod] = [
                .requestAuthorization, .getRequestStatus, .authorizationStatus, .requestObjectReadAuthorization, .authorizations,
                .pendingAuthorizations, .decideAuthorization, .setObjectReadSelection, .authorizationHistory, .sourcePriority, .setSourcePriority,
                .characteristics, .setCharacteristic,
            ]
            try await Self.expectGarbageRefused(authorizationMethods, on: raw, after: &id, credential: server.ownerCredential, saying: "not a valid")
            #expect(try server.ledger.head() == head, "no refused request wrote anything")
            await raw.close()
        }
    }

    @Test("a request larger than the client's frame limit fails in the SDK with resourceExhausted; nothing is sent, the connection and a stream on it live on")
    func oversizeRequestStaysLocal() async throws {
        try await withTestServer { server in
            let limit = 16 << 10
            let store = HealthStore(configuration: .init(port: server.port, credential: server.ownerCredential, maximumFrameSize: limit))
            let type = Samples.heartRate.objectType
            // A stream on the connection, to show that the refusal does not cost it.
            var updates = try await store.observe(type).makeAsyncIterator()
            let batch = (0..<400).map { Samples.heartRate(60, at: Double($0)) }
            #expect(HealthObject.encodedMessage(of: batch).count > limit)
            let error = await #expect(throws: RPCError.self) { try await store.save(batch) }
            #expect(error?.code == .resourceExhausted)
            #expect(error?.message.contains("more than a frame of at most \(limit) bytes holds") == true)
            #expect(try await SampleQueryDescriptor(type: type).result(for: store).isEmpty, "nothing was saved")
            // The same objects in parts that fit go through on the same connection, and the stream hears of them.
            for start in stride(from: 0, to: 400, by: 100) { _ = try await store.save(Array(batch[start..<(start + 100)])) }
            // (Read through another connection: 400 samples make an answer larger than this client's limit.)
            #expect(try await SampleQueryDescriptor(type: type).result(for: server.client()).count == 400)
            #expect(try await updates.next() != nil, "the observer, opened before the refusal, hears of the saves")
            await store.close()
        }
    }

    @Test("Save reads its objects straight from the payload: malformed bytes refuse the whole request, an invalid object is named by its index, unknown fields are skipped")
    func savePayloads() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let head = try server.ledger.head()
            let valid = Samples.heartRate(70, at: 0)
            let object = valid.encodedBytes()
            // The object's length as a varint.
            var length: [UInt8] = []
            var count = object.count
            while count >= 0x80 {
                length.append(UInt8(count & 0x7F) | 0x80)
                count >>= 7
            }
            length.append(UInt8(count))
            let malformed: [(String, [UInt8])] = [
                ("no message at all", [0xFF, 0xFF, 0xFF]),
                ("objects as a varint", [0x08, 0x01]),
                ("an object cut short", [0x0A] + length + object.prefix(object.count - 3)),
                ("a valid object, then one that is no message", [0x0A] + length + object + [0x0A, 0x03, 0xFF, 0xFF, 0xFF]),
                ("a group where the objects are", [0x0B, 0x0C]),
            ]
            var id: UInt64 = 0
            for (what, payload) in malformed {
                id += 1
                try await raw.send(Self.request(id, RPCMethod.save.rawValue, credential: server.ownerCredential, payload: payload))
                let status = try #require(await raw.status(of: id))
                #expect(status.code == .invalidArgument && status.message == "the request is not a valid healthledger.v1.SaveRequest", "\(what): \(status)")
            }
            // A well-formed object the model refuses (a type it does not know), second in the request.
            var unknown = Healthledger_V1_HealthObject(valid)
            unknown.uuid = Data(UUID().bytes)
            unknown.type = "HKQuantityTypeIdentifierNoSuchThing"
            id += 1
            try await raw.send(Self.request(
                id, RPCMethod.save.rawValue, credential: server.ownerCredential,
                payload: try Healthledger_V1_SaveRequest.with { $0.objects = [Healthledger_V1_HealthObject(Samples.heartRate(71, at: 1)), unknown] }.serializedBytes()))
            let refused = try #require(await raw.status(of: id))
            #expect(refused.code == .invalidArgument && refused.message.hasPrefix("object 1: "), "\(refused)")
            #expect(try server.ledger.head() == head, "no refused request wrote anything")

            // Unknown fields around the objects are skipped, as any protobuf reader does.
            id += 1
            try await raw.send(Self.request(
                id, RPCMethod.save.rawValue, credential: server.ownerCredential, payload: [0x10, 0x05, 0x0A] + length + object + [0x1A, 0x01, 0x00]))
            let saved = try #require(await raw.status(of: id))
            #expect(saved.code == .ok, "\(saved)")
            #expect(try server.ledger.object(with: valid.uuid, as: .owner) == valid)
            await raw.close()
        }
    }

    @Test("states of mind and medications as a client writes them on the wire: unknown names and kinds, lists longer than their names, and empty optional texts")
    func stateOfMindAndMedicationPayloads() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let head = try server.ledger.head()
            var id: UInt64 = 0
            func save(_ object: Healthledger_V1_HealthObject) async throws -> Healthledger_V1_CallStatus {
                id += 1
                try await raw.send(Self.request(
                    id, RPCMethod.save.rawValue, credential: server.ownerCredential,
                    payload: try Healthledger_V1_SaveRequest.with { $0.objects = [object] }.serializedBytes()))
                return try #require(await raw.status(of: id))
            }
            let mood = Healthledger_V1_HealthObject(.stateOfMind(StateOfMind(date: Samples.base, kind: .dailyMood, valence: 0.2, labels: [.calm])))
            func changed(_ change: (inout Healthledger_V1_StateOfMindBody) -> Void) -> Healthledger_V1_HealthObject {
                var copy = mood
                copy.uuid = Data(UUID().bytes)
                change(&copy.stateOfMind)
                return copy
            }
            let refusals: [(Healthledger_V1_HealthObject, String)] = [
                (changed { $0.labels = ["calm", "sleepy"] }, "labels[1] 'sleepy' is not a state of mind label"),
                (changed { $0.labels = Array(repeating: "calm", count: 100_000) }, "labels holds each of the 38 labels at most once, got 100000"),
                (changed { $0.associations = ["work", "Work"] }, "associations[1] 'Work' is not a state of mind association"),
                (changed { $0.kind = 3 }, "kind must be one of"),
                (changed { $0.valence = .infinity }, "valence must be from -1"),
            ]
            for (object, message) in refusals {
                let status = try await save(object)
                #expect(status.code == .invalidArgument && status.message.contains(message), "\(message): \(status)")
            }
            #expect(try server.ledger.head() == head, "no refused object was written")

            // A medication whose optional texts a client left empty: its form reads as unknown, a
            // dose's unit as count; a nickname set empty is refused.
            let concept = MedicationConcept(identifier: "rx-1", displayText: "Aspirin", generalForm: .tablet)
            var medication = Healthledger_V1_HealthObject(.userAnnotatedMedication(UserAnnotatedMedication(medication: concept, recorded: Samples.base)))
            medication.userAnnotatedMedication.medication.generalForm = ""
            #expect(try await save(medication).code == .ok)
            var dose = Healthledger_V1_HealthObject(.medicationDoseEvent(MedicationDoseEvent(
                medicationConceptIdentifier: "rx-1", logStatus: .taken, doseQuantity: 1, start: Samples.base, end: Samples.base)))
            dose.medicationDoseEvent.unit = ""
            #expect(try await save(dose).code == .ok)
            let stored = try server.ledger.object(with: UUID(bytes: dose.uuid)!, as: .owner)
            #expect(stored?.medicationDoseEvent?.unit == .count)
            #expect(try server.ledger.object(with: UUID(bytes: medication.uuid)!, as: .owner)?.userAnnotatedMedication?.medication.generalForm == .unknown)
            var named = medication
            named.uuid = Data(UUID().bytes)
            named.userAnnotatedMedication.nickname = ""
            let nickname = try await save(named)
            #expect(nickname.code == .invalidArgument && nickname.message.contains("nickname must be 1–4096 bytes"), "\(nickname)")
            var status = dose
            status.uuid = Data(UUID().bytes)
            status.medicationDoseEvent.logStatus = 9
            let badStatus = try await save(status)
            #expect(badStatus.code == .invalidArgument && badStatus.message.contains("logStatus must be one of"), "\(badStatus)")
            await raw.close()
        }
    }

    @Test("change queries and observers answer malformed and hostile requests with invalidArgument")
    func badChangeCalls() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let head = try server.ledger.head()
            let heartRate = Samples.heartRate.identifier
            let changeRequests: [Healthledger_V1_ChangeQueryRequest] = [
                .with { $0.type = "HKQuantityTypeIdentifierNope" },
                .with { $0.type = "" },
                .with {
                    $0.type = heartRate
                    $0.startUs = 10
                    $0.endUs = 5
                },
                .with {
                    $0.type = heartRate
                    $0.anchor = Data([1, 2, 3])
                },
                .with {
                    $0.type = heartRate
                    $0.anchor = Data(repeating: 0xAB, count: 100_000)
                },
                .with {
                    $0.type = "HKCharacteristicTypeIdentifierDateOfBirth"
                    $0.anchor = Data(repeating: 0, count: 57)
                },
            ]
            var id: UInt64 = 0
            for method in [RPCMethod.queryChanges, .watchChanges] {
                for request in changeRequests + [.with { $0.type = heartRate; $0.limit = 10 }] where method == .watchChanges || request.limit == 0 {
                    for credential in [server.ownerCredential, server.appCredential] {
                        id += 1
                        try await raw.send(Self.request(id, method.rawValue, credential: credential, payload: try request.serializedBytes()))
                        let status = try #require(await raw.status(of: id))
                        #expect(status.code == .invalidArgument && !status.message.isEmpty, "\(method) \(request) \(status)")
                    }
                }
            }
            let observeRequests: [Healthledger_V1_ObserveRequest] = [
                .with { $0.type = "nope" },
                .with {
                    $0.type = heartRate
                    $0.startUs = 10
                    $0.endUs = -10
                },
            ]
            for request in observeRequests {
                id += 1
                try await raw.send(Self.request(id, RPCMethod.observe.rawValue, credential: server.appCredential, payload: try request.serializedBytes()))
                let status = try #require(await raw.status(of: id))
                #expect(status.code == .invalidArgument && !status.message.isEmpty, "observe \(request) \(status)")
            }
            try await Self.expectGarbageRefused([.queryChanges, .watchChanges, .observe], on: raw, after: &id, credential: server.ownerCredential, saying: "not a valid")
            #expect(try server.ledger.head() == head, "no refused request wrote anything")
            await raw.close()
        }
    }

    @Test("calls arriving in one read are all answered, each response before its status, the answers given at once and the ones from tasks alike")
    func callsInOneRead() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            // Pings alone, answered in the read that brings them; then every tenth call a save,
            // answered from a task.
            for (ids, saves) in [(1...50 as ClosedRange<UInt64>, false), (51...150, true)] {
                var bytes: [UInt8] = []
                for id in ids {
                    let save = saves && id % 10 == 0
                    let payload: [UInt8] = save ? try Healthledger_V1_SaveRequest.with { $0.objects = [.init(Samples.heartRate(60, at: Double(id)))] }.serializedBytes() : []
                    bytes += RawConnection.encode(Self.request(id, (save ? RPCMethod.save : .ping).rawValue, credential: server.ownerCredential, payload: payload))
                }
                try await raw.send(bytes)
                var responded = Set<UInt64>()
                var ended = Set<UInt64>()
                while ended.count < ids.count, let next = await raw.next(timeout: .seconds(60)) {
                    guard case .frame(let frame) = next else { continue }
                    switch frame.kind {
                    case .message: #expect(responded.insert(frame.callID).inserted && !ended.contains(frame.callID))
                    case .status(let status):
                        #expect(status.code == .ok && responded.contains(frame.callID))
                        ended.insert(frame.callID)
                    default: Issue.record("unexpected frame \(frame)")
                    }
                }
                #expect(ended == Set(ids))
            }
            await raw.close()
        }
    }

    @Test("a half-close: running calls still get their status, long-running ones end cancelled, a frame cut short gets the go-away that names it, then the connection closes")
    func halfClose() async throws {
        try await withTestServer { server in
            // A ping and a watch, then the end of the stream: the ping's status comes, the watch
            // (which would never end by itself) ends cancelled, then the close.
            let polite = try await RawConnection(port: server.port)
            try await polite.send(Self.request(1, RPCMethod.ping.rawValue, credential: server.ownerCredential))
            let watch = Healthledger_V1_ChangeQueryRequest.with { $0.type = "HKQuantityTypeIdentifierHeartRate" }
            try await polite.send(Self.request(2, RPCMethod.watchChanges.rawValue, credential: server.ownerCredential, payload: try watch.serializedBytes()))
            try await polite.closeOutput()
            var statuses: [UInt64: Healthledger_V1_CallStatus] = [:]
            while let next = await polite.next(timeout: .seconds(60)) {
                if case .frame(let frame) = next, case .status(let status) = frame.kind { statuses[frame.callID] = status }
            }
            #expect(statuses[1]?.code == .ok)
            #expect(statuses[2]?.code == .cancelled && statuses[2]?.message == "the client closed its side of the connection")
            #expect(statuses.count == 2, "the server closes once its calls are done")

            // Half a frame, then the end of the stream: a go-away saying what is missing, then the close.
            let cut = try await RawConnection(port: server.port)
            let frame = RawConnection.encode(Self.request(1, RPCMethod.ping.rawValue, credential: server.ownerCredential))
            try await cut.send(Array(frame.prefix(frame.count - 3)))
            try await cut.closeOutput()
            var reason: String?
            while let next = await cut.next(timeout: .seconds(60)) {
                if case .frame(let frame) = next, case .goAway(let goAway) = frame.kind { reason = goAway.reason }
            }
            #expect(reason == "the stream ended 3 bytes short of a frame", "\(String(describing: reason))")
        }
    }

    @Test("audit requests: unknown kinds and actors, bad types, UUIDs and ranges, and a watch with an end get invalidArgument")
    func badAuditCalls() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let requests: [(Healthledger_V1_AuditRequest, [RPCMethod])] = [
                (.with { $0.kinds = [.init(rawValue: 99)!] }, [.audit, .watchAudit]),
                (.with { $0.actor.kind = .init(rawValue: 9)! }, [.audit, .watchAudit]),
                (.with { $0.type = "HKQuantityTypeIdentifierNope" }, [.audit, .watchAudit]),
                (.with { $0.objectUuid = Data([1, 2, 3]) }, [.audit, .watchAudit]),
                (.with { $0.fromSequence = 10; $0.toSequence = 5 }, [.audit]),
                (.with { $0.sinceUs = 10; $0.untilUs = 5 }, [.audit]),
                (.with { $0.toSequence = 5 }, [.watchAudit]),
                (.with { $0.untilUs = 5 }, [.watchAudit]),
            ]
            var id: UInt64 = 0
            for (request, methods) in requests {
                for method in methods {
                    id += 1
                    try await raw.send(Self.request(id, method.rawValue, credential: server.ownerCredential, payload: try request.serializedBytes()))
                    let status = try #require(await raw.status(of: id))
                    #expect(status.code == .invalidArgument && !status.message.isEmpty, "\(method) \(request) \(status)")
                }
            }
            try await Self.expectGarbageRefused([.audit], on: raw, after: &id, credential: server.ownerCredential)
            await raw.close()
        }
    }

    @Test("statistics requests: unfit options, hostile dates, zones and intervals get invalidArgument, fast")
    func badStatisticsCalls() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let steps = "HKQuantityTypeIdentifierStepCount"
            let statistics: [Healthledger_V1_StatisticsRequest] = [
                .with { $0.type = steps; $0.options = 2 },
                .with { $0.type = Samples.heartRate.identifier; $0.options = 16 },
                .with { $0.type = steps },
                .with { $0.type = steps; $0.options = 1 << 20 },
                .with { $0.type = "HKCategoryTypeIdentifierSleepAnalysis"; $0.options = 32 },
                .with { $0.type = steps; $0.options = 16; $0.startUs = 10; $0.endUs = 5 },
            ]
            let year = Int64(365 * 86_400) * 1_000_000
            let collections: [Healthledger_V1_StatisticsCollectionRequest] = [
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.intervalCount = 1; $0.intervalUnit = .unspecified },
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.intervalCount = 0; $0.intervalUnit = .day },
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.intervalCount = UInt32.max; $0.intervalUnit = .day },
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.intervalCount = 1; $0.intervalUnit = .minute },
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.intervalCount = 1; $0.intervalUnit = .day; $0.timeZone = "Mars/Olympus" },
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.intervalCount = 1; $0.intervalUnit = .day; $0.timeZone = String(repeating: "x", count: 10_000) },
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.intervalCount = 1; $0.intervalUnit = .day; $0.timeZone = "UTC\u{0}garbage" },
                .with { $0.type = steps; $0.options = 16; $0.startUs = Int64.min; $0.endUs = Int64.max; $0.intervalCount = 1; $0.intervalUnit = .year },
                .with { $0.type = steps; $0.options = 16; $0.endUs = year; $0.anchorUs = Int64.max; $0.intervalCount = 1; $0.intervalUnit = .month },
                .with { $0.type = steps; $0.options = 16; $0.startUs = year; $0.endUs = 0; $0.intervalCount = 1; $0.intervalUnit = .day },
                .with { $0.type = steps; $0.options = 2; $0.endUs = year; $0.intervalCount = 1; $0.intervalUnit = .day },
            ]
            // Each is refused before any work: a request that computed its range would end with
            // deadlineExceeded instead (no wall-clock bound here: a loaded machine could miss it).
            var id: UInt64 = 0
            for credential in [server.ownerCredential, server.appCredential] {
                for request in statistics {
                    id += 1
                    try await raw.send(Self.request(id, RPCMethod.statistics.rawValue, credential: credential, payload: try request.serializedBytes()))
                    let status = try #require(await raw.status(of: id))
                    #expect(status.code == .invalidArgument && !status.message.isEmpty, "\(request) \(status)")
                }
                for request in collections {
                    for method in [RPCMethod.statisticsCollection, .watchStatisticsCollection] {
                        id += 1
                        try await raw.send(Self.request(id, method.rawValue, credential: credential, payload: try request.serializedBytes()))
                        let status = try #require(await raw.status(of: id))
                        #expect(status.code == .invalidArgument && !status.message.isEmpty, "\(method) \(request) \(status)")
                    }
                }
                try await Self.expectGarbageRefused([.statistics, .statisticsCollection, .watchStatisticsCollection], on: raw, after: &id, credential: credential)
                // The messages name what was sent.
                for (request, message) in [(collections[2], "an interval is 1 to 10,000 days, not 4294967295"), (collections[6], "'UTC?garbage' is not an IANA time zone (it holds a control character)")] {
                    id += 1
                    try await raw.send(Self.request(id, RPCMethod.statisticsCollection.rawValue, credential: credential, payload: try request.serializedBytes()))
                    let status = try #require(await raw.status(of: id))
                    #expect(status.message == message, "\(status)")
                }
            }
            await raw.close()
        }
    }

    @Test("attachment requests: bad UUIDs, types, bytes and sizes get a clear status and write nothing")
    func badAttachmentCalls() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let sample = Samples.heartRate(70, at: 0)
            try await owner.save(sample)
            let raw = try await RawConnection(port: server.port)
            let head = try server.ledger.head()
            let object = Data(sample.uuid.bytes)
            let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3])
            let requests: [(RPCMethod, any SwiftProtobuf.Message, Healthledger_V1_StatusCode)] = [
                (.addAttachment, Healthledger_V1_AddAttachmentRequest.with { $0.objectUuid = Data([1, 2]); $0.name = "a.png"; $0.contentType = "image/png"; $0.data = png }, .invalidArgument),
                (.addAttachment, Healthledger_V1_AddAttachmentRequest.with { $0.objectUuid = object; $0.name = "a.png"; $0.contentType = "application/pdf"; $0.data = png }, .invalidArgument),
                (.addAttachment, Healthledger_V1_AddAttachmentRequest.with { $0.objectUuid = object; $0.name = "a.sh"; $0.contentType = "text/x-sh"; $0.data = Data("#!/bin/sh".utf8) }, .invalidArgument),
                (.addAttachment, Healthledger_V1_AddAttachmentRequest.with { $0.objectUuid = object; $0.name = "a.png"; $0.contentType = "image/png" }, .invalidArgument),
                (.addAttachment, Healthledger_V1_AddAttachmentRequest.with {
                    $0.objectUuid = object; $0.name = "a.png"; $0.contentType = "image/png"; $0.data = png
                    $0.metadata = [.with { $0.key = "k"; $0.value = "1" }, .with { $0.key = "k"; $0.value = "2" }]
                }, .invalidArgument),
                (.addAttachment, Healthledger_V1_AddAttachmentRequest.with {
                    $0.objectUuid = object; $0.name = "big.png"; $0.contentType = "image/png"; $0.data = png + Data(count: (3 << 20) + 1)
                }, .resourceExhausted),
                (.addAttachment, Healthledger_V1_AddAttachmentRequest.with { $0.objectUuid = Data(UUID().bytes); $0.name = "a.png"; $0.contentType = "image/png"; $0.data = png }, .notFound),
                (.attachments, Healthledger_V1_AttachmentsRequest.with { $0.objectUuid = Data(count: 17) }, .invalidArgument),
                (.attachmentData, Healthledger_V1_AttachmentRequest(), .invalidArgument),
                (.attachmentData, Healthledger_V1_AttachmentRequest.with { $0.uuid = Data(UUID().bytes) }, .notFound),
                (.removeAttachment, Healthledger_V1_AttachmentRequest.with { $0.uuid = Data(UUID().bytes) }, .notFound),
            ]
            var id: UInt64 = 0
            for (method, message, code) in requests {
                id += 1
                try await raw.send(Self.request(id, method.rawValue, credential: server.ownerCredential, payload: try message.serializedBytes()))
                let status = try #require(await raw.status(of: id))
                #expect(status.code == code && !status.message.isEmpty, "\(method) \(status)")
            }
            try await Self.expectGarbageRefused(
                [.addAttachment, .attachments, .attachmentData, .removeAttachment], on: raw, after: &id, credential: server.appCredential)
            #expect(try server.ledger.head() == head, "no refused request wrote anything")
            await raw.close()
            await owner.close()
        }
    }

    @Test("100,000 random and mutated frames through the server: statuses, no crash, others unaffected")
    func serverFuzz() async throws {
        try await withTestServer { server in
            let bystander = server.client()
            var rng = SystemRandomNumberGenerator()
            let methods = RPCMethod.allCases.map(\.rawValue) + ["bogus", ""]
            let credentials = [server.ownerCredential, server.appCredential, "", "hl1:alice:0000000000000000:x"]
            var sent = 0
            var connections = 0
            while sent < 100_000 {
                let raw = try await RawConnection(port: server.port)
                connections += 1
                var batch: [UInt8] = []
                for index in 0..<2000 {
                    var frame = Self.request(
                        UInt64(index + 1), methods.randomElement(using: &rng)!, credential: credentials.randomElement(using: &rng)!,
                        payload: (0..<Int.random(in: 0...48, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
                    if index % 7 == 0 { frame.kind = .cancel(.init()) }
                    var bytes = RawConnection.encode(frame)
                    if index % 3 == 0 {
                        // Mutate the body (never the header, so the stream stays in step).
                        for _ in 0..<Int.random(in: 1...3, using: &rng) where bytes.count > 5 {
                            bytes[Int.random(in: 5..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                        }
                    }
                    batch += bytes
                    sent += 1
                }
                if connections % 5 == 0 {
                    // And now and then a header that breaks the stream.
                    batch += (0..<9).map { _ in UInt8.random(in: 1...255, using: &rng) }
                }
                try? await raw.send(batch)
                try await Task.sleep(for: .milliseconds(20))
                await raw.close()
                // Another client is unaffected throughout.
                #expect(try await bystander.ping().ledgerID == "alice")
            }
            #expect(sent >= 100_000)
            #expect(try server.ledger.verify().isValid)
            await bystander.close()
        }
    }

    @Test("malformed predicates and descriptors on the wire: each a clear INVALID_ARGUMENT, nothing read or deleted")
    func badPredicates() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let heartRate = Samples.heartRate.identifier
            let cases: [(RPCMethod, [UInt8], String)] = [
                (.querySamples, try Healthledger_V1_SampleQueryRequest.with { $0.type = heartRate; $0.predicate = .init() }.serializedBytes(), "empty"),
                (.querySamples, try Healthledger_V1_SampleQueryRequest.with {
                    $0.type = heartRate
                    $0.predicate.uuids = .with { $0.uuids = [Data([1, 2, 3])] }
                }.serializedBytes(), "16 bytes"),
                (.querySamples, try Healthledger_V1_SampleQueryRequest.with {
                    $0.type = heartRate
                    $0.predicate.metadata = .with {
                        $0.key = "zone"
                        $0.comparison = .equal
                        $0.values = [.with { $0.stringValue = "a" }, .with { $0.stringValue = "b" }]
                    }
                }.serializedBytes(), "exactly one value"),
                (.querySamples, try Healthledger_V1_SampleQueryRequest.with {
                    $0.type = heartRate
                    $0.predicate.deviceProperty = .with { $0.property = .init(rawValue: 42) ?? .unspecified; $0.allowedValues = ["x"] }
                }.serializedBytes(), "device property"),
                (.querySamples, try Healthledger_V1_SampleQueryRequest.with {
                    $0.type = heartRate
                    $0.predicate.date = .with { $0.comparison = .less }
                }.serializedBytes(), "start or the end"),
                (.queryChanges, try Healthledger_V1_ChangeQueryRequest.with {
                    $0.type = heartRate
                    $0.descriptors = [.with { $0.type = heartRate }]
                }.serializedBytes(), "not both"),
                (.queryChanges, try Healthledger_V1_ChangeQueryRequest.with {
                    $0.descriptors = [.with { $0.type = heartRate }, .with { $0.type = heartRate }]
                }.serializedBytes(), "two descriptors"),
                (.observe, try Healthledger_V1_ObserveRequest.with {
                    $0.descriptors = (0...64).map { _ in .with { $0.type = heartRate } }
                }.serializedBytes(), "at most 64"),
                (.queryCorrelations, try Healthledger_V1_CorrelationQueryRequest.with {
                    $0.type = "HKCorrelationTypeIdentifierBloodPressure"
                    $0.memberPredicates = [.with { $0.type = heartRate }]
                }.serializedBytes(), "does not belong"),
                (.deleteObjects, try Healthledger_V1_DeleteObjectsRequest.with {
                    $0.type = heartRate
                    $0.predicate.categoryValues = .with { $0.values = [1] }
                }.serializedBytes(), "category type"),
                // Past the decoder's depth: named as such, not as an invalid request.
                (.querySamples, try Healthledger_V1_SampleQueryRequest.with {
                    $0.type = heartRate
                    var predicate = Healthledger_V1_Predicate.with { $0.categoryValues = .with { $0.values = [1] } }
                    for _ in 0..<120 { predicate = .with { [predicate] in $0.negation = predicate } }
                    $0.predicate = predicate
                }.serializedBytes(), "nests messages more than 100 deep (a predicate nests at most 16 levels)"),
            ]
            try await server.client().save(Samples.heartRate(70, at: 0))
            for (index, (method, payload, words)) in cases.enumerated() {
                let id = UInt64(index + 1)
                try await raw.send(Self.request(id, method.rawValue, credential: server.ownerCredential, payload: payload))
                let status = try #require(await raw.status(of: id))
                #expect(status.code == .invalidArgument && status.healthErrorCode == 3 && status.message.contains(words), "\(method) \(words): \(status)")
            }
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: server.client()).count == 1, "nothing deleted")
            await raw.close()
        }
    }
}
