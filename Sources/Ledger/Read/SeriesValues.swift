import HealthModel
import LMDB
import LedgerSchema

/// The values of quantity series samples, as statistics count them: each value over its own
/// interval, as HealthKit's statistics count the quantities of a series, not the sample's
/// aggregate over the sample's whole interval (docs/SEMANTICS.md §3 and §7, "Statistics").
///
/// The indexes mark a series sample (``StartIndexRow/seriesFlag``); its values are read from
/// its save event when a statistic needs them. Every value lies within its sample's interval.
enum SeriesValues {
    /// The values of the series sample saved by event `sequence`, from `source`, in its type's
    /// canonical unit and in time order, each with the sample's sequence and its place in the
    /// series.
    /// - Throws: ``LedgerFailure`` `corrupted` when the event saves no series sample.
    ///
    /// Read in place from the event's bytes (the values only: a series holds up to 50,000).
    static func samples(sequence: UInt64, source: UInt32, in snapshot: LedgerSnapshot) throws -> [StatisticsSample] {
        let stored = try Ledger.storedEvent(sequence, in: snapshot)
        var type = ""
        var unit = ""
        var entries: [(value: Double, start: Int64, end: Int64)] = []
        do {
            var kind: UInt64 = 0
            var body = UnsafeRawBufferPointer(start: nil, count: 0)
            var event = ProtoReader(stored)
            while let (field, wireType) = try event.next() {
                switch (LedgerEventField(rawValue: field), wireType) {
                case (.kind, .varint): kind = try event.varint()
                case (.body, .lengthDelimited): body = try event.bytes()
                default: try event.skip(wireType)
                }
            }
            guard kind == UInt64(EventKind.objectSaved.rawValue) else { throw notSeries(sequence) }
            var object = ProtoReader(body)
            while let (field, wireType) = try object.next() {
                switch (HealthObjectField(rawValue: field), wireType) {
                case (.type, .lengthDelimited): type = try object.string()
                case (.quantity, .lengthDelimited):
                    var sample = ProtoReader(try object.bytes())
                    while let (field, wireType) = try sample.next() {
                        switch (QuantitySampleBodyField(rawValue: field), wireType) {
                        case (.quantity, .lengthDelimited):
                            var quantity = ProtoReader(try sample.bytes())
                            while let (field, wireType) = try quantity.next() {
                                guard QuantityField(rawValue: field) == .unit, wireType == .lengthDelimited else { try quantity.skip(wireType); continue }
                                unit = try quantity.string()
                            }
                        case (.series, .lengthDelimited):
                            // Proto3 leaves out zeros: a field not written is 0.
                            var entry = (value: 0.0, start: Int64(0), end: Int64(0))
                            var reader = ProtoReader(try sample.bytes())
                            while let (field, wireType) = try reader.next() {
                                switch (QuantitySeriesEntryField(rawValue: field), wireType) {
                                case (.value, .fixed64): entry.value = try reader.double()
                                case (.startUs, .varint): entry.start = try reader.signed()
                                case (.endUs, .varint): entry.end = try reader.signed()
                                default: try reader.skip(wireType)
                                }
                            }
                            entries.append(entry)
                        default: try sample.skip(wireType)
                        }
                    }
                default: try object.skip(wireType)
                }
            }
        } catch let malformed as ProtoReader.Malformed {
            throw LedgerFailure.corrupted("event \(sequence) does not decode: \(malformed)")
        }
        guard !entries.isEmpty else { throw notSeries(sequence) }
        // Saved values are in time order: anything else is damage, which would misplace values.
        guard zip(entries, entries.dropFirst()).allSatisfy({ $0.start <= $1.start && $0.start <= $0.end }), entries.last!.start <= entries.last!.end else {
            throw LedgerFailure.corrupted("event \(sequence) holds series values out of time order: the log is damaged")
        }
        do {
            // Through the unit's printed form, as the sample's own value is (``ObjectSummary``).
            let from = try HealthUnit(unit)
            let canonical = try QuantityType(type).canonicalUnit
            return try entries.enumerated().map { index, entry in
                StatisticsSample(
                    start: entry.start, end: entry.end, value: try from.convert(entry.value, to: canonical), source: source, sequence: sequence,
                    position: UInt32(index))
            }
        } catch let error as HealthError {
            throw LedgerFailure.corrupted("event \(sequence) saves a series whose values do not convert: \(error.message)")
        }
    }

    private static func notSeries(_ sequence: UInt64) -> LedgerFailure {
        .corrupted("event \(sequence) is indexed as a series sample but saves none: replay the ledger")
    }

    /// Reads the values of the series sample saved by an event (its sequence), from a source
    /// (its code), as ``samples(sequence:source:in:)`` does from the log that holds the event.
    typealias Loader = (_ sequence: UInt64, _ source: UInt32) throws -> [StatisticsSample]

    /// The values of the series sample `entry` that overlap `range`.
    static func samples(of entry: IndexEntry, overlapping range: TimeRange, in snapshot: LedgerSnapshot) throws -> [StatisticsSample] {
        try samples(sequence: entry.sequence, source: entry.source, in: snapshot).filter { range.overlaps(start: $0.start, end: $0.end) }
    }
}

/// A walk of a start index's entries turned into statistics samples in start order, each series
/// sample replaced by its values overlapping `range`. A series' values start at or after its
/// sample, so each is held until the walk has passed its start: the values come out in start
/// order among the other samples.
struct SeriesExpansion {
    let range: TimeRange
    let snapshot: LedgerSnapshot
    /// Values not visited yet, in ``StatisticsSample/precedes(_:_:)`` order from `next` on.
    private var held: [StatisticsSample] = []
    private var next = 0

    init(range: TimeRange, snapshot: LedgerSnapshot) {
        self.range = range
        self.snapshot = snapshot
    }

    /// The walk's next entry: visits the held values that start no later, then the entry itself
    /// (or holds its values).
    mutating func add(_ entry: IndexEntry, _ visit: (StatisticsSample) throws -> Void) throws {
        if next < held.count { try release(through: entry.startUs, visit) }
        guard entry.isSeries else { return try visit(StatisticsSample(entry)) }
        let values = try SeriesValues.samples(of: entry, overlapping: range, in: snapshot)
        if next == held.count {
            (held, next) = (values, 0)
        } else {
            // Series that overlap each other: rare, merged by sorting.
            held = (held[next...] + values).sorted(by: StatisticsSample.precedes)
            next = 0
        }
    }

    /// Visits the values still held, once the walk has ended.
    mutating func finish(_ visit: (StatisticsSample) throws -> Void) throws {
        try release(through: .max, visit)
    }

    private mutating func release(through start: Int64, _ visit: (StatisticsSample) throws -> Void) throws {
        while next < held.count, held[next].start <= start {
            try visit(held[next])
            next += 1
        }
        if next == held.count { (held, next) = ([], 0) }
    }
}
