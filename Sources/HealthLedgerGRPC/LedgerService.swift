import Foundation
import GRPCCore
import HealthLedgerRPC
import HealthLedgerServer
import LedgerSchema
import Synchronization

/// `healthledger.v1.Ledger` as standard gRPC: every method of ``RPCMethod``, its request and
/// response bytes passed through untouched to and from the RPC server's ``CallDispatcher``,
/// so that a gRPC call authenticates, is authorized, limited, recorded, counted and logged
/// exactly as the same call over our own framing (docs/PROTOCOL.md §12).
///
/// What gRPC carries in metadata, our framing carries in its `CallRequest`: the credential
/// (`authorization: Bearer <credential>`), the deadline (`grpc-timeout`, clamped to the
/// server's longest), and a point-in-time read (`healthledger-as-of-sequence`,
/// `healthledger-as-of-time-us`). A stream's backpressure is HTTP/2's flow control: the
/// handler waits on each write until the client has room.
struct LedgerService: RegistrableRPCService {
    let dispatcher: CallDispatcher
    let calls: RunningCalls
    /// The largest request message (the server's largest frame).
    let maximumRequestSize: Int

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        for method in RPCMethod.allCases {
            guard let kind = MethodTable.kind(of: method) else { continue }
            router.registerHandler(
                forMethod: method.grpcDescriptor, deserializer: PassThroughCoder(),
                serializer: PassThroughCoder()
            ) { request, _ in
                try await respond(to: request, method: method, streaming: kind.isStreaming)
            }
        }
    }

    private func respond(to request: StreamingServerRequest<[UInt8]>, method: RPCMethod, streaming: Bool) async throws -> StreamingServerResponse<[UInt8]> {
        // The deadline counts from the call's arrival, as gRPC's own timer does.
        let arrival = ContinuousClock.now
        let callRequest: Healthledger_V1_CallRequest
        do {
            callRequest = try GRPCCallRequest.make(method: method, metadata: request.metadata, payload: try await onlyMessage(of: request))
        } catch let error as HealthLedgerRPC.RPCError {
            return StreamingServerResponse(error: GRPCStatus.error(error))
        } catch let error as GRPCCore.RPCError {
            // The transport's: a request above the size limit (`RESOURCE_EXHAUSTED`).
            return StreamingServerResponse(error: error)
        }
        guard streaming else {
            let (response, failure) = await run(method, callRequest, arrival: arrival, send: { _ in })
            guard let response, failure == nil else { return StreamingServerResponse(error: GRPCStatus.error(failure)) }
            return StreamingServerResponse(single: ServerResponse(message: response))
        }
        return StreamingServerResponse { writer in
            let (_, failure) = await run(method, callRequest, arrival: arrival) { message in try await writer.write(message) }
            if let failure { throw GRPCStatus.error(failure) }
            return [:]
        }
    }

    /// Runs the call in a task of its own, which its deadline, the client's cancel (gRPC's
    /// cancellation handle) and the server's shutdown cancel, each noting why first.
    private func run(
        _ method: RPCMethod, _ request: Healthledger_V1_CallRequest, arrival: ContinuousClock.Instant, send: @escaping CallDispatcher.Send
    ) async -> (response: [UInt8]?, failure: HealthLedgerRPC.RPCError?) {
        let deadline = CallDeadline()
        let outcome = Mutex<([UInt8]?, HealthLedgerRPC.RPCError?)>((nil, nil))
        let dispatcher = dispatcher
        let id = calls.nextID()
        let task = Task {
            await dispatcher.run(id: id, method: method, request: request, deadline: deadline, send: send) { response, failure in
                outcome.withLock { $0 = (response, failure) }
            }
        }
        let longRunning = MethodTable.kind(of: method) == .longRunning
        // The deadline: the client's, or the server's default (none for a long-running call
        // that asked for none).
        let timeout = request.timeoutMs != 0 || !longRunning ? dispatcher.timeout(milliseconds: request.timeoutMs) : nil
        let expiry = timeout.map { arrival + $0 }
        let timer = expiry.map { expiry in
            Task {
                guard (try? await Task.sleep(until: expiry, clock: .continuous)) != nil else { return }
                deadline.expire()
                task.cancel()
            }
        }
        calls.add(id, task: task, deadline: deadline, longRunning: longRunning)
        await withRPCCancellationHandler {
            await task.value
        } onCancelRPC: {
            // gRPC cancels the call when its grpc-timeout passes (counted from the stream's
            // arrival, a moment before this handler's), when the client resets the stream, or
            // when the server stops (whose reason is noted first).
            if request.timeoutMs != 0, let expiry, let timeout, ContinuousClock.now >= expiry - min(timeout / 10, .milliseconds(50)) {
                deadline.expire()
            }
            task.cancel()
        }
        timer?.cancel()
        calls.remove(id)
        return outcome.withLock { $0 }
    }

    /// The request's one message; a gRPC client of a unary-request method sends exactly one.
    private func onlyMessage(of request: StreamingServerRequest<[UInt8]>) async throws -> [UInt8] {
        var message: [UInt8]?
        for try await part in request.messages {
            guard part.count <= maximumRequestSize else {
                throw HealthLedgerRPC.RPCError(
                    .resourceExhausted, "the request message is \(part.count) bytes, above the server's limit of \(maximumRequestSize) (--max-frame-size)")
            }
            guard message == nil else {
                throw HealthLedgerRPC.RPCError(.invalidArgument, "the call sent more than one request message; every method takes one")
            }
            message = part
        }
        guard let message else { throw HealthLedgerRPC.RPCError(.invalidArgument, "the call ended without its request message") }
        return message
    }
}

/// The gRPC calls running now, with what the endpoint's shutdown needs to end them.
final class RunningCalls: Sendable {
    private struct Entry {
        let task: Task<Void, Never>
        let deadline: CallDeadline
        let longRunning: Bool
    }

    private let state = Mutex<(next: UInt64, entries: [UInt64: Entry])>((1, [:]))

    func nextID() -> UInt64 {
        state.withLock { state in
            defer { state.next += 1 }
            return state.next
        }
    }

    fileprivate func add(_ id: UInt64, task: Task<Void, Never>, deadline: CallDeadline, longRunning: Bool) {
        state.withLock { $0.entries[id] = Entry(task: task, deadline: deadline, longRunning: longRunning) }
    }

    fileprivate func remove(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    var count: Int { state.withLock { $0.entries.count } }

    /// Ends the long-running calls, which would never end by themselves, with `unavailable`.
    func endLongRunning() {
        for entry in state.withLock({ Array($0.entries.values) }) where entry.longRunning {
            entry.deadline.shutDown()
            entry.task.cancel()
        }
    }

    /// Cancels every call (when draining took too long).
    func cancelAll() {
        for entry in state.withLock({ Array($0.entries.values) }) {
            entry.deadline.shutDown()
            entry.task.cancel()
        }
    }
}

/// A message's bytes as they are: the dispatcher decodes requests and encodes responses itself.
package struct PassThroughCoder: MessageSerializer, MessageDeserializer {
    package init() {}

    package func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }
    package func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}

extension RPCMethod {
    /// The method as gRPC names it: "healthledger.v1.Ledger" and "Save" of "healthledger.v1.Ledger/Save".
    package var grpcDescriptor: MethodDescriptor {
        let parts = rawValue.split(separator: "/", maxSplits: 1).map(String.init)
        return MethodDescriptor(fullyQualifiedService: parts[0], method: parts.count > 1 ? parts[1] : "")
    }
}
