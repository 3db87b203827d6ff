import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import Logging
import Metrics
import Synchronization

/// Runs one call: picks the method's registration, authenticates the caller, decodes the
/// request once, and answers with messages and exactly one status.
package struct CallDispatcher: Sendable {
    let store: LedgerStore
    let configuration: ServerConfiguration
    let logger: Logger
    let metrics: CallMetrics

    package init(store: LedgerStore, configuration: ServerConfiguration, logger: Logger, metrics: CallMetrics) {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
    }

    /// Sends a streamed message of this call to the client, once the client's flow control
    /// lets it (our protocol's window, HTTP/2's for gRPC): a slow reader holds the stream up.
    package typealias Send = @Sendable (_ message: [UInt8]) async throws -> Void
    /// Ends the call: its response (unary calls) and its status, written together.
    package typealias Finish = @Sendable (_ response: [UInt8]?, _ failure: RPCError?) -> Void

    /// The deadline of a call that asks for `milliseconds` (0: the default).
    package func timeout(milliseconds: UInt32) -> Duration {
        milliseconds == 0 ? configuration.defaultTimeout : min(.milliseconds(Int64(milliseconds)), configuration.maximumTimeout)
    }

    /// A call authenticated, decoded and admitted: what ``prepare(_:_:caller:)`` makes of a
    /// request, whichever transport brought it and whichever way it then runs.
    private enum PreparedCall {
        /// A method of a ledger as it stands now.
        case present(BoundCall, LedgerCall)
        /// A read of a ledger as it stood at `point` (its view is built when the call runs).
        case pointInTime(BoundCall, LedgerCall, PointInTime)
        /// An operator's method, on the store.
        case store(@Sendable (OperatorCall) async throws -> [UInt8])
    }

    /// The one way into a call: authenticates its credential (an operator's for an operator
    /// method), decodes its request, binds it to its handler and admits the caller. Every
    /// execution path and both transports go through it.
    ///
    /// - Throws: ``RPCError`` `unauthenticated` for a credential that is invalid, unknown,
    ///   expired or revoked (saying which to the holder of its secret), `invalidArgument` for a
    ///   request that does not decode or a point-in-time read of a method that takes none, and
    ///   the method's refusal of a caller who may not call it.
    private func prepare(_ method: RPCMethod, _ request: Healthledger_V1_CallRequest, caller: Authenticated) throws -> PreparedCall {
        guard let registration = MethodTable.registrations[method] else {
            throw RPCError(.unimplemented, "\(method.rawValue) is not implemented by this server")
        }
        if registration.writes, let primary = configuration.primaryAddress {
            throw RPCError(
                .failedPrecondition, "this server is a follower of \(primary) and takes no writes: send \(method.rawValue) to the primary",
                primary: primary)
        }
        if registration.isOperatorMethod {
            do { try store.authenticateOperator(request.credential) } catch let refusal as CredentialRefusal {
                throw RPCError(.unauthenticated, refusal.description)
            }
            caller.set(ledger: nil, principal: .operator)
            guard try request.pointInTime() == nil else {
                throw RPCError(.invalidArgument, "\(method.rawValue) cannot be asked as of a past point", healthErrorCode: .invalidArgument)
            }
            guard case .onStore(let ledger, let run) = try registration.bind(Array(request.payload)) else {
                throw RPCError(.internalError, "\(method.rawValue) is not registered as an operator method")
            }
            if let ledger, !ledger.isEmpty { caller.set(ledger: String(ledger.prefix(200)), principal: .operator) }
            if let ledger, !ledger.isEmpty, let refusal = configuration.cluster?.refusal(of: method, ledger: ledger, writes: registration.writes) {
                throw refusal
            }
            return .store(run)
        }
        // A write to a member that does not lead the ledger's group, and a read of one that
        // keeps no copy of it, go to its primary before the credential is checked: a
        // credential just issued there may not have reached this member yet.
        if let cluster = configuration.cluster, let named = CredentialString(request.credential),
            let refusal = cluster.refusal(of: method, ledger: named.ledgerID, writes: registration.writes)
        {
            throw refusal
        }
        let authentication: (ledger: Ledger, principal: Principal, credentialID: String, end: Date?)
        do { authentication = try store.authentication(of: request.credential) } catch let refusal as CredentialRefusal {
            // A cluster member that keeps the ledger's group but has no copy of it yet (just
            // made one of its keepers): its primary has.
            if refusal == .unknown, let cluster = configuration.cluster, let named = CredentialString(request.credential), !store.holds(named.ledgerID),
                let redirect = cluster.copyMissingRefusal(method.rawValue, ledger: named.ledgerID)
            {
                throw redirect
            }
            throw RPCError(.unauthenticated, refusal.description)
        }
        caller.set(ledger: authentication.ledger.id, principal: authentication.principal)
        try caller.admit("\(authentication.ledger.id)/\(authentication.credentialID)", writes: registration.writes, configuration: configuration)
        let point = try request.pointInTime()
        // A point-in-time read: the same method on a read-only view of the ledger, where an
        // app sees only what it could read then and may read now.
        if point != nil, !registration.answersAsOf {
            throw RPCError(
                .invalidArgument, "\(method.rawValue) cannot be asked as of a past point: only reads that end by themselves can",
                healthErrorCode: .invalidArgument)
        }
        let bound = try registration.bind(Array(request.payload))
        try registration.caller.admit(authentication.principal)
        let call = LedgerCall(
            ledger: authentication.ledger, principal: authentication.principal, credentialID: authentication.credentialID,
            credentialEnd: authentication.end, treeHeads: treeHeads)
        return point.map { .pointInTime(bound, call, $0) } ?? .present(bound, call)
    }

    /// How far this server's signed tree heads reach (``TreeHeadReach``).
    private var treeHeads: TreeHeadReach {
        if let cluster = configuration.cluster { return .cluster(cluster) }
        return configuration.primaryAddress == nil ? .connectedFollowers(window: configuration.followerWindow) : .everything
    }

    /// Answers at once, on the caller's thread (the connection's event loop), a call of an
    /// ``MethodKind/immediate`` method asked of the present; returns false, having done
    /// nothing, for any other call.
    func answerAtOnce(id: UInt64, method: RPCMethod, request: Healthledger_V1_CallRequest, finish: Finish) -> Bool {
        guard MethodTable.registrations[method]?.kind == .immediate, request.asOfSequence == 0, !request.hasAsOfTimeUs else { return false }
        let started = ContinuousClock.now
        let caller = Authenticated()
        var response: [UInt8]?
        var failure: RPCError?
        do {
            guard case .present(.immediate(let respond), let call) = try prepare(method, request, caller: caller) else {
                throw RPCError(.internalError, "\(method.rawValue) is not registered as immediate")
            }
            response = try respond(call)
            recordAccess(method, call: call, live: call.ledger, completed: true)
        } catch {
            failure = RPCError(mapping: error)
        }
        conclude(id: id, method: method, request: request, caller: caller, started: started, response: response, failure: failure, finish: finish)
        return true
    }

    /// The largest request payload ``answerOnCommit(id:method:request:committingOn:finish:)`` prepares on
    /// the event loop (a few hundred samples); a larger one is prepared in a task, so that
    /// it does not hold up the loop's other connections.
    package static let largestPayloadPreparedOnLoop = 64 << 10

    /// Whether ``answerOnCommit(id:method:request:committingOn:finish:)`` answers this call: a small
    /// request of a method registered for it, asked of the present.
    func answersOnCommit(_ method: RPCMethod, _ request: Healthledger_V1_CallRequest) -> Bool {
        MethodTable.registrations[method]?.answersOnCommit == true && request.asOfSequence == 0 && !request.hasAsOfTimeUs
            && request.payload.count <= Self.largestPayloadPreparedOnLoop
    }

    /// Answers a call that ``answersOnCommit(_:_:)`` accepts without a task: prepares it on
    /// the caller's thread (the event loop), submits it to the ledger's group commit, and
    /// finishes it from the committing thread once it is durable (or at once when it fails
    /// before). Two thread hand-overs fewer than a task's, which is most of a small save's
    /// time beyond its disk writes; with `committingOn` (the event loop's next turn), none
    /// when the ledger's committer is idle: the commit runs there, with the other small saves
    /// the loop read meanwhile.
    func answerOnCommit(
        id: UInt64, method: RPCMethod, request: Healthledger_V1_CallRequest, committingOn executor: CallerExecutor? = nil,
        finish: @escaping Finish
    ) {
        let started = ContinuousClock.now
        let caller = Authenticated()
        let answer: @Sendable (Result<[UInt8], any Error>) -> Void = { result in
            let (response, failure) = Self.outcome(result)
            conclude(id: id, method: method, request: request, caller: caller, started: started, response: response, failure: failure, finish: finish)
        }
        do {
            guard case .present(.onCommit(let start), let call) = try prepare(method, request, caller: caller) else {
                throw RPCError(.internalError, "\(method.rawValue) is not registered to answer on commit")
            }
            start(call, executor) { result in
                guard answersAfterFollowers(result) else { return answer(result) }
                afterFollowers(of: call.ledger) { refusal in answer(refusal.map { .failure($0) } ?? result) }
            }
        } catch {
            answer(.failure(error))
        }
    }

    /// Runs the call to its end and finishes it. A read stopped by the server's cancel of its
    /// task ends with why: `deadlineExceeded` when its deadline passed (``CallDeadline/expire()``),
    /// `unavailable` when the server shuts down, `cancelled` when the client cancelled it or
    /// closed its side of the connection (``CallDeadline/clientClosed()``, long-running calls),
    /// even if its work had come to an end by then (a read in a task looks at cancellation
    /// only between steps). A write keeps its own outcome: once handed to the ledger it commits.
    ///
    /// - Parameter method: the request's method, parsed once by the transport (nil: unknown).
    package func run(
        id: UInt64, method: RPCMethod?, request: Healthledger_V1_CallRequest, deadline: CallDeadline, send: @escaping Send, finish: Finish
    ) async {
        let started = ContinuousClock.now
        var response: [UInt8]?
        var failure: RPCError?
        let caller = Authenticated()
        if let method {
            do {
                response = try await run(prepare(method, request, caller: caller), method: method, send: send)
            } catch {
                failure = RPCError(mapping: error)
            }
            if !MethodTable.writes(method), Task.isCancelled || failure?.code == .cancelled {
                failure = stopped(by: deadline, timeout: request.timeoutMs)
            }
        } else {
            failure = RPCError(.unimplemented, "unknown method '\(request.method.prefix(200))'")
        }
        conclude(id: id, method: method, request: request, caller: caller, started: started, response: response, failure: failure, finish: finish)
    }

    /// What every call does at its end, whichever way it ran: logs a failure the operator
    /// must hear of, finishes the call, counts it, and writes its log line.
    private func conclude(
        id: UInt64, method: RPCMethod?, request: Healthledger_V1_CallRequest, caller: Authenticated, started: ContinuousClock.Instant,
        response: [UInt8]?, failure: RPCError?, finish: Finish
    ) {
        if let failure { logged(failure, id: id, request: request) }
        caller.end()
        finish(failure == nil ? response : nil, failure)
        let duration = ContinuousClock.now - started
        metrics.record(method: method, code: failure?.code ?? .ok, duration: duration)
        logCall(method, request: request, caller, failure: failure, duration: duration)
    }

    /// A follower's calls (§7.18 of docs/PROTOCOL.md).
    private static let replicationTraffic: Set<RPCMethod> = [.watchLedgers, .fetchLog, .fetchSnapshot, .forwardAccessRecords, .fetchAccessRecords]

    private static func outcome(_ result: Result<[UInt8], any Error>) -> ([UInt8]?, RPCError?) {
        switch result {
        case .success(let response): (response, nil)
        case .failure(let error): (nil, RPCError(mapping: error))
        }
    }

    /// The one log line of every call, at `info`: what an operator's log shows of traffic
    /// (never a value, never the credential's secret). Followers' replication calls that
    /// succeed, a steady stream of long polls, are logged at `debug`.
    private func logCall(
        _ method: RPCMethod?, request: Healthledger_V1_CallRequest, _ caller: Authenticated, failure: RPCError?, duration: Duration
    ) {
        let level: Logger.Level = failure == nil && method.map { Self.replicationTraffic.contains($0) } == true ? .debug : .info
        guard logger.logLevel <= level else { return }
        let microseconds = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        let (ledger, principal) = caller.identity
        let line = CallLine(
            level: level, label: logger.label, method: method?.rawValue ?? String(request.method.prefix(200)), ledger: ledger, principal: principal,
            status: (failure?.code ?? .ok).description, microseconds: microseconds)
        if let write = configuration.callLineWriter { return write(line) }
        logger.log(level: level, "\(CallLine.message)", metadata: line.metadata)
    }

    /// Notes the access record of a call that returned health data: when it completed, or
    /// when it had returned objects before it failed or was cancelled. A long-running call
    /// notes one each time it delivers objects, then whatever it returned last.
    private func recordAccess(_ method: RPCMethod, call: LedgerCall, live: Ledger, completed: Bool) {
        guard MethodTable.registrations[method]?.readsHealthData == true else { return }
        let (types, objects) = call.reads.taken(reset: true)
        guard completed || objects > 0 else { return }
        live.recordAccess(
            AccessRecord(
                time: Date(), credentialID: call.credentialID, principal: call.principal, method: method.rawValue, types: types,
                objects: objects, asOfSequence: call.ledger.viewOf))
    }

    /// The status of a read whose task was cancelled: by its deadline, by the server's
    /// shutdown, by the client's half-close, or by the client's `cancel`.
    private func stopped(by deadline: CallDeadline, timeout milliseconds: UInt32) -> RPCError {
        switch deadline.reason {
        case .expired?: RPCError(.deadlineExceeded, "the call's deadline of \(timeout(milliseconds: milliseconds)) passed")
        case .shuttingDown?: RPCError(.unavailable, "the server is shutting down; call again (from the last anchor) once it is back")
        case .clientClosed?: RPCError(.cancelled, "the client closed its side of the connection")
        case nil: RPCError(.cancelled, "the call was cancelled")
        }
    }

    /// Logs a failure the operator must hear of (an internal error, damaged data, failed
    /// storage) with its cause, which the client is never sent; before the status leaves, so
    /// the log has it by the time the client does.
    private func logged(_ failure: RPCError, id: UInt64, request: Healthledger_V1_CallRequest) {
        guard failure.code == .internalError || failure.code == .dataLoss || (failure.code == .unavailable && failure.cause != nil) else { return }
        logger.error(
            "call failed",
            metadata: [
                "rpc.call": "\(id)", "rpc.method": "\(request.method.prefix(200))", "rpc.status": "\(failure)",
                "error": "\(failure.cause.map { String(describing: $0) } ?? "")",
            ])
    }

    /// Runs a prepared call; returns a unary method's response (nil for a stream, whose
    /// messages went out through `send`).
    private func run(_ prepared: PreparedCall, method: RPCMethod, send: @escaping Send) async throws -> [UInt8]? {
        switch prepared {
        case .store(let run):
            return try await run(
                OperatorCall(
                    store: store, cluster: configuration.cluster, replicated: { try await afterFollowers(of: $0) },
                    erasureReplicated: { try await afterFollowers(ofErasureOf: $0, at: $1) }))
        case .present(let bound, let call):
            return try await run(bound, method: method, call: call, live: call.ledger, send: send)
        case .pointInTime(let bound, let present, let point):
            let ledger = present.ledger
            // Building a view replays the log up to the point: seconds on a large ledger, which
            // must not hold one of the few threads every call shares.
            let view = try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global(qos: .userInitiated).async {
                    continuation.resume(with: Result { try store.view(of: ledger, at: point) })
                }
            }
            let call = LedgerCall(ledger: view, principal: present.principal, credentialID: present.credentialID, credentialEnd: present.credentialEnd)
            guard case .app = call.principal else {
                return try await run(bound, method: method, call: call, live: ledger, send: send)
            }
            return try await ReadScope.$present.withValue({ type in try ledger.readScope(of: type, for: call.principal) }) {
                try await run(bound, method: method, call: call, live: ledger, send: send)
            }
        }
    }

    /// Runs a bound request on `call`'s ledger (`live` itself, or a view of it), and notes
    /// its access record when it returns health data.
    private func run(_ bound: BoundCall, method: RPCMethod, call: LedgerCall, live: Ledger, send: @escaping Send) async throws -> [UInt8]? {
        var completed = false
        defer { recordAccess(method, call: call, live: live, completed: completed) }
        switch bound {
        case .immediate(let respond):
            defer { completed = true }
            return try respond(call)
        case .unary(let respond):
            let response = try await respond(call)
            completed = true
            if MethodTable.writes(method) { try await afterFollowers(of: call.ledger) }
            return response
        case .onCommit(let start):
            let result = await withCheckedContinuation { continuation in start(call, nil) { continuation.resume(returning: $0) } }
            if answersAfterFollowers(result) { try await afterFollowers(of: call.ledger) }
            return try result.get()
        case .stream(let types, let body):
            metrics.streamOpened()
            defer { metrics.streamClosed() }
            call.reads.add(types: types)
            let access = StreamAccess(call, live: live, types: types)
            let longRunning = method.isLongRunning
            let stream = StreamContext(scanned: access.scanned(with:)) { message in
                // A long-running stream is on the record as it delivers (noted first, so the
                // record is there by the time the client has the message).
                if longRunning { recordAccess(method, call: call, live: live, completed: false) }
                try await send(message)
            }
            try await access.run { try await body(call, stream) }
            completed = !longRunning
            return nil
        case .onStore:
            throw RPCError(.internalError, "an operator method reached a ledger's dispatch")
        }
    }
}

