import Foundation
import Ledger
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization

/// Serves, on its own port, the Prometheus text format at `GET /metrics`, liveness at
/// `GET /healthz` (the process answers) and readiness at `GET /readyz` (its storage takes
/// writes: the data directory is writable and no ledger's disk is full; a follower has
/// caught up with its primary).
struct MetricsEndpoint: Service {
    let host: String
    let port: Int
    let registry: PrometheusCollectorRegistry
    let store: LedgerStore
    /// Why the server is not ready besides its storage (a follower not caught up); nil when it is.
    var unreadiness: @Sendable () -> String? = { nil }
    let logger: Logger

    func run() async throws {
        let registry = registry
        let probes = Probes(store: store, unreadiness: unreadiness)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(MetricsHandler(registry: registry, probes: probes))
                }
            }
            .bind(host: host, port: port)
            .get()
        logger.info("metrics endpoint", metadata: ["address": "\(channel.localAddress.map { "\($0)" } ?? "?")/metrics"])
        try? await gracefulShutdown()
        try await channel.close()
    }
}

/// What the probes and the gauges read from the store when asked.
private final class Probes: Sendable {
    let store: LedgerStore
    private let openLedgers = Gauge(label: "healthledger_ledgers_open")
    private let liveLedgers = Gauge(label: "healthledger_ledgers_in_use")
    private let fullDisks = Gauge(label: "healthledger_ledgers_on_full_disk")
    private let fullDiskFailures = Counter(label: "healthledger_full_disk_failures")
    private let countedFailures = Mutex(0)
    private let otherUnreadiness: @Sendable () -> String?

    init(store: LedgerStore, unreadiness: @escaping @Sendable () -> String?) {
        self.store = store
        otherUnreadiness = unreadiness
    }

    /// Brings the gauges up to date, before the registry is read.
    func refresh() {
        openLedgers.record(store.openLedgerCount)
        liveLedgers.record(LedgerStore.liveLedgerCount)
        fullDisks.record(DiskSpace.ledgersOnFullDisk.count)
        let failures = DiskSpace.fullDiskFailures
        let new = countedFailures.withLock { counted in
            defer { counted = failures }
            return failures - counted
        }
        if new > 0 { fullDiskFailures.increment(by: new) }
    }

    /// Why the server should get no traffic now; nil when it is ready.
    func unreadiness() -> String? {
        var reasons: [String] = []
        if access(store.directory.path, W_OK) != 0 { reasons.append("the data directory \(store.directory.path) is not writable (\(String(cString: strerror(errno))))") }
        let full = DiskSpace.ledgersOnFullDisk
        if !full.isEmpty { reasons.append("the disk is full for ledger\(full.count == 1 ? "" : "s") \(full.prefix(5).map { "'\($0)'" }.joined(separator: ", "))") }
        if let other = otherUnreadiness() { reasons.append(other) }
        return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }
}

private final class MetricsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let registry: PrometheusCollectorRegistry
    let probes: Probes
    private var path = ""

    init(registry: PrometheusCollectorRegistry, probes: Probes) {
        self.registry = registry
        self.probes = probes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): path = head.method == .GET ? head.uri : ""
        case .body: break
        case .end:
            let (status, body, type): (HTTPResponseStatus, [UInt8], String)
            switch path {
            case "/metrics":
                probes.refresh()
                (status, body, type) = (.ok, registry.emitToBuffer(), "text/plain; version=0.0.4")
            case "/healthz":
                (status, body, type) = (.ok, Array("ok\n".utf8), "text/plain")
            case "/readyz":
                let reason = probes.unreadiness()
                (status, body, type) = (reason == nil ? .ok : .serviceUnavailable, Array((reason.map { "not ready: \($0)" } ?? "ready").utf8) + [10], "text/plain")
            default:
                (status, body, type) = (.notFound, Array("not found\n".utf8), "text/plain")
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: type)
            headers.add(name: "Content-Length", value: "\(body.count)")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
