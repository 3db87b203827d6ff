import Crypto

/// RFC 9162's Merkle tree written out plainly from its definition, to check the server's
/// heads and proofs with code that shares nothing with it.
public enum ReferenceTree {
    public static func leaf(_ eventHash: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: [0] + eventHash)) }
    public static func node(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: [1] + left + right)) }
    public static func split(_ n: Int) -> Int {
        var k = 1
        while k * 2 < n { k *= 2 }
        return k
    }

    /// MTH(D[n]) over leaf hashes.
    public static func root(_ leaves: ArraySlice<[UInt8]>) -> [UInt8] {
        if leaves.count == 1 { return leaves.first! }
        let k = split(leaves.count)
        return node(root(leaves.prefix(k)), root(leaves.dropFirst(k)))
    }

    /// PATH(m, D[n]).
    public static func path(_ m: Int, _ leaves: ArraySlice<[UInt8]>) -> [[UInt8]] {
        if leaves.count <= 1 { return [] }
        let k = split(leaves.count)
        return m < k ? path(m, leaves.prefix(k)) + [root(leaves.dropFirst(k))] : path(m - k, leaves.dropFirst(k)) + [root(leaves.prefix(k))]
    }

    /// SUBPROOF(m, D[n], b).
    public static func subproof(_ m: Int, _ leaves: ArraySlice<[UInt8]>, _ complete: Bool) -> [[UInt8]] {
        if m == leaves.count { return complete ? [] : [root(leaves)] }
        let k = split(leaves.count)
        return m <= k
            ? subproof(m, leaves.prefix(k), complete) + [root(leaves.dropFirst(k))]
            : subproof(m - k, leaves.dropFirst(k), false) + [root(leaves.prefix(k))]
    }

    /// The signed bytes, as docs/LEDGER.md spells them.
    public static func signed(ledger: String, size: UInt64, time: Int64, root: [UInt8]) -> [UInt8] {
        Array("healthledger-tree-head-v1".utf8) + [0] + Array(ledger.utf8) + [0] + withUnsafeBytes(of: size.bigEndian, Array.init)
            + withUnsafeBytes(of: UInt64(bitPattern: time).bigEndian, Array.init) + root
    }
}
