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

/// Writes a `StatisticsBatch` straight from model statistics: a collection's hot path,
/// byte-identical to SwiftProtobuf's serialization of the same message (tests hold it so).
/// Each unit and source is encoded once per writer.
public struct StatisticsBatchWriter {
    private var units: [String: String] = [:]
    private var sources: [Source: [UInt8]] = [:]

    public init() {}

    /// The batch holding `results`, marked `complete` or not.
    public mutating func batch(_ results: some Collection<Statistics>, complete: Bool) -> [UInt8] {
        var batch = ProtoWriter(capacity: results.count * 80 + 2)
        for statistics in results { batch.message(field: StatisticsBatchField.results, result(statistics)) }
        batch.varint(field: StatisticsBatchField.complete, complete ? 1 : 0)
        return batch.buffer
    }

    private mutating func result(_ statistics: Statistics) -> [UInt8] {
        var result = ProtoWriter(capacity: 80)
        result.signed(field: StatisticsResultField.startUs, microseconds(statistics.startDate))
        result.signed(field: StatisticsResultField.endUs, microseconds(statistics.endDate))
        let type = statistics.type.identifier
        if units[type] == nil { units[type] = statistics.type.canonicalUnit.description }
        result.string(field: StatisticsResultField.unit, units[type]!)
        result.message(field: StatisticsResultField.values, Self.values(statistics.values))
        for source in statistics.sources {
            var entry = ProtoWriter(capacity: 64)
            entry.message(field: SourceStatisticsField.source, encoded(source))
            if let values = statistics.valuesBySource[source] { entry.message(field: SourceStatisticsField.values, Self.values(values)) }
            result.message(field: StatisticsResultField.sources, entry.buffer)
        }
        return result.buffer
    }

    private mutating func encoded(_ source: Source) -> [UInt8] {
        if let bytes = sources[source] { return bytes }
        var writer = ProtoWriter(capacity: 48)
        writer.string(field: SourceField.bundleIdentifier, source.bundleIdentifier)
        writer.string(field: SourceField.name, source.name)
        sources[source] = writer.buffer
        return writer.buffer
    }

    private static func values(_ values: StatisticsValues) -> [UInt8] {
        var writer = ProtoWriter(capacity: 64)
        if let sum = values.sum { writer.double(field: StatisticsValuesField.sum, sum.value, present: true) }
        if let average = values.average { writer.double(field: StatisticsValuesField.average, average.value, present: true) }
        if let minimum = values.minimum { writer.double(field: StatisticsValuesField.minimum, minimum.value, present: true) }
        if let maximum = values.maximum { writer.double(field: StatisticsValuesField.maximum, maximum.value, present: true) }
        if let mostRecent = values.mostRecent { writer.double(field: StatisticsValuesField.mostRecent, mostRecent.value, present: true) }
        if let interval = values.mostRecentInterval {
            writer.presentSigned(field: StatisticsValuesField.mostRecentStartUs, microseconds(interval.start))
            writer.presentSigned(field: StatisticsValuesField.mostRecentEndUs, microseconds(interval.end))
        }
        if let duration = values.duration { writer.double(field: StatisticsValuesField.durationSeconds, duration, present: true) }
        return writer.buffer
    }
}

/// Reads a `StatisticsBatch` straight into model statistics (the SDK's side of
/// ``StatisticsBatchWriter``), as `Healthledger_V1_StatisticsResult.model(type:unit:)` would
/// from SwiftProtobuf's decoding (tests hold it so). Each unit and source is decoded once
/// per reader.
public struct StatisticsBatchReader {
    private var units: [String: HealthUnit] = [:]
    private var sources: [[UInt8]: Source] = [:]

    public init() {}

    /// - Throws: ``ProtoReader/Malformed`` for bytes that are not a batch; ``HealthError``
    ///   for a unit that does not parse or a result that ends before it starts.
    public mutating func read(_ bytes: [UInt8], type: QuantityType) throws -> (results: [Statistics], complete: Bool) {
        try bytes.withUnsafeBytes { buffer in
            var reader = ProtoReader(buffer)
            var results: [Statistics] = []
            var complete = false
            while let (field, wireType) = try reader.next() {
                switch (StatisticsBatchField(rawValue: field), wireType) {
                case (.results, .lengthDelimited): results.append(try result(try reader.bytes(), type: type))
                case (.complete, .varint): complete = try reader.varint() != 0
                default: try reader.skip(wireType)
                }
            }
            return (results, complete)
        }
    }

