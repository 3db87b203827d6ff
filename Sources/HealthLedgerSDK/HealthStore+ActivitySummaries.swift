import Foundation
import HealthModel

/// The activity summaries of a range of days (HealthKit's `HKActivitySummaryQuery`): each
/// day's rings and goals, oldest day first, as far as the caller may read
/// ``ObjectType/activitySummary``.
///
/// ```swift
/// let may = ActivitySummaryQueryDescriptor(
///     from: try CalendarDay(year: 2025, month: 5, day: 1), to: try CalendarDay(year: 2025, month: 5, day: 31))
/// for summary in try await may.result(for: store) {
///     print(summary.day, summary.exerciseTime)
/// }
/// // Today's rings as they fill (HealthKit's update handler):
/// for try await update in try await ActivitySummaryQueryDescriptor(from: today, to: today).updates(for: store) {
///     print(update.summaries, update.removed)
/// }
/// ```
public struct ActivitySummaryQueryDescriptor: Sendable, Hashable {
    /// The first day, and the last (both included); nil: unbounded.
    public var from: CalendarDay?
    public var to: CalendarDay?

    public init(from: CalendarDay? = nil, to: CalendarDay? = nil) {
        self.from = from
        self.to = to
    }

    /// The summaries of the days, oldest day first.
    /// - Throws: ``HealthError`` `invalidArgument` when `to` is before `from`; the store's
    ///   errors (an app without a read grant gets its own summaries: none).
    public func result(for store: HealthStore) async throws -> [ActivitySummary] {
        try await SampleQueryDescriptor(type: .activitySummary, interval: try interval()).result(for: store).compactMap(\.activitySummary)
    }

    /// The summaries of the days as they are now, then each change to them as it commits: a
    /// day's summary saved or replaced (as the day goes), or removed (deleted, erased, or no
    /// longer readable). Runs until the task is cancelled or the store closes.
    public func updates(for store: HealthStore) async throws -> ActivitySummaryUpdates {
        let changes = try await store.changes(for: AnchoredObjectQueryDescriptor(type: .activitySummary, interval: try interval()))
        return ActivitySummaryUpdates(changes: changes)
    }

    /// The interval whose overlapping summaries are the days asked for (nil: every day): from
    /// the middle of the first day to the middle of the last, since a summary spans its day in UTC.
    /// - Throws: ``HealthError`` `invalidArgument` when `to` is before `from`.
    public func interval() throws -> DateInterval? {
        guard from != nil || to != nil else { return nil }
        if let from, let to, to < from {
            throw HealthError.invalidArgument("the last day (\(to)) is before the first (\(from))", field: "to")
        }
        let first = (from?.start ?? Self.earliest).addingTimeInterval(43_200)
        let last = (to?.start ?? Self.latest).addingTimeInterval(43_200)
        return DateInterval(start: first, end: last)
    }

    private static let earliest = try! CalendarDay(year: 1, month: 1, day: 1).start
    private static let latest = try! CalendarDay(year: 9999, month: 12, day: 30).start
}

/// A change to the days an ``ActivitySummaryQueryDescriptor`` watches.
public struct ActivitySummaryUpdate: Sendable {
    /// Summaries saved or replaced since the last update (the first: every summary of the days).
    public var summaries: [ActivitySummary]
    /// Summaries gone since the last update (a replaced one is among them).
    public var removed: [UUID]
}

/// The updates of a watched ``ActivitySummaryQueryDescriptor``.
public struct ActivitySummaryUpdates: AsyncSequence, Sendable {
    public typealias Element = ActivitySummaryUpdate
    let changes: AnchoredObjectQueryResults

    public struct AsyncIterator: AsyncIteratorProtocol {
        var changes: AnchoredObjectQueryResults.AsyncIterator

        public mutating func next() async throws -> ActivitySummaryUpdate? {
            guard let batch = try await changes.next() else { return nil }
            return ActivitySummaryUpdate(summaries: batch.addedObjects.compactMap(\.activitySummary), removed: batch.deletedObjects.map(\.uuid))
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(changes: changes.makeAsyncIterator()) }
}
