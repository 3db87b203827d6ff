import Foundation
import LedgerSchema
import SwiftProtobuf
import Synchronization

extension HealthStore {
    /// The ledger's signed tree head now, checked before it is returned: its signature is
    /// the ledger key's, and it extends the last tree head this store saw (a consistency
    /// proof from that one to this one, fetched and verified here). So a server that
    /// rewrites, reorders or drops history is caught by its own clients without
    /// downloading the log. The new head becomes the one the next must extend; keep
    /// ``lastTreeHead`` and pass it as ``HealthStoreConfiguration/trustedTreeHead`` next
    /// session to carry the check across sessions. Owner only.
    ///
    /// - Throws: ``TreeProofs/Failure`` when the head or its consistency does not hold.
    public func treeHead() async throws -> SignedTreeHead {
        let head = SignedTreeHead(try Self.decode(Healthledger_V1_SignedTreeHead.self, try await unary(.treeHead, Healthledger_V1_Empty())))
        let (key, last) = trust.withLock { $0 }
        try TreeProofs.verify(head, publicKey: key)
        if let last {
            guard head.ledgerID == last.ledgerID else { throw TreeProofs.Failure(description: "the tree head is of ledger '\(head.ledgerID)', not '\(last.ledgerID)'") }
            guard head.size >= last.size else {
                throw TreeProofs.Failure(description: "the tree has \(head.size) events, fewer than the \(last.size) seen before: history was removed")
            }
            if head.size > last.size {
                _ = try await consistencyProof(from: last, to: head)
            } else if head.rootHash != last.rootHash {
                throw TreeProofs.Failure(description: "the tree of \(head.size) events has another root than before: history was rewritten")
            }
        }
        trust.withLock { trust in
            trust.publicKey = trust.publicKey ?? head.publicKey
            if (trust.last?.size ?? 0) <= head.size { trust.last = head }
        }
        return head
    }

    /// The last tree head this store checked (or was given), which the next must extend.
    public var lastTreeHead: SignedTreeHead? { trust.withLock { $0.last } }

    /// The proof that event `sequence` is in the tree `head` commits to, verified against
    /// its root before it is returned. Owner only.
    public func inclusionProof(of sequence: UInt64, in head: SignedTreeHead) async throws -> InclusionProof {
        let request = Healthledger_V1_InclusionProofRequest.with {
            $0.sequence = sequence
            $0.treeSize = head.size
        }
        let proof = InclusionProof(try Self.decode(Healthledger_V1_InclusionProof.self, try await unary(.inclusionProof, request)))
        guard proof.sequence == sequence, proof.treeSize == head.size else { throw TreeProofs.Failure(description: "the server proved another event or tree") }
        try TreeProofs.verify(proof, root: head.rootHash)
        return proof
    }

    /// The proof that the tree `second` commits to extends the tree `first` commits to,
    /// verified before it is returned. Owner only.
    public func consistencyProof(from first: SignedTreeHead, to second: SignedTreeHead) async throws -> ConsistencyProof {
        let request = Healthledger_V1_ConsistencyProofRequest.with {
            $0.firstSize = first.size
            $0.secondSize = second.size
        }
        let proof = ConsistencyProof(try Self.decode(Healthledger_V1_ConsistencyProof.self, try await unary(.consistencyProof, request)))
        guard proof.firstSize == first.size, proof.secondSize == second.size else { throw TreeProofs.Failure(description: "the server proved other tree sizes") }
        try TreeProofs.verify(proof, firstRoot: first.rootHash, secondRoot: second.rootHash)
        return proof
    }
}
