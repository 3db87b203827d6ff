import Foundation
import HealthModel
import LMDB
import LedgerSchema
import TestSupport
import Testing

@testable import Ledger

/// Statistics from rollups equal statistics from samples (docs/LEDGER.md, "Rollups").
@Suite("Rollup statistics")
struct RollupStatisticsTests {
    /// A clock hour (22:00 UTC on 14 November 2023).
    static let base = Date(timeIntervalSince1970: 1_699_999_200)
    static let noise = try! QuantityType("HKQuantityTypeIdentifierEnvironmentalAudioExposure")
    static let types: [(QuantityType, String)] = [(Fixtures.steps, "count"), (Fixtures.heartRate, "count/min"), (Fixtures.bodyMass, "kg"), (noise, "dBASPL")]
    static let sources: [Source] = [.owner, Fixtures.appA, Fixtures.appB]
    static let zones = ["UTC", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe"].map { TimeZone(identifier: $0)! }

    /// How a seed lays its samples out.
    enum Layout: CaseIterable {
        /// Each sample inside one hour, each hour one source's: rollups answer whole-hour buckets.
        case hourPerSource
        /// Each sample inside one hour, sources mixed within hours.
        case mixedHours
        /// Some samples cross hours (and a few last for many).
        case crossing
    }

    static func sample(_ type: QuantityType, _ unit: String, value: Double, start: Double, length: Double) -> HealthObject {
        let start = base.addingTimeInterval(start)
        return .quantitySample(QuantitySample(type: type, quantity: try! Quantity(value, unit), start: start, end: start.addingTimeInterval(length)))
    }

    /// A series sample of 1–12 values (instants, or each over its own slot, some instants at
    /// one moment) over `length` seconds from `start`.
    static func series(_ type: QuantityType, _ unit: String, start: Double, length: Double, using random: inout SplitMix) -> HealthObject {
        let count = Int.random(in: 1...max(1, min(12, Int(length))), using: &random)
        let slot = max(1, (length / Double(count)).rounded(.down))
        var entries: [QuantitySeriesEntry] = []
        for index in 0..<count {
            let from = base.addingTimeInterval(start + Double(index) * slot)
            let value = (Double.random(in: 1...120, using: &random) * 1000).rounded() / 1000
            switch Int.random(in: 0..<4, using: &random) {
            case 0: entries.append(QuantitySeriesEntry(value: value, start: from, end: from))
            case 1: entries += [QuantitySeriesEntry(value: value, start: from, end: from), QuantitySeriesEntry(value: value / 2, start: from, end: from)]
            default: entries.append(QuantitySeriesEntry(value: value, start: from, end: from.addingTimeInterval(slot)))
            }
        }
        return .quantitySample(QuantitySample(type: type, unit: try! HealthUnit(unit), series: entries))
    }

    @Test(
        "rollup statistics equal sample statistics bit for bit, and the whole-bucket merge up to rounding: random samples, series samples, sources, priorities, deletes, intervals, time zones and readers",
        arguments: 0..<36)
    func rollupsEqualSamples(seed: Int) async throws {
        // Seeded: a failing seed reproduces.
        var random = SplitMix(state: UInt64(seed) &* 7919 &+ 17)
        let layout = Layout.allCases[seed % Layout.allCases.count]
        let (type, unit) = Self.types[(seed / Layout.allCases.count) % Self.types.count]
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "rollups")
        let readGranted = Bool.random(using: &random)
        try await ledger.authorize([Fixtures.appA], share: [type.objectType], read: readGranted ? [type.objectType] : [])
        try await ledger.authorize([Fixtures.appB], share: [type.objectType])
        let sourceCount = Int.random(in: 1...3, using: &random)
        let hours = 72
        let hourSource = (0..<hours).map { _ in Int.random(in: 0..<sourceCount, using: &random) }

        // Samples, saved by their sources in batches of random size.
        var bySource: [[HealthObject]] = Array(repeating: [], count: 3)
        for _ in 0..<Int.random(in: 40...400, using: &random) {
            // Mixed hours crowd into a few, so that sources overlap.
            let hour = Int.random(in: 0..<(layout == .mixedHours ? 6 : hours), using: &random)
            let offset = Double(Int.random(in: 0..<3600, using: &random)) + (Bool.random(using: &random) ? 0 : 0.5)
            let source = layout == .hourPerSource ? hourSource[hour] : Int.random(in: 0..<sourceCount, using: &random)
            var length = 0.0
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4: length = 0
            case 4..<9: length = Double(Int.random(in: 1...max(1, 3600 - Int(offset.rounded(.up))), using: &random))
            default:
                if layout == .crossing { length = Double(Int.random(in: 600...(Bool.random(using: &random) ? 3 * 3600 : 40 * 3600), using: &random)) }
            }
            if Double(hour) * 3600 + offset + length > Double(hours * 3600) { length = 0 }
            // Values that do not add up exactly in binary.
            let value = (Double.random(in: 1...120, using: &random) * 1000).rounded() / 1000
            if length >= 1, Int.random(in: 0..<5, using: &random) == 0 {
                bySource[source].append(Self.series(type, unit, start: Double(hour) * 3600 + offset, length: length, using: &random))
            } else {
                bySource[source].append(Self.sample(type, unit, value: value, start: Double(hour) * 3600 + offset, length: length))
            }
        }
        var saved: [UUID] = []
        for (index, objects) in bySource.enumerated() {
            var rest = objects[...]
            while !rest.isEmpty {
                let batch = rest.prefix(Int.random(in: 1...60, using: &random))
                rest = rest.dropFirst(batch.count)
                let principal: Principal = index == 0 ? .owner : .app(Self.sources[index])
                saved += try await ledger.save(Array(batch), by: principal).map(\.uuid)
            }
        }
        // Some deleted, a few at a time (each delete recomputes its hour's rollup).
        for uuid in saved.shuffled(using: &random).prefix(saved.count / 8) { _ = try await ledger.delete([uuid], by: .owner) }
        // A random priority among the sources that saved.
        let present = (0..<3).filter { !bySource[$0].isEmpty }.map { Self.sources[$0].bundleIdentifier }
        if present.count > 1, Bool.random(using: &random) {
            try await ledger.setSourcePriority(for: type.objectType, bundleIdentifiers: present.shuffled(using: &random), by: .owner)
        }

