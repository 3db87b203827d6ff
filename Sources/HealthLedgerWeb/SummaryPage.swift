import Foundation
import HealthLedgerSDK
import HealthModel

/// The Summary page: the last 7 and 30 days of steps, heart rate (daily range and resting),
/// sleep per night, and body mass, read through the SDK's statistics and sample queries with
/// the owner's credential. Days are calendar days in the server's time zone.
struct SummaryPage {
    let store: HealthStore
    let now: Date
    let calendar: Calendar

    init(store: HealthStore, now: Date = Date(), timeZone: TimeZone = .current) {
        self.store = store
        self.now = now
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        self.calendar = calendar
    }

    /// The start of each of the last `count` days, oldest first (today last).
    func days(_ count: Int) -> [Date] {
        let today = calendar.startOfDay(for: now)
        return (0..<count).reversed().compactMap { calendar.date(byAdding: .day, value: -$0, to: today) }
    }

    func label(_ day: Date) -> String {
        let components = calendar.dateComponents([.month, .day], from: day)
        return "\(components.month ?? 0)/\(components.day ?? 0)"
    }

    /// Daily statistics of `type` over `days`, one per day (nil for a day without samples).
    func daily(_ type: QuantityType, _ days: [Date], options: StatisticsOptions) async throws -> [Statistics?] {
        guard let first = days.first, let end = calendar.date(byAdding: .day, value: 1, to: days.last ?? first) else { return [] }
        let collection = try await store.statisticsCollection(
            for: StatisticsCollectionQueryDescriptor(
                type: type, range: DateInterval(start: first, end: end),
                intervals: try StatisticsIntervals(anchor: first, every: 1, .day, timeZone: calendar.timeZone), options: options))
        return days.map { collection.statistics(for: $0) }
    }

    func render() async throws -> String {
        let month = days(30)
        let week = Array(month.suffix(7))
        let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
        let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let resting = try QuantityType("HKQuantityTypeIdentifierRestingHeartRate")
        let bodyMass = try QuantityType("HKQuantityTypeIdentifierBodyMass")
        let count = try HealthUnit("count")
        let beats = try HealthUnit("count/min")
        let kilograms = try HealthUnit("kg")

        let stepDays = try await daily(steps, month, options: .cumulativeSum).map { try $0?.sumQuantity()?.doubleValue(for: count) ?? 0 }
        let weekSteps = stepDays.suffix(7)
        let stepsHTML = """
            <section class="card" aria-labelledby="steps-heading">
            <h2 id="steps-heading">Steps</h2>
            <p>Last 7 days: <strong>\(HTML.number(weekSteps.reduce(0, +)))</strong> steps, \(HTML.number(weekSteps.reduce(0, +) / 7)) a day on average.
            Last 30 days: \(HTML.number(stepDays.reduce(0, +))) steps.</p>
            \(HTML.barChart(id: "steps-week", caption: "Steps per day, last 7 days", bars: zip(week, weekSteps).map { (label($0), $1) }, unit: "steps"))
            \(HTML.barChart(id: "steps-month", caption: "Steps per day, last 30 days", bars: zip(month, stepDays).map { (label($0), $1) }, unit: "steps"))
            </section>
            """

        let heartDays = try await daily(heartRate, week, options: [.discreteMin, .discreteMax, .discreteAverage])
        let ranges: [(label: String, low: Double, high: Double)] = try zip(week, heartDays).compactMap { day, statistics in
            guard let low = statistics?.minimumQuantity(), let high = statistics?.maximumQuantity() else { return nil }
            return (label(day), try low.doubleValue(for: beats), try high.doubleValue(for: beats))
        }
        let restingLatest = try await store.statistics(
            for: StatisticsQueryDescriptor(type: resting, interval: DateInterval(start: month[0], end: now), options: .mostRecent))?.mostRecentQuantity()
        let heartHTML = """
            <section class="card" aria-labelledby="heart-heading">
            <h2 id="heart-heading">Heart rate</h2>
            <p>Resting heart rate: \(try restingLatest.map { "<strong>\(HTML.number(try $0.doubleValue(for: beats)))</strong> beats per minute (latest in 30 days)" } ?? "none in the last 30 days").</p>
            \(ranges.isEmpty ? "<p>No heart rate in the last 7 days.</p>" : HTML.rangeChart(id: "heart-week", caption: "Heart rate range per day, last 7 days", ranges: ranges, unit: "beats per minute"))
            </section>
            """

        let sleepHTML = try await sleep(nights: week)

        let massDays = try await daily(bodyMass, month, options: [.discreteAverage, .mostRecent])
        let masses = try zip(month, massDays).compactMap { day, statistics in try statistics?.averageQuantity().map { (label(day), try $0.doubleValue(for: kilograms)) } }
        let latestMass = try massDays.compactMap { $0?.mostRecentQuantity() }.last.map { try $0.doubleValue(for: kilograms) }
        let massHTML = """
            <section class="card" aria-labelledby="mass-heading">
            <h2 id="mass-heading">Body mass</h2>
            <p>\(latestMass.map { "Latest: <strong>\(HTML.number($0))</strong> kg." } ?? "None in the last 30 days.")</p>
            \(masses.isEmpty ? "" : HTML.barChart(id: "mass-month", caption: "Body mass per day it was measured, last 30 days", bars: masses, unit: "kg"))
            </section>
            """
        return "<div class=\"cards\">\(stepsHTML)\(heartHTML)\(sleepHTML)\(massHTML)</div>"
    }

