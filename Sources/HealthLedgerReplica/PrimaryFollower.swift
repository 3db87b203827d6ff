import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import LedgerSchema
import Logging
import Metrics
import ServiceLifecycle
import SwiftProtobuf
import Synchronization

/// Keeps this server's store a copy of a primary's: it watches which of the primary's
/// ledgers change (`WatchLedgers`), fetches a snapshot of a ledger this store has none of,
/// and tails the log of each ledger in use, event by event, applying each with the code
/// replay uses (docs/PROTOCOL.md §7.18). Each fetch tells the primary how far this copy is
/// durable, which is what a semi-synchronous write on the primary waits for. A ledger's
/// tail stops once it has fetched nothing for `idleAfter`, so that the primary can close
/// ledgers nobody uses; a change to it starts the tail again.
///
/// The server running beside it refuses writes, naming the primary
/// (``HealthLedgerServer/ServerConfiguration/primaryAddress``), and serves reads, as stale
/// as the replication lag (`healthledger_replication_lag_events`).
public final class PrimaryFollower: Service, Sendable {
    private let store: LedgerStore
    private let primary: HealthStoreConfiguration
    private let name: String
    private let logger: Logger
    private let wait: Duration
    private let idleAfter: Duration
    /// In a cluster: the placement groups followed, each with its primary's fencing epoch.
    private let groups: [Int: UInt64]
    private let lag = Gauge(label: "healthledger_replication_lag_events")
    /// What the follower knows of its ledgers: whether the primary's list was read, which
    /// ledgers it follows, and how far behind each was after its last fetch.
    private let progress = Mutex<(listed: Bool, followed: Set<String>, lags: [String: UInt64])>((false, [], [:]))
    private let tails = Mutex(Tails())

    /// The ledgers tailed, and which watch answers each has caught up with.
    private struct Tails {
        /// The ledgers with a tail running.
        var running = Set<String>()
        /// Ledgers to check, every one of an answer naming them all, and the sweepers
        /// checking them (``concurrentChecks`` at most).
        var unchecked: [String] = []
        var sweepers = 0
        /// Ledgers a watch named since their tail's last fetch began: it goes on.
        var named = Set<String>()
        /// Watch answers received.
        var generation: UInt64 = 0
        /// Per ledger, the last answer that named it without its head (an everything answer).
        var wanted: [String: UInt64] = [:]
        /// Per ledger, the answers it has caught up with: the generation when its last fetch
        /// that ended with every event of the primary's began.
        var caughtUp: [String: UInt64] = [:]
        /// Per ledger, the head of this store's copy, durable.
        var reached: [String: UInt64] = [:]
        /// Answers not yet applied in full, oldest first: their cursor and generation, and the
        /// ledgers they named with their heads then (nil: to be fetched after the answer).
        var unapplied: [(cursor: [UInt8], generation: UInt64, ledgers: [(id: String, head: UInt64?)])] = []
        /// The last answer applied in full (every ledger it named caught up since).
        var applied: [UInt8] = []
        /// How many of the first unapplied answer's ledgers caught up since (they stay so).
        var settledLedgers = 0

        /// Moves ``applied`` past the answers whose ledgers all caught up since.
        mutating func settle() {
            while let first = unapplied.first {
                while settledLedgers < first.ledgers.count, isCaughtUp(first.ledgers[settledLedgers], since: first.generation) {
                    settledLedgers += 1
                }
                guard settledLedgers == first.ledgers.count else { return }
                applied = first.cursor
                unapplied.removeFirst()
                settledLedgers = 0
            }
        }

        func isCaughtUp(_ ledger: (id: String, head: UInt64?), since generation: UInt64) -> Bool {
            if let head = ledger.head { return (reached[ledger.id] ?? 0) >= head }
            return (caughtUp[ledger.id] ?? 0) >= generation
        }
    }

    /// Events a ledger may be behind for this copy to count as caught up (one fetch's worth).
    static let caughtUpLag: UInt64 = 10_000

