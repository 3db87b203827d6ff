import Foundation
import HealthModel
import LedgerSchema

/// A one-shot query for samples of one type (HealthKit's `HKSampleQuery`, date-range form).
///
/// ```swift
/// let recent = try ledger.samples(SampleQuery(
///     type: heartRate.objectType, interval: DateInterval(start: dayStart, duration: 86_400),
///     limit: 100, sort: .startDate(ascending: false)))
/// ```
public struct SampleQuery: Sendable, Hashable {
    public typealias Sort = SampleSort

    public var type: ObjectType
    /// Samples whose time span overlaps this interval (half-open: a sample ending exactly at
    /// its start does not match; an instant sample matches when start ≤ date < end).
    /// Nil matches every sample.
    public var interval: DateInterval?
    /// At most this many results; 0 means no limit.
    public var limit: Int
    public var sort: Sort
    /// Only objects associated with this workout (HealthKit's `predicateForObjects(from:)`):
    /// samples added to it, its routes. None when the reader may not read the workout.
    public var workout: UUID?
    /// With the workout type: only the workouts that match. Its statistics count only the
    /// associated samples the reader may read.
    public var workoutPredicate: WorkoutPredicate?

    public init(
        type: ObjectType, interval: DateInterval? = nil, limit: Int = 0, sort: Sort = .startDate(ascending: true), workout: UUID? = nil,
        workoutPredicate: WorkoutPredicate? = nil
    ) {
        self.type = type
        self.interval = interval
        self.limit = limit
        self.sort = sort
        self.workout = workout
        self.workoutPredicate = workoutPredicate
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
}
