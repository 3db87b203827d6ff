/// Reads protobuf wire format in place, without copying or building messages.
///
/// For hot paths only (replay reads every event of a log); tests hold what it extracts
/// equal to what SwiftProtobuf decodes from the same bytes.
public struct ProtoReader {
    public enum WireType: Int, Sendable {
        case varint = 0, fixed64 = 1, lengthDelimited = 2, startGroup = 3, endGroup = 4, fixed32 = 5
    }

    public struct Malformed: Error, Sendable, CustomStringConvertible {
        public var description: String { "malformed protobuf bytes" }
    }

    private let buffer: UnsafeRawBufferPointer
    /// Where the next read starts, from the buffer's start.
    public private(set) var offset = 0
    /// False once a varint (a tag, a length or a value) was read in more bytes than it needs,
    /// or with bits beyond 64: bytes that decode but that no encoder writes.
    public private(set) var varintsMinimal = true

    public init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    /// The bytes of the first length-delimited field numbered `number` in `message` (a view
    /// into it), or nil when there is none.
    public static func field(_ number: Int, in message: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var reader = ProtoReader(message)
        while let (field, wireType) = try reader.next() {
            if field == number, wireType == .lengthDelimited { return try reader.bytes() }
            try reader.skip(wireType)
        }
        return nil
    }

    /// The next field's number and wire type, or nil at the end.
    public mutating func next() throws -> (field: Int, wireType: WireType)? {
        guard offset < buffer.count else { return nil }
        let tag = try varint()
        guard let wireType = WireType(rawValue: Int(tag & 7)), tag >> 3 > 0, tag >> 3 < 1 << 29 else { throw Malformed() }
        return (Int(tag >> 3), wireType)
    }

    public mutating func varint() throws -> UInt64 {
        // Most varints (every tag of a field below 16, most lengths) take one byte.
        if offset < buffer.count {
            let byte = buffer[offset]
            if byte < 0x80 {
                offset += 1
                return UInt64(byte)
            }
        }
        return try longVarint()
    }

    private mutating func longVarint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < buffer.count, shift < 64 {
            let byte = buffer[offset]
            offset += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if (byte == 0 && shift > 0) || (shift == 63 && byte > 1) { varintsMinimal = false }
                return value
            }
            shift += 7
        }
        throw Malformed()
    }

    /// A `sint64` (zigzag).
    public mutating func signed() throws -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    public mutating func fixed64() throws -> UInt64 {
        guard offset + 8 <= buffer.count else { throw Malformed() }
        let value = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        offset += 8
        return value
    }

    public mutating func double() throws -> Double { Double(bitPattern: try fixed64()) }

    /// A length-delimited field's bytes (a view into the buffer).
    public mutating func bytes() throws -> UnsafeRawBufferPointer {
        let length = try varint()
        guard length <= UInt64(buffer.count - offset) else { throw Malformed() }
        let slice = UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + Int(length))])
        offset += Int(length)
        return slice
    }

    /// A string field, invalid UTF-8 repaired (U+FFFD), as SwiftProtobuf's lenient paths do.
    public mutating func string() throws -> String {
        // The typed buffer takes the standard library's direct path; a raw one goes through
        // generic code that looks its metadata up on every call.
        String(decoding: try bytes().assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }

    /// A string field that must be valid UTF-8; nil when it is not.
    public mutating func validString() throws -> String? {
        Self.validString(try bytes())
    }

    /// `raw` as a string if it is valid UTF-8.
    public static func validString(_ raw: UnsafeRawBufferPointer) -> String? {
        let bytes = raw.assumingMemoryBound(to: UInt8.self)
        // ASCII (nearly every identifier, unit and name) is valid as it stands.
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        // Eight bytes at a time, then the rest.
        if let base = bytes.baseAddress {
            while index + 8 <= bytes.count {
                if UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
                index += 8
            }
        }
        while index < bytes.count {
            if bytes[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    /// Skips a field's value.
    public mutating func skip(_ wireType: WireType) throws {
        switch wireType {
        case .varint: _ = try varint()
        case .fixed64: _ = try fixed64()
        case .lengthDelimited: _ = try bytes()
        case .fixed32:
            guard offset + 4 <= buffer.count else { throw Malformed() }
            offset += 4
        case .startGroup, .endGroup: throw Malformed()
        }
    }
}
