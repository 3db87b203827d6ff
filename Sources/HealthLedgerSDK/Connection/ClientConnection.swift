import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HealthLedgerRPC
import LedgerSchema
import NIOCore
import SwiftProtobuf
import NIOPosix
import NIOSSL
import Synchronization

/// One connection to a server, carrying many calls.
final class ClientConnection: Sendable {
    let channel: any Channel
    let calls: CallTable
    private let outbound: OutboundFrames

    private init(channel: any Channel, calls: CallTable) {
        self.channel = channel
        self.calls = calls
        outbound = OutboundFrames(channel: channel, calls: calls)
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    static func connect(_ configuration: HealthStoreConfiguration, group: any EventLoopGroup) async throws -> ClientConnection {
        if let path = configuration.unixSocketPath {
            guard !path.isEmpty else { throw RPCError(.invalidArgument, "'unix:' names no socket file: unix:PATH") }
            guard configuration.tls == nil else {
                throw RPCError(.invalidArgument, "TLS is not offered on a Unix domain socket (unix:\(path)): connect without it")
            }
        } else if !(1...65535).contains(configuration.port) {
            throw RPCError(.invalidArgument, "cannot connect to port \(configuration.port): a TCP port is 1 to 65535")
        }
        let calls = CallTable()
        let sslContext = try configuration.tls.map { tls in
            var settings = TLSConfiguration.makeClientConfiguration()
            if let roots = tls.trustRoots {
                settings.trustRoots = .file(roots)
            }
            if !tls.verifyHostname { settings.certificateVerification = .noHostnameVerification }
            return try NIOSSLContext(configuration: settings)
        }
        let host = configuration.host
        // The name checked against the certificate: the one asked for, else the host's DNS
        // name; an IP address is checked against the certificate's IP addresses.
        let serverName = configuration.tls?.serverName ?? (Self.isIPAddress(host) ? nil : host)
        let maximumFrameSize = configuration.maximumFrameSize
        let keepalive = configuration.keepaliveInterval.map(TimeAmount.init)
        let pongTimeout = (configuration.keepaliveTimeout ?? configuration.keepaliveInterval).map(TimeAmount.init)
        let unixSocket = configuration.unixSocketPath
        do {
            var bootstrap = ClientBootstrap(group: group)
                .connectTimeout(.seconds(5))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(
                                try NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                        }
                        if let keepalive { try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: keepalive)) }
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(ResponseFrameDecoder(maximumFrameSize: maximumFrameSize)))
                        try channel.pipeline.syncOperations.addHandler(ClientFrameHandler(calls: calls, pongTimeout: pongTimeout))
                    }
                }
            // TCP only (a Unix domain socket has no Nagle delay to turn off).
            if unixSocket == nil { bootstrap = bootstrap.channelOption(.socketOption(.tcp_nodelay), value: 1) }
            // IP literals connect directly; names go through the resolver.
            let channel = try await (
                unixSocket.map { bootstrap.connect(unixDomainSocketPath: $0) }
                    ?? (try? SocketAddress(ipAddress: configuration.host, port: configuration.port)).map { bootstrap.connect(to: $0) }
                    ?? bootstrap.connect(host: configuration.host, port: configuration.port)
            ).get()
            return ClientConnection(channel: channel, calls: calls)
        } catch {
            let server = unixSocket == nil ? "\(configuration.host):\(configuration.port)" : configuration.host
            throw RPCError(.unavailable, "cannot connect to \(server): \(error)", cause: error)
        }
    }

    var isUsable: Bool { channel.isActive && !calls.isClosed }

    /// A unary call: one request, one response message.
    func unary(_ method: RPCMethod, _ payload: [UInt8], credential: String, timeout: Duration, asOf: PointInTime? = nil) async throws -> [UInt8] {
        let id = try calls.reserve()
        let request = CallRequestFrame(
            id: id, method: method, credential: credential, payload: payload, timeoutMilliseconds: Self.milliseconds(timeout), asOf: asOf)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                calls.registerUnary(id, continuation)
                outbound.send(request)
            }
        } onCancel: {
            cancel(id)
        }
    }

    /// A server-streaming call; the stream grants the server one more message each time
    /// the consumer takes one, and cancels the call when the consumer stops early.
    ///
    /// - Parameter timeout: the call's deadline; nil for none (long-running calls only).
    func stream(_ method: RPCMethod, _ payload: [UInt8], credential: String, timeout: Duration?, window: UInt32 = 16, asOf: PointInTime? = nil) throws
        -> (id: UInt64, stream: AsyncThrowingStream<[UInt8], any Error>)
    {
        let id = try calls.reserve()
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        calls.registerStream(id, continuation)
        continuation.onTermination = { [weak self] termination in
            if case .cancelled = termination { self?.cancel(id) }
        }
        outbound.send(
            CallRequestFrame(
                id: id, method: method, credential: credential, payload: payload, timeoutMilliseconds: timeout.map(Self.milliseconds) ?? 0,
                window: window, asOf: asOf))
        return (id, stream)
    }

    /// Grants the server `messages` more messages on call `id`.
    func grant(_ id: UInt64, _ messages: UInt32) {
        var frame = Healthledger_V1_Frame()
        frame.callID = id
        frame.windowUpdate = .with { $0.messages = messages }
        outbound.send(frame)
    }

    func cancel(_ id: UInt64) {
        var frame = Healthledger_V1_Frame()
        frame.callID = id
        frame.cancel = .init()
        outbound.send(frame)
        calls.abandon(id, with: RPCError(.cancelled, "the call was cancelled"))
    }

    func close() async {
        calls.close(RPCError(.unavailable, "the store was closed"), failOpen: true)
        try? await channel.close()
    }

    static func milliseconds(_ duration: Duration) -> UInt32 {
        let ms = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return UInt32(clamping: max(ms, 1))
    }
}

