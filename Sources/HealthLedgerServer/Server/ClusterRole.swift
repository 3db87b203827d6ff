import Foundation
import HealthLedgerRPC
import LedgerSchema
import Synchronization

extension RPCError {
    /// A refusal of a call the server did nothing with (``RPCError/unprocessed``).
    static func unprocessed(_ code: RPCStatusCode, _ message: String, primary: String? = nil) -> RPCError {
        var error = RPCError(code, message, primary: primary)
        error.unprocessed = true
        return error
    }
}

/// A cluster member's standing in each placement group (``Placement``), as its membership on
/// etcd decides it (`HealthLedgerCluster.ClusterMember`) and its calls read it: which groups
/// it takes writes of, under which fencing epochs, until when, and which followers each
/// group's writes wait for (docs/PROTOCOL.md §7.19).
///
/// A group's primary takes writes only while its lease is known to be alive (its last renewal
/// plus the lease's time to live, on this process's monotonic clock, which a SIGSTOP does not
/// stop); a write is answered only once the group's synchronous standby has it durable, when
/// there is one. Followers fetch under the primary's epoch of the group, and a primary refuses
/// fetches of any other: a paused old primary gets no acknowledgement from anyone.
public final class ClusterRole: Sendable {
    public enum Standing: Sendable, Equatable {
        /// This member leads the group under `epoch`; while it hands the group over to
        /// `handingOverTo`, it takes no new write.
        case leader(epoch: UInt64, handingOverTo: String?)
        /// Another member leads the group, at `address`, under `epoch`.
        case follower(node: String, address: String, epoch: UInt64)
        /// No primary of the group is known: nobody takes its writes yet.
        case electing
    }

    /// What the member last read of a placement group on etcd, for ``ClusterStatus``.
    public struct GroupView: Sendable {
        public var leader: (node: String, address: String, epoch: UInt64)?
        public var standby: String?
        public var pendingStandby: String?
        /// The member the placement gives the group to.
        public var placedOn: String?
        /// The members the placement has keep the group's ledgers, `placedOn` first.
        public var keepers: [String]

        public init(
            leader: (node: String, address: String, epoch: UInt64)? = nil, standby: String? = nil, pendingStandby: String? = nil,
            placedOn: String? = nil, keepers: [String] = []
        ) {
            self.leader = leader
            self.standby = standby
            self.pendingStandby = pendingStandby
            self.placedOn = placedOn
            self.keepers = keepers
        }
    }

    /// What the member last read of the cluster on etcd, for ``ClusterStatus``.
    public struct View: Sendable {
        public var members: [(node: String, address: String)] = []
        public var groups: [GroupView] = Array(repeating: GroupView(), count: Placement.groups)

        public init(members: [(node: String, address: String)] = [], groups: [GroupView] = Array(repeating: GroupView(), count: Placement.groups)) {
            self.members = members
            self.groups = groups
        }
    }

    private struct State {
        var standings = Array(repeating: Standing.electing, count: Placement.groups)
        /// Per group, whether this member keeps a copy of its ledgers (serves their reads).
        var keeps = Array(repeating: true, count: Placement.groups)
        /// Until when this member's lease on etcd is known to be alive.
        var leaseEnd: ContinuousClock.Instant?
        var view = View()
        /// Per group, the followers a write waits for: the synchronous standby named on etcd,
        /// and one being made it (which must have every write answered from then on).
        var awaited = Array(repeating: Set<String>(), count: Placement.groups)
        /// Per group, awaited followers that let a write's wait run out since the member last looked.
        var missed = Array(repeating: Set<String>(), count: Placement.groups)
    }

    private let state = Mutex(State())
    /// This member's name.
    public let node: String
    /// The cluster's name (its keys on etcd are under `/healthledger/<cluster>/`).
    public let cluster: String
    /// How long a follower counts as connected after its last fetch.
    let followerWindow: Duration

    public init(node: String, cluster: String, followerWindow: Duration) {
        self.node = node
        self.cluster = cluster
        self.followerWindow = followerWindow
    }

    /// The cluster as last read on etcd.
    public var view: View {
        get { state.withLock { $0.view } }
        set { state.withLock { $0.view = newValue } }
    }

    /// The standing in placement group `group`.
    public func standing(in group: Int) -> Standing { state.withLock { $0.standings[group] } }

    /// The standing in every placement group, in order.
    public var standings: [Standing] { state.withLock { $0.standings } }

    /// Changes the standing in `group`; a member that stops leading it forgets its standby.
    public func become(_ standing: Standing, in group: Int) {
        state.withLock { state in
            state.standings[group] = standing
            if case .leader = standing {} else { state.awaited[group] = [] }
        }
    }

    /// Whether this member keeps a copy of `group`'s ledgers: one of the members the placement
    /// has keep it, its synchronous standby, or its primary. Reads of a group it does not keep
    /// go to the group's primary.
    public func keeps(_ group: Int) -> Bool { state.withLock { $0.keeps[group] } }

    public func setKeeps(_ keeps: Bool, _ group: Int) {
        state.withLock { $0.keeps[group] = keeps }
    }

