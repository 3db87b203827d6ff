import ArgumentParser
import Foundation
import HealthLedgerSDK

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Statistics of a quantity type, over a range or per calendar interval.",
        discussion: """
            Statistics: sum (cumulative types), average, min, max (discrete types), recent, duration. \
            Overlapping sources are merged by the owner's source priority; --by-source adds each \
            source's own values. With --every, one row per interval (days in --tz follow daylight \
            saving). Only samples the credential may read count. Values show in the unit people read \
            the type in (heart rate in count/min) unless --unit says otherwise.

            \(WhereExpression.help)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "HealthKit quantity type identifier.") var type: String
    @Option(help: "From this date (ISO 8601).") var from: String?
    @Option(help: "…until this date (ISO 8601).") var to: String?
    @Option(help: "Comma-separated: sum, average, min, max, recent, duration.") var statistics = "sum"
    @Flag(name: .customLong("by-source"), help: "Also each source's own values.") var bySource = false
    @Option(help: "Per interval: COUNT followed by minute, hour, day, week, month or year (e.g. 1day, 15minute).") var every: String?
    @Option(help: "Intervals start at this date (ISO 8601; default: --from).") var anchor: String?
    @Option(help: "The intervals' time zone (IANA).") var tz = "UTC"
    @Option(help: "Show values in this unit (default: the unit people read the type in).") var unit: String?
    @Option(name: .customLong("where"), help: "Only samples matching this expression (`healthledger query --help` shows the grammar).")
    var condition: String?

    func run() async throws {
        let quantityType: QuantityType
        let predicate: ObjectPredicate?
        var options: StatisticsOptions = bySource ? .separateBySource : []
        let start, end: Date?
        let displayUnit: HealthUnit?
        var intervals: StatisticsIntervals?
        do {
            let resolved = try resolveType(type)
            guard resolved.family == .quantity else { throw ValidationErrorExit("\(type) is not a quantity type") }
            quantityType = try QuantityType(resolved.identifier)
            predicate = try condition.map { try WhereExpression.parse($0, for: resolved) }
            for name in statistics.split(separator: ",") {
                switch name.trimmingCharacters(in: .whitespaces) {
                case "sum": options.insert(.cumulativeSum)
                case "average": options.insert(.discreteAverage)
                case "min": options.insert(.discreteMin)
                case "max": options.insert(.discreteMax)
                case "recent": options.insert(.mostRecent)
                case "duration": options.insert(.duration)
                default: throw ValidationErrorExit("unknown statistic '\(name)': sum, average, min, max, recent or duration")
                }
            }
            start = try SampleInput.date(from, "from")
            end = try SampleInput.date(to, "to")
            displayUnit = try unit.map { try HealthUnit($0) }
            guard TimeZone(identifier: tz) != nil else { throw ValidationErrorExit("'\(tz)' is not an IANA time zone") }
            guard every != nil || (anchor == nil && tz == "UTC") else {
                throw ValidationErrorExit("--anchor and --tz place the intervals of --every: give --every too")
            }
            if let every {
                let digits = every.prefix { $0.isNumber }
                guard let count = Int(digits.isEmpty ? "1" : digits), let unit = StatisticsIntervals.Unit(rawValue: String(every.dropFirst(digits.count))) else {
                    throw ValidationErrorExit("--every takes a count and a unit: 1day, 15minute, 2week …")
                }
                guard let start, let end else { throw ValidationErrorExit("--every needs --from and --to") }
                guard let zone = TimeZone(identifier: tz) else { throw ValidationErrorExit("'\(tz)' is not an IANA time zone") }
                // By default intervals start at midnight (in the time zone) of the first day.
                var calendar = Calendar(identifier: .gregorian)
                calendar.timeZone = zone
                let origin = try SampleInput.date(anchor, "anchor") ?? calendar.startOfDay(for: start)
                intervals = try StatisticsIntervals(anchor: origin, every: count, unit, timeZone: zone)
                guard start < end else { throw ValidationErrorExit("--from must be before --to") }
            }
        } catch { throw fail(error) }
        try await connection.withStore { store in
            let results: [Statistics]
            if let intervals, let start, let end {
                results = try await store.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                    type: quantityType, range: DateInterval(start: start, end: end), intervals: intervals, options: options, predicate: predicate)).statistics
            } else {
                let interval = try dateInterval(start, end)
                results = try await store.statistics(for: StatisticsQueryDescriptor(type: quantityType, interval: interval, options: options, predicate: predicate)).map { [$0] } ?? []
            }
            let rows = try results.map { try Self.row($0, unit: displayUnit ?? DisplayUnits.unit(for: quantityType)) }
            if connection.json {
                printJSON(rows)
            } else if rows.isEmpty {
                print("no samples")
            } else {
                for row in rows {
                    print(["\(row["start"]!)", "\(row["end"]!)", Self.text(row["values"]), "\(row["unit"]!)"].joined(separator: "\t"))
                    for source in row["sources"] as? [[String: Any]] ?? [] where source["values"] != nil {
                        print("\t\t\(source["source"]!)\t\(Self.text(source["values"]))")
                    }
                }
            }
        }
    }

    /// A row's values as `name=value` pairs, for tables.
    static func text(_ values: Any?) -> String {
        (values as? [String: Double] ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\(String(format: "%.12g", $0.value))" }
            .joined(separator: " ")
    }

    static func row(_ statistics: Statistics, unit: HealthUnit) throws -> [String: Any] {
        func values(_ values: StatisticsValues) throws -> [String: Double] {
            var row: [String: Double] = [:]
            func put(_ name: String, _ quantity: Quantity?) throws {
                guard let quantity else { return }
                let value = try quantity.doubleValue(for: unit)
                row[name] = Double(String(format: "%.12g", value)) ?? value
            }
            try put("sum", values.sum)
            try put("average", values.average)
            try put("min", values.minimum)
            try put("max", values.maximum)
            try put("recent", values.mostRecent)
            if let duration = values.duration { row["durationSeconds"] = duration }
            return row
        }
        var row: [String: Any] = [
            "start": statistics.startDate.formatted(.iso8601), "end": statistics.endDate.formatted(.iso8601), "unit": unit.description,
            "values": try values(statistics.values),
        ]
        row["sources"] = try statistics.sources.map { source -> [String: Any] in
            var entry: [String: Any] = ["source": source.bundleIdentifier]
            if let own = statistics.valuesBySource[source] { entry["values"] = try values(own) }
            return entry
        }
        return row
    }
}
