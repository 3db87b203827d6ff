import Synchronization

/// Flow control for a server-streaming call: the client grants messages with
/// `WindowUpdate`; the server waits when the window is used up, so a slow reader never
/// makes it buffer without bound.
package final class StreamWindow: Sendable {
    private struct State {
        var available: Int
        var waiter: CheckedContinuation<Void, any Error>?
        var cancelled = false
    }

    private let state: Mutex<State>

    init(initial: Int) {
        state = Mutex(State(available: initial))
    }

    /// Adds `messages` to the window, waking a waiting sender.
    func grant(_ messages: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            state.available += messages
            guard state.available > 0, let waiter = state.waiter else { return nil }
            state.waiter = nil
            state.available -= 1
            return waiter
        }
        waiter?.resume()
    }

    /// Takes one message from the window, waiting until the client grants one.
    func acquire() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Bool? in
                    if state.cancelled { return nil }
                    if state.available > 0 {
                        state.available -= 1
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                switch ready {
                case true?: continuation.resume()
                case nil: continuation.resume(throwing: CancellationError())
                case false?: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                state.cancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
