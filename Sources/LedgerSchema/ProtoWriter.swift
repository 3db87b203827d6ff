/// Writes protobuf wire format directly, omitting default values as proto3 does.
///
/// For hot paths only (event and object encoding); tests hold its output byte-identical
/// to SwiftProtobuf's for the same messages.
public struct ProtoWriter: Sendable {
    public private(set) var buffer: [UInt8] = []

    public init(capacity: Int) { buffer.reserveCapacity(capacity) }

    private mutating func raw(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            buffer.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        buffer.append(UInt8(value))
    }

    public mutating func varint(field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        raw(UInt64(field << 3))
        raw(value)
    }

    /// A `bytes` field, left out when empty (an array, or bytes in place such as a UUID's).
    public mutating func bytes(field: Int, _ value: some Collection<UInt8>) {
        guard !value.isEmpty else { return }
        raw(UInt64(field << 3 | 2))
        raw(UInt64(value.count))
        buffer.append(contentsOf: value)
    }

    /// A `bytes` field from an array, left out when empty: the same bytes as the generic
    /// `bytes(field:_:)`, copied in one go where a caller in another module would
    /// otherwise copy through the unspecialized generic path, element by element (an event's
    /// body is hundreds of bytes).
    public mutating func bytes(field: Int, _ value: [UInt8]) {
        guard !value.isEmpty else { return }
        presentBytes(field: field, value)
    }

    /// A proto3 `optional` or oneof member: written whenever present, even when empty.
    public mutating func presentBytes(field: Int, _ value: [UInt8]) {
        raw(UInt64(field << 3 | 2))
        raw(UInt64(value.count))
        buffer.append(contentsOf: value)
    }

    public mutating func string(field: Int, _ value: String) {
        guard !value.isEmpty else { return }
        presentString(field: field, value)
    }

    public mutating func presentString(field: Int, _ value: String) {
        raw(UInt64(field << 3 | 2))
        raw(UInt64(value.utf8.count))
        buffer.append(contentsOf: value.utf8)
    }

    /// A `sint64` (zigzag varint).
    public mutating func signed(field: Int, _ value: Int64) {
        varint(field: field, UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    public mutating func presentSigned(field: Int, _ value: Int64) {
        raw(UInt64(field << 3))
        raw(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A `double` (fixed 64-bit, little-endian); +0 is omitted unless `present` (-0 is
    /// written, as SwiftProtobuf does: only the all-zero bit pattern is the default).
    public mutating func double(field: Int, _ value: Double, present: Bool = false) {
        guard present || value.bitPattern != 0 else { return }
        raw(UInt64(field << 3 | 1))
        withUnsafeBytes(of: value.bitPattern.littleEndian) { buffer.append(contentsOf: $0) }
    }

    /// The bytes ``message(field:_:)`` writes for a message of `length` bytes.
    public static func messageSize(field: Int, length: Int) -> Int {
        varintSize(UInt64(field << 3 | 2)) + varintSize(UInt64(length)) + length
    }

    private static func varintSize(_ value: UInt64) -> Int {
        (64 - value.leadingZeroBitCount + 6) / 7 + (value == 0 ? 1 : 0)
    }

    /// A sub-message written in place by `body`, its length filled in afterwards: one byte
    /// is kept for it (two with `long`, for a body that is likely 128–16,383 bytes, such as a
    /// whole object), and the body moves when its length turns out to take more or fewer. The
    /// same bytes as ``message(field:_:)`` with the body written to a writer of its own,
    /// without that writer's buffer.
    public mutating func message(field: Int, long: Bool = false, _ body: (inout ProtoWriter) -> Void) {
        raw(UInt64(field << 3 | 2))
        let lengthAt = buffer.count
        let kept = long ? 2 : 1
        buffer.append(0)
        if long { buffer.append(0) }
        body(&self)
        let length = buffer.count - lengthAt - kept
        let needed = Self.varintSize(UInt64(length))
        // The body moves by the difference, then the length is written in place.
        if needed > kept {
            buffer.insert(contentsOf: repeatElement(0, count: needed - kept), at: lengthAt + kept)
        } else if needed < kept {
            buffer.removeSubrange(lengthAt + needed..<lengthAt + kept)
        }
        var value = UInt64(length)
        var at = lengthAt
        while value >= 0x80 {
            buffer[at] = UInt8(truncatingIfNeeded: value) | 0x80
            value >>= 7
            at += 1
        }
        buffer[at] = UInt8(value)
    }

    /// Makes room for at least `capacity` bytes in all, so that what follows is written
    /// without the buffer growing (and being copied) on the way.
    public mutating func reserveCapacity(_ capacity: Int) {
        buffer.reserveCapacity(capacity)
    }

    /// Empties the buffer, keeping its capacity (a writer reused for one message after another).
    public mutating func removeAll() {
        buffer.removeAll(keepingCapacity: true)
    }

    /// Bytes already in wire format (a message's fields written elsewhere).
    public mutating func append(_ bytes: [UInt8]) {
        buffer.append(contentsOf: bytes)
    }

    /// The tag and length of a length-delimited field of `length` bytes that the caller
    /// writes elsewhere (a request's payload, appended to the frame without a copy here).
    public mutating func lengthDelimitedHeader(field: Int, length: Int) {
        raw(UInt64(field << 3 | 2))
        raw(UInt64(length))
    }

    /// A present sub-message is written even when empty.
    public mutating func message(field: Int, _ value: [UInt8]) {
        value.withUnsafeBytes { message(field: field, $0) }
    }

    /// A present sub-message from bytes in place (a stored object's).
    public mutating func message(field: Int, _ value: UnsafeRawBufferPointer) {
        raw(UInt64(field << 3 | 2))
        raw(UInt64(value.count))
        buffer.append(contentsOf: value)
    }
}
