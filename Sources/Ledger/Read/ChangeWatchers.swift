import HealthModel
import Synchronization

/// Callbacks for committed changes: long-running queries (observers, watched anchored
/// queries) register here and re-read the ledger when a type they follow changes.
///
/// A callback only learns that something of the type committed; what the caller may see of
/// it is decided by the read it then runs, under its own read scope.
public final class ChangeWatchers: Sendable {
    private struct Watcher: Sendable {
        /// nil: every commit.
        var types: Set<UInt32>?
        /// Told of new access records too (a follower's fetch waiting on its primary).
        var accessRecords = false
        var onChange: @Sendable () -> Void
    }

    private let registry = WatcherRegistry<Watcher>()
    /// Told of every commit too, but no watcher (nothing a stream holds): the store's record
    /// of which ledgers changed (``LedgerChanges``).
    let storeNote = Mutex<Callback<Void, Never>?>(nil)

    /// Calls `onChange` after each commit that touched objects of `type` (saves, deletes,
    /// per-object read selections). Keep the token and pass it to ``remove(_:)`` when done.
    public func add(type: ObjectType, _ onChange: @escaping @Sendable () -> Void) -> Int {
        add(types: [type], onChange)
    }

    /// Calls `onChange` after each commit that touched objects of any of `types`.
    public func add(types: [ObjectType], _ onChange: @escaping @Sendable () -> Void) -> Int {
        registry.add(Watcher(types: Set(types.map(\.code)), onChange: onChange))
    }

    /// Calls `onChange` after every commit, whatever it changed (the audit trail follows the
    /// whole log).
    public func addForEveryCommit(_ onChange: @escaping @Sendable () -> Void) -> Int {
        registry.add(Watcher(types: nil, onChange: onChange))
    }

    /// How many watchers are registered (one per running observer or watched query, and per
    /// follower's fetch waiting).
    public var count: Int { registry.count }

    public func remove(_ token: Int) { registry.remove(token) }

    /// Calls `onChange` after every commit and every write of access records (a follower's
    /// fetch waiting on its primary: it copies both).
    func addFetch(_ onChange: @escaping @Sendable () -> Void) -> Int {
        registry.add(Watcher(types: nil, accessRecords: true, onChange: onChange))
    }

    /// Called once a commit that touched `types` (maybe none) is durable.
    func notify(_ types: Set<UInt32>) {
        for watcher in registry.watchers(where: { $0.types.map { !types.isDisjoint(with: $0) } ?? true }) { watcher.onChange() }
        storeNote.withLock { $0 }?.call(())
    }

    /// Tells followers' fetches and the store's record of changed ledgers only: new access
    /// records, which a follower copies (``Ledger/accessFeed(after:afterKey:limit:)``) but no
    /// stream shows.
    func noteAccessRecords() {
        for watcher in registry.watchers(where: \.accessRecords) { watcher.onChange() }
        storeNote.withLock { $0 }?.call(())
    }
}

/// A callback kept in a `Mutex`, as a struct. A closure kept there bare (`Mutex<(() -> Void)?>`)
/// is stored as a generic value, and every `withLock` hands it to its body `inout`: the body
/// gets it wrapped in a reabstraction thunk and the `Mutex` gets the wrapper back, wrapped
/// once more. Read at every commit, the wrappers piled up by two a commit — each call a frame
/// deeper and slower, until the committing thread's stack would run out. In a struct the closure
/// keeps its own representation.
package struct Callback<Argument, Failure: Error>: Sendable {
    package let call: @Sendable (Argument) throws(Failure) -> Void

    package init(_ call: @escaping @Sendable (Argument) throws(Failure) -> Void) { self.call = call }
}

