import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import LedgerSchema
import NIOCore
import SwiftProtobuf
import Testing

/// The frames a server writes directly (a call's response and status) against SwiftProtobuf's
/// encoding of the same frames, and the SDK's reading of them in place against SwiftProtobuf's
/// decoding.
@Suite("Frames written and read directly")
struct FrameWritingTests {
    static func direct(_ write: (inout ByteBuffer) -> Void) -> [UInt8] {
        var buffer = ByteBuffer()
        write(&buffer)
        return Array(buffer.readableBytesView)
    }

    static func viaProtobuf(_ frame: Healthledger_V1_Frame) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeFrame(frame)
        return Array(buffer.readableBytesView)
    }

    @Test("property: message and status frames have the bytes SwiftProtobuf writes, whatever the id, payload and status")
    func sameBytes() {
        var rng = SystemRandomNumberGenerator()
        // Ids and lengths around every varint boundary, 0 (omitted) and the largest.
        let ids: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, 1 << 32, .max] + (0..<200).map { _ in UInt64.random(in: 0...(1 << UInt64.random(in: 1...63, using: &rng)), using: &rng) }
        let lengths = [0, 1, 127, 128, 16_383, 16_384, 70_000]
        for (index, id) in ids.enumerated() {
            let payload = (0..<lengths[index % lengths.count]).map { _ in UInt8.random(in: 0...255, using: &rng) }
            #expect(Self.direct { $0.writeMessageFrame(id: id, payload) } == Self.viaProtobuf(.message(id: id, payload)), "message \(id) \(payload.count)")
            #expect(Self.direct { $0.writeStatusFrame(id: id, nil) } == Self.viaProtobuf(.status(id: id, nil)), "ok \(id)")
            let failure = RPCError(
                RPCStatusCode.allCases.randomElement(using: &rng)!, String(repeating: "é", count: index), healthErrorCode: index % 2 == 0 ? nil : .noData)
            #expect(Self.direct { $0.writeStatusFrame(id: id, failure) } == Self.viaProtobuf(.status(id: id, failure)), "failure \(id)")
        }
        // One buffer holds both, as a server writes them, and decodes as two frames.
        var both = ByteBuffer()
        both.writeMessageFrame(id: 9, [1, 2, 3])
        both.writeStatusFrame(id: 9, nil)
        var decoder = FrameDecoder()
        guard case .frame(let message)? = try? decoder.decode(buffer: &both), case .frame(let status)? = try? decoder.decode(buffer: &both) else {
            Issue.record("two frames expected")
            return
        }
        #expect(message.callID == 9 && message.message == Data([1, 2, 3]) && status.status == Healthledger_V1_CallStatus())
        #expect(both.readableBytes == 0)
    }

    @Test("property: request frames the SDK writes directly have the bytes SwiftProtobuf writes, whatever the fields")
    func requestSameBytes() {
        var rng = SystemRandomNumberGenerator()
        let ids: [UInt64] = [0, 1, 127, 128, 16_384, .max] + (0..<200).map { _ in UInt64.random(in: 0...(1 << UInt64.random(in: 1...63, using: &rng)), using: &rng) }
        let lengths = [0, 1, 127, 128, 16_383, 16_384, 70_000]
        let credentials = ["", "hl1:alice:0123:secret", String(repeating: "é", count: 100)]
        let points: [PointInTime?] = [
            nil, .sequence(0), .sequence(1), .sequence(.max), .time(Date(timeIntervalSince1970: 0)), .time(Date(timeIntervalSince1970: -1_000_000.5)),
            .time(Date(timeIntervalSince1970: 1_764_000_000.123456)),
        ]
        let windows: [UInt32] = [0, 1, 16, 1 << 20, .max]
        let timeouts: [UInt32] = [0, 1, 30_000, .max]
        for (index, id) in ids.enumerated() {
            let request = CallRequestFrame(
                id: id, method: RPCMethod.allCases.randomElement(using: &rng)!, credential: credentials[index % credentials.count],
                payload: (0..<lengths[index % lengths.count]).map { _ in UInt8.random(in: 0...255, using: &rng) },
                timeoutMilliseconds: timeouts.randomElement(using: &rng)!, window: windows.randomElement(using: &rng)!,
                asOf: points.randomElement(using: &rng)!)
            let message = Healthledger_V1_Frame.request(
                id: request.id, method: request.method, credential: request.credential, payload: request.payload,
                timeoutMilliseconds: request.timeoutMilliseconds, window: request.window, asOf: request.asOf)
            #expect(Self.direct { $0.writeRequestFrame(request) } == Self.viaProtobuf(message), "request \(index)")
        }
    }

    /// What the SDK's decoder makes of one frame's bytes.
    static func read(_ bytes: [UInt8]) throws -> ResponseFrame? {
        var buffer = ByteBuffer(bytes: bytes)
        var decoder = ResponseFrameDecoder(maximumFrameSize: FrameLayout.defaultMaximumFrameSize)
        let frame = try decoder.decode(buffer: &buffer)
        #expect(buffer.readableBytes == 0)
        return frame
    }

    /// A frame around `body`, as bytes.
    static func framed(_ body: [UInt8]) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(UInt32(body.count))
        buffer.writeBytes(body)
        return Array(buffer.readableBytesView)
    }

    @Test("property: the SDK reads message and status frames in place as SwiftProtobuf decodes them; any other body is decoded whole")
    func readInPlace() throws {
        var rng = SystemRandomNumberGenerator()
        let ids: [UInt64] = [0, 1, 127, 128, 16_384, 1 << 32, .max] + (0..<100).map { _ in UInt64.random(in: 0...(1 << UInt64.random(in: 1...63, using: &rng)), using: &rng) }
        let lengths = [0, 1, 127, 128, 16_384, 70_000]
        for (index, id) in ids.enumerated() {
            let payload = (0..<lengths[index % lengths.count]).map { _ in UInt8.random(in: 0...255, using: &rng) }
            guard case .message(let readID, let readPayload)? = try Self.read(Self.viaProtobuf(.message(id: id, payload))) else {
                Issue.record("message \(id) not read in place")
                continue
            }
            #expect(readID == id && readPayload == payload)
            guard case .status(id, nil)? = try Self.read(Self.viaProtobuf(.status(id: id, nil))) else {
                Issue.record("OK status \(id) not read in place")
                continue
            }
            let failure = RPCError(
                RPCStatusCode.allCases.filter { $0 != .ok }.randomElement(using: &rng)!, String(repeating: "é", count: index),
                healthErrorCode: index % 2 == 0 ? nil : .noData)
            guard case .status(id, let error?)? = try Self.read(Self.viaProtobuf(.status(id: id, failure))) else {
                Issue.record("failed status \(id) not read in place")
                continue
            }
            #expect(error.code == failure.code && error.message == failure.message && error.healthErrorCode == failure.healthErrorCode)
        }

        // Other kinds, and message or status bodies in shapes a server does not write, go to
        // SwiftProtobuf, which decides (a repeated id or kind: the last wins; an unknown field
        // is skipped; a bad body is malformed).
        let others: [Healthledger_V1_Frame] = [
            .init(),
            ProtocolStatementTests.control(0) { $0.goAway = .with { $0.lastCallID = 7; $0.reason = "draining" } },
            ProtocolStatementTests.control(3) { $0.cancel = .init() },
            ProtocolStatementTests.control(3) { $0.windowUpdate = .with { $0.messages = 4 } },
            ProtocolStatementTests.control(0) { $0.pong = .with { $0.nonce = 99 } },
        ]
        let odd: [[UInt8]] = [
            [0x08, 0x01, 0x08, 0x02, 0x1A, 0x01, 0x05],  // id twice
            [0x1A, 0x01, 0x05, 0x22, 0x00],  // a message, then a status
            [0x22, 0x00, 0x1A, 0x00],  // a status, then a message
            [0x1A, 0x01, 0x05, 0x7A, 0x01, 0x41],  // an unknown field after the message
            [0x08, 0x05],  // an id alone
            [0x0A, 0x01, 0x05],  // the id length-delimited
            [0x1A, 0x05, 0x01],  // a message cut short
            [0x22, 0x02, 0x08, 0x80],  // a status whose code is cut short
        ]
        for body in others.map({ try! $0.serializedBytes() as [UInt8] }) + odd {
            let read = try Self.read(Self.framed(body))
            var buffer = ByteBuffer(bytes: body)
            let whole = FrameDecoder.frame(buffer.readSlice(length: body.count)!)
            switch (read, whole) {
            case (.other(.frame(let a))?, .frame(let b)): #expect(a == b, "\(body)")
            case (.other(.malformed)?, .malformed): break
            default: Issue.record("\(body): read \(String(describing: read)), SwiftProtobuf \(whole)")
            }
        }

        // Two frames in one buffer, then a partial one (nil, waits for the rest).
        var stream = ByteBuffer(bytes: Self.viaProtobuf(.message(id: 9, [1, 2, 3])) + Self.viaProtobuf(.status(id: 9, nil)))
        stream.writeBytes(Self.viaProtobuf(.message(id: 10, [4])))
        stream.moveWriterIndex(to: stream.writerIndex - 1)
        var decoder = ResponseFrameDecoder(maximumFrameSize: 1024)
        guard case .message(9, [1, 2, 3])? = try decoder.decode(buffer: &stream), case .status(9, nil)? = try decoder.decode(buffer: &stream) else {
            Issue.record("two frames expected")
            return
        }
        #expect(try decoder.decode(buffer: &stream) == nil)
        #expect(throws: FrameError.truncated(missing: 1)) { try decoder.decodeLast(buffer: &stream, seenEOF: true) }
        var large = ByteBuffer(bytes: Self.viaProtobuf(.message(id: 1, [UInt8](repeating: 0, count: 2_000))))
        #expect(throws: FrameError.frameTooLarge(declared: 2_005, limit: 1024)) { try decoder.decode(buffer: &large) }
    }
}
