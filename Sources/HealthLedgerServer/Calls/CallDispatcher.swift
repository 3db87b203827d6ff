import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import Logging
import Metrics

/// Runs one call: picks the method, authenticates the caller, enforces the deadline, and
/// answers with messages and exactly one status.
struct CallDispatcher: Sendable {
    let store: LedgerStore
    let configuration: ServerConfiguration
    let logger: Logger

    /// Sends a frame of this call to the client.
    typealias Send = @Sendable (Healthledger_V1_Frame) -> Void

    func run(id: UInt64, request: Healthledger_V1_CallRequest, window: StreamWindow?, send: @escaping Send) async {
        let clock = ContinuousClock()
        let started = clock.now
        var logger = logger
        logger[metadataKey: "rpc.call"] = "\(id)"
        logger[metadataKey: "rpc.method"] = "\(request.method)"
        let error: RPCError?
        if let method = RPCMethod(rawValue: request.method) {
            let timeout = request.timeoutMs == 0
                ? configuration.defaultTimeout : min(.milliseconds(Int64(request.timeoutMs)), configuration.maximumTimeout)
            error = await Self.withDeadline(timeout) {
                try await handle(method, id: id, request: request, window: window, send: send)
            }
        } else {
            error = RPCError(.unimplemented, "unknown method '\(request.method.prefix(200))'")
        }
        send(.status(id: id, error))
        let elapsed = clock.now - started
        let label = RPCMethod(rawValue: request.method)?.rawValue ?? "unknown"
        Counter(label: "healthledger_rpc_calls_total", dimensions: [("method", label), ("code", "\(error?.code ?? .ok)")]).increment()
        Timer(label: "healthledger_rpc_call_duration_seconds", dimensions: [("method", label)]).recordNanoseconds(
            elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        if let error, error.code == .internalError {
            logger.error("call failed", metadata: ["rpc.status": "\(error)"])
        } else {
            logger.debug("call ended", metadata: ["rpc.status": "\(error?.code ?? .ok)"])
        }
    }

    /// Runs `body`, ending it with `deadlineExceeded` when `timeout` passes first.
    static func withDeadline(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> Void) async -> RPCError? {
        await withTaskGroup(of: RPCError?.self) { group in
            group.addTask {
                do {
                    try await body()
                    return nil
                } catch {
                    return Self.status(for: error)
                }
            }
            group.addTask {
                do {
                    try await Task.sleep(for: timeout)
                    return RPCError(.deadlineExceeded, "the call's deadline of \(timeout) passed")
                } catch {
                    return RPCError(.cancelled, "the call was cancelled")
                }
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
    }

    /// The status an error becomes on the wire.
    static func status(for error: any Error) -> RPCError {
        switch error {
        case let error as RPCError: return error
        case let error as HealthError: return RPCError(error)
        case let failure as LedgerFailure:
            switch failure.kind {
            case .notFound: return RPCError(.notFound, failure.message)
            case .alreadyExists: return RPCError(.alreadyExists, failure.message)
            case .invalidArgument: return RPCError(.invalidArgument, failure.message, healthErrorCode: .invalidArgument)
            case .corrupted: return RPCError(.dataLoss, failure.message, healthErrorCode: .databaseInaccessible)
            case .storage: return RPCError(.unavailable, failure.message, healthErrorCode: .databaseInaccessible)
            }
        case is CancellationError: return RPCError(.cancelled, "the call was cancelled")
        default: return RPCError(.internalError, "internal error")
        }
    }

    private func handle(
        _ method: RPCMethod, id: UInt64, request: Healthledger_V1_CallRequest, window: StreamWindow?, send: @escaping Send
    ) async throws {
        guard let (ledger, principal) = store.authenticate(request.credential) else {
            throw RPCError(.unauthenticated, "the credential is invalid, unknown or revoked")
        }
        let call = LedgerCall(ledger: ledger, principal: principal, payload: Array(request.payload))
        switch method {
        case .ping: send(.message(id: id, try await call.ping()))
        case .save: send(.message(id: id, try await call.save()))
        case .delete: send(.message(id: id, try await call.delete()))
        case .deleteObjects: send(.message(id: id, try await call.deleteObjects()))
        case .fetch: send(.message(id: id, try call.fetch()))
        case .querySamples:
            try await call.querySamples { batch in
                try await window?.acquire()
                send(.message(id: id, batch))
            }
        }
    }
}
