import Foundation
import HealthLedgerSDK
import Ledger
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// `healthledgerd` running as a process of its own on a data directory, listening on a port
/// the system picked; the benchmark's RPC scenarios reach it over loopback as any client would.
final class ServerProcess: Sendable {
    let port: Int
    /// The gRPC endpoint's port, when started with one.
    let grpcPort: Int?
    /// The web app's port, when started with one.
    let webPort: Int?
    private let process: Process

    /// Starts the server and waits until it logs that it listens (it prints its address).
    init(executable: URL, dataDirectory: URL, grpc: Bool = false, web: Bool = false, arguments: [String] = []) throws {
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw BenchFailure("\(executable.path) not found: build it with `swift build -c release --product healthledgerd` (tools/bench.sh does)")
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = ["--data-dir", dataDirectory.path, "--port", "0", "--metrics-port=-1", "--grpc-port=\(grpc ? 0 : -1)", "--web-port=\(web ? 0 : -1)", "--log-level", "info"] + arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.process = process
        // The log is read to its end on a thread of its own (a full pipe would stop the
        // server); the first "listening" line gives the port.
        let found = Mutex<(rpc: Int?, grpc: Int?, web: Int?)>((nil, nil, nil))
        let ready = DispatchSemaphore(value: 0)
        let reader = errors.fileHandleForReading
        Thread.detachNewThread {
            // One line per call at `info`: looked at as bytes, so that reading the log costs
            // the benchmark's process (which shares the host's cores with the server) little.
            let markers = ["error", "critical", "rpc.status=unauthenticated"].map { Array($0.utf8) }
            var pending: [UInt8] = []
            var signalled = false
            while case let chunk = reader.availableData, !chunk.isEmpty {
                pending.append(contentsOf: chunk)
                // Lines and markers found with memchr: a line per call passes here.
                let lines = pending.withUnsafeBytes { buffer -> (consumed: Int, kept: [String]) in
                    var (start, kept) = (0, [String]())
                    while start < buffer.count, let newline = memchr(buffer.baseAddress! + start, Int32(UInt8(ascii: "\n")), buffer.count - start) {
                        let end = UnsafeRawPointer(newline) - buffer.baseAddress!
                        let line = UnsafeRawBufferPointer(rebasing: buffer[start..<end])
                        start = end + 1
                        let marked = markers.contains { Self.find($0, in: line) }
                        if signalled && !marked { continue }
                        kept.append(String(decoding: line, as: UTF8.self))
                    }
                    return (start, kept)
                }
                pending.removeFirst(lines.consumed)
                for line in lines.kept {
                    if !signalled, line.contains("listening"), let address = line.firstMatch(of: /address=\S*:(\d+)/) {
                        let ports = found.withLock { found in
                            if line.contains("(gRPC)") {
                                found.grpc = Int(address.1)
                            } else if line.contains("(web)") {
                                found.web = Int(address.1)
                            } else {
                                found.rpc = Int(address.1)
                            }
                            return found
                        }
                        if ports.rpc != nil && (!grpc || ports.grpc != nil) && (!web || ports.web != nil) {
                            signalled = true
                            ready.signal()
                        }
                    } else if line.contains("error") || line.contains("critical") || line.contains("rpc.status=unauthenticated") {
                        FileHandle.standardError.write(Data("healthledgerd: \(line)\n".utf8))
                    }
                }
            }
            if !signalled { ready.signal() }
        }
        ready.wait()
        let ports = found.withLock { $0 }
        guard let port = ports.rpc, !grpc || ports.grpc != nil, !web || ports.web != nil else {
            process.terminate()
            throw BenchFailure("healthledgerd exited before listening")
        }
        self.port = port
        grpcPort = ports.grpc
        webPort = ports.web
    }

    var processIdentifier: Int32 { process.processIdentifier }

    /// Whether `marker` occurs in `line`: each place its first byte does (memchr), compared.
    private static func find(_ marker: [UInt8], in line: UnsafeRawBufferPointer) -> Bool {
        guard let first = marker.first, line.count >= marker.count else { return false }
        return marker.withUnsafeBytes { wanted in
            var start = 0
            let last = line.count - marker.count
            while start <= last, let found = memchr(line.baseAddress! + start, Int32(first), last - start + 1) {
                let at = UnsafeRawPointer(found) - line.baseAddress!
                if memcmp(found, wanted.baseAddress!, marker.count) == 0 { return true }
                start = at + 1
            }
            return false
        }
    }

    /// kill -9: the server ends at once, as in a crash.
    /// A server on a new data directory (an operator credential issued there first) holding
    /// one ledger, `id`, made through the operator's RPCs: the server and the ledger owner's
    /// credential.
    static func withLedger(
        _ id: String, dataDirectory: URL, binaries: String, grpc: Bool = false, web: Bool = false
    ) async throws -> (server: ServerProcess, owner: String) {
        let operatorCredential = try LedgerStore(directory: dataDirectory, configuration: BenchEncryption.configuration()).issueOperatorCredential(label: "bench")
        let server = try ServerProcess(executable: URL(filePath: binaries).appending(path: "healthledgerd"), dataDirectory: dataDirectory, grpc: grpc, web: web)
        let operatorClient = HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: operatorCredential))
        do {
            _ = try await operatorClient.createLedger(id: id)
            let owner = try await operatorClient.issueCredential(ledger: id, for: .owner, label: "bench")
            await operatorClient.close()
            return (server, owner)
        } catch {
            await operatorClient.close()
            server.stop()
            throw error
        }
    }

    func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Stops the server (SIGTERM: it drains and closes the ledgers) and waits for it.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
