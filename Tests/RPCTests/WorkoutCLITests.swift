import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

/// `healthledger workout …` and `query --workout` against a real server.
@Suite("healthledger workout", .timeLimit(.minutes(3)))
struct WorkoutCLITests {
    @Test("save a workout, associate samples, show statistics and the route; an app sees only what it may read")
    func session() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await WorkoutRPCTests.authorize(server.ledger, app: TestServer.appSource, state: .denied)

            let saved = try await cli.run(server.ownerCredential, [
                "workout", "save", "--activity", "running", "--location", "outdoor", "--start", "2023-11-14T22:13:20Z", "--end", "2023-11-14T23:13:20Z",
                "--pause", "2023-11-14T22:30:00Z/2023-11-14T22:35:00Z",
            ])
            #expect(saved.status == 0, "\(saved.error)")
            let workout = try #require(UUID(uuidString: saved.output.trimmingCharacters(in: .whitespacesAndNewlines)))
            guard case .workout(let stored)? = try await owner.object(with: workout) else { Issue.record("no workout"); return }
            #expect(stored.duration == 3300 && stored.configuration.locationType == .outdoor)

            let ownerRate = Samples.heartRate(170, at: 600)
            let appRate = Samples.heartRate(120, at: 900)
            try await owner.save(ownerRate)
            try await app.save(appRate)
            let added = try await cli.run(server.ownerCredential, ["workout", "add", "--workout", workout.uuidString, ownerRate.uuid.uuidString, appRate.uuid.uuidString])
            #expect(added.status == 0, "\(added.error)")
            let builder = try await owner.makeRouteBuilder()
            try await builder.insertRouteData([WorkoutRPCTests.location(10), WorkoutRPCTests.location(5)])
            let route = try await builder.finishRoute(with: workout)

            let ownerStats = try #require(try await cli.json(server.ownerCredential, ["workout", "stats", workout.uuidString]) as? [[String: Any]])
            #expect(ownerStats.count == 1 && ownerStats[0]["scope"] as? String == "workout")
            #expect(((ownerStats[0]["values"] as? [String: Double])?["max"]).map { $0.rounded() } == 170, "heart rate reads in count/min")
            let appStats = try #require(try await cli.json(server.appCredential, ["workout", "stats", workout.uuidString]) as? [[String: Any]])
            #expect(((appStats.first?["values"] as? [String: Double])?["max"]).map { $0.rounded() } == 120, "the app counts its own heart rate only")

            let associated = try #require(try await cli.json(server.appCredential, ["query", "--type", "HeartRate", "--workout", workout.uuidString]) as? [[String: Any]])
            #expect(associated.compactMap { $0["uuid"] as? String } == [appRate.uuid.uuidString])
            let routes = try #require(try await cli.json(server.ownerCredential, ["query", "--type", "HKWorkoutRouteTypeIdentifier", "--workout", workout.uuidString]) as? [[String: Any]])
            #expect(routes.compactMap { $0["uuid"] as? String } == [route.uuid.uuidString] && routes.first?["value"] as? Int == 2)

            let table = try await cli.run(server.ownerCredential, ["workout", "route", route.uuid.uuidString])
            let lines = table.output.split(separator: "\n")
            #expect(table.status == 0 && lines.count == 3 && lines[1].hasPrefix(Samples.base.addingTimeInterval(5).formatted(.iso8601)))
            let hidden = try await cli.run(server.appCredential, ["workout", "route", route.uuid.uuidString])
            #expect(hidden.status != 0 && hidden.error.contains("no route with UUID"))
            let badActivity = try await cli.run(server.ownerCredential, ["workout", "save", "--activity", "teleporting", "--start", "2023-11-14T22:13:20Z", "--end", "2023-11-14T23:13:20Z"])
            #expect(badActivity.status != 0 && badActivity.error.contains("unknown activity type"))
            let reversed = try await cli.run(server.ownerCredential, ["query", "--type", "HeartRate", "--from", "2023-11-15T00:00:00Z", "--to", "2023-11-14T00:00:00Z"])
            #expect(reversed.status != 0 && reversed.error.contains("--from is after --to"))
            for store in [owner, app] { await store.close() }
        }
    }
}
