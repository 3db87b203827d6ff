import Foundation
import HealthModel

/// One value of a quantity sample, with its interval and the sample it belongs to (a result of
/// HealthKit's `HKQuantitySeriesSampleQueryDescriptor`).
public struct QuantitySeriesValue: Sendable, Hashable {
    /// The value, in its sample's unit.
    public var quantity: Quantity
    /// When the value was measured (a sample of one value: the sample's own interval).
    public var dateInterval: DateInterval
    /// The series sample (or the sample of one value) the value comes from.
    public var sample: QuantitySample
}

/// The values of a type's quantity samples, each over its own interval (HealthKit's
/// `HKQuantitySeriesSampleQueryDescriptor`): a series sample gives each of its values, a sample
/// of one value that value over its interval; samples in start order, as far as the caller may
/// read them.
///
/// ```swift
/// let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
/// for try await batch in QuantitySeriesSampleQueryDescriptor(type: heartRate, interval: workoutInterval).results(for: store) {
///     for value in batch { plot(value.dateInterval.start, try value.quantity.doubleValue(for: HealthUnit("count/min"))) }
/// }
/// ```
public struct QuantitySeriesSampleQueryDescriptor: Sendable, Hashable {
    /// The quantity type whose samples' values are read.
    public var type: QuantityType
    /// Samples overlapping this interval; all when nil.
    public var interval: DateInterval?
    /// Only samples that match.
    public var predicate: ObjectPredicate?

    /// The values of `type`'s samples overlapping `interval` (all when nil) that match `predicate`.
    public init(type: QuantityType, interval: DateInterval? = nil, predicate: ObjectPredicate? = nil) {
        self.type = type
        self.interval = interval
        self.predicate = predicate
    }

    /// Every value, sample by sample in start order, each sample's in time order.
    public func result(for store: HealthStore) async throws -> [QuantitySeriesValue] {
        var all: [QuantitySeriesValue] = []
        for try await batch in try await results(for: store) { all += batch }
        return all
    }

    /// The values of each batch of samples as the samples arrive; stopping the iteration
    /// cancels the call.
    public func results(for store: HealthStore) async throws -> AsyncThrowingMapSequence<SampleBatches, [QuantitySeriesValue]> {
        try await SampleQueryDescriptor(type: type.objectType, interval: interval, predicate: predicate).results(for: store).map { batch in
            batch.compactMap(\.quantitySample).flatMap(Self.values)
        }
    }

    /// The values of `sample`: each of its series', or its own.
    public static func values(of sample: QuantitySample) -> [QuantitySeriesValue] {
        guard !sample.series.isEmpty else {
            return [QuantitySeriesValue(quantity: sample.quantity, dateInterval: DateInterval(start: sample.startDate, end: sample.endDate), sample: sample)]
        }
        return sample.series.map { entry in
            QuantitySeriesValue(
                quantity: Quantity(entry.value, sample.quantity.unit), dateInterval: DateInterval(start: entry.startDate, end: entry.endDate), sample: sample)
        }
    }
}
