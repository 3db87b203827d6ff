import Foundation
import HealthLedgerReplica
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import LedgerSchema
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// This server's membership of a cluster on etcd (`healthledgerd --etcd`). The ledgers are
/// spread over ``Placement/groups`` placement groups; each group has one primary, which takes
/// its ledgers' writes, and the other members that keep the group
/// (``Placement/keepers(of:copies:)``, ``Configuration/replicas`` in all) follow it; when the
/// primary's lease on etcd expires, the group's synchronous standby takes over. The members
/// share the groups out evenly (``Placement/assignment(of:)``): a primary hands a group over to
/// the member the placement gives it to once that member is its standby; a member that no
/// longer keeps a group, nor is its standby, removes its copies of the group's ledgers
/// (docs/PROTOCOL.md §7.19, Deploy/README.md).
///
/// Under `/healthledger/<cluster>/` on etcd:
/// - `nodes/<node>`: each member, attached to its lease: `{"node", "address", "replicas"}`.
/// - `groups/<g>/leader`: group g's primary, attached to its lease; the key's create revision
///   is the **epoch** every follower's fetch of the group carries, and a primary serves
///   fetches of its own epoch only — so a paused old primary gets no follower's acknowledgement.
/// - `groups/<g>/sync`: `{"leader", "standby"}`, written by the group's primary only while its
///   leader key stands: the follower its writes wait for (none: it answers after its own
///   commit). Only that standby may take over (it has every answered write), or the primary
///   itself when it had none or its standby did not take over within a few seconds; for a
///   group never led (no `sync`), the member the placement gives it to, or any member once the
///   group stayed without a primary for a few seconds.
///
/// A standby is added in two steps: the primary first makes its writes wait for the new one
/// too, then names it on etcd once it has every ledger of the group up to the heads it had at
/// the first step; it is removed on etcd before any write is answered without it.
public final class ClusterMember: Service, Sendable {
    public struct Configuration: Sendable {
        /// etcd's endpoints, `http://HOST:PORT[,…]` or `https://HOST:PORT[,…]`.
        public var etcd: String
        /// For https endpoints: the CA etcd's certificate chains to (nil: the system's roots),
        /// and this member's client certificate and key (PEM files).
        public var etcdCAFile: String?
        public var etcdCertificateFile: String?
        public var etcdKeyFile: String?
        /// The cluster's name: its keys are under `/healthledger/<cluster>/`.
        public var cluster = "healthledger"
        /// This member's name, unique in the cluster.
        public var node: String
        /// Where clients and the other members reach this server's RPC (`HOST:PORT`).
        public var advertise: String
        /// The time to live of this member's lease on etcd: a primary gone is replaced about
        /// this long after it stopped renewing (plus an election's few hundred milliseconds).
        public var leaseSeconds: Int64 = 5
        /// How long a follower counts as connected after its last fetch (the server's follower window).
        public var followerWindow: Duration = .seconds(5)
        /// How many members keep each ledger, its primary included (every member when the
        /// cluster has no more). The members use the largest any of them registered.
        public var replicas = 3

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
    private let groupsLed = Gauge(label: "healthledger_cluster_groups_led")

    /// How often the member reads the cluster from etcd (and a primary its followers).
    static let tick = Duration.milliseconds(300)
    /// Changes (``LedgerChanges``) a follower may not have applied yet for a primary to start
    /// making it its standby.
    static let standbyLag: UInt64 = 1_000
    /// Rounds a group never led may stay without a primary before a member other than the one
    /// the placement gives it to takes it (that member may be gone).
    static let patience = 10
    /// Rounds a member keeps its copies of a group it no longer keeps, in case it gets the
    /// group back at once (a member that left for a moment).
    static let releaseRounds = 30

    private struct State {
        var lease: (id: Int64, seconds: Int64)?
        var lastRenewal: ContinuousClock.Instant?
        var groups = Array(repeating: GroupState(), count: Placement.groups)
        /// The primaries followed, by node.
        var following: [String: Following] = [:]
        /// Followers being stopped: their primary and groups (none of those groups is led,
        /// and no follower of that primary started, before they stopped).
        var stopping: [UUID: (node: String, groups: Set<Int>)] = [:]
        /// What the current round is doing, and since when (``watchRounds()``).
        var round: (phase: String, started: ContinuousClock.Instant, warnings: Int64)?
        /// The last failure of the lease's renewal and of the rounds, each said once.
        var lastFailures: [String: String] = [:]
        var joined = false
        /// Rounds completed since the member started.
        var rounds = 0
        /// Set once it leaves: no lease is granted again.
        var leaving = false
        /// Per group this member does not keep, the rounds since it stopped keeping it; and the
        /// groups whose copies are being removed, or were.
        var unkept: [Int: Int] = [:]
        var releasing: Set<Int> = []
        var released: Set<Int> = []
    }

