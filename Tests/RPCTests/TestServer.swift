import Foundation
import HealthLedgerGRPC
import HealthLedgerSDK
import HealthLedgerWeb
import HealthLedgerServer
import Ledger
import Logging
import NIOCore
import Synchronization

/// Runs `body` against a fresh ``TestServer`` and stops it afterwards, on every exit path:
/// the server is shut down and its temporary directory removed whether `body` returns or
/// throws (the error is rethrown). Tests get their server through this, never by hand.
///
/// ```swift
/// try await withTestServer { server in
///     let owner = server.client()
///     …
/// }
/// ```
///
/// A body whose only `try`s are inside `#expect` is not inferred throwing: spell it
/// `{ server throws in`.
///
/// - Parameters:
///   - configuration: the server's configuration; its port is always replaced by 0.
///   - ledgers: the ledgers' configuration (their map sizes, for example).
///   - grpc: also serve gRPC (``TestServer/grpcPort``), on a port of its own.
///   - web: also serve the owner's web app (``TestServer/webPort``), on a port of its own.
///   - logger: the server's logger.
@discardableResult
func withTestServer<T>(
    configuration: ServerConfiguration = ServerConfiguration(port: 0), ledgers: LedgerConfiguration = .init(), grpc: Bool = false,
    web: Bool = false, logger: Logger = Logger(label: "test"), isolation: isolated (any Actor)? = #isolation,
    _ body: (TestServer) async throws -> T
) async throws -> T {
    let server = try await TestServer(configuration: configuration, ledgers: ledgers, grpc: grpc, web: web, logger: logger)
    let result: T
    do {
        result = try await body(server)
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
    return result
}

/// A real server on port 0 over a temporary data directory, with an owner and an app credential.
/// Get one through ``withTestServer(configuration:isolation:_:)``, which always stops it.
final class TestServer: @unchecked Sendable {
    let directory: URL
    let store: LedgerStore
    let server: RPCServer
    let port: Int
    /// The gRPC endpoint beside it, when asked for.
    let grpc: GRPCEndpoint?
    /// Its port (0 without one).
    let grpcPort: Int
    /// The owner's web app beside it, when asked for.
    let web: WebEndpoint?
    /// Its port (0 without one).
    let webPort: Int
    let ledger: Ledger
    let ownerCredential: String
    let appCredential: String

    static let appSource = Source(bundleIdentifier: "com.example.walk", name: "Walk")

    /// The one shutdown, once ``stop()`` has started it.
    private let stopping = Mutex<Task<Void, Never>?>(nil)

    /// Use ``withTestServer(configuration:isolation:_:)`` instead, which stops the server on
    /// every exit path; only it calls this.
    init(
        configuration: ServerConfiguration = ServerConfiguration(port: 0), ledgers: LedgerConfiguration = .init(), grpc: Bool = false,
        web: Bool = false, logger: Logger = Logger(label: "test")
    ) async throws {
        directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-rpc-\(UUID().uuidString)")
        // A setup that fails leaves no directory behind either.
        do {
            var ledgers = ledgers
            if ledgers.masterKey == nil { ledgers.masterKey = try LedgerConfiguration.testMasterKey() }
            store = try LedgerStore(directory: directory, configuration: ledgers)
            ledger = try store.createLedger(id: "alice")
            ownerCredential = try await ledger.issueCredential(for: .owner)
            appCredential = try await ledger.issueCredential(for: .app(Self.appSource))
            // The app may share (not read) the types the tests save.
            let shared = [Samples.heartRate.objectType, try ObjectType("HKQuantityTypeIdentifierBodyMass")]
            try await ledger.requestAuthorization(toShare: Set(shared), read: [], by: .app(Self.appSource))
            for type in shared {
                try await ledger.decideAuthorization(app: Self.appSource.bundleIdentifier, type: type, direction: .share, decision: .granted, by: .owner)
            }
            var configuration = configuration
            configuration.port = 0
            server = RPCServer(store: store, configuration: configuration, logger: logger)
            port = try await server.start().port!
            let endpoint = grpc ? GRPCEndpoint(store: store, configuration: configuration, port: 0, logger: logger) : nil
            let webApp = web ? WebEndpoint(configuration: configuration, rpcPort: port, port: 0, logger: logger) : nil
            do {
                grpcPort = try await endpoint?.start() ?? 0
                webPort = try await webApp?.start() ?? 0
            } catch {
                await endpoint?.shutdown()
                await server.shutdown()
                throw error
            }
            self.grpc = endpoint
            self.web = webApp
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// A store on this server. Its calls' deadline only guards against a test hanging: a
    /// full parallel run on two cores once took more than 10 s for a streamed query, so it
    /// is long; a test of deadlines passes its own.
    func client(_ credential: String? = nil, timeout: Duration = .seconds(120)) -> HealthStore {
        HealthStore(configuration: .init(port: port, credential: credential ?? ownerCredential, timeout: timeout))
    }

    /// Shuts the server down and removes its directory. Idempotent: ``withTestServer(configuration:isolation:_:)``
    /// calls it when its body ends, and a test of shutdown may have called it before. The
    /// first call starts the one shutdown; every call returns once it has finished (a second
    /// `RPCServer.shutdown()` would return at once, while the first still drains).
    func stop() async {
        let shutdown = stopping.withLock { stopping in
            if let stopping { return stopping }
            let task = Task { [server, grpc, web, directory] in
                await web?.shutdown()
                await grpc?.shutdown()
                await server.shutdown()
                try? FileManager.default.removeItem(at: directory)
            }
            stopping = task
            return task
        }
        await shutdown.value
    }
}

extension LedgerConfiguration {
    /// The master key of tools/test.sh's encrypted pass, which runs these suites again with
    /// `HEALTHLEDGER_MASTER_KEY_FILE` set (the command-line tools the tests start read it too);
    /// nil in the clear pass.
    static func testMasterKey() throws -> MasterKey? {
        try ProcessInfo.processInfo.environment["HEALTHLEDGER_MASTER_KEY_FILE"].map(MasterKey.load(from:))
    }

    /// The ledgers' settings of the pass under way (``testMasterKey()``).
    static func forTests() throws -> LedgerConfiguration {
        var configuration = LedgerConfiguration()
        configuration.masterKey = try testMasterKey()
        return configuration
    }
}

enum Samples {
    static let heartRate = try! QuantityType("HKQuantityTypeIdentifierHeartRate")
    static let base = Date(timeIntervalSince1970: 1_700_000_000)

    static func heartRate(_ value: Double, at offset: TimeInterval, metadata: Metadata = [:]) -> HealthObject {
        let date = base.addingTimeInterval(offset)
        return .quantitySample(QuantitySample(type: heartRate, quantity: try! Quantity(value, "count/min"), start: date, end: date, metadata: metadata))
    }
}

/// `healthledgerd` in a process of its own on port 0, for tests of several processes on one
/// data directory; the port is read from its "listening" log line.
final class DaemonProcess: Sendable {
    private let process: LineProcess
    let port: Int
    /// The port of its `/metrics` endpoint, when started with `metrics: true`.
    let metricsPort: Int?
    /// The port of its gRPC endpoint, when started with `grpc: true`.
    let grpcPort: Int?
    /// The port of its web app, when started with `web: true`.
    let webPort: Int?

    static let executable = AuthCLITests.executable.deletingLastPathComponent().appending(path: "healthledgerd")

    /// - Parameters:
    ///   - arguments: more flags for the daemon.
    ///   - environment: variables set for it.
    ///   - metrics: serve `/metrics` on a port of its own (port 0) rather than none.
    ///   - grpc: serve gRPC on a port of its own (port 0) rather than none.
    ///   - web: serve the web app on a port of its own (port 0) rather than none.
    init(
        dataDirectory: URL, arguments: [String] = [], environment: [String: String] = [:], metrics: Bool = false, grpc: Bool = false, web: Bool = false
    ) async throws {
        process = try LineProcess(
            Self.executable,
            [
                "--data-dir", dataDirectory.path, "--port", "0", "--metrics-port=\(metrics ? 0 : -1)", "--grpc-port=\(grpc ? 0 : -1)",
                "--web-port=\(web ? 0 : -1)", "--log-level", "info",
            ] + arguments,
            readingStandardError: true, environment: environment)
        var lines: [String] = []
        var port: Int?
        var metricsPort: Int?
        var grpcPort: Int?
        var webPort: Int?
        while port == nil || (metrics && metricsPort == nil) || (grpc && grpcPort == nil) || (web && webPort == nil) {
            guard let line = await process.nextLine() else {
                throw DaemonFailure(message: "healthledgerd exited before listening: \(lines.joined(separator: "\n"))")
            }
            lines.append(line)
            if line.contains("metrics endpoint"), let address = line.firstMatch(of: /address=\S*:(\d+)\/metrics/) {
                metricsPort = Int(address.1)!
            } else if line.contains("listening (gRPC)"), let address = line.firstMatch(of: /address=\S*:(\d+)/) {
                grpcPort = Int(address.1)!
            } else if line.contains("listening (web)"), let address = line.firstMatch(of: /address=\S*:(\d+)/) {
                webPort = Int(address.1)!
            } else if line.contains("listening"), let address = line.firstMatch(of: /address=\S*:(\d+)/) {
                port = Int(address.1)!
            }
        }
        self.port = port!
        self.metricsPort = metricsPort
        self.grpcPort = grpcPort
        self.webPort = webPort
    }

    struct DaemonFailure: Error { var message: String }

    /// The next line it writes to standard error (its log); nil once it has exited.
    func nextLine() async -> String? { await process.nextLine() }

    func stop() { process.stop() }

    /// kill -9: the process ends mid-whatever, as in a crash.
    func kill() { process.kill() }

    /// Writes the rest of its log to `file` as it comes (for a test to show on failure).
    func keepLog(in file: URL) {
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        Task.detached { [process] in
            guard let handle = try? FileHandle(forWritingTo: file) else { return }
            defer { try? handle.close() }
            while let line = await process.nextLine() { try? handle.write(contentsOf: Data((line + "\n").utf8)) }
        }
    }

    /// SIGSTOP: the process stands still (a long pause, as a stalled machine's), until ``resume()``.
    func pause() { process.signal(SIGSTOP) }

    /// SIGCONT after ``pause()``.
    func resume() { process.signal(SIGCONT) }
}
