import HealthModel
import LedgerSchema
import NIOCore
import SwiftProtobuf

/// A frame as the decoder hands it on: a decoded ``Healthledger_V1_Frame``, or one whose
/// body was framed correctly but is not a valid `Frame` message (the byte stream is still
/// in step, so the connection can go on).
public enum InboundFrame: Sendable {
    case frame(Healthledger_V1_Frame)
    case malformed(String)
}

/// Why the byte stream of a connection can no longer be trusted.
public enum FrameError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The header declares a frame larger than the limit (checked before the body is read).
    case frameTooLarge(declared: Int, limit: Int)
    /// The flags byte is not 0.
    case unsupportedFlags(UInt8)
    /// The stream ended inside a frame.
    case truncated(missing: Int)

    public var description: String {
        switch self {
        case .frameTooLarge(let declared, let limit): "frame of \(declared) bytes exceeds the limit of \(limit) bytes"
        case .unsupportedFlags(let flags): "unsupported frame flags 0x\(String(flags, radix: 16))"
        case .truncated(let missing): "the stream ended \(missing) bytes short of a frame"
        }
    }
}

/// Frame layout: flags (1 byte, 0) | length (4 bytes, big-endian) | `Frame` (length bytes).
public enum FrameLayout {
    public static let headerSize = 5
    /// The default maximum frame size, 4 MiB.
    public static let defaultMaximumFrameSize = 4 << 20
}

/// Splits the byte stream into frames, rejecting an oversize frame as soon as its header
/// arrives.
public struct FrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = InboundFrame

    public let maximumFrameSize: Int

    public init(maximumFrameSize: Int = FrameLayout.defaultMaximumFrameSize) {
        self.maximumFrameSize = maximumFrameSize
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> InboundFrame? {
        guard let body = try Self.nextBody(of: &buffer, maximumFrameSize: maximumFrameSize) else { return nil }
        return Self.frame(body)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> InboundFrame? {
        if let frame = try decode(buffer: &buffer) { return frame }
        try Self.checkNothingLeft(in: &buffer, seenEOF: seenEOF)
        return nil
    }

    /// The body of the next frame once all of it has arrived (the reader index then past it),
    /// or nil while it has not.
    ///
    /// - Throws: ``FrameError`` for flags other than 0, or a declared length above
    ///   `maximumFrameSize` (known from the header alone).
    public static func nextBody(of buffer: inout ByteBuffer, maximumFrameSize: Int) throws -> ByteBuffer? {
        guard buffer.readableBytes >= FrameLayout.headerSize,
            let flags = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self),
            let length = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt32.self)
        else { return nil }
        guard flags == 0 else { throw FrameError.unsupportedFlags(flags) }
        guard length <= maximumFrameSize else { throw FrameError.frameTooLarge(declared: Int(length), limit: maximumFrameSize) }
        guard buffer.readableBytes >= FrameLayout.headerSize + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: FrameLayout.headerSize)
        return buffer.readSlice(length: Int(length))!
    }

    /// A frame's body decoded as a `Frame`.
    public static func frame(_ body: ByteBuffer) -> InboundFrame {
        do {
            return .frame(try Healthledger_V1_Frame(serializedBytes: Array(body.readableBytesView)))
        } catch {
            return .malformed("the frame body is not a valid healthledger.v1.Frame")
        }
    }

    /// At the end of the stream, after its last whole frame: throws
    /// ``FrameError/truncated(missing:)`` when part of a frame is left.
    public static func checkNothingLeft(in buffer: inout ByteBuffer, seenEOF: Bool) throws {
        guard seenEOF, buffer.readableBytes > 0 else { return }
        let declared = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt32.self).map(Int.init) ?? FrameLayout.headerSize
        let missing = FrameLayout.headerSize + declared - buffer.readableBytes
        buffer.moveReaderIndex(to: buffer.writerIndex)
        throw FrameError.truncated(missing: max(missing, 1))
    }
}

