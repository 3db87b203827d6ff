import Foundation
import HealthLedgerSDK
import HealthLedgerServer
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization

/// The owner's web app (Hummingbird 2), on a port of its own beside the RPC server: sign in
/// with the owner credential, then a session cookie (HttpOnly, SameSite=Strict, Secure over
/// TLS) that expires; every form carries a CSRF token; failed sign-ins are throttled; apps'
/// credentials are refused. The pages call the ledger through the SDK, against the RPC
/// server's own port, with the owner's credential.
///
/// ```swift
/// let web = WebEndpoint(configuration: configuration, rpcPort: rpcPort, port: 0, logger: logger)
/// let port = try await web.start()
/// …
/// await web.shutdown()
/// ```
public final class WebEndpoint: Service, Sendable {
    /// The default port: 7413.
    public static let defaultPort = 7413
    /// The longest a connection may send nothing, idle between requests or stalled inside
    /// one (a request's body that stops coming): it is then closed, so that connections held
    /// open on purpose cannot pile up. The RPC server's `--idle-timeout` when shorter. A
    /// response under way (the live history) is not idle.
    public static let longestIdleTime = Duration.seconds(30)

    private let configuration: HealthLedgerServer.ServerConfiguration
    private let rpcPort: Int
    private let port: Int
    private let logger: Logger
    private let sessions: WebSessions
    private let state = Mutex<(task: Task<Void, any Error>?, group: ServiceGroup?)>((nil, nil))

    /// - Parameters:
    ///   - configuration: the RPC server's (its address and TLS files serve the web app too).
    ///   - rpcPort: the RPC server's bound port, which the pages' SDK calls reach.
    ///   - port: the web app's port (0 picks a free one; ``start()`` returns it).
    ///   - sessionLifetime: how long a session lasts at most (12 hours by default).
    public init(configuration: HealthLedgerServer.ServerConfiguration, rpcPort: Int, port: Int = WebEndpoint.defaultPort, sessionLifetime: Duration = .seconds(12 * 3600), logger: Logger) {
        self.configuration = configuration
        self.rpcPort = rpcPort
        self.port = port
        self.logger = logger
        sessions = WebSessions(lifetime: Double(sessionLifetime.components.seconds))
    }

    /// The signed-in sessions now.
    package var openSessions: Int { sessions.count }

    /// Binds the port and serves; returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        let router = Router(context: WebContext.self)
        routes().register(on: router)
        let (bound, resolve) = AsyncStream.makeStream(of: Int.self)
        let server: HTTPServerBuilder
        let http1 = HTTP1Channel.Configuration(idleTimeout: TimeAmount(min(configuration.idleTimeout, Self.longestIdleTime)))
        if let tls = configuration.tls {
            let certificates = try NIOSSLCertificate.fromPEMFile(tls.certificateChain).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: tls.privateKey, format: .pem)
            server = try .tls(.http1(configuration: http1), tlsConfiguration: .makeServerConfiguration(certificateChain: certificates, privateKey: .privateKey(key)))
        } else {
            server = .http1(configuration: http1)
        }
        let application = Application(
            router: router, server: server, configuration: .init(address: .hostname(configuration.host, port: port), serverName: "HealthLedger"),
            onServerRunning: { channel in
                resolve.yield(channel.localAddress?.port ?? 0)
                resolve.finish()
            }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        let task = Task {
            // However the server ends, the wait below for its port ends too.
            defer { resolve.finish() }
            try await group.run()
        }
        state.withLock { $0 = (task, group) }
        var iterator = bound.makeAsyncIterator()
        guard let bound = await iterator.next() else {
            // The server stopped before it listened: the group's error says why.
            state.withLock { $0 = (nil, nil) }
            let cause = if case .failure(let failure) = await task.result { "\(failure)" } else { "it stopped before it listened" }
            throw WebEndpointFailure("the web app's port \(port) on \(configuration.host) cannot be served (--web-port): \(cause)")
        }
        let port = bound
        logger.info("listening (web)", metadata: ["address": "\(configuration.host):\(port)", "tls": "\(configuration.tls != nil)"])
        return port
    }

    public func run() async throws {
        if state.withLock({ $0.task }) == nil { try await start() }
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Stops serving and signs everyone out.
    public func shutdown() async {
        let (task, group) = state.withLock { state in
            defer { state = (nil, nil) }
            return state
        }
        guard let task, let group else { return }
        // Signing everyone out first closes their clients, which ends the pages' live streams:
        // Hummingbird waits for every response to finish.
        sessions.endAll()
        await group.triggerGracefulShutdown()
        let drainTimeout = configuration.drainTimeout
        let overdue = Task {
            guard (try? await Task.sleep(for: drainTimeout)) != nil else { return }
            task.cancel()
        }
        _ = await task.result
        overdue.cancel()
        logger.info("stopped (web)")
    }

    private func routes() -> WebRoutes {
        let host = Self.loopback(for: configuration.host)
        let rpcPort = rpcPort
        let tls = configuration.tls
        return WebRoutes(
            sessions: sessions,
            connect: { credential in
                // The server's own RPC port: with TLS, trusting the authority that issued the
                // server's certificate, or the certificate itself (a connection to itself, so
                // no host name to check).
                HealthStore(
                    configuration: .init(
                        host: host, port: rpcPort, credential: credential,
                        tls: tls.map { .init(trustRoots: $0.authority ?? $0.certificateChain, verifyHostname: false) }))
            }, secure: tls != nil)
    }

    /// The address the pages' calls reach the RPC server on: the listen address, or loopback
    /// when it listens on every address.
    private static func loopback(for host: String) -> String {
        switch host {
        case "0.0.0.0", "": "127.0.0.1"
        case "::", "[::]": "::1"
        default: host
        }
    }
}

struct WebEndpointFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
