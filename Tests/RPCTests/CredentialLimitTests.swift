import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import HealthModel
import Testing

/// Per-credential limits: one app cannot starve the others of calls or of writes.
@Suite("Per-credential limits", .timeLimit(.minutes(5)))
struct CredentialLimitTests {
    @Test("a credential's running calls are bounded over all its connections; another credential is not affected; a call ending frees its place")
    func concurrentCalls() async throws {
        var configuration = ServerConfiguration(port: 0)
        configuration.maximumCallsPerCredential = 2
        try await withTestServer(configuration: configuration) { server in
            // Two long-running observers, each on a connection of its own.
            let first = server.client()
            let second = server.client()
            let watching = [try await first.observe(Samples.heartRate.objectType), try await second.observe(Samples.heartRate.objectType)]
            let third = server.client()
            let refused = await expectRPCError(.resourceExhausted, nil, "a third call of the same credential") { _ = try await third.ping() }
            #expect(refused?.message == "this credential has 2 calls running, its limit (--max-calls-per-credential): wait for one to end")
            // Another credential is its own.
            let app = server.client(server.appCredential)
            _ = try await app.ping()
            // One observer ends: the third call goes through.
            await first.close()
            while (try? await third.ping()) == nil { try await Task.sleep(for: .milliseconds(20)) }
            _ = watching
            for store in [second, third, app] { await store.close() }
        }
    }

    @Test("writes beyond a credential's rate are refused with the limit named; its reads go on")
    func writesPerSecond() async throws {
        var configuration = ServerConfiguration(port: 0)
        configuration.maximumWritesPerSecond = 1
        try await withTestServer(configuration: configuration) { server in
            let owner = server.client()
            var saved = 0
            var refusal: RPCError?
            // One write a second: the second in quick succession is refused (however slow the
            // machine, some save comes within a second of the one before).
            while refusal == nil {
                do {
                    try await owner.save(Samples.heartRate(70, at: Double(saved)))
                    saved += 1
                } catch let error as RPCError {
                    refusal = error
                }
            }
            #expect(refusal?.code == .resourceExhausted)
            #expect(refusal?.message.hasPrefix("this credential made 1 write in the last second, its limit (--max-writes-per-second): retry in ") == true, "\(String(describing: refusal))")
            #expect(try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == saved)
            // The app's writes are its own.
            try await server.client(server.appCredential).save(Samples.heartRate(71, at: -10))
            await owner.close()
        }
    }
}
