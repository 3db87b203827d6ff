import HealthModel
import LedgerSchema

/// gRPC's status codes.
public enum RPCStatusCode: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case ok = 0, cancelled, unknown, invalidArgument, deadlineExceeded, notFound, alreadyExists, permissionDenied
    case resourceExhausted, failedPrecondition, aborted, outOfRange, unimplemented, internalError, unavailable, dataLoss
    case unauthenticated

    public var description: String {
        switch self {
        case .ok: "ok"
        case .cancelled: "cancelled"
        case .unknown: "unknown"
        case .invalidArgument: "invalidArgument"
        case .deadlineExceeded: "deadlineExceeded"
        case .notFound: "notFound"
        case .alreadyExists: "alreadyExists"
        case .permissionDenied: "permissionDenied"
        case .resourceExhausted: "resourceExhausted"
        case .failedPrecondition: "failedPrecondition"
        case .aborted: "aborted"
        case .outOfRange: "outOfRange"
        case .unimplemented: "unimplemented"
        case .internalError: "internal"
        case .unavailable: "unavailable"
        case .dataLoss: "dataLoss"
        case .unauthenticated: "unauthenticated"
        }
    }
}

/// A failed call: a status code, a message, HealthKit's error code when there is one, and
/// (on the side that made it) the error it stands for.
///
/// ```swift
/// catch let error as RPCError where error.code == .permissionDenied { … }
/// ```
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: RPCStatusCode
    public var message: String
    public var healthErrorCode: HealthError.Code?
    /// A write refused by a follower: its primary's address (HOST:PORT), where to send it.
    public var primary: String?
    /// The server did nothing with the call: sending it again, as it is, is safe.
    public var unprocessed = false
    /// The error this one was made from (a storage failure behind `unavailable`, anything
    /// behind `internal`), for the log of the side that made it. Never sent: a status
    /// carries the code and the message only. Not compared by `==`.
    public var cause: (any Error)?

    public init(_ code: RPCStatusCode, _ message: String, healthErrorCode: HealthError.Code? = nil, primary: String? = nil, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.healthErrorCode = healthErrorCode
        self.primary = primary
        self.cause = cause
    }

    /// The status any error ends a call with, in one place: an ``RPCError`` as it is, an
    /// ``RPCErrorConvertible`` error as it says (``HealthError`` and the server's own errors),
    /// cancellation as `cancelled`, and anything else as `internal`, whose message tells the
    /// client nothing more. The error is kept as the ``cause``.
    public init(mapping error: any Error) {
        switch error {
        case let error as RPCError: self = error
        case let error as any RPCErrorConvertible: self = error.rpcError
        case is CancellationError: self.init(.cancelled, "the call was cancelled")
        default: self.init(.internalError, "internal error")
        }
        if cause == nil, !(error is RPCError) { cause = error }
    }

    public static func == (left: RPCError, right: RPCError) -> Bool {
        left.code == right.code && left.message == right.message && left.healthErrorCode == right.healthErrorCode
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(healthErrorCode)
    }

    /// The error a ``HealthError`` becomes on the wire.
    public init(_ error: HealthError) {
        let code: RPCStatusCode = switch error.code {
        case .invalidArgument: error.existingUUID == nil ? .invalidArgument : .alreadyExists
        case .authorizationDenied, .authorizationNotDetermined, .requiredAuthorizationDenied: .permissionDenied
        case .noData: .notFound
        case .dataSizeExceeded: .resourceExhausted
        case .databaseInaccessible, .healthDataUnavailable: .unavailable
        case .userCanceled: .cancelled
        default: .failedPrecondition
        }
        self.init(code, error.message, healthErrorCode: error.code)
    }

    /// The error a call status carries; nil for `ok`.
    public init?(_ status: Healthledger_V1_CallStatus) {
        guard status.code != .ok else { return nil }
        self.init(
            RPCStatusCode(rawValue: status.code.rawValue) ?? .unknown, status.message,
            healthErrorCode: status.healthErrorCode == 0 ? nil : HealthError.Code(rawValue: Int(status.healthErrorCode)),
            primary: status.primary.isEmpty ? nil : status.primary)
        unprocessed = status.unprocessed
    }

    /// The HealthKit-style error this status stands for, when it carries a code.
    public var healthError: HealthError? {
        healthErrorCode.map { HealthError($0, message) }
    }

    public var description: String { "\(code): \(message)" }
}

