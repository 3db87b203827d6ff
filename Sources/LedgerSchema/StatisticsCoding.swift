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
/// Every result is written in place into the batch's one buffer; each unit and source is
/// encoded once per writer.
public struct StatisticsBatchWriter {
    /// The last type's identifier and its canonical unit's name (a collection has one type).
    private var unit: (type: String, name: String)?
    /// The sources met so far and their encoded `Source` messages (a collection has a few).
    private var sources: [(source: Source, bytes: [UInt8])] = []
    /// Scratch buffers for one result and its parts, reused from result to result.
    private var result = ProtoWriter(capacity: 128)
    private var part = ProtoWriter(capacity: 64)
    private var entry = ProtoWriter(capacity: 96)

    public init() {}

    /// The batch holding `results`, marked `complete` or not.
    public mutating func batch(_ results: ArraySlice<Statistics>, complete: Bool) -> [UInt8] {
        var batch = ProtoWriter(capacity: results.count * 80 + 2)
        // Each result is read in place, never copied: a copy retains and releases each of its
        // quantities' units and its sources.
        results.withUnsafeBufferPointer { results in
            for index in results.indices { write(results[index], into: &batch) }
        }
        batch.varint(field: StatisticsBatchField.complete, complete ? 1 : 0)
        return batch.buffer
    }

    private mutating func write(_ statistics: borrowing Statistics, into batch: inout ProtoWriter) {
        result.removeAll()
        result.signed(field: StatisticsResultField.startUs, microseconds(statistics.startDate))
        result.signed(field: StatisticsResultField.endUs, microseconds(statistics.endDate))
        result.string(field: StatisticsResultField.unit, unitName(of: statistics.type))
        part.removeAll()
        Self.write(statistics.values, into: &part)
        result.message(field: StatisticsResultField.values, part.buffer)
        for source in statistics.sources {
            entry.removeAll()
            entry.message(field: SourceStatisticsField.source, encoded(source))
            if !statistics.valuesBySource.isEmpty, let own = statistics.valuesBySource[source] {
                part.removeAll()
                Self.write(own, into: &part)
                entry.message(field: SourceStatisticsField.values, part.buffer)
            }
            result.message(field: StatisticsResultField.sources, entry.buffer)
        }
        batch.message(field: StatisticsBatchField.results, result.buffer)
    }

    private mutating func unitName(of type: QuantityType) -> String {
        if let unit, unit.type == type.identifier { return unit.name }
        let name = type.canonicalUnit.description
        unit = (type.identifier, name)
        return name
    }

    private mutating func encoded(_ source: Source) -> [UInt8] {
        if let known = sources.first(where: { $0.source == source }) { return known.bytes }
        var writer = ProtoWriter(capacity: 48)
        writer.string(field: SourceField.bundleIdentifier, source.bundleIdentifier)
        writer.string(field: SourceField.name, source.name)
        sources.append((source, writer.buffer))
        return writer.buffer
    }

    private static func write(_ values: StatisticsValues, into writer: inout ProtoWriter) {
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
    }
}

/// Reads a `StatisticsBatch` straight into model statistics (the SDK's side of
/// ``StatisticsBatchWriter``), as `Healthledger_V1_StatisticsResult.model(type:unit:)` would
/// from SwiftProtobuf's decoding (tests hold it so). Each unit and source is decoded once
/// per reader.
public struct StatisticsBatchReader {
    /// Each unit met, by its name's bytes (a collection has one).
    private var units: [(name: [UInt8], unit: HealthUnit)] = []
    /// Each source met, by its encoded `Source` message (a collection has a few).
    private var sources: [(bytes: [UInt8], source: Source)] = []

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

    /// One result, read without copying its bytes: the unit and sources are looked up by
    /// their bytes in place, and only a source's own values are kept aside (the unit, which
    /// may come after them, is needed to make them quantities).
    private mutating func result(_ bytes: UnsafeRawBufferPointer, type: QuantityType) throws -> Statistics {
        var reader = ProtoReader(bytes)
        var startUs: Int64 = 0
        var endUs: Int64 = 0
        var unitName = UnsafeRawBufferPointer(start: nil, count: 0)
        var values = RawValues()
        var present: [Source] = []
        var own: [(source: Source, values: RawValues)] = []
        while let (field, wireType) = try reader.next() {
            switch (StatisticsResultField(rawValue: field), wireType) {
            case (.startUs, .varint): startUs = try reader.signed()
            case (.endUs, .varint): endUs = try reader.signed()
            case (.unit, .lengthDelimited): unitName = try reader.bytes()
            case (.values, .lengthDelimited): try values.merge(try reader.bytes())
            case (.sources, .lengthDelimited):
                let (source, values) = try entry(try reader.bytes())
                present.append(source)
                if let values { own.append((source, values)) }
            default: try reader.skip(wireType)
            }
        }
        guard startUs <= endUs else { throw HealthError.invalidArgument("a statistics result ends before it starts", field: "end_us") }
        let unit = try self.unit(named: unitName)
        var bySource: [Source: StatisticsValues] = [:]
        for (source, values) in own { bySource[source] = values.model(unit: unit) }
        return Statistics(
            type: type, startDate: date(microseconds: startUs), endDate: date(microseconds: endUs), values: values.model(unit: unit),
            valuesBySource: bySource, sources: present)
    }

    private mutating func unit(named name: UnsafeRawBufferPointer) throws -> HealthUnit {
        if let known = units.first(where: { $0.name.elementsEqual(name) }) { return known.unit }
        let unit = try HealthUnit(String(decoding: name.assumingMemoryBound(to: UInt8.self), as: UTF8.self))
        units.append((Array(name), unit))
        return unit
    }

    private mutating func entry(_ bytes: UnsafeRawBufferPointer) throws -> (source: Source, values: RawValues?) {
        var reader = ProtoReader(bytes)
        var sourceBytes = UnsafeRawBufferPointer(start: nil, count: 0)
        // A message field given twice merges: its fields, in order, as one message.
        var merged: [UInt8]?
        var values: RawValues?
        while let (field, wireType) = try reader.next() {
            switch (SourceStatisticsField(rawValue: field), wireType) {
            case (.source, .lengthDelimited):
                let part = try reader.bytes()
                if merged != nil {
                    merged! += part
                } else if sourceBytes.baseAddress != nil {
                    merged = Array(sourceBytes) + part
                } else {
                    sourceBytes = part
                }
            case (.values, .lengthDelimited):
                var combined = values ?? RawValues()
                try combined.merge(try reader.bytes())
                values = combined
            default: try reader.skip(wireType)
            }
        }
        if let merged { return (try merged.withUnsafeBytes { try source(encoded: $0) }, values) }
        return (try source(encoded: sourceBytes), values)
    }

    private mutating func source(encoded bytes: UnsafeRawBufferPointer) throws -> Source {
        if let known = sources.first(where: { $0.bytes.elementsEqual(bytes) }) { return known.source }
        var bundle = ""
        var name = ""
        var reader = ProtoReader(bytes)
        while let (field, wireType) = try reader.next() {
            switch (SourceField(rawValue: field), wireType) {
            case (.bundleIdentifier, .lengthDelimited): bundle = try reader.string()
            case (.name, .lengthDelimited): name = try reader.string()
            default: try reader.skip(wireType)
            }
        }
        let source = Source(bundleIdentifier: bundle, name: name)
        sources.append((Array(bytes), source))
        return source
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
