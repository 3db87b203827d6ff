import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

extension Ledger {
    /// The statistics of the samples associated with a workout, for the workout and each of
    /// its activities, counting only the samples `principal` may read.
    ///
    /// - Returns: nil when there is no such workout or `principal` may not read it.
    public func workoutStatistics(for workout: UUID, as principal: Principal) throws -> WorkoutStatistics? {
        try read { snapshot in
            guard let stored = try Self.readable(workout, as: principal, in: snapshot) else { return nil }
            guard case .workout(let model) = try Self.loadObject(sequence: stored.sequence, in: snapshot) else {
                return nil  // a UUID of another kind of object: no workout by that UUID
            }
            let reader = WorkoutMemberReader(principal: principal, snapshot: snapshot)
            return try reader.statistics(of: model)
        }
    }

    /// The location chunks of a route `principal` may read, to read one at a time with
    /// ``routeLocations(_:chunk:)``: the route is never loaded whole.
    ///
    /// - Parameter onScope: told the read scope of routes the read ran with, for a server that
    ///   must end the stream of these chunks if that access is taken away.
    /// - Throws: ``HealthError`` `noData` when there is no such route or `principal` may not
    ///   read it (the two are not told apart).
    public func routeChunks(of route: UUID, as principal: Principal, onScope: (ReadScope) -> Void = { _ in }) throws -> RouteChunks {
        try read { snapshot in
            onScope(try ReadScope(principal, type: .workoutRoute, in: snapshot))
            guard let stored = try Self.readable(route, as: principal, in: snapshot), stored.type == ObjectType.workoutRoute.code else {
                throw HealthError(.noData, "no route with UUID \(route)", field: "route_uuid")
            }
            return RouteChunks(route: route, sequences: try WorkoutIndex.routeChunks(of: route.bytes, in: snapshot))
        }
    }

    /// Chunk `index` of a route as a serialized `healthledger.v1.RouteLocations`, straight
    /// from the log (the log is append-only, so a chunk stays readable once listed).
    public func encodedRouteLocations(_ chunks: RouteChunks, chunk index: Int) throws -> [UInt8] {
        try read { snapshot in
            let stored = try Ledger.storedEvent(chunks.sequences[index], in: snapshot)
            return try ProtoReader.field(RouteLocationsAddedField.locations, in: try LedgerEvent.bodyView(stored: stored)).map { Array($0) } ?? []
        }
    }

    /// Chunk `index` of a route's locations, in time order.
    public func routeLocations(_ chunks: RouteChunks, chunk index: Int) throws -> [RouteLocation] {
        try Healthledger_V1_RouteLocations(serializedBytes: encodedRouteLocations(chunks, chunk: index)).model()
    }

    /// All of a route's locations, in time order (for tools; servers stream chunks).
    public func routeLocations(of route: UUID, as principal: Principal) throws -> [RouteLocation] {
        let chunks = try routeChunks(of: route, as: principal)
        return try (0..<chunks.count).flatMap { try routeLocations(chunks, chunk: $0) }
    }
}

/// The location chunks of one route, in time order (see ``Ledger/routeChunks(of:as:)``).
public struct RouteChunks: Sendable {
    public let route: UUID
    let sequences: [UInt64]

    public var count: Int { sequences.count }
}

/// Reads the samples associated with workouts as one reader may see them: each type through
/// that reader's scope, so statistics and predicates never count a sample it may not read.
/// Their statistics come from the statistics engine, over the workout's or activity's span:
/// time-weighted where the type is, sums split in proportion at the span's edges, sources
/// merged by priority. A statistics query over the same samples and span gives the same values.
final class WorkoutMemberReader {
    let principal: Principal
    let snapshot: LedgerSnapshot
    private var scopes: [UInt32: ReadScope] = [:]
    private var engines: [QuantityType: StatisticsEngine] = [:]

    init(principal: Principal, snapshot: LedgerSnapshot) {
        self.principal = principal
        self.snapshot = snapshot
    }

