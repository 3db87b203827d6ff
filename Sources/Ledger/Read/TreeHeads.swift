import Crypto
import Foundation
import HealthModel
import LMDB
import LedgerSchema
import Synchronization

/// The ledger's Ed25519 key, kept in `meta`: made with the ledger (its public key is in the
/// ledger-created event), or on first opening for a ledger from before signed tree heads.
struct SigningKey: Sendable {
    static let metaKey: [UInt8] = Array("signing_key".utf8)
    let key: Curve25519.Signing.PrivateKey

    /// The stored key, made and stored now if there is none.
    static func load(environment: Environment, databases: LedgerDatabases) throws -> SigningKey {
        if let stored = try environment.read(databases, { snapshot in try snapshot.get(metaKey, in: snapshot.databases.meta).map { try databases.secret($0, name: metaKey) } }) {
            return try SigningKey(stored: stored)
        }
        return try environment.write { txn in
            if let stored = try txn.get(metaKey, in: databases.meta) { return try SigningKey(stored: try databases.secret(stored, name: metaKey)) }
            let key = Curve25519.Signing.PrivateKey()
            try txn.put(databases.storable(secret: Array(key.rawRepresentation), name: metaKey), forKey: metaKey, in: databases.meta)
            return SigningKey(key: key)
        }
    }

    init(key: Curve25519.Signing.PrivateKey) { self.key = key }

    init(stored: [UInt8]?) throws {
        guard let stored else { throw LedgerFailure.corrupted("the ledger's signing key is damaged") }
        do { key = try Curve25519.Signing.PrivateKey(rawRepresentation: stored) } catch {
            throw LedgerFailure.corrupted("the ledger's signing key is damaged")
        }
    }

    var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }
}

extension Ledger {
    /// The ledger's Ed25519 public key, which signs its tree heads.
    public var publicKey: [UInt8] { signingKey.publicKey }

    /// The tree heads and proofs are the owner's (and the operator's, on the data directory).
    private static func requireTreeReader(_ principal: Principal) throws {
        if case .app = principal { throw RoleRefusal.readingTreeHeads }
    }

    /// The root of the Merkle tree over every event, signed now.
    ///
    /// - Parameter replicated: sign no event past this one (the last event a follower has
    ///   durable, docs/PROTOCOL.md §7.18): a failover then never loses what was signed.
    ///   A head signed earlier by this process (before a lagging follower connected) is
    ///   never taken back: the tree signed is at least as large.
    public func signedTreeHead(as principal: Principal, replicatedUpTo replicated: UInt64? = nil) throws -> SignedTreeHead {
        try Self.requireTreeReader(principal)
        let (size, root) = try read { snapshot in
            let head = try LogHead.read(snapshot).sequence
            // What a follower has, but never less than a head signed before.
            let size = min(head, max(replicated ?? head, largestSignedTree.load(ordering: .relaxed)))
            return (size, try MerkleTree.root(size: size, in: snapshot).bytes)
        }
        largestSignedTree.max(size, ordering: .relaxed)
        let timestampUs = microseconds(Date())
        let signed = SignedTreeHead.signedBytes(ledgerID: id, size: size, timestampUs: timestampUs, rootHash: root)
        let signature = try signingKey.key.signature(for: signed)
        return SignedTreeHead(ledgerID: id, size: size, rootHash: root, timestampUs: timestampUs, signature: Array(signature), publicKey: publicKey)
    }

    /// The audit path showing that event `sequence` is in the tree of `treeSize` leaves
    /// (nil: every event now).
    public func inclusionProof(sequence: UInt64, treeSize: UInt64? = nil, as principal: Principal) throws -> InclusionProof {
        try Self.requireTreeReader(principal)
        return try read { snapshot in
            let head = try LogHead.read(snapshot).sequence
            let size = treeSize ?? head
            guard size >= 1, size <= head else {
                throw HealthError.invalidArgument("a tree of \(size) events: the ledger has 1 to \(head)", field: "tree_size")
            }
            guard sequence >= 1, sequence <= size else {
                throw HealthError.invalidArgument("event \(sequence) is not in a tree of \(size) events", field: "sequence")
            }
            let hash = try EventCodec.hash(try Ledger.storedEvent(sequence, in: snapshot))
            let path = try MerkleTree.inclusionPath(leaf: sequence - 1, 0..<size, in: snapshot)
            return InclusionProof(sequence: sequence, treeSize: size, eventHash: hash, path: path.map(\.bytes))
        }
    }

    /// The proof that the tree of `firstSize` events is a prefix of the tree of `secondSize`
    /// events (nil: every event now).
    public func consistencyProof(from firstSize: UInt64, to secondSize: UInt64? = nil, as principal: Principal) throws -> ConsistencyProof {
        try Self.requireTreeReader(principal)
        return try read { snapshot in
            let head = try LogHead.read(snapshot).sequence
            let second = secondSize ?? head
            guard second <= head else { throw HealthError.invalidArgument("a tree of \(second) events: the ledger has \(head)", field: "second_size") }
            guard firstSize >= 1, firstSize <= second else {
                throw HealthError.invalidArgument("first_size must be 1 to second_size (\(second)), not \(firstSize)", field: "first_size")
            }
            let path = try MerkleTree.consistencyPath(firstSize, 0..<second, complete: true, in: snapshot)
            return ConsistencyProof(firstSize: firstSize, secondSize: second, path: path.map(\.bytes))
        }
    }
}