    /// This member's part in one placement group.
    private struct GroupState {
        /// As its primary: the standby named on etcd, and one being made it with the position
        /// of the store's changes it must have applied.
        var standby: String?
        var pending: (node: String, position: UInt64)?
        /// Followers dropped as standby (or candidate) for a write they did not acknowledge,
        /// with the position of the changes then: not chosen again before they applied it.
        var dropped: [String: UInt64] = [:]
        /// Rounds seen without a primary, for a group never led.
        var leaderless = 0
    }

    private struct Following {
        var address: String
        /// The groups followed, with their epochs.
        var groups: [Int: UInt64]
        var follower: PrimaryFollower
        var task: Task<Void, Never>
    }

    /// What a leader key and a member's key hold.
    struct LeaderValue: Codable, Equatable {
        var node: String
        var address: String
    }

    /// What a member's key holds: a leader key's fields, and how many members it would have
    /// keep each ledger.
    struct MemberValue: Codable, Equatable {
        var node: String
        var address: String
        var replicas: Int?
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
        guard configuration.replicas >= 2 else { throw ClusterFailure("a ledger is kept on at least 2 members (a primary and a standby), got \(configuration.replicas)") }
        self.configuration = configuration
        self.store = store
        self.role = role
        self.logger = logger
        self.peer = peer
        // Reads of the ledgers another member leads are on the record there too.
        store.accessForwarding.forward(.groupsNotLed)
        store.purgeReleasedCopies()
        // A call that hangs must not outlast the lease it is renewing.
        let files = [configuration.etcdCAFile, configuration.etcdCertificateFile, configuration.etcdKeyFile]
        let tls = files.allSatisfy { $0 == nil }
            ? nil : EtcdTLS(caFile: configuration.etcdCAFile, certificateFile: configuration.etcdCertificateFile, keyFile: configuration.etcdKeyFile)
        etcd = try Etcd(endpoints: configuration.etcd, tls: tls, timeout: .milliseconds(min(3_000, configuration.leaseSeconds * 1_000 / 3)))
    }

    private var me: String { configuration.node }
    private var prefix: String { "/healthledger/\(configuration.cluster)/" }
    private func leaderKey(_ group: Int) -> String { prefix + "groups/\(group)/leader" }
    private func syncKey(_ group: Int) -> String { prefix + "groups/\(group)/sync" }
    private var nodesPrefix: String { prefix + "nodes/" }

