import Foundation

/// The statistics of the samples associated with a workout (HealthKit's
/// `HKWorkout.statistics(for:)` and `HKWorkoutActivity.statistics(for:)`), per quantity type,
/// in canonical units: a sum for cumulative types; average, minimum and maximum for discrete
/// ones, computed as a statistics query over the workout's (or activity's) span computes them.
/// Only samples the reader may read count.
public struct WorkoutStatistics: Sendable, Hashable {
    /// Over the whole workout.
    public var workout: [QuantityType: Statistics]
    /// Per activity, in the workout's order: the samples overlapping it.
    public var activities: [ActivityStatistics]

    public init(workout: [QuantityType: Statistics] = [:], activities: [ActivityStatistics] = []) {
        self.workout = workout
        self.activities = activities
    }

    public func statistics(for type: QuantityType) -> Statistics? { workout[type] }

    public func statistics(for type: QuantityType, activity: UUID) -> Statistics? {
        activities.first { $0.uuid == activity }?.statistics[type]
    }
}

/// The statistics of one workout activity's samples, per quantity type.
public struct ActivityStatistics: Sendable, Hashable {
    public var uuid: UUID
    public var statistics: [QuantityType: Statistics]

    public init(uuid: UUID, statistics: [QuantityType: Statistics]) {
        self.uuid = uuid
        self.statistics = statistics
    }
}

/// How a value compares with a bound (the operators of HealthKit's predicates).
public enum Comparison: Int, Sendable, Hashable, CaseIterable {
    case less = 1
    case lessOrEqual = 2
    case equal = 3
    case greaterOrEqual = 4
    case greater = 5
    case notEqual = 6

    public func holds(_ value: Double, _ bound: Double) -> Bool {
        switch self {
        case .less: value < bound
        case .lessOrEqual: value <= bound
        case .equal: value == bound
        case .greaterOrEqual: value >= bound
        case .greater: value > bound
        case .notEqual: value != bound
        }
    }
}

/// Which statistic of associated samples a predicate compares.
public enum WorkoutStatistic: Int, Sendable, Hashable, CaseIterable {
    case sum = 1
    case average = 2
    case minimum = 3
    case maximum = 4

    func value(in values: StatisticsValues) -> Quantity? {
        switch self {
        case .sum: values.sum
        case .average: values.average
        case .minimum: values.minimum
        case .maximum: values.maximum
        }
    }
}

/// A condition on workouts (HealthKit's `predicateForWorkouts(with:)`,
/// `predicateForWorkouts(with:duration:)`, `predicateForWorkouts(with:quantityType:…)` and
/// `predicateForWorkoutActivities`), composable with `all`, `any` and `not`.
///
/// ```swift
/// // Runs with an activity whose average heart rate was above 150 count/min.
/// let hard = WorkoutPredicate.all([
///     .activityType(.running),
///     .activity(.statistic(heartRate, .average, .greater, try Quantity(150, "count/min"))),
/// ])
/// ```
public indirect enum WorkoutPredicate: Sendable, Hashable {
    case activityType(WorkoutActivityType)
    /// The duration (paused spans excluded), in seconds.
    case duration(Comparison, TimeInterval)
    /// A statistic of the associated samples of a quantity type; never matches without samples.
    case statistic(QuantityType, WorkoutStatistic, Comparison, Quantity)
    /// Some activity of the workout matches.
    case activity(WorkoutPredicate)
    case all([WorkoutPredicate])
    case any([WorkoutPredicate])
    case not(WorkoutPredicate)

    /// Most predicates one query may nest.
    public static let maximumTerms = 64

    /// Checks statistics against their types (a sum of a cumulative type, the others of a
    /// discrete type, a compatible unit, finite bounds) and the predicate's size.
    /// - Throws: ``HealthError`` (`invalidArgument`).
    public func validate() throws {
        var terms = 0
        try validate(terms: &terms)
    }

    private func validate(terms: inout Int) throws {
        terms += 1
        guard terms <= Self.maximumTerms else {
            throw HealthError.invalidArgument("a workout predicate has at most \(Self.maximumTerms) terms", field: "workout_predicate")
        }
        switch self {
        case .activityType: return
        case .duration(_, let seconds):
            guard seconds.isFinite else { throw HealthError.invalidArgument("a duration bound must be finite", field: "workout_predicate.duration") }
        case .statistic(let type, let statistic, _, let bound):
            let cumulative = type.aggregationStyle == .cumulative
            guard cumulative == (statistic == .sum) else {
                throw HealthError.invalidArgument(
                    "\(statistic) needs a \(cumulative ? "discrete" : "cumulative") type; \(type) is \(cumulative ? "cumulative" : "discrete")",
                    field: "workout_predicate.statistic")
            }
            guard bound.value.isFinite, bound.isCompatible(with: type.canonicalUnit) else {
                throw HealthError.invalidArgument(
                    "the bound \(bound) must be a finite quantity compatible with '\(type.canonicalUnit)'", field: "workout_predicate.statistic.quantity")
            }
        case .activity(let inner), .not(let inner): try inner.validate(terms: &terms)
        case .all(let predicates), .any(let predicates): for predicate in predicates { try predicate.validate(terms: &terms) }
        }
    }

    /// Whether a workout (or, inside ``activity(_:)``, an activity) with `facts` matches.
    public func matches(_ facts: WorkoutFacts) throws -> Bool {
        switch self {
        case .activityType(let type): return type == facts.activityType
        case .duration(let comparison, let bound): return comparison.holds(facts.duration, bound)
        case .statistic(let type, let statistic, let comparison, let bound):
            guard let values = try facts.statistics(type), let value = statistic.value(in: values),
                let boundValue = try? bound.doubleValue(for: type.canonicalUnit)
            else { return false }
            return comparison.holds(value.value, boundValue)
        case .activity(let inner):
            guard let activities = facts.activities else { return try inner.matches(facts) }
            for activity in activities where try inner.matches(activity) { return true }
            return false
        case .all(let predicates):
            for predicate in predicates where !(try predicate.matches(facts)) { return false }
            return true
        case .any(let predicates):
            for predicate in predicates where try predicate.matches(facts) { return true }
            return false
        case .not(let inner):
            return !(try inner.matches(facts))
        }
    }
}

/// What a ``WorkoutPredicate`` looks at: a workout's or an activity's type and duration, and
/// the statistics of its associated samples.
public struct WorkoutFacts {
    public var activityType: WorkoutActivityType
    public var duration: TimeInterval
    /// The values of the associated samples of a type; nil when there are none.
    public var statistics: (QuantityType) throws -> StatisticsValues?
    /// A workout's activities; nil for an activity.
    public var activities: [WorkoutFacts]?

    public init(
        activityType: WorkoutActivityType, duration: TimeInterval, statistics: @escaping (QuantityType) throws -> StatisticsValues?,
        activities: [WorkoutFacts]?
    ) {
        self.activityType = activityType
        self.duration = duration
        self.statistics = statistics
        self.activities = activities
    }
}
