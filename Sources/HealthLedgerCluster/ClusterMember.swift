import Foundation
import HealthLedgerReplica
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// This server's membership of a cluster on etcd (`healthledgerd --etcd`): one member leads
/// and takes every ledger's writes, the others follow it, and when the leader's lease on
/// etcd expires its synchronous standby takes over (docs/PROTOCOL.md §7.19, Deploy/README.md).
///
/// Under `/healthledger/<cluster>/` on etcd:
/// - `nodes/<node>`: each member, attached to its lease: `{"node", "address"}`.
/// - `leader`: the leader, attached to its lease; the key's create revision is the
///   **epoch** every follower's fetch carries, and a leader serves fetches of its own epoch
///   only — so a paused old leader gets no follower's acknowledgement.
/// - `sync`: `{"leader", "standby"}`, written by the leader only while its leader key stands:
///   the follower its writes wait for (none: it answers after its own commit). Only that
///   standby may take over (it has every answered write), or the leader itself when it had
///   none; on a fresh cluster (no `sync`), any member.
///
/// A standby is added in two steps: the leader first makes its writes wait for the new one
/// too, then names it on etcd once it has every ledger up to the heads it had at the first
/// step; it is removed on etcd before any write is answered without it.
public final class ClusterMember: Service, Sendable {
    public struct Configuration: Sendable {
        /// etcd's endpoints, `http://HOST:PORT[,…]`.
        public var etcd: String
        /// The cluster's name: its keys are under `/healthledger/<cluster>/`.
        public var cluster = "healthledger"
        /// This member's name, unique in the cluster.
        public var node: String
        /// Where clients and the other members reach this server's RPC (`HOST:PORT`).
        public var advertise: String
        /// The time to live of this member's lease on etcd: a leader gone is replaced about
        /// this long after it stopped renewing (plus an election's few hundred milliseconds).
        public var leaseSeconds: Int64 = 5
        /// How long a follower counts as connected after its last fetch (the server's follower window).
        public var followerWindow: Duration = .seconds(5)

        public init(etcd: String, node: String, advertise: String) {
            self.etcd = etcd
            self.node = node
            self.advertise = advertise
        }
    }

    private let configuration: Configuration
    private let store: LedgerStore
    private let role: ClusterRole
    /// How this member reaches another's RPC, with a credential valid there.
    private let peer: @Sendable (_ address: String) -> HealthStoreConfiguration
    private let logger: Logger
    private let etcd: Etcd
    private let state = Mutex(State())
    private let leading = Gauge(label: "healthledger_cluster_leader")
    private let epochGauge = Gauge(label: "healthledger_cluster_epoch")

    /// How often the member reads the leader from etcd (and a leader its followers).
    static let tick = Duration.milliseconds(300)
    /// Changes (``LedgerChanges``) a follower may not have applied yet for the leader to start
    /// making it its standby.
    static let standbyLag: UInt64 = 1_000

    private struct State {
        var lease: (id: Int64, seconds: Int64)?
        var lastRenewal: ContinuousClock.Instant?
        var following: Following?
        /// The standby named on etcd, and one being made it with the position of the store's
        /// changes it must have applied.
        var standby: String?
        var pending: (node: String, position: UInt64)?
        /// Followers dropped as standby (or candidate) for a write they did not acknowledge,
        /// with the position of the changes then: not chosen again before they applied it.
        var dropped: [String: UInt64] = [:]
        var lastFailure: String?
        var joined = false
    }

    private struct Following {
        var node: String
        var address: String
        var epoch: UInt64
        var follower: PrimaryFollower
        var task: Task<Void, Never>
    }

    /// What the leader key and the sync key hold.
    struct LeaderValue: Codable, Equatable {
        var node: String
        var address: String
    }

    struct SyncValue: Codable, Equatable {
        var leader: String
        var standby: String?
    }

    /// - Parameters:
    ///   - role: the standing the server's calls read (``ServerConfiguration/cluster``).
    ///   - peer: the SDK configuration for reaching another member at an address, with an
    ///     operator credential valid on every member.
    /// - Throws: ``ClusterFailure`` for etcd endpoints that do not parse.
    public init(
        configuration: Configuration, store: LedgerStore, role: ClusterRole, logger: Logger,
        peer: @escaping @Sendable (_ address: String) -> HealthStoreConfiguration
    ) throws {
        guard !configuration.node.isEmpty, configuration.node.utf8.count <= 128, !configuration.node.contains("/") else {
            throw ClusterFailure("a node's name is 1–128 bytes without '/', got '\(configuration.node.prefix(130))'")
        }
        guard configuration.leaseSeconds >= 2 else { throw ClusterFailure("a lease lasts at least 2 seconds, got \(configuration.leaseSeconds)") }
        self.configuration = configuration
        self.store = store
        self.role = role
        self.logger = logger
        self.peer = peer
        // A call that hangs must not outlast the lease it is renewing.
        etcd = try Etcd(endpoints: configuration.etcd, timeout: .milliseconds(min(3_000, configuration.leaseSeconds * 1_000 / 3)))
    }

