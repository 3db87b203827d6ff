import Synchronization

/// Registered watchers by token: what ``ChangeWatchers`` and ``AccessWatchers`` keep.
final class WatcherRegistry<Watcher: Sendable>: Sendable {
    private let state = Mutex<(next: Int, watchers: [Int: Watcher])>((0, [:]))

    /// Registers `watcher`; the token removes it.
    func add(_ watcher: Watcher) -> Int {
        state.withLock { state in
            state.next += 1
            state.watchers[state.next] = watcher
            return state.next
        }
    }

    func remove(_ token: Int) {
        _ = state.withLock { $0.watchers.removeValue(forKey: token) }
    }

    var count: Int { state.withLock { $0.watchers.count } }

    /// The watchers that `isIncluded` picks, taken under the lock (to be called outside it).
    func watchers(where isIncluded: (Watcher) -> Bool = { _ in true }) -> [Watcher] {
        state.withLock { $0.watchers.values.filter(isIncluded) }
    }
}
