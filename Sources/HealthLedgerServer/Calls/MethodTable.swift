import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// How a method runs.
package enum MethodKind: Sendable, Equatable {
    /// One response computed at once from a read snapshot, without waiting on anything: it
    /// runs on the connection's event loop, in the turn that read the request.
    case immediate
    /// One response that waits (a commit, a long read): it runs in a task, except a small
    /// request of a write registered with ``MethodRegistration/onCommit(decoding:_:)``, which
    /// is answered from its commit.
    case unary
    /// Messages under the stream window, then the status; ends by itself.
    case serverStreaming
    /// Messages until the client cancels: no deadline unless the call asks for one.
    case longRunning

    package var isStreaming: Bool { self == .serverStreaming || self == .longRunning }
}

/// Emits a streaming call's messages and reports the read scopes it used.
struct StreamContext: Sendable {
    /// Told the read scope each snapshot read ran with (``StreamAccess`` watches it).
    let scanned: @Sendable (ReadScope) -> Void
    /// Sends one message, waiting for the client's window.
    let emit: @Sendable ([UInt8]) async throws -> Void
}

/// A request decoded once and bound to its method's handler.
enum BoundCall: Sendable {
    case immediate(@Sendable (LedgerCall) throws -> [UInt8])
    case unary(@Sendable (LedgerCall) async throws -> [UInt8])
    /// A write that answers when its commit is durable: `start` prepares it on the calling
    /// thread and calls back with the response from the committing thread (the caller's own,
    /// when it passes a ``CallerExecutor`` and the commit runs there).
    case onCommit(
        _ start: @Sendable (LedgerCall, CallerExecutor?, _ completion: @escaping @Sendable (Result<[UInt8], any Error>) -> Void) -> Void)
    /// `types`: what the stream reads, whose access it holds while it runs.
    case stream(types: [ObjectType], run: @Sendable (LedgerCall, StreamContext) async throws -> Void)
    /// An operator's method on the store, before any ledger is chosen; `ledger`, the ledger
    /// its request names (the one a write changes), if any.
    case onStore(ledger: String?, @Sendable (OperatorCall) async throws -> [UInt8])
}

/// Who may call a ledger's method, beyond holding one of its credentials. Checked once the
/// request has decoded and before the method looks at its fields, so that a caller who may
/// not call a method hears that, whatever its request holds.
enum Caller: Sendable {
    case anyone
    /// The owner alone: an app is refused with this error (`PERMISSION_DENIED`, health code 4).
    case owner(refusingApps: HealthError)
    /// Apps alone: the owner, who holds every grant, asks for none (`INVALID_ARGUMENT`).
    case apps

    func admit(_ principal: Principal) throws {
        switch (self, principal) {
        case (.owner(let refusal), .app): throw refusal
        case (.apps, .owner), (.apps, .system): throw RoleRefusal.ownerRequesting
        default: return
        }
    }
}

/// One method: its kind, who may call it, whether a point-in-time view answers it, and the
/// decode of its request bound to its handler.
struct MethodRegistration: Sendable {
    let kind: MethodKind
    var caller = Caller.anyone
    /// Reads without writing and ends by itself: a point-in-time view can answer it.
    let answersAsOf: Bool
    /// Called with an operator credential, on the store rather than one ledger.
    let isOperatorMethod: Bool
    /// Changes the ledger or the store. Once handed over, a write runs to its end and keeps
    /// its own outcome, whatever cancel or deadline comes; a read that one stops ends with
    /// its status instead (``CallDispatcher/run(id:method:request:window:deadline:send:finish:)``).
    var writes = false
    /// A unary write whose small requests are prepared on the event loop and answered from
    /// the committing thread, with no task between (``CallDispatcher/answerOnCommit``).
    var answersOnCommit = false
    /// Returns health data: each call leaves an access record (docs/PROTOCOL.md §7.15a).
    var readsHealthData = false
    /// Decodes the request's payload (once) and binds it to the handler.
    let bind: @Sendable (_ payload: [UInt8]) throws -> BoundCall

    /// This registration, callable by `caller` alone.
    func only(_ caller: Caller) -> Self {
        var registration = self
        registration.caller = caller
        return registration
    }

    /// This registration, for a method that returns health data.
    var recorded: Self {
        var registration = self
        registration.readsHealthData = true
        return registration
    }