    /// The member's lease was granted or renewed: it may take its groups' writes until `leaseEnd`.
    public func renewed(until leaseEnd: ContinuousClock.Instant) {
        state.withLock { $0.leaseEnd = leaseEnd }
    }

    /// The followers whose acknowledgement answers a write of `group` (empty: none is awaited).
    public func awaitedFollowers(in group: Int) -> Set<String> { state.withLock { $0.awaited[group] } }

    public func setAwaitedFollowers(_ followers: Set<String>, in group: Int) {
        state.withLock { $0.awaited[group] = followers }
    }

    /// `followers`, awaited, did not acknowledge a write of `group` within the follower window.
    func missed(by followers: Set<String>, in group: Int) {
        state.withLock { $0.missed[group].formUnion(followers) }
    }

    /// The awaited followers that missed a write of `group` since the last call (and forgets them).
    public func takeMissed(in group: Int) -> Set<String> {
        state.withLock { state in
            defer { state.missed[group] = [] }
            return state.missed[group]
        }
    }

    /// The epoch this member leads `group` under, while its lease lasts; nil otherwise.
    public func leadingEpoch(of group: Int) -> UInt64? {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard case .leader(let epoch, _) = state.standings[group], let end = state.leaseEnd, now < end else { return nil }
            return epoch
        }
    }

    /// Why this member takes no write of ledger `ledger` now, as the caller reads it; nil when
    /// it leads the ledger's placement group.
    func writeRefusal(_ method: String, ledger: String) -> RPCError? {
        let group = Placement.group(of: ledger)
        let (standing, leaseEnd) = state.withLock { ($0.standings[group], $0.leaseEnd) }
        switch standing {
        case .leader(_, let successor):
            if let successor {
                return .unprocessed(
                    .unavailable, "this server is handing ledger '\(ledger)' (placement group \(group)) over to '\(successor)': try again shortly")
            }
            guard let leaseEnd, ContinuousClock.now >= leaseEnd else { return nil }
            return .unprocessed(.unavailable, "this server's leadership lapsed (its lease on etcd was not renewed in time): try again shortly")
        case .follower(let node, let address, _):
            return .unprocessed(
                .failedPrecondition,
                "ledger '\(ledger)' (placement group \(group)) is led by '\(node)' at \(address); this server takes no writes of it: send \(method) there",
                primary: address)
        case .electing:
            return .unprocessed(
                .unavailable, "ledger '\(ledger)' (placement group \(group)) has no primary at the moment (one is being elected): try again shortly")
        }
    }

    /// Why this member does not answer a call of `method` to ledger `ledger` (a write when
    /// `writes`); nil when it does.
    func refusal(of method: RPCMethod, ledger: String, writes: Bool) -> RPCError? {
        writes ? writeRefusal(method.rawValue, ledger: ledger) : readRefusal(method.rawValue, ledger: ledger)
    }

    /// Why this member does not answer a read of ledger `ledger`; nil when it keeps a copy of
    /// the ledger's placement group (or leads it).
    func readRefusal(_ method: String, ledger: String) -> RPCError? {
        // A member that keeps every group (as every member of a cluster of no more than
        // `--replicas`) hashes no ledger id per read.
        guard !state.withLock({ $0.keeps.allSatisfy { $0 } }) else { return nil }
        let group = Placement.group(of: ledger)
        let (standing, keeps) = state.withLock { ($0.standings[group], $0.keeps[group]) }
        guard !keeps else { return nil }
        switch standing {
        case .leader:
            return nil
        case .follower(let node, let address, _):
            return .unprocessed(
                .failedPrecondition,
                "ledger '\(ledger)' (placement group \(group)) is not kept on this server: send \(method) to its primary '\(node)' at \(address)",
                primary: address)
        case .electing:
            return .unprocessed(
                .unavailable,
                "ledger '\(ledger)' (placement group \(group)) is not kept on this server, and has no primary at the moment (one is being elected): try again shortly")
        }
    }

    /// Where a call to ledger `ledger`, of which this member has no copy yet, goes: to the
    /// primary of its group, when another member leads it.
    func copyMissingRefusal(_ method: String, ledger: String) -> RPCError? {
        let group = Placement.group(of: ledger)
        guard case .follower(let node, let address, _) = standing(in: group) else { return nil }
        return .unprocessed(
            .failedPrecondition,
            "ledger '\(ledger)' (placement group \(group)) has no copy on this server yet: send \(method) to its primary '\(node)' at \(address)",
            primary: address)
    }

    /// Why a follower's fetch of `group` under `epoch` is refused here; nil when this member
    /// leads the group under it.
    func fetchRefusal(epoch: UInt64, group: Int) -> RPCError? {
        switch standing(in: group) {
        case .leader(let current, _) where current == epoch:
            return nil
        case .leader(let current, _):
            return .unprocessed(
                .failedPrecondition, "this server leads placement group \(group) under epoch \(current), not \(epoch): read its primary from etcd again")
        case .follower(let node, let address, let current):
            return .unprocessed(
                .failedPrecondition, "placement group \(group) is led by '\(node)' (epoch \(current)): fetch from \(address)", primary: address)
        case .electing:
            return .unprocessed(.unavailable, "placement group \(group) has no primary at the moment (one is being elected)")
        }
    }
}
