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

/// Whether a connection's socket takes more bytes: a streaming call waits, before writing
/// its next message, while what the server wrote and the socket has not taken yet is past
/// NIO's high-water mark (64 KiB). The client's window counts messages, and a message may
/// be a megabyte: a client that grants a large window and does not read would otherwise
/// have the server hold every message of every stream.
package final class WritableGate: Sendable {
    private struct State {
        var writable = true
        var closed = false
        var next: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        /// Waits cancelled before they were registered.
        var cancelled: Set<UInt64> = []
    }

    private let state = Mutex(State())

    package init() {}

    /// The socket's writability changed (on the event loop): waiters go on when it takes bytes again.
    package func set(writable: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.writable = writable
            guard writable else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The connection closed: every wait, now and later, ends with an error.
    package func close() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.closed = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
    }

    /// Returns at once while the socket takes bytes; otherwise once it does again.
    /// - Throws: `CancellationError` when the connection closes or the task is cancelled.
    package func wait() async throws {
        let id = try state.withLock { state -> UInt64? in
            if state.closed { throw CancellationError() }
            if state.writable { return nil }
            state.next += 1
            return state.next
        }
        guard let id else { return }
        // The cancellation handler runs only while the wait does: afterwards nothing adds the id.
        defer { _ = state.withLock { $0.cancelled.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.closed || state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if state.writable { return .success(()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                state.cancelled.insert(id)
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
