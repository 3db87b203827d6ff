import Foundation
import HealthModel

/// Authorization values ↔ their wire form, written once for the server and the SDK.

extension Healthledger_V1_AuthorizationDirection {
    public init(_ direction: AuthorizationDirection) {
        self = Self(rawValue: Int(direction.rawValue)) ?? .unspecified
    }

    /// - Throws: ``HealthError`` `invalidArgument` when unset or unknown.
    public func model() throws -> AuthorizationDirection {
        guard let direction = AuthorizationDirection(rawValue: UInt8(clamping: rawValue)) else {
            throw HealthError.invalidArgument("the direction must be share or read", field: "direction")
        }
        return direction
    }
}

extension Healthledger_V1_AuthorizationDecided.Decision {
    public init(_ decision: AuthorizationDecision?) {
        self = decision.map { Self(rawValue: Int($0.rawValue)) ?? .unspecified } ?? .unspecified
    }

    /// Nil for "not decided".
    public var model: AuthorizationDecision? { AuthorizationDecision(rawValue: UInt8(clamping: rawValue)) }
}

extension Healthledger_V1_AuthorizationEntry {
    public init(_ entry: AuthorizationEntry) {
        self.init()
        app = .init(entry.app)
        type = entry.type.identifier
        direction = .init(entry.direction)
        requested = entry.requested
        decision = .init(entry.decision)
        if let at = entry.requestedAt { requestedUs = microseconds(at) }
        if let at = entry.decidedAt { decidedUs = microseconds(at) }
        perObject = entry.direction == .objectRead
        if let start = entry.rangeStart { startUs = microseconds(start) }
        if let end = entry.rangeEnd { endUs = microseconds(end) }
        selectedUuids = entry.selected.map { Data($0.bytes) }
        matchingUuids = entry.matching.map { Data($0.bytes) }
    }

    public func model() throws -> AuthorizationEntry {
        AuthorizationEntry(
            app: app.model, type: try ObjectType(type), direction: try direction.model(), requested: requested, decision: decision.model,
            requestedAt: hasRequestedUs ? date(microseconds: requestedUs) : nil, decidedAt: hasDecidedUs ? date(microseconds: decidedUs) : nil,
            rangeStart: hasStartUs ? date(microseconds: startUs) : nil, rangeEnd: hasEndUs ? date(microseconds: endUs) : nil,
            selected: try selectedUuids.map(Self.uuid), matching: try matchingUuids.map(Self.uuid))
    }

    static func uuid(_ bytes: Data) throws -> UUID {
        guard let uuid = UUID(bytes: bytes) else { throw HealthError.invalidArgument("a UUID must be 16 bytes", field: "uuids") }
        return uuid
    }
}

extension Healthledger_V1_AuthorizationEvent {
    public init(_ event: AuthorizationEvent) {
        self.init()
        sequence = event.sequence
        timeUs = microseconds(event.time)
        actor = event.actor
        app = event.app
        switch event.action {
        case .requested(let share, let read):
            action = .requested
            shareTypes = share.map(\.identifier)
            readTypes = read.map(\.identifier)
        case .requestedObjects(let type, let start, let end):
            action = .requestedObjects
            self.type = type.identifier
            if let start { startUs = microseconds(start) }
            if let end { endUs = microseconds(end) }
        case .decided(let type, let direction, let decision):
            action = .decided
            self.type = type.identifier
            self.direction = .init(direction)
            self.decision = .init(decision)
        case .selectedObjects(let type, let count):
            action = .selectedObjects
            self.type = type.identifier
            selected = UInt32(clamping: count)
        }
    }

    public func model() throws -> AuthorizationEvent {
        let action: AuthorizationEvent.Action
        switch self.action {
        case .requested: action = .requested(share: try shareTypes.map(ObjectType.init), read: try readTypes.map(ObjectType.init))
        case .requestedObjects:
            action = .requestedObjects(
                try ObjectType(type), start: hasStartUs ? date(microseconds: startUs) : nil, end: hasEndUs ? date(microseconds: endUs) : nil)
        case .decided:
            guard let decision = decision.model else { throw HealthError.invalidArgument("a decision event without a decision", field: "decision") }
            action = .decided(try ObjectType(type), try direction.model(), decision)
        case .selectedObjects: action = .selectedObjects(try ObjectType(type), count: Int(selected))
        case .unspecified, .UNRECOGNIZED: throw HealthError.invalidArgument("an authorization event without an action", field: "action")
        }
        return AuthorizationEvent(sequence: sequence, time: date(microseconds: timeUs), actor: actor, app: app, action: action)
    }
}

extension Array where Element == String {
    /// Object types by identifier, refusing unknown ones.
    public func objectTypes(field: String) throws -> Set<ObjectType> {
        Set(try map { identifier in
            do { return try ObjectType(identifier) } catch var error as HealthError {
                error.field = field
                throw error
            }
        })
    }
}
