import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf
import TestSupport
import Testing

/// A client in another language, generated from Protos/ alone: Python with grpcio-tools
/// (Tests/GRPCClients/ledger_client.py, installed by tools/test.sh), against a real server.
@Suite("gRPC from a generated Python client", .timeLimit(.minutes(5)))
struct GRPCPythonTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// `python3` as the PATH finds it, where tools/test.sh installed the packages.
    static func python(_ arguments: [String]) async throws -> ProcessRun {
        try await runProcess(URL(filePath: "/usr/bin/env"), ["python3"] + arguments)
    }

    /// A read as the read-denied app makes it, through both transports.
    struct Read {
        let method: RPCMethod
        let request: any SwiftProtobuf.Message

        var streaming: Bool { MethodTable.kind(of: method)?.isStreaming == true }
        var name: String { String(method.rawValue.split(separator: "/")[1]) }
    }

    @Test("a Python client generated from Protos/ calls, streams, times out, cancels, is refused and reads what our protocol reads")
    func generatedPythonClient() async throws {
        let check = try await Self.python(["-c", "import grpc, grpc_tools, grpc_health, grpc_reflection"])
        try #require(check.status == 0, "grpcio, grpcio-tools, grpcio-health-checking and grpcio-reflection are missing (tools/test.sh installs them): \(check.error)")
        try await withTestServer(grpc: true) { server in
            let owner = server.client()
            let ownersSample = Samples.heartRate(80, at: -600)
            try await owner.save([ownersSample, Samples.heartRate(81, at: -540)])
            let appsSample = Samples.heartRate(66, at: -300)
            try await server.client(server.appCredential).save(appsSample)
            let workout = WorkoutRPCTests.run()
            try await owner.save(.workout(workout))
            let builder = try await owner.makeRouteBuilder()
            try await builder.insertRouteData((0..<20).map(WorkoutRPCTests.location))
            let route = try await owner.finishRoute(builder, workout.uuid)
            let revokedApp = try await server.ledger.issueCredential(for: .app(TestServer.appSource))
            let heartRate = Samples.heartRate.identifier
            let day: Int64 = 86_400_000_000
            let base = Int64(Samples.base.timeIntervalSince1970 * 1_000_000)
            // Every read path the app may try, with the owner's data beside its own.
            let reads: [Read] = [
                Read(method: .fetch, request: Healthledger_V1_FetchRequest.with { $0.uuid = Self.bytes(ownersSample.uuid) }),
                Read(method: .fetch, request: Healthledger_V1_FetchRequest.with { $0.uuid = Self.bytes(appsSample.uuid) }),
                Read(method: .querySamples, request: Healthledger_V1_SampleQueryRequest.with { $0.type = heartRate }),
                Read(method: .queryChanges, request: Healthledger_V1_ChangeQueryRequest.with { $0.type = heartRate }),
                Read(method: .statistics, request: Healthledger_V1_StatisticsRequest.with {
                    $0.type = heartRate
                    $0.options = 1 | 2 | 4 | 32
                }),
                Read(method: .statisticsCollection, request: Healthledger_V1_StatisticsCollectionRequest.with {
                    $0.type = heartRate
                    $0.startUs = base - day
                    $0.endUs = base + day
                    $0.anchorUs = base - day
                    $0.intervalUnit = .day
                    $0.intervalCount = 1
                    $0.options = 2 | 8
                }),
                Read(method: .queryCorrelations, request: Healthledger_V1_CorrelationQueryRequest.with { $0.type = "HKCorrelationTypeIdentifierBloodPressure" }),
                Read(method: .attachments, request: Healthledger_V1_AttachmentsRequest.with { $0.objectUuid = Self.bytes(ownersSample.uuid) }),
                Read(method: .attachmentData, request: Healthledger_V1_AttachmentRequest.with { $0.uuid = Self.bytes(UUID()) }),
                Read(method: .characteristics, request: Healthledger_V1_CharacteristicsRequest.with { $0.types = ["HKCharacteristicTypeIdentifierDateOfBirth"] }),
                Read(method: .authorizationStatus, request: Healthledger_V1_AuthorizationStatusRequest.with { $0.types = [heartRate] }),
                Read(method: .accessRecords, request: Healthledger_V1_AccessRecordsRequest()),
                Read(method: .audit, request: Healthledger_V1_AuditRequest()),
                Read(method: .treeHead, request: Healthledger_V1_Empty()),
                Read(method: .inclusionProof, request: Healthledger_V1_InclusionProofRequest.with {
                    $0.sequence = 1
                    $0.treeSize = 2
                }),
                Read(method: .consistencyProof, request: Healthledger_V1_ConsistencyProofRequest.with {
                    $0.firstSize = 1
                    $0.secondSize = 2
                }),
                Read(method: .fetch, request: Healthledger_V1_FetchRequest.with { $0.uuid = Self.bytes(workout.uuid) }),
                Read(method: .querySamples, request: Healthledger_V1_SampleQueryRequest.with { $0.type = "HKWorkoutTypeIdentifier" }),
                Read(method: .workoutStatistics, request: Healthledger_V1_WorkoutStatisticsRequest.with { $0.workoutUuid = Self.bytes(workout.uuid) }),
                Read(method: .routeLocations, request: Healthledger_V1_RouteQueryRequest.with { $0.routeUuid = Self.bytes(route.uuid) }),
                Read(method: .getRequestStatus, request: Healthledger_V1_AuthorizationRequest.with { $0.readTypes = [heartRate] }),
                Read(method: .sourcePriority, request: Healthledger_V1_SourcePriorityRequest.with { $0.type = heartRate }),
                Read(method: .authorizations, request: Healthledger_V1_AuthorizationsRequest()),
                Read(method: .pendingAuthorizations, request: Healthledger_V1_AuthorizationsRequest()),
                Read(method: .authorizationHistory, request: Healthledger_V1_AuthorizationsRequest()),
                Read(method: .ledgerCredentials, request: Healthledger_V1_Empty()),
            ]
            let readsFile = server.directory.appending(path: "reads.json")
            let listed: [[String: Any]] = try reads.map { read in
                ["method": read.name, "request": type(of: read.request).protoMessageName.replacingOccurrences(of: "healthledger.v1.", with: ""),
                 "payload": (try read.request.serializedBytes() as [UInt8]).hexString, "streaming": read.streaming]
            }
            try JSONSerialization.data(withJSONObject: listed).write(to: readsFile)

            let run = try await Self.python(
                [
                    Self.root.appending(path: "Tests/GRPCClients/ledger_client.py").path, "--protos", Self.root.appending(path: "Protos").path,
                    "--port", "\(server.grpcPort)", "--owner", server.ownerCredential, "--app", server.appCredential,
                    "--app-bundle", TestServer.appSource.bundleIdentifier, "--revoked-app", revokedApp,
                    "--reads", readsFile.path,
                ])
            try #require(run.status == 0, "ledger_client.py failed: \(run.error)")
            let seen = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any], "\(run.output)")

            #expect(seen["ping"] as? [String: String] == ["ledger": "alice", "principal": "owner", "data": "from python"])
            #expect(seen["saved"] as? [Int] == [1, 1, 1])
            // The owner's two, the app's one before, the three Python saved.
            #expect(seen["query_batches"] as? [Int] == [2, 2, 2])
            let savedByPython = try #require(seen["saved_uuids"] as? [String])
            let readable = try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).map { Self.bytes($0.uuid).hexString }
            #expect(Set(savedByPython).isSubset(of: Set(readable)))
            #expect(seen["deadline"] as? String == "DEADLINE_EXCEEDED")
            #expect(seen["cancel"] as? String == "CANCELLED")
            #expect(seen["cancel_first_batch"] as? Int == 6)
            let unknown = seen["unknown_credential"] as? [String: Any]
            #expect(unknown?["code"] as? Int == 16 && unknown?["message"] as? String == "the credential is invalid or unknown", "\(String(describing: unknown))")
            #expect((seen["no_credential"] as? [String: Any])?["code"] as? Int == 16)
            let revocation = seen["revocation"] as? [String: Any]
            #expect([7, 16].contains(revocation?["code"] as? Int ?? 0) && (revocation?["message"] as? String)?.contains("revoked") == true, "\(String(describing: revocation))")
            #expect(seen["health"] as? String == "SERVING")
            #expect(Set(seen["reflection_services"] as? [String] ?? []) == ["healthledger.v1.Ledger", "healthledger.v1.Replication", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"])
            let methods = try #require(seen["reflection_methods"] as? [String])
            // The Ledger service's (the script lists that one; replication's two are an operator's, §7.18).
            let ledgerMethods = RPCMethod.allCases.filter { $0.rawValue.hasPrefix("healthledger.v1.Ledger/") }
            #expect(methods == ledgerMethods.map { "\($0.rawValue.split(separator: "/")[1]):\(MethodTable.kind(of: $0)?.isStreaming == true ? 1 : 0)" }.sorted())

            // Every read path answers the read-denied app over gRPC as over our protocol.
            let answers = try #require(seen["reads"] as? [[String: Any]])
            try #require(answers.count == reads.count)
            let connection = try await RawConnection(port: server.port)
            for (index, (read, answer)) in zip(reads, answers).enumerated() {
                let ours = try await Self.answerOverOurProtocol(read, id: UInt64(index + 1), credential: server.appCredential, on: connection)
                if let failure = answer["failure"] as? [String: Any] {
                    #expect(ours.status.code.rawValue == failure["code"] as? Int && ours.status.message == failure["message"] as? String, "\(read.name): \(failure) vs \(ours.status)")
                    #expect(Int(ours.status.healthErrorCode) == (failure["health"] as? Int ?? 0), "\(read.name)")
                } else {
                    #expect(ours.status.code == .ok, "\(read.name): gRPC answered, ours failed: \(ours.status)")
                    let overGRPC = try (answer["messages"] as? [String] ?? []).map { try Self.comparable(Array(hex: $0), of: read.method) }
                    #expect(overGRPC == (try ours.messages.map { try Self.comparable($0, of: read.method) }), "\(read.name)")
                }
            }
            // The owner's methods are refused, the owner's object is as unknown as an unknown
            // one, and every other read answers (with what the app may see).
            for (read, answer) in zip(reads, answers) {
                let code = (answer["failure"] as? [String: Any])?["code"] as? Int
                switch read.method {
                case .accessRecords, .audit, .treeHead, .inclusionProof, .consistencyProof, .sourcePriority, .authorizations, .pendingAuthorizations,
                    .authorizationHistory, .ledgerCredentials:
                    #expect(code == 7, "\(read.name): \(answer)")
                case .attachments, .attachmentData, .workoutStatistics, .routeLocations: #expect(code == 5, "\(read.name): \(answer)")
                default: #expect(answer["messages"] != nil, "\(read.name): \(answer)")
                }
            }
        }
    }

    /// The read's messages and status over our framing.
    static func answerOverOurProtocol(_ read: Read, id: UInt64, credential: String, on connection: RawConnection) async throws -> (messages: [[UInt8]], status: Healthledger_V1_CallStatus) {
        let method = read.method
        try await connection.send(.request(id: id, method: method, credential: credential, payload: try read.request.serializedBytes(), window: 1 << 16))
        var messages: [[UInt8]] = []
        while let frame = await connection.next() {
            guard case .frame(let frame) = frame, frame.callID == id else { continue }
            switch frame.kind {
            case .message(let message): messages.append(Array(message))
            case .status(let status): return (messages, status)
            default: continue
            }
        }
        throw RPCError(.unavailable, "the connection closed before \(read.name) ended")
    }

    /// A response as the two transports must agree on it: as sent, but for an anchor, which
    /// is sealed under a fresh nonce each time.
    static func comparable(_ message: [UInt8], of method: RPCMethod) throws -> [UInt8] {
        guard method == .queryChanges else { return message }
        var batch = try Healthledger_V1_ChangeBatch(serializedBytes: message)
        #expect(!batch.anchor.isEmpty)
        batch.anchor = Data()
        return try batch.serializedBytes()
    }

    static func bytes(_ uuid: UUID) -> Data { withUnsafeBytes(of: uuid.uuid) { Data($0) } }
}

extension Array where Element == UInt8 {
    /// The bytes of lowercase or uppercase hex digits (an odd last digit is dropped).
    fileprivate init(hex: String) {
        let digits = Array(hex.utf8)
        self = stride(from: 0, to: digits.count - 1, by: 2).compactMap { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16) }
    }
}
