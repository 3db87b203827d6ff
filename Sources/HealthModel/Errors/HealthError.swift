import Foundation

/// An error from the health data model or the ledger, carrying HealthKit's error code.
///
/// Every failure a caller can cause is one of these: the ``code`` says what kind of
/// failure (``Code/invalidArgument``, ``Code/authorizationDenied``, …), the ``message``
/// says what was wrong in words that name the offending input, and ``field`` names the
/// field at fault when there is one.
///
/// ```swift
/// do { _ = try HealthUnit("furlong") }
/// catch let error as HealthError where error.code == .invalidArgument { print(error.message) }
/// ```
public struct HealthError: Error, Sendable, Hashable, CustomStringConvertible {
    /// HealthKit's `HKError.Code`, carried next to an RPC status.
    public enum Code: Int, Sendable, Hashable, CaseIterable {
        case unknown = 0
        case healthDataUnavailable = 1
        case healthDataRestricted = 2
        case invalidArgument = 3
        case authorizationDenied = 4
        case authorizationNotDetermined = 5
        case databaseInaccessible = 6
        case userCanceled = 7
        case anotherWorkoutSessionStarted = 8
        case userExitedWorkoutSession = 9
        case requiredAuthorizationDenied = 10
        case noData = 11
        case workoutActivityNotAllowed = 12
        case dataSizeExceeded = 13
        case backgroundWorkoutSessionNotAllowed = 14
        case notPermissibleForGuestUserMode = 15
    }

    /// What kind of failure this is.
    public var code: Code
    /// A human-readable explanation naming the input at fault.
    public var message: String
    /// The field at fault (e.g. `endDate`, `metadata.HKMetadataKeySyncVersion`), if any.
    public var field: String?
    /// Set when a save names a UUID the ledger already holds, live or deleted: the object it
    /// collides with. The code stays ``Code/invalidArgument``; over RPC the status is
    /// `ALREADY_EXISTS`, so that a client can tell "already there" from a bad object.
    public var existingUUID: UUID?

    public init(_ code: Code, _ message: String, field: String? = nil, existingUUID: UUID? = nil) {
        self.code = code
        self.message = message
        self.field = field
        self.existingUUID = existingUUID
    }

    /// An ``Code/invalidArgument`` error.
    public static func invalidArgument(_ message: String, field: String? = nil) -> HealthError {
        HealthError(.invalidArgument, message, field: field)
    }

    public var description: String { "\(code): \(message)" }
}
