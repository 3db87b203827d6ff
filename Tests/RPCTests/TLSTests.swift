import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import GRPCProtobuf
import HealthLedgerSDK
import LedgerSchema
import HealthLedgerServer
import TestSupport
import Testing

@Suite("TLS", .timeLimit(.minutes(2)))
struct TLSTests {
    /// A self-signed certificate for 127.0.0.1 (or only for the names `names`, in openssl's
    /// subjectAltName form), made with openssl at test time.
    static func makeCertificate(in directory: URL, names: String = "IP:127.0.0.1,DNS:localhost") throws -> (certificate: String, key: String) {
        let certificate = directory.appending(path: "cert-\(UUID().uuidString).pem").path
        let key = directory.appending(path: "key-\(UUID().uuidString).pem").path
        let run = try runProcess(URL(filePath: "/usr/bin/env"), [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=healthledger test",
            "-addext", "subjectAltName=\(names)",
        ]) as ProcessRun
        guard run.status == 0 else { throw CocoaError(.fileWriteUnknown) }
        return (certificate, key)
    }

    @Test("calls work over TLS with a trusted self-signed certificate; plain TCP and untrusted clients fail")
    func tls() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = try Self.makeCertificate(in: directory)
        try await withTestServer(configuration: ServerConfiguration(tls: .init(certificateChain: files.certificate, privateKey: files.key))) { server in

            let trusted = HealthStore(configuration: .init(
                port: server.port, credential: server.ownerCredential, tls: .init(trustRoots: files.certificate), connectAttempts: 1))
            #expect(try await trusted.ping().ledgerID == "alice")
            try await trusted.save(Samples.heartRate(70, at: 0))
            #expect(try await trusted.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == 1)
            await trusted.close()

            let plain = HealthStore(configuration: .init(port: server.port, credential: server.ownerCredential, timeout: .seconds(3), connectAttempts: 1))
            await #expect(throws: (any Error).self) { try await plain.ping() }
            await plain.close()

            let untrusted = HealthStore(configuration: .init(
                port: server.port, credential: server.ownerCredential, timeout: .seconds(3), tls: .init(), connectAttempts: 1))
            await #expect(throws: (any Error).self) { try await untrusted.ping() }
            await untrusted.close()
        }
    }

    @Test("the CLI checks the certificate's names against the host it connects to, or --tls-server-name; a certificate for another name is refused")
    func hostnameVerification() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Signed for another host only: the CA (here the certificate itself) is trusted, the name is not this server's.
        let other = try Self.makeCertificate(in: directory, names: "DNS:ledger.example.org")
        try await withTestServer(configuration: ServerConfiguration(tls: .init(certificateChain: other.certificate, privateKey: other.key))) { server in
            let base = ["ping", "--port", "\(server.port)", "--credential", server.ownerCredential, "--tls-ca", other.certificate]
            let refused = try await runProcess(AuthCLITests.executable, base)
            #expect(refused.status != 0, "\(refused.output)")
            let named = try await runProcess(AuthCLITests.executable, base + ["--tls-server-name", "ledger.example.org"])
            #expect(named.status == 0 && named.output.contains("alice"), "\(named.output)\(named.error)")
            let wrongName = try await runProcess(AuthCLITests.executable, base + ["--tls-server-name", "evil.example.org"])
            #expect(wrongName.status != 0)
            // The SDK the same way.
            let sdk = HealthStore(configuration: .init(
                port: server.port, credential: server.ownerCredential, timeout: .seconds(5), tls: .init(trustRoots: other.certificate), connectAttempts: 1))
            await #expect(throws: (any Error).self) { try await sdk.ping() }
            await sdk.close()
        }
        // A certificate for 127.0.0.1 passes as the host connected to.
        let own = try Self.makeCertificate(in: directory)
        try await withTestServer(configuration: ServerConfiguration(tls: .init(certificateChain: own.certificate, privateKey: own.key))) { server in
            let ok = try await runProcess(
                AuthCLITests.executable, ["ping", "--port", "\(server.port)", "--credential", server.ownerCredential, "--tls-ca", own.certificate])
            #expect(ok.status == 0 && ok.output.contains("alice"), "\(ok.output)\(ok.error)")
            let alone = try await runProcess(AuthCLITests.executable, ["ping", "--port", "\(server.port)", "--credential", server.ownerCredential, "--tls-server-name", "x"])
            #expect(alone.status != 0 && alone.error.contains("--tls-server-name goes with --tls-ca"), "\(alone.error)")
        }
    }
}

