import HealthLedgerRPC
import Ledger
import Logging
import Metrics
import NIOCore
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

/// The HealthLedger RPC server: accepts connections, serves `healthledger.v1.Ledger`
/// calls on the ledgers of a ``Ledger/LedgerStore``, and drains gracefully.
///
/// ```swift
/// let server = RPCServer(store: store, configuration: .init(port: 0), logger: logger)
/// let address = try await server.start()
/// …
/// await server.shutdown()
/// ```
///
/// As a swift-service-lifecycle `Service`, ``run()`` serves until graceful shutdown, then
/// refuses new calls with `unavailable`, lets the calls in flight finish (up to
/// ``ServerConfiguration/drainTimeout``) and closes.
public final class RPCServer: Service, Sendable {
    private enum State {
        case idle
        /// Its TCP listener, and its Unix domain socket listener when configured, with the
        /// identity of the socket file it bound.
        case running(any Channel, unix: (channel: any Channel, file: (device: UInt64, inode: UInt64))?)
        case stopped
    }

    public let configuration: ServerConfiguration
    private let store: LedgerStore
    private let logger: Logger
    /// The event loops the server runs on; the caller's, which the server never shuts down.
    private let group: any EventLoopGroup
    private let state = Mutex(State.idle)
    private let connections = ConnectionRegistry()

    /// - Parameter group: the event loops to serve on, NIO's shared singleton by default; the
    ///   server uses them and leaves them running when it stops.
    public init(
        store: LedgerStore, configuration: ServerConfiguration = .init(), logger: Logger = Logger(label: "healthledgerd"),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        self.group = group
    }

    /// The address the server listens on, while it does.
    public var localAddress: SocketAddress? {
        guard case .running(let channel, _) = state.withLock({ $0 }) else { return nil }
        return channel.localAddress
    }

