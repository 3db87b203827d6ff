import Foundation

/// Which way an authorization goes.
public enum AuthorizationDirection: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Saving (and deleting) objects of the type.
    case share = 1
    /// Reading other sources' objects of the type.
    case read = 2
    /// Reading objects the owner selected one by one (vision prescriptions).
    case objectRead = 3

    public var description: String {
        switch self {
        case .share: "share"
        case .read: "read"
        case .objectRead: "object read"
        }
    }
}

/// The owner's decision on one (app, type, direction) pair.
public enum AuthorizationDecision: UInt8, Sendable, Hashable, CustomStringConvertible {
    case granted = 1
    case denied = 2
    /// A grant taken back: denied from now on.
    case revoked = 3

    public var description: String {
        switch self {
        case .granted: "granted"
        case .denied: "denied"
        case .revoked: "revoked"
        }
    }
}

/// An app's share status for a type, as HealthKit's `HKAuthorizationStatus`.
public enum SharingStatus: Int, Sendable, Hashable, CustomStringConvertible {
    case notDetermined = 0
    case sharingDenied = 1
    case sharingAuthorized = 2

    public var description: String {
        switch self {
        case .notDetermined: "notDetermined"
        case .sharingDenied: "sharingDenied"
        case .sharingAuthorized: "sharingAuthorized"
        }
    }
}

/// Whether asking for authorization would ask anything new (HealthKit's
/// `HKAuthorizationRequestStatus`).
public enum AuthorizationRequestStatus: Int, Sendable, Hashable {
    /// Some (type, direction) pair was never requested.
    case shouldRequest = 1
    case unnecessary = 2
}

/// One (app, type, direction) pair as the owner sees it.
public struct AuthorizationEntry: Sendable, Hashable {
    public var app: Source
    public var type: ObjectType
    public var direction: AuthorizationDirection
    /// The app asked for it.
    public var requested: Bool
    /// Nil until the owner decides (the request is pending when `requested`).
    public var decision: AuthorizationDecision?
    public var requestedAt: Date?
    public var decidedAt: Date?
    /// Per-object read: the request's range (nil bounds are open), the selected objects,
    /// and (in pending listings) the objects the request matches.
    public var rangeStart: Date?
    public var rangeEnd: Date?
    public var selected: [UUID]
    public var matching: [UUID] = []

    public var isPending: Bool { requested && decision == nil }

    public init(
        app: Source, type: ObjectType, direction: AuthorizationDirection, requested: Bool, decision: AuthorizationDecision?,
        requestedAt: Date?, decidedAt: Date?, rangeStart: Date? = nil, rangeEnd: Date? = nil, selected: [UUID] = [], matching: [UUID] = []
    ) {
        self.app = app
        self.type = type
        self.direction = direction
        self.requested = requested
        self.decision = decision
        self.requestedAt = requestedAt
        self.decidedAt = decidedAt
        self.rangeStart = rangeStart
        self.rangeEnd = rangeEnd
        self.selected = selected
        self.matching = matching
    }
}

/// One authorization event of the audit trail.
public struct AuthorizationEvent: Sendable, Hashable {
    public enum Action: Sendable, Hashable, CustomStringConvertible {
        case requested(share: [ObjectType], read: [ObjectType])
        case requestedObjects(ObjectType, start: Date?, end: Date?)
        case decided(ObjectType, AuthorizationDirection, AuthorizationDecision)
        case selectedObjects(ObjectType, count: Int)

        public var description: String {
            switch self {
            case .requested(let share, let read):
                "requested share [\(share.map(\.identifier).joined(separator: ", "))] read [\(read.map(\.identifier).joined(separator: ", "))]"
            case .requestedObjects(let type, let start, let end):
                "requested objects of \(type) from \(start.map { "\($0)" } ?? "any time") to \(end.map { "\($0)" } ?? "any time")"
            case .decided(let type, let direction, let decision): "\(decision) \(direction) of \(type)"
            case .selectedObjects(let type, let count): "selected \(count) object(s) of \(type)"
            }
        }
    }

    public var sequence: UInt64
    public var time: Date
    /// `owner`, or `app <bundle id>`.
    public var actor: String
    /// The app's bundle id.
    public var app: String
    public var action: Action

    public init(sequence: UInt64, time: Date, actor: String, app: String, action: Action) {
        self.sequence = sequence
        self.time = time
        self.actor = actor
        self.app = app
        self.action = action
    }
}


extension ObjectType {
    /// Types whose read authorization is per object (docs/SEMANTICS.md §6): vision prescriptions.
    public var isReadPerObject: Bool { family == .visionPrescription }
}