    private mutating func result(_ bytes: UnsafeRawBufferPointer, type: QuantityType) throws -> Statistics {
        var reader = ProtoReader(bytes)
        var startUs: Int64 = 0
        var endUs: Int64 = 0
        var unitName = ""
        var values = RawValues()
        var entries: [(source: Source, values: RawValues?)] = []
        while let (field, wireType) = try reader.next() {
            switch (StatisticsResultField(rawValue: field), wireType) {
            case (.startUs, .varint): startUs = try reader.signed()
            case (.endUs, .varint): endUs = try reader.signed()
            case (.unit, .lengthDelimited): unitName = try reader.string()
            case (.values, .lengthDelimited): try values.merge(try reader.bytes())
            case (.sources, .lengthDelimited): entries.append(try entry(try reader.bytes()))
            default: try reader.skip(wireType)
            }
        }
        guard startUs <= endUs else { throw HealthError.invalidArgument("a statistics result ends before it starts", field: "end_us") }
        if units[unitName] == nil { units[unitName] = try HealthUnit(unitName) }
        let unit = units[unitName]!
        var bySource: [Source: StatisticsValues] = [:]
        for entry in entries { if let values = entry.values { bySource[entry.source] = values.model(unit: unit) } }
        return Statistics(
            type: type, startDate: date(microseconds: startUs), endDate: date(microseconds: endUs), values: values.model(unit: unit),
            valuesBySource: bySource, sources: entries.map(\.source))
    }

    private mutating func entry(_ bytes: UnsafeRawBufferPointer) throws -> (source: Source, values: RawValues?) {
        var reader = ProtoReader(bytes)
        var sourceBytes: [UInt8] = []
        var values: RawValues?
        while let (field, wireType) = try reader.next() {
            switch (SourceStatisticsField(rawValue: field), wireType) {
            // A message field given twice merges: its fields, in order, as one message.
            case (.source, .lengthDelimited): sourceBytes += try reader.bytes()
            case (.values, .lengthDelimited):
                var merged = values ?? RawValues()
                try merged.merge(try reader.bytes())
                values = merged
            default: try reader.skip(wireType)
            }
        }
        if let source = sources[sourceBytes] { return (source, values) }
        var bundle = ""
        var name = ""
        try sourceBytes.withUnsafeBytes { buffer in
            var reader = ProtoReader(buffer)
            while let (field, wireType) = try reader.next() {
                switch (SourceField(rawValue: field), wireType) {
                case (.bundleIdentifier, .lengthDelimited): bundle = try reader.string()
                case (.name, .lengthDelimited): name = try reader.string()
                default: try reader.skip(wireType)
                }
            }
        }
        let source = Source(bundleIdentifier: bundle, name: name)
        sources[sourceBytes] = source
        return (source, values)
    }

    /// A `StatisticsValues` message's fields as sent.
    private struct RawValues {
        var sum: Double?
        var average: Double?
        var minimum: Double?
        var maximum: Double?
        var mostRecent: Double?
        var mostRecentStartUs: Int64?
        var mostRecentEndUs: Int64?
        var duration: Double?

        mutating func merge(_ bytes: UnsafeRawBufferPointer) throws {
            var reader = ProtoReader(bytes)
            while let (field, wireType) = try reader.next() {
                switch (StatisticsValuesField(rawValue: field), wireType) {
                case (.sum, .fixed64): sum = try reader.double()
                case (.average, .fixed64): average = try reader.double()
                case (.minimum, .fixed64): minimum = try reader.double()
                case (.maximum, .fixed64): maximum = try reader.double()
                case (.mostRecent, .fixed64): mostRecent = try reader.double()
                case (.mostRecentStartUs, .varint): mostRecentStartUs = try reader.signed()
                case (.mostRecentEndUs, .varint): mostRecentEndUs = try reader.signed()
                case (.durationSeconds, .fixed64): duration = try reader.double()
                default: try reader.skip(wireType)
                }
            }
        }

        func model(unit: HealthUnit) -> StatisticsValues {
            StatisticsValues(
                sum: sum.map { Quantity($0, unit) }, average: average.map { Quantity($0, unit) }, minimum: minimum.map { Quantity($0, unit) },
                maximum: maximum.map { Quantity($0, unit) }, mostRecent: mostRecent.map { Quantity($0, unit) },
                mostRecentInterval: mostRecentStartUs.flatMap { start in
                    mostRecentEndUs.flatMap { end in start <= end ? DateInterval(start: date(microseconds: start), end: date(microseconds: end)) : nil }
                },
                duration: duration)
        }
    }
}
