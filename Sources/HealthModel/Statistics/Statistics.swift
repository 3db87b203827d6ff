import Foundation

/// What a statistics query computes (HealthKit's `HKStatisticsOptions`, same bits).
public struct StatisticsOptions: OptionSet, Sendable, Hashable {
    public let rawValue: Int

    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// Also compute each source's values, raw (not merged).
    public static let separateBySource = StatisticsOptions(rawValue: 1)
    public static let discreteAverage = StatisticsOptions(rawValue: 2)
    public static let discreteMin = StatisticsOptions(rawValue: 4)
    public static let discreteMax = StatisticsOptions(rawValue: 8)
    public static let cumulativeSum = StatisticsOptions(rawValue: 16)
    public static let mostRecent = StatisticsOptions(rawValue: 32)
    public static let duration = StatisticsOptions(rawValue: 64)

    static let all: StatisticsOptions = [.separateBySource, .discreteAverage, .discreteMin, .discreteMax, .cumulativeSum, .mostRecent, .duration]

    /// Checks that the options fit `type`'s aggregation style (docs/SEMANTICS.md §7): a sum needs a
    /// cumulative type; average, minimum and maximum need a discrete one.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` naming the option and the type.
    public func validate(for type: QuantityType) throws {
        guard StatisticsOptions.all.isSuperset(of: self) else {
            throw HealthError.invalidArgument("unknown statistics option bits \(rawValue & ~StatisticsOptions.all.rawValue)", field: "options")
        }
        guard !subtracting(.separateBySource).isEmpty else {
            throw HealthError.invalidArgument("ask for at least one statistic: cumulativeSum, discreteAverage, discreteMin, discreteMax, mostRecent or duration", field: "options")
        }
        if type.aggregationStyle == .cumulative {
            for (option, name) in [(StatisticsOptions.discreteAverage, "discreteAverage"), (.discreteMin, "discreteMin"), (.discreteMax, "discreteMax")] where contains(option) {
                throw HealthError.invalidArgument("\(name) needs a discrete type; \(type.identifier) is cumulative", field: "options")
            }
        } else if contains(.cumulativeSum) {
            throw HealthError.invalidArgument("cumulativeSum needs a cumulative type; \(type.identifier) is discrete", field: "options")
        }
    }
}

/// The values of one statistics result, merged across sources or for one source. A value is
/// nil when its option was not asked for, or when no sample contributed.
public struct StatisticsValues: Sendable, Hashable {
    public var sum: Quantity?
    public var average: Quantity?
    public var minimum: Quantity?
    public var maximum: Quantity?
    public var mostRecent: Quantity?
    /// The date interval of the most recent sample.
    public var mostRecentInterval: DateInterval?
    /// Seconds covered by the samples (overlaps counted once).
    public var duration: TimeInterval?

    public init(
        sum: Quantity? = nil, average: Quantity? = nil, minimum: Quantity? = nil, maximum: Quantity? = nil, mostRecent: Quantity? = nil,
        mostRecentInterval: DateInterval? = nil, duration: TimeInterval? = nil
    ) {
        self.sum = sum
        self.average = average
        self.minimum = minimum
        self.maximum = maximum
        self.mostRecent = mostRecent
        self.mostRecentInterval = mostRecentInterval
        self.duration = duration
    }
}

/// Statistics over the samples of one quantity type in one date interval (HealthKit's
/// `HKStatistics`), in the type's canonical unit.
public struct Statistics: Sendable, Hashable {
    public var type: QuantityType
    public var startDate: Date
    public var endDate: Date
    /// Merged across sources by priority: where sources overlap in time, only the
    /// highest-priority one counts.
    public var values: StatisticsValues
    /// Each source's own values (with ``StatisticsOptions/separateBySource``).
    public var valuesBySource: [Source: StatisticsValues]
    /// The sources that contributed, highest priority first.
    public var sources: [Source]

    public init(
        type: QuantityType, startDate: Date, endDate: Date, values: StatisticsValues, valuesBySource: [Source: StatisticsValues] = [:],
        sources: [Source] = []
    ) {
        self.type = type
        self.startDate = startDate
        self.endDate = endDate
        self.values = values
        self.valuesBySource = valuesBySource
        self.sources = sources
    }

    public func sumQuantity(for source: Source? = nil) -> Quantity? { pick(source, \.sum) }
    public func averageQuantity(for source: Source? = nil) -> Quantity? { pick(source, \.average) }
    public func minimumQuantity(for source: Source? = nil) -> Quantity? { pick(source, \.minimum) }
    public func maximumQuantity(for source: Source? = nil) -> Quantity? { pick(source, \.maximum) }
    public func mostRecentQuantity(for source: Source? = nil) -> Quantity? { pick(source, \.mostRecent) }

    private func pick(_ source: Source?, _ value: KeyPath<StatisticsValues, Quantity?>) -> Quantity? {
        guard let source else { return values[keyPath: value] }
        return valuesBySource[source]?[keyPath: value]
    }
}

/// How a statistics collection tiles time (HealthKit's anchor date and interval
/// components): intervals of `count` calendar units, starting at `anchor` and repeating in
/// both directions, computed in `timeZone`, so a one-day interval lasts 23 or 25 hours
/// across a daylight-saving change.
public struct StatisticsIntervals: Sendable, Hashable {
    public enum Unit: String, Sendable, Hashable, CaseIterable {
        case minute, hour, day, week, month, year
    }

