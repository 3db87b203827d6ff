import HealthLedgerRPC
import LedgerSchema
import SwiftProtobuf

/// A connection's life as one value: which calls are open, and whether it takes new ones.
/// Each event of the connection is one method here, which makes the transition and says
/// what the connection must do; the handler only carries it out.
///
/// ```
/// active ──drain / client half-close──▶ draining ──last call ends──▶ closed
///    │                                                                  ▲
///    └────────── idle with no call open / broken byte stream ──────────┘
/// ```
package struct ConnectionState: Sendable {
    package enum Phase: Sendable, Equatable {
        /// Takes new calls.
        case active
        /// Takes none; the open calls run to their end, then the connection closes.
        case draining
        /// Closing or closed: requests are dropped unanswered (above the go-away's last call id).
        case closed
    }

    /// What becomes of a request.
    package enum Admission: Sendable, Equatable {
        /// The call starts; its id now counts as open.
        case start
        /// Refused with a status on `callID`: the request's own id, or 0 when that id belongs
        /// to a call that is still running (a status on it would read as that call's).
        case refuse(callID: UInt64, RPCError)
        /// Dropped without an answer: the connection is closing, and the go-away it sent
        /// names a last call id below this one (the call never started).
        case ignore
    }

    package private(set) var phase = Phase.active
    package private(set) var openCalls: Set<UInt64> = []
    /// The highest call id started: a go-away's `last_call_id`.
    package private(set) var highestCallID: UInt64 = 0
    package let maximumCalls: Int

    package init(maximumCalls: Int) {
        self.maximumCalls = maximumCalls
    }

    /// A request arrived for call `id`.
    package mutating func admit(_ id: UInt64) -> Admission {
        // Closing: no answer at all, not even to call id 0 (the client may be gone).
        guard phase != .closed else { return .ignore }
        guard id != 0 else { return .refuse(callID: 0, RPCError(.invalidArgument, "call id 0 is reserved")) }
        // Before the drain's refusal: a status on a running call's id would read as that call's.
        guard !openCalls.contains(id) else {
            return .refuse(callID: 0, RPCError(.invalidArgument, "call id \(id) is already in use"))
        }
        guard phase == .active else { return .refuse(callID: id, RPCError(.unavailable, "the server is shutting down")) }
        guard openCalls.count < maximumCalls else {
            let open = maximumCalls == 1 ? "1 call is" : "\(maximumCalls) calls are"
            return .refuse(callID: id, RPCError(.resourceExhausted, "\(open) already open on this connection, its limit"))
        }
        openCalls.insert(id)
        highestCallID = max(highestCallID, id)
        return .start
    }

    /// Call `id` sent its status. True when the connection must now close (it was draining
    /// and this was its last call).
    package mutating func ended(_ id: UInt64) -> Bool {
        openCalls.remove(id)
        guard phase == .draining, openCalls.isEmpty else { return false }
        phase = .closed
        return true
    }

    /// The client shut down its sending side: the running calls finish, then the connection
    /// closes. True when it must close now (no call is open).
    package mutating func inputClosed() -> Bool {
        guard phase == .active else { return false }
        phase = openCalls.isEmpty ? .closed : .draining
        return phase == .closed
    }

    /// The server shuts down: the go-away to send (nil when the connection is already
    /// closing), and whether to close at once (no call is open).
    package mutating func drain(reason: String) -> (goAway: Healthledger_V1_Frame, close: Bool)? {
        guard phase != .closed else { return nil }
        phase = openCalls.isEmpty ? .closed : .draining
        return (goAway(reason), phase == .closed)
    }

    /// The connection has been idle for the idle timeout: with no call open it closes after
    /// the returned go-away, so a request crossing it on the wire is known not to have
    /// started. Nil while a call is open (then the connection stays).
    package mutating func idle(reason: String) -> Healthledger_V1_Frame? {
        guard phase == .active, openCalls.isEmpty else { return nil }
        phase = .closed
        return goAway(reason)
    }

    /// The byte stream can no longer be trusted: the go-away to send before closing (also
    /// after a half-close, whose stream may have ended inside a frame).
    package mutating func broken(reason: String) -> Healthledger_V1_Frame {
        phase = .closed
        return goAway(reason)
    }

    /// The socket closed: every open call is abandoned.
    package mutating func inactive() -> Set<UInt64> {
        phase = .closed
        defer { openCalls = [] }
        return openCalls
    }

    private func goAway(_ reason: String) -> Healthledger_V1_Frame {
        var frame = Healthledger_V1_Frame()
        frame.goAway = .with {
            $0.lastCallID = highestCallID
            $0.reason = reason
        }
        return frame
    }
}
