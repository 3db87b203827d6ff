import ArgumentParser
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import HealthLedgerSDK
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// gRPC beside our protocol, on one `healthledgerd` serving both: unary pings (p50, p99), 64
/// pings in flight on one connection, and batched durable ingest (1,000 samples per call, 4
/// calls in flight), each round measured over both transports one after the other, with the
/// C loopback ping-pong of `limits.sh` in the same run. Both clients send the same request
/// bytes (the SDK's encoder), so the figures weigh the transports, not the encoders.
struct GRPCBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grpc", abstract: "gRPC beside our protocol: ping, 64 calls in flight, batched ingest (ratios in the same run).")

    @Option(help: "Rounds; each measures both transports, and medians are reported.") var rounds = 5
    @Option(help: "Pings per round and transport.") var pings = 5_000
    @Option(name: .customLong("calls"), help: "Pings per round and transport with 64 in flight.") var calls = 50_000
    @Option(help: "Samples per round and transport in the batched ingest.") var samples = 100_000
    @Option(help: "The reference script (raw LMDB and TCP limits).") var limits = "../shared/tools/limits.sh"
    @Option(help: "The folder holding a release build of healthledgerd.") var binaries = ".build/release"
    @Flag(help: "Encrypt the ledgers at rest (a master key made for the run).") var encrypted = false

    typealias Client = GRPCClient<HTTP2ClientTransport.Posix>

    func run() async throws {
        print("== reference: \(limits)")
        let reference = limits.isEmpty ? Reference(output: "") : Reference.measure(script: limits)
        let scratch = FileManager.default.temporaryDirectory.appending(path: "healthledger-grpc-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        if encrypted { try BenchEncryption.enable(in: scratch) }
        let (server, credential) = try await ServerProcess.withLedger("grpc", dataDirectory: scratch.appending(path: "server"), binaries: binaries, grpc: true)
        defer { server.stop() }
        guard let grpcPort = server.grpcPort else { throw BenchFailure("healthledgerd did not say its gRPC port") }
        print("== healthledgerd (pid \(server.processIdentifier)) listening on port \(server.port), gRPC on \(grpcPort)")

        let store = HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: credential))
        _ = try await store.ping()
        let workload = try Workload(days: 1)
        let plan = Plan(rounds: rounds, pings: pings, calls: calls, samples: samples)
        // Without flush coalescing, which holds each flush up to 100 µs (as the server does).
        let transport = try HTTP2ClientTransport.Posix(
            target: .ipv4(address: "127.0.0.1", port: grpcPort), transportSecurity: .plaintext,
            config: .defaults { $0.connection.flushCoalescing = nil })
        let (ours, grpc) = try await withGRPCClient(transport: transport) { client -> (TransportFigures, TransportFigures) in
            let caller = GRPCCaller(client: client, credential: credential)
            try await caller.ping()
            let overOurs = Transport(ping: { _ = try await store.ping() }, save: { _ = try await store.save($0) })
            let overGRPC = Transport(ping: { try await caller.ping() }, save: { try await caller.save($0) })
            var ours = TransportFigures()
            var grpc = TransportFigures()
            var first = 0
            for round in 0..<plan.rounds {
                // Alternate which transport goes first, so that neither always meets a warmer host.
                for isGRPC in round.isMultiple(of: 2) ? [false, true] : [true, false] {
                    let figures = try await Self.measure(plan, firstSample: first, workload: workload, over: isGRPC ? overGRPC : overOurs)
                    first += plan.samples
                    if isGRPC { grpc.add(figures) } else { ours.add(figures) }
                    print(
                        String(
                            format: "  round %d %@: ping p50 %.1f µs p99 %.1f µs, 64 in flight %.0f calls/s, ingest %.0f samples/s", round + 1,
                            isGRPC ? "gRPC" : "ours", figures.p50, figures.p99, figures.callsPerSecond, figures.samplesPerSecond))
                }
            }
            return (ours, grpc)
        }
        await store.close()

        func row(_ name: String, _ ours: [Double], _ grpc: [Double], unit: String, lowerIsBetter: Bool, target: String) {
            let (o, g) = (Figure(ours).median, Figure(grpc).median)
            let ratio = lowerIsBetter ? g / o : o / g
            print(String(format: "RESULT %@: ours %.1f %@, gRPC %.1f %@ — gRPC costs ×%.2f (%@)", name, o, unit, g, unit, ratio, target))
        }
        row("unary ping p50", ours.p50s, grpc.p50s, unit: "µs", lowerIsBetter: true, target: "target ≤ ×2")
        row("unary ping p99", ours.p99s, grpc.p99s, unit: "µs", lowerIsBetter: true, target: "no target")
        row("64 calls in flight", ours.callRates, grpc.callRates, unit: "calls/s", lowerIsBetter: false, target: "no target")
        row("batched ingest", ours.ingestRates, grpc.ingestRates, unit: "samples/s", lowerIsBetter: false, target: "target ≤ ×1.25")
        if let tcp = reference.pingPongMicroseconds {
            print(String(format: "RESULT C loopback ping-pong: %.1f µs; ping p50 ours ×%.2f, gRPC ×%.2f of it", tcp, Figure(ours.p50s).median / tcp, Figure(grpc.p50s).median / tcp))
        }
    }

    struct Plan: Sendable {
        var rounds: Int
        var pings: Int
        var calls: Int
        var samples: Int
    }

    /// One transport's calls.
    struct Transport: Sendable {
        let ping: @Sendable () async throws -> Void
        let save: @Sendable ([HealthObject]) async throws -> Void
    }

    struct RoundFigures {
        var p50: Double
        var p99: Double
        var callsPerSecond: Double
        var samplesPerSecond: Double
    }

    struct TransportFigures {
        var p50s: [Double] = []
        var p99s: [Double] = []
        var callRates: [Double] = []
        var ingestRates: [Double] = []

        mutating func add(_ round: RoundFigures) {
            p50s.append(round.p50)
            p99s.append(round.p99)
            callRates.append(round.callsPerSecond)
            ingestRates.append(round.samplesPerSecond)
        }
    }

    /// One round over one transport.
    static func measure(_ plan: Plan, firstSample: Int, workload: Workload, over transport: Transport) async throws -> RoundFigures {
        let ping = transport.ping
        let save = transport.save
        let clock = ContinuousClock()
        var times: [Double] = []
        times.reserveCapacity(plan.pings)
        for _ in 0..<plan.pings {
            let started = clock.now
            try await ping()
            times.append(seconds(clock.now - started) * 1e6)
        }
        times.sort()
        let next = Counter()
        var started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<64 { group.addTask { while next.take(below: plan.calls) != nil { try await ping() } } }
            try await group.waitForAll()
        }
        let callsPerSecond = Double(plan.calls) / seconds(clock.now - started)
        started = clock.now
        try await pipelinedBatches(count: plan.samples) { range in
            try await save(range.map { workload.ingest(firstSample + $0).object })
        }
        let samplesPerSecond = Double(plan.samples) / seconds(clock.now - started)
        return RoundFigures(p50: percentile(times, 0.5), p99: percentile(times, 0.99), callsPerSecond: callsPerSecond, samplesPerSecond: samplesPerSecond)
    }
}

