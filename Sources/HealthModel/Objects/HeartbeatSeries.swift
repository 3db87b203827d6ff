import Foundation

/// One heartbeat of a series (HealthKit's `HKHeartbeatSeriesQuery` result): when it came,
/// and whether the recording missed beats just before it.
public struct HeartbeatSeriesBeat: Sendable, Hashable {
    /// Seconds since the series' start.
    public var timeSinceSeriesStart: TimeInterval
    /// The device lost the signal before this beat: the interval to the beat before it is not a
    /// beat-to-beat interval.
    public var precededByGap: Bool

    /// A beat `timeSinceSeriesStart` seconds after its series' start.
    public init(timeSinceSeriesStart: TimeInterval, precededByGap: Bool = false) {
        self.timeSinceSeriesStart = timeSinceSeriesStart
        self.precededByGap = precededByGap
    }
}

/// The times of a recording's heartbeats (HealthKit's `HKHeartbeatSeriesSample`, type
/// `HKDataTypeIdentifierHeartbeatSeries`), from which heart rate variability is computed: each
/// beat's time since the series' start, at least a millisecond after the one before, within
/// its span and its first day. Apps save and
/// read heartbeat series under grants of the type, as any sample's.
///
/// ```swift
/// let series = HeartbeatSeriesSample(
///     beats: [0, 0.82, 1.61, 2.45].map { HeartbeatSeriesBeat(timeSinceSeriesStart: $0) },
///     start: started, end: started.addingTimeInterval(60))
/// try await store.save(.heartbeatSeries(series))
/// ```
public struct HeartbeatSeriesSample: HealthSample {
    public var uuid: UUID
    /// In time order, at least one.
    public var beats: [HeartbeatSeriesBeat]
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// The most beats one series holds (a day at over 130 beats a minute).
    public static let maximumBeats = 200_000
    /// How far after the start a beat may come: a day (the export writes beats as times of day).
    public static let maximumSpan: TimeInterval = 86_400
    /// The least time between two beats (over 60,000 beats a minute is no heart's).
    public static let minimumInterval: TimeInterval = 0.001

    public init(
        beats: [HeartbeatSeriesBeat], start: Date, end: Date, device: Device? = nil, metadata: Metadata = [:], uuid: UUID = .timeOrdered(),
        sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.beats = beats
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .heartbeatSeries }
}

extension ObjectType {
    /// HealthKit's `HKSeriesType.heartbeat()`.
    public static let heartbeatSeries = ObjectType(identifier: "HKDataTypeIdentifierHeartbeatSeries", family: .heartbeatSeries)
}
