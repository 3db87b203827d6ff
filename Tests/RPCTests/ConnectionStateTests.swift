import Foundation
import HealthLedgerRPC
import HealthModel
import HealthLedgerServer
import Ledger
import LedgerSchema
import Logging
import NIOCore
import NIOEmbedded
import SwiftProtobuf
import Synchronization
import Testing

/// The connection's states and transitions, driven frame by frame on a testing channel (no
/// socket): the handler with a real store and dispatcher, its frames read as they leave.
@Suite("Connection state", .timeLimit(.minutes(2)))
struct ConnectionStateTests {
    /// A connection handler on a testing channel, over a new store with one ledger.
    final class Connection: Sendable {
        let channel: NIOAsyncTestingChannel
        let credential: String
        let directory: URL
        let ledger: Ledger

        init(maximumCalls: Int = 128) async throws {
            directory = FileManager.default.temporaryDirectory.appending(path: "connection-state-\(UUID().uuidString)")
            let store = try LedgerStore(directory: directory)
            ledger = try store.createLedger(id: "state")
            credential = try await ledger.issueCredential(for: .owner)
            let logger = {
                var logger = Logger(label: "test")
                logger.logLevel = .critical
                return logger
            }()
            let dispatcher = CallDispatcher(store: store, configuration: ServerConfiguration(port: 0), logger: logger, metrics: CallMetrics())
            channel = try await NIOAsyncTestingChannel { channel in
                try channel.pipeline.syncOperations.addHandler(ServerConnectionHandler(
                    dispatcher: dispatcher, maximumConcurrentCalls: maximumCalls, idleTimeout: .seconds(300), logger: logger, onClose: { _ in }))
            }
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).get()
        }

        func request(_ id: UInt64, _ method: RPCMethod, _ message: some SwiftProtobuf.Message, window: UInt32 = 0) async throws {
            let frame = Healthledger_V1_Frame.request(
                id: id, method: method, credential: credential, payload: try message.serializedBytes(), window: window)
            try await channel.writeInbound(InboundFrame.frame(frame))
        }

        func ping(_ id: UInt64) async throws { try await request(id, .ping, Healthledger_V1_PingRequest()) }

        /// Opens a watched change query: a call that stays open until cancelled.
        func watch(_ id: UInt64) async throws {
            try await request(id, .watchChanges, Healthledger_V1_ChangeQueryRequest.with { $0.type = "HKQuantityTypeIdentifierHeartRate" })
        }

        func cancel(_ id: UInt64) async throws {
            var frame = Healthledger_V1_Frame()
            frame.callID = id
            frame.cancel = .init()
            try await channel.writeInbound(InboundFrame.frame(frame))
        }

        /// Frames of a write not read yet (a call's response and status leave in one write).
        private let unread = Mutex<[Healthledger_V1_Frame]>([])