/// Frames the calls' tasks send, handed to the event loop together: however many calls
/// send while the loop is busy, it wakes once and writes them with one flush. One queue
/// for every frame keeps each call's frames in the order they were sent.
final class OutboundFrames: Sendable {
    /// A call's request (written directly), or another frame.
    private enum Outbound {
        case request(CallRequestFrame)
        case frame(Healthledger_V1_Frame)
    }

    private struct Pending {
        var frames: [Outbound] = []
        var scheduled = false
    }

    private let channel: any Channel
    private let calls: CallTable
    private let pending = Mutex(Pending())

    init(channel: any Channel, calls: CallTable) {
        self.channel = channel
        self.calls = calls
    }

    /// Queues a call's request; if it cannot be written, the call fails.
    func send(_ request: CallRequestFrame) { enqueue(.request(request)) }

    /// Queues a frame that is not a call's request (a window update, a cancel).
    func send(_ frame: Healthledger_V1_Frame) { enqueue(.frame(frame)) }

    private func enqueue(_ outbound: Outbound) {
        let schedule = pending.withLock { pending in
            pending.frames.append(outbound)
            defer { pending.scheduled = true }
            return !pending.scheduled
        }
        guard schedule else { return }
        // A caller already on the loop (a task preferring the store's executor) writes now.
        if channel.eventLoop.inEventLoop { write() } else { channel.eventLoop.execute(write) }
    }

    /// On the event loop: writes what is queued as one buffer, and flushes it. If the write
    /// fails, every call whose request it held fails.
    private func write() {
        let frames = pending.withLock { pending in
            defer { pending = Pending() }
            return pending.frames
        }
        var buffer = channel.allocator.buffer(capacity: frames.reduce(0) { $0 + Self.sizeEstimate(of: $1) })
        var requests: [UInt64] = []
        for outbound in frames {
            switch outbound {
            case .request(let request):
                buffer.writeRequestFrame(request)
                requests.append(request.id)
            case .frame(let frame):
                buffer.writeFrame(frame)
            }
        }
        let written = channel.writeAndFlush(buffer)
        guard !requests.isEmpty else { return }
        written.whenFailure { [calls, requests] error in
            for call in requests { calls.abandon(call, with: RPCError(.unavailable, "the connection failed: \(error)", cause: error)) }
        }
    }
}

extension OutboundFrames {
    /// About the bytes `outbound` takes in a frame, so that a buffer of several is
    /// allocated once.
    private static func sizeEstimate(of outbound: Outbound) -> Int {
        switch outbound {
        case .request(let request): 96 + request.method.rawValue.utf8.count + request.credential.utf8.count + request.payload.count
        case .frame: 32
        }
    }
}

/// Routes the server's frames to the calls.
final class ClientFrameHandler: ChannelInboundHandler {
    typealias InboundIn = ResponseFrame
    typealias OutboundOut = ByteBuffer

    private let calls: CallTable
    /// How long a keepalive ping may go unanswered.
    private let pongTimeout: TimeAmount?
    /// A keepalive ping is out and nothing has come back yet: when this fires, the
    /// connection is taken for dead.
    private var pongDeadline: Scheduled<Void>?

    init(calls: CallTable, pongTimeout: TimeAmount?) {
        self.calls = calls
        self.pongTimeout = pongTimeout
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is IdleStateHandler.IdleStateEvent else { return context.fireUserInboundEventTriggered(event) }
        // One ping at a time: while one is out, its deadline decides.
        guard pongDeadline == nil, let pongTimeout else { return }
        var ping = Healthledger_V1_Frame()
        ping.ping = .with { $0.nonce = UInt64.random(in: 1...UInt64.max) }
        var bytes = context.channel.allocator.buffer(capacity: 32)
        bytes.writeFrame(ping)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
        let channel = context.channel
        let calls = calls
        pongDeadline = context.eventLoop.scheduleTask(in: pongTimeout) {
            calls.close(RPCError(.unavailable, "the server did not answer a keepalive ping"), failOpen: true)
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        pongDeadline?.cancel()
        pongDeadline = nil
        let frame: Healthledger_V1_Frame
        switch unwrapInboundIn(data) {
        case .message(let id, let payload): return calls.deliver(message: payload, to: id)
        case .status(let id, let error): return calls.finish(id, with: error)
        case .other(.frame(let other)): frame = other
        case .other(.malformed): return
        }
        if case .goAway(let goAway) = frame.kind {
            // No new calls on this connection; the open ones may still finish, those above
            // the last call id never started.
            calls.goAway(lastCallID: goAway.lastCallID, reason: goAway.reason)
            return
        }
        calls.deliver(frame)
    }

    func channelInactive(context: ChannelHandlerContext) {
        pongDeadline?.cancel()
        pongDeadline = nil
        calls.close(RPCError(.unavailable, "the connection closed"), failOpen: true)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        calls.close(RPCError(.unavailable, "the connection failed: \(error)"), failOpen: true)
        context.close(promise: nil)
    }
}
