import CLedgerAEAD
import Foundation
import LMDB

/// A SHA-256 hash held inline: the Merkle frontier, the proofs and the chain check handle
/// hashes without allocating for each.
struct InlineHash: Equatable, Sendable, ContiguousBytesKey {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// Thirty-two zero bytes (the link before the first event).
    init() {}

    /// The hash in `bytes` (exactly 32 of them).
    init(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == 32, "a SHA-256 hash has 32 bytes")
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: bytes) }
    }

    /// SHA-256 of `first` followed by `second`, hashed without an allocation (`ledger_sha256`).
    static func sha256(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) -> InlineHash {
        var hash = InlineHash()
        withUnsafeMutableBytes(of: &hash.words) { ledger_sha256(first.baseAddress, first.count, second.baseAddress, second.count, $0.baseAddress) }
        return hash
    }

    /// The 32 bytes as an array, for the wire.
    var bytes: [UInt8] { withKeyBytes { Array($0) } }

    func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: words, body)
    }

    /// Whether `bytes` are this hash.
    func equals(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count == 32 && withKeyBytes { memcmp($0.baseAddress!, bytes.baseAddress!, 32) == 0 }
    }

    static func == (left: InlineHash, right: InlineHash) -> Bool {
        left.words.0 == right.words.0 && left.words.1 == right.words.1 && left.words.2 == right.words.2 && left.words.3 == right.words.3
    }
}
