import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// The `healthledger.v1.Ledger` methods for one authenticated call: run the decoded request
/// on the ledger as the caller, encode the response (``MethodTable`` decodes each request once).
/// How far a signed tree head may reach on this server, so that a failover never forks what
/// was signed (docs/PROTOCOL.md §7.16).
enum TreeHeadReach: Sendable {
    /// The whole log: a single server, a view, or a follower of a primary (`--follow`).
    case everything
    /// A primary: what a follower connected within the window has (everything with none).
    case connectedFollowers(window: Duration)
    /// A cluster member: as its standing says when the head is asked for.
    case cluster(ClusterRole)
}

struct LedgerCall: Sendable {
    let ledger: Ledger
    let principal: Principal
    /// The id of the credential it was made with, for its access record.
    var credentialID = ""
    /// When that credential stops authenticating (nil: not before a revocation): a stream
    /// ends then (``StreamAccess``).
    var credentialEnd: Date?
    /// What the call read, for its access record (``ReadTally``).
    let reads = ReadTally()
    /// How far the tree heads this server signs reach: on a primary, only what survives a
    /// failover.
    var treeHeads = TreeHeadReach.everything

    func ping(_ request: Healthledger_V1_PingRequest) throws -> [UInt8] {
        var response = Healthledger_V1_PingResponse()
        response.data = request.data
        response.ledgerID = ledger.id
        response.principal = "\(principal)"
        return try response.serializedBytes()
    }

    /// A `SaveRequest`'s objects, read straight from the payload through the shared object
    /// decoder rather than through the request message and a conversion.
    static func saveObjects(_ payload: [UInt8]) throws -> [ReceivedObject] {
        do {
            return try HealthObjectDecoder.receivedObjects(in: payload)
        } catch let error as HealthError {
            throw error
        } catch {
            throw RPCError(.invalidArgument, "the request is not a valid \(Healthledger_V1_SaveRequest.protoMessageName)", healthErrorCode: .invalidArgument)
        }
    }

    /// Saves on the calling thread's behalf; `completion` gets the encoded response once the
    /// objects are durable, on the committing thread (or the caller's, through `executor`).
    func save(
        _ objects: [ReceivedObject], committingOn executor: CallerExecutor?, completion: @escaping @Sendable (Result<[UInt8], any Error>) -> Void
    ) {
        ledger.save(received: objects, by: principal, committingOn: executor) { result in
            // Written without the generated messages: this runs on the committing thread.
            completion(result.map(SaveResponseCoding.encoded))
        }
    }

    func delete(_ request: Healthledger_V1_DeleteRequest) async throws -> [UInt8] {
        let uuids = try request.uuids.map { try Self.uuid($0, field: "uuids") }
        var response = Healthledger_V1_DeleteResponse()
        response.deleted = UInt64(try await ledger.delete(uuids, by: principal))
        return try response.serializedBytes()
    }