/// Calls over gRPC as a generated client would, with the SDK's request encoding.
struct GRPCCaller: Sendable {
    let client: GRPCBenchCommand.Client
    let metadata: GRPCCore.Metadata

    init(client: GRPCBenchCommand.Client, credential: String) {
        self.client = client
        var metadata = GRPCCore.Metadata()
        metadata.addString("Bearer \(credential)", forKey: "authorization")
        self.metadata = metadata
    }

    func ping() async throws {
        _ = try await call("Ping", [])
    }

    func save(_ objects: [HealthObject]) async throws {
        let response = try await call("Save", HealthObject.encodedMessage(of: objects))
        let outcomes = try Healthledger_V1_SaveResponse(serializedBytes: response).outcomes
        guard outcomes.count == objects.count else { throw BenchFailure("a gRPC save answered \(outcomes.count) outcomes for \(objects.count) objects") }
    }

    private func call(_ method: String, _ request: [UInt8]) async throws -> [UInt8] {
        try await client.unary(
            request: ClientRequest(message: request, metadata: metadata),
            descriptor: MethodDescriptor(fullyQualifiedService: "healthledger.v1.Ledger", method: method), serializer: BytesCoder(),
            deserializer: BytesCoder(), options: .defaults
        ) { try $0.message }
    }
}

/// Messages as bytes: the caller encodes and decodes them.
struct BytesCoder: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] { serializedMessageBytes.withUnsafeBytes { Array($0) } }
}
