import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import Logging
import Metrics
import Synchronization

/// Runs one call: picks the method, authenticates the caller, enforces the deadline, and
/// answers with messages and exactly one status.
struct CallDispatcher: Sendable {
    let store: LedgerStore
    let configuration: ServerConfiguration
    let logger: Logger
    let metrics: CallMetrics

    /// Sends a frame of this call to the client.
    typealias Send = @Sendable (Healthledger_V1_Frame) -> Void

    /// The deadline of a call that asks for `milliseconds` (0: the default).
    func timeout(milliseconds: UInt32) -> Duration {
        milliseconds == 0 ? configuration.defaultTimeout : min(.milliseconds(Int64(milliseconds)), configuration.maximumTimeout)
    }

    /// Runs the call to its end and sends its status. A call cancelled because its
    /// deadline passed (``CallDeadline/expire()``) ends with `deadlineExceeded`.
    ///
    /// - Parameter method: the request's method, parsed once by the connection (nil: unknown).
    func run(
        id: UInt64, method: RPCMethod?, request: Healthledger_V1_CallRequest, window: StreamWindow?, deadline: CallDeadline, send: @escaping Send
    ) async {
        let clock = ContinuousClock()
        let started = clock.now
        var failure: RPCError?
        var underlying: (any Error)?
        if let method {
            do {
                try await handle(method, id: id, request: request, window: window, send: send)
            } catch {
                underlying = error
                let status = Self.status(for: error)
                let cancelled = status.code == .cancelled || Task.isCancelled
                if deadline.expired && cancelled {
                    failure = RPCError(.deadlineExceeded, "the call's deadline of \(timeout(milliseconds: request.timeoutMs)) passed")
                } else if deadline.shuttingDown && cancelled {
                    failure = RPCError(.unavailable, "the server is shutting down; call again (from the last anchor) once it is back")
                } else {
                    failure = status
                }
            }
        } else {
            failure = RPCError(.unimplemented, "unknown method '\(request.method.prefix(200))'")
        }
        send(.status(id: id, failure))
        metrics.record(method: method, code: failure?.code ?? .ok, duration: clock.now - started)
        if let failure, failure.code == .internalError {
            logger.error(
                "call failed",
                metadata: [
                    "rpc.call": "\(id)", "rpc.method": "\(request.method.prefix(200))", "rpc.status": "\(failure)",
                    "error": "\(underlying.map { String(describing: $0) } ?? "")",
                ])
        }
    }

    /// The status an error becomes on the wire.
    static func status(for error: any Error) -> RPCError {
        switch error {
        case let error as RPCError: return error
        case let error as HealthError: return RPCError(error)
        case let failure as LedgerFailure:
            switch failure.kind {
            case .notFound: return RPCError(.notFound, failure.message)
            case .alreadyExists: return RPCError(.alreadyExists, failure.message)
            case .invalidArgument: return RPCError(.invalidArgument, failure.message, healthErrorCode: .invalidArgument)
            case .corrupted: return RPCError(.dataLoss, failure.message, healthErrorCode: .databaseInaccessible)
            case .storage: return RPCError(.unavailable, failure.message, healthErrorCode: .databaseInaccessible)
            }
        case is CancellationError: return RPCError(.cancelled, "the call was cancelled")
        default: return RPCError(.internalError, "internal error")
        }
    }