    /// Binds the listening socket (and the Unix domain socket, when configured) and returns
    /// its address (read the port from it when the configuration asked for port 0).
    ///
    /// - Throws: ``ListenerFailure`` when the Unix domain socket cannot be listened on.
    @discardableResult
    public func start() async throws -> SocketAddress {
        let sslContext = try configuration.tls.map { files in
            try NIOSSLContext(configuration: .makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(files.certificateChain).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: files.privateKey, format: .pem))))
        }
        let dispatcher = CallDispatcher(store: store, configuration: configuration, logger: logger, metrics: CallMetrics())
        let configuration = configuration
        let logger = logger
        let connections = connections
        /// Sets up a connection's pipeline; TLS only over TCP.
        @Sendable func serve(_ channel: any Channel, tls sslContext: NIOSSLContext?) -> EventLoopFuture<Void> {
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(FrameDecoder(maximumFrameSize: configuration.maximumFrameSize)))
                    let handler = ServerConnectionHandler(
                        dispatcher: dispatcher, maximumConcurrentCalls: configuration.maximumConcurrentCalls, idleTimeout: configuration.idleTimeout,
                        logger: logger, onClose: { id in connections.remove(id) })
                    try channel.pipeline.syncOperations.addHandler(handler)
                    connections.add(NIOLoopBound(handler, eventLoop: channel.eventLoop))
                }
        }
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            // A client's half-close still gets answers: the statuses of its running calls, or
            // the go-away that names a frame it cut short.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { serve($0, tls: sslContext) }
            .bind(host: configuration.host, port: configuration.port)
            .get()
        var unix: (channel: any Channel, file: (device: UInt64, inode: UInt64))?
        var bound: (any Channel)?
        do {
            if let socket = configuration.unixSocket {
                try UnixSocketListener.prepare(socket)
                let listener = try await ServerBootstrap(group: group)
                    .serverChannelOption(.backlog, value: 256)
                    .childChannelOption(.maxMessagesPerRead, value: 16)
                    .childChannelOption(.allowRemoteHalfClosure, value: true)
                    .childChannelInitializer { serve($0, tls: nil) }
                    .bind(unixDomainSocketPath: socket.path)
                    .get()
                bound = listener
                unix = (listener, try UnixSocketListener.permit(socket))
            }
        } catch {
            if let bound, let socket = configuration.unixSocket {
                try? await bound.close()
                UnixSocketListener.remove(socket, bound: nil)
            }
            try? await channel.close()
            throw (error as? ListenerFailure) ?? ListenerFailure(socket: configuration.unixSocket?.path ?? "", error)
        }
        state.withLock { $0 = .running(channel, unix: unix) }
        logger.info("listening", metadata: ["address": "\(channel.localAddress.map { "\($0)" } ?? "?")", "tls": "\(configuration.tls != nil)"])
        if let path = configuration.unixSocket?.path { logger.info("listening", metadata: ["unix_socket": "\(path)"]) }
        return channel.localAddress!
    }

    /// Serves until graceful shutdown is triggered, or the task is cancelled, then drains
    /// and closes: the listener and every connection are closed when it returns.
    public func run() async throws {
        if case .idle = state.withLock({ $0 }) { try await start() }
        // Cancellation ends the wait with an error; the shutdown happens either way.
        try? await gracefulShutdown()
        await shutdown()
    }

    /// The connections open now.
    public var openConnections: Int { connections.count }

    /// Stops accepting, refuses new calls, waits for calls in flight, and closes.
    public func shutdown() async {
        let listeners: (tcp: any Channel, unix: (channel: any Channel, file: (device: UInt64, inode: UInt64))?)? = state.withLock { state in
            guard case .running(let channel, let unix) = state else { return nil }
            state = .stopped
            return (channel, unix)
        }
        guard let listeners else { return }
        try? await listeners.tcp.close()
        if let unix = listeners.unix {
            try? await unix.channel.close()
            if let socket = configuration.unixSocket { UnixSocketListener.remove(socket, bound: unix.file) }
        }
        let open = connections.all
        let drains = open.map { bound in
            let promise = bound.eventLoop.makePromise(of: Void.self)
            bound.eventLoop.execute { bound.value.drain(promise: promise) }
            return promise.futureResult
        }
        let all = EventLoopFuture.andAllComplete(drains, on: group.next())
        let finished = await Self.completes(all, within: configuration.drainTimeout, on: group.next())
        if !finished {
            logger.warning("calls still running after the drain timeout; closing them")
            for bound in connections.all {
                bound.eventLoop.execute { bound.value.forceClose() }
            }
        }
        logger.info("stopped")
    }

    /// Whether `future` completes before `timeout` passes (never waits longer).
    private static func completes(_ future: EventLoopFuture<Void>, within timeout: Duration, on loop: any EventLoop) async -> Bool {
        await withCheckedContinuation { continuation in
            let once = Once()
            let finish: @Sendable (Bool) -> Void = { value in
                if once.claim() { continuation.resume(returning: value) }
            }
            future.whenComplete { _ in finish(true) }
            loop.scheduleTask(in: TimeAmount(timeout)) {
                finish(false)
            }
        }
    }
}

/// True for the first caller of ``claim()`` only.
private final class Once: Sendable {
    private let done = Mutex(false)

    func claim() -> Bool {
        done.withLock { done in
            defer { done = true }
            return !done
        }
    }
}

/// The open connections, for draining, counted in the `healthledger_open_connections` gauge.
private final class ConnectionRegistry: Sendable {
    private let entries = Mutex<[ObjectIdentifier: NIOLoopBound<ServerConnectionHandler>]>([:])
    private let gauge = Gauge(label: "healthledger_open_connections")

    func add(_ handler: NIOLoopBound<ServerConnectionHandler>) {
        let id = handler.eventLoop.inEventLoop ? ObjectIdentifier(handler.value) : nil
        guard let id else { return }
        let count = entries.withLock { entries in
            entries[id] = handler
            return entries.count
        }
        gauge.record(count)
    }

    func remove(_ id: ObjectIdentifier) {
        let count = entries.withLock { entries in
            entries.removeValue(forKey: id)
            return entries.count
        }
        gauge.record(count)
    }

    var all: [NIOLoopBound<ServerConnectionHandler>] { entries.withLock { Array($0.values) } }
    var count: Int { entries.withLock { $0.count } }
}
