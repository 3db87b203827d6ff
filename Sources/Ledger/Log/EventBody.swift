import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf

/// What an event did, decoded from its body: the one place that reads event bodies by kind.
/// The projections, the audit trail and `healthledger log` are all built on it.
///
/// Types stay identifiers as stored (a log written by a later version may name a type this
/// one does not know; replay must still apply it). A saved object's body is not decoded
/// here: it is the object itself (``LedgerEvent/savedObject()``), and replay reads what it
/// needs of it in place.
public enum EventBody: Sendable, Hashable {
    /// `publicKey`: the key that signs the ledger's tree heads (empty for older ledgers).
    case ledgerCreated(id: String, displayName: String, publicKey: [UInt8])
    case objectSaved
    /// `replacedBy`: the object that replaced it (by a higher sync version), saved next.
    case objectDeleted(reason: DeletionReason, syncIdentifier: String?, syncVersion: Int64?, replacedBy: UUID?)
    /// An app asked to share and read types, or (`objectRead`) to read objects of a type.
    case authorizationRequested(share: [String], read: [String], objectRead: ObjectReadRequest?)
    case authorizationDecided(app: String, type: String, direction: AuthorizationDirection, decision: AuthorizationDecision)
    case objectReadSelectionChanged(app: String, type: String, objects: [UUID])
    /// An empty list restores the default order.
    case sourcePriorityChanged(type: String, bundles: [String])
    /// `value` is nil when the characteristic was cleared.
    case characteristicSet(type: String, value: CharacteristicValue?)
    case credentialIssued(CredentialIssue)
    /// `effectiveUs`: from when the credential is refused (0 in events from before rotation:
    /// at once); `replacedBy`: a rotation's new credential (empty for a plain revocation).
    case credentialRevoked(id: String, effectiveUs: Int64, replacedBy: String)
    case attachmentAdded(AttachmentSummary)
    case attachmentRemoved(uuid: UUID, object: UUID)
    case workoutSamplesAssociated(workout: UUID, samples: [UUID])
    case routeLocationsAdded(route: UUID, chunk: UInt32)
    /// An event whose body was erased: only its header is left.
    case erased
    /// Objects were erased: what stays of each, and the events whose bodies went.
    case objectsErased(reason: String, objects: [ErasedObject], events: [ErasedEvent])
    /// Cluster member `node` of `cluster` became the ledger's primary under `epoch`.
    case primaryChanged(epoch: UInt64, node: String, cluster: String)

    /// What an erasure keeps of an object: its type, source and times, never a value.
    public struct ErasedObject: Sendable, Hashable {
        public var uuid: UUID
        public var type: String
        public var sourceBundle: String
        public var sourceName: String
        public var startUs: Int64
        public var endUs: Int64
        /// A correlation's members' types.
        public var memberTypes: [String] = []
    }

    /// An event an erasure emptied, with its commitment (format 2) or hash (format 1), and for
    /// format 1 the SHA-256 of its stored bytes once erased.
    public struct ErasedEvent: Sendable, Hashable {
        public var sequence: UInt64
        public var commitment: [UInt8]
        public var erasedStoredSHA256: [UInt8] = []
    }

    /// A per-object read request's type and optional date range (microseconds).
    public struct ObjectReadRequest: Sendable, Hashable {
        public var type: String
        public var startUs: Int64?
        public var endUs: Int64?
    }

    /// A credential's issue: whom it authenticates, its secret's hash and its lifetime.
    public struct CredentialIssue: Sendable, Hashable {
        public var id: String
        public var principal: Principal
        public var label: String
        public var secretHash: [UInt8]
        /// Microseconds since 1970; 0 in events from before credentials could expire.
        public var issuedUs: Int64
        /// 0: never.
        public var expiresUs: Int64
        /// A rotation: the credential this one replaces (empty otherwise).
        public var replaces: String
    }

    /// A characteristic's stored value: a date of birth, or an enumeration's raw value.
    public enum CharacteristicValue: Sendable, Hashable {
        case date(year: Int, month: Int, day: Int)
        case value(Int64)
    }

    /// An added attachment's description (its bytes are not read).
    public struct AttachmentSummary: Sendable, Hashable {
        public var uuid: UUID
        public var object: UUID
        public var name: String
        public var contentType: String
        public var size: UInt64
    }

    /// Decodes the body of an event of `kind`.
    /// - Throws: ``LedgerFailure`` `corrupted` when the body does not decode.
    public init(kind: EventKind, body: UnsafeRawBufferPointer) throws {
        do {
            self = try Self.decode(kind: kind, body: body)
        } catch let failure as LedgerFailure {
            throw failure
        } catch {
            throw LedgerFailure.corrupted("a \(kind) event's body does not decode")
        }
    }