    private func handle(
        _ method: RPCMethod, id: UInt64, request: Healthledger_V1_CallRequest, window: StreamWindow?, send: @escaping Send
    ) async throws {
        if method.isOperatorMethod {
            guard store.authenticateOperator(request.credential) else {
                throw RPCError(.unauthenticated, "the credential is invalid, unknown or revoked")
            }
            guard try request.pointInTime() == nil else {
                throw RPCError(.invalidArgument, "\(method.rawValue) cannot be asked as of a past point", healthErrorCode: .invalidArgument)
            }
            return send(.message(id: id, try await OperatorCall(store: store, payload: Array(request.payload)).run(method)))
        }
        guard let (ledger, principal) = store.authenticate(request.credential) else {
            throw RPCError(.unauthenticated, "the credential is invalid, unknown or revoked")
        }
        guard let point = try request.pointInTime() else {
            return try await dispatch(method, id: id, call: LedgerCall(ledger: ledger, principal: principal, payload: Array(request.payload)),
                live: ledger, request: request, window: window, send: send)
        }
        // A point-in-time read: the same method on a read-only view of the ledger, where an
        // app sees only what it could read then and may read now.
        guard method.answersAsOf else {
            throw RPCError(
                .invalidArgument, "\(method.rawValue) cannot be asked as of a past point: only reads that end by themselves can",
                healthErrorCode: .invalidArgument)
        }
        // Building a view replays the log up to the point: seconds on a large ledger, which
        // must not hold one of the few threads every call shares.
        let view = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try store.view(of: ledger, at: point) })
            }
        }
        let call = LedgerCall(ledger: view, principal: principal, payload: Array(request.payload))
        guard case .app = principal else {
            return try await dispatch(method, id: id, call: call, live: ledger, request: request, window: window, send: send)
        }
        try await ReadScope.$present.withValue({ type in try ledger.readScope(of: type, for: principal) }) {
            try await dispatch(method, id: id, call: call, live: ledger, request: request, window: window, send: send)
        }
    }

    /// Runs `method` on `call`'s ledger (`live` itself, or a view of it).
    private func dispatch(
        _ method: RPCMethod, id: UInt64, call: LedgerCall, live: Ledger, request: Healthledger_V1_CallRequest, window: StreamWindow?,
        send: @escaping Send
    ) async throws {
        switch method {
        case .ping: send(.message(id: id, try await call.ping()))
        case .save: send(.message(id: id, try await call.save()))
        case .delete: send(.message(id: id, try await call.delete()))
        case .deleteObjects: send(.message(id: id, try await call.deleteObjects()))
        case .fetch: send(.message(id: id, try call.fetch()))
        case .querySamples, .queryChanges, .watchChanges, .observe, .statisticsCollection, .watchStatisticsCollection, .routeLocations,
            .queryCorrelations, .audit, .watchAudit:
            metrics.streamOpened()
            defer { metrics.streamClosed() }
            let access = StreamAccess(call, live: live, types: try call.streamedTypes(of: method), credential: request.credential)
            let emit: @Sendable ([UInt8]) async throws -> Void = { message in
                try await window?.acquire()
                send(.message(id: id, message))
            }
            try await access.run {
                switch method {
                case .queryChanges: try await call.queryChanges(onScope: access.scanned, emit)
                case .watchChanges: try await call.watchChanges(onScope: access.scanned, emit)
                case .observe: try await call.observe(onScope: access.scanned, emit)
                case .statisticsCollection: try await call.statisticsCollection(onScope: access.scanned, emit)
                case .watchStatisticsCollection: try await call.watchStatisticsCollection(onScope: access.scanned, emit)
                case .routeLocations: try await call.routeLocations(onScope: access.scanned, emit)
                case .queryCorrelations: try await call.queryCorrelations(onScope: access.scanned, emit)
                case .audit: try await call.audit(follow: false, emit)
                case .watchAudit: try await call.audit(follow: true, emit)
                default: try await call.querySamples(onScope: access.scanned, emit)
                }
            }
        case .requestAuthorization: send(.message(id: id, try await call.requestAuthorization()))
        case .getRequestStatus: send(.message(id: id, try call.getRequestStatus()))
        case .authorizationStatus: send(.message(id: id, try call.authorizationStatus()))
        case .requestObjectReadAuthorization: send(.message(id: id, try await call.requestObjectReadAuthorization()))
        case .authorizations: send(.message(id: id, try call.authorizations(pendingOnly: false)))
        case .pendingAuthorizations: send(.message(id: id, try call.authorizations(pendingOnly: true)))
        case .decideAuthorization: send(.message(id: id, try await call.decideAuthorization()))
        case .setObjectReadSelection: send(.message(id: id, try await call.setObjectReadSelection()))
        case .authorizationHistory: send(.message(id: id, try call.authorizationHistory()))
        case .sourcePriority: send(.message(id: id, try call.sourcePriority()))
        case .setSourcePriority: send(.message(id: id, try await call.setSourcePriority()))
        case .statistics: send(.message(id: id, try call.statistics()))
        case .addAttachment: send(.message(id: id, try await call.addAttachment()))
        case .attachments: send(.message(id: id, try call.attachments()))
        case .attachmentData: send(.message(id: id, try call.attachmentData()))
        case .removeAttachment: send(.message(id: id, try await call.removeAttachment()))
        case .characteristics: send(.message(id: id, try call.characteristics()))
        case .setCharacteristic: send(.message(id: id, try await call.setCharacteristic()))
        case .associateSamples: send(.message(id: id, try await call.associateSamples()))
        case .workoutStatistics: send(.message(id: id, try call.workoutStatistics()))
        case .beginRoute: send(.message(id: id, try call.beginRoute()))
        case .addRouteLocations: send(.message(id: id, try call.addRouteLocations()))
        case .finishRoute: send(.message(id: id, try await call.finishRoute()))
        case .discardRoute: send(.message(id: id, try call.discardRoute()))
        case .treeHead: send(.message(id: id, try call.treeHead()))
        case .inclusionProof: send(.message(id: id, try call.inclusionProof()))
        case .consistencyProof: send(.message(id: id, try call.consistencyProof()))
        case .createLedger, .listLedgers, .issueCredential, .revokeCredential, .listCredentials:
            // handle(…) sends these to OperatorCall before any ledger is chosen.
            throw RPCError(.internalError, "\(method.rawValue) reached a ledger's dispatch")
        }
    }
}

/// Why a call's task was cancelled by the server: its deadline passed, or the server is
/// shutting down (long-running calls). Set just before the task is cancelled.
final class CallDeadline: Sendable {
    private let state = Mutex((expired: false, shuttingDown: false))

    var expired: Bool { state.withLock { $0.expired } }
    var shuttingDown: Bool { state.withLock { $0.shuttingDown } }

    func expire() { state.withLock { $0.expired = true } }
    func shutDown() { state.withLock { $0.shuttingDown = true } }
}

/// Metric handles for calls, made once per method and status code (not per call).
final class CallMetrics: Sendable {
    private let counters = Mutex<[String: Counter]>([:])
    private let timers: [String: Timer]
    private let openStreams = Mutex(0)
    private let streamGauge = Gauge(label: "healthledger_open_streams")

    func streamOpened() { streamGauge.record(openStreams.withLock { $0 += 1; return $0 }) }
    func streamClosed() { streamGauge.record(openStreams.withLock { $0 -= 1; return $0 }) }

    init() {
        var timers: [String: Timer] = [:]
        for method in RPCMethod.allCases + [nil] {
            let name = method?.rawValue ?? "unknown"
            timers[name] = Timer(label: "healthledger_rpc_call_duration_seconds", dimensions: [("method", name)])
        }
        self.timers = timers
    }

    func record(method: RPCMethod?, code: RPCStatusCode, duration: Duration) {
        let name = method?.rawValue ?? "unknown"
        let key = "\(name) \(code.rawValue)"
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: "healthledger_rpc_calls_total", dimensions: [("method", name), ("code", "\(code)")])
            counters[key] = counter
            return counter
        }
        counter.increment()
        timers[name]?.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
}
