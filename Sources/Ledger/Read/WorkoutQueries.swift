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
        try environment.read { txn in
            guard let stored = try Self.readable(workout, as: principal, in: txn, databases) else { return nil }
            guard case .workout(let model) = try Self.loadObject(sequence: stored.sequence, in: txn, databases) else {
                return nil  // a UUID of another kind of object: no workout by that UUID
            }
            let reader = WorkoutMemberReader(principal: principal, txn: txn, databases: databases)
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
        try environment.read { txn in
            onScope(try ReadScope(principal, type: .workoutRoute, in: txn, databases))
            guard let stored = try Self.readable(route, as: principal, in: txn, databases), stored.type == ObjectType.workoutRoute.code else {
                throw HealthError(.noData, "no route with UUID \(route)", field: "route_uuid")
            }
            return RouteChunks(route: route, sequences: try WorkoutIndex.routeChunks(of: route.bytes, in: txn, databases))
        }
    }

    /// Chunk `index` of a route as a serialized `healthledger.v1.RouteLocations`, straight
    /// from the log (the log is append-only, so a chunk stays readable once listed).
    public func encodedRouteLocations(_ chunks: RouteChunks, chunk index: Int) throws -> [UInt8] {
        try environment.read { txn in
            let stored = try Ledger.storedEvent(chunks.sequences[index], in: txn, databases)
            return try ProtoReader.field(3, in: try LedgerEvent.bodyView(stored: stored)).map { Array($0) } ?? []
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
final class WorkoutMemberReader {
    let principal: Principal
    let txn: Transaction
    let databases: LedgerDatabases
    private var scopes: [UInt32: ReadScope] = [:]

    init(principal: Principal, txn: Transaction, databases: LedgerDatabases) {
        self.principal = principal
        self.txn = txn
        self.databases = databases
    }

    /// The quantity samples associated with `workout` that the reader may read.
    func readableQuantities(of workout: UUID) throws -> [(QuantityType, WorkoutMember)] {
        var types: [UInt32: QuantityType] = [:]
        let members = try WorkoutIndex.visibleMembers(of: workout.bytes, scope: { code in
            guard let identifier = TypeCatalogue.identifiersByCode[code], let type = try? QuantityType(identifier) else { return nil }
            let scope = try scopes[code] ?? ReadScope(principal, type: type.objectType, in: txn, databases)
            scopes[code] = scope
            types[code] = type
            return scope
        }, in: txn, databases)
        // visibleMembers visits only quantity types, and of each only what its scope allows.
        return members.map { (types[$0.type]!, $0) }
    }

    func statistics(of workout: Workout) throws -> WorkoutStatistics {
        let members = try readableQuantities(of: workout.uuid)
        var result = WorkoutStatistics()
        result.workout = Self.statistics(members, from: workout.startDate, to: workout.endDate)
        for activity in workout.activities {
            let inside = members.filter { Self.activity(activity.startDate, activity.endDate, contains: $0.1) }
            result.activities.append(ActivityStatistics(uuid: activity.uuid, statistics: Self.statistics(inside, from: activity.startDate, to: activity.endDate)))
        }
        return result
    }

    /// Whether the workout saved by the event stored as `stored` matches `predicate`.
    func matches(_ predicate: WorkoutPredicate, workoutEvent stored: UnsafeRawBufferPointer) throws -> Bool {
        guard case .workout(let workout) = try LedgerEvent(stored: stored).savedObject() else { return false }
        var members: [(QuantityType, WorkoutMember)]?
        func facts(type: WorkoutActivityType, duration: TimeInterval, start: Date, end: Date, isActivity: Bool, activities: [WorkoutFacts]?) -> WorkoutFacts {
            WorkoutFacts(activityType: type, duration: duration, statistics: { [self] quantityType in
                if members == nil { members = try readableQuantities(of: workout.uuid) }
                let values = members!.filter { $0.0 == quantityType && (!isActivity || Self.activity(start, end, contains: $0.1)) }.map(\.1.value)
                return values.isEmpty ? nil : WorkoutStatistics.values(of: quantityType, values)
            }, activities: activities)
        }
        let activities = workout.activities.map {
            facts(type: $0.configuration.activityType, duration: $0.duration, start: $0.startDate, end: $0.endDate, isActivity: true, activities: nil)
        }
        return try predicate.matches(
            facts(type: workout.activityType, duration: workout.duration, start: workout.startDate, end: workout.endDate, isActivity: false, activities: activities))
    }

    /// An activity's samples are those starting within it.
    static func activity(_ start: Date, _ end: Date, contains member: WorkoutMember) -> Bool {
        let (low, high) = (microseconds(start), microseconds(end))
        return member.startUs >= low && (member.startUs < high || (low == high && member.startUs == low))
    }

    private static func statistics(_ members: [(QuantityType, WorkoutMember)], from start: Date, to end: Date) -> [QuantityType: Statistics] {
        Dictionary(grouping: members, by: \.0).mapValues { group in
            let type = group[0].0
            return Statistics(type: type, startDate: start, endDate: end, values: WorkoutStatistics.values(of: type, group.map(\.1.value)))
        }
    }
}
