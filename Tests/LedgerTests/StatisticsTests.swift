import Foundation
import HealthModel
import TestSupport
import Testing

@testable import Ledger

/// Statistics and statistics collections (docs/SEMANTICS.md §7) and what each reader sees of them (§6).
@Suite("Statistics")
struct StatisticsTests {
    static let steps = Fixtures.steps
    static let appA = Principal.app(Fixtures.appA)
    static let appB = Principal.app(Fixtures.appB)
    static let hour = DateInterval(start: Fixtures.base, duration: 3_600)

    static func sample(_ type: QuantityType, _ value: Double, _ unit: String, from start: TimeInterval, to end: TimeInterval) -> HealthObject {
        .quantitySample(QuantitySample(
            type: type, quantity: try! Quantity(value, unit), start: Fixtures.base.addingTimeInterval(start), end: Fixtures.base.addingTimeInterval(end)))
    }

    static func ledger(_ temporary: TemporaryStore, _ id: String = "stats", share: [ObjectType] = [Fixtures.steps.objectType]) async throws -> Ledger {
        let ledger = try temporary.ledgerStore.createLedger(id: id)
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: share)
        return ledger
    }

    @Test("overlapping sources merge by priority, partly covered samples in proportion; separated, they are raw")
    func mergeByPriority() async throws {
        let temporary = try TemporaryStore()
        let ledger = try await Self.ledger(temporary)
        // The docs/SEMANTICS.md §7 vector: A (first to write, so first in priority) 120 steps over [0, 1200 s];
        // B 90 steps over [600 s, 1500 s] → 120 + 90 · 300/900 = 150; a naive sum gives 210.
        try await ledger.save([Self.sample(Self.steps, 120, "count", from: 0, to: 1200)], by: Self.appA)
        try await ledger.save([Self.sample(Self.steps, 90, "count", from: 600, to: 1500)], by: Self.appB)
        let query = StatisticsQuery(type: Self.steps, interval: Self.hour, options: [.cumulativeSum, .separateBySource, .duration])
        let statistics = try #require(try ledger.statistics(query, as: .owner))
        #expect(statistics.sumQuantity() == Quantity(150, .count))
        #expect(statistics.sumQuantity(for: Fixtures.appA) == Quantity(120, .count))
        #expect(statistics.sumQuantity(for: Fixtures.appB) == Quantity(90, .count))
        #expect(statistics.sources == [Fixtures.appA, Fixtures.appB])
        #expect(statistics.values.duration == 1500)
        #expect(statistics.valuesBySource[Fixtures.appB]?.duration == 900)
        #expect(statistics.startDate == Self.hour.start && statistics.endDate == Self.hour.end)

        // The owner puts B first: 90 + 120 · 600/1200 = 150 again, by symmetry; with B at 60
        // steps it shows: A first 120 + 60 · 300/900 = 140, B first 60 + 60 = 120.
        try await ledger.save([Self.sample(Self.steps, 60, "count", from: 600 + 3600, to: 1500 + 3600)], by: Self.appB)
        try await ledger.save([Self.sample(Self.steps, 120, "count", from: 3600, to: 1200 + 3600)], by: Self.appA)
        let next = DateInterval(start: Self.hour.end, duration: 3_600)
        let sum = { try #require(try ledger.statistics(StatisticsQuery(type: Self.steps, interval: next, options: .cumulativeSum), as: .owner)).sumQuantity()?.value }
        #expect(try sum() == 140)
        try await ledger.setSourcePriority(for: Self.steps.objectType, bundleIdentifiers: [Fixtures.appB.bundleIdentifier], by: .owner)
        #expect(try sum() == 120)
    }

    @Test("sums split across interval boundaries in proportion; averages follow the type's style")
    func proratingAndAverages() async throws {
        let temporary = try TemporaryStore()
        let heartRate = Fixtures.heartRate
        let noise = try QuantityType("HKQuantityTypeIdentifierEnvironmentalAudioExposure")
        let ledger = try await Self.ledger(temporary, share: [Self.steps.objectType, heartRate.objectType, Fixtures.bodyMass.objectType, noise.objectType])
        // 100 steps over [30 min, 90 min]: half in each hour.
        try await ledger.save([Self.sample(Self.steps, 100, "count", from: 1800, to: 5400)], by: .owner)
        let hourly = try StatisticsIntervals(anchor: Fixtures.base, every: 1, .hour, timeZone: TimeZone(identifier: "UTC")!)
        let collection = try ledger.statisticsCollection(
            StatisticsCollectionQuery(type: Self.steps, range: DateInterval(start: Fixtures.base, duration: 4 * 3600), intervals: hourly, options: .cumulativeSum),
            as: .owner)
        #expect(collection.map(\.startDate) == [Fixtures.base, Fixtures.base.addingTimeInterval(3600)])
        #expect(collection.map { $0.sumQuantity()?.value } == [50, 50])

        // Heart rate: 60 at 0, 120 at 10 min; each holds until the next (the last to the hour's end).
        try await ledger.save([Self.sample(heartRate, 60, "count/min", from: 0, to: 0), Self.sample(heartRate, 120, "count/min", from: 600, to: 600)], by: .owner)
        let rate = try #require(try ledger.statistics(
            StatisticsQuery(type: heartRate, interval: Self.hour, options: [.discreteAverage, .discreteMin, .discreteMax, .mostRecent]), as: .owner))
        #expect(try abs(rate.averageQuantity()!.doubleValue(for: HealthUnit("count/min")) - 110) < 1e-9)
        #expect(try rate.minimumQuantity()!.doubleValue(for: HealthUnit("count/min")) == 60)
        #expect(try rate.maximumQuantity()!.doubleValue(for: HealthUnit("count/min")) == 120)
        #expect(try rate.mostRecentQuantity()!.doubleValue(for: HealthUnit("count/min")) == 120)
        #expect(rate.values.mostRecentInterval == DateInterval(start: Fixtures.base.addingTimeInterval(600), duration: 0))
        // With no interval, the last value holds as long as the others did on average: (60 + 120) / 2.
        let open = try #require(try ledger.statistics(StatisticsQuery(type: heartRate, options: .discreteAverage), as: .owner))
        #expect(try abs(open.averageQuantity()!.doubleValue(for: HealthUnit("count/min")) - 90) < 1e-9)
        // Body mass: the plain mean.
        try await ledger.save([Self.sample(Fixtures.bodyMass, 70, "kg", from: 0, to: 0), Self.sample(Fixtures.bodyMass, 80, "kg", from: 60, to: 60)], by: .owner)
        let mass = try #require(try ledger.statistics(StatisticsQuery(type: Fixtures.bodyMass, interval: Self.hour, options: .discreteAverage), as: .owner))
        #expect(mass.averageQuantity() == Quantity(75, try HealthUnit("kg")))
        // Sound levels average as energies: 60 and 80 dB for ten minutes each → 77.0 dB.
        try await ledger.save([Self.sample(noise, 60, "dBASPL", from: 0, to: 600), Self.sample(noise, 80, "dBASPL", from: 600, to: 1200)], by: .owner)
        let level = try #require(try ledger.statistics(
            StatisticsQuery(type: noise, interval: DateInterval(start: Fixtures.base, duration: 1200), options: .discreteAverage), as: .owner))
        #expect(abs(level.averageQuantity()!.value - 10 * log10((1e6 + 1e8) / 2)) < 1e-9)
    }

    @Test("property: a collection's intervals equal one statistics query per interval", arguments: [21, 22] as [UInt64])
    func collectionMatchesQueries(seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let temporary = try TemporaryStore()
        let ledger = try await Self.ledger(temporary, share: [Self.steps.objectType, Fixtures.heartRate.objectType])
        for principal in [Principal.owner, Self.appA, Self.appB] {
            try await ledger.save((0..<120).map { _ in
                let start = Double(Int.random(in: -7_200..<(2 * 86_400), using: &random))
                let length = [0, 60, 600, 5_400, 4 * 3_600][Int.random(in: 0..<5, using: &random)]
                return Self.sample(Self.steps, Double(Int.random(in: 1...300, using: &random)), "count", from: start, to: start + Double(length))
            }, by: principal)
            try await ledger.save((0..<200).map { _ in
                let start = Double(Int.random(in: 0..<(2 * 86_400), using: &random))
                return Self.sample(Fixtures.heartRate, Double(Int.random(in: 50...150, using: &random)), "count/min", from: start, to: start)
            }, by: principal)
        }
        let hours = try StatisticsIntervals(anchor: Fixtures.base.addingTimeInterval(1_800), every: 2, .hour, timeZone: .gmt)
        let range = DateInterval(start: Fixtures.base, duration: 2 * 86_400)
        let cases: [(QuantityType, StatisticsOptions)] = [
            (Self.steps, [.cumulativeSum, .duration, .mostRecent]), (Self.steps, [.cumulativeSum, .separateBySource]),
            (Fixtures.heartRate, [.discreteAverage, .discreteMin, .discreteMax]), (Fixtures.heartRate, [.discreteAverage, .separateBySource]),
        ]
        for (type, options) in cases {
            for principal in [Principal.owner, Self.appA] {
                let collection = try ledger.statisticsCollection(StatisticsCollectionQuery(type: type, range: range, intervals: hours, options: options), as: principal)
                var expected: [Statistics] = []
                for interval in hours.intervals(from: range.start, to: range.end) {
                    if let statistics = try ledger.statistics(StatisticsQuery(type: type, interval: interval, options: options), as: principal) { expected.append(statistics) }
                }
                #expect(collection.count == expected.count, "\(type) \(options) \(principal)")
                for (got, want) in zip(collection, expected) {
                    #expect(got.startDate == want.startDate && got.sources == want.sources)
                    for (a, b) in [(got.values.sum, want.values.sum), (got.values.average, want.values.average), (got.values.minimum, want.values.minimum),
                                   (got.values.maximum, want.values.maximum), (got.values.mostRecent, want.values.mostRecent)] {
                        #expect((a == nil) == (b == nil))
                        if let a, let b { #expect(abs(a.value - b.value) <= 1e-9 * max(1, abs(b.value)), "\(type) \(got.startDate)") }
                    }
                    #expect(got.values.duration == want.values.duration)
                    #expect(Set(got.valuesBySource.keys) == Set(want.valuesBySource.keys))
                }
            }
        }
    }

    @Test("options that do not fit the type are refused, naming the option and the type")
    func optionsValidation() async throws {
        let temporary = try TemporaryStore()
        let ledger = try await Self.ledger(temporary)
        func refused(_ type: QuantityType, _ options: StatisticsOptions, _ words: [String]) {
            #expect {
                try ledger.statistics(StatisticsQuery(type: type, options: options), as: .owner)
            } throws: { error in
                guard let error = error as? HealthError, error.code == .invalidArgument else { return false }
                return words.allSatisfy(error.message.contains)
            }
        }
        refused(Self.steps, .discreteAverage, ["discreteAverage", Self.steps.identifier])
        refused(Self.steps, [.cumulativeSum, .discreteMax], ["discreteMax", Self.steps.identifier])
        refused(Fixtures.heartRate, .cumulativeSum, ["cumulativeSum", Fixtures.heartRate.identifier])
        refused(Self.steps, [], ["at least one"])
        refused(Self.steps, .separateBySource, ["at least one"])
        refused(Self.steps, StatisticsOptions(rawValue: 128 | 16), ["unknown"])
        #expect(try ledger.statistics(StatisticsQuery(type: Self.steps, options: [.mostRecent, .duration]), as: .owner) == nil)
        #expect(throws: HealthError.self) { try StatisticsIntervals(anchor: Fixtures.base, every: 0, .day, timeZone: .gmt) }
        let minutes = try StatisticsIntervals(anchor: Fixtures.base, every: 1, .minute, timeZone: .gmt)
        #expect { try ledger.statisticsCollection(
            StatisticsCollectionQuery(type: Self.steps, range: DateInterval(start: Fixtures.base, duration: 365 * 86_400), intervals: minutes, options: .cumulativeSum), as: .owner)
        } throws: { ($0 as? HealthError)?.code == .invalidArgument }
    }

    @Test("hostile ranges: dates outside the calendar are refused, long samples over many intervals are bounded")
    func hostileRanges() async throws {
        let temporary = try TemporaryStore()
        let ledger = try await Self.ledger(temporary, share: [Self.steps.objectType, Fixtures.heartRate.objectType])
        // A heart-rate sample in the year 500, averaged over an open-ended or far interval.
        let ancient = Date(timeIntervalSince1970: -46_000_000_000)
        try await ledger.save([.quantitySample(QuantitySample(type: Fixtures.heartRate, quantity: Quantity(60, Fixtures.bpm), start: ancient, end: ancient))], by: Self.appA)
        #expect(try ledger.statistics(StatisticsQuery(type: Fixtures.heartRate, options: .discreteAverage), as: Self.appA)?.averageQuantity() != nil)
        let far = DateInterval(start: ancient.addingTimeInterval(-1), end: Date(timeIntervalSince1970: 9e15))
        #expect { try ledger.statistics(StatisticsQuery(type: Fixtures.heartRate, interval: far, options: .discreteAverage), as: Self.appA) }
            throws: { ($0 as? HealthError)?.code == .invalidArgument }
        let open = DateInterval(start: .distantPast, end: .distantFuture)
        #expect(try ledger.statistics(StatisticsQuery(type: Fixtures.heartRate, interval: open, options: .discreteAverage), as: Self.appA) != nil)
        // 50 year-long samples over minute intervals: 50 × 100,000 pairs is past the bound.
        try await ledger.save((0..<50).map { Self.sample(Self.steps, 1, "count", from: Double($0), to: 365 * 86_400) }, by: Self.appA)
        let minutes = try StatisticsIntervals(anchor: Fixtures.base, every: 1, .minute, timeZone: .gmt)
        #expect {
            try ledger.statisticsCollection(
                StatisticsCollectionQuery(type: Self.steps, range: DateInterval(start: Fixtures.base, duration: 99_000 * 60), intervals: minutes, options: .cumulativeSum),
                as: Self.appA)
        } throws: { ($0 as? HealthError)?.code == .dataSizeExceeded }
    }

    @Test("calendar intervals follow the time zone: a day is 23 or 25 hours across daylight-saving changes")
    func calendarIntervals() throws {
        let newYork = TimeZone(identifier: "America/New_York")!
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = newYork
        let anchor = calendar.date(from: DateComponents(year: 2026, month: 1, day: 1))!
        let days = try StatisticsIntervals(anchor: anchor, every: 1, .day, timeZone: newYork)
        let spring = days.interval(containing: calendar.date(from: DateComponents(year: 2026, month: 3, day: 8, hour: 12))!)
        #expect(spring.duration == 23 * 3600 && spring.start == calendar.date(from: DateComponents(year: 2026, month: 3, day: 8)))
        let autumn = days.interval(containing: calendar.date(from: DateComponents(year: 2026, month: 11, day: 1, hour: 12))!)
        #expect(autumn.duration == 25 * 3600)
        // Before the anchor too, and weeks, months, years tile from it.
        let before = days.interval(containing: calendar.date(from: DateComponents(year: 2025, month: 12, day: 31, hour: 23, minute: 59))!)
        #expect(before.end == anchor)
        let months = try StatisticsIntervals(anchor: anchor, every: 1, .month, timeZone: newYork)
        #expect(months.intervals(from: anchor, to: calendar.date(from: DateComponents(year: 2027, month: 1, day: 1))!).count == 12)
        #expect(months.interval(containing: calendar.date(from: DateComponents(year: 2026, month: 2, day: 20))!).duration == 28 * 86_400)
        let weeks = try StatisticsIntervals(anchor: anchor, every: 2, .week, timeZone: newYork)
        let fortnight = weeks.interval(containing: calendar.date(from: DateComponents(year: 2026, month: 1, day: 20))!)
        #expect(fortnight.start == calendar.date(from: DateComponents(year: 2026, month: 1, day: 15)))
        let quarterHours = try StatisticsIntervals(anchor: anchor, every: 15, .minute, timeZone: newYork)
        #expect(quarterHours.intervals(from: anchor, to: anchor.addingTimeInterval(3600)).count == 4)
        let years = try StatisticsIntervals(anchor: anchor, every: 1, .year, timeZone: newYork)
        #expect(years.interval(containing: anchor.addingTimeInterval(-1)).start == calendar.date(from: DateComponents(year: 2025, month: 1, day: 1)))
    }

    @Test("a read-denied app's statistics are those of its own samples, as if no one else's existed", arguments: [false, true])
    func deniedReader(granted: Bool) async throws {
        let crowdedStore = try TemporaryStore()
        let aloneStore = try TemporaryStore()
        let crowded = try await Self.ledger(crowdedStore, "crowded")
        let alone = try await Self.ledger(aloneStore, "alone")
        var random = SplitMix(state: 5)
        // The owner and app B write first, so they outrank app A in the default order.
        for principal in [Principal.owner, Self.appB] {
            try await crowded.save((0..<300).map { _ in
                let start = Double(Int.random(in: 0..<(3 * 86_400), using: &random))
                return Self.sample(Self.steps, Double(Int.random(in: 1...500, using: &random)), "count", from: start, to: start + Double(Int.random(in: 0...3600, using: &random)))
            }, by: principal)
        }
        let own = (0..<200).map { _ in
            let start = Double(Int.random(in: 0..<(3 * 86_400), using: &random))
            return Self.sample(Self.steps, Double(Int.random(in: 1...500, using: &random)), "count", from: start, to: start + Double(Int.random(in: 0...1800, using: &random)))
        }
        for ledger in [crowded, alone] { try await ledger.save(own, by: Self.appA) }
        if granted {
            try await crowded.requestAuthorization(toShare: [], read: [Self.steps.objectType], by: Self.appA)
            try await crowded.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.steps.objectType, direction: .read, decision: .granted, by: .owner)
        }
        let options: StatisticsOptions = [.cumulativeSum, .separateBySource, .mostRecent, .duration]
        let days = try StatisticsIntervals(anchor: Fixtures.base, every: 1, .day, timeZone: TimeZone(identifier: "Europe/Paris")!)
        let range = DateInterval(start: Fixtures.base.addingTimeInterval(-86_400), duration: 5 * 86_400)
        let query = StatisticsCollectionQuery(type: Self.steps, range: range, intervals: days, options: options)
        let seen = try crowded.statisticsCollection(query, as: Self.appA)
        if granted {
            #expect(seen == (try crowded.statisticsCollection(query, as: .owner)), "a granted app sees the owner's statistics")
            #expect(seen.contains { $0.sources.contains(Fixtures.appB) }, "and other sources in them")
        } else {
            #expect(seen == (try alone.statisticsCollection(query, as: .owner)))
            #expect(seen.allSatisfy { $0.sources == [Fixtures.appA] && $0.valuesBySource.keys.elementsEqual([Fixtures.appA]) })
            #expect(try crowded.statistics(StatisticsQuery(type: Self.steps, options: options), as: Self.appA)
                == (try alone.statistics(StatisticsQuery(type: Self.steps, options: options), as: .owner)))
        }
        // An app that never saved steps sees nothing at all, like an empty ledger.
        let peek = Principal.app(Source(bundleIdentifier: "com.example.peek", name: "Peek"))
        #expect(try crowded.statistics(StatisticsQuery(type: Self.steps, options: .cumulativeSum), as: peek) == nil)
        #expect(try crowded.statisticsCollection(query, as: peek).isEmpty)
        #expect(throws: HealthError.self) { try crowded.statistics(StatisticsQuery(type: Self.steps, options: .cumulativeSum), as: .operator) }
    }
}