extension CallDispatcher {
    /// Calls `then` once the write just answered by `ledger`'s commit may be answered: at
    /// once when acknowledgement is asynchronous or no follower is connected; else once a
    /// follower has it durable, or the follower window passed without one (counted).
    ///
    /// A cluster's leader answers once its synchronous standby has the write durable, and
    /// refuses it (`then` gets the refusal) when the standby did not acknowledge it within
    /// the follower window or the leadership lapsed meanwhile: the write may or may not
    /// survive a failover, so it is not answered as done.
    func afterFollowers(of ledger: Ledger, _ then: @escaping @Sendable (RPCError?) -> Void) {
        guard ledger.viewOf == nil else { return then(nil) }
        if let cluster = configuration.cluster {
            let group = Placement.group(of: ledger.id)
            guard case .leader(let epoch, _) = cluster.standing(in: group) else { return then(Self.leadershipLost) }
            let awaited = cluster.awaitedFollowers(in: group)
            let sequence = ledger.committedSequence
            let window = configuration.followerWindow
            guard !awaited.isEmpty else { return then(cluster.leadingEpoch(of: group) == epoch ? nil : Self.leadershipLost) }
            ledger.followers.whenAcknowledged(sequence, by: awaited, timeout: window) { outcome in
                guard outcome == .acknowledged else {
                    metrics.writeNotReplicated()
                    cluster.missed(by: awaited, in: group)
                    let names = awaited.sorted().joined(separator: "', '")
                    return then(
                        RPCError(
                            .unavailable,
                            "the write is durable on the leader, but its synchronous standby '\(names)' did not acknowledge it within \(window): it may not survive a failover; a save may be sent again (the same UUIDs are saved once), other writes once checked"
                        ))
                }
                then(cluster.leadingEpoch(of: group) == epoch ? nil : Self.leadershipLost)
            }
            return
        }
        guard configuration.replicationAcknowledgement == .semiSynchronous, configuration.primaryAddress == nil else {
            return then(nil)
        }
        let sequence = ledger.committedSequence
        let window = configuration.followerWindow
        let watched = !store.watchers.present(within: window).isEmpty
        ledger.followers.whenReplicated(sequence, window: window, watched: watched) { outcome in
            if outcome == .timedOut { metrics.writeNotReplicated() }
            then(nil)
        }
    }

