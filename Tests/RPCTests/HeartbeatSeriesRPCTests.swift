import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Heartbeat series over RPC", .timeLimit(.minutes(3)))
struct HeartbeatSeriesRPCTests {
    static func series(_ times: [Double], gaps: Set<Int> = [], seconds: Double = 60) -> HeartbeatSeriesSample {
        HeartbeatSeriesSample(
            beats: times.enumerated().map { HeartbeatSeriesBeat(timeSinceSeriesStart: $1, precededByGap: gaps.contains($0)) },
            start: Samples.base, end: Samples.base.addingTimeInterval(seconds))
    }

    @Test("an app saves a heartbeat series under a share grant and reads others' under a read grant, the beats in batches; one that breaks the rules is refused naming its field")
    func heartbeatSeries() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let (source, credential) = try await server.addApp("com.example.strap", name: "Strap", share: [.heartbeatSeries])
            let app = server.client(credential)
            // A minute at about 72 beats a minute, the signal lost for five seconds once.
            let times = (0..<68).map { Double($0) * 0.83 + ($0 >= 40 ? 5 : 0) }
            let saved = Self.series(times, gaps: [40], seconds: 70)
            try await app.save(.heartbeatSeries(saved))
            let before = try server.ledger.head()
            let owners = Self.series([0.5, 1.25])
            try await owner.save(.heartbeatSeries(owners))

            let stored = try #require(try await owner.object(with: saved.uuid)?.heartbeatSeries)
            #expect(stored.beats == saved.beats && stored.sourceRevision.source == source)
            var batches: [[HeartbeatSeriesBeat]] = []
            for try await batch in HeartbeatSeriesQueryDescriptor(saved.uuid, batchSize: 30).results(for: owner) { batches.append(batch) }
            #expect(batches.map(\.count) == [30, 30, 8] && batches[1][10].precededByGap && batches.joined().filter(\.precededByGap).count == 1)
            // Without a read grant the app reads its own; with it, the owner's too.
            #expect(try await SampleQueryDescriptor(type: .heartbeatSeries).result(for: app).map(\.uuid) == [saved.uuid])
            await #expect(throws: HealthError.self) { _ = try await HeartbeatSeriesQueryDescriptor(owners.uuid).result(for: app) }
            #expect(try await app.requestAuthorization(toShare: [], read: [.heartbeatSeries]) == 1)
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: .heartbeatSeries, direction: .read, decision: .granted)
            #expect(try await HeartbeatSeriesQueryDescriptor(owners.uuid).result(for: app) == owners.beats)
            // The command line lists each series with its beats.
            let cli = AuthCLITests.Session(server: server)
            let rows = try #require(try await cli.json(server.ownerCredential, ["query", "--type", "HKDataTypeIdentifierHeartbeatSeries"]) as? [[String: Any]])
            #expect(rows.map { $0["value"] as? Int } == [68, 2] && rows.first?["unit"] as? String == "beats")
            #expect(rows.first?["gap_beats"] as? [Int] == [40] && (rows.last?["beats_s"] as? [Double]) == [0.5, 1.25] && rows.last?["gap_beats"] == nil)

            let cases: [(HeartbeatSeriesSample, String)] = [
                (Self.series([]), "beats"), (Self.series([1, 1]), "beats[1]"), (Self.series([2, 1]), "beats[1]"), (Self.series([-0.5]), "beats[0]"),
                (Self.series([0, 61]), "beats[1]"), (Self.series([0, .nan]), "beats[1]"), (Self.series([0, .infinity], seconds: 60), "beats[1]"),
                (Self.series([0, 0.0005]), "beats[1]"), (Self.series([0, 86_400], seconds: 90_000), "beats[1]"),
            ]
            for (series, field) in cases {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await app.save(.heartbeatSeries(series)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            #expect(try await SampleQueryDescriptor(type: .heartbeatSeries).result(for: owner).count == 2, "nothing refused was kept")

            // As of before the owner's save, only the app's series was there; the owner's deleted
            // is gone now and still there then.
            #expect(try await owner.delete([owners.uuid]) == 1)
            #expect(try await owner.asOf(.sequence(before.sequence)).result(for: SampleQueryDescriptor(type: .heartbeatSeries)).map(\.uuid) == [saved.uuid])
            let then = try server.ledger.head().sequence
            #expect(try await HeartbeatSeriesQueryDescriptor(owners.uuid).result(for: owner.asOf(.sequence(then - 1))) == owners.beats)
            await #expect(throws: HealthError.self) { _ = try await HeartbeatSeriesQueryDescriptor(owners.uuid).result(for: owner) }
            #expect(try server.ledger.verify().isValid)
            await app.close()
            await owner.close()
        }
    }
}
