import Foundation

/// A correlation query (HealthKit's `HKCorrelationQuery`): the correlations of a type that
/// match a predicate and, for each member predicate, hold a member of that type that matches.
///
/// ```swift
/// // Blood-pressure readings with a systolic value of 140 mmHg or more.
/// let high = try ledger.correlations(CorrelationQuery(
///     type: .bloodPressure,
///     memberPredicates: [systolic: .quantity(.greaterOrEqual, try Quantity(140, "mmHg"))]), as: .owner)
/// ```
public struct CorrelationQuery: Sendable, Hashable {
    public var type: CorrelationType
    /// Correlations overlapping this interval; all when nil.
    public var interval: DateInterval?
    /// A condition on the correlation itself (dates, source, metadata …).
    public var predicate: ObjectPredicate?
    /// For each type: at least one member of that type (that the reader may read) matches.
    public var memberPredicates: [QuantityType: ObjectPredicate]
    /// 0: no limit.
    public var limit: Int
    public var sort: SampleSort

    public init(
        type: CorrelationType, interval: DateInterval? = nil, predicate: ObjectPredicate? = nil, memberPredicates: [QuantityType: ObjectPredicate] = [:],
        limit: Int = 0, sort: SampleSort = .startDate(ascending: true)
    ) {
        self.type = type
        self.interval = interval
        self.predicate = predicate
        self.memberPredicates = memberPredicates
        self.limit = limit
        self.sort = sort
    }
}