/// The gRPC endpoint and the web app with the server's TLS files.
@Suite("TLS on the gRPC and web ports", .timeLimit(.minutes(2)))
struct EndpointTLSTests {
    @Test("gRPC over TLS with the trusted certificate, refused in plaintext; the web app over HTTPS with Secure cookies, its own calls over TLS")
    func endpoints() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = try TLSTests.makeCertificate(in: directory)
        let configuration = ServerConfiguration(tls: .init(certificateChain: files.certificate, privateKey: files.key))
        try await withTestServer(configuration: configuration, grpc: true, web: true) { server in
            // gRPC, trusting the server's certificate.
            let secure = try HTTP2ClientTransport.Posix(
                target: .ipv4(address: "127.0.0.1", port: server.grpcPort),
                transportSecurity: .tls { $0.trustRoots = .certificates([.file(path: files.certificate, format: .pem)]) })
            try await withGRPCClient(transport: secure) { client in
                let pong: Healthledger_V1_PingResponse = try await GRPCTests.unary(client, .ping, Healthledger_V1_PingRequest(), credential: server.ownerCredential)
                #expect(pong.ledgerID == "alice")
            }
            // In plaintext, the TLS port answers nothing a gRPC client takes.
            let plain = try HTTP2ClientTransport.Posix(target: .ipv4(address: "127.0.0.1", port: server.grpcPort), transportSecurity: .plaintext)
            let refused = await GRPCTests.failure(of: {
                try await withGRPCClient(transport: plain) { client in
                    var options = CallOptions.defaults
                    options.timeout = .seconds(20)
                    _ = try await client.unary(
                        request: ClientRequest(message: Healthledger_V1_PingRequest(), metadata: GRPCTests.metadata(server.ownerCredential)),
                        descriptor: GRPCTests.descriptor(.ping), serializer: ProtobufSerializer(),
                        deserializer: ProtobufDeserializer<Healthledger_V1_PingResponse>(), options: options) { try $0.message }
                }
            })
            #expect(refused?.code == .unavailable || refused?.code == .deadlineExceeded, "\(String(describing: refused))")

            // The web app over HTTPS: the cookie is Secure, and its calls to the ledger go over TLS.
            let url = "https://127.0.0.1:\(server.webPort)"
            let page = try await WebEndpointTests.curl(["--cacert", files.certificate, "\(url)/sign-in"])
            #expect(page.status == 200)
            let signedIn = try await WebEndpointTests.curl(["--cacert", files.certificate, "--data-urlencode", "credential=\(server.ownerCredential)", "\(url)/sign-in"])
            #expect(signedIn.status == 303, "\(signedIn.status) \(signedIn.body)")
            let cookieLine = try #require(signedIn.headers.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("set-cookie:") })
            #expect(cookieLine.contains("; Secure"), "\(cookieLine)")
            let session = try #require(cookieLine.firstMatch(of: /healthledger_session=([A-Za-z0-9_-]+)/).map { String($0.1) })
            let summary = try await WebEndpointTests.curl(["--cacert", files.certificate, "--cookie", "healthledger_session=\(session)", "\(url)/"])
            #expect(summary.status == 200 && summary.body.contains("steps-heading"))
            // Plain HTTP to the HTTPS port gets no page.
            let plainWeb = try await WebEndpointTests.curl(["http://127.0.0.1:\(server.webPort)/sign-in"])
            #expect(plainWeb.status != 200)
        }
    }

    @Test("a certificate an authority issued: the web app's own calls verify it against that authority (--tls-ca), and without it cannot sign anyone in")
    func issuedCertificate() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-tls-ca-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let files = try TLSFiles.make(in: directory)
        for authority in [files.ca.path, nil] {
            let tls = ServerConfiguration.TLSFiles(certificateChain: files.serverCertificate.path, privateKey: files.serverKey.path, authority: authority)
            try await withTestServer(configuration: ServerConfiguration(tls: tls), web: true) { server in
                let signedIn = try await WebEndpointTests.curl([
                    "--cacert", files.ca.path, "--data-urlencode", "credential=\(server.ownerCredential)", "https://127.0.0.1:\(server.webPort)/sign-in",
                ])
                if authority != nil {
                    #expect(signedIn.status == 303, "\(signedIn.status) \(signedIn.body)")
                } else {
                    // The issued certificate alone is no root: the app's call to its own server fails.
                    #expect(signedIn.status != 303 && signedIn.body.contains("could not be reached"), "\(signedIn.status) \(signedIn.body)")
                }
            }
        }
    }
}
