import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

/// `--where` on query, changes, stats and delete; `healthledger correlation save|query`.
@Suite("healthledger --where and correlations", .timeLimit(.minutes(3)))
struct WhereCLITests {
    @Test("--where filters query, changes, stats and delete; values read in the type's unit")
    func filters() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.client()
            let watch = Device(name: "Apple Watch", model: "Watch")
            let samples = [(72.0, watch), (130.0, watch), (145.0, nil), (60.0, nil)].enumerated().map { index, row in
                let date = Samples.base.addingTimeInterval(Double(index) * 600)
                return QuantitySample(
                    type: Samples.heartRate, quantity: try! Quantity(row.0, "count/min"), start: date, end: date, device: row.1,
                    metadata: index == 2 ? ["zone": .string("max")] : [:])
            }
            try await owner.save(samples.map(HealthObject.quantitySample))
            let credential = server.ownerCredential

            let fast = try #require(try await cli.json(credential, ["query", "--type", "HeartRate", "--where", "value > 120 count/min"]) as? [[String: Any]])
            #expect(fast.compactMap { $0["uuid"] as? String } == [samples[1], samples[2]].map(\.uuid.uuidString))
            #expect(fast.first?["unit"] as? String == "count/min" && fast.first?["value"] as? Double == 130, "heart rate reads in count/min")
            let combined = try #require(try await cli.json(credential, [
                "query", "--type", "HeartRate", "--where", "(value > 2 count/s and device.model = Watch) or metadata.zone exists",
            ]) as? [[String: Any]])
            #expect(combined.compactMap { $0["uuid"] as? String } == [samples[1], samples[2]].map(\.uuid.uuidString))
            let notWatch = try #require(try await cli.json(credential, [
                "query", "--type", "HeartRate", "--where", "not device.model = Watch and start >= \(Samples.base.addingTimeInterval(1200).formatted(.iso8601))",
            ]) as? [[String: Any]])
            #expect(notWatch.compactMap { $0["uuid"] as? String } == [samples[2], samples[3]].map(\.uuid.uuidString))
            let byUUID = try #require(try await cli.json(credential, [
                "query", "--type", "HeartRate", "--where", "uuid in (\(samples[0].uuid.uuidString), \(samples[3].uuid.uuidString))",
            ]) as? [[String: Any]])
            #expect(byUUID.count == 2)

            let changes = try #require(try await cli.json(credential, ["changes", "--type", "HeartRate", "--where", "metadata.zone = \"max\""]) as? [String: Any])
            #expect((changes["added"] as? [[String: Any]])?.compactMap { $0["uuid"] as? String } == [samples[2].uuid.uuidString])
            let stats = try #require(try await cli.json(credential, ["stats", "--type", "HeartRate", "--statistics", "max,min", "--where", "value < 100 count/min"]) as? [[String: Any]])
            #expect((stats.first?["values"] as? [String: Double]) == ["max": 72, "min": 60] && stats.first?["unit"] as? String == "count/min")

            let deleted = try #require(try await cli.json(credential, ["delete", "--type", "HeartRate", "--where", "value >= 130 count/min"]) as? [String: Any])
            #expect(deleted["deleted"] as? Int == 2)
            let left = try #require(try await cli.json(credential, ["query", "--type", "HeartRate"]) as? [[String: Any]])
            #expect(left.count == 2)
            let one = try await cli.run(credential, ["delete", samples[0].uuid.uuidString])
            #expect(one.status == 0 && one.output == "deleted 1\n", "\(one.error)")
            await owner.close()
        }
    }

    @Test("--where on source revisions and workouts: activity, duration and statistics of their samples")
    func revisionsAndWorkouts() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.client()
            let watch = SourceRevision(source: Source(bundleIdentifier: "com.apple.health", name: "Watch"), version: "10.1", productType: "Watch6,1")
            let phone = SourceRevision(source: Source(bundleIdentifier: "com.apple.health", name: "iPhone"), version: "17.0", productType: "iPhone15,2")
            let samples = [watch, phone].enumerated().map { index, revision in
                QuantitySample(
                    type: Samples.heartRate, quantity: try! Quantity(Double(140 + index * 30), "count/min"), start: Samples.base.addingTimeInterval(Double(index) * 60),
                    end: Samples.base.addingTimeInterval(Double(index) * 60), sourceRevision: revision)
            }
            try await owner.save(samples.map(HealthObject.quantitySample))
            let credential = server.ownerCredential
            let onWatch = try #require(try await cli.json(credential, ["query", "--type", "HeartRate", "--where", "revision = 'com.apple.health@*@Watch6,1'"]) as? [[String: Any]])
            #expect(onWatch.compactMap { $0["uuid"] as? String } == [samples[0].uuid.uuidString])
            let anyVersion = try #require(try await cli.json(credential, ["query", "--type", "HeartRate", "--where", "revision = com.apple.health"]) as? [[String: Any]])
            #expect(anyVersion.count == 2)
            let run = Workout(configuration: WorkoutConfiguration(activityType: .running), start: Samples.base, end: Samples.base.addingTimeInterval(1800))
            let ride = Workout(configuration: WorkoutConfiguration(activityType: .cycling), start: Samples.base, end: Samples.base.addingTimeInterval(3600))
            try await owner.save([.workout(run), .workout(ride)])
            try await owner.add([samples[1].uuid], to: run.uuid)
            let cases: [(String, [UUID])] = [
                ("activity = running", [run.uuid]),
                ("activity in (cycling, swimming)", [ride.uuid]),
                ("duration > 2000", [ride.uuid]),
                ("duration > 40 min", [ride.uuid]),
                ("max.HeartRate >= 150 count/min", [run.uuid]),
                ("not activity = running and duration <= 3600", [ride.uuid]),
            ]
            for (expression, expected) in cases {
                let found = try #require(try await cli.json(credential, ["query", "--type", "Workout", "--where", expression]) as? [[String: Any]])
                #expect(found.compactMap { $0["uuid"] as? String } == expected.map(\.uuidString), "\(expression)")
            }
            let unknown = try await cli.run(credential, ["query", "--type", "Workout", "--where", "activity = flying"])
            #expect(unknown.status != 0 && unknown.error.contains("not a workout activity type"))
            await owner.close()
        }
    }

    @Test("a syntax error points at its column; the grammar is in --help")
    func syntaxErrors() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let cases: [(String, Int, String)] = [
                ("value > and", 9, "expected a value"),
                ("value >> 3 count/min", 8, "expected a value"),
                ("(value > 3 count/min", 21, "expected ')'"),
                ("speed > 3 count/min", 1, "unknown field 'speed'"),
                ("value > 120", 9, "give the value's unit"),
                ("value ~ 3", 7, "expected an operator"),
                ("metadata.zone = 'max", 17, "not closed"),
                ("value > 3 count/min extra", 21, "unexpected 'extra'"),
                ("start > yesterday", 9, "ISO 8601"),
                ("value ! 3", 7, "'!' must be followed by '='"),
            ]
            for (expression, column, words) in cases {
                let run = try await cli.run(server.ownerCredential, ["query", "--type", "HeartRate", "--where", expression])
                #expect(run.status != 0, "\(expression)")
                #expect(run.error.contains("at column \(column)") && run.error.contains(words), "\(expression): \(run.error)")
                let caret = run.error.split(separator: "\n").last.map(String.init) ?? ""
                #expect(caret.firstIndex(of: "^").map { caret.distance(from: caret.startIndex, to: $0) } == column + 1, "\(expression): caret under column \(column)")
            }
            let deep = try await cli.run(server.ownerCredential, ["query", "--type", "HeartRate", "--where", String(repeating: "not ", count: 5000) + "metadata.x exists"])
            #expect(deep.status != 0 && deep.error.contains("nests deeper"), "\(deep.error.prefix(200))")
            let sleep = try await cli.run(server.ownerCredential, ["query", "--type", "SleepAnalysis", "--where", "category = dozing"])
            #expect(sleep.status != 0 && sleep.error.contains("asleepREM"), "the error lists the values: \(sleep.error)")
            let help = try await cli.run(server.ownerCredential, ["query", "--help"])
            #expect(help.output.contains("--where EXPR") && help.output.contains("value > 120 count/min"))
        }
    }

    @Test("correlation save and query: blood pressure from flags, food from JSON, member expressions")
    func correlations() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let credential = server.ownerCredential
            for (high, low, minute) in [(120, 80, 0), (150, 95, 10)] {
                let date = Samples.base.addingTimeInterval(Double(minute) * 60).formatted(.iso8601)
                let saved = try await cli.run(credential, ["correlation", "save", "--systolic", "\(high)", "--diastolic", "\(low)", "--unit", "mmHg", "--start", date])
                #expect(saved.status == 0 && saved.output.contains("saved with 2 members"), "\(saved.error)")
            }
            let high = try #require(try await cli.json(credential, [
                "correlation", "query", "--type", "BloodPressure", "--member", "BloodPressureSystolic: value >= 140 mmHg",
            ]) as? [[String: Any]])
            #expect(high.count == 1)
            let members = try #require(high.first?["members"] as? [[String: Any]])
            #expect(Set(members.compactMap { $0["value"] as? Double }) == [150, 95])
            let food = #"{"type": "Food", "start": "2026-11-22T12:00:00Z", "food": "Apple", "members": [{"type": "DietaryEnergyConsumed", "value": 95, "unit": "kcal"}, {"type": "DietaryCarbohydrates", "value": 25, "unit": "g"}]}"#
            let file = FileManager.default.temporaryDirectory.appending(path: "food-\(UUID().uuidString).json")
            try Data(food.utf8).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            #expect(try await cli.run(credential, ["correlation", "save", "--input", file.path]).status == 0)
            let apples = try #require(try await cli.json(credential, ["correlation", "query", "--type", "Food", "--where", "metadata.HKMetadataKeyFoodType = Apple"]) as? [[String: Any]])
            #expect(apples.count == 1 && apples.first?["food"] as? String == "Apple" && (apples.first?["members"] as? [Any])?.count == 2)
            let wrong = #"{"type": "BloodPressure", "members": [{"type": "HeartRate", "value": 60, "unit": "count/min"}]}"#
            try Data(wrong.utf8).write(to: file)
            let refused = try await cli.run(credential, ["correlation", "save", "--input", file.path])
            #expect(refused.status != 0 && refused.error.contains("does not belong"), "\(refused.error)")
            // Not JSON (JSON Lines, say): the error names the file and where its JSON breaks, and nothing is saved.
            try Data(#"{"type": "HeartRate", "value": 60, "unit": "count/min"}\n{"type": "HeartRate", "value": 61, "unit": "count/min"}"#.utf8).write(to: file)
            for command in [["save"], ["correlation", "save"]] {
                let notJSON = try await cli.run(credential, command + ["--input", file.path])
                #expect(notJSON.status != 0 && notJSON.error.contains("\(file.path) is not JSON (") && notJSON.error.contains("character"), "\(notJSON.error)")
            }
            #expect(try await server.client().result(for: SampleQueryDescriptor(type: Types.heartRate)).isEmpty)
        }
    }
}
