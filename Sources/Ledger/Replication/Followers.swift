import Foundation
import Synchronization

/// A primary's view of a ledger's followers: how far each has the log durable (what its last
/// fetch said), and the writes waiting for one of them to have theirs (semi-synchronous
/// acknowledgement, docs/PROTOCOL.md §7.18).
///
/// A follower counts as connected while one of its fetches is in progress (waiting on the
/// primary for new events) or its last one ended within the `window` its caller passes; a
/// write waits only while some follower is connected, and at most that long.
public final class Followers: Sendable {
    /// What one follower last said.
    public struct Acknowledgement: Sendable, Hashable {
        public var follower: String
        /// Every event up to this one is durable on the follower.
        public var sequence: UInt64
        public var lastSeen: ContinuousClock.Instant
        /// Its fetches in progress.
        public var fetching: Int

        func isConnected(at now: ContinuousClock.Instant, window: Duration) -> Bool { fetching > 0 || lastSeen >= now - window }
    }

    private struct Waiter {
        var sequence: UInt64
        var resume: @Sendable (Bool) -> Void
    }

    private struct State {
        var acknowledgements: [String: Acknowledgement] = [:]
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Runs `fetch`, a fetch of `follower`, which says it has every event up to `sequence`
    /// durable: answers the writes it was the first to have, and counts the follower as
    /// connected while `fetch` runs.
    public func fetching<R>(by follower: String, acknowledging sequence: UInt64, _ fetch: () async throws -> R) async rethrows -> R {
        acknowledge(follower, sequence: sequence, fetching: 1)
        defer { acknowledge(follower, sequence: sequence, fetching: -1) }
        return try await fetch()
    }

    private func acknowledge(_ follower: String, sequence: UInt64, fetching change: Int) {
        let now = ContinuousClock.now
        let ready = state.withLock { state -> [Waiter] in
            var acknowledgement = state.acknowledgements[follower] ?? Acknowledgement(follower: follower, sequence: 0, lastSeen: now, fetching: 0)
            acknowledgement.sequence = max(acknowledgement.sequence, sequence)
            acknowledgement.lastSeen = now
            acknowledgement.fetching += change
            state.acknowledgements[follower] = acknowledgement
            let done = state.waiters.filter { $0.value.sequence <= sequence }
            for key in done.keys { state.waiters[key] = nil }
            return Array(done.values)
        }
        for waiter in ready { waiter.resume(true) }
    }

    /// The followers connected (fetching, or heard from within `window`), most advanced first.
    public func connected(within window: Duration) -> [Acknowledgement] {
        let now = ContinuousClock.now
        return state.withLock { $0.acknowledgements.values.filter { $0.isConnected(at: now, window: window) } }.sorted { $0.sequence > $1.sequence }
    }

    /// Calls `resume` once a follower has event `sequence` durable (true), or at once (false)
    /// when no follower is connected, or (false) when none acknowledges it before `window`
    /// passes: a write waits for a connected follower, not for one that left.
    public func whenReplicated(_ sequence: UInt64, window: Duration, resume: @escaping @Sendable (Bool) -> Void) {
        let now = ContinuousClock.now
        let registered = state.withLock { state -> Int? in
            let heard = state.acknowledgements.values.filter { $0.isConnected(at: now, window: window) }
            guard !heard.isEmpty, !heard.contains(where: { $0.sequence >= sequence }) else { return nil }
            let key = state.nextWaiter
            state.nextWaiter += 1
            state.waiters[key] = Waiter(sequence: sequence, resume: resume)
            return key
        }
        guard let key = registered else {
            let replicated = connected(within: window).contains { $0.sequence >= sequence }
            return resume(replicated)
        }
        let (seconds, attoseconds) = window.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) {
            guard let waiter = self.state.withLock({ $0.waiters.removeValue(forKey: key) }) else { return }
            waiter.resume(false)
        }
    }

    /// ``whenReplicated(_:window:resume:)`` for a task.
    public func replicated(_ sequence: UInt64, window: Duration) async -> Bool {
        await withCheckedContinuation { continuation in whenReplicated(sequence, window: window) { continuation.resume(returning: $0) } }
    }
}
