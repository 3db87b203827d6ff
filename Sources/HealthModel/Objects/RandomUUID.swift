import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension UUID {
    /// A time-ordered (version 7) UUID: 48 bits of Unix milliseconds, then 74 random bits.
    ///
    /// This is the default for new objects. Consecutive UUIDs sort together, so the ledger's
    /// UUID index grows at its right edge instead of touching a random page per object
    /// (with random UUIDs, a durable batch of 1,000 rewrites up to 1,000 index pages).
    /// The UUID reveals its creation time to the millisecond; whoever can read the object
    /// sees its dates anyway. Any UUID version is accepted on save.
    public static func timeOrdered(now: Date = Date()) -> UUID {
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { RandomPool.shared.fill(UnsafeMutableRawBufferPointer(rebasing: $0[6...])) }
        let milliseconds = UInt64(max(0, now.timeIntervalSince1970 * 1000))
        value.0 = UInt8(truncatingIfNeeded: milliseconds >> 40)
        value.1 = UInt8(truncatingIfNeeded: milliseconds >> 32)
        value.2 = UInt8(truncatingIfNeeded: milliseconds >> 24)
        value.3 = UInt8(truncatingIfNeeded: milliseconds >> 16)
        value.4 = UInt8(truncatingIfNeeded: milliseconds >> 8)
        value.5 = UInt8(truncatingIfNeeded: milliseconds)
        value.6 = (value.6 & 0x0F) | 0x70
        value.8 = (value.8 & 0x3F) | 0x80
        return UUID(uuid: value)
    }

    /// A random (version 4) UUID from the system's CSPRNG.
    ///
    /// Foundation's `UUID()` on Linux opens and reads `/dev/urandom` for every UUID; this
    /// draws 256 bytes at a time with `getentropy` (16 UUIDs per system call), because
    /// ingest creates objects by the million.
    public static func random() -> UUID {
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { RandomPool.shared.fill($0) }
        value.6 = (value.6 & 0x0F) | 0x40
        value.8 = (value.8 & 0x3F) | 0x80
        return UUID(uuid: value)
    }
}

/// Random bytes drawn from the kernel in blocks.
private final class RandomPool: Sendable {
    static let shared = RandomPool()

    private struct Block {
        var bytes = [UInt8](repeating: 0, count: 256)
        var used = 256
    }

    private let block = Mutex(Block())

    func fill(_ target: UnsafeMutableRawBufferPointer) {
        block.withLock { block in
            if block.used + target.count > block.bytes.count {
                Self.draw(&block.bytes)
                block.used = 0
            }
            block.bytes.withUnsafeBytes { source in
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[block.used..<(block.used + target.count)]))
            }
            block.used += target.count
        }
    }

    private static func draw(_ bytes: inout [UInt8]) {
        #if canImport(Glibc)
        let drawn = bytes.withUnsafeMutableBytes { getentropy($0.baseAddress, $0.count) } == 0
        if drawn { return }
        #endif
        var generator = SystemRandomNumberGenerator()
        for index in bytes.indices { bytes[index] = generator.next() }
    }
}