    func deleteObjects(_ request: Healthledger_V1_DeleteObjectsRequest) async throws -> [UInt8] {
        let type = try ObjectType(request.type)
        let interval = try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil)
        let predicate = request.hasPredicate ? try request.predicate.model() : nil
        var response = Healthledger_V1_DeleteResponse()
        response.deleted = UInt64(try await ledger.deleteObjects(of: type, overlapping: interval, matching: predicate, by: principal))
        return try response.serializedBytes()
    }

    func erase(_ request: Healthledger_V1_EraseRequest) async throws -> [UInt8] {
        let named = [!request.uuids.isEmpty, !request.type.isEmpty, !request.source.isEmpty, request.everything].filter { $0 }.count
        guard named == 1 else { throw HealthError.invalidArgument("name exactly one of uuids, type, source and everything", field: "uuids") }
        let selection: ErasureSelection
        if request.everything {
            guard !request.hasStartUs, !request.hasEndUs, !request.hasPredicate else {
                throw HealthError.invalidArgument("a range and a predicate go with type, not everything", field: "everything")
            }
            selection = .everything
        } else if !request.uuids.isEmpty {
            selection = .objects(try request.uuids.map { try Self.uuid($0, field: "uuids") })
        } else if !request.type.isEmpty {
            selection = .matching(
                type: try ObjectType(request.type),
                interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
                predicate: request.hasPredicate ? try request.predicate.model() : nil)
        } else {
            guard !request.hasStartUs, !request.hasEndUs, !request.hasPredicate else {
                throw HealthError.invalidArgument("a range and a predicate go with type, not source", field: "source")
            }
            selection = .source(request.source)
        }
        let report = try await ledger.erase(selection, reason: request.reason, by: principal)
        var response = Healthledger_V1_EraseResponse()
        response.erased = UInt64(report.objects)
        response.events = UInt64(report.events)
        response.sequence = report.sequence
        response.characteristics = UInt64(report.characteristics)
        return try response.serializedBytes()
    }

    func fetch(_ request: Healthledger_V1_FetchRequest) throws -> [UInt8] {
        let uuid = try Self.uuid(request.uuid, field: "uuid")
        var response = Healthledger_V1_FetchResponse()
        if let object = try ledger.object(with: uuid, as: principal) {
            response.object = .init(object)
            reads.add(object.objectType.identifier, objects: 1)
        }
        return try response.serializedBytes()
    }

    /// Streams the matching samples in batches of at most `batch_size` objects and 1 MiB.
    ///
    /// - Parameter onScope: told the read scope the query ran with.
    func querySamples(
        _ request: Healthledger_V1_SampleQueryRequest, onScope: (ReadScope) -> Void, _ emit: (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        // workout_uuid and workout_predicate are the older spellings of two predicate kinds.
        var conditions: [ObjectPredicate] = []
        if !request.workoutUuid.isEmpty { conditions.append(.associatedWithWorkout(try Self.uuid(request.workoutUuid, field: "workout_uuid"))) }
        if request.hasWorkoutPredicate { conditions.append(.workout(try request.workoutPredicate.model())) }
        if request.hasPredicate { conditions.append(try request.predicate.model()) }
        let query = SampleQuery(
            type: try ObjectType(request.type),
            interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
            predicate: conditions.count > 1 ? .and(conditions) : conditions.first, limit: Int(request.limit), sort: request.sort.model)
        try await Self.stream(
            try ledger.sampleCursor(query, as: principal), batchSize: Self.batchSize(request.batchSize, default: 500), reads: reads, onScope: onScope, emit)
    }

    /// QueryCorrelations: the matching correlations, each with the members the caller may read.
    func queryCorrelations(
        _ request: Healthledger_V1_CorrelationQueryRequest, onScope: (ReadScope) -> Void, _ emit: (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        var memberPredicates: [QuantityType: ObjectPredicate] = [:]
        for descriptor in request.memberPredicates {
            let type = try QuantityType(descriptor.type)
            guard memberPredicates[type] == nil else { throw HealthError.invalidArgument("\(type) has two member predicates", field: "member_predicates") }
            memberPredicates[type] = descriptor.hasPredicate ? try descriptor.predicate.model() : .and([])
        }
        let query = CorrelationQuery(
            type: try CorrelationType(request.type),
            interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
            predicate: request.hasPredicate ? try request.predicate.model() : nil, memberPredicates: memberPredicates, limit: Int(request.limit),
            sort: request.sort.model)
        try await Self.stream(
            try ledger.correlationCursor(query, as: principal), batchSize: Self.batchSize(request.batchSize, default: 500), reads: reads, onScope: onScope,
            emit)
    }

    /// Sends a cursor's objects as SampleBatch messages of at most `batchSize` objects and
    /// about 1 MiB, reading each batch only when the stream window has taken the one before.
    static func stream(
        _ cursor: QueryCursor, batchSize: Int, reads: ReadTally, onScope: (ReadScope) -> Void, _ emit: (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        defer { cursor.close() }
        while true {
            try Task.checkCancellation()
            let objects = try cursor.next(maxCount: batchSize, maxBytes: batchBytes, onScope: onScope)
            guard !objects.isEmpty else { return }
            reads.add(objects: objects.count)
            // The objects go out as the log stores them, without a decode and re-encode.
            try await emit(HealthObjectDecoder.message(of: objects))
        }
    }

    // MARK: Authorization

    private static let empty: [UInt8] = []

    /// Refuses an app's request naming more types than any may, before a type of it is read (a
    /// status request is answered on the connection's event loop). Others are refused by the
    /// ledger before it looks at the types.
    private func requireFewTypes(_ request: Healthledger_V1_AuthorizationRequest) throws {
        guard case .app = principal else { return }
        guard request.shareTypes.count + request.readTypes.count <= Ledger.maximumRequestedTypes else {
            throw HealthError(.dataSizeExceeded, "a request names at most \(Ledger.maximumRequestedTypes) types", field: "types")
        }
    }

    func requestAuthorization(_ request: Healthledger_V1_AuthorizationRequest) async throws -> [UInt8] {
        try requireFewTypes(request)
        let count = try await ledger.requestAuthorization(
            toShare: try request.shareTypes.objectTypes(field: "share_types"), read: try request.readTypes.objectTypes(field: "read_types"),
            by: principal)
        return try Healthledger_V1_RequestAuthorizationResponse.with { $0.newRequests = UInt32(count) }.serializedBytes()
    }

    func getRequestStatus(_ request: Healthledger_V1_AuthorizationRequest) throws -> [UInt8] {
        try requireFewTypes(request)
        let status = try ledger.requestStatus(
            toShare: try request.shareTypes.objectTypes(field: "share_types"), read: try request.readTypes.objectTypes(field: "read_types"),
            for: principal)
        return try Healthledger_V1_RequestStatusResponse.with { $0.status = status == .unnecessary ? .unnecessary : .shouldRequest }.serializedBytes()
    }

    func authorizationStatus(_ request: Healthledger_V1_AuthorizationStatusRequest) throws -> [UInt8] {
        guard !request.types.isEmpty, request.types.count <= Ledger.maximumRequestedTypes else {
            throw HealthError.invalidArgument("ask for 1 to \(Ledger.maximumRequestedTypes) types", field: "types")
        }
        let statuses = try request.types.map { identifier in
            try ledger.sharingStatus(for: try ObjectType(identifier), of: principal)
        }
        return try Healthledger_V1_AuthorizationStatusResponse.with { response in
            response.statuses = statuses.map { .init(rawValue: $0.rawValue) ?? .notDetermined }
        }.serializedBytes()
    }

    func requestObjectReadAuthorization(_ request: Healthledger_V1_ObjectReadAuthorizationRequest) async throws -> [UInt8] {
        let interval = try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil)
        try await ledger.requestObjectReadAuthorization(for: try ObjectType(request.type), overlapping: interval, by: principal)
        return Self.empty
    }

    func authorizations(_ request: Healthledger_V1_AuthorizationsRequest, pendingOnly: Bool) throws -> [UInt8] {
        let app = request.app.isEmpty ? nil : request.app
        let entries = pendingOnly ? try ledger.pendingAuthorizations(app: app, as: principal) : try ledger.authorizations(app: app, as: principal)
        return try Healthledger_V1_AuthorizationsResponse.with { $0.entries = entries.map(Healthledger_V1_AuthorizationEntry.init) }.serializedBytes()
    }

    func decideAuthorization(_ request: Healthledger_V1_DecideAuthorizationRequest) async throws -> [UInt8] {
        guard let decision = request.decision.model else {
            throw HealthError.invalidArgument("the decision must be granted, denied or revoked", field: "decision")
        }
        try await ledger.decideAuthorization(
            app: request.app, type: try ObjectType(request.type), direction: try request.direction.model(), decision: decision, by: principal)
        return Self.empty
    }

    func setObjectReadSelection(_ request: Healthledger_V1_ObjectReadSelectionRequest) async throws -> [UInt8] {
        let uuids = try request.uuids.map { try Self.uuid($0, field: "uuids") }
        try await ledger.setObjectReadSelection(app: request.app, type: try ObjectType(request.type), objects: uuids, by: principal)
        return Self.empty
    }

    func authorizationHistory(_ request: Healthledger_V1_AuthorizationsRequest) throws -> [UInt8] {
        let events = try ledger.authorizationHistory(app: request.app.isEmpty ? nil : request.app, as: principal)
        return try Healthledger_V1_AuthorizationHistoryResponse.with { $0.events = events.map(Healthledger_V1_AuthorizationEvent.init) }.serializedBytes()
    }

    func sourcePriority(_ request: Healthledger_V1_SourcePriorityRequest) throws -> [UInt8] {
        let sources = try ledger.sourcePriority(for: try ObjectType(request.type), as: principal)
        return try Healthledger_V1_SourcePriorityResponse.with { $0.sources = sources.map(Healthledger_V1_Source.init) }.serializedBytes()
    }

    /// QuerySources: the sources of the type's objects the caller may read (on the record as a read of the type).
    func querySources(_ request: Healthledger_V1_SourceQueryRequest) throws -> [UInt8] {
        let type = try ObjectType(request.type)
        let sources = try ledger.sources(
            of: type, overlapping: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
            matching: request.hasPredicate ? try request.predicate.model() : nil, as: principal)
        reads.add(type.identifier, objects: 0)
        return try Healthledger_V1_SourceQueryResponse.with { $0.sources = sources.map(Healthledger_V1_Source.init) }.serializedBytes()
    }

    func setSourcePriority(_ request: Healthledger_V1_SetSourcePriorityRequest) async throws -> [UInt8] {
        try await ledger.setSourcePriority(for: try ObjectType(request.type), bundleIdentifiers: request.bundleIdentifiers, by: principal)
        return Self.empty
    }

    // MARK: Characteristics

    func characteristics(_ request: Healthledger_V1_CharacteristicsRequest) throws -> [UInt8] {
        guard !request.types.isEmpty else { throw HealthError.invalidArgument("ask for at least one characteristic", field: "types") }
        guard request.types.count <= 16 else { throw HealthError.invalidArgument("ask for at most 16 characteristics", field: "types") }
        let types = try request.types.map { try ObjectType($0) }
        let values = try ledger.characteristics(types, as: principal)
        for (type, value) in zip(types, values) where value != nil { reads.add(type.identifier, objects: 1) }
        return try Healthledger_V1_CharacteristicsResponse.with { response in
            response.characteristics = zip(types, values).map { type, value in value.map(Healthledger_V1_Characteristic.init) ?? .notSet(type) }
        }.serializedBytes()
    }

    func setCharacteristic(_ request: Healthledger_V1_Characteristic) async throws -> [UInt8] {
        let type = try ObjectType(request.type)
        // A "not set" value clears the characteristic.
        try await ledger.setCharacteristic(of: type, to: try request.model(), by: principal)
        return Self.empty
    }

    /// A streaming request's `batch_size`: 0 asks for `defaultSize`; at most 10,000.
    static func batchSize(_ requested: UInt32, default defaultSize: Int) -> Int {
        requested == 0 ? defaultSize : Int(min(requested, 10_000))
    }

    /// The UUID in `bytes`, which must be 16 bytes (`invalidArgument` naming `field` otherwise).
    static func uuid(_ bytes: Data, field: String) throws -> UUID {
        guard let uuid = UUID(bytes: bytes) else { throw HealthError.invalidArgument("a UUID must be 16 bytes", field: field) }
        return uuid
    }

    static func interval(start: Int64?, end: Int64?) throws -> DateInterval? {
        guard start != nil || end != nil else { return nil }
        let from = start.map { date(microseconds: $0) } ?? .distantPast
        let to = end.map { date(microseconds: $0) } ?? .distantFuture
        guard from <= to else { throw HealthError.invalidArgument("the interval ends before it starts", field: "end_us") }
        return DateInterval(start: from, end: to)
    }
}
