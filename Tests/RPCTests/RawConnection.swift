import Foundation
import HealthLedgerRPC
import LedgerSchema
import NIOCore
import NIOPosix
import SwiftProtobuf

/// A raw TCP connection that writes arbitrary bytes and reads decoded frames, for
/// feeding the server what a real client never would.
final class RawConnection: @unchecked Sendable {
    let channel: any Channel
    let frames: AsyncStream<InboundFrame>
    private var iterator: AsyncStream<InboundFrame>.AsyncIterator

    init(port: Int) async throws {
        let (stream, continuation) = AsyncStream<InboundFrame>.makeStream()
        channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maximumFrameSize: 64 << 20)))
                    try channel.pipeline.syncOperations.addHandler(Collector(continuation: continuation))
                }
            }
            .connectTimeout(.seconds(5))
            .connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: port)).get()
        frames = stream
        iterator = stream.makeAsyncIterator()
    }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes))
    }

    func send(_ frame: Healthledger_V1_Frame) async throws {
        try await send(Self.encode(frame))
    }

    static func encode(_ frame: Healthledger_V1_Frame) -> [UInt8] {
        let body: [UInt8] = try! frame.serializedBytes()
        return [0] + withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init) + body
    }

    /// The next frame, or nil when the server closed the connection. `timeout` only guards
    /// against a test hanging forever: no test relies on it passing, and a loaded machine
    /// can take seconds to answer, so it is long.
    func next(timeout: Duration = .seconds(60)) async -> InboundFrame? {
        let deadline = Task { [channel] in
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { try? await channel.close() }
        }
        defer { deadline.cancel() }
        return await iterator.next()
    }

    /// The status of call `id`, skipping other frames.
    func status(of id: UInt64) async -> Healthledger_V1_CallStatus? {
        while let frame = await next() {
            if case .frame(let frame) = frame, frame.callID == id, case .status(let status) = frame.kind { return status }
        }
        return nil
    }

    func close() async { try? await channel.close() }

    /// Half-closes: the server sees the end of the stream, this side still reads.
    func closeOutput() async throws { try await channel.close(mode: .output) }

    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = InboundFrame
        let continuation: AsyncStream<InboundFrame>.Continuation

        init(continuation: AsyncStream<InboundFrame>.Continuation) { self.continuation = continuation }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) { continuation.yield(unwrapInboundIn(data)) }
        func channelInactive(context: ChannelHandlerContext) { continuation.finish() }
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            continuation.finish()
            context.close(promise: nil)
        }
    }
}
