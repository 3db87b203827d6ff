import Foundation
import LedgerSchema
import SwiftProtobuf

/// Authorization, as HealthKit's `HKHealthStore` does it: apps ask, the owner decides.
/// An app never learns whether it may read a type: without read authorization every read
/// returns only its own objects, as if no one else had saved any.
extension HealthStore {
    // MARK: Apps

    /// Asks the owner for authorization to share (save) and read types. Pairs asked
    /// before are not asked again.
    ///
    /// ```swift
    /// try await store.requestAuthorization(toShare: [stepCount], read: [stepCount, heartRate])
    /// ```
    ///
    /// - Returns: how many (type, direction) pairs were new requests.
    /// - Throws: ``RPCError`` `invalidArgument` for nothing requested, a correlation type
    ///   (ask for its member types), sharing a characteristic type, or reading vision
    ///   prescriptions (use ``requestPerObjectReadAuthorization(for:overlapping:)``).
    @discardableResult
    public func requestAuthorization(toShare share: Set<ObjectType>, read: Set<ObjectType>) async throws -> Int {
        let request = Self.authorizationRequest(share: share, read: read)
        return Int(try Self.decode(Healthledger_V1_RequestAuthorizationResponse.self, try await unary(.requestAuthorization, request)).newRequests)
    }

    /// Whether ``requestAuthorization(toShare:read:)`` would ask anything new.
    public func getRequestStatusForAuthorization(toShare share: Set<ObjectType>, read: Set<ObjectType>) async throws -> AuthorizationRequestStatus {
        let request = Self.authorizationRequest(share: share, read: read)
        let response = try Self.decode(Healthledger_V1_RequestStatusResponse.self, try await unary(.getRequestStatus, request))
        return response.status == .unnecessary ? .unnecessary : .shouldRequest
    }

    /// The caller's share status for `type` (HealthKit's `authorizationStatus(for:)`).
    public func authorizationStatus(for type: ObjectType) async throws -> SharingStatus {
        let response = try Self.decode(
            Healthledger_V1_AuthorizationStatusResponse.self,
            try await unary(.authorizationStatus, Healthledger_V1_AuthorizationStatusRequest.with { $0.types = [type.identifier] }))
        guard let status = response.statuses.first.flatMap({ SharingStatus(rawValue: $0.rawValue) }) else {
            throw RPCError(.internalError, "the server sent no status")
        }
        return status
    }

    /// Asks the owner to let the app read some vision prescriptions (optionally those
    /// overlapping `interval`); the owner selects which.
    public func requestPerObjectReadAuthorization(for type: ObjectType, overlapping interval: DateInterval? = nil) async throws {
        let request = Healthledger_V1_ObjectReadAuthorizationRequest.with { request in
            request.type = type.identifier
            if let interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
        }
        _ = try await unary(.requestObjectReadAuthorization, request)
    }

    // MARK: The owner

    /// Every (app, type, direction) pair, or one app's (owner only).
    public func authorizations(app: String? = nil) async throws -> [AuthorizationEntry] {
        try await entries(.authorizations, app: app)
    }

    /// Requests waiting for a decision (owner only). Per-object requests list the objects
    /// they match in ``AuthorizationEntry/matching``.
    public func pendingAuthorizations(app: String? = nil) async throws -> [AuthorizationEntry] {
        try await entries(.pendingAuthorizations, app: app)
    }

    /// Grants, denies or revokes one (app, type, direction) pair (owner only).
    public func decideAuthorization(app: String, type: ObjectType, direction: AuthorizationDirection, decision: AuthorizationDecision) async throws {
        let request = Healthledger_V1_DecideAuthorizationRequest.with { request in
            request.app = app
            request.type = type.identifier
            request.direction = .init(direction)
            request.decision = .init(decision)
        }
        _ = try await unary(.decideAuthorization, request)
    }

    /// Sets which vision prescriptions an app may read, replacing the previous selection (owner only).
    public func setObjectReadSelection(app: String, type: ObjectType, objects: [UUID]) async throws {
        let request = Healthledger_V1_ObjectReadSelectionRequest.with { request in
            request.app = app
            request.type = type.identifier
            request.uuids = objects.map { Data($0.bytes) }
        }
        _ = try await unary(.setObjectReadSelection, request)
    }

    /// The audit trail of requests, decisions and selections, oldest first (owner only).
    public func authorizationHistory(app: String? = nil) async throws -> [AuthorizationEvent] {
        let request = Healthledger_V1_AuthorizationsRequest.with { $0.app = app ?? "" }
        let response = try Self.decode(Healthledger_V1_AuthorizationHistoryResponse.self, try await unary(.authorizationHistory, request))
        return try response.events.map { event in
            do { return try event.model() } catch { throw RPCError(.internalError, "the server sent an invalid authorization event") }
        }
    }

    /// The sources of `type`, highest priority first (owner only).
    public func sourcePriority(for type: ObjectType) async throws -> [Source] {
        let request = Healthledger_V1_SourcePriorityRequest.with { $0.type = type.identifier }
        return try Self.decode(Healthledger_V1_SourcePriorityResponse.self, try await unary(.sourcePriority, request)).sources.map(\.model)
    }

    /// Orders the sources of `type`, highest priority first; sources not listed follow in
    /// the order they first saved the type. An empty list restores the default (owner only).
    public func setSourcePriority(for type: ObjectType, order bundleIdentifiers: [String]) async throws {
        let request = Healthledger_V1_SetSourcePriorityRequest.with { request in
            request.type = type.identifier
            request.bundleIdentifiers = bundleIdentifiers
        }
        _ = try await unary(.setSourcePriority, request)
    }

    private func entries(_ method: RPCMethod, app: String?) async throws -> [AuthorizationEntry] {
        let request = Healthledger_V1_AuthorizationsRequest.with { $0.app = app ?? "" }
        let response = try Self.decode(Healthledger_V1_AuthorizationsResponse.self, try await unary(method, request))
        return try response.entries.map { entry in
            do { return try entry.model() } catch { throw RPCError(.internalError, "the server sent an invalid authorization entry") }
        }
    }

    private static func authorizationRequest(share: Set<ObjectType>, read: Set<ObjectType>) -> Healthledger_V1_AuthorizationRequest {
        Healthledger_V1_AuthorizationRequest.with { request in
            request.shareTypes = share.map(\.identifier).sorted()
            request.readTypes = read.map(\.identifier).sorted()
        }
    }
}
