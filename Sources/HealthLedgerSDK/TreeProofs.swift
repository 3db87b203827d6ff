import Crypto
import Foundation

/// Checks tree heads and Merkle proofs on the client, with nothing but the proofs, the
/// heads and the ledger's public key (RFC 9162 §2.1.3.2 and §2.1.4.2; docs/LEDGER.md).
public enum TreeProofs {
    /// Why a tree head or a proof does not hold.
    public struct Failure: Error, CustomStringConvertible, Sendable, Hashable {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// The signature of `head` is the ledger key's over its signed bytes, and (when given)
    /// the key is the one expected.
    public static func verify(_ head: SignedTreeHead, publicKey expected: [UInt8]? = nil) throws {
        if let expected, expected != head.publicKey {
            throw Failure(description: "the tree head is signed with another key than the ledger's")
        }
        guard head.rootHash.count == 32, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: head.publicKey),
            key.isValidSignature(head.signature, for: head.signedBytes)
        else { throw Failure(description: "the tree head's signature does not verify") }
    }

    /// The hash of a leaf, from its event's hash: SHA-256(0x00 ‖ event hash).
    public static func leafHash(eventHash: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: [0x00] + eventHash)) }

    static func node(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: [0x01] + left + right)) }

    /// That `proof` puts its event in the tree whose root is `root`.
    public static func verify(_ proof: InclusionProof, root: [UInt8]) throws {
        guard proof.sequence >= 1, proof.sequence <= proof.treeSize else { throw Failure(description: "the event is not in a tree of that size") }
        var index = proof.sequence - 1
        var last = proof.treeSize - 1
        var hash = leafHash(eventHash: proof.eventHash)
        for sibling in proof.path {
            guard last > 0 else { throw Failure(description: "the inclusion proof is too long") }
            if index & 1 == 1 || index == last {
                hash = node(sibling, hash)
                while index & 1 == 0 && index != 0 {
                    index >>= 1
                    last >>= 1
                }
            } else {
                hash = node(hash, sibling)
            }
            index >>= 1
            last >>= 1
        }
        guard last == 0, hash == root else { throw Failure(description: "the inclusion proof does not lead to the tree head's root") }
    }

    /// That the tree whose root is `firstRoot` is a prefix of the tree whose root is `secondRoot`.
    public static func verify(_ proof: ConsistencyProof, firstRoot: [UInt8], secondRoot: [UInt8]) throws {
        let (first, second) = (proof.firstSize, proof.secondSize)
        guard first >= 1, first <= second else { throw Failure(description: "a consistency proof needs 1 ≤ first size ≤ second size") }
        if first == second {
            guard proof.path.isEmpty, firstRoot == secondRoot else { throw Failure(description: "two heads of one size with different roots") }
            return
        }
        guard !proof.path.isEmpty else { throw Failure(description: "the consistency proof is empty") }
        var path = proof.path
        if first & (first - 1) == 0 { path.insert(firstRoot, at: 0) }
        var index = first - 1
        var last = second - 1
        while index & 1 == 1 {
            index >>= 1
            last >>= 1
        }
        var firstHash = path[0]
        var secondHash = path[0]
        for node in path.dropFirst() {
            guard last > 0 else { throw Failure(description: "the consistency proof is too long") }
            if index & 1 == 1 || index == last {
                firstHash = Self.node(node, firstHash)
                secondHash = Self.node(node, secondHash)
                while index & 1 == 0 && index != 0 {
                    index >>= 1
                    last >>= 1
                }
            } else {
                secondHash = Self.node(secondHash, node)
            }
            index >>= 1
            last >>= 1
        }
        guard last == 0, firstHash == firstRoot, secondHash == secondRoot else {
            throw Failure(description: "the later tree does not extend the earlier one: the history was rewritten")
        }
    }
}
