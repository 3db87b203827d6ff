import HealthLedgerRPC
import LedgerSchema
import Synchronization

/// The calls open on one connection, by call id, and where their frames go.
final class CallTable: Sendable {
    private enum Pending {
        case unary(CheckedContinuation<[UInt8], any Error>, message: [UInt8]?)
        case stream(AsyncThrowingStream<[UInt8], any Error>.Continuation)
    }

    private struct State {
        var pending: [UInt64: Pending] = [:]
        var nextID: UInt64 = 1
        /// Set once the connection is closing or closed: new calls fail with it.
        var closed: RPCError?
    }

    private let state = Mutex(State())

    /// Reserves a call id; throws when the connection no longer takes calls.
    func reserve() throws -> UInt64 {
        try state.withLock { state in
            if let closed = state.closed { throw closed }
            defer { state.nextID += 1 }
            return state.nextID
        }
    }

    func registerUnary(_ id: UInt64, _ continuation: CheckedContinuation<[UInt8], any Error>) {
        let failure = state.withLock { state -> RPCError? in
            if let closed = state.closed { return closed }
            state.pending[id] = .unary(continuation, message: nil)
            return nil
        }
        if let failure { continuation.resume(throwing: failure) }
    }

    func registerStream(_ id: UInt64, _ continuation: AsyncThrowingStream<[UInt8], any Error>.Continuation) {
        let failure = state.withLock { state -> RPCError? in
            if let closed = state.closed { return closed }
            state.pending[id] = .stream(continuation)
            return nil
        }
        if let failure { continuation.finish(throwing: failure) }
    }

    /// Routes a frame from the server to its call.
    func deliver(_ frame: Healthledger_V1_Frame) {
        switch frame.kind {
        case .message(let payload): deliver(message: Array(payload), to: frame.callID)
        case .status(let status): finish(frame.callID, with: RPCError(status))
        default: break
        }
    }

    /// Hands a `message` frame's payload to call `id`: a stream's next element, or a unary
    /// call's response (taken when its status comes).
    func deliver(message: [UInt8], to id: UInt64) {
        let stream = state.withLock { state -> AsyncThrowingStream<[UInt8], any Error>.Continuation? in
            switch state.pending[id] {
            case .unary(let continuation, _)?:
                state.pending[id] = .unary(continuation, message: message)
                return nil
            case .stream(let continuation)?:
                return continuation
            case nil:
                return nil
            }
        }
        stream?.yield(message)
    }

    /// Ends call `id` on its `status` frame: `OK` when `error` is nil.
    func finish(_ id: UInt64, with error: RPCError?) {
        let pending = state.withLock { $0.pending.removeValue(forKey: id) }
        switch pending {
        case .unary(let continuation, let message)?:
            if let error {
                continuation.resume(throwing: error)
            } else {
                continuation.resume(returning: message ?? [])
            }
        case .stream(let continuation)?:
            continuation.finish(throwing: error)
        case nil:
            break
        }
    }

    /// Ends a call locally (cancelled by the caller) without waiting for the server.
    func abandon(_ id: UInt64, with error: RPCError) {
        let pending = state.withLock { $0.pending.removeValue(forKey: id) }
        switch pending {
        case .unary(let continuation, _)?: continuation.resume(throwing: error)
        case .stream(let continuation)?: continuation.finish(throwing: error)
        case nil: break
        }
    }

    /// Refuses new calls from now on; with `failOpen`, also fails the open ones.
    func close(_ error: RPCError, failOpen: Bool) {
        let open = state.withLock { state -> [Pending] in
            if state.closed == nil { state.closed = error }
            guard failOpen else { return [] }
            defer { state.pending = [:] }
            return Array(state.pending.values)
        }
        for pending in open {
            switch pending {
            case .unary(let continuation, _): continuation.resume(throwing: error)
            case .stream(let continuation): continuation.finish(throwing: error)
            }
        }
    }

    /// The server's go-away: no new calls here. Calls above `lastCallID` never started:
    /// unary ones fail with ``CallNotStarted`` (the store retries them on a new connection),
    /// streams with `unavailable`. The others may still finish.
    func goAway(lastCallID: UInt64, reason: String) {
        let error = RPCError(.unavailable, "the server is going away: \(reason)")
        let unstarted = state.withLock { state -> [Pending] in
            if state.closed == nil { state.closed = error }
            return state.pending.keys.filter { $0 > lastCallID }.compactMap { state.pending.removeValue(forKey: $0) }
        }
        for pending in unstarted {
            switch pending {
            case .unary(let continuation, _): continuation.resume(throwing: CallNotStarted(error: error))
            case .stream(let continuation): continuation.finish(throwing: RPCError(.unavailable, "\(error.message); the call was not started"))
            }
        }
    }

    var isClosed: Bool { state.withLock { $0.closed != nil } }
}

/// A call the server never started (its id was above a go-away's last call id): safe to
/// send again on another connection.
struct CallNotStarted: Error {
    let error: RPCError
}
