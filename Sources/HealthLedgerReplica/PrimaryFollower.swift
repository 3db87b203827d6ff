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

/// Keeps this server's store a copy of a primary's: every ledger the primary holds is
/// fetched as a snapshot when this store has none of it, then its log is tailed, event by
/// event, and applied with the code replay uses (docs/PROTOCOL.md §7.18). Each fetch tells
/// the primary how far this copy is durable, which is what a semi-synchronous write on the
/// primary waits for.
///
/// The server running beside it refuses writes, naming the primary
/// (``HealthLedgerServer/ServerConfiguration/primaryAddress``), and serves reads, as stale
/// as the replication lag (`healthledger_replication_lag_events`).
public final class PrimaryFollower: Service, Sendable {
    private let store: LedgerStore
    private let primary: HealthStoreConfiguration
    private let name: String
    private let logger: Logger
    private let discoveryInterval: Duration
    private let wait: Duration
    private let epoch: UInt64
    private let lag = Gauge(label: "healthledger_replication_lag_events")
    /// What the follower knows of its ledgers: whether the primary's list was read, which
    /// ledgers it follows, and how far behind each was after its last fetch.
    private let progress = Mutex<(listed: Bool, followed: Set<String>, lags: [String: UInt64])>((false, [], [:]))

    /// Events a ledger may be behind for this copy to count as caught up (one fetch's worth).
    static let caughtUpLag: UInt64 = 10_000

    /// The most events one fetch asks for: the protocol's most, so that a follower behind
    /// catches up in as few commits as it can.
    static let eventsPerFetch = 10_000

    /// - Parameters:
    ///   - primary: where the primary listens, with an operator credential of the primary
    ///     (its timeout must be longer than `wait`).
    ///   - name: this follower's name, as the primary's acknowledgements know it.
    ///   - discoveryInterval: how often the primary's list of ledgers is read for new ones.
    ///   - wait: how long one fetch waits on the primary for a new event.
    ///   - epoch: in a cluster, the fencing epoch of the leader followed (its fetches carry it).
    public init(
        store: LedgerStore, primary: HealthStoreConfiguration, name: String, logger: Logger, discoveryInterval: Duration = .seconds(2),
        wait: Duration = .seconds(10), epoch: UInt64 = 0
    ) {
        self.store = store
        self.primary = primary
        self.name = name
        self.logger = logger
        self.discoveryInterval = discoveryInterval
        self.wait = wait
        self.epoch = epoch
    }

    /// Follows the primary's ledgers until cancelled (or the service group shuts down), over
    /// a connection of its own.
    public func run() async throws {
        let primary = HealthStore(configuration: primary)
        await withTaskGroup(of: Void.self) { group in
            var following = Set<String>()
            var lastFailure: String?
            while !Task.isCancelled, !Task.isShuttingDownGracefully {
                do {
                    let listed = try await primary.ledgers()
                    progress.withLock { progress in
                        progress.listed = true
                        progress.followed.formUnion(listed)
                    }
                    for id in listed where following.insert(id).inserted {
                        group.addTask { await self.follow(id, on: primary) }
                    }
                    lastFailure = nil
                } catch {
                    // Said once per kind of failure, not every few seconds.
                    let failure = "\(error)"
                    if failure != lastFailure { logger.warning("cannot list the primary's ledgers", metadata: ["error": "\(failure)"]) }
                    lastFailure = failure
                }
                try? await Task.sleep(for: discoveryInterval)
            }
            group.cancelAll()
        }
        await primary.close()
    }

    /// Tails one ledger's log until cancelled, fetching a snapshot first when this store
    /// has none of it; after a failure, again a second later.
    private func follow(_ id: String, on primary: HealthStore) async {
        var logger = logger
        logger[metadataKey: "ledger.id"] = "\(id)"
        var lastFailure: String?
        while !Task.isCancelled {
            do {
                let ledger = try await local(id, from: primary, logger: logger)
                while !Task.isCancelled {
                    let head = try ledger.head()
                    let fetched: (events: [[UInt8]], headSequence: UInt64, legalHold: String?)
                    do {
                        fetched = try await primary.fetchLog(
                            ledger: id, after: head.sequence, hash: head.hash, maximumEvents: Self.eventsPerFetch, wait: wait, follower: name, epoch: epoch)
                    } catch let refusal as RPCError where refusal.code == .outOfRange {
                        // This copy holds events the primary does not: back to the last event both have.
                        let common = try await commonPrefix(of: ledger, below: head.sequence, on: primary)
                        logger.warning("this copy's log diverged from the primary's", metadata: ["ledger.head": "\(head.sequence)", "ledger.common": "\(common)"])
                        try await ledger.discardTail(after: common)
                        continue
                    }
                    let reached = fetched.events.isEmpty ? head.sequence : try await ledger.applyShipped(fetched.events)
                    // The legal hold is not an event: it comes with every fetch.
                    if try ledger.legalHold() != fetched.legalHold { try ledger.setLegalHold(reason: fetched.legalHold) }
                    record(lag: fetched.headSequence > reached ? fetched.headSequence - reached : 0, of: id)
                    lastFailure = nil
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
                _ = try await primary.fetchLog(ledger: ledger.id, after: middle, hash: hash, maximumEvents: 1, wait: .zero, follower: name, epoch: epoch)
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