    static func decode<Request: SwiftProtobuf.Message>(_: Request.Type, _ payload: [UInt8]) throws -> Request {
        do {
            return try Request(serializedBytes: payload)
        } catch BinaryDecodingError.messageDepthLimit {
            throw RPCError(
                .invalidArgument,
                "the request nests messages more than \(BinaryDecodingOptions().messageDepthLimit) deep (a predicate nests at most \(ObjectPredicate.maximumDepth) levels)",
                healthErrorCode: .invalidArgument)
        } catch {
            throw RPCError(.invalidArgument, "the request is not a valid \(Request.protoMessageName)", healthErrorCode: .invalidArgument)
        }
    }

    /// A read answered at once on the event loop.
    static func immediate<Request: SwiftProtobuf.Message>(
        _: Request.Type, asOf: Bool = true, writes: Bool = false, _ handler: @escaping @Sendable (LedgerCall, Request) throws -> [UInt8]
    ) -> Self {
        var registration = MethodRegistration(kind: .immediate, answersAsOf: asOf, isOperatorMethod: false) { payload in
            let request = try decode(Request.self, payload)
            return .immediate { try handler($0, request) }
        }
        registration.writes = writes
        return registration
    }

    /// A method that waits: a write, or (`asOf`: answered by a point-in-time view too) a read
    /// that may take long.
    static func unary<Request: SwiftProtobuf.Message>(
        _: Request.Type, asOf: Bool = false, _ handler: @escaping @Sendable (LedgerCall, Request) async throws -> [UInt8]
    ) -> Self {
        unary(decoding: { try decode(Request.self, $0) }, asOf: asOf, handler)
    }

    /// A method that waits, whose request `decode` reads from the payload itself.
    static func unary<Request: Sendable>(
        decoding decode: @escaping @Sendable ([UInt8]) throws -> Request, asOf: Bool = false,
        _ handler: @escaping @Sendable (LedgerCall, Request) async throws -> [UInt8]
    ) -> Self {
        var registration = MethodRegistration(kind: .unary, answersAsOf: asOf, isOperatorMethod: false) { payload in
            let request = try decode(payload)
            return .unary { try await handler($0, request) }
        }
        registration.writes = !asOf
        return registration
    }

    /// A write that waits for its commit and nothing else: a small request needs no task
    /// (``CallDispatcher/answerOnCommit``); a large one runs in a task like any unary call.
    static func onCommit<Request: Sendable>(
        decoding decode: @escaping @Sendable ([UInt8]) throws -> Request,
        _ handler: @escaping @Sendable (
            LedgerCall, Request, CallerExecutor?, _ completion: @escaping @Sendable (Result<[UInt8], any Error>) -> Void
        ) -> Void
    ) -> Self {
        var registration = MethodRegistration(kind: .unary, answersAsOf: false, isOperatorMethod: false) { payload in
            let request = try decode(payload)
            return .onCommit { handler($0, request, $1, $2) }
        }
        registration.answersOnCommit = true
        registration.writes = true
        return registration
    }

    /// A server-streaming method, and the types whose access its stream holds.
    static func stream<Request: SwiftProtobuf.Message>(
        _: Request.Type, _ kind: MethodKind = .serverStreaming, types: @escaping @Sendable (Request) throws -> [ObjectType],
        _ handler: @escaping @Sendable (LedgerCall, Request, StreamContext) async throws -> Void
    ) -> Self {
        MethodRegistration(kind: kind, answersAsOf: kind == .serverStreaming, isOperatorMethod: false) { payload in
            let request = try decode(Request.self, payload)
            return .stream(types: try types(request)) { try await handler($0, request, $1) }
        }
    }

    /// An operator method that reads.
    static func onStore<Request: SwiftProtobuf.Message>(
        _: Request.Type, _ handler: @escaping @Sendable (OperatorCall, Request) async throws -> [UInt8]
    ) -> Self {
        MethodRegistration(kind: .unary, answersAsOf: false, isOperatorMethod: true) { payload in
            let request = try decode(Request.self, payload)
            return .onStore(ledger: nil) { try await handler($0, request) }
        }
    }

    /// An operator method that reads the ledger its request names at `ledger` (the call's log
    /// line names it).
    static func onStore<Request: SwiftProtobuf.Message>(
        _: Request.Type, naming ledger: any KeyPath<Request, String> & Sendable,
        _ handler: @escaping @Sendable (OperatorCall, Request) async throws -> [UInt8]
    ) -> Self {
        MethodRegistration(kind: .unary, answersAsOf: false, isOperatorMethod: true) { payload in
            let request = try decode(Request.self, payload)
            return .onStore(ledger: request[keyPath: ledger]) { try await handler($0, request) }
        }
    }

