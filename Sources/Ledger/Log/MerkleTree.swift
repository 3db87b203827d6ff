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
/// Stored: every perfect subtree's hash, leaves included, keyed by the index of the last
/// leaf it covers (8 bytes, big-endian) and its level (1 byte), so that each new leaf's
/// writes are appends. Any subtree's hash is then at most ~log n reads away.
enum MerkleTree {
    static func leafHash(eventHash: some ContiguousBytesKey) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: [0x00])
        eventHash.withKeyBytes { hasher.update(bufferPointer: $0) }
        return Array(hasher.finalize())
    }

    static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: [0x01])
        hasher.update(data: left)
        hasher.update(data: right)
        return Array(hasher.finalize())
    }

    static func key(level: Int, index: UInt64) -> [UInt8] {
        var key = KeyEncoding.sequenceKey(((index + 1) << level) - 1)
        key.append(UInt8(level))
        return key
    }

    /// Adds leaf `index` (event `index + 1`) and every perfect subtree it completes.
    static func append(index: UInt64, eventHash: [UInt8], in txn: Transaction, _ database: Database) throws {
        var hash = leafHash(eventHash: eventHash)
        try txn.put(hash, forKey: key(level: 0, index: index), in: database, append: true)
        var level = 0
        var position = index
        // While this node is a right child, its parent is complete.
        while position & 1 == 1 {
            let left = try node(level: level, index: position - 1, in: txn, database)
            hash = nodeHash(left, hash)
            level += 1
            position >>= 1
            try txn.put(hash, forKey: key(level: level, index: position), in: database, append: true)
        }
    }

    /// The hash of the perfect subtree at `level` covering leaves `index << level` onwards.
    static func node(level: Int, index: UInt64, in txn: Transaction, _ database: Database) throws -> [UInt8] {
        guard let value = try txn.get(key(level: level, index: index), in: database), value.count == 32 else {
            throw LedgerFailure.corrupted("the Merkle tree lacks node \(index) of level \(level): replay the ledger")
        }
        return Array(value)
    }

    /// MTH(D[range]): the hash of the tree over the leaves in `range` (not empty).
    static func hash(_ range: Range<UInt64>, in txn: Transaction, _ database: Database) throws -> [UInt8] {
        let count = UInt64(range.count)
        if count & (count - 1) == 0, range.lowerBound % count == 0 {
            let level = count.trailingZeroBitCount
            return try node(level: level, index: range.lowerBound >> level, in: txn, database)
        }
        let split = largestPowerOfTwo(below: count)
        return nodeHash(
            try hash(range.lowerBound..<(range.lowerBound + split), in: txn, database),
            try hash((range.lowerBound + split)..<range.upperBound, in: txn, database))
    }

    /// The root of the tree of the first `size` leaves; SHA-256 of nothing for size 0.
    static func root(size: UInt64, in txn: Transaction, _ database: Database) throws -> [UInt8] {
        size == 0 ? Array(SHA256.hash(data: [UInt8]())) : try hash(0..<size, in: txn, database)
    }

    /// PATH(m, D[range]) of RFC 9162 §2.1.3.1: the audit path of leaf `leaf` (absolute).
    static func inclusionPath(leaf: UInt64, _ range: Range<UInt64>, in txn: Transaction, _ database: Database) throws -> [[UInt8]] {
        let count = UInt64(range.count)
        guard count > 1 else { return [] }
        let split = largestPowerOfTwo(below: count)
        let middle = range.lowerBound + split
        if leaf < middle {
            return try inclusionPath(leaf: leaf, range.lowerBound..<middle, in: txn, database) + [hash(middle..<range.upperBound, in: txn, database)]
        }
        return try inclusionPath(leaf: leaf, middle..<range.upperBound, in: txn, database) + [hash(range.lowerBound..<middle, in: txn, database)]
    }

    /// SUBPROOF(m, D[range], b) of RFC 9162 §2.1.4.1; PROOF(m, D[n]) is `(m, 0..<n, true)`.
    static func consistencyPath(_ first: UInt64, _ range: Range<UInt64>, complete: Bool, in txn: Transaction, _ database: Database) throws
        -> [[UInt8]]
    {
        let count = UInt64(range.count)
        if first == count { return complete ? [] : [try hash(range, in: txn, database)] }
        let split = largestPowerOfTwo(below: count)
        let middle = range.lowerBound + split
        if first <= split {
            return try consistencyPath(first, range.lowerBound..<middle, complete: complete, in: txn, database)
                + [hash(middle..<range.upperBound, in: txn, database)]
        }
        return try consistencyPath(first - split, middle..<range.upperBound, complete: false, in: txn, database)
            + [hash(range.lowerBound..<middle, in: txn, database)]
    }

    /// The largest power of two strictly below `count` (count ≥ 2).
    static func largestPowerOfTwo(below count: UInt64) -> UInt64 {
        UInt64(1) << (63 - (count - 1).leadingZeroBitCount)
    }
}
