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

    /// type(4) | time(8) | uuid(16): the key of the start and end indexes.
    static func timeKey(type: UInt32, time: Int64, uuid: some Collection<UInt8>) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(28)
        append(type, to: &key)
        appendTime(time, to: &key)
        key.append(contentsOf: uuid)
        return key
    }

    /// type(4) | source(4) | start(8) | uuid(16): the key of the per-source start index.
    static func sourceTimeKey(type: UInt32, source: UInt32, time: Int64, uuid: some Collection<UInt8>) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(32)
        append(type, to: &key)
        append(source, to: &key)
        appendTime(time, to: &key)
        key.append(contentsOf: uuid)
        return key
    }

    /// type(4), then source(4) when given: the keys of the per-type databases
    /// (`type_stats`, `characteristics`, `source_priority`) and the part of a change-index
    /// key before the sequence (`changes`, `source_changes`).
    static func typeKey(_ type: UInt32, source: UInt32? = nil) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(16)
        append(type, to: &key)
        if let source { append(source, to: &key) }
        return key
    }

    /// type(4) | source(4) | sequence(8): the key of the per-source change index.
    static func sourceChangeKey(type: UInt32, source: UInt32, sequence: UInt64) -> [UInt8] {
        var key = typeKey(type, source: source)
        append(sequence, to: &key)
        return key
    }

    /// type(4) | sequence(8): the key of the change index.
    static func changeKey(type: UInt32, sequence: UInt64) -> [UInt8] {
        var key = typeKey(type)
        append(sequence, to: &key)
        return key
    }
}