    /// An operator method that changes the ledger its request names at `ledger` (in a cluster,
    /// only the primary of that ledger's placement group takes it).
    static func onStore<Request: SwiftProtobuf.Message>(
        _: Request.Type, writing ledger: any KeyPath<Request, String> & Sendable,
        _ handler: @escaping @Sendable (OperatorCall, Request) async throws -> [UInt8]
    ) -> Self {
        var registration = MethodRegistration(kind: .unary, answersAsOf: false, isOperatorMethod: true) { payload in
            let request = try decode(Request.self, payload)
            return .onStore(ledger: request[keyPath: ledger]) { try await handler($0, request) }
        }
        registration.writes = true
        return registration
    }
}

/// Every method the server answers, registered once: the one place that says how each runs.
package enum MethodTable {
    /// How `method` runs; nil for a method the server does not answer.
    package static func kind(of method: RPCMethod) -> MethodKind? { registrations[method]?.kind }

    /// Whether `method` changes the ledger or the store (a cancel or deadline never stops it).
    package static func writes(_ method: RPCMethod) -> Bool { registrations[method]?.writes ?? false }

    /// Whether a point-in-time view answers `method` (a call with `as_of_sequence` or `as_of_time_us`).
    package static func answersAsOf(_ method: RPCMethod) -> Bool { registrations[method]?.answersAsOf ?? false }

    /// Whether `method`'s small requests are answered from their commit, without a task.
    package static func answersOnCommit(_ method: RPCMethod) -> Bool { registrations[method]?.answersOnCommit ?? false }

    static let registrations: [RPCMethod: MethodRegistration] = [
        .ping: .immediate(Healthledger_V1_PingRequest.self) { try $0.ping($1) },
        .save: .onCommit(decoding: LedgerCall.saveObjects) { $0.save($1, committingOn: $2, completion: $3) },
        .delete: .unary(Healthledger_V1_DeleteRequest.self) { try await $0.delete($1) },
        .deleteObjects: .unary(Healthledger_V1_DeleteObjectsRequest.self) { try await $0.deleteObjects($1) },
        .erase: .unary(Healthledger_V1_EraseRequest.self) { try await $0.erase($1) },
        .fetch: .immediate(Healthledger_V1_FetchRequest.self) { try $0.fetch($1) }.recorded,
        .querySamples: .stream(Healthledger_V1_SampleQueryRequest.self, types: { [try ObjectType($0.type)] }) {
            try await $0.querySamples($1, onScope: $2.scanned, $2.emit)
        }.recorded,
        .queryCorrelations: .stream(Healthledger_V1_CorrelationQueryRequest.self, types: { withMembers(try CorrelationType($0.type).objectType) }) {
            try await $0.queryCorrelations($1, onScope: $2.scanned, $2.emit)
        }.recorded,
        .queryChanges: .stream(Healthledger_V1_ChangeQueryRequest.self, types: changeTypes) { try await $0.queryChanges($1, onScope: $2.scanned, $2.emit) }
            .recorded,
        .watchChanges: .stream(Healthledger_V1_ChangeQueryRequest.self, .longRunning, types: changeTypes) {
            try await $0.watchChanges($1, onScope: $2.scanned, $2.emit)
        }.recorded,
        .observe: .stream(
            Healthledger_V1_ObserveRequest.self, .longRunning,
            types: { try LedgerCall.descriptors(type: $0.type, predicate: $0.hasPredicate ? $0.predicate : nil, $0.descriptors).flatMap { withMembers($0.type) } }
        ) { try await $0.observe($1, onScope: $2.scanned, $2.emit) }.recorded,
        .requestAuthorization: .unary(Healthledger_V1_AuthorizationRequest.self) { try await $0.requestAuthorization($1) }.only(.apps),
        .getRequestStatus: .immediate(Healthledger_V1_AuthorizationRequest.self) { try $0.getRequestStatus($1) }.only(.apps),
        .authorizationStatus: .immediate(Healthledger_V1_AuthorizationStatusRequest.self) { try $0.authorizationStatus($1) },
        .requestObjectReadAuthorization: .unary(Healthledger_V1_ObjectReadAuthorizationRequest.self) {
            try await $0.requestObjectReadAuthorization($1)
        }.only(.apps),
        .authorizations: .immediate(Healthledger_V1_AuthorizationsRequest.self) { try $0.authorizations($1, pendingOnly: false) }.only(managing),
        .pendingAuthorizations: .immediate(Healthledger_V1_AuthorizationsRequest.self) { try $0.authorizations($1, pendingOnly: true) }.only(managing),
        .decideAuthorization: .unary(Healthledger_V1_DecideAuthorizationRequest.self) { try await $0.decideAuthorization($1) }.only(managing),
        .setObjectReadSelection: .unary(Healthledger_V1_ObjectReadSelectionRequest.self) { try await $0.setObjectReadSelection($1) }.only(managing),
        // The history grows with the ledger: read in a task.
        .authorizationHistory: .unary(Healthledger_V1_AuthorizationsRequest.self, asOf: true) { try $0.authorizationHistory($1) }.only(managing),
        .sourcePriority: .immediate(Healthledger_V1_SourcePriorityRequest.self) { try $0.sourcePriority($1) }.only(managing),
        // One sample query per source of the type: in a task.
        .querySources: .unary(Healthledger_V1_SourceQueryRequest.self, asOf: true) { try $0.querySources($1) }.recorded,
        .setSourcePriority: .unary(Healthledger_V1_SetSourcePriorityRequest.self) { try await $0.setSourcePriority($1) }.only(managing),
        // Statistics read every sample of their range: in a task.
        .statistics: .unary(Healthledger_V1_StatisticsRequest.self, asOf: true) { try $0.statistics($1) }.recorded,
        .statisticsCollection: .stream(Healthledger_V1_StatisticsCollectionRequest.self, types: { [try QuantityType($0.type).objectType] }) {
            try await $0.statisticsCollection($1, onScope: $2.scanned, $2.emit)
        }.recorded,
        .watchStatisticsCollection: .stream(
            Healthledger_V1_StatisticsCollectionRequest.self, .longRunning, types: { [try QuantityType($0.type).objectType] }
        ) { try await $0.watchStatisticsCollection($1, onScope: $2.scanned, $2.emit) }.recorded,
        .addAttachment: .unary(Healthledger_V1_AddAttachmentRequest.self) { try await $0.addAttachment($1) },
        .attachments: .immediate(Healthledger_V1_AttachmentsRequest.self) { try $0.attachments($1) }.recorded,
        // Up to an attachment's size limit of bytes: in a task.
        .attachmentData: .unary(Healthledger_V1_AttachmentRequest.self, asOf: true) { try $0.attachmentData($1) }.recorded,
        .removeAttachment: .unary(Healthledger_V1_AttachmentRequest.self) { try await $0.removeAttachment($1) },
        .characteristics: .immediate(Healthledger_V1_CharacteristicsRequest.self) { try $0.characteristics($1) }.recorded,
        .setCharacteristic: .unary(Healthledger_V1_Characteristic.self) { try await $0.setCharacteristic($1) }
            .only(.owner(refusingApps: RoleRefusal.settingCharacteristics)),
        .associateSamples: .unary(Healthledger_V1_AssociateSamplesRequest.self) { try await $0.associateSamples($1) },
        .workoutStatistics: .unary(Healthledger_V1_WorkoutStatisticsRequest.self, asOf: true) { try $0.workoutStatistics($1) }.recorded,
        .beginRoute: .immediate(Healthledger_V1_BeginRouteRequest.self, asOf: false, writes: true) { try $0.beginRoute($1) },
        .addRouteLocations: .immediate(Healthledger_V1_AddRouteLocationsRequest.self, asOf: false, writes: true) { try $0.addRouteLocations($1) },
        .finishRoute: .unary(Healthledger_V1_FinishRouteRequest.self) { try await $0.finishRoute($1) },
        .discardRoute: .immediate(Healthledger_V1_DiscardRouteRequest.self, asOf: false, writes: true) { try $0.discardRoute($1) },
        .routeLocations: .stream(Healthledger_V1_RouteQueryRequest.self, types: { _ in [.workoutRoute] }) {
            try await $0.routeLocations($1, onScope: $2.scanned, $2.emit)
        }.recorded,
        .accessRecords: .immediate(Healthledger_V1_AccessRecordsRequest.self, asOf: false) { try $0.accessRecords($1) }
            .only(.owner(refusingApps: RoleRefusal.readingAccessRecords)),
        .ledgerCredentials: .immediate(Healthledger_V1_Empty.self, asOf: false) { try $0.ledgerCredentials($1) }
            .only(.owner(refusingApps: RoleRefusal.managingCredentials)),
        .revokeLedgerCredential: .unary(Healthledger_V1_LedgerCredentialRequest.self) { try await $0.revokeLedgerCredential($1) }
            .only(.owner(refusingApps: RoleRefusal.managingCredentials)),
        // The audit trail relies on no grant (it is the owner's); its credential is watched.
        .audit: .stream(Healthledger_V1_AuditRequest.self, types: { _ in [] }) { try await $0.audit($1, follow: false, $2.emit) }.only(auditing),
        .watchAudit: .stream(Healthledger_V1_AuditRequest.self, .longRunning, types: { _ in [] }) { try await $0.audit($1, follow: true, $2.emit) }
            .only(auditing),
        .treeHead: .immediate(Healthledger_V1_Empty.self, asOf: false) { try $0.treeHead($1) }.only(proving),
        .inclusionProof: .immediate(Healthledger_V1_InclusionProofRequest.self, asOf: false) { try $0.inclusionProof($1) }.only(proving),
        .consistencyProof: .immediate(Healthledger_V1_ConsistencyProofRequest.self, asOf: false) { try $0.consistencyProof($1) }.only(proving),
        .createLedger: .onStore(Healthledger_V1_CreateLedgerRequest.self, writing: \.ledgerID) { try await $0.createLedger($1) },
        .listLedgers: .onStore(Healthledger_V1_Empty.self) { try $0.listLedgers($1) },
        .issueCredential: .onStore(Healthledger_V1_IssueCredentialRequest.self, writing: \.ledgerID) { try await $0.issueCredential($1) },
        .revokeCredential: .onStore(Healthledger_V1_LedgerCredentialRequest.self, writing: \.ledgerID) { try await $0.revokeCredential($1) },
        .listCredentials: .onStore(Healthledger_V1_LedgerCredentialRequest.self, naming: \.ledgerID) { try $0.listCredentials($1) },
        .rotateCredential: .onStore(Healthledger_V1_RotateCredentialRequest.self, writing: \.ledgerID) { try await $0.rotateCredential($1) },
        .eraseLedger: .onStore(Healthledger_V1_EraseLedgerRequest.self, writing: \.ledgerID) { try await $0.eraseLedger($1) },
        .fetchLog: .onStore(Healthledger_V1_FetchLogRequest.self, naming: \.ledgerID) { try await $0.fetchLog($1) },
        .fetchSnapshot: .onStore(Healthledger_V1_FetchSnapshotRequest.self, naming: \.ledgerID) { try await $0.fetchSnapshot($1) },
        .clusterStatus: .onStore(Healthledger_V1_Empty.self) { try $0.clusterStatus($1) },
        .watchLedgers: .onStore(Healthledger_V1_WatchLedgersRequest.self) { try await $0.watchLedgers($1) },
        .forwardAccessRecords: .onStore(Healthledger_V1_ForwardAccessRecordsRequest.self, naming: \.ledgerID) { try $0.forwardAccessRecords($1) },
        .fetchAccessRecords: .onStore(Healthledger_V1_FetchAccessRecordsRequest.self, naming: \.ledgerID) { try $0.fetchAccessRecords($1) },
    ]

    private static let managing = Caller.owner(refusingApps: RoleRefusal.managingAuthorization)
    private static let auditing = Caller.owner(refusingApps: RoleRefusal.readingAudit)
    private static let proving = Caller.owner(refusingApps: RoleRefusal.readingTreeHeads)

    /// A type and, for a correlation type, its member types: a correlation's stream reads both.
    private static func withMembers(_ type: ObjectType) -> [ObjectType] {
        [type] + (TypeCatalogue.correlationTypes[type.identifier] ?? []).sorted().compactMap { try? ObjectType($0) }
    }

    private static func changeTypes(_ request: Healthledger_V1_ChangeQueryRequest) throws -> [ObjectType] {
        try LedgerCall.descriptors(type: request.type, predicate: request.hasPredicate ? request.predicate : nil, request.descriptors)
            .flatMap { withMembers($0.type) }
    }
}
