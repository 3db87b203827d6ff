import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import GRPCProtobuf
import HealthLedgerGRPC
import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import HealthModel
import LedgerSchema
import SwiftProtobuf
import TestSupport
import Testing

/// The gRPC endpoint through grpc-swift's own client: the same methods, answers and statuses
/// as over our framing, with the credential, deadline and point in time in metadata.
@Suite("gRPC endpoint", .timeLimit(.minutes(3)))
struct GRPCTests {
    typealias Client = GRPCClient<HTTP2ClientTransport.Posix>

    static let app = TestServer.appSource.bundleIdentifier

    @Test("unary calls, writes and streams answer as over our protocol")
    func callsAndStreams() async throws {
        try await withTestServer(grpc: true) { server in
            try await Self.withClient(server.grpcPort) { client in
                let pong: Healthledger_V1_PingResponse = try await Self.unary(
                    client, .ping, Healthledger_V1_PingRequest.with { $0.data = Data("hello".utf8) }, credential: server.ownerCredential)
                #expect(pong.ledgerID == "alice" && pong.principal == "owner" && pong.data == Data("hello".utf8))

                // A save by the app, through gRPC.
                let samples = (0..<5).map { Samples.heartRate(Double(60 + $0), at: Double($0)) }
                let saved: Healthledger_V1_SaveResponse = try await Self.unary(
                    client, .save, Healthledger_V1_SaveRequest.with { $0.objects = samples.map(Healthledger_V1_HealthObject.init) },
                    credential: server.appCredential)
                #expect(saved.outcomes.count == 5 && saved.outcomes.allSatisfy { $0.disposition == .saved })

                // A stream in batches of two: three messages, the samples the SDK reads too.
                let batches: [Healthledger_V1_SampleBatch] = try await Self.stream(
                    client, .querySamples,
                    Healthledger_V1_SampleQueryRequest.with {
                        $0.type = Samples.heartRate.identifier
                        $0.batchSize = 2
                    }, credential: server.ownerCredential)
                #expect(batches.map(\.objects.count) == [2, 2, 1])
                let overSDK = try await server.client().result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).map(\.uuid)
                #expect(batches.flatMap(\.objects).map(\.uuid) == overSDK.map { withUnsafeBytes(of: $0.uuid) { Data($0) } })
                #expect(Set(overSDK) == Set(samples.map(\.uuid)))

                // A point-in-time read from metadata: the ledger before the last save.
                let head = try server.ledger.head().sequence
                try await server.client().save(Samples.heartRate(90, at: 100))
                let then: [Healthledger_V1_SampleBatch] = try await Self.stream(
                    client, .querySamples, Healthledger_V1_SampleQueryRequest.with { $0.type = Samples.heartRate.identifier },
                    credential: server.ownerCredential, metadata: ["healthledger-as-of-sequence": "\(head)"])
                #expect(then.flatMap(\.objects).count == 5)
                let now: [Healthledger_V1_SampleBatch] = try await Self.stream(
                    client, .querySamples, Healthledger_V1_SampleQueryRequest.with { $0.type = Samples.heartRate.identifier },
                    credential: server.ownerCredential)
                #expect(now.flatMap(\.objects).count == 6)
            }
        }
    }

    @Test("credentials, refusals and health codes map to gRPC statuses and trailing metadata")
    func statuses() async throws {
        try await withTestServer(grpc: true) { server in
            try await Self.withClient(server.grpcPort) { client in
                let ping = Healthledger_V1_PingRequest()
                let missing = await Self.failure(of: { _ = try await Self.unary(client, .ping, ping, credential: nil) as Healthledger_V1_PingResponse })
                #expect(missing?.code == .unauthenticated, "\(String(describing: missing))")
                let unknown = await Self.failure(of: {
                    _ = try await Self.unary(client, .ping, ping, credential: "hl1:alice:nope:nope") as Healthledger_V1_PingResponse
                })
                #expect(unknown?.code == .unauthenticated && unknown?.message == "the credential is invalid or unknown", "\(String(describing: unknown))")
                let basic = await Self.failure(of: {
                    _ = try await Self.unary(client, .ping, ping, credential: nil, metadata: ["authorization": "Basic eDp5"]) as Healthledger_V1_PingResponse
                })
                #expect(basic?.code == .unauthenticated && basic?.message.contains("Bearer") == true, "\(String(describing: basic))")

                // A request that does not decode: INVALID_ARGUMENT, HealthKit's code 3 in the trailers.
                let garbage = await Self.failure(of: {
                    try await client.unary(
                        request: ClientRequest(message: [0xFF, 0xFF, 0xFF], metadata: Self.metadata(server.ownerCredential)),
                        descriptor: Self.descriptor(.fetch), serializer: PassThroughCoder(), deserializer: PassThroughCoder(), options: .defaults
                    ) { _ = try $0.message }
                })
                #expect(garbage?.code == .invalidArgument && garbage?.message == "the request is not a valid healthledger.v1.FetchRequest")
                #expect(garbage.map { Array($0.metadata[stringValues: "healthledger-error-code"]) } == ["\(HealthError.Code.invalidArgument.rawValue)"])

                // The owner's method, asked by an app: PERMISSION_DENIED, as over our protocol.
                let records = await Self.failure(of: {
                    _ = try await Self.unary(client, .accessRecords, Healthledger_V1_AccessRecordsRequest(), credential: server.appCredential)
                        as Healthledger_V1_AccessRecordsResponse
                })
                let overOurs = await expectRPCError(.permissionDenied, nil, "access records over our protocol") {
                    _ = try await server.client(server.appCredential).accessRecords()
                }
                #expect(records?.code == .permissionDenied && records?.message == overOurs?.message, "\(String(describing: records))")

                // A request above the server's largest frame.
                let oversized = await Self.failure(of: {
                    _ = try await Self.unary(
                        client, .fetch, Healthledger_V1_FetchRequest.with { $0.uuid = Data(count: 5 << 20) }, credential: server.ownerCredential)
                        as Healthledger_V1_FetchResponse
                })
                #expect(oversized?.code == .resourceExhausted, "\(String(describing: oversized)) \(String(describing: oversized?.cause))")

                // Metadata that does not parse.
                let badPoint = await Self.failure(of: {
                    _ = try await Self.unary(client, .ping, ping, credential: server.ownerCredential, metadata: ["healthledger-as-of-sequence": "soon"])
                        as Healthledger_V1_PingResponse
                })
                #expect(badPoint?.code == .invalidArgument && badPoint?.message.contains("healthledger-as-of-sequence") == true)
                // A write asked of a past point.
                let pastWrite = await Self.failure(of: {
                    _ = try await Self.unary(
                        client, .save, Healthledger_V1_SaveRequest(), credential: server.ownerCredential, metadata: ["healthledger-as-of-sequence": "1"])
                        as Healthledger_V1_SaveResponse
                })
                #expect(pastWrite?.code == .invalidArgument && pastWrite?.message.contains("cannot be asked as of a past point") == true)
                // A long bad value: its error comes back as such, its message cut short (a whole
                // echo of it would pass the client's header limit and arrive as RESOURCE_EXHAUSTED).
                let longUnit = "count/" + String(repeating: "min*", count: 5_000) + "min"
                let badUnit = await Self.failure(of: {
                    _ = try await Self.unary(
                        client, .save,
                        Healthledger_V1_SaveRequest.with {
                            $0.objects = [
                                .with {
                                    $0.uuid = withUnsafeBytes(of: UUID().uuid) { Data($0) }
                                    $0.type = "HKQuantityTypeIdentifierHeartRate"
                                    $0.quantity = .with { $0.quantity = .with { $0.value = 70; $0.unit = longUnit } }
                                },
                            ]
                        }, credential: server.ownerCredential) as Healthledger_V1_SaveResponse
                })
                #expect(badUnit?.code == .invalidArgument && (badUnit?.message.utf8.count ?? .max) <= 2_048, "\(String(describing: badUnit))")
            }
        }
    }

    @Test("a deadline ends a watch; a cancel and a revocation end a stream on the server")
    func deadlinesCancelsAndRevocation() async throws {
        try await withTestServer(grpc: true) { server in
            try await server.client().save(Samples.heartRate(70, at: 0))
            let watch = Healthledger_V1_ChangeQueryRequest.with { $0.type = Samples.heartRate.identifier }
            try await Self.withClient(server.grpcPort) { client in
                // A watch never ends by itself: its deadline ends it.
                let expired = await Self.failure(of: {
                    let _: [Healthledger_V1_ChangeBatch] = try await Self.stream(
                        client, .watchChanges, watch, credential: server.ownerCredential, timeout: .milliseconds(300))
                })
                #expect(expired?.code == .deadlineExceeded, "\(String(describing: expired))")

                // The client cancels after the first batch: the server's call ends.
                let first = try await client.serverStreaming(
                    request: ClientRequest(message: watch, metadata: Self.metadata(server.ownerCredential)), descriptor: Self.descriptor(.watchChanges),
                    serializer: ProtobufSerializer(), deserializer: ProtobufDeserializer<Healthledger_V1_ChangeBatch>(), options: .defaults
                ) { response in
                    var iterator = response.messages.makeAsyncIterator()
                    return try await iterator.next()
                }
                #expect(first?.added.count == 1)
                let grpc = try #require(server.grpc)
                while grpc.callsInFlight > 0 { try await Task.sleep(for: .milliseconds(10)) }

                // The app's credential is revoked while its watch runs: the stream ends.
                let appWatch = Task {
                    await Self.failure(of: {
                        let _: [Healthledger_V1_ChangeBatch] = try await Self.stream(client, .watchChanges, watch, credential: server.appCredential)
                    })
                }
                while grpc.callsInFlight == 0 { try await Task.sleep(for: .milliseconds(10)) }
                try await server.ledger.revokeCredential(id: credentialID(server.appCredential))
                let ended = await appWatch.value
                #expect(ended?.code == .permissionDenied || ended?.code == .unauthenticated, "\(String(describing: ended))")
                #expect(ended?.message.contains("revoked") == true, "\(String(describing: ended))")
            }
        }
    }

    @Test("health reports serving until the endpoint drains; reflection describes every method")
    func healthAndReflection() async throws {
        try await withTestServer(grpc: true) { server in
            try await Self.withClient(server.grpcPort) { client in
                let health = MethodDescriptor(fullyQualifiedService: "grpc.health.v1.Health", method: "Check")
                func check(_ service: String) async throws -> Grpc_Health_V1_HealthCheckResponse.ServingStatus {
                    try await client.unary(
                        request: ClientRequest(message: Grpc_Health_V1_HealthCheckRequest.with { $0.service = service }), descriptor: health,
                        serializer: ProtobufSerializer(), deserializer: ProtobufDeserializer<Grpc_Health_V1_HealthCheckResponse>(), options: .defaults
                    ) { try $0.message.status }
                }
                #expect(try await check("") == .serving)
                #expect(try await check("healthledger.v1.Ledger") == .serving)
                let unknown = await Self.failure(of: { _ = try await check("nope.Service") })
                #expect(unknown?.code == .notFound)

                // Reflection: the services, and the file that defines the Ledger service.
                let answers = try await Self.reflect(
                    client,
                    [
                        .with { $0.listServices = "" }, .with { $0.fileContainingSymbol = "healthledger.v1.Ledger" },
                        .with { $0.fileContainingSymbol = "healthledger.v1.Nothing" },
                    ])
                #expect(answers[0].listServicesResponse.service.map(\.name) == ["healthledger.v1.Ledger", "healthledger.v1.Replication", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"])
                let files = try answers[1].fileDescriptorResponse.fileDescriptorProto.map { try Google_Protobuf_FileDescriptorProto(serializedBytes: $0) }
                #expect(files.map(\.name) == ["healthledger/v1/rpc.proto", "healthledger/v1/objects.proto", "healthledger/v1/ledger.proto"])
                let services = try #require(files.first?.service)
                #expect(services.map(\.name) == ["Replication", "Ledger"])
                let methods = services.flatMap { service in service.method.map { ("healthledger.v1.\(service.name)/\($0.name)", $0) } }
                #expect(Set(methods.map(\.0)) == Set(RPCMethod.allCases.map(\.rawValue)))
                for (name, method) in methods {
                    let rpc = try #require(RPCMethod(rawValue: name))
                    #expect(method.serverStreaming == (MethodTable.kind(of: rpc)?.isStreaming == true), "\(name)")
                }
                #expect(answers[2].errorResponse.errorCode == Int32(Status.Code.notFound.rawValue))

                // Draining: a health watch hears NOT_SERVING, then ends.
                let watch = Task {
                    try await client.serverStreaming(
                        request: ClientRequest(message: Grpc_Health_V1_HealthCheckRequest()),
                        descriptor: MethodDescriptor(fullyQualifiedService: "grpc.health.v1.Health", method: "Watch"), serializer: ProtobufSerializer(),
                        deserializer: ProtobufDeserializer<Grpc_Health_V1_HealthCheckResponse>(), options: .defaults
                    ) { response in
                        var statuses: [Grpc_Health_V1_HealthCheckResponse.ServingStatus] = []
                        for try await message in response.messages { statuses.append(message.status) }
                        return statuses
                    }
                }
                let grpc = try #require(server.grpc)
                while grpc.healthWatches == 0 { try await Task.sleep(for: .milliseconds(10)) }
                await grpc.shutdown()
                #expect(try await watch.value == [.serving, .notServing])
            }
        }
    }

    @Test("healthledgerd names the gRPC or web port it cannot serve, and refuses a port out of range")
    func portErrors() async throws {
        try await withTestServer(grpc: true, web: true) { server in
            let data = server.directory.appending(path: "other").path
            let common = ["--data-dir", data, "--port", "0", "--metrics-port=-1"]
            let grpcTaken = try await runProcess(DaemonProcess.executable, common + ["--web-port=-1", "--grpc-port", "\(server.grpcPort)"])
            #expect(grpcTaken.status != 0 && grpcTaken.error.contains("the gRPC port \(server.grpcPort) on 127.0.0.1 cannot be served (--grpc-port)"), "\(grpcTaken.error)")
            let webTaken = try await runProcess(DaemonProcess.executable, common + ["--grpc-port=-1", "--web-port", "\(server.webPort)"])
            #expect(webTaken.status != 0 && webTaken.error.contains("the web app's port \(server.webPort) on 127.0.0.1 cannot be served (--web-port)"), "\(webTaken.error)")
            let outOfRange = try await runProcess(DaemonProcess.executable, common + ["--web-port=-1", "--grpc-port", "70000"])
            #expect(outOfRange.status != 0 && outOfRange.error.contains("--grpc-port must be a port number (0 to 65535)"), "\(outOfRange.error)")
            // The RPC port and the metrics port too (a port past 65535 was taken modulo 65536).
            let rpcOutOfRange = try await runProcess(
                DaemonProcess.executable, ["--data-dir", data, "--port", "70000", "--metrics-port=-1", "--web-port=-1", "--grpc-port=-1"])
            #expect(rpcOutOfRange.status != 0 && rpcOutOfRange.error.contains("--port must be a port number (0 to 65535), not 70000"), "\(rpcOutOfRange.error)")
            let metricsOutOfRange = try await runProcess(DaemonProcess.executable, ["--data-dir", data, "--port", "0", "--metrics-port=-5", "--web-port=-1", "--grpc-port=-1"])
            #expect(metricsOutOfRange.status != 0 && metricsOutOfRange.error.contains("or -1 to disable metrics, not -5"), "\(metricsOutOfRange.error)")
        }
    }

    // MARK: - Helpers

    static func withClient<T: Sendable>(_ port: Int, _ body: (Client) async throws -> T) async throws -> T {
        try await withGRPCClient(transport: try .http2NIOPosix(target: .ipv4(address: "127.0.0.1", port: port), transportSecurity: .plaintext)) {
            try await body($0)
        }
    }

    static func descriptor(_ method: RPCMethod) -> MethodDescriptor { method.grpcDescriptor }

    static func metadata(_ credential: String?, _ extra: [String: String] = [:]) -> GRPCCore.Metadata {
        var metadata = GRPCCore.Metadata()
        if let credential { metadata.addString("Bearer \(credential)", forKey: "authorization") }
        for (key, value) in extra { metadata.addString(value, forKey: key) }
        return metadata
    }

    static func options(_ timeout: Duration?) -> CallOptions {
        var options = CallOptions.defaults
        options.timeout = timeout
        return options
    }

    static func unary<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ client: Client, _ method: RPCMethod, _ request: Request, credential: String?, metadata: [String: String] = [:], timeout: Duration? = nil
    ) async throws -> Response {
        try await client.unary(
            request: ClientRequest(message: request, metadata: Self.metadata(credential, metadata)), descriptor: descriptor(method),
            serializer: ProtobufSerializer(), deserializer: ProtobufDeserializer<Response>(), options: options(timeout)
        ) { try $0.message }
    }

    static func stream<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ client: Client, _ method: RPCMethod, _ request: Request, credential: String?, metadata: [String: String] = [:], timeout: Duration? = nil
    ) async throws -> [Response] {
        try await client.serverStreaming(
            request: ClientRequest(message: request, metadata: Self.metadata(credential, metadata)), descriptor: descriptor(method),
            serializer: ProtobufSerializer(), deserializer: ProtobufDeserializer<Response>(), options: options(timeout)
        ) { response in
            var messages: [Response] = []
            for try await message in response.messages { messages.append(message) }
            return messages
        }
    }

    static func reflect(_ client: Client, _ requests: [Grpc_Reflection_V1_ServerReflectionRequest]) async throws -> [Grpc_Reflection_V1_ServerReflectionResponse] {
        try await client.bidirectionalStreaming(
            request: StreamingClientRequest { writer in try await writer.write(contentsOf: requests) },
            descriptor: MethodDescriptor(fullyQualifiedService: "grpc.reflection.v1.ServerReflection", method: "ServerReflectionInfo"),
            serializer: ProtobufSerializer(), deserializer: ProtobufDeserializer<Grpc_Reflection_V1_ServerReflectionResponse>(), options: .defaults
        ) { response in
            var answers: [Grpc_Reflection_V1_ServerReflectionResponse] = []
            for try await answer in response.messages { answers.append(answer) }
            return answers
        }
    }

    /// The gRPC error `body` ends with; nil when it succeeds.
    static func failure(of body: () async throws -> Void) async -> GRPCCore.RPCError? {
        do {
            try await body()
            return nil
        } catch let error as GRPCCore.RPCError {
            return error
        } catch {
            Issue.record("not a gRPC error: \(error)")
            return nil
        }
    }
}
