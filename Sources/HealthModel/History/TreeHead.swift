import Foundation

/// What a ledger's server commits to: the root of the Merkle tree over its first `size`
/// events, at a time, signed with the ledger's Ed25519 key. A later head must extend it
/// (a consistency proof shows it), so a server that rewrites history is caught.
public struct SignedTreeHead: Sendable, Hashable {
    public var ledgerID: String
    public var size: UInt64
    /// RFC 9162's MTH of the first `size` event hashes.
    public var rootHash: [UInt8]
    /// Microseconds since 1970.
    public var timestampUs: Int64
    public var signature: [UInt8]
    public var publicKey: [UInt8]

    public init(ledgerID: String, size: UInt64, rootHash: [UInt8], timestampUs: Int64, signature: [UInt8], publicKey: [UInt8]) {
        self.ledgerID = ledgerID
        self.size = size
        self.rootHash = rootHash
        self.timestampUs = timestampUs
        self.signature = signature
        self.publicKey = publicKey
    }

    /// The bytes the signature covers: `healthledger-tree-head-v1`, a zero byte, the ledger
    /// id in UTF-8, a zero byte, the size and the timestamp as 8-byte big-endian integers,
    /// and the 32-byte root.
    public var signedBytes: [UInt8] {
        Self.signedBytes(ledgerID: ledgerID, size: size, timestampUs: timestampUs, rootHash: rootHash)
    }

    public static func signedBytes(ledgerID: String, size: UInt64, timestampUs: Int64, rootHash: [UInt8]) -> [UInt8] {
        var bytes = Array("healthledger-tree-head-v1".utf8)
        bytes.append(0)
        bytes += Array(ledgerID.utf8)
        bytes.append(0)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: size >> UInt64(shift))) }
        let time = UInt64(bitPattern: timestampUs)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: time >> UInt64(shift))) }
        return bytes + rootHash
    }
}

/// That event `sequence` is in the tree of `treeSize` leaves (leaf `sequence - 1`).
public struct InclusionProof: Sendable, Hashable {
    public var sequence: UInt64
    public var treeSize: UInt64
    /// SHA-256 of the event's stored bytes.
    public var eventHash: [UInt8]
    /// RFC 9162 §2.1.3's audit path, from the leaf up.
    public var path: [[UInt8]]

    public init(sequence: UInt64, treeSize: UInt64, eventHash: [UInt8], path: [[UInt8]]) {
        self.sequence = sequence
        self.treeSize = treeSize
        self.eventHash = eventHash
        self.path = path
    }
}

/// That the tree of `firstSize` leaves is a prefix of the tree of `secondSize` leaves.
public struct ConsistencyProof: Sendable, Hashable {
    public var firstSize: UInt64
    public var secondSize: UInt64
    /// RFC 9162 §2.1.4's proof.
    public var path: [[UInt8]]

    public init(firstSize: UInt64, secondSize: UInt64, path: [[UInt8]]) {
        self.firstSize = firstSize
        self.secondSize = secondSize
        self.path = path
    }
}
