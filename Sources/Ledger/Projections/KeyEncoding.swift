import Foundation
import LMDB

/// Byte layouts for projection keys and values: fixed-width, big-endian, so that LMDB's
/// byte order is the order queries need.
enum KeyEncoding {
    @inline(__always)
    static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always)
    static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Whether key `first` sorts before `second` in LMDB's default order: bytewise, a prefix
    /// before the keys it starts.
    static func precedes(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) -> Bool {
        let common = min(first.count, second.count)
        let order = common == 0 ? 0 : memcmp(first.baseAddress!, second.baseAddress!, common)
        return order != 0 ? order < 0 : first.count < second.count
    }

    /// A signed time that sorts correctly as unsigned big-endian bytes.
    @inline(__always)
    static func appendTime(_ microseconds: Int64, to bytes: inout [UInt8]) {
        append(UInt64(bitPattern: microseconds) ^ (1 << 63), to: &bytes)
    }

    @inline(__always)
    static func uint64(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in offset..<(offset + 8) { value = value << 8 | UInt64(buffer[index]) }
        return value
    }

    @inline(__always)
    static func uint32(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        var value: UInt32 = 0
        for index in offset..<(offset + 4) { value = value << 8 | UInt32(buffer[index]) }
        return value
    }

    @inline(__always)
    static func time(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> Int64 {
        Int64(bitPattern: uint64(buffer, at: offset) ^ (1 << 63))
    }

    static func sequenceKey(_ sequence: UInt64) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(8)
        append(sequence, to: &key)
        return key
    }

    /// type(4), then source(4) when given: the keys of the per-type databases
    /// (`characteristics`, `source_priority`) and the part of a change-index
    /// key before the sequence (``ChangeIndexRow/prefix(type:source:)``).
    static func typeKey(_ type: UInt32, source: UInt32? = nil) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(16)
        append(type, to: &key)
        if let source { append(source, to: &key) }
        return key
    }
}

/// Up to 64 bytes of a key or value built in place, without an allocation: the fixed-width
/// keys and values the projections write for every object saved. Big-endian, as
/// ``KeyEncoding`` lays them out.
struct InlineBytes: ContiguousBytesKey, Sendable {
    static let capacity = 64
    private var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private(set) var count = 0

    init() {}

    @inline(__always)
    private mutating func store<T: FixedWidthInteger>(_ value: T) {
        precondition(count + MemoryLayout<T>.size <= Self.capacity, "an inline key holds at most 64 bytes")
        let offset = count
        withUnsafeMutableBytes(of: &words) { $0.storeBytes(of: value.bigEndian, toByteOffset: offset, as: T.self) }
        count += MemoryLayout<T>.size
    }

    mutating func append(_ value: UInt8) { store(value) }
    mutating func append(_ value: UInt32) { store(value) }
    mutating func append(_ value: UInt64) { store(value) }

    /// A signed time that sorts correctly as unsigned big-endian bytes.
    mutating func appendTime(_ microseconds: Int64) { store(UInt64(bitPattern: microseconds) ^ (1 << 63)) }

    mutating func append(_ bytes: [UInt8]) {
        precondition(count + bytes.count <= Self.capacity, "an inline key holds at most 64 bytes")
        let offset = count
        withUnsafeMutableBytes(of: &words) { words in
            bytes.withUnsafeBytes { words.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        count += bytes.count
    }

    func withKeyBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: words) { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }

    /// The bytes as an array.
    var bytes: [UInt8] { withKeyBytes { Array($0) } }

    /// Whether `other` holds these bytes.
    func equals(_ other: UnsafeRawBufferPointer) -> Bool {
        other.count == count && withKeyBytes { count == 0 || memcmp($0.baseAddress!, other.baseAddress!, count) == 0 }
    }

    /// The first sixteen bytes (zeros past the end) as two big-endian integers: ordering by
    /// them orders by those bytes, cheaply.
    var leadingWords: (UInt64, UInt64) { (UInt64(bigEndian: words.0), UInt64(bigEndian: words.1)) }

    /// Whether these bytes sort before `other`'s in LMDB's default key order (bytewise, a
    /// prefix first): decided by the first sixteen bytes when they differ, as they nearly
    /// always do (zeros past the end order a prefix first there too), by all of them otherwise.
    func precedes(_ other: InlineBytes) -> Bool {
        let (mine, theirs) = (leadingWords, other.leadingWords)
        if mine != theirs { return mine < theirs }
        return withKeyBytes { mine in other.withKeyBytes { KeyEncoding.precedes(mine, $0) } }
    }
}