    /// The quantity samples associated with `workout` that the reader may read.
    func readableQuantities(of workout: UUID) throws -> [(QuantityType, WorkoutMember)] {
        var types: [UInt32: QuantityType] = [:]
        let members = try WorkoutIndex.visibleMembers(of: workout.bytes, scope: { code in
            guard let identifier = TypeCatalogue.identifiersByCode[code], let type = try? QuantityType(identifier) else { return nil }
            let scope = try scopes[code] ?? ReadScope(principal, type: type.objectType, in: snapshot)
            scopes[code] = scope
            types[code] = type
            return scope
        }, in: snapshot)
        // visibleMembers visits only quantity types, and of each only what its scope allows.
        return members.map { (types[$0.type]!, $0) }
    }

    func statistics(of workout: Workout) throws -> WorkoutStatistics {
        let members = Dictionary(grouping: try readableQuantities(of: workout.uuid), by: \.0).mapValues { $0.map(\.1) }
        func statistics(from start: Date, to end: Date) throws -> [QuantityType: Statistics] {
            var result: [QuantityType: Statistics] = [:]
            for (type, samples) in members { result[type] = try self.statistics(type, samples, from: start, to: end) }
            return result
        }
        var result = WorkoutStatistics(workout: try statistics(from: workout.startDate, to: workout.endDate))
        for activity in workout.activities {
            result.activities.append(ActivityStatistics(uuid: activity.uuid, statistics: try statistics(from: activity.startDate, to: activity.endDate)))
        }
        return result
    }

    /// The statistics of `members` (of `type`) over `[start, end)`, as a statistics query
    /// computes them: a sum for cumulative types; average, minimum and maximum for discrete
    /// ones. Nil when none overlaps the span.
    func statistics(_ type: QuantityType, _ members: [WorkoutMember], from start: Date, to end: Date) throws -> Statistics? {
        let bucket = (start: microseconds(start), end: microseconds(end))
        let range = TimeRange(start: bucket.start, end: bucket.end)
        var samples: [StatisticsSample] = []
        for member in members where range.counts(member.indexEntry) {
            if member.isSeries {
                samples += try SeriesValues.samples(of: member.indexEntry, overlapping: range, in: snapshot)
            } else {
                samples.append(StatisticsSample(member.indexEntry))
            }
        }
        samples = StatisticsSample.ordered(samples)
        guard !samples.isEmpty else { return nil }
        return try engine(for: type).statistics(samples[...], bucket: bucket, dates: DateInterval(start: start, end: end))
    }

    private func engine(for type: QuantityType) throws -> StatisticsEngine {
        if let engine = engines[type] { return engine }
        let options: StatisticsOptions = type.aggregationStyle == .cumulative ? .cumulativeSum : [.discreteAverage, .discreteMin, .discreteMax]
        let engine = try StatisticsEngine(type: type, options: options, principal: principal, in: snapshot)
        engines[type] = engine
        return engine
    }

    /// Whether the workout saved by the event stored as `stored` matches `predicate`.
    func matches(_ predicate: WorkoutPredicate, workoutEvent stored: UnsafeRawBufferPointer) throws -> Bool {
        guard case .workout(let workout) = try LedgerEvent(stored: stored).savedObject() else { return false }
        var members: [QuantityType: [WorkoutMember]]?
        func facts(type: WorkoutActivityType, duration: TimeInterval, start: Date, end: Date, activities: [WorkoutFacts]?) -> WorkoutFacts {
            WorkoutFacts(activityType: type, duration: duration, statistics: { [self] quantityType in
                if members == nil { members = Dictionary(grouping: try readableQuantities(of: workout.uuid), by: \.0).mapValues { $0.map(\.1) } }
                return try statistics(quantityType, members![quantityType] ?? [], from: start, to: end)?.values
            }, activities: activities)
        }
        let activities = workout.activities.map {
            facts(type: $0.configuration.activityType, duration: $0.duration, start: $0.startDate, end: $0.endDate, activities: nil)
        }
        return try predicate.matches(
            facts(type: workout.activityType, duration: workout.duration, start: workout.startDate, end: workout.endDate, activities: activities))
    }
}
