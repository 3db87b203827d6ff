/// A change to who may do what on a ledger, announced once it is durable.
public enum AccessChange: Sendable, Hashable {
    /// The owner decided on, or changed the object selection of, this app (bundle id).
    case authorization(app: String)
    /// A credential was revoked.
    case credentialRevoked(id: String)
    /// The ledger is being erased whole: every stream on it ends.
    case ledgerErased
    /// This copy of the ledger is being removed (a cluster member no longer keeps its
    /// placement group; other members do): every stream on it ends.
    case copyReleased
}

/// Callbacks for access changes: the server uses them to end the streams of an app whose
/// access was just taken away, without waiting for the stream's next message.
public final class AccessWatchers: Sendable {
    private let registry = WatcherRegistry<@Sendable (AccessChange) -> Void>()

    /// Registers `onChange`; keep the token and pass it to ``remove(_:)`` when done.
    public func add(_ onChange: @escaping @Sendable (AccessChange) -> Void) -> Int { registry.add(onChange) }

    public func remove(_ token: Int) { registry.remove(token) }

    /// Watchers registered now.
    var count: Int { registry.count }

    func notify(_ change: AccessChange) {
        for watcher in registry.watchers() { watcher(change) }
    }
}
