import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// Workouts: associated samples, their statistics, route builders and route queries.
extension LedgerCall {
    func associateSamples(_ request: Healthledger_V1_AssociateSamplesRequest) async throws -> [UInt8] {
        let samples = try request.sampleUuids.map { try Self.uuid($0, field: "sample_uuids") }
        try await ledger.associate(samples, with: try Self.uuid(request.workoutUuid, field: "workout_uuid"), by: principal)
        return []
    }

    func workoutStatistics(_ request: Healthledger_V1_WorkoutStatisticsRequest) throws -> [UInt8] {
        let uuid = try Self.uuid(request.workoutUuid, field: "workout_uuid")
        guard let statistics = try ledger.workoutStatistics(for: uuid, as: principal) else {
            throw HealthError(.noData, "no workout with UUID \(uuid)", field: "workout_uuid")
        }
        reads.add(ObjectType.workout.identifier, objects: 1)
        return try Healthledger_V1_WorkoutStatisticsResponse(statistics).serializedBytes()
    }

    func beginRoute(_: Healthledger_V1_BeginRouteRequest) throws -> [UInt8] {
        let id = try ledger.beginRoute(by: principal)
        return try Healthledger_V1_RouteBuilderResponse.with { $0.builderID = Data(id.bytes) }.serializedBytes()
    }

    func addRouteLocations(_ request: Healthledger_V1_AddRouteLocationsRequest) throws -> [UInt8] {
        let id = try Self.uuid(request.builderID, field: "builder_id")
        let count = try ledger.addRouteLocations(try request.locations.model(), to: id, by: principal)
        return try Healthledger_V1_RouteBuilderResponse.with {
            $0.builderID = request.builderID
            $0.locationCount = UInt64(count)
        }.serializedBytes()
    }

    func finishRoute(_ request: Healthledger_V1_FinishRouteRequest) async throws -> [UInt8] {
        let (route, disposition) = try await ledger.finishRoute(
            try Self.uuid(request.builderID, field: "builder_id"), workout: try Self.uuid(request.workoutUuid, field: "workout_uuid"),
            metadata: try request.metadata.model(),
            sourceRevision: request.hasSourceRevision ? request.sourceRevision.model : nil,
            device: request.hasDevice ? request.device.modelValue : nil, by: principal)
        return try Healthledger_V1_FinishRouteResponse.with {
            $0.route = .init(.workoutRoute(route))
            $0.outcome = .init(SaveResult(uuid: route.uuid, disposition: disposition))
        }.serializedBytes()
    }

    func discardRoute(_ request: Healthledger_V1_DiscardRouteRequest) throws -> [UInt8] {
        try ledger.discardRoute(try Self.uuid(request.builderID, field: "builder_id"), by: principal)
        return []
    }

    /// RouteLocations: one RouteBatch per stored chunk, straight from the log, the last one
    /// marked done (one empty, done batch for a route without chunks).
    func routeLocations(
        _ request: Healthledger_V1_RouteQueryRequest, onScope: (ReadScope) -> Void, _ emit: (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        let chunks = try ledger.routeChunks(of: try Self.uuid(request.routeUuid, field: "route_uuid"), as: principal, onScope: onScope)
        for index in 0..<max(chunks.count, 1) {
            try Task.checkCancellation()
            // A RouteBatch, written directly around the stored locations.
            var batch = ProtoWriter(capacity: 1 << 16)
            if index < chunks.count {
                let locations = try ledger.encodedRouteLocations(chunks, chunk: index)
                batch.message(field: RouteBatchField.locations, locations)
                // RouteLocations is packed by column: its latitudes, 8 bytes each, count the locations.
                let latitudes = try locations.withUnsafeBytes { try ProtoReader.field(2, in: $0)?.count ?? 0 }
                reads.add(objects: latitudes / 8)
            }
            if index >= chunks.count - 1 { batch.varint(field: RouteBatchField.done, 1) }
            try await emit(batch.buffer)
        }
    }
}