/// Frames written with their 5-byte prefix: the server and the SDK write bytes, with no
/// encoder in their pipelines.
extension ByteBuffer {
    /// Appends `frame` with its 5-byte prefix.
    public mutating func writeFrame(_ frame: Healthledger_V1_Frame) {
        // Serializing a frame cannot fail: it has no required fields and no maps of messages.
        let bytes: [UInt8] = try! frame.serializedBytes()
        reserveCapacity(minimumWritableBytes: FrameLayout.headerSize + bytes.count)
        writeInteger(UInt8(0))
        writeInteger(UInt32(bytes.count))
        writeBytes(bytes)
    }

    /// Appends the frame `Healthledger_V1_Frame.message(id:_:)` makes, written directly:
    /// the same bytes as ``writeFrame(_:)`` writes for it, without building the message.
    /// A server answers every call with one, so this is on the path of every call.
    public mutating func writeMessageFrame(id: UInt64, _ payload: [UInt8]) {
        payload.withUnsafeBytes { writeFrame(id: id, field: .message, $0) }
    }

    /// Appends the frame `Healthledger_V1_Frame.status(id:_:)` makes, written directly (an
    /// `OK` status is the empty `CallStatus`); the same bytes as ``writeFrame(_:)`` writes.
    public mutating func writeStatusFrame(id: UInt64, _ error: RPCError?) {
        guard let error else { return writeFrame(id: id, field: .status, UnsafeRawBufferPointer(start: nil, count: 0)) }
        // Serializing a status cannot fail.
        let status: [UInt8] = try! Healthledger_V1_Frame.status(id: id, error).status.serializedBytes()
        status.withUnsafeBytes { writeFrame(id: id, field: .status, $0) }
    }

    /// Appends the frame `Healthledger_V1_Frame.request(id:…)` makes for `request`, written
    /// directly: the same bytes as ``writeFrame(_:)`` writes for it, with the payload copied
    /// once, into the buffer. A client opens every call with one, so this is on the path of
    /// every call (and of an import's batches of a thousand objects).
    public mutating func writeRequestFrame(_ request: CallRequestFrame) {
        // The request's fields in number order: those before the payload, the payload's tag
        // and length, then (after the payload's bytes) those after it.
        var head = ProtoWriter(capacity: 48 + request.method.rawValue.utf8.count + request.credential.utf8.count)
        head.string(field: CallRequestField.method, request.method.rawValue)
        head.string(field: CallRequestField.credential, request.credential)
        head.varint(field: CallRequestField.timeoutMs, UInt64(request.timeoutMilliseconds))
        if !request.payload.isEmpty { head.lengthDelimitedHeader(field: CallRequestField.payload.rawValue, length: request.payload.count) }
        var tail = ProtoWriter(capacity: 32)
        tail.varint(field: CallRequestField.initialWindow, UInt64(request.window))
        switch request.asOf {
        case .sequence(let sequence)?: tail.varint(field: CallRequestField.asOfSequence, sequence)
        case .time(let time)?: tail.presentSigned(field: CallRequestField.asOfTimeUs, microseconds(time))
        case nil: break
        }
        writeFrameHeader(id: request.id, field: .request, length: head.buffer.count + request.payload.count + tail.buffer.count)
        writeBytes(head.buffer)
        writeBytes(request.payload)
        writeBytes(tail.buffer)
    }

    /// A frame of `call_id` (omitted when 0, as proto3 does) and one length-delimited field:
    /// its header bytes written at once, then the payload.
    private mutating func writeFrame(id: UInt64, field: FrameField, _ payload: UnsafeRawBufferPointer) {
        writeFrameHeader(id: id, field: field, length: payload.count)
        if !payload.isEmpty { writeBytes(payload) }
    }

