import LMDB

/// The ledger's Merkle tree over its events, as RFC 9162 (Certificate Transparency 2.0)
/// defines one, kept in the `merkle` database by the write transaction and by replay.
///
/// Leaf *i* (0-based) is event *i* + 1, and its hash is `SHA-256(0x00 ‖ h)` where *h* is the
/// event's hash (SHA-256 of its stored bytes, the chain's link). An inner node is
/// `SHA-256(0x01 ‖ left ‖ right)`. The tree of *n* leaves splits at the largest power of two
/// below *n* (RFC 9162 §2.1.1). docs/LEDGER.md gives the proofs' construction.
///
/// Stored: the hash of every perfect subtree of sixteen leaves or more, keyed by the index of
/// the last leaf it covers (8 bytes, big-endian) and its level (1 byte), so that each new
/// leaf's writes are appends (an eighth of a write per event on average). Smaller subtrees
/// are at most eight event reads and fifteen hashes away. Any subtree's hash is then at most
/// ~log n reads away.
enum MerkleTree {
    /// The lowest level stored; lower nodes are computed from the events.
    static let storedLevel = 4

    static func leafHash(eventHash: some ContiguousBytesKey) -> InlineHash {
        eventHash.withKeyBytes { hash in
            withUnsafeBytes(of: UInt8(0x00)) { InlineHash.sha256($0, UnsafeRawBufferPointer(rebasing: hash.prefix(32))) }
        }
    }

    static func nodeHash(_ left: InlineHash, _ right: InlineHash) -> InlineHash {
        withUnsafeTemporaryAllocation(byteCount: 65, alignment: 1) { buffer in
            buffer[0] = 0x01
            left.withKeyBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[1..<33]).copyMemory(from: $0) }
            right.withKeyBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[33..<65]).copyMemory(from: $0) }
            return InlineHash.sha256(UnsafeRawBufferPointer(buffer))
        }
    }

    static func key(level: Int, index: UInt64) -> NodeKey { NodeKey(level: level, index: index) }

    /// The hash of the perfect subtree at `level` covering leaves `index << level` onwards.
    static func node(level: Int, index: UInt64, in snapshot: LedgerSnapshot) throws -> InlineHash {
        if level == 0 { return leafHash(eventHash: try EventCodec.hash(try Ledger.storedEvent(index + 1, in: snapshot))) }
        if level < storedLevel {
            return nodeHash(try node(level: level - 1, index: index * 2, in: snapshot), try node(level: level - 1, index: index * 2 + 1, in: snapshot))
        }
        guard let value = try snapshot.get(key(level: level, index: index), in: snapshot.databases.merkle), value.count == 32 else {
            throw LedgerFailure.corrupted("the Merkle tree lacks node \(index) of level \(level): replay the ledger")
        }
        return InlineHash(value)
    }

    /// The roots of the perfect subtrees the tree of `size` leaves is made of, highest level
    /// first: what a new leaf merges with.
    static func frontier(size: UInt64, in snapshot: LedgerSnapshot) throws -> Frontier {
        var frontier = Frontier(size: size)
        var start: UInt64 = 0
        for level in stride(from: 63, through: 0, by: -1) where size & (UInt64(1) << level) != 0 {
            frontier.nodes.append(try node(level: level, index: start >> level, in: snapshot))
            start += UInt64(1) << level
        }
        return frontier
    }

    /// MTH(D[range]): the hash of the tree over the leaves in `range` (not empty).
    static func hash(_ range: Range<UInt64>, in snapshot: LedgerSnapshot) throws -> InlineHash {
        let count = UInt64(range.count)
        if count & (count - 1) == 0, range.lowerBound % count == 0 {
            let level = count.trailingZeroBitCount
            return try node(level: level, index: range.lowerBound >> level, in: snapshot)
        }
        let split = largestPowerOfTwo(below: count)
        return nodeHash(
            try hash(range.lowerBound..<(range.lowerBound + split), in: snapshot),
            try hash((range.lowerBound + split)..<range.upperBound, in: snapshot))
    }

    /// The root of the tree of the first `size` leaves; SHA-256 of nothing for size 0.
    static func root(size: UInt64, in snapshot: LedgerSnapshot) throws -> InlineHash {
        size == 0 ? InlineHash.sha256(UnsafeRawBufferPointer(start: nil, count: 0)) : try hash(0..<size, in: snapshot)
    }

    /// PATH(m, D[range]) of RFC 9162 §2.1.3.1: the audit path of leaf `leaf` (absolute).
    static func inclusionPath(leaf: UInt64, _ range: Range<UInt64>, in snapshot: LedgerSnapshot) throws -> [InlineHash] {
        let count = UInt64(range.count)
        guard count > 1 else { return [] }
        let split = largestPowerOfTwo(below: count)
        let middle = range.lowerBound + split
        if leaf < middle {
            return try inclusionPath(leaf: leaf, range.lowerBound..<middle, in: snapshot) + [hash(middle..<range.upperBound, in: snapshot)]
        }
        return try inclusionPath(leaf: leaf, middle..<range.upperBound, in: snapshot) + [hash(range.lowerBound..<middle, in: snapshot)]
    }

    /// SUBPROOF(m, D[range], b) of RFC 9162 §2.1.4.1; PROOF(m, D[n]) is `(m, 0..<n, true)`.
    static func consistencyPath(_ first: UInt64, _ range: Range<UInt64>, complete: Bool, in snapshot: LedgerSnapshot) throws
        -> [InlineHash]
    {
        let count = UInt64(range.count)
        if first == count { return complete ? [] : [try hash(range, in: snapshot)] }
        let split = largestPowerOfTwo(below: count)
        let middle = range.lowerBound + split
        if first <= split {
            return try consistencyPath(first, range.lowerBound..<middle, complete: complete, in: snapshot)
                + [hash(middle..<range.upperBound, in: snapshot)]
        }
        return try consistencyPath(first - split, middle..<range.upperBound, complete: false, in: snapshot)
            + [hash(range.lowerBound..<middle, in: snapshot)]
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
    var nodes: [InlineHash] = []

    init(size: UInt64) { self.size = size }

    /// Adds leaf `size` (event `size + 1`) with `eventHash`, handing `store` each node it
    /// completes at a stored level.
    mutating func append(eventHash: some ContiguousBytesKey, store: (NodeKey, InlineHash) throws -> Void) rethrows {
        var hash = MerkleTree.leafHash(eventHash: eventHash)
        var level = 0
        // A set bit of the size at `level` is a subtree this leaf now completes a parent of.
        while size & (UInt64(1) << level) != 0 {
            hash = MerkleTree.nodeHash(nodes.removeLast(), hash)
            level += 1
            if level >= MerkleTree.storedLevel { try store(MerkleTree.key(level: level, index: size >> level), hash) }
        }
        nodes.append(hash)
        size += 1
    }
}

/// A stored node's key: the index of the last leaf it covers (8 bytes, big-endian), then its
/// level (1 byte), so that the nodes a new leaf completes are appends.
struct NodeKey: ContiguousBytesKey {
    let lastLeaf: UInt64
    let level: UInt8

    init(level: Int, index: UInt64) {
        lastLeaf = ((index + 1) << level) - 1
        self.level = UInt8(level)
    }

    func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var bytes: (UInt64, UInt8) = (lastLeaf.bigEndian, level)
        return try withUnsafeBytes(of: &bytes) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<9])) }
    }
}