    /// Sleep per night: the stages recorded in the sleep analysis samples that end on each
    /// of the last seven days (a night belongs to the morning it ends).
    private func sleep(nights: [Date]) async throws -> String {
        let type = try ObjectType("HKCategoryTypeIdentifierSleepAnalysis")
        guard let first = nights.first, let end = calendar.date(byAdding: .day, value: 1, to: nights.last ?? first),
            let from = calendar.date(byAdding: .day, value: -1, to: first)
        else { return "" }
        let samples = try await store.result(for: SampleQueryDescriptor(type: type, interval: DateInterval(start: from, end: end)))
        // HKCategoryValueSleepAnalysis: 0 in bed, 1 asleep, 2 awake, 3 core, 4 deep, 5 REM.
        let stages = [(1, "Asleep"), (3, "Core"), (4, "Deep"), (5, "REM"), (2, "Awake")]
        var hours: [Date: [Int: Double]] = [:]
        for case .categorySample(let sample) in samples {
            let night = calendar.startOfDay(for: sample.endDate)
            guard night >= first, night < end else { continue }
            hours[night, default: [:]][sample.value, default: 0] += sample.endDate.timeIntervalSince(sample.startDate) / 3600
        }
        let asleep = nights.map { night in [1, 3, 4, 5].reduce(0) { $0 + (hours[night]?[$1] ?? 0) } }
        let rows = nights.map { night in
            "<tr><th scope=\"row\">\(label(night))</th>" + stages.map { "<td>\(HTML.number(hours[night]?[$0.0] ?? 0)) h</td>" }.joined() + "</tr>"
        }.joined()
        return """
            <section class="card" aria-labelledby="sleep-heading">
            <h2 id="sleep-heading">Sleep</h2>
            \(HTML.barChart(id: "sleep-week", caption: "Hours asleep per night, last 7 nights", bars: zip(nights, asleep).map { (label($0), $1) }, unit: "hours"))
            <div class="scroll"><table><caption>Sleep stages per night, in hours</caption>
            <thead><tr><th scope="col">Night ending</th>\(stages.map { "<th scope=\"col\">\($0.1)</th>" }.joined())</tr></thead>
            <tbody>\(rows)</tbody></table></div>
            </section>
            """
    }
}
