import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("States of mind over RPC", .timeLimit(.minutes(3)))
struct StateOfMindRPCTests {
    static func state(
        _ kind: StateOfMind.Kind, _ valence: Double, _ labels: [StateOfMind.Label] = [], _ associations: [StateOfMind.Association] = [], at offset: Double = 0
    ) -> StateOfMind {
        StateOfMind(date: Samples.base.addingTimeInterval(offset), kind: kind, valence: valence, labels: labels, associations: associations)
    }

    @Test("an app saves states of mind under a share grant and reads others' under a read grant; HealthKit's predicates select them; one that breaks the rules is refused naming its field; as-of and erasure")
    func statesOfMind() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let (source, credential) = try await server.addApp("com.example.mood", name: "Mood", share: [.stateOfMind])
            let app = server.client(credential)
            let morning = Self.state(.momentaryEmotion, 0.8, [.happy, .excited], [.fitness], at: 0)
            let evening = Self.state(.dailyMood, -0.35, [.stressed, .drained], [.work, .currentEvents], at: 3_600)
            try await app.save([.stateOfMind(morning), .stateOfMind(evening)])
            let before = try server.ledger.head()
            let owners = Self.state(.momentaryEmotion, 0, [.calm], [], at: 7_200)
            try await owner.save(.stateOfMind(owners))

            let stored = try #require(try await owner.object(with: evening.uuid)?.stateOfMind)
            #expect(stored.kind == .dailyMood && stored.valence == -0.35 && stored.labels == [.stressed, .drained] && stored.associations == [.work, .currentEvents])
            #expect(stored.sourceRevision.source == source && stored.valenceClassification == .slightlyUnpleasant)
            #expect(morning.valenceClassification == .veryPleasant && owners.valenceClassification == .neutral)

