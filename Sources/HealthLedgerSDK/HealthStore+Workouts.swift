import Foundation
import HealthLedgerRPC
import LedgerSchema
import SwiftProtobuf

/// Workouts: associating samples, workout statistics, route builders and route queries.
/// Workouts themselves are saved, fetched and queried like any sample; to find the samples
/// of a workout, query with ``SampleQueryDescriptor/workout``.
extension HealthStore {
    /// Associates saved samples with a workout this app saved (HealthKit's `add(_:to:)`).
    /// The workout's statistics and the "associated with" predicate then include them.
    public func add(_ samples: [UUID], to workout: UUID) async throws {
        let request = Healthledger_V1_AssociateSamplesRequest.with {
            $0.workoutUuid = Data(workout.bytes)
            $0.sampleUuids = samples.map { Data($0.bytes) }
        }
        _ = try await unary(.associateSamples, request)
    }

    /// Associates saved samples with a saved workout (HealthKit's `add(_:to:)`).
    public func add(_ samples: [HealthObject], to workout: Workout) async throws {
        try await add(samples.map(\.uuid), to: workout.uuid)
    }

    /// The statistics of the samples associated with a workout that this app may read, for
    /// the workout and each of its activities (HealthKit's `statistics(for:)`).
    public func statistics(for workout: UUID) async throws -> WorkoutStatistics {
        let request = Healthledger_V1_WorkoutStatisticsRequest.with { $0.workoutUuid = Data(workout.bytes) }
        let response = try Self.decode(Healthledger_V1_WorkoutStatisticsResponse.self, try await unary(.workoutStatistics, request))
        do { return try response.model() } catch { throw RPCError(.internalError, "the server sent invalid workout statistics: \(error)") }
    }

    /// Opens a route builder on the server (HealthKit's `HKWorkoutRouteBuilder`).
    public func makeRouteBuilder() async throws -> WorkoutRouteBuilder {
        let response = try Self.decode(Healthledger_V1_RouteBuilderResponse.self, try await unary(.beginRoute, Healthledger_V1_BeginRouteRequest()))
        guard let id = UUID(bytes: response.builderID) else { throw RPCError(.internalError, "the server sent an invalid route builder id") }
        return WorkoutRouteBuilder(store: self, id: id)
    }

    /// A route's locations in time order, in batches as the server stores them (HealthKit's
    /// `HKWorkoutRouteQuery`): the route is never held whole unless the caller keeps it.
    public func routeLocations(of route: UUID) async throws -> RouteLocationBatches {
        try await openStream(.routeLocations, Healthledger_V1_RouteQueryRequest.with { $0.routeUuid = Data(route.bytes) }) { bytes in
            let batch = try HealthStore.decode(Healthledger_V1_RouteBatch.self, bytes)
            do { return RouteLocationBatch(locations: try batch.locations.model(), done: batch.done) } catch {
                throw RPCError(.internalError, "the server sent invalid route locations: \(error)")
            }
        }
    }
}

/// Collects a route's locations on the server and stores them with a workout (HealthKit's
/// `HKWorkoutRouteBuilder`). Locations may come in any order and any number of calls.
///
/// ```swift
/// let builder = try await store.makeRouteBuilder()
/// try await builder.insertRouteData(firstKilometre)
/// try await builder.insertRouteData(rest)
/// let route = try await builder.finishRoute(with: workout.uuid)
/// ```
public struct WorkoutRouteBuilder: Sendable {
    let store: HealthStore
    public let id: UUID
    /// Locations per call.
    static let batchSize = 4096

    /// Adds locations; returns how many the builder holds.
    @discardableResult
    public func insertRouteData(_ locations: [RouteLocation]) async throws -> Int {
        var count = 0
        for start in stride(from: 0, to: max(locations.count, 1), by: Self.batchSize) {
            let request = Healthledger_V1_AddRouteLocationsRequest.with {
                $0.builderID = Data(id.bytes)
                $0.locations = .init(locations[start..<min(start + Self.batchSize, locations.count)])
            }
            let response = try HealthStore.decode(Healthledger_V1_RouteBuilderResponse.self, try await store.unary(.addRouteLocations, request))
            count = Int(clamping: response.locationCount)
        }
        return count
    }

    /// Stores the locations, sorted by time, as a route of `workout` (a workout this app saved).
    ///
    /// - Parameters:
    ///   - sourceRevision: the route's source; only the owner's choice is kept (an app's
    ///     route is always its own), as on a save.
    ///   - device: the device that recorded the route.
    public func finishRoute(
        with workout: UUID, metadata: Metadata = [:], sourceRevision: SourceRevision? = nil, device: Device? = nil
    ) async throws -> FinishedRoute {
        let request = Healthledger_V1_FinishRouteRequest.with {
            $0.builderID = Data(id.bytes)
            $0.workoutUuid = Data(workout.bytes)
            $0.metadata = .init(metadata)
            if let sourceRevision { $0.sourceRevision = .init(sourceRevision) }
            if let device { $0.device = .init(device) }
        }
        let response = try HealthStore.decode(Healthledger_V1_FinishRouteResponse.self, try await store.unary(.finishRoute, request))
        guard case .workoutRoute(let route)? = try? response.route.model(), let outcome = try? response.outcome.model() else {
            throw RPCError(.internalError, "the server sent an invalid route")
        }
        return FinishedRoute(route: route, disposition: outcome.disposition)
    }

    /// Drops the builder and its locations.
    public func discard() async throws {
        _ = try await store.unary(.discardRoute, Healthledger_V1_DiscardRouteRequest.with { $0.builderID = Data(id.bytes) })
    }
}

/// A finished route and what became of it: saved, replacing an older version of its sync
/// identifier, or ignored (an equal or newer version is stored; nothing was written).
@dynamicMemberLookup
public struct FinishedRoute: Sendable, Hashable {
    public var route: WorkoutRoute
    public var disposition: SaveResult.Disposition

    public subscript<Value>(dynamicMember keyPath: KeyPath<WorkoutRoute, Value>) -> Value { route[keyPath: keyPath] }
}

/// One batch of a route query: locations in time order; the last batch has `done` set.
public struct RouteLocationBatch: Sendable, Hashable {
    public var locations: [RouteLocation]
    public var done: Bool
}

/// The batches of a route query.
public typealias RouteLocationBatches = DecodedStream<RouteLocationBatch>

extension DecodedStream where Element == RouteLocationBatch {
    /// Every location, in time order.
    public func all() async throws -> [RouteLocation] {
        var locations: [RouteLocation] = []
        for try await batch in self { locations += batch.locations }
        return locations
    }
}
