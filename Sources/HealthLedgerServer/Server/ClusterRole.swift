import Foundation
import HealthLedgerRPC
import Synchronization

extension RPCError {
    /// A refusal of a call the server did nothing with (``RPCError/unprocessed``).
    static func unprocessed(_ code: RPCStatusCode, _ message: String, primary: String? = nil) -> RPCError {
        var error = RPCError(code, message, primary: primary)
        error.unprocessed = true
        return error
    }
}

/// A cluster member's standing, as its membership on etcd decides it
/// (`HealthLedgerCluster.ClusterMember`) and its calls read it: whether it takes writes,
/// under which fencing epoch, until when, and which follower its writes wait for
/// (docs/PROTOCOL.md §7.19).
///
/// The leader takes writes only while its lease is known to be alive (its last renewal plus
/// the lease's time to live, on this process's monotonic clock, which a SIGSTOP does not
/// stop); a write is answered only once the cluster's synchronous standby has it durable,
/// when there is one. Followers fetch under the leader's epoch, and a leader refuses fetches
/// of any other: a paused old leader gets no acknowledgement from anyone.
public final class ClusterRole: Sendable {
    public enum Standing: Sendable, Equatable {
        /// This member leads: it takes writes under `epoch` until `leaseEnd`.
        case leader(epoch: UInt64, leaseEnd: ContinuousClock.Instant)
        /// Another member leads, at `address`, under `epoch`.
        case follower(node: String, address: String, epoch: UInt64)
        /// No leader is known: nobody takes writes yet.
        case electing
    }

    /// What the member last read of the cluster on etcd, for ``ClusterStatus``.
    public struct View: Sendable {
        public var members: [(node: String, address: String)] = []
        public var standby: String?
        public var pendingStandby: String?

        public init(members: [(node: String, address: String)] = [], standby: String? = nil, pendingStandby: String? = nil) {
            self.members = members
            self.standby = standby
            self.pendingStandby = pendingStandby
        }
    }

    private struct State {
        var standing = Standing.electing
        var view = View()
        /// The followers a write waits for: the synchronous standby named on etcd, and one
        /// being made it (which must have every write answered from then on).
        var awaited: Set<String> = []
        /// Awaited followers that let a write's wait run out since the member last looked.
        var missed: Set<String> = []
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

    public var standing: Standing { state.withLock { $0.standing } }

    /// Changes the standing; a member that stops leading forgets its standby.
    public func become(_ standing: Standing) {
        state.withLock { state in
            state.standing = standing
            if case .leader = standing {} else { state.awaited = [] }
        }
    }

    /// The leader's lease was renewed: it may take writes until `leaseEnd`.
    public func renewed(until leaseEnd: ContinuousClock.Instant, epoch: UInt64) {
        state.withLock { state in
            guard case .leader(epoch, _) = state.standing else { return }
            state.standing = .leader(epoch: epoch, leaseEnd: leaseEnd)
        }
    }

    /// The followers whose acknowledgement answers a write (empty: none is awaited).
    public var awaitedFollowers: Set<String> {
        get { state.withLock { $0.awaited } }
        set { state.withLock { $0.awaited = newValue } }
    }

    /// `followers`, awaited, did not acknowledge a write within the follower window.
    func missed(by followers: Set<String>) {
        state.withLock { $0.missed.formUnion(followers) }
    }

    /// The awaited followers that missed a write since the last call (and forgets them).
    public func takeMissed() -> Set<String> {
        state.withLock { state in
            defer { state.missed = [] }
            return state.missed
        }
    }

    /// The epoch this member leads under, while its lease lasts; nil otherwise.
    public var leadingEpoch: UInt64? {
        let now = ContinuousClock.now
        guard case .leader(let epoch, let leaseEnd) = standing, now < leaseEnd else { return nil }
        return epoch
    }

    /// Why this member takes no write now, as the caller reads it; nil when it leads.
    func writeRefusal(_ method: String) -> RPCError? {
        switch standing {
        case .leader(_, let leaseEnd):
            guard ContinuousClock.now >= leaseEnd else { return nil }
            return .unprocessed(.unavailable, "this server's leadership of the cluster lapsed (its lease on etcd was not renewed in time): try again shortly")
        case .follower(let node, let address, _):
            return .unprocessed(
                .failedPrecondition, "this server follows the cluster's leader '\(node)' at \(address) and takes no writes: send \(method) there",
                primary: address)
        case .electing:
            return .unprocessed(.unavailable, "the cluster has no leader at the moment (one is being elected): try again shortly")
        }
    }

    /// Why a follower's fetch under `epoch` is refused here; nil when this member leads under it.
    func fetchRefusal(epoch: UInt64) -> RPCError? {
        switch standing {
        case .leader(let current, _) where current == epoch:
            return nil
        case .leader(let current, _):
            return .unprocessed(.failedPrecondition, "this server leads the cluster under epoch \(current), not \(epoch): read the leader from etcd again")
        case .follower(let node, let address, let current):
            return .unprocessed(
                .failedPrecondition, "this server follows the cluster's leader '\(node)' (epoch \(current)): fetch from \(address)", primary: address)
        case .electing:
            return .unprocessed(.unavailable, "the cluster has no leader at the moment (one is being elected)")
        }
    }
}