            // HealthKit's predicates, alone and combined.
            func uuids(_ predicate: ObjectPredicate, for store: HealthStore) async throws -> [UUID] {
                try await SampleQueryDescriptor(type: .stateOfMind, predicate: predicate).result(for: store).map(\.uuid)
            }
            #expect(try await uuids(.predicateForStatesOfMind(with: .less, valence: 0), for: owner) == [evening.uuid])
            #expect(try await uuids(.predicateForStatesOfMind(with: .greaterOrEqual, valence: 0), for: owner) == [morning.uuid, owners.uuid])
            #expect(try await uuids(.predicateForStatesOfMind(with: StateOfMind.Kind.momentaryEmotion), for: owner) == [morning.uuid, owners.uuid])
            #expect(try await uuids(.predicateForStatesOfMind(with: StateOfMind.Label.calm), for: owner) == [owners.uuid])
            #expect(try await uuids(.predicateForStatesOfMind(with: StateOfMind.Association.work), for: owner) == [evening.uuid])
            #expect(try await uuids(.orPredicate(withSubpredicates: [
                .predicateForStatesOfMind(with: StateOfMind.Label.happy), .predicateForStatesOfMind(with: StateOfMind.Association.currentEvents),
            ]), for: owner) == [morning.uuid, evening.uuid])
            let wrongType = await expectRPCError(.invalidArgument, .invalidArgument, "a state of mind predicate on heart rate") {
                _ = try await SampleQueryDescriptor(type: Types.heartRate, predicate: .predicateForStatesOfMind(with: StateOfMind.Label.calm)).result(for: owner)
            }
            #expect(wrongType?.message.contains("a state of mind predicate needs the state of mind type") == true, "\(wrongType?.message ?? "")")
            let notFinite = await expectRPCError(.invalidArgument, .invalidArgument, "a valence of NaN") {
                _ = try await uuids(.predicateForStatesOfMind(with: .less, valence: .nan), for: owner)
            }
            #expect(notFinite?.message.contains("valence predicate's value must be finite") == true, "\(notFinite?.message ?? "")")

            // Without a read grant the app reads its own; with it, the owner's too.
            #expect(try await SampleQueryDescriptor(type: .stateOfMind).result(for: app).map(\.uuid) == [morning.uuid, evening.uuid])
            #expect(try await uuids(.predicateForStatesOfMind(with: StateOfMind.Label.calm), for: app).isEmpty)
            #expect(try await app.requestAuthorization(toShare: [], read: [.stateOfMind]) == 1)
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: .stateOfMind, direction: .read, decision: .granted)
            #expect(try await uuids(.predicateForStatesOfMind(with: StateOfMind.Label.calm), for: app) == [owners.uuid])

            let cases: [(StateOfMind, String)] = [
                (Self.state(.dailyMood, 1.5), "valence"), (Self.state(.dailyMood, -1.01), "valence"), (Self.state(.dailyMood, .nan), "valence"),
                (Self.state(.dailyMood, 0.2, [.calm, .happy, .calm]), "labels[2]"), (Self.state(.dailyMood, 0.2, [], [.work, .work]), "associations[1]"),
            ]
            for (state, field) in cases {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await app.save(.stateOfMind(state)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            #expect(try await SampleQueryDescriptor(type: .stateOfMind).result(for: owner).count == 3, "nothing refused was kept")

            // As of before the owner's save, only the app's were there; the owner's deleted is
            // gone now and still there then.
            #expect(try await owner.delete([owners.uuid]) == 1)
            #expect(try await owner.asOf(.sequence(before.sequence)).result(for: SampleQueryDescriptor(type: .stateOfMind)).map(\.uuid) == [morning.uuid, evening.uuid])
            let then = try server.ledger.head().sequence
            #expect(try await owner.asOf(.sequence(then - 1)).object(with: owners.uuid)?.stateOfMind?.labels == [.calm])
            // Erased, a state of mind is gone; history still verifies.
            _ = try await owner.erase(.matching(.stateOfMind, predicate: .predicateForStatesOfMind(with: .less, valence: 0)), reason: "asked")
            #expect(try await owner.object(with: evening.uuid) == nil)
            #expect(try await SampleQueryDescriptor(type: .stateOfMind).result(for: owner).map(\.uuid) == [morning.uuid], "only what the predicate selects")
            #expect(try server.ledger.verify().isValid)
            await app.close()
            await owner.close()
        }
    }

    @Test("the command line saves a state of mind from flags and JSON, lists it with its words, filters with --where, and refuses unknown words naming them")
    func commandLine() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let credential = server.ownerCredential
            let saved = try await cli.run(credential, [
                "save", "--type", "HKDataTypeStateOfMind", "--value", "-0.6", "--kind", "momentaryEmotion", "--label", "anxious", "--label", "worried",
                "--association", "money", "--start", "2026-11-20T08:00:00Z",
            ])
            #expect(saved.status == 0 && saved.output.contains("saved"), "\(saved.error)")
            let input = server.directory.appending(path: "moods.json")
            try Data(#"[{"type": "HKDataTypeStateOfMind", "value": 0.5, "kind": "dailyMood", "labels": ["content"], "associations": ["family", "friends"], "start": "2026-11-20T21:00:00Z"}]"#.utf8)
                .write(to: input)
            let fromJSON = try await cli.run(credential, ["save", "--input", input.path])
            #expect(fromJSON.status == 0, "\(fromJSON.error)")

            let rows = try #require(try await cli.json(credential, ["query", "--type", "HKDataTypeStateOfMind"]) as? [[String: Any]])
            #expect(rows.map { $0["value"] as? Double } == [-0.6, 0.5] && rows.map { $0["kind"] as? String } == ["momentaryEmotion", "dailyMood"])
            #expect(rows.first?["labels"] as? [String] == ["anxious", "worried"] && rows.last?["associations"] as? [String] == ["family", "friends"])
            #expect(rows.map { $0["unit"] as? String } == ["unpleasant", "pleasant"])
            let negative = try #require(try await cli.json(credential, ["query", "--type", "HKDataTypeStateOfMind", "--where", "valence < 0 or label in (calm, content)"]) as? [[String: Any]])
            #expect(negative.count == 2)
            let family = try #require(try await cli.json(credential, ["query", "--type", "HKDataTypeStateOfMind", "--where", "association = family and kind = dailyMood"]) as? [[String: Any]])
            #expect(family.map { $0["value"] as? Double } == [0.5])

            let unknownLabel = try await cli.run(credential, ["save", "--type", "HKDataTypeStateOfMind", "--value", "0.1", "--kind", "dailyMood", "--label", "sleepy"])
            #expect(unknownLabel.status != 0 && unknownLabel.error.contains("'sleepy' is not a state of mind label"), "\(unknownLabel.error)")
            let noKind = try await cli.run(credential, ["save", "--type", "HKDataTypeStateOfMind", "--value", "0.1"])
            #expect(noKind.status != 0 && noKind.error.contains("needs its kind"), "\(noKind.error)")
            let outOfRange = try await cli.run(credential, ["save", "--type", "HKDataTypeStateOfMind", "--value", "3", "--kind", "dailyMood"])
            #expect(outOfRange.status != 0 && outOfRange.error.contains("valence must be from -1"), "\(outOfRange.error)")
            let notAMood = try await cli.run(credential, ["save", "--type", "HeartRate", "--value", "60", "--unit", "count/min", "--label", "calm"])
            #expect(notAMood.status != 0 && notAMood.error.contains("belong to a state of mind"), "\(notAMood.error)")
            let badWhere = try await cli.run(credential, ["query", "--type", "HKDataTypeStateOfMind", "--where", "label = sleepy"])
            #expect(badWhere.status != 0 && badWhere.error.contains("'sleepy' is not a label"), "\(badWhere.error)")
            #expect(try await SampleQueryDescriptor(type: .stateOfMind).result(for: server.client()).count == 2, "nothing refused was kept")
        }
    }
}
