import Foundation

// HealthKit's query-descriptor shape: each descriptor runs against a store with
// `result(for:)` (one answer) and, where HealthKit has a long-running form, `results(for:)`
// (an AsyncSequence of updates; stopping the iteration, or cancelling its task, cancels the
// call).

extension StatisticsQueryDescriptor {
    /// The statistics, or nil when no sample matches (HealthKit's `HKStatisticsQueryDescriptor.result(for:)`).
    public func result(for store: HealthStore) async throws -> Statistics? { try await store.statistics(for: self) }
}

extension StatisticsCollectionQueryDescriptor {
    /// The collection now (HealthKit's `HKStatisticsCollectionQueryDescriptor.result(for:)`).
    public func result(for store: HealthStore) async throws -> StatisticsCollection { try await store.statisticsCollection(for: self) }

    /// The collection now, then the updated collection each time samples of the type commit.
    public func results(for store: HealthStore) async throws -> StatisticsCollectionUpdates { try await store.statisticsCollectionUpdates(for: self) }
}

/// A workout route query (HealthKit's `HKWorkoutRouteQueryDescriptor`): a route's locations in
/// time order, in batches, the last one marked done.
///
/// ```swift
/// for try await batch in try await WorkoutRouteQueryDescriptor(route: route.uuid).results(for: store) {
///     draw(batch.locations)
/// }
/// ```
public struct WorkoutRouteQueryDescriptor: Sendable, Hashable {
    public var route: UUID

    public init(route: UUID) { self.route = route }

    /// Every location of the route, in time order.
    public func result(for store: HealthStore) async throws -> [RouteLocation] { try await store.routeLocations(of: route).all() }

    /// The locations in batches as they arrive.
    public func results(for store: HealthStore) async throws -> RouteLocationBatches { try await store.routeLocations(of: route) }
}

/// An observer query (HealthKit's `HKObserverQuery(queryDescriptors:)`): an update each time
/// a matching object of one of the types is saved, or one is deleted.
///
/// ```swift
/// for try await _ in try await ObserverQueryDescriptor([QueryDescriptor(type: steps)]).results(for: store) {
///     try await sync()   // an anchored query from the last anchor says what changed
/// }
/// ```
public struct ObserverQueryDescriptor: Sendable, Hashable {
    public var descriptors: [QueryDescriptor]
    /// Saves of objects overlapping this interval count; deletions always do.
    public var interval: DateInterval?

    public init(_ descriptors: [QueryDescriptor], interval: DateInterval? = nil) {
        self.descriptors = descriptors
        self.interval = interval
    }

    /// Registers the observer (returns once it is in place) and yields its updates.
    public func results(for store: HealthStore) async throws -> ObserverUpdates { try await store.observe(descriptors, overlapping: interval) }
}