    /// The most events one fetch asks for: the protocol's most, so that a follower behind
    /// catches up in as few commits as it can.
    static let eventsPerFetch = 10_000

    /// Ledgers checked at once when the primary names every one (a first watch, a restart):
    /// most have nothing new, and their tails stop after one fetch.
    static let concurrentChecks = 16

    /// - Parameters:
    ///   - primary: where the primary listens, with an operator credential of the primary
    ///     (its timeout must be longer than `wait`).
    ///   - name: this follower's name, as the primary's acknowledgements know it.
    ///   - wait: how long one fetch or watch waits on the primary for something new.
    ///   - idleAfter: a ledger's tail that fetched nothing for this long stops (at least one
    ///     `wait`).
    ///   - groups: in a cluster, the placement groups to follow (those the primary leads),
    ///     each with the fencing epoch it leads the group under (its calls carry it); empty:
    ///     every ledger of the primary.
    public init(
        store: LedgerStore, primary: HealthStoreConfiguration, name: String, logger: Logger, wait: Duration = .seconds(10),
        idleAfter: Duration = .seconds(30), groups: [Int: UInt64] = [:]
    ) {
        self.store = store
        self.primary = primary
        self.name = name
        self.logger = logger
        self.wait = wait
        self.idleAfter = idleAfter
        self.groups = groups
    }

    /// Follows the primary's ledgers until cancelled (or the service group shuts down), over
    /// a connection of its own.
    public func run() async throws {
        let primary = HealthStore(configuration: primary)
        tails.withLock { $0 = Tails() }
        await withTaskGroup(of: Void.self) { group in
            var cursor: [UInt8] = []
            var lastFailure: String?
            while !Task.isCancelled, !Task.isShuttingDownGracefully {
                do {
                    let applied = tails.withLock { tails in
                        tails.settle()
                        return tails.applied
                    }
                    let answer = try await primary.watchLedgers(cursor: cursor, applied: applied, wait: wait, follower: name, groups: groups)
                    progress.withLock { progress in
                        progress.listed = progress.listed || answer.everything
                        progress.followed.formUnion(answer.ledgers.map(\.id))
                    }
                    let (started, sweepers) = tails.withLock { tails -> ([String], Int) in
                        tails.generation += 1
                        tails.unapplied.append((answer.cursor, tails.generation, answer.ledgers))
                        var started: [String] = []
                        for (id, head) in answer.ledgers {
                            if head == nil { tails.wanted[id] = tails.generation }
                            if tails.running.contains(id) {
                                tails.named.insert(id)
                            } else if answer.everything {
                                tails.unchecked.append(id)
                            } else {
                                tails.running.insert(id)
                                started.append(id)
                            }
                        }
                        let sweepers = min(Self.concurrentChecks - tails.sweepers, tails.unchecked.count)
                        tails.sweepers += max(sweepers, 0)
                        return (started, sweepers)
                    }
                    for id in started { group.addTask { await self.tail(id, on: primary) } }
                    for _ in 0..<max(sweepers, 0) { group.addTask { await self.sweep(on: primary) } }
                    cursor = answer.cursor
                    lastFailure = nil
                } catch {
                    // Stopped (a cluster member restarting its follower): nothing to say.
                    if Task.isCancelled { break }
                    // Said once per kind of failure, not every few seconds.
                    let failure = "\(error)"
                    if failure != lastFailure { logger.warning("cannot watch the primary's ledgers", metadata: ["error": "\(failure)"]) }
                    lastFailure = failure
                    try? await Task.sleep(for: .seconds(1))
                }
            }
            group.cancelAll()
        }
        await primary.close()
    }

    /// The fencing epoch a fetch of ledger `id` carries (0 outside a cluster).
    private func epoch(of id: String) -> UInt64 { groups.isEmpty ? 0 : groups[Placement.group(of: id)] ?? 0 }

