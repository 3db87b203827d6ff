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

    /// Changes kept; a cursor older than them is of no use (``lastChanges(after:)`` answers nil).
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

    /// Records a change of `ledger` (a durable commit, its creation, its legal hold, its
    /// erasure) and wakes the watchers; returns where the changes are after it.
    @discardableResult
    func note(_ ledger: String) -> Cursor {
        let (waiting, now) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Cursor) in
            state.recent.append(ledger)
            state.position += 1
            if state.recent.count >= 2 * Self.retained {
                let dropped = state.recent.count - Self.retained
                state.recent.removeFirst(dropped)
                state.first += UInt64(dropped)
            }
            defer { state.waiters = [:] }
            return (Array(state.waiters.values), Cursor(life: life, position: state.position))
        }
        for waiter in waiting { waiter.resume() }
        return now
    }

    /// The ledgers changed after `cursor`, each once with the position of its last change, in
    /// that order; nil when the cursor is of no use here (none, of another life, or older
    /// than the changes kept). And where the changes are now.
    public func lastChanges(after cursor: Cursor?) -> (changed: [(ledger: String, position: UInt64)]?, now: Cursor) {
        state.withLock { state in
            let now = Cursor(life: life, position: state.position)
            guard let cursor, usable(cursor, in: state) else { return (nil, now) }
            var seen = Set<String>()
            var changed: [(ledger: String, position: UInt64)] = []
            let start = Int(cursor.position - state.first)
            for index in (start..<state.recent.count).reversed() where seen.insert(state.recent[index]).inserted {
                changed.append((state.recent[index], state.first + UInt64(index) + 1))
            }
            return (changed.reversed(), now)
        }
    }

    /// Whether `cursor` can be answered with the changes after it: it is of this life, and
    /// neither older than the changes kept nor ahead of them.
    public func isUsable(_ cursor: Cursor) -> Bool { state.withLock { usable(cursor, in: $0) } }

    private func usable(_ cursor: Cursor, in state: State) -> Bool {
        cursor.life == life && cursor.position >= state.first && cursor.position <= state.position
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

/// What a follower watches of a primary's store: every ledger, or, in a cluster, the ledgers
/// of one placement group (docs/PROTOCOL.md §7.19).
public enum WatchScope: Hashable, Sendable, Comparable {
    case everyLedger
    case group(Int)

    /// Whether ledger `id` of placement group `group` is in this scope.
    public func contains(group: Int) -> Bool {
        switch self {
        case .everyLedger: true
        case .group(let watched): watched == group
        }
    }
}

/// The followers watching a store (``LedgerChanges``) as a primary hears from them: when
/// each last watched, and, for each scope its watch names, which of the answers it has
/// applied in full.
public final class FollowerPresence: Sendable {
    private struct Watcher {
        var lastSeen: ContinuousClock.Instant
        var watching = 0
        /// Per scope its last watch named, the last answer whose every change of that scope it
        /// applied (of this life of the primary); a scope without one is named with nil.
        var applied: [WatchScope: LedgerChanges.Cursor?] = [:]
    }

    private let state = Mutex<[String: Watcher]>([:])

    public init() {}

    /// Runs `watch`, a watch of `follower` for the scopes of `applied`, each with the last
    /// answer whose every change of it the follower says it applied (nil: none yet): it
    /// counts as present while `watch` runs. A scope it no longer names is forgotten.
    public func watching<R>(
        by follower: String, applied: [WatchScope: LedgerChanges.Cursor?], _ watch: () async throws -> R
    ) async rethrows -> R {
        let now = ContinuousClock.now
        state.withLock { watchers in
            var watcher = watchers[follower] ?? Watcher(lastSeen: now)
            (watcher.lastSeen, watcher.watching) = (now, watcher.watching + 1)
            var scopes: [WatchScope: LedgerChanges.Cursor?] = [:]
            for (scope, cursor) in applied {
                // Never back within one life: an earlier watch may be answered after a later one.
                if let cursor, let known = watcher.applied[scope] ?? nil, known.life == cursor.life, known > cursor {
                    scopes[scope] = known
                } else {
                    scopes[scope] = cursor
                }
            }
            watcher.applied = scopes
            watchers[follower] = watcher
        }
        defer {
            let now = ContinuousClock.now
            state.withLock { watchers in
                watchers[follower]?.lastSeen = now
                watchers[follower]?.watching -= 1
            }
        }
        return try await watch()
    }

    /// The followers watching now, or heard from within `window`.
    public func present(within window: Duration) -> Set<String> {
        let now = ContinuousClock.now
        return Set(state.withLock { $0.filter { $0.value.watching > 0 || $0.value.lastSeen >= now - window }.keys })
    }

    /// The last answer `follower` applied in full of `scope` (nil: of every scope its watch
    /// names, the least), or nil when it applied none or does not watch it.
    public func applied(by follower: String, in scope: WatchScope? = nil) -> LedgerChanges.Cursor? {
        state.withLock { watchers in
            guard let applied = watchers[follower]?.applied else { return nil }
            guard let scope else {
                let cursors = applied.values.compactMap { $0 }
                return cursors.count == applied.count ? cursors.min() : nil
            }
            return applied[scope] ?? nil
        }
    }

    /// Forgets what every follower applied of `scope`: a member of a cluster taking the lead
    /// of a placement group again.
    public func forget(_ scope: WatchScope) {
        state.withLock { watchers in
            for name in watchers.keys where watchers[name]?.applied[scope] != nil {
                watchers[name]?.applied[scope] = .some(nil)
            }
        }
    }
}
