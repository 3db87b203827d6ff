import Foundation
import HealthLedgerSDK
import HealthLedgerServer
import Testing

/// ``withTestServer(configuration:isolation:_:)`` itself: the server it made is stopped and
/// its directory gone after the body, whether the body returned or threw.
@Suite("The test server harness", .timeLimit(.minutes(1)))
struct TestServerHarnessTests {
    struct Planned: Error {}

    @Test("withTestServer stops the server and removes its directory when its body returns, and when it throws; stop may run twice")
    func stopsOnEveryExit() async throws {
        // `throws` spelled out: its only `try`s are inside `#expect`, which does not make a closure throwing.
        let returned = try await withTestServer { server throws in
            let owner = server.client()
            #expect(try await owner.ping().ledgerID == "alice")
            #expect(FileManager.default.fileExists(atPath: server.directory.path))
            await owner.close()
            return server
        }
        #expect(returned.server.localAddress == nil && !FileManager.default.fileExists(atPath: returned.directory.path))
        // A second stop (as after a test that stopped its server itself) returns, and changes nothing.
        await returned.stop()
        #expect(returned.server.localAddress == nil)

        var thrown: TestServer?
        await #expect(throws: Planned.self) {
            try await withTestServer { server in
                thrown = server
                throw Planned()
            }
        }
        let server = try #require(thrown)
        #expect(server.server.localAddress == nil && !FileManager.default.fileExists(atPath: server.directory.path))
    }
}