    public var anchor: Date
    public var count: Int
    public var unit: Unit
    public var timeZone: TimeZone

    /// - Throws: ``HealthError`` `invalidArgument` for a count below 1 or above 10,000.
    public init(anchor: Date, every count: Int, _ unit: Unit, timeZone: TimeZone) throws {
        guard (1...10_000).contains(count) else {
            throw HealthError.invalidArgument("an interval is 1 to 10,000 \(unit)s, not \(count)", field: "interval")
        }
        var anchor = anchor
        switch unit {
        case .minute, .hour:
            // Fixed-length intervals need no calendar: any anchor from distantPast (HealthKit's
            // usual choice) to distantFuture tiles time.
            guard anchor >= .distantPast, anchor <= .distantFuture else {
                throw HealthError.invalidArgument("the anchor date must lie between distantPast and distantFuture", field: "anchor")
            }
        case .day, .week, .month, .year:
            // Calendars work in the years 1 to 9999; distantPast (just before year 1) means
            // the start of year 1 (UTC).
            if anchor == .distantPast { anchor = Self.supported.start }
            guard Self.supported.contains(anchor) else {
                throw HealthError.invalidArgument("the anchor date must lie in the years 1 to 9999", field: "anchor")
            }
        }
        self.anchor = anchor
        self.count = count
        self.unit = unit
        self.timeZone = timeZone
    }

    /// The dates calendars handle: the years 1 to 9999.
    public static let supported = DateInterval(start: ObjectLimits.dateRange.lowerBound, end: ObjectLimits.dateRange.upperBound)

    private var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }

    /// The start of interval `index` (0 starts at the anchor; negative ones precede it).
    public func start(of index: Int) -> Date {
        switch unit {
        case .minute: return anchor.addingTimeInterval(Double(index) * Double(count) * 60)
        case .hour: return anchor.addingTimeInterval(Double(index) * Double(count) * 3600)
        case .day: return calendar.date(byAdding: .day, value: index * count, to: anchor) ?? anchor
        case .week: return calendar.date(byAdding: .day, value: index * count * 7, to: anchor) ?? anchor
        case .month: return calendar.date(byAdding: .month, value: index * count, to: anchor) ?? anchor
        case .year: return calendar.date(byAdding: .year, value: index * count, to: anchor) ?? anchor
        }
    }

    /// The index of the interval containing `date`.
    public func index(containing date: Date) -> Int {
        var index: Int
        switch unit {
        case .minute, .hour:
            let length = Double(count) * (unit == .minute ? 60 : 3600)
            index = Int((date.timeIntervalSince(anchor) / length).rounded(.down))
        case .day, .week:
            let days = calendar.dateComponents([.day], from: anchor, to: date).day ?? 0
            index = days / (count * (unit == .week ? 7 : 1))
        case .month:
            index = (calendar.dateComponents([.month], from: anchor, to: date).month ?? 0) / count
        case .year:
            index = (calendar.dateComponents([.year], from: anchor, to: date).year ?? 0) / count
        }
        // The estimate truncates toward zero and calendars are irregular: settle it (a few
        // steps at most; the bound only guards against a calendar that cannot answer).
        var steps = 0
        while start(of: index) > date, steps < 64 {
            index -= 1
            steps += 1
        }
        while start(of: index + 1) <= date, steps < 128 {
            index += 1
            steps += 1
        }
        return index
    }

    /// The interval containing `date`.
    public func interval(containing date: Date) -> DateInterval {
        let index = index(containing: date)
        return DateInterval(start: start(of: index), end: start(of: index + 1))
    }

    /// The intervals that overlap `[from, to)`, in order (at most `limit`).
    public func intervals(from: Date, to: Date, limit: Int = 1_000_000) -> [DateInterval] {
        guard from < to else { return [] }
        var index = index(containing: from)
        var result: [DateInterval] = []
        var start = start(of: index)
        while start < to, result.count < limit {
            let end = self.start(of: index + 1)
            guard end > start else { break }
            result.append(DateInterval(start: start, end: end))
            index += 1
            start = end
        }
        return result
    }
}

/// A statistics query (HealthKit's `HKStatisticsQuery`): statistics over the samples of a
/// quantity type overlapping an interval.
public struct StatisticsQuery: Sendable, Hashable {
    public var type: QuantityType
    /// Samples overlapping this interval; every sample when nil.
    public var interval: DateInterval?
    public var options: StatisticsOptions
    /// Only samples that match count.
    public var predicate: ObjectPredicate?

    public init(type: QuantityType, interval: DateInterval? = nil, options: StatisticsOptions, predicate: ObjectPredicate? = nil) {
        self.type = type
        self.interval = interval
        self.options = options
        self.predicate = predicate
    }
}

/// A statistics collection query (HealthKit's `HKStatisticsCollectionQuery`): statistics
/// per calendar interval over a date range.
public struct StatisticsCollectionQuery: Sendable, Hashable {
    public var type: QuantityType
    /// The range whose intervals are computed (the first and last may reach past it).
    public var range: DateInterval
    public var intervals: StatisticsIntervals
    public var options: StatisticsOptions
    /// Only samples that match count.
    public var predicate: ObjectPredicate?

    public init(
        type: QuantityType, range: DateInterval, intervals: StatisticsIntervals, options: StatisticsOptions, predicate: ObjectPredicate? = nil
    ) {
        self.type = type
        self.range = range
        self.intervals = intervals
        self.options = options
        self.predicate = predicate
    }
}