    /// Tails the ledgers of ``Tails/unchecked`` one after another, each until it stops.
    private func sweep(on primary: HealthStore) async {
        while !Task.isCancelled {
            let next = tails.withLock { tails -> String? in
                while let id = tails.unchecked.popLast() {
                    if tails.running.insert(id).inserted { return id }
                }
                tails.sweepers -= 1
                return nil
            }
            guard let next else { return }
            await tail(next, on: primary)
        }
    }

    /// Tails one ledger's log, fetching a snapshot first when this store has none of it,
    /// until cancelled, or until a fetch brings nothing new, no watch named the ledger
    /// meanwhile, and its last events came `idleAfter` ago or more (or never, since the tail
    /// began); after a failure, again a second later.
    private func tail(_ id: String, on primary: HealthStore) async {
        var logger = logger
        logger[metadataKey: "ledger.id"] = "\(id)"
        var lastFailure: String?
        var lastEvents: ContinuousClock.Instant?
        while !Task.isCancelled {
            do {
                let ledger = try await local(id, from: primary, logger: logger)
                let start = try ledger.head().sequence
                tails.withLock { $0.reached[id] = start }
                while !Task.isCancelled {
                    let head = try ledger.head()
                    // A watch answer waiting for this ledger to catch up: no waiting on the primary.
                    let (generation, confirming) = tails.withLock { tails in
                        tails.named.remove(id)
                        return (tails.generation, (tails.wanted[id] ?? 0) > (tails.caughtUp[id] ?? 0))
                    }
                    let fetched: (events: [[UInt8]], headSequence: UInt64, legalHold: String?)
                    do {
                        fetched = try await primary.fetchLog(
                            ledger: id, after: head.sequence, hash: head.hash, maximumEvents: Self.eventsPerFetch, wait: confirming ? .zero : wait,
                            follower: name, epoch: epoch(of: id))
                    } catch let refusal as RPCError where refusal.code == .outOfRange {
                        // This copy holds events the primary does not: back to the last event both have.
                        let common = try await commonPrefix(of: ledger, below: head.sequence, on: primary)
                        logger.warning("this copy's log diverged from the primary's", metadata: ["ledger.head": "\(head.sequence)", "ledger.common": "\(common)"])
                        try await ledger.discardTail(after: common)
                        tails.withLock { $0.reached[id] = common }
                        continue
                    }
                    let reached = fetched.events.isEmpty ? head.sequence : try await ledger.applyShipped(fetched.events)
                    // The legal hold is not an event: it comes with every fetch.
                    if try ledger.legalHold() != fetched.legalHold { try ledger.setLegalHold(reason: fetched.legalHold) }
                    record(lag: fetched.headSequence > reached ? fetched.headSequence - reached : 0, of: id)
                    lastFailure = nil
                    if !fetched.events.isEmpty { lastEvents = .now }
                    let idle = fetched.events.isEmpty && lastEvents.map { ContinuousClock.now - $0 >= idleAfter } ?? true
                    let stopping = tails.withLock { tails -> Bool in
                        tails.reached[id] = reached
                        if reached >= fetched.headSequence { tails.caughtUp[id] = max(tails.caughtUp[id] ?? 0, generation) }
                        // Named by a watch since this fetch began: the next fetch covers it.
                        guard idle, !tails.named.contains(id) else { return false }
                        tails.running.remove(id)
                        return true
                    }
                    if stopping { return }
                }
            } catch {
                if Task.isCancelled { return }
                let failure = "\(error)"
                if failure != lastFailure { logger.error("cannot follow the primary's ledger", metadata: ["error": "\(failure)"]) }
                lastFailure = failure
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// The last event `ledger` shares with the primary's log (0 when none): a binary search
    /// over the follower's events, asking the primary whether each is in its log (a fetch of
    /// nothing after it). Since every event's hash covers its predecessor's, the events both
    /// have are a prefix of each.
    private func commonPrefix(of ledger: Ledger, below head: UInt64, on primary: HealthStore) async throws -> UInt64 {
        var (shared, differs) = (UInt64(0), head)
        while differs - shared > 1 {
            let middle = shared + (differs - shared) / 2
            guard let hash = try ledger.eventHashes(from: middle, limit: 1).first else { throw LedgerFailure(.corrupted, "event \(middle) is missing") }
            do {
                _ = try await primary.fetchLog(ledger: ledger.id, after: middle, hash: hash, maximumEvents: 1, wait: .zero, follower: name, epoch: epoch(of: ledger.id))
                shared = middle
            } catch let refusal as RPCError where refusal.code == .outOfRange {
                differs = middle
            }
        }
        return shared
    }

    /// This store's copy of ledger `id`, installed from a snapshot of the primary's when missing.
    private func local(_ id: String, from primary: HealthStore, logger: Logger) async throws -> Ledger {
        do {
            return try store.ledger(id)
        } catch let failure as LedgerFailure where failure.kind == .notFound {
            try await installSnapshot(of: id, from: primary, logger: logger)
            return try store.ledger(id)
        }
    }

    /// Fetches a snapshot of the primary's ledger `id` into a staging directory beside the
    /// store's ledgers, and restores it as this store's (verified first).
    private func installSnapshot(of id: String, from primary: HealthStore, logger: Logger) async throws {
        let taken = try await primary.fetchSnapshot(.with { $0.ledgerID = id })
        defer {
            let snapshot = taken.snapshotID
            Task { [primary] in _ = try? await primary.fetchSnapshot(.with { $0.ledgerID = id; $0.snapshotID = snapshot; $0.release = true }) }
        }
        let staging = store.directory.appending(path: ".following-\(id)-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: staging) }
        var bytes: UInt64 = 0
        for file in taken.files {
            guard !file.name.isEmpty, !file.name.contains("/"), file.name != ".", file.name != ".." else {
                throw LedgerFailure(.invalidArgument, "the primary's snapshot names a file '\(file.name.prefix(100))', which is not a plain name")
            }
            let url = staging.appending(path: file.name)
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw LedgerFailure(.storage, "cannot create \(url.path)")
            }
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            var offset: UInt64 = 0
            while offset < file.size {
                let chunk = try await primary.fetchSnapshot(.with {
                    $0.ledgerID = id
                    $0.snapshotID = taken.snapshotID
                    $0.file = file.name
                    $0.offset = offset
                }).data
                guard !chunk.isEmpty else {
                    throw LedgerFailure(.corrupted, "the primary's snapshot file \(file.name) ended at \(offset) of its \(file.size) bytes")
                }
                try handle.write(contentsOf: chunk)
                offset += UInt64(chunk.count)
            }
            try handle.synchronize()
            bytes += offset
        }
        let store = self.store
        let verification = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .utility).async { continuation.resume(with: Result { try store.restore(from: staging, as: id) }) }
        }
        logger.notice(
            "installed a snapshot of the primary's ledger",
            metadata: ["ledger.head": "\(verification.manifest?.headSequence ?? 0)", "bytes": "\(bytes)"])
    }

    private func record(lag events: UInt64, of id: String) {
        let worst = progress.withLock { progress in
            progress.lags[id] = events
            return progress.lags.values.max() ?? 0
        }
        lag.record(Int64(clamping: worst))
    }

    /// Why this copy should get no reads yet (`/readyz`); nil once it has read the primary's
    /// list of ledgers and every ledger on it is at most ``caughtUpLag`` events behind.
    public var unreadiness: String? {
        let (listed, followed, lags) = progress.withLock { $0 }
        guard listed else { return "the primary's list of ledgers was not read yet" }
        let behind = followed.filter { (lags[$0] ?? .max) > Self.caughtUpLag }.sorted()
        guard let first = behind.first else { return nil }
        let how = lags[first].map { "\($0) events behind" } ?? "not copied yet"
        return "\(behind.count) ledger\(behind.count == 1 ? " is" : "s are") not caught up with the primary (the first, '\(first)', \(how))"
    }
}
