import Foundation
import HealthLedgerRPC
import HealthModel
import LedgerSchema
import NIOCore
import SwiftProtobuf
import Testing

/// The frames a server writes directly (a call's response and status) against SwiftProtobuf's
/// encoding of the same frames, which clients decode.
@Suite("Frames written directly")
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
}
