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

    /// How a write's wait for its followers ended.
    public enum Outcome: Sendable, Hashable {
        /// A follower has it durable.
        case acknowledged
        /// No follower was connected: nothing to wait for.
        case noFollower
        /// The followers connected when it began did not acknowledge it in time.
        case timedOut
    }

    private struct Waiter {
        var sequence: UInt64
        /// The followers that must all have it; nil: any one.
        var required: Set<String>?
        var resume: @Sendable (Outcome) -> Void

        func isAnswered(by acknowledgements: [String: Acknowledgement], latest: UInt64) -> Bool {
            guard let required else { return latest >= sequence }
            return required.allSatisfy { (acknowledgements[$0]?.sequence ?? 0) >= sequence }
        }
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
            let done = state.waiters.filter { $0.value.isAnswered(by: state.acknowledgements, latest: sequence) }
            for key in done.keys { state.waiters[key] = nil }
            return Array(done.values)
        }
        for waiter in ready { waiter.resume(.acknowledged) }
    }

    /// The followers connected (fetching, or heard from within `window`), most advanced first.
    public func connected(within window: Duration) -> [Acknowledgement] {
        let now = ContinuousClock.now
        return state.withLock { $0.acknowledgements.values.filter { $0.isConnected(at: now, window: window) } }.sorted { $0.sequence > $1.sequence }
    }

    /// Forgets every follower's progress (a member of a cluster taking the lead again: what
    /// followers said before says nothing of the log now). Writes waiting stay waiting.
    public func forgetAll() {
        state.withLock { $0.acknowledgements = [:] }
    }

    /// Every follower that ever fetched, by name.
    public var all: [Acknowledgement] {
        state.withLock { $0.acknowledgements.values }.sorted { $0.follower < $1.follower }
    }

    /// Whether `follower` has a fetch of this ledger in progress.
    public func isFetching(_ follower: String) -> Bool {
        state.withLock { ($0.acknowledgements[follower]?.fetching ?? 0) > 0 }
    }

    /// How far `follower` said it has the log durable; nil when it never fetched.
    public func acknowledged(by follower: String) -> UInt64? {
        state.withLock { $0.acknowledgements[follower]?.sequence }
    }

    /// Calls `resume` with `.acknowledged` once every one of `required` has event `sequence`
    /// durable, or `.timedOut` after `timeout` (a cluster's synchronous standby: strict,
    /// whether it is connected or not).
    public func whenAcknowledged(
        _ sequence: UInt64, by required: Set<String>, timeout: Duration, resume: @escaping @Sendable (Outcome) -> Void
    ) {
        let key = state.withLock { state -> Int? in
            let waiter = Waiter(sequence: sequence, required: required, resume: resume)
            guard !waiter.isAnswered(by: state.acknowledgements, latest: 0) else { return nil }
            let key = state.nextWaiter
            state.nextWaiter += 1
            state.waiters[key] = waiter
            return key
        }
        guard let key else { return resume(.acknowledged) }
        expire(key, after: timeout)
    }

    private func expire(_ key: Int, after wait: Duration) {
        let (seconds, attoseconds) = max(wait, .zero).components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) {
            guard let waiter = self.state.withLock({ $0.waiters.removeValue(forKey: key) }) else { return }
            waiter.resume(.timedOut)
        }
    }

    /// Calls `resume` once a follower has event `sequence` durable, at once when none is
    /// connected, or when the connected ones stop counting as connected without having
    /// acknowledged it: a write waits for a connected follower, never for one that left, and
    /// at most `window` (less when the followers were last heard from a while ago and have no
    /// fetch in progress).
    ///
    /// - Parameter watched: a follower watches the store (``FollowerPresence``) without
    ///   tailing this ledger now: it will once it hears of the write, so the write waits for
    ///   it as for a connected one, at most `window`.
    public func whenReplicated(_ sequence: UInt64, window: Duration, watched: Bool = false, resume: @escaping @Sendable (Outcome) -> Void) {
        let now = ContinuousClock.now
        let registered = state.withLock { state -> (key: Int, wait: Duration)? in
            let heard = state.acknowledgements.values.filter { $0.isConnected(at: now, window: window) }
            guard !heard.isEmpty || watched, !heard.contains(where: { $0.sequence >= sequence }) else { return nil }
            let key = state.nextWaiter
            state.nextWaiter += 1
            state.waiters[key] = Waiter(sequence: sequence, required: nil, resume: resume)
            // Until the last of them would stop counting as connected.
            let wait = watched || heard.contains { $0.fetching > 0 } ? window : heard.map { $0.lastSeen + window - now }.max() ?? window
            return (key, wait)
        }
        guard let (key, wait) = registered else {
            let connected = connected(within: window)
            return resume(connected.isEmpty ? .noFollower : connected.contains { $0.sequence >= sequence } ? .acknowledged : .timedOut)
        }
        expire(key, after: wait)
    }
}
