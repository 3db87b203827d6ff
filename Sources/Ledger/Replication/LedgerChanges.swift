import Foundation
import Synchronization

/// Which ledgers of a store changed, in commit order: what followers watch instead of tailing
/// every ledger they copy, so that a primary holding many ledgers keeps open only the ones in
/// use (docs/PROTOCOL.md §7.18, `WatchLedgers`).
///
/// Kept in memory for this process's life, the most recent ``retained`` changes. A cursor
/// names the life it comes from: a follower's cursor from another life (the primary
/// restarted, another member leads), or from before the changes retained, is answered with
/// every ledger.
public final class LedgerChanges: Sendable {
    /// A position in a store's changes: the primary's life and the number of changes before it.
    public struct Cursor: Sendable, Hashable, Comparable {
        public var life: UInt64
        public var position: UInt64

        public init(life: UInt64, position: UInt64) {
            self.life = life
            self.position = position
        }

        /// 16 bytes: the life, then the position, big-endian.
        public var bytes: [UInt8] { KeyEncoding.sequenceKey(life) + KeyEncoding.sequenceKey(position) }

        /// Reads ``bytes``; nil unless there are 16 of them.
        public init?(bytes: [UInt8]) {
            guard bytes.count == 16 else { return nil }
            (life, position) = bytes.withUnsafeBytes { (KeyEncoding.uint64($0, at: 0), KeyEncoding.uint64($0, at: 8)) }
        }

        public static func < (left: Cursor, right: Cursor) -> Bool { (left.life, left.position) < (right.life, right.position) }
    }

    /// What changed after a cursor.
    public enum Answer: Sendable, Hashable {
        /// These ledgers changed (each once, in the order of their last change).
        case changed([String], Cursor)
        /// The cursor is of no use here: every ledger is to be checked.
        case everything(Cursor)
    }

    /// Changes kept; a cursor older than them is answered ``Answer/everything(_:)``.
    static let retained = 65_536

    private struct State {
        /// The ledgers of changes `first + 1` … `position`, oldest first.
        var recent: [String] = []
        var first: UInt64 = 0
        var position: UInt64 = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Waits that timed out or were cancelled before they were registered.
        var released = Set<Int>()
        var nextWaiter = 0
    }

    /// This process's life: random, so that a cursor from another is told apart.
    public let life = UInt64.random(in: 1...UInt64.max)
    private let state = Mutex(State())

    public init() {}

    /// Where the changes are now.
    public var cursor: Cursor { Cursor(life: life, position: state.withLock { $0.position }) }

    /// Records a change of `ledger` (a durable commit, its creation, its legal hold) and wakes
    /// the watchers.
    func note(_ ledger: String) {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.recent.append(ledger)
            state.position += 1
            if state.recent.count >= 2 * Self.retained {
                let dropped = state.recent.count - Self.retained
                state.recent.removeFirst(dropped)
                state.first += UInt64(dropped)
            }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiting { waiter.resume() }
    }

    /// The ledgers changed after `cursor` (nil: none given).
    public func changes(after cursor: Cursor?) -> Answer {
        state.withLock { state in
            let now = Cursor(life: life, position: state.position)
            guard let cursor, cursor.life == life, cursor.position >= state.first, cursor.position <= state.position else { return .everything(now) }
            var seen = Set<String>()
            var changed: [String] = []
            for ledger in state.recent[Int(cursor.position - state.first)...].reversed() where seen.insert(ledger).inserted {
                changed.append(ledger)
            }
            return .changed(changed.reversed(), now)
        }
    }

    /// Returns once a change comes after `cursor`, after `timeout`, or when the task is cancelled.
    public func wait(after cursor: Cursor, timeout: Duration) async {
        let key = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { self.release(key) }
        }
        defer {
            timer.cancel()
            _ = state.withLock { $0.released.remove(key) }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = state.withLock { state -> Bool in
                    // Already past it, or released (timed out, cancelled) before it was registered.
                    guard cursor.life == life, state.position <= cursor.position, state.released.remove(key) == nil else { return false }
                    state.waiters[key] = continuation
                    return true
                }
                if !waiting { continuation.resume() }
            }
        } onCancel: {
            release(key)
        }
    }

    private func release(_ key: Int) {
        let waiter = state.withLock { state in
            guard let waiter = state.waiters.removeValue(forKey: key) else {
                state.released.insert(key)
                return CheckedContinuation<Void, Never>?.none
            }
            return waiter
        }
        waiter?.resume()
    }
}

/// The followers watching a store (``LedgerChanges``) as a primary hears from them: when
/// each last watched, and which of its answers each has applied in full.
public final class FollowerPresence: Sendable {
    private struct Watcher {
        var lastSeen: ContinuousClock.Instant
        var watching = 0
        /// The last answer whose every change it applied (of this life of the primary), and
        /// the placement groups its watch asked for (nil: every ledger).
        var applied: LedgerChanges.Cursor?
        var groups: Set<Int>?
    }

    private let state = Mutex<[String: Watcher]>([:])

    public init() {}

    /// Runs `watch`, a watch of `follower` for the ledgers of `groups` (nil: every ledger),
    /// which says it applied every change of them up to `applied`: it counts as present while
    /// `watch` runs.
    public func watching<R>(
        by follower: String, applied: LedgerChanges.Cursor?, groups: Set<Int>? = nil, _ watch: () async throws -> R
    ) async rethrows -> R {
        note(follower, applied: applied, groups: groups, watching: 1)
        defer { note(follower, applied: nil, groups: groups, watching: -1) }
        return try await watch()
    }

    private func note(_ follower: String, applied: LedgerChanges.Cursor?, groups: Set<Int>?, watching change: Int) {
        let now = ContinuousClock.now
        state.withLock { watchers in
            var watcher = watchers[follower] ?? Watcher(lastSeen: now)
            watcher.lastSeen = now
            watcher.watching += change
            if watcher.groups != groups {
                // Another set of groups: what it applied before says nothing of the new ones.
                if change > 0 { (watcher.applied, watcher.groups) = (applied, groups) }
            } else if let applied, watcher.applied.map({ $0.life != applied.life || $0 < applied }) ?? true {
                watcher.applied = applied
            }
            watchers[follower] = watcher
        }
    }

    /// The followers watching now, or heard from within `window`.
    public func present(within window: Duration) -> Set<String> {
        let now = ContinuousClock.now
        return Set(state.withLock { $0.filter { $0.value.watching > 0 || $0.value.lastSeen >= now - window }.keys })
    }

    /// The last answer `follower` applied in full, or nil; with `group`, only when its watch
    /// covers that placement group.
    public func applied(by follower: String, group: Int? = nil) -> LedgerChanges.Cursor? {
        state.withLock { watchers in
            guard let watcher = watchers[follower] else { return nil }
            if let group, let groups = watcher.groups, !groups.contains(group) { return nil }
            return watcher.applied
        }
    }

    /// Forgets what every follower applied of placement group `group` (nil: of every
    /// ledger): a member of a cluster taking the lead of it again.
    public func forget(group: Int? = nil) {
        state.withLock { watchers in
            for (name, watcher) in watchers where group.map({ watcher.groups?.contains($0) ?? true }) ?? true {
                watchers[name]?.applied = nil
            }
        }
    }
}
