import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import Synchronization

extension Ledger {
    /// Most samples one association may carry (``ObjectLimits/maximumAssociatedSamples``).
    public static let maximumAssociatedSamples = ObjectLimits.maximumAssociatedSamples
    /// Locations per `routeLocationsAdded` event (and per route-query batch).
    public static let routeChunkSize = 4096

    /// Associates samples with a workout (HealthKit's `add(_:to:)`), atomically. Its statistics
    /// and the "associated with this workout" predicate then include them. Associating a
    /// sample that already is associated changes nothing.
    ///
    /// - Throws: ``HealthError``: `noData` for a workout or sample `principal` may not read
    ///   (as for an unknown one); `authorizationDenied` for another source's workout or a
    ///   workout type it may not share; `invalidArgument` for an object that is not a workout,
    ///   a workout or route among the samples, or an empty list.
    public func associate(_ samples: [UUID], with workout: UUID, by principal: Principal) async throws {
        guard !samples.isEmpty else { throw HealthError.invalidArgument("nothing to associate: the list of samples is empty", field: "sample_uuids") }
        guard samples.count <= Self.maximumAssociatedSamples else {
            throw HealthError(.dataSizeExceeded, "an association holds at most \(Self.maximumAssociatedSamples) samples", field: "sample_uuids")
        }
        if case .operator = principal { throw ReadScope.operatorDenied }
        var seen = Set<UUID>()
        let unique = samples.filter { seen.insert($0).inserted }
        try await committer.submit { context in
            try Self.requireWorkout(workout, changeableBy: principal, in: context)
            var body = Healthledger_V1_WorkoutSamplesAssociated()
            body.workoutUuid = Data(workout.bytes)
            for uuid in unique {
                guard let stored = try Self.readable(uuid, as: principal, in: context.reads) else {
                    throw HealthError(.noData, "no sample with UUID \(uuid)", field: "sample_uuids")
                }
                let family = try Self.objectType(code: stored.type).family
                guard family == .quantity || family == .category else {
                    throw HealthError.invalidArgument("\(uuid) is a \(family.rawValue), not a quantity or category sample", field: "sample_uuids")
                }
                if try !context.txn.contains(uuid.bytes + workout.bytes, in: context.databases.memberWorkouts) {
                    body.sampleUuids.append(Data(uuid.bytes))
                }
            }
            guard !body.sampleUuids.isEmpty else { return }
            let bytes: [UInt8] = try body.serializedBytes()
            try context.append(
                kind: .workoutSamplesAssociated, actor: principal, objectType: ObjectType.workout.identifier, objectUUID: workout.bytes, body: bytes,
                change: .samplesAssociated(workout: workout.bytes, samples: body.sampleUuids.map { Array($0) }))
        }
    }

    /// Checks that `workout` is a workout `principal` may change (see
    /// ``requireChangeable(_:by:ownSource:field:in:)``).
    static func requireWorkout(_ workout: UUID, changeableBy principal: Principal, in context: WriteContext) throws {
        let ownSource = try ownSource(of: principal, in: context)
        let type = try requireChangeable(workout, by: principal, ownSource: ownSource, field: "workout_uuid", in: context)
        guard type == .workout else { throw HealthError.invalidArgument("\(workout) is a \(type), not a workout", field: "workout_uuid") }
    }

    // MARK: Routes

    /// Opens a route builder for `principal` (HealthKit's `HKWorkoutRouteBuilder`).
    public func beginRoute(by principal: Principal) throws -> UUID {
        if case .operator = principal { throw ReadScope.operatorDenied }
        try requireRouteSharing(by: principal)
        return try routeBuilders.begin(for: principal)
    }

    /// An app builds routes only while it may share them, as it finishes them: a builder's
    /// locations take the ledger's memory before any commit checks that.
    private func requireRouteSharing(by principal: Principal) throws {
        guard case .app(let source) = principal else { return }
        try Self.requireSharingAuthorized(try sharingStatus(for: .workoutRoute, of: principal), of: .workoutRoute, by: source)
    }

