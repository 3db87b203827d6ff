import Foundation
import LedgerSchema
import SwiftProtobuf

/// A statistics query (HealthKit's `HKStatisticsQueryDescriptor`).
///
/// ```swift
/// let today = try await store.statistics(for: StatisticsQueryDescriptor(
///     type: stepCount, interval: DateInterval(start: midnight, duration: 86_400), options: .cumulativeSum))
/// print(today?.sumQuantity())
/// ```
public typealias StatisticsQueryDescriptor = StatisticsQuery

/// A statistics collection query (HealthKit's `HKStatisticsCollectionQueryDescriptor`).
public typealias StatisticsCollectionQueryDescriptor = StatisticsCollectionQuery

/// The results of a statistics collection query (HealthKit's `HKStatisticsCollection`).
public struct StatisticsCollection: Sendable, Hashable {
    /// The intervals that hold samples, in order.
    public var statistics: [Statistics]
    public var intervals: StatisticsIntervals
    public var type: QuantityType

    /// The statistics of the interval containing `date`, if it holds samples.
    public func statistics(for date: Date) -> Statistics? {
        let interval = intervals.interval(containing: date)
        return statistics.first { $0.startDate == interval.start }
    }

    /// Every interval overlapping `[from, to)`, including the empty ones (with no values).
    public func enumerateStatistics(from: Date, to: Date) -> [Statistics] {
        let byStart = Dictionary(statistics.map { ($0.startDate, $0) }, uniquingKeysWith: { first, _ in first })
        return intervals.intervals(from: from, to: to, limit: 1_000_000).map { interval in
            byStart[interval.start] ?? Statistics(type: type, startDate: interval.start, endDate: interval.end, values: StatisticsValues())
        }
    }
}

extension HealthStore {
    /// Statistics over the samples this app may read; nil when none matches.
    public func statistics(for query: StatisticsQueryDescriptor) async throws -> Statistics? {
        let request = Healthledger_V1_StatisticsRequest.with { request in
            request.type = query.type.identifier
            if let interval = query.interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
            request.options = UInt32(truncatingIfNeeded: query.options.rawValue)
            if let predicate = query.predicate { request.predicate = .init(predicate) }
        }
        let response = try Self.decode(Healthledger_V1_StatisticsResponse.self, try await unary(.statistics, request))
        guard response.hasStatistics else { return nil }
        do { return try response.statistics.model(type: query.type) } catch {
            throw RPCError(.internalError, "the server sent invalid statistics: \(error)", cause: error)
        }
    }

    /// Statistics per interval; the intervals without samples are left out (see
    /// ``StatisticsCollection/enumerateStatistics(from:to:)`` for all of them).
    public func statisticsCollection(for query: StatisticsCollectionQueryDescriptor) async throws -> StatisticsCollection {
        // The one-shot stream is the first state of a watched collection: its batches up to
        // the one marked complete.
        let (stream, consumed) = try await openStream(.statisticsCollection, Self.collectionRequest(query))
        var states = StatisticsCollectionUpdates(stream: stream, consumed: consumed, query: query).makeAsyncIterator()
        guard let collection = try await states.next() else {
            throw RPCError(.internalError, "the server ended the statistics collection before it was complete")
        }
        return collection
    }

    /// The query's intervals as the server tiles them: from the anchor at the microsecond
    /// precision the wire carries, so local lookups find the server's interval dates.
    static func wireIntervals(_ query: StatisticsCollectionQueryDescriptor) -> StatisticsIntervals {
        var intervals = query.intervals
        intervals.anchor = date(microseconds: microseconds(intervals.anchor))
        return intervals
    }

    /// A statistics collection that keeps going (HealthKit's long-running collection
    /// query): the collection now, then the whole, updated collection each time samples of
    /// the type commit and change it, until the iteration stops.
    ///
    /// ```swift
    /// for try await collection in try await store.statisticsCollectionUpdates(for: dailySteps) {
    ///     redraw(collection.enumerateStatistics(from: weekStart, to: now))
    /// }
    /// ```
    public func statisticsCollectionUpdates(for query: StatisticsCollectionQueryDescriptor) async throws -> StatisticsCollectionUpdates {
        let (stream, consumed) = try await openStream(.watchStatisticsCollection, Self.collectionRequest(query))
        return StatisticsCollectionUpdates(stream: stream, consumed: consumed, query: query)
    }

    static func collectionRequest(_ query: StatisticsCollectionQueryDescriptor) -> Healthledger_V1_StatisticsCollectionRequest {
        .with { request in
            request.type = query.type.identifier
            request.startUs = microseconds(query.range.start)
            request.endUs = microseconds(query.range.end)
            request.anchorUs = microseconds(query.intervals.anchor)
            request.intervalCount = UInt32(clamping: query.intervals.count)
            request.intervalUnit = query.intervals.unit.schema
            request.timeZone = query.intervals.timeZone.identifier
            request.options = UInt32(truncatingIfNeeded: query.options.rawValue)
            if let predicate = query.predicate { request.predicate = .init(predicate) }
        }
    }
}

/// The successive states of a watched statistics collection.
public struct StatisticsCollectionUpdates: AsyncSequence, Sendable {
    public typealias Element = StatisticsCollection
    let stream: CallStream
    let consumed: @Sendable () -> Void
    let query: StatisticsCollectionQueryDescriptor

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: CallStream.AsyncIterator
        let consumed: @Sendable () -> Void
        let query: StatisticsCollectionQueryDescriptor
        /// The collection so far, in start order.
        var current: [Statistics] = []
        /// Reads the batches, each unit and source decoded once.
        var reader = StatisticsBatchReader()

        public mutating func next() async throws -> StatisticsCollection? {
            while let bytes = try await base.next() {
                consumed()
                let batch: (results: [Statistics], complete: Bool)
                do {
                    batch = try reader.read(bytes, type: query.type)
                } catch {
                    throw RPCError(.internalError, "the server sent invalid statistics: \(error)", cause: error)
                }
                for statistics in batch.results { update(with: statistics) }
                if batch.complete { return StatisticsCollection(statistics: current, intervals: HealthStore.wireIntervals(query), type: query.type) }
            }
            return nil
        }

        /// Puts an interval's statistics in place (one without sources empties its interval).
        /// The server sends intervals in order, so the first state only appends.
        private mutating func update(with statistics: Statistics) {
            let present = !statistics.sources.isEmpty
            if current.last.map({ $0.startDate < statistics.startDate }) ?? true {
                if present { current.append(statistics) }
                return
            }
            var low = 0
            var high = current.count
            while low < high {
                let middle = (low + high) / 2
                if current[middle].startDate < statistics.startDate { low = middle + 1 } else { high = middle }
            }
            if low < current.count, current[low].startDate == statistics.startDate {
                if present { current[low] = statistics } else { current.remove(at: low) }
            } else if present {
                current.insert(statistics, at: low)
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator(), consumed: consumed, query: query) }
}
