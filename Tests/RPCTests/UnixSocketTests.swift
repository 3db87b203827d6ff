import Foundation
import HealthLedgerSDK
import HealthLedgerServer
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The Unix domain socket listener (`healthledgerd --unix-socket PATH`): the same protocol
/// as TCP, reached with `unix:PATH` by the SDK, the CLI and the C client.
@Suite("A Unix domain socket listener", .timeLimit(.minutes(5)))
struct UnixSocketTests {
    /// A fresh directory for socket files (short, as socket paths must be).
    static func directory() throws -> URL {
        let directory = URL(filePath: "/tmp").appending(path: "hl-sock-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The permission bits of the socket file at `path`; nil when there is no socket there.
    static func socketPermissions(at path: String) -> Int? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path), attributes[.type] as? FileAttributeType == .typeSocket else {
            return nil
        }
        return attributes[.posixPermissions] as? Int
    }

    @Test("the SDK, the CLI and the C client reach the server over its socket, which has the permissions asked for and goes when the server stops")
    func clientsOverTheSocket() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appending(path: "healthledger.sock").path
        var configuration = ServerConfiguration(port: 0)
        configuration.unixSocket = .init(path: path, mode: 0o600)
        try await withTestServer(configuration: configuration) { server throws in
            #expect(Self.socketPermissions(at: path) == 0o600)

            // The SDK: a save over the socket is read back over TCP.
            let local = HealthStore(configuration: .init(host: "unix:\(path)", credential: server.ownerCredential))
            defer { Task { await local.close() } }
            #expect(try await local.ping().ledgerID == "alice")
            let saved = try await local.save(Samples.heartRate(64, at: 0))
            let overTCP = try await server.client().result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
            #expect(overTCP.map(\.uuid) == [saved.uuid])

            // The CLI.
            let query = try runProcess(
                AuthCLITests.executable, ["query", "--type", Samples.heartRate.objectType.identifier, "--host", "unix:\(path)", "--credential", server.ownerCredential])
            #expect(query.status == 0 && query.output.contains(saved.uuid.uuidString), "\(query.output)\n\(query.error)")

            // The C client.
            let build = try runProcess(URL(filePath: "/bin/bash"), [CClientInteropTests.root.appending(path: "tools/c-client/build.sh").path])
            try #require(build.status == 0, "build.sh failed: \(build.error)")
            let cClient = URL(filePath: try #require(build.output.split(separator: "\n").last.map(String.init)))
            let run = try runProcess(cClient, ["unix:\(path)", server.appCredential])
            #expect(run.status == 0 && run.output.contains("including the saved one: yes"), "\(run.output)\n\(run.error)")
            let missing = try runProcess(cClient, ["unix:\(directory.path)/none.sock", server.appCredential])
            #expect(missing.status == 1 && missing.error.contains("cannot connect to unix:\(directory.path)/none.sock: No such file or directory"), "\(missing.error)")

            // Bad input: a socket that is not there, TLS asked for on a socket.
            let nowhere = HealthStore(configuration: .init(host: "unix:\(directory.path)/none.sock", credential: server.ownerCredential, connectAttempts: 1))
            defer { Task { await nowhere.close() } }
            let refused = await #expect(throws: RPCError.self) { try await nowhere.ping() }
            #expect(refused?.code == .unavailable && refused?.message.contains("cannot connect to unix:\(directory.path)/none.sock") == true, "\(String(describing: refused))")
            let tls = HealthStore(configuration: .init(host: "unix:\(path)", credential: server.ownerCredential, tls: .init()))
            defer { Task { await tls.close() } }
            let noTLS = await #expect(throws: RPCError.self) { try await tls.ping() }
            #expect(noTLS?.message.contains("TLS is not offered on a Unix domain socket") == true, "\(String(describing: noTLS))")
        }
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file outlived the server")
    }

    @Test("a stale socket file is replaced; a socket another server listens on, a file that is not a socket, a missing directory or a path too long is refused with its reason")
    func socketFileChecks() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(at: directory) }

        // A socket file left behind (bound, never unlinked) by a server that is gone.
        let stale = directory.appending(path: "stale.sock").path
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in for (index, byte) in stale.utf8.enumerated() { buffer[index] = byte } }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        close(descriptor)
        try #require(bound == 0 && Self.socketPermissions(at: stale) != nil)

        var configuration = ServerConfiguration(port: 0)
        configuration.unixSocket = .init(path: stale)
        try await withTestServer(configuration: configuration) { server throws in
            let local = HealthStore(configuration: .init(host: "unix:\(stale)", credential: server.ownerCredential))
            defer { Task { await local.close() } }
            #expect(try await local.ping().ledgerID == "alice")
            #expect(Self.socketPermissions(at: stale) == 0o660)

            // A second server on the same socket: refused, and the first one's socket kept.
            let second = RPCServer(store: server.store, configuration: configuration)
            let taken = await #expect(throws: ListenerFailure.self) { try await second.start() }
            #expect(taken?.description.contains("another server listens on it") == true, "\(String(describing: taken))")
            #expect(try await local.ping().ledgerID == "alice")
        }

        let file = directory.appending(path: "file.sock").path
        try Data("not a socket".utf8).write(to: URL(filePath: file))
        let refusals: [(String, String)] = [
            (file, "a file that is not a socket is there (not replaced)"),
            (directory.appending(path: "missing/hl.sock").path, "the directory \(directory.path)/missing does not exist"),
            ("/tmp/" + String(repeating: "x", count: 120), "is 125 bytes long; at most 107 fit in a socket address"),
        ]
        for (path, reason) in refusals {
            configuration.unixSocket = .init(path: path)
            let refused = await #expect(throws: (any Error).self) { try await withTestServer(configuration: configuration) { _ in } }
            #expect("\(String(describing: refused))".contains(reason), "\(path): \(String(describing: refused))")
        }
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "not a socket")

        // The daemon's flags.
        for (arguments, message) in [
            (["--unix-socket", "\(directory.path)/d.sock", "--unix-socket-mode", "999"], "--unix-socket-mode takes permission bits in octal"),
            (["--unix-socket-mode", "600"], "--unix-socket-mode goes with --unix-socket"),
            (["--unix-socket", file], "a file that is not a socket is there"),
        ] {
            let refused = try await runProcess(
                DaemonProcess.executable,
                ["--data-dir", directory.appending(path: "data").path, "--port", "0", "--metrics-port=-1", "--grpc-port=-1", "--web-port=-1"] + arguments)
            #expect(refused.status != 0 && refused.error.contains(message), "\(arguments): \(refused.error)")
        }
    }
}