    /// Whether a write's outcome waits for the followers: a success; and, on a cluster's
    /// leader, a refusal of UUIDs the ledger holds — most likely the same write sent again
    /// after its answer was lost, which is answered only once the first is as safe as an
    /// answered write.
    func answersAfterFollowers(_ result: Result<[UInt8], any Error>) -> Bool {
        switch result {
        case .success: return true
        case .failure(let error): return configuration.cluster != nil && RPCError(mapping: error).code == .alreadyExists
        }
    }

    private static let leadershipLost = RPCError(
        .unavailable,
        "this server stopped leading the ledger's placement group while the write was committed: it may not survive a failover; a save may be sent again (the same UUIDs are saved once), other writes once checked")

    func afterFollowers(of ledger: Ledger) async throws {
        if let refusal = await withCheckedContinuation({ continuation in afterFollowers(of: ledger) { continuation.resume(returning: $0) } }) {
            throw refusal
        }
    }

    /// Returns once the erasure of ledger `id`, noted at `cursor` of the store's changes, may
    /// be answered, as a write would be: a cluster's leader once its synchronous standby erased
    /// its copy too (else the erasure is refused as unreplicated, and the standby dropped, so
    /// that the next one is chosen after it erased its copy); with semi-synchronous
    /// acknowledgement, once a watching follower did, or the follower window passed (counted).
    /// A follower has erased its copy once it says it applied a watch answer at or past `cursor`.
    func afterFollowers(ofErasureOf id: String, at cursor: LedgerChanges.Cursor) async throws {
        let window = configuration.followerWindow
        let scope: WatchScope
        let awaited: Set<String>
        if let cluster = configuration.cluster {
            scope = .group(Placement.group(of: id))
            awaited = cluster.awaitedFollowers(in: Placement.group(of: id))
        } else {
            guard configuration.replicationAcknowledgement == .semiSynchronous, configuration.primaryAddress == nil else { return }
            (scope, awaited) = (.everyLedger, store.watchers.present(within: window))
        }
        guard !awaited.isEmpty else { return }
        func erased(by follower: String) -> Bool {
            store.watchers.applied(by: follower, in: scope).map { $0.life == cursor.life && $0.position >= cursor.position } ?? false
        }
        let deadline = ContinuousClock.now + window
        // Rare enough to look every few milliseconds rather than be told.
        while ContinuousClock.now < deadline {
            if configuration.cluster == nil ? awaited.contains(where: erased) : awaited.allSatisfy(erased) { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        metrics.writeNotReplicated()
        guard let cluster = configuration.cluster else { return }
        cluster.missed(by: awaited, in: Placement.group(of: id))
        throw RPCError(
            .unavailable,
            "ledger '\(id)' is erased on the leader, but its synchronous standby '\(awaited.sorted().joined(separator: "', '"))' did not say it erased its copy within \(window): the standby is replaced by one that has; asked again, the erasure answers notFound")
    }
}

/// Whose a call turned out to be, once authenticated: its ledger and principal (for its log line).
final class Authenticated: Sendable {
    private let state = Mutex<(ledger: String?, principal: Principal?)>((nil, nil))
    /// The credential its call was admitted under (``CredentialLimits``), until the call ends.
    private let admitted = Mutex<String?>(nil)

    var identity: (ledger: String?, principal: Principal?) { state.withLock { $0 } }

    func set(ledger: String?, principal: Principal) { state.withLock { $0 = (ledger, principal) } }

    /// Counts the call against its credential's limits, or refuses it.
    func admit(_ credential: String, writes: Bool, configuration: ServerConfiguration) throws {
        try CredentialLimits.shared.admit(credential, writes: writes, configuration: configuration)
        admitted.withLock { $0 = credential }
    }

    /// The call ended: it no longer counts.
    func end() {
        if let credential = admitted.withLock({ $0.take() }) { CredentialLimits.shared.end(credential) }
    }
}

/// Why the server cancelled a call's task, set just before it does: the call's deadline
/// passed, the server is shutting down, or the client closed its side of the connection
/// (long-running calls, which nothing else would end). The first reason set is reported.
package final class CallDeadline: Sendable {
    enum Reason: Sendable { case expired, shuttingDown, clientClosed }
    private let state = Mutex<Reason?>(nil)

    package init() {}

    var reason: Reason? { state.withLock { $0 } }

    package func expire() { stop(.expired) }
    package func shutDown() { stop(.shuttingDown) }
    package func clientClosed() { stop(.clientClosed) }

    private func stop(_ reason: Reason) { state.withLock { if $0 == nil { $0 = reason } } }
}

/// Metric handles for calls, made once per method and status code (not per call).
package final class CallMetrics: Sendable {
    /// A counter's dimensions: the method (nil: unknown) and the status code.
    private struct CounterKey: Hashable {
        var method: RPCMethod?
        var code: RPCStatusCode
    }

    private let counters = Mutex<[CounterKey: Counter]>([:])
    private let timers: [RPCMethod?: Timer]
    /// Streams open in the process, whichever transport and dispatcher runs them: the gauge
    /// is one per process.
    private static let openStreams = Mutex(0)
    private let streamGauge = Gauge(label: "healthledger_open_streams")
    /// Semi-synchronous writes answered without a follower's acknowledgement: the follower
    /// they waited for did not confirm within the follower window.
    private let unreplicatedWrites = Counter(label: "healthledger_replication_unacknowledged_writes_total")

    func writeNotReplicated() { unreplicatedWrites.increment() }

    func streamOpened() { streamGauge.record(Self.openStreams.withLock { $0 += 1; return $0 }) }
    func streamClosed() { streamGauge.record(Self.openStreams.withLock { $0 -= 1; return $0 }) }

    package init() {
        var timers: [RPCMethod?: Timer] = [:]
        for method in RPCMethod.allCases + [nil] {
            timers[method] = Timer(label: "healthledger_rpc_call_duration_seconds", dimensions: [("method", method?.rawValue ?? "unknown")])
        }
        self.timers = timers
    }

    func record(method: RPCMethod?, code: RPCStatusCode, duration: Duration) {
        let key = CounterKey(method: method, code: code)
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: "healthledger_rpc_calls_total", dimensions: [("method", method?.rawValue ?? "unknown"), ("code", "\(code)")])
            counters[key] = counter
            return counter
        }
        counter.increment()
        timers[method]?.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
}