        var options: StatisticsOptions = type.aggregationStyle == .cumulative ? [.cumulativeSum] : [.discreteAverage, .discreteMin, .discreteMax]
        for extra in [StatisticsOptions.separateBySource, .mostRecent, .duration] where Bool.random(using: &random) { options.insert(extra) }
        var answered = 0
        for _ in 0..<6 {
            let (count, unit) = [(30, StatisticsIntervals.Unit.minute), (1, .hour), (3, .hour), (1, .day), (1, .week)].randomElement(using: &random)!
            let zone = Self.zones.randomElement(using: &random)!
            let anchor = Self.base.addingTimeInterval([0, 1800, Double(Int.random(in: 0..<86_400, using: &random))].randomElement(using: &random)!)
            let from = Self.base.addingTimeInterval(-Double(Int.random(in: 0...6, using: &random)) * 3600)
            let range = DateInterval(start: from, end: Self.base.addingTimeInterval(Double(Int.random(in: 1...80, using: &random)) * 3600))
            let query = StatisticsCollectionQuery(
                type: type, range: range, intervals: try StatisticsIntervals(anchor: anchor, every: count, unit, timeZone: zone), options: options)
            for principal in [Principal.owner, .app(Fixtures.appA)] {
                let fastest = try ledger.statisticsCollection(query, as: principal, computation: .fastest)
                let samples = try ledger.statisticsCollection(query, as: principal, computation: .samples)
                let whole = try ledger.statisticsCollection(query, as: principal, computation: .wholeBuckets)
                #expect(fastest == samples, "seed \(seed): \(query)")
                #expect(Self.close(samples, whole), "seed \(seed): \(query)")
                answered += fastest.count
            }
            let single = StatisticsQuery(type: type, interval: range, options: options)
            let fastest = try ledger.statistics(single, as: .owner, computation: .fastest)
            #expect(fastest == (try ledger.statistics(single, as: .owner, computation: .samples)), "seed \(seed)")
            #expect(Self.close(fastest.map { [$0] } ?? [], try ledger.statistics(single, as: .owner, computation: .wholeBuckets).map { [$0] } ?? []))
        }
        #expect(answered > 0)
        // The rollups a replay rebuilds are the live ones, byte for byte.
        #expect(try ledger.replay().identical)
    }

    /// Equal but for rounding: the same buckets, sources and options answered.
    static func close(_ left: [Statistics], _ right: [Statistics]) -> Bool {
        guard left.count == right.count else { return false }
        func near(_ a: Quantity?, _ b: Quantity?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            return a.unit == b.unit && abs(a.value - b.value) <= 1e-9 * max(1, abs(a.value), abs(b.value))
        }
        func near(_ a: StatisticsValues?, _ b: StatisticsValues?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            return near(a.sum, b.sum) && near(a.average, b.average) && near(a.minimum, b.minimum) && near(a.maximum, b.maximum)
                && near(a.mostRecent, b.mostRecent) && a.mostRecentInterval == b.mostRecentInterval && a.duration == b.duration
        }
        return zip(left, right).allSatisfy { a, b in
            a.startDate == b.startDate && a.endDate == b.endDate && a.sources == b.sources && near(a.values, b.values)
                && Set(a.valuesBySource.keys) == Set(b.valuesBySource.keys) && a.valuesBySource.keys.allSatisfy { near(a.valuesBySource[$0], b.valuesBySource[$0]) }
        }
    }

    @Test(
        "every hour holding a source's samples has its row but the newest: saves into it write none, a sample in a later hour closes it, deleting that sample opens it again"
    )
    func openHour() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "rollups")
        @discardableResult
        func save(_ moments: [(hour: Int, minute: Int)]) async throws -> [UUID] {
            let objects = moments.map { Self.sample(Fixtures.heartRate, "count/min", value: 70, start: Double($0.hour * 3600 + $0.minute * 60), length: 0) }
            return try await ledger.save(objects, by: .owner).map(\.uuid)
        }
        /// The hours (from `base`) that have rows, with the number of samples each counts.
        func rows() throws -> [Int: Int64] {
            try ledger.read { snapshot in
                let owner = try #require(try SourceRegistry.code(of: Source.owner.bundleIdentifier, in: snapshot))
                var rows: [Int: Int64] = [:]
                try Rollups.rows(type: Fixtures.heartRate.objectType.code, source: owner, from: .min, to: .max, in: snapshot) { hour, partial in
                    rows[Int((hour - microseconds(Self.base)) / Rollups.hour)] = partial.count
                }
                return rows
            }
        }
        let first = try await save([(0, 10), (1, 10), (2, 10)])
        #expect(try rows() == [0: 1, 1: 1])
        let current = try await save([(2, 20)])
        #expect(try rows() == [0: 1, 1: 1])
        // A late sample for a closed hour recomputes its row.
        try await save([(1, 30)])
        #expect(try rows() == [0: 1, 1: 2])
        let later = try await save([(5, 0)])
        #expect(try rows() == [0: 1, 1: 2, 2: 2])
        _ = try await ledger.delete(later, by: .owner)
        #expect(try rows() == [0: 1, 1: 2])
        // Hour 2 emptied: hour 1 is open again.
        _ = try await ledger.delete(current + [first[2]], by: .owner)
        #expect(try rows() == [0: 1])
        // Several hours in one request: every one but the newest gets its row, and so does the hour open before.
        try await save([(4, 0), (3, 0), (6, 0), (4, 30)])
        #expect(try rows() == [0: 1, 1: 2, 3: 1, 4: 2])

        let hourly = try StatisticsIntervals(anchor: Self.base, every: 1, .hour, timeZone: TimeZone(identifier: "UTC")!)
        let query = StatisticsCollectionQuery(
            type: Fixtures.heartRate, range: DateInterval(start: Self.base, duration: 8 * 3600), intervals: hourly, options: [.discreteAverage])
        #expect(try ledger.statisticsCollection(query, as: .owner).count == 5)
        #expect(try ledger.statisticsCollection(query, as: .owner) == (try ledger.statisticsCollection(query, as: .owner, computation: .samples)))
        #expect(try ledger.replay().identical)
    }

    @Test(
        "a series sample counts as its values, each over its own interval, in statistics from samples and from rollups, with a predicate, and in its workout's statistics; clear and encrypted",
        arguments: [false, true])
    func seriesValues(encrypted: Bool) async throws {
        let keyFile = URL(filePath: NSTemporaryDirectory()).appending(path: "series-\(UUID().uuidString).key")
        defer { try? FileManager.default.removeItem(at: keyFile) }
        var configuration = LedgerConfiguration()
        if encrypted { configuration.masterKey = try MasterKey.create(at: keyFile.path) }
        let temporary = try TemporaryStore(configuration: configuration)
        let ledger = try temporary.ledgerStore.createLedger(id: "series")
        func at(_ minutes: Double) -> Date { Self.base.addingTimeInterval(minutes * 60) }
        // Heart rate every five minutes from 22:40 to 23:15 (instants); steps per minute from 22:58 to 23:02.
        let rates: [Double] = [60, 150, 80, 90, 170, 100, 110, 50]
        let heart = QuantitySample(
            type: Fixtures.heartRate, unit: Fixtures.bpm,
            series: rates.enumerated().map { QuantitySeriesEntry(value: $1, start: at(40 + 5 * Double($0)), end: at(40 + 5 * Double($0))) })
        let steps = QuantitySample(
            type: Fixtures.steps, unit: try HealthUnit("count"),
            series: [10, 20, 30, 40].enumerated().map { QuantitySeriesEntry(value: $1, start: at(58 + Double($0)), end: at(59 + Double($0))) })
        #expect(heart.quantity.value == 101.25 && steps.quantity.value == 100)
        try await ledger.save([.quantitySample(heart), .quantitySample(steps)], by: .owner)
        // Later samples close the series' hours, so that they have rollup rows.
        try await ledger.save([Self.sample(Fixtures.heartRate, "count/min", value: 65, start: 5 * 3600, length: 0), Self.sample(Fixtures.steps, "count", value: 5, start: 5 * 3600, length: 60)], by: .owner)

        let hourly = try StatisticsIntervals(anchor: Self.base, every: 1, .hour, timeZone: TimeZone(identifier: "UTC")!)
        let range = DateInterval(start: Self.base, duration: 2 * 3600)
        func collection(_ type: QuantityType, _ options: StatisticsOptions, predicate: ObjectPredicate? = nil) throws -> [Statistics] {
            let query = StatisticsCollectionQuery(type: type, range: range, intervals: hourly, options: options, predicate: predicate)
            let fastest = try ledger.statisticsCollection(query, as: .owner)
            #expect(fastest == (try ledger.statisticsCollection(query, as: .owner, computation: .samples)))
            #expect(Self.close(fastest, try ledger.statisticsCollection(query, as: .owner, computation: .wholeBuckets)))
            return fastest
        }
        func bpm(_ quantity: Quantity?) throws -> Double? { try quantity.map { (try $0.doubleValue(for: Fixtures.bpm) * 1e9).rounded() / 1e9 } }

        // Each hour's minimum and maximum are its values', not the sample's mean (101.25).
        let rate = try collection(Fixtures.heartRate, [.discreteMin, .discreteMax, .discreteAverage, .mostRecent])
        #expect(try rate.map { try bpm($0.values.minimum) } == [60, 50])
        #expect(try rate.map { try bpm($0.values.maximum) } == [150, 170])
        // Weighted by the time each value holds: to the next value, the last to the end of its hour.
        #expect(try bpm(rate[0].values.average) == 95)
        #expect(try bpm(rate[1].values.average) == ((170.0 * 5 + 100 * 5 + 110 * 5 + 50 * 45) / 60 * 1e9).rounded() / 1e9)
        #expect(try bpm(rate[1].values.mostRecent) == 50 && rate[1].values.mostRecentInterval == DateInterval(start: at(75), end: at(75)))
        // Each minute's steps count in the hour that holds them: 10 + 20, then 30 + 40 (not 50 and 50).
        let walked = try collection(Fixtures.steps, [.cumulativeSum, .duration])
        #expect(walked.map { $0.values.sum?.value } == [30, 70])
        #expect(walked.map(\.values.duration) == [120, 120])
        // With a predicate (read through another plan), the same.
        let predicated = try collection(Fixtures.heartRate, [.discreteMin, .discreteMax], predicate: .sources([Source.owner.bundleIdentifier]))
        #expect(try predicated.map { try bpm($0.values.maximum) } == [150, 170])
        // A single statistic over the whole series.
        let whole = try #require(try ledger.statistics(StatisticsQuery(type: Fixtures.heartRate, interval: range, options: [.discreteMin, .discreteMax]), as: .owner))
        #expect(try bpm(whole.values.minimum) == 50 && bpm(whole.values.maximum) == 170)

        // The series' last value is an instant at the sample's end (23:15): a range starting
        // there holds it, though the sample (ending there) does not overlap the range.
        let quarter = try StatisticsIntervals(anchor: at(75), every: 15, .minute, timeZone: TimeZone(identifier: "UTC")!)
        for predicate in [nil, ObjectPredicate.sources([Source.owner.bundleIdentifier])] {
            let query = StatisticsCollectionQuery(
                type: Fixtures.heartRate, range: DateInterval(start: at(75), end: at(90)), intervals: quarter, options: [.discreteMin, .discreteMax],
                predicate: predicate)
            let last = try ledger.statisticsCollection(query, as: .owner)
            #expect(try last.map { try bpm($0.values.minimum) } == [50] && last.map { try bpm($0.values.maximum) } == [50])
            #expect(last == (try ledger.statisticsCollection(query, as: .owner, computation: .samples)))
        }

        // Two values of one series at one moment: the most recent is the later in the series.
        let twice = QuantitySample(
            type: Fixtures.heartRate, unit: Fixtures.bpm,
            series: [100, 110].map { QuantitySeriesEntry(value: $0, start: at(150), end: at(150)) })
        try await ledger.save([.quantitySample(twice)], by: .owner)
        let recent = StatisticsQuery(type: Fixtures.heartRate, interval: DateInterval(start: at(120), end: at(180)), options: [.mostRecent])
        for computation in [StatisticsComputation.fastest, .samples, .wholeBuckets] {
            #expect(try bpm(try ledger.statistics(recent, as: .owner, computation: computation)?.values.mostRecent) == 110)
        }

        // A workout over the series: its statistics count the values too, and an activity
        // starting at the series' last instant holds it.
        let workout = Workout(
            configuration: WorkoutConfiguration(activityType: .running), start: at(40), end: at(80),
            activities: [WorkoutActivity(configuration: WorkoutConfiguration(activityType: .running), start: at(75), end: at(80))])
        try await ledger.save([.workout(workout)], by: .owner)
        try await ledger.associate([heart.uuid], with: workout.uuid, by: .owner)
        let statistics = try #require(try ledger.workoutStatistics(for: workout.uuid, as: .owner))
        let during = try #require(statistics.statistics(for: Fixtures.heartRate))
        #expect(try bpm(during.values.minimum) == 50 && bpm(during.values.maximum) == 170)
        let lastActivity = try #require(statistics.statistics(for: Fixtures.heartRate, activity: workout.activities[0].uuid))
        #expect(try bpm(lastActivity.values.minimum) == 50 && bpm(lastActivity.values.maximum) == 50)
        #expect(try ledger.replay().identical)
    }

    @Test("a ledger laid out before series were marked (layout 15) has its projections rebuilt on opening: its statistics count a series' values")
    func seriesLayoutUpgrade() async throws {
        let temporary = try TemporaryStore()
        func at(_ minutes: Double) -> Date { Self.base.addingTimeInterval(minutes * 60) }
        let query = StatisticsQuery(type: Fixtures.heartRate, interval: DateInterval(start: Self.base, duration: 3600), options: [.discreteMin, .discreteMax])
        func extremes(_ ledger: Ledger, _ computation: StatisticsComputation) throws -> [Double?] {
            let values = try ledger.statistics(query, as: .owner, computation: computation)?.values
            return try [values?.minimum, values?.maximum].map { try $0.map { (try $0.doubleValue(for: Fixtures.bpm) * 1e6).rounded() / 1e6 } }
        }
        // Written, then left as layout 15 left it: no row marked (statistics from the samples
        // then take the series' mean, 96.67).
        func writeLayoutFifteen() async throws {
            let ledger = try temporary.ledgerStore.createLedger(id: "upgrade")
            let heart = QuantitySample(
                type: Fixtures.heartRate, unit: Fixtures.bpm,
                series: [60, 150, 80].enumerated().map { QuantitySeriesEntry(value: $1, start: at(10 + 5 * Double($0)), end: at(10 + 5 * Double($0))) })
            try await ledger.save([.quantitySample(heart), Self.sample(Fixtures.heartRate, "count/min", value: 70, start: 3 * 3600, length: 0)], by: .owner)
            #expect(try extremes(ledger, .samples) == [60, 150])
            try ledger.environment.write { txn in
                for database in [ledger.databases.byStart, ledger.databases.bySource] {
                    var rows: [([UInt8], [UInt8])] = []
                    try txn.withCursor(on: database) { cursor in
                        var entry = try cursor.first()
                        while let current = entry {
                            var value = Array(current.value)
                            value[8] &= 0x7F
                            rows.append((Array(current.key), value))
                            entry = try cursor.next()
                        }
                    }
                    for (key, value) in rows { try txn.put(value, forKey: key, in: database) }
                }
                try txn.put([0, 0, 0, 15], forKey: ProjectionLayout.key, in: ledger.databases.meta)
            }
            #expect(try extremes(ledger, .samples).map { $0?.rounded() } == [97, 97])
        }
        try await writeLayoutFifteen()
        temporary.close()

        let reopened = try temporary.reopen().ledger("upgrade")
        #expect(try reopened.read { try ProjectionLayout.recorded(in: $0) } == ProjectionLayout.current)
        #expect(try extremes(reopened, .samples) == [60, 150])
        #expect(try extremes(reopened, .fastest) == [60, 150])
        #expect(try reopened.replay().identical)
    }

    @Test("a query reads the rollups: a tampered row shows in the result, verify's replay tells it apart, and a replay repairs it")
    func rollupsAreRead() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "rollups")
        // Per-minute heart rate over three hours, every sample inside its hour.
        try await ledger.save((0..<180).map { Self.sample(Fixtures.heartRate, "count/min", value: Double(60 + $0 % 40), start: Double($0) * 60, length: 0) }, by: .owner)
        let hourly = try StatisticsIntervals(anchor: Self.base, every: 1, .hour, timeZone: TimeZone(identifier: "UTC")!)
        let query = StatisticsCollectionQuery(
            type: Fixtures.heartRate, range: DateInterval(start: Self.base, duration: 3 * 3600), intervals: hourly, options: [.discreteMax])
        let honest = try ledger.statisticsCollection(query, as: .owner)
        let maximum = try #require(honest.first?.maximumQuantity())
        #expect(honest.map { $0.maximumQuantity() } == [maximum, maximum, maximum])
        #expect(try abs(maximum.doubleValue(for: Fixtures.bpm) - 99) < 1e-9)

        // The second hour's row claims a maximum of 1,000 (in the canonical unit, count/s).
        try ledger.environment.write { txn in
            let owner = try #require(try SourceRegistry.code(of: Source.owner.bundleIdentifier, in: LedgerSnapshot(txn, ledger.databases)))
            let key = Rollups.key(type: Fixtures.heartRate.objectType.code, source: owner, hour: microseconds(Self.base) + Rollups.hour)
            var row = try StatisticsPartial(encoded: try #require(try txn.get(key, in: ledger.databases.rollups)))
            row.maximum = 1_000
            try txn.put(row.encoded, forKey: key, in: ledger.databases.rollups)
        }
        #expect(try ledger.statisticsCollection(query, as: .owner).map { $0.maximumQuantity()?.value } == [maximum.value, 1_000, maximum.value])
        #expect(try ledger.statisticsCollection(query, as: .owner, computation: .samples) == honest)
        #expect(try !ledger.replay().identical)
        #expect(try ledger.replay(install: true).installed)
        #expect(try ledger.statisticsCollection(query, as: .owner) == honest)
    }
}