/// An error that knows the status it ends a call with (``RPCError/init(mapping:)``).
public protocol RPCErrorConvertible: Error {
    var rpcError: RPCError { get }
}

extension HealthError: RPCErrorConvertible {
    public var rpcError: RPCError { RPCError(self) }
}

/// The methods of `healthledger.v1.Ledger`.
public enum RPCMethod: String, Sendable, CaseIterable {
    case ping = "healthledger.v1.Ledger/Ping"
    case save = "healthledger.v1.Ledger/Save"
    case delete = "healthledger.v1.Ledger/Delete"
    case deleteObjects = "healthledger.v1.Ledger/DeleteObjects"
    /// Erases objects: their values go from the ledger, their history stays verifiable.
    case erase = "healthledger.v1.Ledger/Erase"
    case fetch = "healthledger.v1.Ledger/Fetch"
    /// Server streaming: `SampleBatch` messages.
    case querySamples = "healthledger.v1.Ledger/QuerySamples"
    /// Server streaming: `ChangeBatch` messages (an anchored object query).
    case queryChanges = "healthledger.v1.Ledger/QueryChanges"
    /// Long-running: `ChangeBatch` messages, then more as changes commit.
    case watchChanges = "healthledger.v1.Ledger/WatchChanges"
    /// Long-running: `ObserverUpdate` messages (an observer query).
    case observe = "healthledger.v1.Ledger/Observe"
    // Authorization (docs/PROTOCOL.md): apps ask, the owner decides.
    case requestAuthorization = "healthledger.v1.Ledger/RequestAuthorization"
    case getRequestStatus = "healthledger.v1.Ledger/GetRequestStatus"
    case authorizationStatus = "healthledger.v1.Ledger/AuthorizationStatus"
    case requestObjectReadAuthorization = "healthledger.v1.Ledger/RequestObjectReadAuthorization"
    case authorizations = "healthledger.v1.Ledger/Authorizations"
    case pendingAuthorizations = "healthledger.v1.Ledger/PendingAuthorizations"
    case decideAuthorization = "healthledger.v1.Ledger/DecideAuthorization"
    case setObjectReadSelection = "healthledger.v1.Ledger/SetObjectReadSelection"
    case authorizationHistory = "healthledger.v1.Ledger/AuthorizationHistory"
    case sourcePriority = "healthledger.v1.Ledger/SourcePriority"
    case setSourcePriority = "healthledger.v1.Ledger/SetSourcePriority"
    /// The sources of a type's objects (HealthKit's source query).
    case querySources = "healthledger.v1.Ledger/QuerySources"
    case statistics = "healthledger.v1.Ledger/Statistics"
    /// Server streaming: `StatisticsBatch` messages.
    case statisticsCollection = "healthledger.v1.Ledger/StatisticsCollection"
    /// Long-running: `StatisticsBatch` messages, then the intervals that change.
    case watchStatisticsCollection = "healthledger.v1.Ledger/WatchStatisticsCollection"
    case addAttachment = "healthledger.v1.Ledger/AddAttachment"
    case attachments = "healthledger.v1.Ledger/Attachments"
    case attachmentData = "healthledger.v1.Ledger/AttachmentData"
    case removeAttachment = "healthledger.v1.Ledger/RemoveAttachment"
    case characteristics = "healthledger.v1.Ledger/Characteristics"
    case setCharacteristic = "healthledger.v1.Ledger/SetCharacteristic"
    // Workouts and routes.
    case associateSamples = "healthledger.v1.Ledger/AssociateSamples"
    case workoutStatistics = "healthledger.v1.Ledger/WorkoutStatistics"
    case beginRoute = "healthledger.v1.Ledger/BeginRoute"
    case addRouteLocations = "healthledger.v1.Ledger/AddRouteLocations"
    case finishRoute = "healthledger.v1.Ledger/FinishRoute"
    case discardRoute = "healthledger.v1.Ledger/DiscardRoute"
    /// Server streaming: `RouteBatch` messages.
    case routeLocations = "healthledger.v1.Ledger/RouteLocations"
    /// Server streaming: correlations and the members the caller may read.
    case queryCorrelations = "healthledger.v1.Ledger/QueryCorrelations"
    /// Server streaming: `AuditBatch` messages, the owner's audit trail.
    case audit = "healthledger.v1.Ledger/Audit"
    /// Long-running: `AuditBatch` messages, then the events that match as they commit.
    case watchAudit = "healthledger.v1.Ledger/WatchAudit"
    /// The owner's access records: which credential read what, when.
    case accessRecords = "healthledger.v1.Ledger/AccessRecords"
    /// The owner's view of the ledger's credentials, and revoking one of them.
    case ledgerCredentials = "healthledger.v1.Ledger/LedgerCredentials"
    case revokeLedgerCredential = "healthledger.v1.Ledger/RevokeLedgerCredential"
    // The Merkle tree over the log: signed tree heads and proofs (the owner's).
    case treeHead = "healthledger.v1.Ledger/TreeHead"
    case inclusionProof = "healthledger.v1.Ledger/InclusionProof"
    case consistencyProof = "healthledger.v1.Ledger/ConsistencyProof"
    // The operator's: ledgers and credentials, with an operator credential.
    case createLedger = "healthledger.v1.Ledger/CreateLedger"
    case listLedgers = "healthledger.v1.Ledger/ListLedgers"
    case issueCredential = "healthledger.v1.Ledger/IssueCredential"
    case revokeCredential = "healthledger.v1.Ledger/RevokeCredential"
    case listCredentials = "healthledger.v1.Ledger/ListCredentials"
    case rotateCredential = "healthledger.v1.Ledger/RotateCredential"
    /// A whole ledger erased, for a person who leaves.
    case eraseLedger = "healthledger.v1.Ledger/EraseLedger"
    // Replication: a follower tailing its primary's log, with an operator credential.
    case fetchLog = "healthledger.v1.Replication/FetchLog"
    case fetchSnapshot = "healthledger.v1.Replication/FetchSnapshot"
    /// A cluster on etcd as the member answering sees it.
    case clusterStatus = "healthledger.v1.Replication/ClusterStatus"
    /// Which of the primary's ledgers changed since a follower's cursor.
    case watchLedgers = "healthledger.v1.Replication/WatchLedgers"
    /// The access records of a follower's reads, for its primary to keep.
    case forwardAccessRecords = "healthledger.v1.Replication/ForwardAccessRecords"
    /// The access records a primary holds, in their order of arrival, for a follower's copy.
    case fetchAccessRecords = "healthledger.v1.Replication/FetchAccessRecords"