        /// The next frame the handler wrote.
        func next() async throws -> Healthledger_V1_Frame {
            if let frame = unread.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return frame }
            var bytes = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
            var decoder = FrameDecoder()
            var frames: [Healthledger_V1_Frame] = []
            while let decoded = try decoder.decode(buffer: &bytes) {
                guard case .frame(let frame) = decoded else { throw FrameError.truncated(missing: 0) }
                frames.append(frame)
            }
            #expect(bytes.readableBytes == 0 && !frames.isEmpty, "a write holds whole frames")
            let first = frames.removeFirst()
            unread.withLock { $0 += frames }
            return first
        }

        /// The next frame that is not one of `id`'s messages.
        func nextSkippingMessages() async throws -> Healthledger_V1_Frame {
            while true {
                let frame = try await next()
                if case .message = frame.kind { continue }
                return frame
            }
        }

        func drain() async throws {
            let promise = channel.eventLoop.makePromise(of: Void.self)
            try await channel.eventLoop.submit { [channel] in
                try channel.pipeline.syncOperations.handler(type: ServerConnectionHandler.self).drain(promise: promise)
            }.get()
        }

        func finish() async {
            _ = try? await channel.finish()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    static func status(_ frame: Healthledger_V1_Frame) -> Healthledger_V1_CallStatus? {
        guard case .status(let status) = frame.kind else { return nil }
        return status
    }

    @Test("call id 0 is refused on call 0 and the connection stays active; a ping is answered with its message and status")
    func callZero() async throws {
        let connection = try await Connection()
        try await connection.ping(0)
        let refused = try await connection.next()
        #expect(refused.callID == 0)
        #expect(Self.status(refused)?.code.rawValue == RPCStatusCode.invalidArgument.rawValue)
        #expect(Self.status(refused)?.message == "call id 0 is reserved")
        try await connection.ping(1)
        let message = try await connection.next()
        #expect(message.callID == 1)
        guard case .message = message.kind else { Issue.record("expected the ping's response, got \(message)"); return }
        let status = try await connection.next()
        #expect(status.callID == 1 && Self.status(status)?.code.rawValue == 0)
        #expect(connection.channel.isActive)
        await connection.finish()
    }

    @Test("a request on the id of a running call is refused on call 0; the running call keeps its id and ends with its own status")
    func duplicateID() async throws {
        let connection = try await Connection()
        try await connection.watch(5)
        let first = try await connection.next()
        #expect(first.callID == 5)
        try await connection.ping(5)
        let refused = try await connection.nextSkippingMessages()
        #expect(refused.callID == 0)
        #expect(Self.status(refused)?.message == "call id 5 is already in use")
        try await connection.cancel(5)
        let ended = try await connection.nextSkippingMessages()
        #expect(ended.callID == 5)
        #expect(Self.status(ended)?.code.rawValue == RPCStatusCode.cancelled.rawValue)
        await connection.finish()
    }

    @Test("a frame kind a client may not send (or none) is refused on call 0, also on a running call's id: that call ends with its own status alone")
    func serverOnlyKinds() async throws {
        let connection = try await Connection()
        try await connection.watch(5)
        #expect(try await connection.next().callID == 5)
        var message = Healthledger_V1_Frame()
        message.callID = 5
        message.message = Data([1, 2, 3])
        var status = Healthledger_V1_Frame.status(id: 5, nil)
        status.callID = 5
        var empty = Healthledger_V1_Frame()
        empty.callID = 9
        for (frame, id) in [(message, 5), (status, 5), (empty, 9)] {
            try await connection.channel.writeInbound(InboundFrame.frame(frame))
            let refused = try await connection.nextSkippingMessages()
            #expect(refused.callID == 0)
            #expect(Self.status(refused)?.code.rawValue == RPCStatusCode.invalidArgument.rawValue)
            #expect(Self.status(refused)?.message == "a client may not send this frame (on call \(id))")
        }
        try await connection.cancel(5)
        let ended = try await connection.nextSkippingMessages()
        #expect(ended.callID == 5)
        #expect(Self.status(ended)?.code.rawValue == RPCStatusCode.cancelled.rawValue)
        #expect(connection.channel.isActive)
        await connection.finish()
    }

    @Test("beyond the call limit a call is refused on its own id; a freed slot takes the next call")
    func callLimit() async throws {
        let connection = try await Connection(maximumCalls: 2)
        try await connection.watch(1)
        try await connection.watch(2)
        _ = try await connection.next()
        _ = try await connection.next()
        try await connection.ping(3)
        let refused = try await connection.nextSkippingMessages()
        #expect(refused.callID == 3)
        #expect(Self.status(refused)?.code.rawValue == RPCStatusCode.resourceExhausted.rawValue)
        #expect(Self.status(refused)?.message == "2 calls are already open on this connection, its limit")
        try await connection.cancel(1)
        #expect(try await connection.nextSkippingMessages().callID == 1)
        try await connection.ping(4)
        let taken = try await connection.nextSkippingMessages()
        #expect(taken.callID == 4 && Self.status(taken)?.code.rawValue == RPCStatusCode.ok.rawValue, "the freed slot took the ping: \(taken)")
        await connection.finish()
    }

    @Test("drain: a go-away naming the last call, long-running calls end unavailable, new calls are refused, then the connection closes")
    func drain() async throws {
        let connection = try await Connection()
        try await connection.ping(1)
        _ = try await connection.next()
        _ = try await connection.next()
        try await connection.watch(2)
        _ = try await connection.next()
        try await connection.drain()
        let goAway = try await connection.next()
        guard case .goAway(let away) = goAway.kind else { Issue.record("expected a go-away, got \(goAway)"); return }
        #expect(goAway.callID == 0 && away.lastCallID == 2 && away.reason == "the server is shutting down")
        let ended = try await connection.nextSkippingMessages()
        #expect(ended.callID == 2)
        #expect(Self.status(ended)?.code.rawValue == RPCStatusCode.unavailable.rawValue)
        try await connection.channel.closeFuture.get()
        await connection.finish()
    }

    @Test("drain with a call in flight: new requests get unavailable, the call runs to its status, then the connection closes")
    func drainWaitsForCalls() async throws {
        let connection = try await Connection()
        let type = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        _ = try await connection.ledger.save((0..<5).map { index in
            .quantitySample(QuantitySample(
                type: type, quantity: Quantity(60, try! HealthUnit("count/min")), start: start.addingTimeInterval(Double(index)),
                end: start.addingTimeInterval(Double(index))))
        }, by: .owner)
        // A query of 5 batches of 1, with a window of 1: it waits for the client after its first.
        try await connection.request(
            1, .querySamples, Healthledger_V1_SampleQueryRequest.with { $0.type = type.identifier; $0.batchSize = 1 }, window: 1)
        #expect(try await connection.next().callID == 1)
        try await connection.drain()
        let goAway = try await connection.next()
        guard case .goAway(let away) = goAway.kind else { Issue.record("expected a go-away, got \(goAway)"); return }
        #expect(away.lastCallID == 1)
        try await connection.ping(2)
        let refused = try await connection.next()
        #expect(refused.callID == 2)
        #expect(Self.status(refused)?.code.rawValue == RPCStatusCode.unavailable.rawValue)
        // The running call's id, reused while draining: refused on call 0, not on the call's id.
        try await connection.ping(1)
        let reused = try await connection.next()
        #expect(reused.callID == 0)
        #expect(Self.status(reused)?.message == "call id 1 is already in use")
        #expect(connection.channel.isActive)
        var update = Healthledger_V1_Frame()
        update.callID = 1
        update.windowUpdate = .with { $0.messages = 10 }
        try await connection.channel.writeInbound(InboundFrame.frame(update))
        var messages = 1
        while true {
            let frame = try await connection.next()
            #expect(frame.callID == 1)
            if let status = Self.status(frame) {
                #expect(status.code.rawValue == 0)
                break
            }
            messages += 1
        }
        #expect(messages == 5)
        try await connection.channel.closeFuture.get()
        await connection.finish()
    }

    @Test("idle: with a call open the connection stays; with none, idle for the timeout from the call's end, a go-away naming the last call, then close")
    func idleClose() async throws {
        let connection = try await Connection()
        let loop = connection.channel.testingEventLoop
        try await connection.watch(7)
        _ = try await connection.next()
        // The idle timeout (300 s, on the test loop's clock) passes twice with the call open.
        await loop.advanceTime(by: .seconds(301))
        await loop.advanceTime(by: .seconds(301))
        #expect(connection.channel.isActive)
        try await connection.cancel(7)
        #expect(try await connection.nextSkippingMessages().callID == 7)
        // Idle from the call's end: not yet closed just short of the timeout.
        await loop.advanceTime(by: .seconds(299))
        #expect(connection.channel.isActive)
        await loop.advanceTime(by: .seconds(2))
        let goAway = try await connection.next()
        guard case .goAway(let away) = goAway.kind else { Issue.record("expected a go-away, got \(goAway)"); return }
        #expect(away.lastCallID == 7)
        #expect(away.reason.hasPrefix("the connection was idle"))
        try await connection.channel.closeFuture.get()
        await connection.finish()
    }

    @Test("the state's transitions: half-close drains, ended calls close a draining connection, a closed one ignores requests")
    func transitions() {
        var state = ConnectionState(maximumCalls: 2)
        #expect(state.admit(1) == .start)
        #expect(state.admit(2) == .start)
        #expect(state.admit(3) == .refuse(callID: 3, RPCError(.resourceExhausted, "2 calls are already open on this connection, its limit")))
        #expect(state.ended(1) == false)
        #expect(state.inputClosed() == false)
        #expect(state.phase == .draining)
        #expect(state.admit(4) == .refuse(callID: 4, RPCError(.unavailable, "the server is shutting down")))
        #expect(state.admit(2) == .refuse(callID: 0, RPCError(.invalidArgument, "call id 2 is already in use")))
        #expect(state.ended(2) == true)
        #expect(state.phase == .closed)
        #expect(state.admit(5) == .ignore)
        #expect(state.admit(0) == .ignore, "a closing connection answers nothing, not even call id 0")
        #expect(state.drain(reason: "x") == nil)

        var idle = ConnectionState(maximumCalls: 8)
        #expect(idle.admit(9) == .start)
        #expect(idle.idle(reason: "idle") == nil)
        _ = idle.ended(9)
        #expect(idle.idle(reason: "idle")?.goAway.lastCallID == 9)
        #expect(idle.admit(10) == .ignore)
        #expect(idle.admit(0) == .ignore)
    }
}
