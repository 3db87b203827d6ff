import HealthModel
import LMDB
import LedgerSchema
import Synchronization

/// A cluster member's leadership under one fencing epoch (docs/PROTOCOL.md §7.19). The member
/// records it in each ledger it writes to: a `primaryChanged` event precedes its first write
/// to the ledger under the epoch, in the same commit, so the hash chain itself shows where
/// every leadership began.
public struct PrimaryTerm: Sendable, Hashable, CustomStringConvertible {
    /// The creation revision of the cluster's leader key on etcd: it only grows.
    public var epoch: UInt64
    /// The member's name (`--node-id`).
    public var node: String
    /// The cluster's name (`--cluster`).
    public var cluster: String

    public init(epoch: UInt64, node: String, cluster: String) {
        self.epoch = epoch
        self.node = node
        self.cluster = cluster
    }

    public var description: String { "\(node) of cluster \(cluster), epoch \(epoch)" }

    /// The `meta` key holding the epoch of the ledger's last `primaryChanged` event (8 bytes,
    /// big-endian; absent before the first). Written by the projector, so replay and a
    /// discarded tail keep it right.
    static let epochKey: [UInt8] = Array("primary_epoch".utf8)
}

/// The terms a store's ledgers are written under, by placement group: one for each group this
/// server leads, none outside a cluster.
public final class PrimaryTerms: Sendable {
    private let terms = Mutex<[Int: PrimaryTerm]>([:])

    init() {}

    /// The term of group `group` (a ``Placement`` group): nil unless this server leads it.
    public subscript(group: Int) -> PrimaryTerm? {
        get { terms.withLock { $0[group] } }
        set { terms.withLock { $0[group] = newValue } }
    }
}

extension WriteContext {
    /// Makes `term` the ledger's: appends a `primaryChanged` event first unless the ledger
    /// records that epoch already. Refuses to write under an epoch older than the one the
    /// ledger records (a later leader wrote to it: this member's leadership is over).
    func enter(_ term: PrimaryTerm) throws {
        let recorded = try txn.get(PrimaryTerm.epochKey, in: databases.meta).map { $0.count == 8 ? KeyEncoding.uint64($0, at: 0) : 0 } ?? 0
        guard recorded != term.epoch else { return }
        guard recorded < term.epoch else {
            throw LedgerFailure(
                .failedPrecondition,
                "this ledger was written under cluster epoch \(recorded), later than this server's \(term.epoch): another member leads; nothing was written")
        }
        try append(
            kind: .primaryChanged, actor: .system, objectType: nil, objectUUID: nil, body: try EventBody.encodePrimaryChange(term),
            change: .primaryChanged(epoch: term.epoch))
    }
}
