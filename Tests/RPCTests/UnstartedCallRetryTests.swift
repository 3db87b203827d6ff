import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import LedgerSchema
import NIOCore
import NIOPosix
import SwiftProtobuf
import Synchronization
import Testing

/// The SDK's half of the idle-close race: a request that crosses the server's go-away on the
/// wire was never started, and the store sends it again on a new connection. The server's
/// half (go-away before an idle close, requests after it dropped) is in ConnectionStateTests;
/// the race itself needs the two to cross on the wire, which a peer that answers the first
/// connection's request with a go-away below its id reproduces every time.
@Suite("Calls the server never started", .timeLimit(.minutes(1)))
struct UnstartedCallRetryTests {
    /// Answers each request on the first `refusing` connections with go-away (last call id 0)
    /// and a close; on later connections, answers pings.
    final class Peer: ChannelInboundHandler, Sendable {
        typealias InboundIn = InboundFrame
        typealias OutboundOut = ByteBuffer
        let refuse: Bool

        init(refuse: Bool) { self.refuse = refuse }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .frame(let frame) = unwrapInboundIn(data), case .request = frame.kind else { return }
            if refuse {
                var goAway = Healthledger_V1_Frame()
                goAway.goAway = .with { $0.lastCallID = 0; $0.reason = "the connection was idle for 300.0 seconds" }
                let channel = context.channel
                var bytes = context.channel.allocator.buffer(capacity: 64)
                bytes.writeFrame(goAway)
                context.writeAndFlush(wrapOutboundOut(bytes)).whenComplete { _ in channel.close(promise: nil) }
                return
            }
            let response = Healthledger_V1_PingResponse.with { $0.ledgerID = "second-connection" }
            var answer = context.channel.allocator.buffer(capacity: 64)
            answer.writeMessageFrame(id: frame.callID, try! response.serializedBytes() as [UInt8])
            answer.writeStatusFrame(id: frame.callID, nil)
            context.writeAndFlush(wrapOutboundOut(answer), promise: nil)
        }
    }

    /// Counts the connections accepted.
    final class Accepted: Sendable {
        let count = Mutex(0)
    }

    /// A listener whose first `refused` connections refuse every call as never started.
    static func listen(refused: Int) async throws -> (any Channel, Accepted) {
        let accepted = Accepted()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                let number = accepted.count.withLock { count in
                    count += 1
                    return count
                }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder()))
                    try channel.pipeline.syncOperations.addHandler(Peer(refuse: number <= refused))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, accepted)
    }

    @Test("a unary call above the go-away's last call id is sent again on a new connection")
    func retried() async throws {
        let (listener, accepted) = try await Self.listen(refused: 2)
        let store = HealthStore(configuration: HealthStoreConfiguration(port: listener.localAddress!.port!, credential: "hl1:any:x:y"))
        let result = try await store.ping()
        #expect(result.ledgerID == "second-connection")
        #expect(accepted.count.withLock { $0 } == 3)
        await store.close()
        try await listener.close()
    }

    @Test("after three connections that never started it, the call fails with unavailable")
    func givesUp() async throws {
        let (listener, accepted) = try await Self.listen(refused: 10)
        let store = HealthStore(configuration: HealthStoreConfiguration(port: listener.localAddress!.port!, credential: "hl1:any:x:y"))
        await #expect {
            _ = try await store.ping()
        } throws: { error in
            (error as? RPCError)?.code == .unavailable && (error as? RPCError)?.message.contains("going away") == true
        }
        #expect(accepted.count.withLock { $0 } == 3)
        await store.close()
        try await listener.close()
    }

    @Test("a stream above the go-away's last call id is not sent again: it ends unavailable, saying it was not started")
    func streamNotRetried() async throws {
        let (listener, accepted) = try await Self.listen(refused: 1)
        let store = HealthStore(configuration: HealthStoreConfiguration(port: listener.localAddress!.port!, credential: "hl1:any:x:y"))
        let type = try ObjectType("HKQuantityTypeIdentifierHeartRate")
        await #expect {
            for try await _ in try await store.results(for: SampleQueryDescriptor(type: type)) {}
        } throws: { error in
            (error as? RPCError)?.code == .unavailable && (error as? RPCError)?.message.hasSuffix("; the call was not started") == true
        }
        #expect(accepted.count.withLock { $0 } == 1, "no second connection for the stream")
        // The next call opens a new connection, which answers.
        #expect(try await store.ping().ledgerID == "second-connection")
        await store.close()
        try await listener.close()
    }
}