    /// Adds locations, in any order, to a builder `principal` opened.
    ///
    /// - Returns: the number of locations collected so far.
    /// - Throws: ``HealthError``: `invalidArgument` for a bad location (nothing is added),
    ///   `noData` for an unknown builder, `dataSizeExceeded` past the route limit.
    @discardableResult
    public func addRouteLocations(_ locations: [RouteLocation], to builder: UUID, by principal: Principal) throws -> Int {
        for (index, location) in locations.enumerated() { try location.validate(field: "locations[\(index)]") }
        try requireRouteSharing(by: principal)
        return try routeBuilders.add(locations, to: builder, for: principal)
    }

    /// Drops a builder and its locations.
    public func discardRoute(_ builder: UUID, by principal: Principal) throws {
        try routeBuilders.discard(builder, for: principal)
    }

    /// Stores a builder's locations, sorted by time, as a route of `workout`: the route
    /// object, then its locations in chunks, in one commit. The builder is consumed once the
    /// route is durable (or ignored); if the save fails it stays, to try again.
    ///
    /// A route finished with `HKMetadataKeySyncIdentifier` and `HKMetadataKeySyncVersion`
    /// follows the sync rules: a higher version than the stored route's replaces it
    /// atomically (the old one leaves a tombstone, its locations go with it), an equal or
    /// lower one writes nothing and is reported ignored.
    ///
    /// - Returns: the route and what became of it.
    /// - Throws: ``HealthError``: `invalidArgument` for a builder without locations or a
    ///   workout UUID that is not a workout; `noData` for an unknown builder or a workout
    ///   `principal` may not read; `authorizationDenied`/`authorizationNotDetermined` when it
    ///   may not share routes or change the workout.
    public func finishRoute(
        _ builder: UUID, workout: UUID, metadata: Metadata = [:], sourceRevision: SourceRevision? = nil, device: Device? = nil,
        by principal: Principal
    ) async throws -> (route: WorkoutRoute, disposition: SaveResult.Disposition) {
        let locations = try routeBuilders.locations(of: builder, for: principal).sorted { $0.timestamp < $1.timestamp }
        guard let first = locations.first else {
            throw HealthError.invalidArgument("the route builder has no locations: add some before finishing", field: "builder_id")
        }
        var route = WorkoutRoute(
            workoutUUID: workout, locationCount: locations.count, start: first.timestamp, end: locations.last!.timestamp,
            device: device, metadata: metadata, sourceRevision: sourceRevision ?? SourceRevision(source: .owner))
        // As on a save: the owner may record another source's route, an app only its own.
        if case .app(let source) = principal { route.sourceRevision.source = source }
        try HealthObject.workoutRoute(route).validate()
        let summary = try ObjectSummary(.workoutRoute(route), units: SummaryCache())
        let objectBytes = HealthObject.workoutRoute(route).encodedBytes()
        let chunks: [[UInt8]] = try stride(from: 0, to: locations.count, by: Self.routeChunkSize).enumerated().map { index, start in
            var chunk = Healthledger_V1_RouteLocationsAdded()
            chunk.routeUuid = Data(route.uuid.bytes)
            chunk.chunk = UInt32(index)
            chunk.locations = .init(locations[start..<min(start + Self.routeChunkSize, locations.count)])
            return try chunk.serializedBytes()
        }
        let disposition = try await committer.submit { context -> SaveResult.Disposition in
            try Self.requireSharing(.workoutRoute, by: principal, in: context)
            try Self.requireWorkout(workout, changeableBy: principal, in: context)
            var disposition = SaveResult.Disposition.saved
            if let existing = try SyncIdentifierIndex.holder(of: summary, in: context) {
                let existingUUID = UUID(bytes: existing.uuid)!
                guard existing.version < summary.syncVersion ?? 0 else { return .ignored(existing: existingUUID) }
                // The new route names its own workout: no membership to carry over.
                try Self.deleteStored(existingUUID.bytes, reason: .replacedBySyncVersion, by: principal, in: context)
                disposition = .replaced(previous: existingUUID)
            }
            try context.append(
                kind: .objectSaved, actor: principal, objectType: summary.type, objectUUID: summary.uuid, body: objectBytes, change: .saved(summary))
            for (index, chunk) in chunks.enumerated() {
                try context.append(
                    kind: .routeLocationsAdded, actor: principal, objectType: summary.type, objectUUID: summary.uuid, body: chunk,
                    change: .routeLocationsAdded(route: summary.uuid, chunk: UInt32(index)))
            }
            return disposition
        }
        try? routeBuilders.discard(builder, for: principal)
        return (route, disposition)
    }
}

