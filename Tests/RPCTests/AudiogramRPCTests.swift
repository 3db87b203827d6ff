import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Audiograms over RPC", .timeLimit(.minutes(3)))
struct AudiogramRPCTests {
    static func point(_ hertz: Double, left: Double?, right: Double?) throws -> AudiogramPoint {
        AudiogramPoint(frequency: try Quantity(hertz, "Hz"), leftEar: try left.map { try Quantity($0, "dBHL") }, rightEar: try right.map { try Quantity($0, "dBHL") })
    }

    @Test("an app saves an audiogram under a share grant and reads others' under a read grant; one that breaks the rules is refused naming its field")
    func audiograms() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let (source, credential) = try await server.addApp("com.example.hearing", name: "Hearing", share: [.audiogram])
            let app = server.client(credential)
            let test = Audiogram(
                points: [try Self.point(500, left: 10, right: 5), try Self.point(1000, left: 5, right: nil), try Self.point(4000, left: 25, right: 40)],
                start: Samples.base, end: Samples.base.addingTimeInterval(600))
            try await app.save(.audiogram(test))
            let owners = Audiogram(points: [try Self.point(1000, left: 0, right: 0)], start: Samples.base.addingTimeInterval(3_600), end: Samples.base.addingTimeInterval(3_900))
            try await owner.save(.audiogram(owners))

            let stored = try #require(try await SampleQueryDescriptor(type: .audiogram).result(for: owner).compactMap(\.audiogram).first)
            #expect(stored.points == test.points && stored.sourceRevision.source == source)
            // Without a read grant the app reads its own; with it, the owner's too.
            #expect(try await SampleQueryDescriptor(type: .audiogram).result(for: app).map(\.uuid) == [test.uuid])
            #expect(try await app.requestAuthorization(toShare: [], read: [.audiogram]) == 1)
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: .audiogram, direction: .read, decision: .granted)
            #expect(try await SampleQueryDescriptor(type: .audiogram).result(for: app).map(\.uuid) == [test.uuid, owners.uuid])

            func broken(_ change: (inout Audiogram) throws -> Void) throws -> Audiogram {
                var copy = Audiogram(points: test.points, start: test.startDate, end: test.endDate)
                try change(&copy)
                return copy
            }
            let cases: [(Audiogram, String)] = [
                (try broken { $0.points = [] }, "points"),
                (try broken { $0.points = Array(repeating: $0.points[0], count: 2) }, "points[1].frequency"),
                (try broken { $0.points.swapAt(0, 2) }, "points[1].frequency"),
                (try broken { $0.points[1] = try Self.point(1000, left: nil, right: nil) }, "points[1]"),
                (try broken { $0.points[2].rightEar = try Quantity(150, "dBHL") }, "points[2].rightEar"),
                (try broken { $0.points[0].leftEar = try Quantity(10, "dBASPL") }, "points[0].leftEar"),
                (try broken { $0.points[0].frequency = try Quantity(500, "s") }, "points[0].frequency"),
            ]
            for (audiogram, field) in cases {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await app.save(.audiogram(audiogram)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            #expect(try await SampleQueryDescriptor(type: .audiogram).result(for: owner).count == 2, "nothing refused was kept")
            #expect(try server.ledger.verify().isValid)
            await app.close()
            await owner.close()
        }
    }
}