    private static func decode(kind: EventKind, body: UnsafeRawBufferPointer) throws -> EventBody {
        switch kind {
        case .ledgerCreated:
            let created = try Healthledger_V1_LedgerCreated(serializedBytes: Array(body))
            return .ledgerCreated(id: created.ledgerID, displayName: created.displayName, publicKey: Array(created.signingPublicKey))
        case .objectSaved:
            return .objectSaved
        case .objectDeleted:
            let deleted = try Healthledger_V1_ObjectDeleted(serializedBytes: Array(body))
            return .objectDeleted(
                reason: DeletionReason(rawValue: deleted.reason.rawValue) ?? .deleted,
                syncIdentifier: deleted.hasSyncIdentifier ? deleted.syncIdentifier : nil,
                syncVersion: deleted.hasSyncVersion ? deleted.syncVersion : nil,
                replacedBy: UUID(bytes: deleted.replacedBy))
        case .authorizationRequested:
            let request = try Healthledger_V1_AuthorizationRequested(serializedBytes: Array(body))
            var objectRead: ObjectReadRequest?
            if request.hasObjectRead {
                let range = request.objectRead
                objectRead = ObjectReadRequest(
                    type: range.type, startUs: range.hasStartUs ? range.startUs : nil, endUs: range.hasEndUs ? range.endUs : nil)
            }
            return .authorizationRequested(share: request.shareTypes, read: request.readTypes, objectRead: objectRead)
        case .authorizationDecided:
            let decided = try Healthledger_V1_AuthorizationDecided(serializedBytes: Array(body))
            guard let direction = AuthorizationDirection(rawValue: UInt8(clamping: decided.direction.rawValue)),
                let decision = AuthorizationDecision(rawValue: UInt8(clamping: decided.decision.rawValue))
            else { throw LedgerFailure.corrupted("an authorization decision without a direction or decision") }
            return .authorizationDecided(app: decided.app, type: decided.type, direction: direction, decision: decision)
        case .objectReadSelectionChanged:
            let selection = try Healthledger_V1_ObjectReadSelectionChanged(serializedBytes: Array(body))
            return .objectReadSelectionChanged(app: selection.app, type: selection.type, objects: try selection.uuids.map(Self.uuid))
        case .sourcePriorityChanged:
            let priority = try Healthledger_V1_SourcePriorityChanged(serializedBytes: Array(body))
            return .sourcePriorityChanged(type: priority.type, bundles: priority.bundleIdentifiers)
        case .characteristicSet:
            let characteristic = try Healthledger_V1_Characteristic(serializedBytes: Array(body))
            guard TypeCatalogue.family(of: characteristic.type) == .characteristic else {
                throw LedgerFailure.corrupted("a characteristic event names no characteristic type")
            }
            let value: CharacteristicValue? =
                characteristic.year != 0
                ? .date(year: Int(characteristic.year), month: Int(characteristic.month), day: Int(characteristic.day))
                : characteristic.value != 0 ? .value(characteristic.value) : nil
            return .characteristicSet(type: characteristic.type, value: value)
        case .credentialIssued:
            let issued = try Healthledger_V1_CredentialIssued(serializedBytes: Array(body))
            return .credentialIssued(
                CredentialIssue(
                    id: issued.credentialID, principal: Principal(issued.principal), label: issued.label, secretHash: Array(issued.secretSha256),
                    issuedUs: issued.issuedUs, expiresUs: issued.expiresUs, replaces: issued.replaces))
        case .credentialRevoked:
            let revoked = try Healthledger_V1_CredentialRevoked(serializedBytes: Array(body))
            return .credentialRevoked(id: revoked.credentialID, effectiveUs: revoked.effectiveUs, replacedBy: revoked.replacedBy)
        case .attachmentAdded:
            // The description only: the attachment's bytes can be megabytes.
            let description = try ProtoReader.field(AttachmentAddedField.attachment, in: body) ?? UnsafeRawBufferPointer(start: nil, count: 0)
            var reader = ProtoReader(description)
            var summary = AttachmentSummary(uuid: UUID(), object: UUID(), name: "", contentType: "", size: 0)
            var found = (uuid: false, object: false)
            while let (field, wireType) = try reader.next() {
                switch (AttachmentField(rawValue: field), wireType) {
                case (.uuid, .lengthDelimited): (summary.uuid, found.uuid) = (try uuid(Data(try reader.bytes())), true)
                case (.objectUuid, .lengthDelimited): (summary.object, found.object) = (try uuid(Data(try reader.bytes())), true)
                case (.name, .lengthDelimited): summary.name = String(decoding: try reader.bytes(), as: UTF8.self)
                case (.contentType, .lengthDelimited): summary.contentType = String(decoding: try reader.bytes(), as: UTF8.self)
                case (.size, .varint): summary.size = try reader.varint()
                default: try reader.skip(wireType)
                }
            }
            guard found.uuid, found.object else { throw LedgerFailure.corrupted("an attachment event names no attachment or object") }
            return .attachmentAdded(summary)
        case .attachmentRemoved:
            let removed = try Healthledger_V1_AttachmentRemoved(serializedBytes: Array(body))
            return .attachmentRemoved(uuid: try uuid(removed.uuid), object: try uuid(removed.objectUuid))
        case .workoutSamplesAssociated:
            let associated = try Healthledger_V1_WorkoutSamplesAssociated(serializedBytes: Array(body))
            return .workoutSamplesAssociated(workout: try uuid(associated.workoutUuid), samples: try associated.sampleUuids.map(uuid))
        case .routeLocationsAdded:
            // The route and chunk only: the locations are read by route reads.
            var reader = ProtoReader(body)
            var route: [UInt8] = []
            var chunk: UInt64 = 0
            while let (field, wireType) = try reader.next() {
                switch (RouteLocationsAddedField(rawValue: field), wireType) {
                case (.routeUuid, .lengthDelimited): route = Array(try reader.bytes())
                case (.chunk, .varint): chunk = try reader.varint()
                default: try reader.skip(wireType)
                }
            }
            guard let route = UUID(bytes: route), let chunk = UInt32(exactly: chunk) else {
                throw LedgerFailure.corrupted("a route event names no route")
            }
            return .routeLocationsAdded(route: route, chunk: chunk)
        case .objectsErased:
            let erased = try Healthledger_V1_ObjectsErased(serializedBytes: Array(body))
            let objects = try erased.objects.map { object in
                ErasedObject(
                    uuid: try uuid(object.uuid), type: object.type, sourceBundle: object.source.bundleIdentifier, sourceName: object.source.name,
                    startUs: object.startUs, endUs: object.endUs, memberTypes: object.memberTypes)
            }
            return .objectsErased(
                reason: erased.reason, objects: objects,
                events: erased.events.map { ErasedEvent(sequence: $0.sequence, commitment: Array($0.commitment), erasedStoredSHA256: Array($0.erasedStoredSha256)) })
        case .primaryChanged:
            let changed = try Healthledger_V1_PrimaryChanged(serializedBytes: Array(body))
            guard changed.epoch > 0 else { throw LedgerFailure.corrupted("a primaryChanged event names no epoch") }
            return .primaryChanged(epoch: changed.epoch, node: changed.node, cluster: changed.cluster)
        }
    }

