import HealthModel
import LMDB
import Synchronization

/// Announces what other processes commit to a ledger, so that this process's streams learn
/// of it as they do of its own commits.
///
/// LMDB lets several processes write one ledger: the operator's `healthledger admin` on the
/// data directory, another server on the same volume. Their commits reach this process's
/// reads at once, but not its watchers: without this, an app's live stream would outlive a
/// revocation made by another process. The follower closes that gap with one cheap check
/// per ledger (never one per stream): every `interval` it reads the head, and any events
/// past the last one accounted for that this process did not commit are decoded and
/// announced, credential revocations and authorization changes to ``AccessWatchers``,
/// saves, deletes and selections to ``ChangeWatchers``. The committer also finds another
/// process's events when its transaction starts from a head it did not leave.
///
/// An event this process committed is, in a narrow race, announced twice: a duplicate
/// costs a re-read, never a missed revocation.
final class LogFollower: Sendable {
    private let environment: Environment
    private let databases: LedgerDatabases
    private let accessWatchers: AccessWatchers
    private let changeWatchers: ChangeWatchers
    /// Every event up to this sequence has been announced (or was this process's own).
    private let accounted: Mutex<UInt64>

    init(environment: Environment, databases: LedgerDatabases, accessWatchers: AccessWatchers, changeWatchers: ChangeWatchers) throws {
        self.environment = environment
        self.databases = databases
        self.accessWatchers = accessWatchers
        self.changeWatchers = changeWatchers
        let head = try environment.read(databases) { snapshot in try LogHead.read(snapshot).sequence }
        accounted = Mutex(head)
    }

    /// Called by the committer after each durable commit: its transaction started from head
    /// `start` and left head `end`. Announces the events before `start` that another
    /// process committed and nobody has announced yet.
    func committed(from start: UInt64, to end: UInt64) {
        let foreign = accounted.withLock { accounted -> ClosedRange<UInt64>? in
            defer { accounted = max(accounted, end) }
            return accounted < start ? (accounted + 1)...start : nil
        }
        if let foreign { announce(foreign) }
    }

    /// Whether any stream of this process watches the ledger (no one to tell otherwise).
    var hasWatchers: Bool { accessWatchers.count > 0 || changeWatchers.count > 0 }

    /// Reads the head and announces the events past the last one accounted for: what other
    /// processes committed since.
    func poll() {
        guard let head = try? environment.read(databases, { snapshot in try LogHead.read(snapshot).sequence }) else { return }
        let foreign = accounted.withLock { accounted -> ClosedRange<UInt64>? in
            guard head > accounted else { return nil }
            defer { accounted = head }
            return (accounted + 1)...head
        }
        if let foreign { announce(foreign) }
    }

    /// Events read per read transaction while announcing.
    private static let chunk: UInt64 = 10_000

    /// Tells the watchers of the events in `range`: credential revocations and authorization
    /// changes to ``AccessWatchers``, saves, deletes and selections to ``ChangeWatchers``.
    func announce(_ range: ClosedRange<UInt64>) {
        var types = Set<UInt32>()
        var access = Set<AccessChange>()
        var next = range.lowerBound
        while next <= range.upperBound {
            let last = min(range.upperBound, next + Self.chunk - 1)
            do {
                try environment.read(databases) { snapshot in
                    for sequence in next...last {
                        let event = try LedgerEvent(stored: try Ledger.storedEvent(sequence, in: snapshot))
                        switch event.kind {
                        case .objectSaved, .objectDeleted, .objectsErased:
                            if let type = event.objectType { types.insert(TypeCatalogue.code(of: type)) }
                        case .authorizationDecided, .objectReadSelectionChanged, .credentialRevoked:
                            switch try event.decodedBody() {
                            case .objectReadSelectionChanged(let app, let type, _):
                                types.insert(TypeCatalogue.code(of: type))
                                access.insert(.authorization(app: app))
                            case .authorizationDecided(let app, _, _, _): access.insert(.authorization(app: app))
                            case .credentialRevoked(let id, _, _): access.insert(.credentialRevoked(id: id))
                            default: break
                            }
                        default: break
                        }
                    }
                }
            } catch {
                // A log this process cannot read is reported by its own reads; announce what was found.
                break
            }
            next = last + 1
        }
        for change in access { accessWatchers.notify(change) }
        changeWatchers.notify(types)
    }
}

/// Polls a ``LogFollower`` every interval until stopped, while it has watchers.
///
/// The process's one follow ticker polls every ledger's follower (a ledger with no stream
/// watching it has no one to tell, and is skipped). ``stop()`` returns only once no poll of
/// this follower is under way, so that when a ledger is released nothing of this process
/// reads its files any more (they may be copied, edited or closed right after).
final class FollowLoop: TickerMember {
    private struct State {
        weak var follower: LogFollower?
        var stopped = false
    }

    /// Held while a poll runs.
    private let state: Mutex<State>

    init(_ follower: LogFollower, every interval: Duration) {
        state = Mutex(State(follower: follower))
        ProcessTicker.shared("follow", every: interval).register(self)
    }

    /// Stops polling; waits for a poll under way to finish.
    func stop() { state.withLock { $0.stopped = true } }

    var isStopped: Bool { state.withLock { $0.stopped || $0.follower == nil } }

    /// Polls the follower when it has watchers, unless stopped meanwhile.
    func turn() {
        state.withLock { state in
            guard !state.stopped, let follower = state.follower, follower.hasWatchers else { return }
            follower.poll()
        }
    }
}
