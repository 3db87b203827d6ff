import Crypto
import LMDB

/// The ledger's Merkle tree over its events, as RFC 9162 (Certificate Transparency 2.0)
/// defines one, kept in the `merkle` database by the write transaction and by replay.
///
/// Leaf *i* (0-based) is event *i* + 1, and its hash is `SHA-256(0x00 ‖ h)` where *h* is the
/// event's hash (SHA-256 of its stored bytes, the chain's link). An inner node is
/// `SHA-256(0x01 ‖ left ‖ right)`. The tree of *n* leaves splits at the largest power of two
/// below *n* (RFC 9162 §2.1.1). docs/LEDGER.md gives the proofs' construction.
///
/// Stored: the hash of every perfect subtree of four leaves or more, keyed by the index of
/// the last leaf it covers (8 bytes, big-endian) and its level (1 byte), so that each new
/// leaf's writes are appends (half a write per event on average). Smaller subtrees are at
/// most two event reads and three hashes away. Any subtree's hash is then at most ~log n
/// reads away.
enum MerkleTree {
    /// The lowest level stored; lower nodes are computed from the events.
    static let storedLevel = 2

    static func leafHash(eventHash: some ContiguousBytesKey) -> [UInt8] {
        eventHash.withKeyBytes { hash in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 33) { buffer in
                buffer[0] = 0x00
                UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[1..<33]).copyBytes(from: hash.prefix(32))
                return Array(SHA256.hash(data: UnsafeRawBufferPointer(buffer)))
            }
        }
    }

    static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 65) { buffer in
            buffer[0] = 0x01
            let raw = UnsafeMutableRawBufferPointer(buffer)
            left.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[1..<33]).copyBytes(from: $0.prefix(32)) }
            right.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[33..<65]).copyBytes(from: $0.prefix(32)) }
            return Array(SHA256.hash(data: UnsafeRawBufferPointer(buffer)))
        }
    }

    static func key(level: Int, index: UInt64) -> [UInt8] {
        var key = KeyEncoding.sequenceKey(((index + 1) << level) - 1)
        key.append(UInt8(level))
        return key
    }

    /// The hash of the perfect subtree at `level` covering leaves `index << level` onwards.
    static func node(level: Int, index: UInt64, in txn: Transaction, _ databases: LedgerDatabases) throws -> [UInt8] {
        if level == 0 { return leafHash(eventHash: EventCodec.hash(try Ledger.storedEvent(index + 1, in: txn, databases))) }
        if level < storedLevel {
            return nodeHash(try node(level: level - 1, index: index * 2, in: txn, databases), try node(level: level - 1, index: index * 2 + 1, in: txn, databases))
        }
        guard let value = try txn.get(key(level: level, index: index), in: databases.merkle), value.count == 32 else {
            throw LedgerFailure.corrupted("the Merkle tree lacks node \(index) of level \(level): replay the ledger")
        }
        return Array(value)
    }

    /// The roots of the perfect subtrees the tree of `size` leaves is made of, highest level
    /// first: what a new leaf merges with.
    static func frontier(size: UInt64, in txn: Transaction, _ databases: LedgerDatabases) throws -> Frontier {
        var frontier = Frontier(size: size)
        var start: UInt64 = 0
        for level in stride(from: 63, through: 0, by: -1) where size & (UInt64(1) << level) != 0 {
            frontier.nodes.append(try node(level: level, index: start >> level, in: txn, databases))
            start += UInt64(1) << level
        }
        return frontier
    }

    /// MTH(D[range]): the hash of the tree over the leaves in `range` (not empty).
    static func hash(_ range: Range<UInt64>, in txn: Transaction, _ databases: LedgerDatabases) throws -> [UInt8] {
        let count = UInt64(range.count)
        if count & (count - 1) == 0, range.lowerBound % count == 0 {
            let level = count.trailingZeroBitCount
            return try node(level: level, index: range.lowerBound >> level, in: txn, databases)
        }
        let split = largestPowerOfTwo(below: count)
        return nodeHash(
            try hash(range.lowerBound..<(range.lowerBound + split), in: txn, databases),
            try hash((range.lowerBound + split)..<range.upperBound, in: txn, databases))
    }

    /// The root of the tree of the first `size` leaves; SHA-256 of nothing for size 0.
    static func root(size: UInt64, in txn: Transaction, _ databases: LedgerDatabases) throws -> [UInt8] {
        size == 0 ? Array(SHA256.hash(data: [UInt8]())) : try hash(0..<size, in: txn, databases)
    }

    /// PATH(m, D[range]) of RFC 9162 §2.1.3.1: the audit path of leaf `leaf` (absolute).
    static func inclusionPath(leaf: UInt64, _ range: Range<UInt64>, in txn: Transaction, _ databases: LedgerDatabases) throws -> [[UInt8]] {
        let count = UInt64(range.count)
        guard count > 1 else { return [] }
        let split = largestPowerOfTwo(below: count)
        let middle = range.lowerBound + split
        if leaf < middle {
            return try inclusionPath(leaf: leaf, range.lowerBound..<middle, in: txn, databases) + [hash(middle..<range.upperBound, in: txn, databases)]
        }
        return try inclusionPath(leaf: leaf, middle..<range.upperBound, in: txn, databases) + [hash(range.lowerBound..<middle, in: txn, databases)]
    }

    /// SUBPROOF(m, D[range], b) of RFC 9162 §2.1.4.1; PROOF(m, D[n]) is `(m, 0..<n, true)`.
    static func consistencyPath(_ first: UInt64, _ range: Range<UInt64>, complete: Bool, in txn: Transaction, _ databases: LedgerDatabases) throws
        -> [[UInt8]]
    {
        let count = UInt64(range.count)
        if first == count { return complete ? [] : [try hash(range, in: txn, databases)] }
        let split = largestPowerOfTwo(below: count)
        let middle = range.lowerBound + split
        if first <= split {
            return try consistencyPath(first, range.lowerBound..<middle, complete: complete, in: txn, databases)
                + [hash(middle..<range.upperBound, in: txn, databases)]
        }
        return try consistencyPath(first - split, middle..<range.upperBound, complete: false, in: txn, databases)
            + [hash(range.lowerBound..<middle, in: txn, databases)]
    }

    /// The largest power of two strictly below `count` (count ≥ 2).
    static func largestPowerOfTwo(below count: UInt64) -> UInt64 {
        UInt64(1) << (63 - (count - 1).leadingZeroBitCount)
    }
}

/// The roots of the perfect subtrees a tree is made of (highest level first), kept in memory
/// while leaves are added: each new leaf merges with the ones of its size, and only the
/// merged nodes are written.
struct Frontier: Sendable, Equatable {
    private(set) var size: UInt64
    var nodes: [[UInt8]] = []

    init(size: UInt64) { self.size = size }

    /// Adds leaf `size` (event `size + 1`) with `eventHash`, writing each node it completes.
    mutating func append(eventHash: [UInt8], in txn: Transaction, _ databases: LedgerDatabases) throws {
        var hash = MerkleTree.leafHash(eventHash: eventHash)
        var level = 0
        // A set bit of the size at `level` is a subtree this leaf now completes a parent of.
        while size & (UInt64(1) << level) != 0 {
            hash = MerkleTree.nodeHash(nodes.removeLast(), hash)
            level += 1
            if level >= MerkleTree.storedLevel {
                try txn.put(hash, forKey: MerkleTree.key(level: level, index: size >> level), in: databases.merkle, append: true)
            }
        }
        nodes.append(hash)
        size += 1
    }
}