    /// The body of an ``EventKind/objectsErased`` event.
    static func encodeErasure(reason: String, objects: [ErasedObject], events: [ErasedEvent]) throws -> [UInt8] {
        var body = Healthledger_V1_ObjectsErased()
        body.reason = reason
        body.objects = objects.map { object in
            Healthledger_V1_ObjectsErased.ErasedObject.with {
                $0.uuid = Data(object.uuid.bytes)
                $0.type = object.type
                $0.source.bundleIdentifier = object.sourceBundle
                $0.source.name = object.sourceName
                $0.startUs = object.startUs
                $0.endUs = object.endUs
                $0.memberTypes = object.memberTypes
            }
        }
        body.events = events.map { event in
            Healthledger_V1_ObjectsErased.ErasedEvent.with {
                ($0.sequence, $0.commitment, $0.erasedStoredSha256) = (event.sequence, Data(event.commitment), Data(event.erasedStoredSHA256))
            }
        }
        return try body.serializedBytes()
    }

    /// The body of an ``EventKind/primaryChanged`` event.
    static func encodePrimaryChange(_ term: PrimaryTerm) throws -> [UInt8] {
        try Healthledger_V1_PrimaryChanged.with {
            ($0.epoch, $0.node, $0.cluster) = (term.epoch, term.node, term.cluster)
        }.serializedBytes()
    }

    private static func uuid(_ bytes: Data) throws -> UUID {
        guard let uuid = UUID(bytes: Array(bytes)) else { throw LedgerFailure.corrupted("an event names an object by \(bytes.count) bytes, not a UUID") }
        return uuid
    }

    /// The types the event concerns besides its header's object type (decisions,
    /// selections, requests, priorities, characteristics).
    public var types: [String] {
        switch self {
        case .authorizationRequested(let share, let read, let objectRead): share + read + (objectRead.map { [$0.type] } ?? [])
        case .authorizationDecided(_, let type, _, _), .objectReadSelectionChanged(_, let type, _), .sourcePriorityChanged(let type, _),
            .characteristicSet(let type, _):
            [type]
        default: []
        }
    }

    /// The objects the event concerns besides its header's object.
    public var objects: [UUID] {
        switch self {
        case .objectDeleted(_, _, _, let replacedBy): replacedBy.map { [$0] } ?? []
        case .objectReadSelectionChanged(_, _, let objects): objects
        case .attachmentAdded(let attachment): [attachment.uuid, attachment.object]
        case .attachmentRemoved(let uuid, let object): [uuid, object]
        case .workoutSamplesAssociated(let workout, let samples): [workout] + samples
        case .routeLocationsAdded(let route, _): [route]
        case .objectsErased(_, let objects, _): objects.map(\.uuid)
        default: []
        }
    }
}

extension LedgerEvent {
    /// The event's body, decoded (see ``EventBody``).
    public func decodedBody() throws -> EventBody {
        if isErased { return .erased }
        return try body.withUnsafeBytes { try EventBody(kind: kind, body: $0) }
    }
}
