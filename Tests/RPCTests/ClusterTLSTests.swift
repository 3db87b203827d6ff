import Foundation
import HealthLedgerCluster
import HealthLedgerSDK
import HealthModel
import LedgerSchema
import Testing
import TestSupport

/// A certificate authority, etcd's server certificate and key, and a member's client
/// certificate and key, made with openssl for one test (valid a day; EC P-256).
struct TLSFiles {
    let ca: URL
    let serverCertificate: URL
    let serverKey: URL
    let clientCertificate: URL
    let clientKey: URL

    /// Made in `directory`; `authority` names the CA (a second one signs nothing of the first's).
    static func make(in directory: URL, authority: String = "HealthLedger test CA") throws -> TLSFiles {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func path(_ name: String) -> String { directory.appending(path: name).path }
        func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(filePath: "/usr/bin/openssl")
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            let message = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw DaemonProcess.DaemonFailure(message: "openssl \(arguments.prefix(2).joined(separator: " ")): \(String(decoding: message, as: UTF8.self))")
            }
        }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(["req", "-x509"] + key + ["-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "1", "-subj", "/CN=\(authority)"])
        // etcd 3.4 also presents its server certificate as a client (to its own gateway).
        for (name, usage, names) in [("server", "serverAuth,clientAuth", "IP:127.0.0.1,DNS:localhost"), ("client", "clientAuth", "DNS:n1")] {
            try "subjectAltName=\(names)\nextendedKeyUsage=\(usage)\n".write(toFile: path("\(name).ext"), atomically: true, encoding: .utf8)
            try openssl(["req"] + key + ["-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=\(name)"])
            try openssl([
                "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-CAcreateserial",
                "-out", path("\(name).pem"), "-days", "1", "-extfile", path("\(name).ext"),
            ])
        }
        return TLSFiles(
            ca: directory.appending(path: "ca.pem"), serverCertificate: directory.appending(path: "server.pem"), serverKey: directory.appending(path: "server.key"),
            clientCertificate: directory.appending(path: "client.pem"), clientKey: directory.appending(path: "client.key"))
    }
}

extension ClusterTests {
    @Test("a cluster on etcd over TLS: members verify etcd's certificate and present their own; a client without one, or trusting another CA, or in clear text, gets nothing; bad TLS flags are refused at start")
    func etcdOverTLS() async throws {
        let base = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-cluster-tls-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let tls = try TLSFiles.make(in: base.appending(path: "tls"))
        let etcd = try await EtcdMembers(count: 1, directory: base.appending(path: "etcd"), tls: tls)
        defer { etcd.stop() }

        // What reaches etcd only with the right certificates.
        let good = try Etcd(endpoints: etcd.endpoints, tls: EtcdTLS(caFile: tls.ca.path, certificateFile: tls.clientCertificate.path, keyFile: tls.clientKey.path))
        let other = try TLSFiles.make(in: base.appending(path: "other"), authority: "another CA")
        let refused: [(String, Etcd)] = [
            ("no client certificate", try Etcd(endpoints: etcd.endpoints, tls: EtcdTLS(caFile: tls.ca.path))),
            ("another CA trusted", try Etcd(endpoints: etcd.endpoints, tls: EtcdTLS(caFile: other.ca.path, certificateFile: tls.clientCertificate.path, keyFile: tls.clientKey.path))),
            ("clear text", try Etcd(endpoints: etcd.endpoints.replacingOccurrences(of: "https://", with: "http://"))),
        ]
        let runs = ([good] + refused.map(\.1)).map { client in Task { try await client.run() } }
        defer {
            good.close()
            for (_, client) in refused { client.close() }
            for run in runs { run.cancel() }
        }
        try await good.put("/tls-test/key", Data("value".utf8))
        for (what, client) in refused {
            await #expect(throws: (any Error).self, "\(what)") { try await client.put("/tls-test/key", Data("other".utf8)) }
        }

        // A member joins over TLS, leads every group and takes a save.
        let nodes = try ClusterNodes(
            base: base, etcd: etcd.endpoints,
            arguments: ["--etcd-ca", tls.ca.path, "--etcd-cert", tls.clientCertificate.path, "--etcd-key", tls.clientKey.path])
        defer { nodes.stopAll() }
        try await nodes.start(1)
        #expect(try await nodes.settled(count: 1) == [1: Placement.groups])
        let admin = HealthStore(configuration: .init(port: nodes.port(of: 1), credential: nodes.operatorCredential, timeout: .seconds(60)))
        #expect(try await admin.createLedger(id: "alice") == "alice")
        let owner = HealthStore(configuration: .init(port: nodes.port(of: 1), credential: try await admin.issueCredential(ledger: "alice", for: .owner), timeout: .seconds(60)))
        try await owner.save(Samples.heartRate(60, at: 0))
        await owner.close()
        await admin.close()

        // Flags that cannot work are refused before the server starts, naming the cause.
        let credential = nodes.credentialFile.path
        let cases: [([String], String)] = [
            (["--etcd", etcd.endpoints.replacingOccurrences(of: "https://", with: "http://"), "--etcd-ca", tls.ca.path], "https://"),
            (["--etcd", etcd.endpoints, "--etcd-cert", tls.clientCertificate.path], "--etcd-key"),
            (["--etcd", etcd.endpoints, "--etcd-ca", base.appending(path: "missing.pem").path], "cannot be read"),
            (["--etcd", etcd.endpoints, "--etcd-ca", credential], "not a PEM file"),
            (["--etcd-ca", tls.ca.path], "are for --etcd"),
            (["--etcd", "\(etcd.endpoints),http://127.0.0.1:1"], "mix http:// and https://"),
        ]
        for (arguments, message) in cases {
            let refused = try await runProcess(
                DaemonProcess.executable,
                ["--data-dir", base.appending(path: "refused").path, "--port", "0", "--metrics-port=-1", "--grpc-port=-1", "--web-port=-1",
                 "--advertise", "127.0.0.1:0", "--cluster-credential-file", credential] + arguments)
            #expect(refused.status != 0 && refused.error.contains(message), "\(arguments): \(refused.error)")
        }
    }
}
