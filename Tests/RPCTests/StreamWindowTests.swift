import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import LedgerSchema
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// The SDK's side of a stream's flow control (PROTOCOL.md §4.6): it opens a stream with a
/// window of 16 messages and grants one more each time its consumer takes one. A peer that
/// sends exactly what it is granted, never more, shows the grants: a stream longer than the
/// window only ends if they arrive, and each is counted.
@Suite("The SDK's stream window", .timeLimit(.minutes(1)))
struct StreamWindowTests {
    /// What the peer saw of the stream's flow control.
    final class Seen: Sendable {
        let initialWindow = Mutex<UInt32?>(nil)
        let updates = Mutex<[UInt32]>([])
    }

    /// Answers a streaming request with `total` empty messages, sending one only while the
    /// client's window has room, then the status. (Its state is touched only on its channel's
    /// event loop.)
    final class Peer: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = InboundFrame
        typealias OutboundOut = ByteBuffer
        let total: Int
        let seen: Seen
        private var call: UInt64 = 0
        private var credit: UInt64 = 0
        private var sent = 0

        init(total: Int, seen: Seen) {
            self.total = total
            self.seen = seen
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .frame(let frame) = unwrapInboundIn(data) else { return }
            switch frame.kind {
            case .request(let request):
                call = frame.callID
                seen.initialWindow.withLock { $0 = request.initialWindow }
                credit = UInt64(request.initialWindow == 0 ? 16 : request.initialWindow)
            case .windowUpdate(let update) where frame.callID == call:
                seen.updates.withLock { $0.append(update.messages) }
                credit += UInt64(update.messages)
            default: return
            }
            guard sent < total else { return }
            var bytes = context.channel.allocator.buffer(capacity: 256)
            while credit > 0, sent < total {
                bytes.writeMessageFrame(id: call, [])
                credit -= 1
                sent += 1
            }
            if sent == total { bytes.writeStatusFrame(id: call, nil) }
            context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
        }
    }

    static func listen(total: Int, seen: Seen) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try channel.pipeline.syncOperations.addHandler(Peer(total: total, seen: seen))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    @Test("a stream opens with a window of 16 and is granted one message each time its consumer takes one")
    func grantsHalfWindows() async throws {
        let seen = Seen()
        // 16 in the first window, then one grant per message taken: the stream ends only once 24 came.
        let total = 40
        let listener = try await Self.listen(total: total, seen: seen)
        let store = HealthStore(configuration: HealthStoreConfiguration(port: listener.localAddress!.port!, credential: "hl1:any:x:y"))
        var received = 0
        for try await batch in try await store.results(for: SampleQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierHeartRate"))) {
            #expect(batch.isEmpty)
            received += 1
        }
        #expect(received == total)
        #expect(seen.initialWindow.withLock { $0 } == 16)
        let updates = seen.updates.withLock { $0 }
        #expect(updates.count >= total - 16, "the peer sent all \(total) messages only after \(total - 16) grants")
        #expect(updates.allSatisfy { $0 == 1 }, "grants: \(updates)")
        await store.close()
        try await listener.close()
    }
}