    /// Takes part in the cluster until cancelled or the service group shuts down; a primary
    /// then gives its groups up at once (its lease revoked), so that their standbys take over
    /// without waiting for the lease to expire.
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await self.etcd.run() }
            // The lease on its own: a slow round (a follower slow to stop) never costs it.
            group.addTask {
                while !Task.isCancelled {
                    await self.report("lease") { try await self.renewLease() }
                    self.watchRounds()
                    try? await Task.sleep(for: Self.tick)
                }
            }
            while !Task.isCancelled, !Task.isShuttingDownGracefully {
                await report("round") { try await step() }
                try? await Task.sleep(for: Self.tick)
            }
            await leave()
            etcd.close()
            group.cancelAll()
        }
    }

    /// Runs `work`, logging its failure once for as long as it fails alike.
    private func report(_ work: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            state.withLock { _ = $0.lastFailures.removeValue(forKey: work) }
        } catch {
            let failure = "\(error)"
            let repeated = state.withLock { state in
                defer { state.lastFailures[work] = failure }
                return state.lastFailures[work] == failure
            }
            if !repeated { logger.warning("cluster membership: \(failure)") }
        }
    }

    /// Says, every ten seconds it lasts, that a round is taking long, and what it is doing.
    private func watchRounds() {
        let now = ContinuousClock.now
        let slow = state.withLock { state -> (phase: String, seconds: Int64)? in
            guard let round = state.round else { return nil }
            let seconds = (now - round.started).components.seconds
            guard seconds / 10 > round.warnings else { return nil }
            state.round?.warnings = seconds / 10
            return (round.phase, seconds)
        }
        guard let round = slow else { return }
        logger.warning("a round of cluster membership is taking long", metadata: ["phase": "\(round.phase)", "seconds": "\(round.seconds)"])
    }

    /// Notes what the current round is doing.
    private func phase(_ phase: String) {
        state.withLock { $0.round = (phase, $0.round?.started ?? .now, $0.round?.warnings ?? 0) }
    }

    /// One round: the cluster read, this member's part taken in each group, and the
    /// primaries of the others followed.
    private func step() async throws {
        guard let lease = state.withLock({ $0.lease?.id }) else { return }
        state.withLock { $0.round = ("reading etcd", .now, 0) }
        defer { state.withLock { $0.round = nil } }
        let entries = try await etcd.entries(under: prefix)
        let value = { (key: String) in entries.first { $0.key == key } }
        let members = entries.filter { $0.key.hasPrefix(nodesPrefix) }.compactMap { try? JSONDecoder().decode(MemberValue.self, from: $0.value) }
        let placement = Placement.assignment(of: members.map(\.node))
        let keepers = Placement.keepers(of: members.map(\.node), copies: members.compactMap(\.replicas).max() ?? configuration.replicas)
        // A member that does not see itself registered (its lease lapsed) keeps everything it has.
        let registered = members.contains { $0.node == me }
        var leaders: [(entry: Etcd.Entry, value: LeaderValue)?] = []
        var syncs: [(revision: Int64, value: SyncValue?)] = []
        var views: [ClusterRole.GroupView] = []
        for group in 0..<Placement.groups {
            let leader: (entry: Etcd.Entry, value: LeaderValue)? = value(leaderKey(group)).flatMap { entry in
                (try? JSONDecoder().decode(LeaderValue.self, from: entry.value)).map { (entry, $0) }
            }
            let sync: (revision: Int64, value: SyncValue?) =
                value(syncKey(group)).map { ($0.modRevision, try? JSONDecoder().decode(SyncValue.self, from: $0.value)) } ?? (0, nil)
            leaders.append(leader)
            syncs.append(sync)
            views.append(
                ClusterRole.GroupView(
                    leader: leader.map { ($0.value.node, $0.value.address, UInt64($0.entry.createRevision)) }, standby: sync.value?.standby,
                    pendingStandby: state.withLock { $0.groups[group].pending?.node }, placedOn: placement[group], keepers: keepers[group]))
        }
        role.view = ClusterRole.View(members: members.map { ($0.node, $0.address) }, groups: views)
        // Its standby, and its last primary while none leads it, keep a group too: they may
        // have writes the others lack. A member that does not see itself registered (its
        // lease lapsed, not noticed yet) changes nothing it keeps.
        let keeps = (0..<Placement.groups).map { group in
            guard registered else { return role.keeps(group) }
            return keepers[group].contains(me) || leaders[group]?.entry.lease == lease || syncs[group].value?.standby == me
                || (leaders[group] == nil && syncs[group].value?.leader == me)
        }
        noteGroupsWithoutCopies(among: (0..<Placement.groups).filter { !keeps[$0] })
        // Each group on its own: one that fails to move on does not hold the others.
        var followed: [String: (address: String, groups: [Int: UInt64])] = [:]
        var failures: [String] = []
        for group in 0..<Placement.groups {
            do {
                phase("placement group \(group)")
                guard
                    let primary = try await step(
                        group, leader: leaders[group], sync: syncs[group], lease: lease, members: Set(members.map(\.node)),
                        keepers: keepers[group], keeps: keeps[group])
                else { continue }
                followed[primary.node, default: (primary.address, [:])].groups[group] = primary.epoch
            } catch {
                failures.append("placement group \(group): \(error)")
            }
        }
        phase("following")
        follow(followed)
        groupsLed.record(role.standings.filter { if case .leader = $0 { true } else { false } }.count)
        state.withLock { $0.rounds += 1 }
        if let first = failures.first { throw ClusterFailure(failures.count == 1 ? first : "\(first) (and \(failures.count - 1) more)") }
    }

    /// This member's part in `group`, which `keepers` keep (the member the placement gives it
    /// to first): leads it, campaigns for it, hands it over, follows its primary (returned),
    /// or, when it `keeps` it no longer, removes its copies of the group's ledgers.
    private func step(
        _ group: Int, leader: (entry: Etcd.Entry, value: LeaderValue)?, sync: (revision: Int64, value: SyncValue?), lease: Int64,
        members: Set<String>, keepers: [String], keeps: Bool
    ) async throws -> (node: String, address: String, epoch: UInt64)? {
        let placedOn = keepers.first
        guard let (entry, leader) = leader else {
            keep(group, keeps)
            if case .leader = role.standing(in: group) { stepDown(group, "its leader key on etcd is gone") }
            try await campaign(group, lease: lease, sync: sync, placedOn: placedOn, keeps: keeps)
            // Its last primary's events are still fetched until another leads it.
            return followedPrimary(of: group)
        }
        state.withLock { $0.groups[group].leaderless = 0 }
        let epoch = UInt64(entry.createRevision)
        if entry.lease == lease {
            keep(group, true)
            if case .leader(epoch, _) = role.standing(in: group) {} else { try await promote(group, epoch: epoch) }
            // Lapsed: a renewal brings it back.
            guard role.leadingEpoch(of: group) == epoch else { return nil }
            try await tendStandby(group, epoch: Int64(epoch), members: members, keepers: keepers)
            try await handOver(group, epoch: Int64(epoch), placedOn: placedOn)
            return nil
        }
        if case .leader = role.standing(in: group) {
            stepDown(group, leader.node == me ? "its leader key belongs to an earlier lease" : "'\(leader.node)' leads it under epoch \(epoch)")
        }
        // A key of this member's from before a restart: its old lease will expire.
        guard leader.node != me else { return nil }
        keep(group, keeps)
        stand(.follower(node: leader.node, address: leader.address, epoch: epoch), in: group)
        // Not while its copies are being removed (the group kept again meanwhile: followed
        // once the removal stopped). Two others hold every answered write: the primary and
        // its standby.
        guard !state.withLock({ $0.releasing.contains(group) }),
            keeps || followsUnkept(group, replaced: sync.value.map { $0.leader == leader.node && $0.standby != nil } == true)
        else { return nil }
        return (leader.node, leader.address, epoch)
    }

    // MARK: Keeping copies

    /// Whether this member keeps `group`'s ledgers (and serves their reads), as a round found.
    private func keep(_ group: Int, _ keeps: Bool) {
        role.setKeeps(keeps, group)
        guard keeps else { return }
        state.withLock { state in
            state.unkept[group] = nil
            state.released.remove(group)
        }
    }

    /// Marks the groups of `unkept` that this member just stopped keeping and holds no copy
    /// of as released: it does not follow them.
    private func noteGroupsWithoutCopies(among unkept: [Int]) {
        let anew = state.withLock { state in unkept.filter { state.unkept[$0] == nil && !state.released.contains($0) } }
        guard !anew.isEmpty else { return }
        let held: Set<Int>
        do { held = Set(try store.ledgerIDs().map(Placement.group(of:))) } catch {
            logger.warning("cannot list the ledgers held here: \(error)")
            return
        }
        state.withLock { state in
            for group in anew where !held.contains(group) { state.released.insert(group) }
        }
    }

    /// For a group this member does not keep: whether it still follows the group's primary.
    /// It does while it holds copies of the group's ledgers (so that they miss no erasure),
    /// until the group's writes are kept elsewhere (`replaced`: the primary named a standby)
    /// and ``releaseRounds`` rounds went by; then it stops, and removes its copies.
    private func followsUnkept(_ group: Int, replaced: Bool) -> Bool {
        let (rounds, released) = state.withLock { state in
            state.unkept[group, default: 0] += 1
            return (state.unkept[group]!, state.released.contains(group))
        }
        guard !released else { return false }
        guard replaced, rounds > Self.releaseRounds else { return true }
        releaseCopies(of: group)
        return false
    }

    /// Removes this member's copies of `group`'s ledgers, which it keeps no longer, once it
    /// follows the group no longer: in the background, each ledger once no call or backup
    /// holds it, and the access records of the reads it answered went to the primary (when
    /// some have not, the group is followed a few more rounds, which forwards them). A ledger
    /// that cannot go yet is tried again in a later round; none goes once the member keeps
    /// the group again.
    private func releaseCopies(of group: Int) {
        let start = state.withLock { state -> Bool in
            guard !state.released.contains(group), !state.releasing.contains(group),
                !state.stopping.values.contains(where: { $0.groups.contains(group) }),
                !state.following.values.contains(where: { $0.groups[group] != nil })
            else { return false }
            state.releasing.insert(group)
            return true
        }
        guard start else { return }
        Task {
            var (done, forwarding) = (true, false)
            do {
                for id in try store.ledgerIDs() where Placement.group(of: id) == group {
                    // The group came back meanwhile: what is left stays.
                    guard !role.keeps(group) else {
                        done = false
                        break
                    }
                    do {
                        try await store.releaseCopy(of: id, waitingUpTo: .seconds(2)) { !self.role.keeps(group) }
                        logger.notice(
                            "removed this member's copy of a ledger of a placement group it no longer keeps", metadata: ["ledger.id": "\(id)", "group": "\(group)"])
                    } catch let failure as LedgerFailure where failure.kind == .notFound {
                        continue
                    } catch {
                        done = false
                        forwarding = forwarding || error is LedgerStore.UnforwardedAccessRecords
                        logger.warning(
                            "cannot remove the copy of a ledger of a placement group this member no longer keeps yet",
                            metadata: ["ledger.id": "\(id)", "group": "\(group)", "error": "\(error)"])
                    }
                }
            } catch {
                done = false
                logger.warning("cannot list the ledgers to remove the copies of a placement group this member no longer keeps: \(error)", metadata: ["group": "\(group)"])
            }
            state.withLock { state in
                state.releasing.remove(group)
                if done, !role.keeps(group) { state.released.insert(group) }
                // Followed for ten more rounds: the follower forwards what is waiting.
                if forwarding, let rounds = state.unkept[group] { state.unkept[group] = min(rounds, Self.releaseRounds - 10) }
            }
        }
    }

    // MARK: The lease

    /// This member's lease, granted (and the member registered) when it has none, renewed
    /// every third of its time to live; a lapsed lease stops the member leading.
    private func renewLease() async throws {
        let now = ContinuousClock.now
        let (current, lastRenewal, leaving) = state.withLock { ($0.lease, $0.lastRenewal, $0.leaving) }
        guard !leaving else { return }
        guard let current else {
            let granted = try await etcd.grantLease(seconds: configuration.leaseSeconds)
            let value = try JSONEncoder().encode(MemberValue(node: me, address: configuration.advertise, replicas: configuration.replicas))
            guard try await etcd.create(nodesPrefix + me, value, lease: granted.id) else {
                try? await etcd.revokeLease(granted.id)
                throw ClusterFailure(
                    "another member named '\(me)' is in the cluster (or this one's previous run, until its lease expires): names must be unique (--node-id)")
            }
            state.withLock {
                $0.lease = granted
                $0.lastRenewal = now
                $0.joined = true
            }
            role.renewed(until: now + .seconds(granted.seconds))
            logger.notice("joined the cluster", metadata: ["cluster": "\(configuration.cluster)", "lease.seconds": "\(granted.seconds)"])
            return
        }
        guard let lastRenewal, now - lastRenewal >= .seconds(current.seconds) / 3 else { return }
        let left = try await etcd.keepAlive(current.id)
        guard left > 0 else {
            state.withLock { $0.lease = nil }
            for group in 0..<Placement.groups {
                if case .leader = role.standing(in: group) { stepDown(group, "its lease on etcd expired") }
            }
            throw ClusterFailure("this member's lease on etcd expired: joining again")
        }
        state.withLock { $0.lastRenewal = now }
        // Counted from when the renewal was sent: etcd's clock started later, never earlier.
        role.renewed(until: now + .seconds(left))
    }

    // MARK: Leading

    /// Creates the group's leader key when this member may: the standby named on etcd, the
    /// last primary when it had none (or once its standby did not take over for ``patience``
    /// rounds: a group handed over to a standby that then failed); for a group never led, the
    /// member the placement gives it to, or any that `keeps` it once it waited ``patience`` rounds.
    private func campaign(_ group: Int, lease: Int64, sync: (revision: Int64, value: SyncValue?), placedOn: String?, keeps: Bool) async throws {
        let rounds = state.withLock { state in
            state.groups[group].leaderless += 1
            return state.groups[group].leaderless
        }
        if let last = sync.value {
            // The last primary may take it back once its standby let it wait: nobody else led
            // since (that would have changed `sync`), so it has every answered write.
            let allowed = last.standby.map { $0 == me } ?? (last.leader == me)
            guard allowed || (last.leader == me && rounds > Self.patience) else { return }
        } else {
            guard placedOn == me || (keeps && rounds > Self.patience) else { return }
        }
        let value = try JSONEncoder().encode(LeaderValue(node: me, address: configuration.advertise))
        // Only while `sync` is as read: a primary elected and gone meanwhile may have named
        // another standby, or answered writes alone.
        guard let revision = try await etcd.create(leaderKey(group), value, lease: lease, while: syncKey(group), modifiedAt: sync.revision) else {
            return
        }
        logger.notice("won the election of a placement group", metadata: ["group": "\(group)", "epoch": "\(revision)"])
        try await promote(group, epoch: UInt64(revision))
    }

    /// Becomes `group`'s primary under `epoch`: stops following it (every fetched event
    /// applied), names no standby on etcd yet, and takes its writes.
    private func promote(_ group: Int, epoch: UInt64) async throws {
        phase("promoting placement group \(group)")
        try await stopFollowing(group)
        // What followers acknowledged to an earlier leadership of this member says nothing
        // of the log it leads now (their tails may have been discarded since).
        // (A ledger opened later starts with no followers' word.)
        for ledger in store.openLedgers where Placement.group(of: ledger.id) == group { ledger.followers.forgetAll() }
        store.watchers.forget(.group(group))
        let sync = try JSONEncoder().encode(SyncValue(leader: me, standby: nil))
        guard try await etcd.put(syncKey(group), sync, whileCreatedAt: Int64(epoch), guardKey: leaderKey(group)) else {
            throw ClusterFailure("lost the leader key before taking the lead")
        }
        _ = role.takeMissed(in: group)
        state.withLock { $0.groups[group] = GroupState() }
        stand(.leader(epoch: epoch, handingOverTo: nil), in: group)
        logger.notice("leads a placement group", metadata: ["group": "\(group)", "epoch": "\(epoch)"])
    }

    /// Takes `standing` in `group`: the server's calls follow it, and the group's ledgers are
    /// written under this member's term (recorded in each by a `primaryChanged` event) only
    /// while it leads.
    private func stand(_ standing: ClusterRole.Standing, in group: Int) {
        if case .leader(let epoch, _) = standing {
            store.primaryTerms[group] = PrimaryTerm(epoch: epoch, node: me, cluster: configuration.cluster)
            role.become(standing, in: group)
        } else {
            role.become(standing, in: group)
            store.primaryTerms[group] = nil
        }
    }

    private func stepDown(_ group: Int, _ why: String) {
        stand(.electing, in: group)
        state.withLock { $0.groups[group] = GroupState() }
        logger.warning("stopped leading a placement group: \(why)", metadata: ["group": "\(group)"])
    }

    /// The primary's care of the group's synchronous standby: drops one that left or let a
    /// write's wait run out (on etcd first), and makes a follower that watches the group and
    /// has applied nearly every change its new one (its writes wait for it first, then it is
    /// named on etcd once it has applied every change of that moment) — only among the
    /// `keepers`, preferring the member the placement gives the group to (their first), even
    /// over a standby already named, and replacing a standby that no longer keeps the group.
    /// It reads only what followers said: no ledger is opened.
    private func tendStandby(_ group: Int, epoch: Int64, members: Set<String>, keepers: [String]) async throws {
        let placedOn = keepers.first
        let present = store.watchers.present(within: configuration.followerWindow)
        let (standby, pending) = state.withLock { ($0.groups[group].standby, $0.groups[group].pending) }
        // A standby that let a write's wait run out is behind on that ledger (stuck, or slow):
        // dropped, so that writes go on, until it applied every change of this moment.
        let missed = role.takeMissed(in: group).intersection([standby, pending?.node].compactMap { $0 })
        if let node = missed.first {
            try await nameStandby(nil, of: group, epoch: epoch)
            role.setAwaitedFollowers(role.awaitedFollowers(in: group).subtracting([node]), in: group)
            let position = store.changes.cursor.position
            state.withLock {
                $0.groups[group].pending = nil
                $0.groups[group].dropped[node] = position
            }
            logger.warning(
                "the synchronous standby did not acknowledge a write within the follower window: the group's writes are answered after the primary's own commit until a follower catches up",
                metadata: ["group": "\(group)", "standby": "\(node)"])
            return
        }
        if let standby, !present.contains(standby) {
            try await nameStandby(nil, of: group, epoch: epoch)
            role.setAwaitedFollowers(role.awaitedFollowers(in: group).subtracting([standby]), in: group)
            logger.warning(
                "the synchronous standby left: the group's writes are answered after the primary's own commit until another catches up",
                metadata: ["group": "\(group)", "standby": "\(standby)"])
            return
        }
        let life = store.changes.life
        func applied(by node: String) -> UInt64? {
            store.watchers.applied(by: node, in: .group(group)).flatMap { $0.life == life ? $0.position : nil }
        }
        if let pending {
            guard present.contains(pending.node) else {
                // Its naming may have reached etcd unanswered: cleared there first.
                try await nameStandby(nil, of: group, epoch: epoch)
                role.setAwaitedFollowers(role.awaitedFollowers(in: group).subtracting([pending.node]), in: group)
                return
            }
            guard let position = applied(by: pending.node), position >= pending.position else { return }
            try await nameStandby(pending.node, of: group, epoch: epoch)
            logger.notice("named a synchronous standby", metadata: ["group": "\(group)", "standby": "\(pending.node)"])
            return
        }
        let now = store.changes.cursor.position
        let dropped = state.withLock { $0.groups[group].dropped }
        func eligible(_ node: String) -> Bool {
            node != me && members.contains(node) && keepers.contains(node) && present.contains(node)
                && applied(by: node).map { $0 + Self.standbyLag >= now && $0 >= dropped[node] ?? 0 } ?? false
        }
        let chosen: String?
        if let standby {
            // Replaced by the member the placement gives the group to, which it is then handed
            // over to; or, when it no longer keeps the group, by one that does.
            chosen = placedOn.flatMap { $0 != standby && eligible($0) ? $0 : nil } ?? (keepers.contains(standby) ? nil : keepers.first(where: eligible))
        } else {
            chosen = keepers.first(where: eligible)
        }
        guard let chosen else { return }
        // From now on writes wait for it; it is named once it applied every change before this.
        role.setAwaitedFollowers(role.awaitedFollowers(in: group).union([chosen]), in: group)
        let position = store.changes.cursor.position
        state.withLock { $0.groups[group].pending = (chosen, position) }
    }

    private func nameStandby(_ node: String?, of group: Int, epoch: Int64) async throws {
        let value = try JSONEncoder().encode(SyncValue(leader: me, standby: node))
        guard try await etcd.put(syncKey(group), value, whileCreatedAt: epoch, guardKey: leaderKey(group)) else {
            stepDown(group, "its leader key changed while naming a standby")
            throw ClusterFailure("lost the leader key while naming a standby")
        }
        state.withLock { state in
            state.groups[group].standby = node
            state.groups[group].pending = nil
        }
        if let node { role.setAwaitedFollowers([node], in: group) }
    }

    /// Hands `group` over to the member the placement gives it to, once that member is its
    /// named standby (so it has every write answered): one round the group takes no new
    /// write, so that those under way are answered; the next, this member steps down and
    /// deletes its leader key, and the standby, which alone may, takes over. Writes of the
    /// group meanwhile are refused as `UNAVAILABLE`, to be retried.
    private func handOver(_ group: Int, epoch: Int64, placedOn: String?) async throws {
        let standby = state.withLock { $0.groups[group].standby }
        // Its writes were stopped last round to hand it over.
        let handingOver: Bool
        if case .leader(_, .some) = role.standing(in: group) { handingOver = true } else { handingOver = false }
        guard let placedOn, placedOn != me, standby == placedOn else {
            if handingOver {
                // The standby changed meanwhile (it left, or missed a write): writes go on here.
                stand(.leader(epoch: UInt64(epoch), handingOverTo: nil), in: group)
            }
            return
        }
        guard handingOver else {
            stand(.leader(epoch: UInt64(epoch), handingOverTo: placedOn), in: group)
            return
        }
        stand(.electing, in: group)
        state.withLock { $0.groups[group] = GroupState() }
        guard try await etcd.delete(leaderKey(group), whileCreatedAt: epoch) else {
            throw ClusterFailure("lost the leader key while handing the group over")
        }
        logger.notice("handed a placement group over", metadata: ["group": "\(group)", "epoch": "\(epoch)", "to": "\(placedOn)"])
    }

    // MARK: Following

    /// The primary this member follows `group` from, if any (its groups and epochs).
    private func followedPrimary(of group: Int) -> (node: String, address: String, epoch: UInt64)? {
        state.withLock { state in
            state.following.lazy.compactMap { node, following in following.groups[group].map { (node, following.address, $0) } }.first
        }
    }

    /// Follows each primary `named` for its groups: a primary followed already is told its
    /// groups (a group it took over is listed whole, one it gave up stops being tailed, the
    /// others go on), one that moved is followed anew once its old follower stopped, and one
    /// no longer named is no longer followed.
    private func follow(_ named: [String: (address: String, groups: [Int: UInt64])]) {
        // A group whose tails from another primary are still stopping is followed from its
        // new one a round later: two tails never write one ledger.
        let stopping = state.withLock { Array($0.stopping.values) }
        let primaries = named.compactMapValues { primary -> (address: String, groups: [Int: UInt64])? in
            let groups = primary.groups.filter { group, _ in !stopping.contains { $0.groups.contains(group) && named[$0.node]?.groups[group] == nil } }
            return groups.isEmpty ? nil : (primary.address, groups)
        }
        let (moved, regrouped) = state.withLock { state in
            let moved = state.following.filter { node, following in primaries[node].map { $0.address != following.address } ?? true }.map(\.key)
            let regrouped = state.following.compactMap { node, following -> (String, [Int: UInt64])? in
                guard let primary = primaries[node], primary.address == following.address, primary.groups != following.groups else { return nil }
                return (node, primary.groups)
            }
            return (moved, regrouped)
        }
        for node in moved { stopFollowing(node) }
        for (node, groups) in regrouped { follow(node, groups: groups) }
        for (node, primary) in primaries {
            let starting = state.withLock { state in
                state.following[node] == nil && !state.stopping.values.contains { $0.node == node }
            }
            guard starting else { continue }
            let follower = PrimaryFollower(
                store: store, primary: peer(primary.address), name: me, logger: logger, wait: .seconds(5), groups: primary.groups)
            let task = Task { _ = try? await follower.run() }
            state.withLock { $0.following[node] = Following(address: primary.address, groups: primary.groups, follower: follower, task: task) }
            logger.notice(
                "follows a primary", metadata: ["primary": "\(node)", "address": "\(primary.address)", "groups": "\(primary.groups.keys.sorted())"])
        }
    }

    /// Follows `groups` of `node`, already followed, from now on: the groups it gives up are
    /// among those being stopped until their tails stopped, in the background.
    private func follow(_ node: String, groups: [Int: UInt64]) {
        let id = UUID()
        let follower = state.withLock { state -> PrimaryFollower? in
            guard let following = state.following[node] else { return nil }
            let given = Set(following.groups.filter { groups[$0.key] != $0.value }.keys)
            state.following[node]?.groups = groups
            if !given.isEmpty { state.stopping[id] = (node, given) }
            return following.follower
        }
        guard let follower else { return }
        let stopped = follower.follow(groups: groups)
        logger.notice("follows a primary for other groups", metadata: ["primary": "\(node)", "groups": "\(groups.keys.sorted())"])
        Task {
            await stopped.value
            state.withLock { _ = $0.stopping.removeValue(forKey: id) }
        }
    }

    /// Stops following the primary of `group` and waits (a second at most) until the tails of
    /// its ledgers stopped: every fetch under way applied or abandoned. The primary's other
    /// groups are still followed.
    ///
    /// - Throws: ``ClusterFailure`` when they did not stop in time (the next round tries again).
    private func stopFollowing(_ group: Int) async throws {
        if let (node, _, _) = followedPrimary(of: group) {
            let groups = state.withLock { $0.following[node]?.groups ?? [:] }.filter { $0.key != group }
            if groups.isEmpty { stopFollowing(node) } else { follow(node, groups: groups) }
        }
        for _ in 0..<50 {
            guard state.withLock({ $0.stopping.values.contains { $0.groups.contains(group) } }) else { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ClusterFailure("the follower of placement group \(group)'s previous primary has not stopped yet")
    }

    /// Stops following `node`, in the background.
    private func stopFollowing(_ node: String) {
        guard let following = state.withLock({ $0.following.removeValue(forKey: node) }) else { return }
        let id = UUID()
        state.withLock { $0.stopping[id] = (node, Set(following.groups.keys)) }
        following.task.cancel()
        Task {
            let started = ContinuousClock.now
            await following.task.value
            state.withLock { _ = $0.stopping.removeValue(forKey: id) }
            let taken = ContinuousClock.now - started
            if taken > .seconds(2) { logger.warning("a follower took long to stop", metadata: ["primary": "\(node)", "duration": "\(taken)"]) }
        }
    }

    private func stoppedFollowing() async {
        while state.withLock({ !$0.stopping.isEmpty }) { try? await Task.sleep(for: .milliseconds(20)) }
    }

    /// Leaves the cluster: no more writes, no more following, and the lease revoked (the
    /// leader keys and this member's registration go with it).
    private func leave() async {
        state.withLock { $0.leaving = true }
        for group in 0..<Placement.groups { stand(.electing, in: group) }
        for node in state.withLock({ Array($0.following.keys) }) { stopFollowing(node) }
        await stoppedFollowing()
        if let lease = state.withLock({ $0.lease.take() }) {
            do { try await etcd.revokeLease(lease.id) } catch { logger.warning("could not revoke this member's lease on etcd: \(error)") }
        }
        logger.notice("left the cluster")
    }

    /// Why this member should get no reads yet (`/readyz`); nil when every placement group
    /// has a primary (or got one again within ``patience`` rounds: a hand-over), the groups
    /// it leads are not lapsed, and it is caught up with the others.
    public var unreadiness: String? {
        let (joined, rounds, following, groups) = state.withLock { ($0.joined, $0.rounds, $0.following, $0.groups) }
        guard joined, rounds > 0 else { return "not joined to the cluster on etcd (\(etcd.endpoints)) yet" }
        for (group, standing) in role.standings.enumerated() {
            switch standing {
            case .leader:
                if role.leadingEpoch(of: group) == nil { return "its leadership lapsed (its lease on etcd was not renewed in time)" }
            case .electing:
                guard groups[group].leaderless > Self.patience else { continue }
                return "placement group \(group) has no primary at the moment"
            case .follower:
                continue
            }
        }
        for (_, primary) in following.sorted(by: { $0.key < $1.key }) {
            if let why = primary.follower.unreadiness { return why }
        }
        return nil
    }
}
