import Foundation
import HealthModel

/// The beats of a heartbeat series in batches (HealthKit's `HKHeartbeatSeriesQueryDescriptor`),
/// as far as the caller may read it: the series (at most 200,000 beats) is fetched once, then
/// handed out a batch at a time, in time order.
///
/// ```swift
/// var intervals: [TimeInterval] = []
/// var previous: HeartbeatSeriesBeat?
/// for try await batch in HeartbeatSeriesQueryDescriptor(series.uuid).results(for: store) {
///     for beat in batch {
///         if let previous, !beat.precededByGap { intervals.append(beat.timeSinceSeriesStart - previous.timeSinceSeriesStart) }
///         previous = beat
///     }
/// }
/// ```
public struct HeartbeatSeriesQueryDescriptor: Sendable, Hashable {
    /// The series' UUID.
    public var uuid: UUID
    /// Beats per batch.
    public var batchSize: Int

    /// The beats of series `uuid`, `batchSize` at a time.
    public init(_ uuid: UUID, batchSize: Int = 1_024) {
        self.uuid = uuid
        self.batchSize = max(1, batchSize)
    }

    /// Every beat, in time order.
    /// - Throws: ``HealthError`` `noData` when there is no such series the caller may read.
    public func result(for store: HealthStore) async throws -> [HeartbeatSeriesBeat] {
        var all: [HeartbeatSeriesBeat] = []
        for try await batch in results(for: store) { all += batch }
        return all
    }

    /// The beats in batches of ``batchSize``, in time order.
    public func results(for store: HealthStore) -> AsyncThrowingStream<[HeartbeatSeriesBeat], any Error> {
        let uuid = self.uuid
        return inBatches(of: batchSize) {
            guard let series = try await store.object(with: uuid)?.heartbeatSeries else {
                throw HealthError(.noData, "no heartbeat series \(uuid) that this credential may read", field: "uuid")
            }
            return series.beats
        }
    }
}
