import Synchronization

/// A change to who may do what on a ledger, announced once it is durable.
public enum AccessChange: Sendable, Hashable {
    /// The owner decided on, or changed the object selection of, this app (bundle id).
    case authorization(app: String)
    /// A credential was revoked.
    case credentialRevoked(id: String)
}

/// Callbacks for access changes: the server uses them to end the streams of an app whose
/// access was just taken away, without waiting for the stream's next message.
public final class AccessWatchers: Sendable {
    private let state = Mutex<(next: Int, watchers: [Int: @Sendable (AccessChange) -> Void])>((0, [:]))

    /// Registers `onChange`; keep the token and pass it to ``remove(_:)`` when done.
    public func add(_ onChange: @escaping @Sendable (AccessChange) -> Void) -> Int {
        state.withLock { state in
            state.next += 1
            state.watchers[state.next] = onChange
            return state.next
        }
    }

    public func remove(_ token: Int) {
        _ = state.withLock { $0.watchers.removeValue(forKey: token) }
    }

    func notify(_ change: AccessChange) {
        let watchers = state.withLock { Array($0.watchers.values) }
        for watcher in watchers { watcher(change) }
    }
}
