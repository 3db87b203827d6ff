import GRPCCore
import GRPCProtobuf
import SwiftProtobuf
import Synchronization

/// `grpc.health.v1.Health`: whether the server serves, for load balancers, orchestrators
/// and generic gRPC tools. The server as a whole (service "") and `healthledger.v1.Ledger`
/// are `SERVING` while the endpoint runs and `NOT_SERVING` once it drains; any other name is
/// unknown (`NOT_FOUND` from Check, `SERVICE_UNKNOWN` from Watch).
final class HealthService: RegistrableRPCService {
    typealias Status = Grpc_Health_V1_HealthCheckResponse.ServingStatus

    /// The services whose health is reported.
    static let services: Set<String> = ["", "healthledger.v1.Ledger"]

    private struct State {
        var status = Status.serving
        /// Open Watch calls, and whether each watches a known service.
        var watchers: [UInt64: (continuation: AsyncStream<Status>.Continuation, known: Bool)] = [:]
        var nextWatcher: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The Watch calls open now.
    var watches: Int { state.withLock { $0.watchers.count } }

    /// Reports `NOT_SERVING` from now on, and ends every Watch (after telling it so).
    func stopServing() {
        let watchers = state.withLock { state in
            state.status = .notServing
            defer { state.watchers = [:] }
            return Array(state.watchers.values)
        }
        for watcher in watchers {
            if watcher.known { watcher.continuation.yield(.notServing) }
            watcher.continuation.finish()
        }
    }

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let service = "grpc.health.v1.Health"
        router.registerHandler(
            forMethod: MethodDescriptor(fullyQualifiedService: service, method: "Check"),
            deserializer: ProtobufDeserializer<Grpc_Health_V1_HealthCheckRequest>(),
            serializer: ProtobufSerializer<Grpc_Health_V1_HealthCheckResponse>()
        ) { request, _ in
            let request = try await ServerRequest(stream: request)
            guard Self.services.contains(request.message.service) else {
                throw RPCError(code: .notFound, message: "no service named '\(request.message.service.prefix(200))' here")
            }
            let status = self.state.withLock { $0.status }
            return StreamingServerResponse(single: ServerResponse(message: .with { $0.status = status }))
        }
        router.registerHandler(
            forMethod: MethodDescriptor(fullyQualifiedService: service, method: "Watch"),
            deserializer: ProtobufDeserializer<Grpc_Health_V1_HealthCheckRequest>(),
            serializer: ProtobufSerializer<Grpc_Health_V1_HealthCheckResponse>()
        ) { request, _ in
            let request = try await ServerRequest(stream: request)
            // An unknown service may never appear: its call stays open, as the protocol asks,
            // until the client or the server's shutdown ends it.
            let updates = self.watch(known: Self.services.contains(request.message.service))
            return StreamingServerResponse { writer in
                try await withRPCCancellationHandler {
                    for await status in updates.stream { try await writer.write(.with { $0.status = status }) }
                } onCancelRPC: {
                    self.unwatch(updates.id)
                }
                return [:]
            }
        }
    }

    /// A stream of the status, starting with the current one (`SERVICE_UNKNOWN` for a
    /// service that is not `known`).
    private func watch(known: Bool) -> (id: UInt64, stream: AsyncStream<Status>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Status.self)
        let id = state.withLock { state in
            continuation.yield(known ? state.status : .serviceUnknown)
            if state.status == .notServing {
                continuation.finish()
            } else {
                state.watchers[state.nextWatcher] = (continuation, known)
            }
            defer { state.nextWatcher += 1 }
            return state.nextWatcher
        }
        return (id, stream)
    }

    private func unwatch(_ id: UInt64) {
        state.withLock { $0.watchers.removeValue(forKey: id) }?.continuation.finish()
    }
}