    /// The 5-byte prefix, `call_id` (omitted when 0, as proto3 does), and the tag and length of
    /// one length-delimited field of `fieldLength` bytes, which the caller appends next (room
    /// for them is reserved).
    private mutating func writeFrameHeader(id: UInt64, field: FrameField, length fieldLength: Int) {
        let idSize = id == 0 ? 0 : 1 + Self.varintSize(id)
        let length = idSize + 1 + Self.varintSize(UInt64(fieldLength)) + fieldLength
        let headerSize = FrameLayout.headerSize + length - fieldLength
        reserveCapacity(minimumWritableBytes: FrameLayout.headerSize + length)
        writeWithUnsafeMutableBytes(minimumWritableBytes: headerSize) { out in
            out[0] = 0
            out.storeBytes(of: UInt32(length).bigEndian, toByteOffset: 1, as: UInt32.self)
            var index = 5
            func varint(_ value: UInt64) {
                var value = value
                while value >= 0x80 {
                    out[index] = UInt8(truncatingIfNeeded: value) | 0x80
                    index += 1
                    value >>= 7
                }
                out[index] = UInt8(value)
                index += 1
            }
            if id != 0 {
                out[index] = UInt8(FrameField.callId.rawValue << 3)
                index += 1
                varint(id)
            }
            out[index] = UInt8(field.rawValue << 3 | 2)
            index += 1
            varint(UInt64(fieldLength))
            return index
        }
    }

    private static func varintSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }
}

/// What opens a call: the fields of a `request` frame, which ``ByteBuffer/writeRequestFrame(_:)``
/// writes without building the message.
public struct CallRequestFrame: Sendable {
    public var id: UInt64
    public var method: RPCMethod
    public var credential: String
    public var payload: [UInt8]
    /// The call's deadline; 0 for the server's default.
    public var timeoutMilliseconds: UInt32
    /// A streaming call's first window; 0 for the server's default.
    public var window: UInt32
    /// Makes the call a point-in-time read.
    public var asOf: PointInTime?

    public init(
        id: UInt64, method: RPCMethod, credential: String, payload: [UInt8], timeoutMilliseconds: UInt32 = 0, window: UInt32 = 0,
        asOf: PointInTime? = nil
    ) {
        self.id = id
        self.method = method
        self.credential = credential
        self.payload = payload
        self.timeoutMilliseconds = timeoutMilliseconds
        self.window = window
        self.asOf = asOf
    }
}

extension Healthledger_V1_Frame {
    /// A frame opening call `id`; `asOf` makes it a point-in-time read.
    public static func request(
        id: UInt64, method: RPCMethod, credential: String, payload: [UInt8], timeoutMilliseconds: UInt32 = 0, window: UInt32 = 0,
        asOf: PointInTime? = nil
    ) -> Self {
        var request = Healthledger_V1_CallRequest()
        request.method = method.rawValue
        request.credential = credential
        request.payload = Data(payload)
        request.timeoutMs = timeoutMilliseconds
        request.initialWindow = window
        switch asOf {
        case .sequence(let sequence)?: request.asOfSequence = sequence
        case .time(let time)?: request.asOfTimeUs = microseconds(time)
        case nil: break
        }
        var frame = Self()
        frame.callID = id
        frame.request = request
        return frame
    }

    public static func message(id: UInt64, _ payload: [UInt8]) -> Self {
        var frame = Self()
        frame.callID = id
        frame.message = Data(payload)
        return frame
    }

    public static func status(id: UInt64, _ error: RPCError?) -> Self {
        var status = Healthledger_V1_CallStatus()
        if let error {
            status.code = Healthledger_V1_StatusCode(rawValue: error.code.rawValue) ?? .unknown
            status.message = error.message
            status.healthErrorCode = Int32(error.healthErrorCode?.rawValue ?? 0)
            status.primary = error.primary ?? ""
            status.unprocessed = error.unprocessed
        }
        var frame = Self()
        frame.callID = id
        frame.status = status
        return frame
    }
}

import Foundation

extension Healthledger_V1_CallRequest {
    /// The point in time the call reads at, if it is a point-in-time read.
    /// - Throws: ``RPCError`` `invalidArgument` when both fields are set.
    public func pointInTime() throws -> PointInTime? {
        switch (asOfSequence, hasAsOfTimeUs) {
        case (0, false): return nil
        case (let sequence, false): return .sequence(sequence)
        case (0, true): return .time(date(microseconds: asOfTimeUs))
        default: throw RPCError(.invalidArgument, "a call reads as of a sequence or a time, not both", healthErrorCode: .invalidArgument)
        }
    }
}
