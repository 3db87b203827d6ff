import HealthLedgerRPC
import LedgerSchema
import NIOCore
import SwiftProtobuf

/// A frame from the server as the client's connection reads it: a call's message or status
/// read in place, anything else decoded whole.
package enum ResponseFrame {
    /// A `message` frame: one response (or stream message) of call `id`.
    case message(id: UInt64, payload: [UInt8])
    /// A `status` frame: call `id` ended, with `error` unless it ended `OK`.
    case status(id: UInt64, error: RPCError?)
    /// Another kind of frame (a pong, a go-away…), or a body that is not a valid `Frame`.
    case other(InboundFrame)
}

/// Splits the server's byte stream into frames, as ``FrameDecoder`` does, and reads the two
/// kinds that answer calls without building a `Frame`: every call ends in a status, most
/// carry a message, and SwiftProtobuf's decoding of each was much of the client's work per
/// call. A body with anything else in it, or in another shape, is decoded whole.
package struct ResponseFrameDecoder: NIOSingleStepByteToMessageDecoder {
    package typealias InboundOut = ResponseFrame

    package let maximumFrameSize: Int

    package init(maximumFrameSize: Int) { self.maximumFrameSize = maximumFrameSize }

    package mutating func decode(buffer: inout ByteBuffer) throws -> ResponseFrame? {
        guard let body = try FrameDecoder.nextBody(of: &buffer, maximumFrameSize: maximumFrameSize) else { return nil }
        return Self.read(body) ?? .other(FrameDecoder.frame(body))
    }

    package mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> ResponseFrame? {
        if let frame = try decode(buffer: &buffer) { return frame }
        try FrameDecoder.checkNothingLeft(in: &buffer, seenEOF: seenEOF)
        return nil
    }

    /// The body as a message or status: at most a call id, then exactly one `message` or
    /// `status` field, each once. Nil for any other body (decoded whole, which decides).
    package static func read(_ body: ByteBuffer) -> ResponseFrame? {
        body.withUnsafeReadableBytes { bytes -> ResponseFrame? in
            var reader = ProtoReader(bytes)
            var id: UInt64?
            var message: UnsafeRawBufferPointer?
            var status: UnsafeRawBufferPointer?
            do {
                while let (field, wireType) = try reader.next() {
                    switch (FrameField(rawValue: field), wireType) {
                    case (.callId, .varint) where id == nil: id = try reader.varint()
                    case (.message, .lengthDelimited) where message == nil && status == nil: message = try reader.bytes()
                    case (.status, .lengthDelimited) where message == nil && status == nil: status = try reader.bytes()
                    default: return nil
                    }
                }
            } catch {
                return nil
            }
            if let message { return .message(id: id ?? 0, payload: Array(message)) }
            guard let status else { return nil }
            // An OK status is empty; a failure's is decoded (rare, and its fields vary).
            if status.isEmpty { return .status(id: id ?? 0, error: nil) }
            guard let decoded = try? Healthledger_V1_CallStatus(serializedBytes: Array(status)) else { return nil }
            return .status(id: id ?? 0, error: RPCError(decoded))
        }
    }
}