    /// Changes a ledger or the store (docs/PROTOCOL.md §4.4): sent twice, it may act twice.
    public var isWrite: Bool {
        switch self {
        case .save, .delete, .deleteObjects, .erase, .requestAuthorization, .requestObjectReadAuthorization, .decideAuthorization,
            .setObjectReadSelection, .setSourcePriority, .addAttachment, .removeAttachment, .setCharacteristic, .associateSamples, .beginRoute,
            .addRouteLocations, .finishRoute, .discardRoute, .revokeLedgerCredential, .createLedger, .issueCredential, .rotateCredential,
            .revokeCredential, .eraseLedger:
            true
        default:
            false
        }
    }

    /// Runs until the client cancels it: no deadline unless the call sets one.
    public var isLongRunning: Bool { self == .watchChanges || self == .observe || self == .watchStatisticsCollection || self == .watchAudit }

    /// The method a frame names (its full name), found with one look-up rather than a
    /// comparison with each name in turn.
    public init?(named name: String) {
        guard let method = Self.byName[name] else { return nil }
        self = method
    }

    private static let byName = Dictionary(uniqueKeysWithValues: allCases.map { ($0.rawValue, $0) })

    /// The method's position among ``allCases``: its enum tag, a byte (the type has fewer than
    /// 256 cases, declared in that order).
    public var ordinal: Int { Int(unsafeBitCast(self, to: UInt8.self)) }
}

// A method is hashed by its position, not by its name as a raw-valued enum is by default: a
// call looks its method up in several tables (its registration, its metrics).
extension RPCMethod: Hashable {
    public func hash(into hasher: inout Hasher) { hasher.combine(ordinal) }
    public static func == (lhs: RPCMethod, rhs: RPCMethod) -> Bool { lhs.ordinal == rhs.ordinal }
}
