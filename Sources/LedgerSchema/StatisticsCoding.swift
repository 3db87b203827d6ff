import Foundation
import HealthModel
import SwiftProtobuf

extension Healthledger_V1_StatisticsValues {
    public init(_ values: StatisticsValues) {
        self.init()
        if let sum = values.sum { self.sum = sum.value }
        if let average = values.average { self.average = average.value }
        if let minimum = values.minimum { self.minimum = minimum.value }
        if let maximum = values.maximum { self.maximum = maximum.value }
        if let mostRecent = values.mostRecent { self.mostRecent = mostRecent.value }
        if let interval = values.mostRecentInterval {
            mostRecentStartUs = microseconds(interval.start)
            mostRecentEndUs = microseconds(interval.end)
        }
        if let duration = values.duration { durationSeconds = duration }
    }

    /// The values, as quantities in `unit`.
    public func model(unit: HealthUnit) -> StatisticsValues {
        StatisticsValues(
            sum: hasSum ? Quantity(sum, unit) : nil, average: hasAverage ? Quantity(average, unit) : nil,
            minimum: hasMinimum ? Quantity(minimum, unit) : nil, maximum: hasMaximum ? Quantity(maximum, unit) : nil,
            mostRecent: hasMostRecent ? Quantity(mostRecent, unit) : nil,
            mostRecentInterval: hasMostRecentStartUs && hasMostRecentEndUs && mostRecentStartUs <= mostRecentEndUs
                ? DateInterval(start: date(microseconds: mostRecentStartUs), end: date(microseconds: mostRecentEndUs)) : nil,
            duration: hasDurationSeconds ? durationSeconds : nil)
    }
}

extension Healthledger_V1_StatisticsResult {
    public init(_ statistics: Statistics) {
        self.init()
        startUs = microseconds(statistics.startDate)
        endUs = microseconds(statistics.endDate)
        unit = statistics.type.canonicalUnit.description
        values = .init(statistics.values)
        sources = statistics.sources.map { source in
            Healthledger_V1_SourceStatistics.with { entry in
                entry.source = .init(source)
                if let values = statistics.valuesBySource[source] { entry.values = .init(values) }
            }
        }
    }

    /// - Throws: ``HealthError`` when the unit does not parse or the dates are reversed.
    public func model(type: QuantityType) throws -> Statistics {
        try model(type: type, unit: try HealthUnit(self.unit))
    }

    /// The statistics, their `unit` field already parsed as `unit` (a collection's results
    /// share one: parsing it once per result was most of the decoding).
    /// - Throws: ``HealthError`` when the dates are reversed.
    public func model(type: QuantityType, unit: HealthUnit) throws -> Statistics {
        guard startUs <= endUs else { throw HealthError.invalidArgument("a statistics result ends before it starts", field: "end_us") }
        var bySource: [Source: StatisticsValues] = [:]
        for entry in sources where entry.hasValues { bySource[entry.source.model] = entry.values.model(unit: unit) }
        return Statistics(
            type: type, startDate: date(microseconds: startUs), endDate: date(microseconds: endUs), values: values.model(unit: unit),
            valuesBySource: bySource, sources: sources.map(\.source.model))
    }
}

extension StatisticsIntervals.Unit {
    public init?(_ unit: Healthledger_V1_StatisticsCollectionRequest.IntervalUnit) {
        switch unit {
        case .minute: self = .minute
        case .hour: self = .hour
        case .day: self = .day
        case .week: self = .week
        case .month: self = .month
        case .year: self = .year
        default: return nil
        }
    }

    public var schema: Healthledger_V1_StatisticsCollectionRequest.IntervalUnit {
        switch self {
        case .minute: .minute
        case .hour: .hour
        case .day: .day
        case .week: .week
        case .month: .month
        case .year: .year
        }
    }
}
