import Foundation
import HealthLedgerSDK
import HealthLedgerServer
import TestSupport
import Testing

@Suite("TLS", .timeLimit(.minutes(2)))
struct TLSTests {
    /// A self-signed certificate for 127.0.0.1, made with openssl at test time.
    static func makeCertificate(in directory: URL) throws -> (certificate: String, key: String) {
        let certificate = directory.appending(path: "cert.pem").path
        let key = directory.appending(path: "key.pem").path
        let run = try runProcess(URL(filePath: "/usr/bin/env"), [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
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
}
