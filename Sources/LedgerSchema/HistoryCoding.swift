import Foundation
import HealthModel

/// The stored and wire form of who acted (`healthledger.v1.Actor`).
extension Principal {
    /// `healthledger.v1.Actor.Kind`.
    package var schemaKind: Int {
        switch self {
        case .system: Healthledger_V1_Actor.Kind.system.rawValue
        case .operator: Healthledger_V1_Actor.Kind.operator.rawValue
        case .owner: Healthledger_V1_Actor.Kind.owner.rawValue
        case .app: Healthledger_V1_Actor.Kind.app.rawValue
        }
    }

    package var schema: Healthledger_V1_Actor {
        var actor = Healthledger_V1_Actor()
        switch self {
        case .system: actor.kind = .system
        case .operator: actor.kind = .operator
        case .owner: actor.kind = .owner
        case .app(let source):
            actor.kind = .app
            actor.source = .init(source)
        }
        return actor
    }

    package init(_ actor: Healthledger_V1_Actor) {
        switch actor.kind {
        case .operator: self = .operator
        case .owner: self = .owner
        case .app: self = .app(actor.source.model)
        case .system, .unspecified, .UNRECOGNIZED: self = .system
        }
    }
}

extension EventKind {
    /// The wire form of the kind.
    package var schema: Healthledger_V1_EventKind { Healthledger_V1_EventKind(rawValue: rawValue) ?? .unspecified }
}

extension AuditEvent {
    package init(_ message: Healthledger_V1_AuditEvent) throws {
        guard let kind = EventKind(rawValue: message.kind.rawValue) else {
            throw HealthError.invalidArgument("an audit event of unknown kind \(message.kind.rawValue)", field: "kind")
        }
        self.init(
            sequence: message.sequence, time: date(microseconds: message.commitTimeUs), actor: Principal(message.actor), kind: kind,
            objectType: message.objectType.isEmpty ? nil : message.objectType, objectUUID: UUID(bytes: Array(message.objectUuid)),
            sentence: message.sentence, hash: Array(message.hash), stored: message.stored.isEmpty ? nil : Array(message.stored))
    }
}

extension Healthledger_V1_AuditEvent {
    package init(_ event: AuditEvent) {
        self.init()
        sequence = event.sequence
        commitTimeUs = microseconds(event.time)
        actor = event.actor.schema
        kind = event.kind.schema
        objectType = event.objectType ?? ""
        objectUuid = event.objectUUID.map { Data($0.bytes) } ?? Data()
        sentence = event.sentence
        hash = Data(event.hash)
        stored = event.stored.map { Data($0) } ?? Data()
    }
}

extension Healthledger_V1_AuditRequest {
    /// The request for `filter`.
    package init(_ filter: AuditFilter, includeStored: Bool, batchSize: Int) {
        self.init()
        fromSequence = filter.fromSequence ?? 0
        toSequence = filter.toSequence ?? 0
        if let since = filter.since { sinceUs = microseconds(since) }
        if let until = filter.until { untilUs = microseconds(until) }
        if let actor = filter.actor {
            switch actor {
            case .system: self.actor.kind = .system
            case .operator: self.actor.kind = .operator
            case .owner: self.actor.kind = .owner
            case .anyApp: self.actor.kind = .app
            case .app(let bundle):
                self.actor.kind = .app
                self.actor.source.bundleIdentifier = bundle
            }
        }
        kinds = filter.kinds.sorted { $0.rawValue < $1.rawValue }.map(\.schema)
        type = filter.type?.identifier ?? ""
        objectUuid = filter.object.map { Data($0.bytes) } ?? Data()
        self.includeStored = includeStored
        self.batchSize = UInt32(clamping: batchSize)
    }

    /// The filter the request describes.
    /// - Throws: ``HealthError`` `invalidArgument` naming the field at fault.
    package func filter() throws -> AuditFilter {
        var filter = AuditFilter()
        if fromSequence > 0 { filter.fromSequence = fromSequence }
        if toSequence > 0 { filter.toSequence = toSequence }
        if let from = filter.fromSequence, let to = filter.toSequence, to < from {
            throw HealthError.invalidArgument("to_sequence \(to) is before from_sequence \(from)", field: "to_sequence")
        }
        if hasSinceUs { filter.since = date(microseconds: sinceUs) }
        if hasUntilUs { filter.until = date(microseconds: untilUs) }
        if let since = filter.since, let until = filter.until, until < since {
            throw HealthError.invalidArgument("until_us is before since_us", field: "until_us")
        }
        if hasActor {
            switch actor.kind {
            case .unspecified: break
            case .system: filter.actor = .system
            case .operator: filter.actor = .operator
            case .owner: filter.actor = .owner
            case .app: filter.actor = actor.source.bundleIdentifier.isEmpty ? .anyApp : .app(actor.source.bundleIdentifier)
            case .UNRECOGNIZED(let value): throw HealthError.invalidArgument("unknown actor kind \(value)", field: "actor")
            }
        }
        filter.kinds = Set(try kinds.map { kind in
            guard let known = EventKind(rawValue: kind.rawValue) else { throw HealthError.invalidArgument("unknown event kind \(kind.rawValue)", field: "kinds") }
            return known
        })
        if !type.isEmpty { filter.type = try ObjectType(type) }
        if !objectUuid.isEmpty {
            guard let uuid = UUID(bytes: Array(objectUuid)) else {
                throw HealthError.invalidArgument("object_uuid must be 16 bytes, not \(objectUuid.count)", field: "object_uuid")
            }
            filter.object = uuid
        }
        return filter
    }
}

extension AccessRecord {
    package init(_ message: Healthledger_V1_AccessRecord) {
        self.init(
            time: Date(timeIntervalSince1970: Double(message.timeUs) / 1e6), credentialID: message.credentialID,
            principal: Principal(message.actor), method: message.method, types: message.types, objects: message.objects,
            asOfSequence: message.asOfSequence == 0 ? nil : message.asOfSequence, calls: max(message.calls, 1))
    }
}

extension ForwardedAccessRecord {
    package init(_ message: Healthledger_V1_ForwardedAccessRecord) {
        self.init(key: Array(message.key), record: AccessRecord(message.record))
    }
}

extension Healthledger_V1_ForwardedAccessRecord {
    package init(_ forwarded: ForwardedAccessRecord) {
        self.init()
        key = Data(forwarded.key)
        record = Healthledger_V1_AccessRecord(forwarded.record)
    }
}

extension Healthledger_V1_AccessRecord {
    package init(_ record: AccessRecord) {
        self.init()
        timeUs = Int64((record.time.timeIntervalSince1970 * 1e6).rounded())
        credentialID = record.credentialID
        actor = record.principal.schema
        method = record.method
        types = record.types
        objects = record.objects
        asOfSequence = record.asOfSequence ?? 0
        calls = record.calls
    }
}