/// Route builders in progress, per ledger, in memory: each belongs to the principal that
/// opened it and holds at most ``ObjectLimits/maximumRouteLocations`` locations. A builder
/// unused for an hour is dropped. Caps per principal and per ledger keep one app from
/// filling the server's memory or crowding out the others.
final class RouteBuilders: Sendable {
    static let maximumOpenPerPrincipal = 8
    static let maximumOpen = 64
    /// Locations held by all builders of the ledger together (about 64 MiB).
    static let maximumPendingLocations = 1_000_000
    /// Locations held by one principal's builders together: a quarter of the ledger's, so
    /// that no one caller holds them all (room for one route of the largest size).
    static let maximumPendingLocationsPerPrincipal = 250_000
    static let idleLimit: TimeInterval = 3600

    private struct Builder {
        var owner: Principal
        var locations: [RouteLocation]
        var lastUsed: Date
    }

    private let builders = Mutex<[UUID: Builder]>([:])

    func begin(for principal: Principal) throws -> UUID {
        let id = UUID()
        let now = Date()
        try builders.withLock { builders in
            builders = builders.filter { now.timeIntervalSince($0.value.lastUsed) < Self.idleLimit }
            guard builders.values.count(where: { $0.owner == principal }) < Self.maximumOpenPerPrincipal else {
                throw HealthError(
                    .dataSizeExceeded, "at most \(Self.maximumOpenPerPrincipal) route builders may be open at once: finish or discard one",
                    field: "builder_id")
            }
            guard builders.count < Self.maximumOpen else {
                throw HealthError(.dataSizeExceeded, "too many route builders are open on this ledger; try again later", field: "builder_id")
            }
            builders[id] = Builder(owner: principal, locations: [], lastUsed: now)
        }
        return id
    }

    func add(_ locations: [RouteLocation], to id: UUID, for principal: Principal) throws -> Int {
        try builders.withLock { builders in
            guard var builder = builders[id], builder.owner == principal else { throw Self.unknown(id) }
            guard builder.locations.count + locations.count <= ObjectLimits.maximumRouteLocations else {
                throw HealthError(.dataSizeExceeded, "a route holds at most \(ObjectLimits.maximumRouteLocations) locations", field: "locations")
            }
            let own = builders.values.reduce(0) { $0 + ($1.owner == principal ? $1.locations.count : 0) }
            guard own + locations.count <= Self.maximumPendingLocationsPerPrincipal else {
                throw HealthError(
                    .dataSizeExceeded,
                    "this caller's route builders hold \(own) locations, the most one caller may hold at once (\(Self.maximumPendingLocationsPerPrincipal)): finish or discard some",
                    field: "locations")
            }
            let pending = builders.values.reduce(0) { $0 + $1.locations.count }
            guard pending + locations.count <= Self.maximumPendingLocations else {
                throw HealthError(
                    .dataSizeExceeded, "the ledger's route builders hold \(pending) locations, the most allowed at once: finish or discard some",
                    field: "locations")
            }
            builders[id] = nil  // keeps the array uniquely referenced while it grows
            builder.locations.append(contentsOf: locations)
            builder.lastUsed = Date()
            builders[id] = builder
            return builder.locations.count
        }
    }

    func locations(of id: UUID, for principal: Principal) throws -> [RouteLocation] {
        try builders.withLock { builders in
            guard var builder = builders[id], builder.owner == principal else { throw Self.unknown(id) }
            builder.lastUsed = Date()
            builders[id] = builder
            return builder.locations
        }
    }

    func discard(_ id: UUID, for principal: Principal) throws {
        try builders.withLock { builders in
            guard let builder = builders[id], builder.owner == principal else { throw Self.unknown(id) }
            builders[id] = nil
        }
    }

    private static func unknown(_ id: UUID) -> HealthError {
        HealthError(.noData, "no route builder \(id): it was finished, discarded or dropped after an hour unused", field: "builder_id")
    }
}
