import GRPCCore
import GRPCNIOTransportHTTP2
import HealthLedgerServer
import Ledger
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// HealthLedger as standard gRPC over HTTP/2 (docs/PROTOCOL.md §12): `healthledger.v1.Ledger`
/// through the RPC server's dispatch, `grpc.health.v1.Health` and server reflection, on a
/// port of its own beside the RPC server's, with the same address, TLS files and limits.
///
/// ```swift
/// let endpoint = GRPCEndpoint(store: store, configuration: configuration, port: 0, logger: logger)
/// let port = try await endpoint.start()
/// …
/// await endpoint.shutdown()
/// ```
///
/// As a swift-service-lifecycle `Service`, ``run()`` serves until graceful shutdown, then
/// reports `NOT_SERVING`, ends the long-running calls with `UNAVAILABLE`, lets the others
/// finish (up to ``ServerConfiguration/drainTimeout``) and closes.
public final class GRPCEndpoint: Service, Sendable {
    /// The default port: 7412.
    public static let defaultPort = 7412

    private enum State {
        case idle
        case serving(GRPCServer<HTTP2ServerTransport.Posix>, Task<Void, any Error>)
        case stopped
    }

    private let store: LedgerStore
    private let configuration: ServerConfiguration
    private let port: Int
    private let logger: Logger
    private let calls = RunningCalls()
    private let health = HealthService()
    private let state = Mutex(State.idle)

    /// - Parameter port: the gRPC port (0 picks a free one; ``start()`` returns it). Address,
    ///   TLS, limits and deadlines come from `configuration`, as for the RPC server.
    public init(store: LedgerStore, configuration: ServerConfiguration, port: Int = GRPCEndpoint.defaultPort, logger: Logger) {
        self.store = store
        self.configuration = configuration
        self.port = port
        self.logger = logger
    }

    /// The `healthledger.v1.Ledger` calls running now.
    package var callsInFlight: Int { calls.count }

    /// The health Watch calls open now.
    package var healthWatches: Int { health.watches }

    /// Binds the port and serves; returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        let dispatcher = CallDispatcher(store: store, configuration: configuration, logger: logger, metrics: CallMetrics())
        let ledger = LedgerService(dispatcher: dispatcher, calls: calls, maximumRequestSize: configuration.maximumFrameSize)
        let services: [any RegistrableRPCService] = [ledger, health, try ReflectionService()]
        let transport = HTTP2ServerTransport.Posix(
            address: try Self.address(host: configuration.host, port: port), transportSecurity: security(),
            config: .defaults { config in
                // The transport can only reset a stream whose message is too large: up to twice
                // the limit, the message is read, and refused with a status that says why.
                config.rpc.maxRequestPayloadSize = 2 * configuration.maximumFrameSize
                config.http2.maxConcurrentStreams = configuration.maximumConcurrentCalls
                config.connection.maxIdleTime = configuration.idleTimeout
                // Coalescing holds each flush up to 100 µs for more writes to join it: a unary
                // call's answer waited for it twice over (ping ×9 our protocol's), for a gain in
                // throughput only under many small streams, which the event loop's own batching
                // of a read's answers already gives.
                config.connection.flushCoalescing = nil
            })
        let server = GRPCServer(transport: transport, services: services)
        let serving = Task { try await server.serve() }
        state.withLock { $0 = .serving(server, serving) }
        let bound: Int
        do {
            let address = try await transport.listeningAddress
            guard let port = address.ipv4?.port ?? address.ipv6?.port else {
                throw RPCError(code: .internalError, message: "the gRPC endpoint is bound to neither an IPv4 nor an IPv6 address")
            }
            bound = port
        } catch {
            // The bind failed: serve() says why.
            server.beginGracefulShutdown()
            state.withLock { $0 = .stopped }
            let cause: any Error = if case .failure(let failure) = await serving.result { failure } else { error }
            throw EndpointFailure("the gRPC port \(port) on \(configuration.host) cannot be served (--grpc-port): \(cause)")
        }
        logger.info("listening (gRPC)", metadata: ["address": "\(configuration.host):\(bound)", "tls": "\(configuration.tls != nil)"])
        return bound
    }

    public func run() async throws {
        if case .idle = state.withLock({ $0 }) { try await start() }
        // Cancellation ends the wait with an error; the shutdown happens either way.
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Reports `NOT_SERVING`, refuses new calls, ends the long-running ones, waits for the
    /// others up to the drain timeout (then cancels them), and closes.
    public func shutdown() async {
        let running: (GRPCServer<HTTP2ServerTransport.Posix>, Task<Void, any Error>)? = state.withLock { state in
            guard case .serving(let server, let task) = state else { return nil }
            state = .stopped
            return (server, task)
        }
        guard let (server, serving) = running else { return }
        health.stopServing()
        // New calls refused first, so that no long-running call starts after the next line.
        server.beginGracefulShutdown()
        calls.endLongRunning()
        let drainTimeout = configuration.drainTimeout
        let calls = calls
        let logger = logger
        let overdue = Task {
            guard (try? await Task.sleep(for: drainTimeout)) != nil else { return }
            logger.warning("gRPC calls still running after the drain timeout; closing them")
            calls.cancelAll()
            // What no call of ours holds (a reflection stream, a request never finished): the
            // server stops at once.
            serving.cancel()
        }
        _ = await serving.result
        overdue.cancel()
        logger.info("stopped (gRPC)")
    }

    private func security() -> HTTP2ServerTransport.Posix.TransportSecurity {
        guard let tls = configuration.tls else { return .plaintext }
        return .tls(certificateChain: [.file(path: tls.certificateChain, format: .pem)], privateKey: .file(path: tls.privateKey, format: .pem))
    }

    /// The address to bind: the host's (a name is resolved, as the RPC server does).
    private static func address(host: String, port: Int) throws -> GRPCNIOTransportCore.SocketAddress {
        let resolved = try NIOCore.SocketAddress.makeAddressResolvingHost(host, port: port)
        switch resolved {
        case .v6: return .ipv6(host: resolved.ipAddress ?? host, port: port)
        default: return .ipv4(host: resolved.ipAddress ?? host, port: port)
        }
    }
}

/// Why the gRPC endpoint could not start, naming its port.
struct EndpointFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
