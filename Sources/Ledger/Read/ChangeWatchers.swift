import HealthModel
import Synchronization

/// Callbacks for committed changes: long-running queries (observers, watched anchored
/// queries) register here and re-read the ledger when a type they follow changes.
///
/// A callback only learns that something of the type committed; what the caller may see of
/// it is decided by the read it then runs, under its own read scope.
public final class ChangeWatchers: Sendable {
    private struct Watcher {
        var type: UInt32
        var onChange: @Sendable () -> Void
    }

    private let state = Mutex<(next: Int, watchers: [Int: Watcher])>((0, [:]))

    /// Calls `onChange` after each commit that touched objects of `type` (saves, deletes,
    /// per-object read selections). Keep the token and pass it to ``remove(_:)`` when done.
    public func add(type: ObjectType, _ onChange: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            state.next += 1
            state.watchers[state.next] = Watcher(type: type.code, onChange: onChange)
            return state.next
        }
    }

    /// How many watchers are registered (one per running observer or watched query).
    public var count: Int { state.withLock { $0.watchers.count } }

    public func remove(_ token: Int) {
        _ = state.withLock { $0.watchers.removeValue(forKey: token) }
    }

    /// Called once a commit that touched `types` is durable.
    func notify(_ types: Set<UInt32>) {
        guard !types.isEmpty else { return }
        let due = state.withLock { state in state.watchers.values.filter { types.contains($0.type) }.map(\.onChange) }
        for onChange in due { onChange() }
    }
}