    private var prefix: String { "/healthledger/\(configuration.cluster)/" }
    private var leaderKey: String { prefix + "leader" }
    private var syncKey: String { prefix + "sync" }
    private var nodesPrefix: String { prefix + "nodes/" }

    /// Takes part in the cluster until cancelled or the service group shuts down; a leader
    /// then gives its leadership up at once (its lease revoked), so that its standby takes
    /// over without waiting for the lease to expire.
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await self.etcd.run() }
            while !Task.isCancelled, !Task.isShuttingDownGracefully {
                do {
                    try await step()
                    state.withLock { $0.lastFailure = nil }
                } catch {
                    let failure = "\(error)"
                    let repeated = state.withLock { state in
                        defer { state.lastFailure = failure }
                        return state.lastFailure == failure
                    }
                    if !repeated { logger.warning("cluster membership: \(failure)") }
                }
                try? await Task.sleep(for: Self.tick)
            }
            await leave()
            etcd.close()
            group.cancelAll()
        }
    }

    /// One round: the lease renewed when due, the leader read, and this member's part taken.
    private func step() async throws {
        let lease = try await renewLease()
        // The cluster's keys, read at once: leader, sync and members.
        let entries = try await etcd.entries(under: prefix)
        let syncEntry = entries.first { $0.key == syncKey }
        let sync = try syncEntry.map { try JSONDecoder().decode(SyncValue.self, from: $0.value) }
        let members = entries.filter { $0.key.hasPrefix(nodesPrefix) }.compactMap { try? JSONDecoder().decode(LeaderValue.self, from: $0.value) }
        role.view = ClusterRole.View(
            members: members.map { ($0.node, $0.address) }, standby: sync?.standby, pendingStandby: state.withLock { $0.pending?.node })
        guard let entry = entries.first(where: { $0.key == leaderKey }) else {
            if case .leader = role.standing { stepDown("its leader key on etcd is gone") }
            return try await campaign(lease: lease, sync: sync, syncRevision: syncEntry?.modRevision ?? 0)
        }
        let leader = try JSONDecoder().decode(LeaderValue.self, from: entry.value)
        let epoch = UInt64(entry.createRevision)
        if entry.lease == lease {
            if role.leadingEpoch != epoch {
                if case .leader = role.standing { return }  // lapsed: a renewal brings it back
                try await promote(epoch: epoch)
            }
            try await tendStandby(epoch: Int64(epoch), members: Set(members.map(\.node)))
        } else if leader.node == configuration.node {
            // A key of this member's from before a restart: its old lease will expire.
            if case .leader = role.standing { stepDown("its leader key belongs to an earlier lease") }
        } else {
            if case .leader = role.standing { stepDown("'\(leader.node)' leads under epoch \(epoch)") }
            try await follow(leader, epoch: epoch)
        }
    }

    // MARK: The lease

    /// This member's lease, granted (and the member registered) when it has none, renewed
    /// every third of its time to live; a lapsed lease stops the member leading.
    private func renewLease() async throws -> Int64 {
        let now = ContinuousClock.now
        let (current, lastRenewal) = state.withLock { ($0.lease, $0.lastRenewal) }
        guard let current else {
            let granted = try await etcd.grantLease(seconds: configuration.leaseSeconds)
            let value = try JSONEncoder().encode(LeaderValue(node: configuration.node, address: configuration.advertise))
            guard try await etcd.create(nodesPrefix + configuration.node, value, lease: granted.id) else {
                try? await etcd.revokeLease(granted.id)
                throw ClusterFailure(
                    "another member named '\(configuration.node)' is in the cluster (or this one's previous run, until its lease expires): names must be unique (--node-id)")
            }
            state.withLock {
                $0.lease = granted
                $0.lastRenewal = now
                $0.joined = true
            }
            logger.notice("joined the cluster", metadata: ["cluster": "\(configuration.cluster)", "lease.seconds": "\(granted.seconds)"])
            return granted.id
        }
        guard let lastRenewal, now - lastRenewal >= .seconds(current.seconds) / 3 else { return current.id }
        let left = try await etcd.keepAlive(current.id)
        guard left > 0 else {
            state.withLock { $0.lease = nil }
            if case .leader = role.standing { stepDown("its lease on etcd expired") }
            throw ClusterFailure("this member's lease on etcd expired: joining again")
        }
        state.withLock { $0.lastRenewal = now }
        // Counted from when the renewal was sent: etcd's clock started later, never earlier.
        if case .leader(let epoch, _) = role.standing { role.renewed(until: now + .seconds(left), epoch: epoch) }
        return current.id
    }

    // MARK: Leading

    /// Creates the leader key when this member may: the standby named on etcd, the last
    /// leader when it had none, or anyone on a fresh cluster.
    private func campaign(lease: Int64, sync: SyncValue?, syncRevision: Int64) async throws {
        if let sync {
            let allowed = sync.standby.map { $0 == configuration.node } ?? (sync.leader == configuration.node)
            guard allowed else { return }
        }
        let value = try JSONEncoder().encode(LeaderValue(node: configuration.node, address: configuration.advertise))
        // Only while `sync` is as read: a leader elected and gone meanwhile may have named
        // another standby, or answered writes alone.
        guard let revision = try await etcd.create(leaderKey, value, lease: lease, while: syncKey, modifiedAt: syncRevision) else { return }
        logger.notice("won the cluster's election", metadata: ["epoch": "\(revision)"])
        try await promote(epoch: UInt64(revision))
    }

    /// Becomes the leader under `epoch`: stops following (every fetched event applied), names
    /// no standby on etcd yet, and takes writes.
    private func promote(epoch: UInt64) async throws {
        await stopFollowing()
        // What followers acknowledged to an earlier leadership of this member says nothing
        // of the log it leads now (their tails may have been discarded since).
        // (A ledger opened later starts with no followers' word.)
        for ledger in store.openLedgers { ledger.followers.forgetAll() }
        store.watchers.forgetAll()
        let sync = try JSONEncoder().encode(SyncValue(leader: configuration.node, standby: nil))
        guard try await etcd.put(syncKey, sync, whileCreatedAt: Int64(epoch), guardKey: leaderKey) else {
            throw ClusterFailure("lost the leader key before taking the lead")
        }
        _ = role.takeMissed()
        let (lastRenewal, seconds) = state.withLock { state in
            state.standby = nil
            state.pending = nil
            state.dropped = [:]
            return (state.lastRenewal ?? .now, state.lease?.seconds ?? configuration.leaseSeconds)
        }
        stand(.leader(epoch: epoch, leaseEnd: lastRenewal + .seconds(seconds)))
        leading.record(1)
        epochGauge.record(Int64(epoch))
        logger.notice("leads the cluster", metadata: ["epoch": "\(epoch)"])
    }

    /// Takes `standing`: the server's calls follow it, and the store's ledgers are written
    /// under this member's term (recorded in each by a `primaryChanged` event) only while it leads.
    private func stand(_ standing: ClusterRole.Standing) {
        if case .leader(let epoch, _) = standing {
            store.primaryTerm = PrimaryTerm(epoch: epoch, node: configuration.node, cluster: configuration.cluster)
            role.become(standing)
        } else {
            role.become(standing)
            store.primaryTerm = nil
        }
    }

    private func stepDown(_ why: String) {
        stand(.electing)
        leading.record(0)
        state.withLock {
            $0.standby = nil
            $0.pending = nil
        }
        logger.warning("stopped leading the cluster: \(why)")
    }

    /// The leader's care of its synchronous standby: drops one that left (on etcd first),
    /// and makes a follower that watches its ledgers and has applied nearly every change its
    /// new one (its writes wait for it first, then it is named on etcd once it has applied
    /// every change of that moment). It reads only what followers said: no ledger is opened.
    private func tendStandby(epoch: Int64, members: Set<String>) async throws {
        let present = store.watchers.present(within: configuration.followerWindow)
        let (standby, pending) = state.withLock { ($0.standby, $0.pending) }
        // A standby that let a write's wait run out is behind on that ledger (stuck, or slow):
        // dropped, so that writes go on, until it applied every change of this moment.
        let missed = role.takeMissed().intersection([standby, pending?.node].compactMap { $0 })
        if let node = missed.first {
            try await nameStandby(nil, epoch: epoch)
            role.awaitedFollowers.remove(node)
            let position = store.changes.cursor.position
            state.withLock {
                $0.pending = nil
                $0.dropped[node] = position
            }
            logger.warning(
                "the synchronous standby did not acknowledge a write within the follower window: writes are answered after the leader's own commit until a follower catches up",
                metadata: ["standby": "\(node)"])
            return
        }
        if let standby, !present.contains(standby) {
            try await nameStandby(nil, epoch: epoch)
            role.awaitedFollowers.remove(standby)
            logger.warning("the synchronous standby left: writes are answered after the leader's own commit until another catches up", metadata: ["standby": "\(standby)"])
            return
        }
        let life = store.changes.life
        func applied(by node: String) -> UInt64? {
            store.watchers.applied(by: node).flatMap { $0.life == life ? $0.position : nil }
        }
        if let pending {
            guard present.contains(pending.node) else {
                // Its naming may have reached etcd unanswered: cleared there first.
                try await nameStandby(nil, epoch: epoch)
                role.awaitedFollowers.remove(pending.node)
                return
            }
            guard let position = applied(by: pending.node), position >= pending.position else { return }
            try await nameStandby(pending.node, epoch: epoch)
            logger.notice("named a synchronous standby", metadata: ["standby": "\(pending.node)"])
            return
        }
        guard standby == nil else { return }
        let now = store.changes.cursor.position
        let candidates = present.intersection(members).subtracting([configuration.node]).sorted()
        let dropped = state.withLock { $0.dropped }
        guard
            let candidate = candidates.first(where: { node in
                applied(by: node).map { $0 + Self.standbyLag >= now && $0 >= dropped[node] ?? 0 } ?? false
            })
        else { return }
        // From now on writes wait for it; it is named once it applied every change before this.
        role.awaitedFollowers.insert(candidate)
        let position = store.changes.cursor.position
        state.withLock { $0.pending = (candidate, position) }
    }

    private func nameStandby(_ node: String?, epoch: Int64) async throws {
        let value = try JSONEncoder().encode(SyncValue(leader: configuration.node, standby: node))
        guard try await etcd.put(syncKey, value, whileCreatedAt: epoch, guardKey: leaderKey) else {
            stepDown("its leader key changed while naming a standby")
            throw ClusterFailure("lost the leader key while naming a standby")
        }
        state.withLock { state in
            state.standby = node
            state.pending = nil
        }
        if let node { role.awaitedFollowers = [node] }
    }

    // MARK: Following

    /// Follows `leader` under `epoch`, unless already doing so.
    private func follow(_ leader: LeaderValue, epoch: UInt64) async throws {
        if let current = state.withLock({ $0.following }), current.epoch == epoch, current.address == leader.address { return }
        await stopFollowing()
        stand(.follower(node: leader.node, address: leader.address, epoch: epoch))
        leading.record(0)
        epochGauge.record(Int64(epoch))
        let follower = PrimaryFollower(
            store: store, primary: peer(leader.address), name: configuration.node, logger: logger, wait: .seconds(5),
            epoch: epoch)
        let task = Task { _ = try? await follower.run() }
        state.withLock { $0.following = Following(node: leader.node, address: leader.address, epoch: epoch, follower: follower, task: task) }
        logger.notice("follows the cluster's leader", metadata: ["leader": "\(leader.node)", "address": "\(leader.address)", "epoch": "\(epoch)"])
    }

    /// Stops following, once every fetch under way has been applied or abandoned.
    private func stopFollowing() async {
        guard let following = state.withLock({ $0.following.take() }) else { return }
        following.task.cancel()
        await following.task.value
    }

    /// Leaves the cluster: no more writes, no more following, and the lease revoked (the
    /// leader key and this member's registration go with it).
    private func leave() async {
        stand(.electing)
        await stopFollowing()
        if let lease = state.withLock({ $0.lease.take() }) {
            do { try await etcd.revokeLease(lease.id) } catch { logger.warning("could not revoke this member's lease on etcd: \(error)") }
        }
        logger.notice("left the cluster")
    }

    /// Why this member should get no reads yet (`/readyz`); nil when it leads, or follows
    /// and is caught up.
    public var unreadiness: String? {
        let (joined, following) = state.withLock { ($0.joined, $0.following) }
        guard joined else { return "not joined to the cluster on etcd (\(etcd.endpoints)) yet" }
        switch role.standing {
        case .leader: return role.leadingEpoch == nil ? "its leadership lapsed (its lease on etcd was not renewed in time)" : nil
        case .electing: return "the cluster has no leader at the moment"
        case .follower: return following?.follower.unreadiness
        }
    }
}
