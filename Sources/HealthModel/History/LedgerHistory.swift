import Foundation

/// Who performs an operation on a ledger; recorded as the actor of every event.
public enum Principal: Sendable, Hashable, CustomStringConvertible {
    /// The server or a tool acting on its own (e.g. creating a ledger).
    case system
    /// The server operator: manages ledgers, reads no health data.
    case `operator`
    /// The person whose ledger it is.
    case owner
    /// An app, identified by its source.
    case app(Source)

    public var description: String {
        switch self {
        case .system: "system"
        case .operator: "operator"
        case .owner: "owner"
        case .app(let source): "app \(source.bundleIdentifier)"
        }
    }
}

/// The kind of a ledger event.
public enum EventKind: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case ledgerCreated = 1
    case objectSaved = 2
    case objectDeleted = 3
    case authorizationRequested = 10
    case authorizationDecided = 11
    case objectReadSelectionChanged = 12
    case sourcePriorityChanged = 13
    case characteristicSet = 14
    case credentialIssued = 15
    case credentialRevoked = 16
    case attachmentAdded = 17
    case attachmentRemoved = 18
    case workoutSamplesAssociated = 19
    case routeLocationsAdded = 20
    /// Objects were erased: the events that held them lost their bodies.
    case objectsErased = 21
    /// A cluster member became the ledger's primary under a new fencing epoch.
    case primaryChanged = 22

    public var description: String {
        switch self {
        case .ledgerCreated: "ledgerCreated"
        case .objectSaved: "objectSaved"
        case .objectDeleted: "objectDeleted"
        case .authorizationRequested: "authorizationRequested"
        case .authorizationDecided: "authorizationDecided"
        case .objectReadSelectionChanged: "objectReadSelectionChanged"
        case .sourcePriorityChanged: "sourcePriorityChanged"
        case .characteristicSet: "characteristicSet"
        case .credentialIssued: "credentialIssued"
        case .credentialRevoked: "credentialRevoked"
        case .attachmentAdded: "attachmentAdded"
        case .attachmentRemoved: "attachmentRemoved"
        case .workoutSamplesAssociated: "workoutSamplesAssociated"
        case .routeLocationsAdded: "routeLocationsAdded"
        case .objectsErased: "objectsErased"
        case .primaryChanged: "primaryChanged"
        }
    }
}

/// A moment of a ledger's history: after a given event, or as of a time (after the last
/// event committed at or before it).
public enum PointInTime: Sendable, Hashable, CustomStringConvertible {
    case sequence(UInt64)
    case time(Date)

    public var description: String {
        switch self {
        case .sequence(let sequence): "event \(sequence)"
        case .time(let date): date.formatted(.iso8601)
        }
    }
}
