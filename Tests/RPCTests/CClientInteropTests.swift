import Foundation
import HealthLedgerSDK
import TestSupport
import Testing

/// The C reference client (tools/c-client, libprotobuf-c) against a real server: the
/// protocol is implementable outside Swift.
@Suite("C client interop", .timeLimit(.minutes(3)))
struct CClientInteropTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func run(_ executable: String, _ arguments: [String]) async throws -> ProcessRun {
        try await runProcess(URL(filePath: executable), arguments)
    }

    @Test("the C client authenticates, saves a sample, queries it back and follows changes by anchor")
    func interop() async throws {
        let build = try await Self.run("/bin/bash", [Self.root.appending(path: "tools/c-client/build.sh").path])
        try #require(build.status == 0, "build.sh failed: \(build.error)")
        let client = try #require(build.output.split(separator: "\n").last.map(String.init))

        try await withTestServer { server in
            let run = try await Self.run(client, ["127.0.0.1", "\(server.port)", server.appCredential])
            #expect(run.status == 0, "\(run.output)\n\(run.error)")
            #expect(run.output.contains("ping: ledger alice as app com.example.walk"))
            #expect(run.output.contains("including the saved one: yes"))
            #expect(run.output.contains("changes: 1 added, 0 deleted, the saved one added: yes, anchor of "))
            #expect(!run.output.contains("anchor of 0 bytes"))
            #expect(run.output.contains("changes after the anchor: 0 added, 0 deleted"))
            // What the C client saved is there for Swift clients too, stamped with the app's source.
            let saved = try await server.client().result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
            #expect(saved.count == 1)
            #expect(saved.first?.sourceRevision.source.bundleIdentifier == "com.example.walk")

            let refused = try await Self.run(client, ["127.0.0.1", "\(server.port)", "hl1:alice:0000000000000000:wrong"])
            #expect(refused.status != 0)
            #expect(refused.error.contains("status 16"))

            // Bad addresses are named; one address alone that cannot be reached is not waited for.
            let malformed = try await Self.run(client, ["nowhere,127.0.0.1:\(server.port)", server.appCredential])
            #expect(malformed.status == 1 && malformed.error.contains("'nowhere' is not HOST:PORT"), "\(malformed.error)")
            let closed = try await Self.run(client, ["127.0.0.1", "\(try EtcdMembers.unusedPort())", server.appCredential])
            #expect(closed.status == 1 && closed.error.contains("cannot connect to 127.0.0.1:"), "\(closed.error)")
            // With several, the first that answers serves.
            let seeds = try await Self.run(client, ["127.0.0.1:\(try EtcdMembers.unusedPort()),127.0.0.1:\(server.port)", server.appCredential])
            #expect(seeds.status == 0 && seeds.error.contains("cannot connect"), "\(seeds.output)\n\(seeds.error)")
        }
    }
}
