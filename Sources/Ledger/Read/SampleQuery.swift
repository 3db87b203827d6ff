import Foundation
import HealthModel
import LedgerSchema

/// A one-shot query for objects of one type (HealthKit's `HKSampleQuery`).
///
/// ```swift
/// let recent = try ledger.samples(SampleQuery(
///     type: heartRate.objectType, interval: DateInterval(start: dayStart, duration: 86_400),
///     predicate: .quantity(.greater, try Quantity(120, "count/min")),
///     limit: 100, sort: .startDate(ascending: false)))
/// ```
public struct SampleQuery: Sendable, Hashable {
    public typealias Sort = SampleSort

    public var type: ObjectType
    /// Samples whose time span overlaps this interval (half-open: a sample ending exactly at
    /// its start does not match; an instant sample matches when start ≤ date < end).
    /// Nil matches every sample.
    public var interval: DateInterval?
    /// Only objects that match (see ``ObjectPredicate``): checked against the type before the query
    /// runs. Statistics in a workout predicate count only the associated samples the reader
    /// may read; "associated with" and "member of" match nothing when the reader may not read
    /// the workout or correlation.
    public var predicate: ObjectPredicate?
    /// At most this many results; 0 means no limit.
    public var limit: Int
    public var sort: Sort

    public init(type: ObjectType, interval: DateInterval? = nil, predicate: ObjectPredicate? = nil, limit: Int = 0, sort: Sort = .startDate(ascending: true)) {
        self.type = type
        self.interval = interval
        self.predicate = predicate
        self.limit = limit
        self.sort = sort
    }
}

/// A time range in microseconds, half-open.
struct TimeRange: Sendable {
    var start: Int64
    var end: Int64

    init(_ interval: DateInterval?) {
        if let interval {
            start = microseconds(interval.start)
            end = microseconds(interval.end)
        } else {
            start = Int64.min
            end = Int64.max
        }
    }

    /// Whether a sample spanning `sampleStart...sampleEnd` overlaps the range.
    func overlaps(start sampleStart: Int64, end sampleEnd: Int64) -> Bool {
        if sampleStart == sampleEnd { return sampleStart >= start && sampleStart < end }
        return sampleStart < end && sampleEnd > start
    }

    /// Whether a series sample spanning `sampleStart...sampleEnd` may hold a value overlapping
    /// the range: one of its values may be an instant at its end, which overlaps a range
    /// starting there (where the sample itself does not).
    func mayHoldValues(start sampleStart: Int64, end sampleEnd: Int64) -> Bool {
        sampleStart < end && sampleEnd >= start
    }

    /// Whether the sample of `entry` counts for statistics over the range: it overlaps it, or
    /// it is a series that may hold a value overlapping it.
    func counts(_ entry: IndexEntry) -> Bool {
        entry.isSeries ? mayHoldValues(start: entry.startUs, end: entry.endUs) : overlaps(start: entry.startUs, end: entry.endUs)
    }

    /// The range a walk for statistics reads: a microsecond earlier, so that it meets the
    /// series samples ending where the range starts (``mayHoldValues(start:end:)``); each entry
    /// is then checked with ``counts(_:)``.
    var widenedForSeries: TimeRange {
        var widened = self
        if start > Int64.min { widened.start = start - 1 }
        return widened
    }
}

/// One entry of a time index.
struct IndexEntry {
    var uuid: [UInt8]
    var startUs: Int64
    var endUs: Int64
    var sequence: UInt64
    /// The source code of the object's source (``SourceRegistry``).
    var source: UInt32
    /// A quantity sample's value in its type's canonical unit (start indexes only; NaN otherwise).
    var value: Double = .nan
    /// Whether the sample is a quantity series sample, whose values statistics count one by one.
    var isSeries = false
}
