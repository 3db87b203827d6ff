import Foundation
import HealthModel
import SwiftProtobuf

extension Healthledger_V1_WorkoutPredicate {
    public init(_ predicate: WorkoutPredicate) {
        self.init()
        switch predicate {
        case .activityType(let type): activityType = UInt32(type.rawValue)
        case .duration(let comparison, let seconds):
            duration = .with {
                $0.comparison = .init(rawValue: comparison.rawValue) ?? .unspecified
                $0.seconds = seconds
            }
        case .statistic(let type, let statistic, let comparison, let bound):
            self.statistic = .with {
                $0.type = type.identifier
                $0.statistic = .init(rawValue: statistic.rawValue) ?? .unspecified
                $0.comparison = .init(rawValue: comparison.rawValue) ?? .unspecified
                $0.quantity = .init(bound)
            }
        case .activity(let inner): activity = .init(inner)
        case .all(let predicates): allOf = .with { $0.predicates = predicates.map(Healthledger_V1_WorkoutPredicate.init) }
        case .any(let predicates): anyOf = .with { $0.predicates = predicates.map(Healthledger_V1_WorkoutPredicate.init) }
        case .not(let inner): negation = .init(inner)
        }
    }

    /// - Throws: ``HealthError`` (`invalidArgument`) for an empty predicate, an unknown
    ///   activity type, comparison or statistic, or a bad type or unit. A predicate of more
    ///   than ``WorkoutPredicate/maximumTerms`` terms is refused before the rest is converted.
    public func model() throws -> WorkoutPredicate {
        var terms = 0
        return try model(terms: &terms)
    }

    private func model(terms: inout Int) throws -> WorkoutPredicate {
        let field = "workout_predicate"
        terms += 1
        guard terms <= WorkoutPredicate.maximumTerms else {
            throw HealthError.invalidArgument("a workout predicate has at most \(WorkoutPredicate.maximumTerms) terms", field: field)
        }
        switch kind {
        case .activityType(let raw): return .activityType(try WorkoutActivityType(validating: Int(raw), field: "\(field).activity_type"))
        case .duration(let duration):
            return .duration(try Comparison(validating: duration.comparison.rawValue, field: "\(field).comparison"), duration.seconds)
        case .statistic(let statistic):
            guard statistic.hasQuantity else { throw HealthError.invalidArgument("the statistic needs a quantity to compare with", field: "\(field).quantity") }
            return .statistic(
                try QuantityType(statistic.type), try WorkoutStatistic(validating: statistic.statistic.rawValue, field: "\(field).statistic"),
                try Comparison(validating: statistic.comparison.rawValue, field: "\(field).comparison"),
                try statistic.quantity.model(field: "\(field).quantity"))
        case .activity(let inner): return .activity(try inner.model(terms: &terms))
        case .allOf(let list): return .all(try list.predicates.map { try $0.model(terms: &terms) })
        case .anyOf(let list): return .any(try list.predicates.map { try $0.model(terms: &terms) })
        case .negation(let inner): return .not(try inner.model(terms: &terms))
        case nil: throw HealthError.invalidArgument("the workout predicate is empty", field: field)
        }
    }
}

extension Healthledger_V1_WorkoutStatisticsResponse {
    public init(_ statistics: WorkoutStatistics) {
        self.init()
        workout = Self.entries(statistics.workout)
        activities = statistics.activities.map { activity in
            Healthledger_V1_ActivityStatistics.with {
                $0.activityUuid = Data(activity.uuid.bytes)
                $0.statistics = Self.entries(activity.statistics)
            }
        }
    }

    private static func entries(_ statistics: [QuantityType: Statistics]) -> [Healthledger_V1_TypeStatistics] {
        statistics.sorted { $0.key.identifier < $1.key.identifier }.map { type, value in
            .with {
                $0.type = type.identifier
                $0.result = .init(value)
            }
        }
    }

    /// - Throws: ``HealthError`` for an unknown type, a bad unit or a bad activity UUID.
    public func model() throws -> WorkoutStatistics {
        func statistics(_ entries: [Healthledger_V1_TypeStatistics]) throws -> [QuantityType: Statistics] {
            var result: [QuantityType: Statistics] = [:]
            for entry in entries {
                let type = try QuantityType(entry.type)
                result[type] = try entry.result.model(type: type)
            }
            return result
        }
        var result = WorkoutStatistics(workout: try statistics(workout))
        for activity in activities {
            guard let uuid = UUID(bytes: activity.activityUuid) else { throw HealthError.invalidArgument("an activity UUID must be 16 bytes", field: "activity_uuid") }
            result.activities.append(ActivityStatistics(uuid: uuid, statistics: try statistics(activity.statistics)))
        }
        return result
    }
}
