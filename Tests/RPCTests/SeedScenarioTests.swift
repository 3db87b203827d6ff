import Foundation
import HealthLedgerSDK
import Ledger
import Testing

/// The scenarios of the HealthKit talks, through the SDK against a real server.
@Suite("Seed scenarios", .timeLimit(.minutes(3)))
struct SeedScenarioTests {
    static func at(_ text: String) -> Date { try! Date(text, strategy: .iso8601) }

    static func revision(_ bundle: String) -> SourceRevision { SourceRevision(source: Source(bundleIdentifier: bundle, name: bundle)) }

    @Test("the most recent blood-glucose reading before a meal")
    func mostRecentPreprandialGlucose() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let glucose = try QuantityType("HKQuantityTypeIdentifierBloodGlucose")
            let readings: [(String, Double, Int)] = [
                ("2026-11-20T07:30:00Z", 92, 1), ("2026-11-20T09:00:00Z", 140, 2), ("2026-11-21T07:45:00Z", 98, 1), ("2026-11-21T13:30:00Z", 151, 2),
            ]
            let samples = try readings.map { time, value, meal in
                QuantitySample(
                    type: glucose, quantity: try Quantity(value, "mg/dL"), start: Self.at(time), end: Self.at(time),
                    metadata: [MetadataKey.bloodGlucoseMealTime: .number(Double(meal))])
            }
            try await owner.save(samples.map(HealthObject.quantitySample))
            let query = SampleQueryDescriptor(
                type: glucose.objectType,
                predicate: .predicateForObjects(withMetadataKey: MetadataKey.bloodGlucoseMealTime, operatorType: .equal, value: .number(1)),
                limit: 1, sort: .startDate(ascending: false))
            #expect(try await query.result(for: owner).map(\.uuid) == [samples[2].uuid])
            await owner.close()
        }
    }

    @Test("today's steps: samples starting today, merged across overlapping sources")
    func todaysSteps() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
            func walk(_ count: Double, _ from: String, _ to: String, _ bundle: String) -> HealthObject {
                .quantitySample(QuantitySample(
                    type: steps, quantity: Quantity(count, .count), start: Self.at(from), end: Self.at(to), sourceRevision: Self.revision(bundle)))
            }
            try await owner.save([
                walk(500, "2026-11-22T23:50:00Z", "2026-11-23T00:10:00Z", "com.apple.health.phone"),  // started yesterday
                walk(1200, "2026-11-23T08:00:00Z", "2026-11-23T08:20:00Z", "com.apple.health.watch"),
                walk(900, "2026-11-23T08:10:00Z", "2026-11-23T08:25:00Z", "com.apple.health.phone"),  // overlaps the watch
                walk(300, "2026-11-23T18:00:00Z", "2026-11-23T18:05:00Z", "com.apple.health.phone"),
            ])
            let midnight = Self.at("2026-11-23T00:00:00Z")
            let today = try #require(try await owner.statistics(for: StatisticsQueryDescriptor(
                type: steps, options: .cumulativeSum,
                predicate: .predicateForSamples(withStart: midnight, end: midnight.addingTimeInterval(86_400), options: .strictStartDate))))
            // The watch wrote first, so it ranks first: 1200 + 900·(5/15 uncovered) + 300.
            #expect(today.sumQuantity()?.value == 1800)
            await owner.close()
        }
    }

    @Test("the REM sleep of one night, and every asleep stage of it")
    func remSleep() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let sleep = try CategoryType("HKCategoryTypeIdentifierSleepAnalysis")
            let night: [(Int, String, String)] = [
                (0, "2026-11-22T22:30:00Z", "2026-11-23T06:45:00Z"),  // in bed
                (3, "2026-11-22T23:00:00Z", "2026-11-23T00:30:00Z"), (4, "2026-11-23T00:30:00Z", "2026-11-23T01:15:00Z"),
                (5, "2026-11-23T01:15:00Z", "2026-11-23T01:45:00Z"), (2, "2026-11-23T01:45:00Z", "2026-11-23T01:50:00Z"),
                (5, "2026-11-23T04:10:00Z", "2026-11-23T04:55:00Z"), (3, "2026-11-23T04:55:00Z", "2026-11-23T06:30:00Z"),
                (5, "2026-11-24T02:00:00Z", "2026-11-24T02:30:00Z"),  // the next night
            ]
            let samples = night.map { value, from, to in CategorySample(type: sleep, value: value, start: Self.at(from), end: Self.at(to)) }
            try await owner.save(samples.map(HealthObject.categorySample))
            let lastNight = ObjectPredicate.predicateForSamples(withStart: Self.at("2026-11-22T18:00:00Z"), end: Self.at("2026-11-23T12:00:00Z"))
            let rem = try await SampleQueryDescriptor(
                type: sleep.objectType, predicate: .and([lastNight, .predicateForCategorySamples(with: .equal, value: 5)])
            ).result(for: owner)
            #expect(rem.map(\.uuid) == [samples[3].uuid, samples[5].uuid])
            let asleep = try await SampleQueryDescriptor(
                type: sleep.objectType, predicate: .and([lastNight, .predicateForCategorySamples(equalTo: ObjectPredicate.allAsleepValues)])
            ).result(for: owner)
            #expect(asleep.map(\.uuid) == [1, 2, 3, 5, 6].map { samples[$0].uuid })
            await owner.close()
        }
    }

    @Test("a week of daily step totals anchored at Monday midnight in a zone with a DST change")
    func weekAcrossDST() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
            let paris = try #require(TimeZone(identifier: "Europe/Paris"))
            // Paris leaves summer time on Sunday 25 October 2026. A walk at 23:30 local each day:
            // fixed 24-hour intervals would put Sunday's into Monday.
            var objects: [HealthObject] = []
            for day in 0..<7 {
                let local = DateComponents(calendar: Calendar(identifier: .gregorian), timeZone: paris, year: 2026, month: 10, day: 19 + day, hour: 23, minute: 30)
                let start = try #require(local.date)
                objects.append(.quantitySample(QuantitySample(
                    type: steps, quantity: Quantity(Double(1000 + day), .count), start: start, end: start.addingTimeInterval(600))))
            }
            try await owner.save(objects)
            let monday = try #require(DateComponents(calendar: Calendar(identifier: .gregorian), timeZone: paris, year: 2026, month: 10, day: 19).date)
            let week = try await owner.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: steps, range: DateInterval(start: monday, duration: 7 * 86_400 + 3600),
                intervals: try StatisticsIntervals(anchor: monday, every: 1, .day, timeZone: paris), options: .cumulativeSum))
            let days = week.enumerateStatistics(from: monday, to: monday.addingTimeInterval(7 * 86_400 + 3600))
            #expect(days.count == 7)
            #expect(days.map { $0.sumQuantity()?.value } == (0..<7).map { Double(1000 + $0) })
            #expect(days.map { $0.endDate.timeIntervalSince($0.startDate) / 3600 } == [24, 24, 24, 24, 24, 24, 25])
            await owner.close()
        }
    }

    @Test("hourly basal insulin sums, separated by source, through a metadata predicate on the delivery reason")
    func basalInsulin() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let insulin = try QuantityType("HKQuantityTypeIdentifierInsulinDelivery")
            func dose(_ units: Double, _ from: String, _ minutes: Double, reason: Int, _ bundle: String) -> HealthObject {
                .quantitySample(QuantitySample(
                    type: insulin, quantity: try! Quantity(units, "IU"), start: Self.at(from), end: Self.at(from).addingTimeInterval(minutes * 60),
                    metadata: [MetadataKey.insulinDeliveryReason: .number(Double(reason))], sourceRevision: Self.revision(bundle)))
            }
            try await owner.save([
                dose(0.85, "2026-11-23T08:00:00Z", 60, reason: 1, "com.example.pump"),
                dose(0.80, "2026-11-23T09:00:00Z", 60, reason: 1, "com.example.pump"),
                dose(4, "2026-11-23T08:30:00Z", 0, reason: 2, "com.example.pump"),  // a bolus: not counted
                dose(0.5, "2026-11-23T08:30:00Z", 60, reason: 1, "com.example.pen"),  // overlaps the pump
            ])
            let collection = try await owner.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: insulin, range: DateInterval(start: Self.at("2026-11-23T08:00:00Z"), duration: 2 * 3600),
                intervals: try StatisticsIntervals(anchor: .distantPast, every: 1, .hour, timeZone: .gmt), options: [.cumulativeSum, .separateBySource],
                predicate: .predicateForObjects(withMetadataKey: MetadataKey.insulinDeliveryReason, allowedValues: [.number(1)])))
            let pump = Source(bundleIdentifier: "com.example.pump", name: "com.example.pump")
            let pen = Source(bundleIdentifier: "com.example.pen", name: "com.example.pen")
            #expect(collection.statistics.count == 2)
            let sums = collection.statistics.map { hour in
                [pump, pen].map { try? hour.sumQuantity(for: $0)?.doubleValue(for: HealthUnit("IU")) }
            }
            #expect(sums[0][0] == 0.85 && abs((sums[0][1] ?? 0) - 0.25) < 1e-9, "\(sums)")
            #expect(abs((sums[1][0] ?? 0) - 0.80) < 1e-9 && abs((sums[1][1] ?? 0) - 0.25) < 1e-9, "\(sums)")
            await owner.close()
        }
    }

    @Test("the sync loop: an anchored query for what changed, then a statistics collection that counts each version once")
    func syncLoop() async throws {
        try await withTestServer { server in
            let (source, credential) = try await server.addApp("com.example.sync", name: "Sync", share: [Types.stepCount])
            let app = server.client(credential)
            let owner = server.client()
            let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
            _ = try await app.requestAuthorization(toShare: [], read: [Types.stepCount])
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Types.stepCount, direction: .read, decision: .granted)
            func walk(_ count: Double, hour: Double, id: String, version: Double) -> HealthObject {
                let start = Samples.base.addingTimeInterval(hour * 3600)
                return .quantitySample(QuantitySample(
                    type: steps, quantity: Quantity(count, .count), start: start, end: start.addingTimeInterval(600),
                    metadata: [MetadataKey.syncIdentifier: .string(id), MetadataKey.syncVersion: .number(version)]))
            }
            // The server's copy of what the device holds, kept by sync identifier.
            var mirror: [UUID: HealthObject] = [:]
            var anchor: QueryAnchor?
            func sync() async throws {
                let changes = try await AnchoredObjectQueryDescriptor(type: Types.stepCount, anchor: anchor).result(for: app)
                for deleted in changes.deletedObjects { mirror[deleted.uuid] = nil }
                for added in changes.addedObjects { mirror[added.uuid] = added }
                anchor = changes.newAnchor
            }
            try await app.save([walk(100, hour: 1, id: "a", version: 1), walk(200, hour: 2, id: "b", version: 1)])
            try await owner.save(.quantitySample(QuantitySample(type: steps, quantity: Quantity(50, .count), start: Samples.base, end: Samples.base.addingTimeInterval(60))))
            try await sync()
            #expect(mirror.count == 3)
            // The device edits "a" (a new version) and deletes "b"; the owner's sample stays.
            try await app.save(walk(150, hour: 1, id: "a", version: 2))
            let b = try #require(mirror.values.first { $0.syncIdentifier == "b" })
            try await app.delete([b.uuid])
            try await sync()
            #expect(mirror.values.compactMap(\.quantitySample).map(\.quantity.value).sorted() == [50, 150])
            let day = try await app.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: steps, range: DateInterval(start: Samples.base, duration: 86_400),
                intervals: try StatisticsIntervals(anchor: Samples.base, every: 1, .day, timeZone: .gmt), options: .cumulativeSum))
            #expect(day.statistics.first?.sumQuantity()?.value == 200, "each version counted once, the deleted sample not at all")
            try await sync()
            #expect(mirror.count == 2, "nothing more changed")
            for store in [app, owner] { await store.close() }
        }
    }
}
