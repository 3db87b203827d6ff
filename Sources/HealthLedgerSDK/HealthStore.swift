@_exported import HealthLedgerRPC
@_exported import HealthModel
import Foundation
import Synchronization
import LedgerSchema
import NIOCore
import NIOPosix
import SwiftProtobuf

/// Where and how a ``HealthStore`` connects.
public struct HealthStoreConfiguration: Sendable {
    /// The server's host name or IP address; or `unix:PATH`, its Unix domain socket on this
    /// host (`healthledgerd --unix-socket PATH`; ``port`` is then unused, and TLS not offered).
    public var host: String
    public var port: Int
    /// The bearer credential (`hl1:<ledger>:<id>:<secret>`) issued by the operator.
    public var credential: String
    /// The deadline of each call.
    public var timeout: Duration
    public var maximumFrameSize: Int
    /// TLS settings; plain TCP when nil.
    public var tls: TLS?
    /// Connection attempts per call before giving up (with exponential backoff).
    public var connectAttempts: Int
    /// When set, a connection quiet for this long sends a keepalive ping, and is closed
    /// (to be reopened by the next call) if nothing comes back within ``keepaliveTimeout``.
    public var keepaliveInterval: Duration?
    /// How long a keepalive ping may go unanswered before the connection is closed; the
    /// keepalive interval when nil.
    public var keepaliveTimeout: Duration?
    /// The ledger's Ed25519 public key, if known (from its ledger-created event, or from an
    /// earlier session): tree heads signed with another key are refused. When nil, the
    /// key of the first tree head seen is trusted from then on.
    public var ledgerPublicKey: [UInt8]?
    /// A tree head seen earlier (kept from an earlier session): every new one must extend it.
    public var trustedTreeHead: SignedTreeHead?
    /// Other servers holding the same ledgers (`HOST:PORT`: a primary and its followers),
    /// tried in turn when the one in use cannot be reached. A write a follower refuses names
    /// its primary (docs/PROTOCOL.md §7.18): the store then connects there and sends it again,
    /// whether or not it is listed.
    public var otherServers: [String] = []
    /// With ``otherServers``: how long a call keeps trying while its servers fail over — the
    /// server in use gone, a cluster electing a leader, a follower naming a primary that is
    /// gone. Reads and saves are sent again (a save's second attempt that finds its objects
    /// saved by the first is answered as saved); other writes only when refused unprocessed.
    /// With other servers, connections send a keepalive every 2 s when ``keepaliveInterval``
    /// is nil, so that a server that stops answering is left rather than waited on.
    public var failoverPatience: Duration = .seconds(30)

    public struct TLS: Sendable {
        /// A PEM file of trusted roots; the system's when nil.
        public var trustRoots: String?
        /// Check that the server's certificate names the host connected to (its DNS name or
        /// IP address), or ``serverName`` when given.
        public var verifyHostname: Bool
        /// The name the server's certificate must carry (and the TLS server name sent), when
        /// it is not the host connected to: a server reached by IP address or through a tunnel.
        public var serverName: String?

        public init(trustRoots: String? = nil, verifyHostname: Bool = true, serverName: String? = nil) {
            self.trustRoots = trustRoots
            self.verifyHostname = verifyHostname
            self.serverName = serverName
        }
    }

    /// The Unix domain socket's path when ``host`` is `unix:PATH`.
    public var unixSocketPath: String? { host.hasPrefix("unix:") ? String(host.dropFirst(5)) : nil }

    /// `HOST:PORT` (an IPv6 host in brackets) as its parts; nil when it is not one.
    public static func address(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), colon > text.startIndex, let port = Int(text[text.index(after: colon)...]),
            (1...65_535).contains(port)
        else { return nil }
        return (String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
    }

    public init(
        host: String = "127.0.0.1", port: Int = 7411, credential: String, timeout: Duration = .seconds(30),
        maximumFrameSize: Int = FrameLayout.defaultMaximumFrameSize, tls: TLS? = nil, connectAttempts: Int = 4,
        keepaliveInterval: Duration? = nil, keepaliveTimeout: Duration? = nil, ledgerPublicKey: [UInt8]? = nil,
        trustedTreeHead: SignedTreeHead? = nil, otherServers: [String] = []
    ) {
        self.otherServers = otherServers
        self.keepaliveInterval = keepaliveInterval
        self.keepaliveTimeout = keepaliveTimeout
        self.ledgerPublicKey = ledgerPublicKey
        self.trustedTreeHead = trustedTreeHead
        self.host = host
        self.port = port
        self.credential = credential
        self.timeout = timeout
        self.maximumFrameSize = maximumFrameSize
        self.tls = tls
        self.connectAttempts = connectAttempts
    }
}

/// The answer to ``HealthStore/ping(_:)``.
public struct PingResult: Sendable, Hashable {
    public var ledgerID: String
    /// `owner` or `app <bundle id>`.
    public var principal: String
    public var roundTrip: Duration
}

/// A sample query (HealthKit's `HKSampleQueryDescriptor`).
///
/// ```swift
/// // The most recent blood-glucose reading taken before a meal.
/// let query = SampleQueryDescriptor(
///     type: bloodGlucose.objectType,
///     predicate: .predicateForObjects(withMetadataKey: MetadataKey.bloodGlucoseMealTime, operatorType: .equal, value: .number(1)),
///     limit: 1, sort: .startDate(ascending: false))
/// let latest = try await query.result(for: store).first
/// ```
public struct SampleQueryDescriptor: Sendable, Hashable {
    public typealias Sort = SampleSort

    public var type: ObjectType
    /// Samples overlapping this interval; all when nil.
    public var interval: DateInterval?
    /// Only objects that match.
    public var predicate: ObjectPredicate?
    /// 0: no limit.
    public var limit: Int
    public var sort: Sort
    /// Objects per streamed batch.
    public var batchSize: Int

    public init(
        type: ObjectType, interval: DateInterval? = nil, predicate: ObjectPredicate? = nil, limit: Int = 0, sort: Sort = .startDate(ascending: true),
        batchSize: Int = 500
    ) {
        self.type = type
        self.interval = interval
        self.predicate = predicate
        self.limit = limit
        self.sort = sort
        self.batchSize = batchSize
    }

    /// All results (HealthKit's `result(for:)`).
    public func result(for store: HealthStore) async throws -> [HealthObject] { try await store.result(for: self) }

    /// The results in batches as they arrive; stopping the iteration cancels the call.
    public func results(for store: HealthStore) async throws -> SampleBatches { try await store.results(for: self) }
}

/// A connection to one ledger on a HealthLedger server, shaped like HealthKit's `HKHealthStore`.
///
/// ```swift
/// let store = HealthStore(configuration: .init(port: 7411, credential: credential))
/// try await store.save(.quantitySample(QuantitySample(type: heartRate, quantity: try Quantity(72, "count/min"), start: now, end: now)))
/// let samples = try await store.result(for: SampleQueryDescriptor(type: heartRate.objectType, limit: 10))
/// ```
///
/// Calls share one connection (opened on first use, reopened with backoff after a
/// failure). Failed calls throw ``RPCError`` carrying the status and, where there is one,
/// HealthKit's error code. Cancelling the calling task cancels the call.
public final class HealthStore: Sendable {
    public let configuration: HealthStoreConfiguration
    private let connections: ConnectionManager
    /// For a store made by ``asOf(_:)``, the moment it reads at.
    public let pointInTime: PointInTime?
    /// The ledger key and the last tree head this store checked (see ``treeHead()``).
    let trust: Mutex<(publicKey: [UInt8]?, last: SignedTreeHead?)>
    /// The event loop the store's connection lives on (every connection it opens), as a task
    /// executor. Calls made from a task that prefers it skip two thread hand-overs each: the
    /// request is written, and the answer resumes the caller, on the connection's own thread.
    /// Worth it for a task making calls one after another:
    ///
    /// ```swift
    /// try await withTaskExecutorPreference(store.executor) {
    ///     for sample in samples { try await store.save(sample) }
    /// }
    /// ```
    ///
    /// The task's own work then runs on that thread too, between the connection's reads and
    /// writes: keep it short, and never block in it.
    public let executor: any TaskExecutor

    /// - Parameter group: the event loops for the connection; NIO's shared singleton by default.
    ///   The store takes one of them and keeps its connection there.
    public init(configuration: HealthStoreConfiguration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        let loop = group.next()
        self.configuration = configuration
        self.connections = ConnectionManager(configuration: configuration, loop: loop)
        executor = EventLoopTaskExecutor(loop: loop)
        pointInTime = nil
        trust = Mutex((configuration.ledgerPublicKey ?? configuration.trustedTreeHead?.publicKey, configuration.trustedTreeHead))
    }

    private init(configuration: HealthStoreConfiguration, connections: ConnectionManager, executor: any TaskExecutor, pointInTime: PointInTime) {
        self.configuration = configuration
        self.connections = connections
        self.executor = executor
        self.pointInTime = pointInTime
        trust = Mutex((configuration.ledgerPublicKey ?? configuration.trustedTreeHead?.publicKey, configuration.trustedTreeHead))
    }

    /// The ledger as it stood at `point`: "what did my ledger say on 1 March". Every read
    /// of the returned store (queries, anchored queries, statistics, fetches,
    /// characteristics, workouts, authorizations, the audit trail) answers from that moment,
    /// with the caller's authorization as it stood then (an app also needs it now); writes
    /// and long-running calls are refused. It shares this store's connection.
    ///
    /// ```swift
    /// let march = store.asOf(.time(firstOfMarch))
    /// let weights = try await march.result(for: SampleQueryDescriptor(type: bodyMass))
    /// ```
    public func asOf(_ point: PointInTime) -> HealthStore {
        HealthStore(configuration: configuration, connections: connections, executor: executor, pointInTime: point)
    }

    /// Closes the connection. The store cannot be used afterwards.
    public func close() async {
        await connections.close()
    }

    func unary(_ method: RPCMethod, _ message: some SwiftProtobuf.Message) async throws -> [UInt8] {
        try await unary(method, payload: try message.serializedBytes())
    }

    /// A unary call with its request already serialized.
    func unary(_ method: RPCMethod, payload: [UInt8]) async throws -> [UInt8] {
        try requireFrameRoom(for: payload, method)
        // A call the server never started (it went away, for example closing the idle
        // connection as the request crossed) is sent again on a new connection.
        var attempts = 0
        var redirects = 0
        var failover = Failover(configuration: configuration, method: method)
        while true {
            attempts += 1
            var used: ClientConnection?
            do {
                let connection = try await connections.connection()
                used = connection
                do {
                    return try await connection.unary(
                        method, payload, credential: configuration.credential, timeout: configuration.timeout, asOf: pointInTime)
                } catch let refusal as RPCError where refusal.code == .failedPrecondition && refusal.primary != nil && redirects < Self.primaryRedirects {
                    // A follower refused the write before doing anything with it: to its primary.
                    redirects += 1
                    try await connections.redirect(to: refusal.primary!, from: connection)
                    continue
                }
            } catch let notStarted as CallNotStarted where attempts == Self.unstartedCallAttempts {
                throw notStarted.error
            } catch is CallNotStarted {
                continue
            } catch let failure as RPCError {
                guard try await failover.retries(after: failure) else { throw failure }
                // The server that failed is tried last from now on (gone, paused, or not leading).
                if let used { await connections.setAside(used) }
                redirects = 0
            }
        }
    }

    /// A call's patience while its servers fail over (``HealthStoreConfiguration/failoverPatience``).
    struct Failover {
        let deadline: ContinuousClock.Instant?
        let method: RPCMethod
        var delay = Duration.milliseconds(100)
        /// Whether the call was sent again after an outcome that left it unknown.
        var resent = false

        init(configuration: HealthStoreConfiguration, method: RPCMethod) {
            self.method = method
            deadline = configuration.otherServers.isEmpty ? nil : .now + configuration.failoverPatience
        }

        /// After `failure`: true, once a pause is over, when the call is to be sent again;
        /// false when `failure` is the answer.
        ///
        /// - Throws: ``SaveFoundSaved`` when a save sent again finds its objects saved.
        mutating func retries(after failure: RPCError) async throws -> Bool {
            if resent, method == .save, failure.code == .alreadyExists { throw SaveFoundSaved() }
            guard let deadline, ContinuousClock.now + delay < deadline else { return false }
            let refusedUnapplied = failure.unprocessed || (failure.code == .failedPrecondition && failure.primary != nil)
            let outcomeUnknown = failure.code == .unavailable
            let repeatable = !method.isWrite || method == .save
            guard refusedUnapplied || (outcomeUnknown && repeatable) else { return false }
            // A refusal of a call the server did nothing with leaves nothing unknown.
            resent = resent || (outcomeUnknown && !failure.unprocessed)
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(1))
            return true
        }
    }

    /// A save sent again after its first attempt's outcome was lost (a failover) found its
    /// objects already saved: the first attempt landed.
    struct SaveFoundSaved: Error {}

    /// How often a call the server never started is sent.
    static let unstartedCallAttempts = 3
    /// How many follower refusals one call follows to a primary before it gives up.
    static let primaryRedirects = 3

    /// Bytes a request frame holds besides its payload, method and credential, at most: the
    /// call id, the fields' tags and lengths, the deadline, the window and the point in time.
    static let requestFrameOverhead = 64

    /// Refuses, before anything is sent, a request whose frame could exceed
    /// ``HealthStoreConfiguration/maximumFrameSize``: the server would close the connection on
    /// it, failing every other call under way.
    ///
    /// - Throws: ``RPCError`` `resourceExhausted`; the connection stays as it was.
    func requireFrameRoom(for payload: [UInt8], _ method: RPCMethod) throws {
        let largest = payload.count + method.rawValue.utf8.count + configuration.credential.utf8.count + Self.requestFrameOverhead
        guard largest <= configuration.maximumFrameSize else {
            throw RPCError(
                .resourceExhausted,
                "the request is \(payload.count) bytes, more than a frame of at most \(configuration.maximumFrameSize) bytes holds: send less at a time (split the save)")
        }
    }

    static func decode<M: SwiftProtobuf.Message>(_ type: M.Type, _ bytes: [UInt8]) throws -> M {
        do { return try M(serializedBytes: bytes) } catch {
            throw RPCError(.internalError, "the server sent an invalid \(M.protoMessageName)")
        }
    }

    /// Checks the connection and the credential.
    public func ping(_ data: [UInt8] = []) async throws -> PingResult {
        let clock = ContinuousClock()
        let started = clock.now
        let response = try Self.decode(Healthledger_V1_PingResponse.self, try await unary(.ping, Healthledger_V1_PingRequest.with { $0.data = Data(data) }))
        return PingResult(ledgerID: response.ledgerID, principal: response.principal, roundTrip: clock.now - started)
    }

    /// Saves objects atomically; returns once they are on the server's disk.
    @discardableResult
    public func save(_ objects: [HealthObject]) async throws -> [SaveResult] {
        // The SaveRequest written directly from the objects (the same bytes SwiftProtobuf
        // writes, without building the messages).
        let request = HealthObject.encodedMessage(of: objects)
        let response: [UInt8]
        do {
            response = try await unary(.save, payload: request)
        } catch is SaveFoundSaved {
            return objects.map { SaveResult(uuid: $0.uuid, disposition: .saved) }
        }
        // Read without the generated messages (an import's batch answers thousands).
        do {
            return try SaveResponseCoding.results(in: response)
        } catch is HealthError {
            throw RPCError(.internalError, "the server sent a bad UUID")
        } catch {
            throw RPCError(.internalError, "the server sent an invalid \(Healthledger_V1_SaveResponse.protoMessageName)")
        }
    }

    /// Saves one object.
    @discardableResult
    public func save(_ object: HealthObject) async throws -> SaveResult {
        try await save([object])[0]
    }

    /// Deletes objects by UUID, all or none; returns the number deleted.
    @discardableResult
    public func delete(_ uuids: [UUID]) async throws -> Int {
        let request = Healthledger_V1_DeleteRequest.with { $0.uuids = uuids.map { Data($0.bytes) } }
        return Int(try Self.decode(Healthledger_V1_DeleteResponse.self, try await unary(.delete, request)).deleted)
    }

    /// Deletes objects, all or none.
    @discardableResult
    public func delete(_ objects: [HealthObject]) async throws -> Int {
        try await delete(objects.map(\.uuid))
    }

    /// Deletes the caller's objects of `type` overlapping `interval` (all of them when nil)
    /// that match `predicate` (HealthKit's `deleteObjects(of:predicate:)`); returns how many.
    /// The owner deletes anyone's.
    @discardableResult
    public func deleteObjects(of type: ObjectType, overlapping interval: DateInterval? = nil, matching predicate: ObjectPredicate? = nil) async throws -> Int {
        let request = Healthledger_V1_DeleteObjectsRequest.with { request in
            request.type = type.identifier
            if let interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
            if let predicate { request.predicate = .init(predicate) }
        }
        return Int(try Self.decode(Healthledger_V1_DeleteResponse.self, try await unary(.deleteObjects, request)).deleted)
    }

    /// What ``erase(_:reason:)`` erased.
    public struct Erasure: Sendable, Hashable {
        /// Objects erased (a correlation's members and a workout's routes included).
        public var objects: Int
        /// Events whose bodies were erased.
        public var events: Int
        /// The last erasure event's sequence (one event per object and per characteristic; 0 when
        /// nothing was left to erase).
        public var sequence: UInt64
        /// Characteristics whose values were erased (``ErasureTarget/everything``).
        public var characteristics = 0
    }

    /// Which objects ``erase(_:reason:)`` erases.
    public enum ErasureTarget: Sendable, Hashable {
        /// These objects, live or deleted.
        case objects([UUID])
        /// The live objects of a type overlapping an interval that match a predicate; for a
        /// characteristic type (the owner only, with neither), every value it was set to.
        case matching(ObjectType, overlapping: DateInterval? = nil, predicate: ObjectPredicate? = nil)
        /// Every object a source saved (an app names its own bundle identifier).
        case source(String)
        /// All of the owner's data (the owner only): every object, live or deleted, and every
        /// characteristic ever set. The ledger stays, with its credentials, grants and history.
        case everything
    }

    /// Erases objects (docs/SEMANTICS.md §5, "Erasure"): their values, metadata, device fields,
    /// attachments and route locations are gone from the ledger, live ones are deleted (anchored
    /// queries report it), and the ledger's history, with every proof issued before, still
    /// verifies. An app erases only what it saved; the owner anything. `reason` is recorded.
    /// Throws `failedPrecondition` while the ledger is under a legal hold.
    @discardableResult
    public func erase(_ target: ErasureTarget, reason: String = "") async throws -> Erasure {
        let request = Healthledger_V1_EraseRequest.with { request in
            request.reason = reason
            switch target {
            case .objects(let uuids): request.uuids = uuids.map { Data($0.bytes) }
            case .matching(let type, let interval, let predicate):
                request.type = type.identifier
                if let interval {
                    request.startUs = microseconds(interval.start)
                    request.endUs = microseconds(interval.end)
                }
                if let predicate { request.predicate = .init(predicate) }
            case .source(let bundle): request.source = bundle
            case .everything: request.everything = true
            }
        }
        let response = try Self.decode(Healthledger_V1_EraseResponse.self, try await unary(.erase, request))
        return Erasure(objects: Int(response.erased), events: Int(response.events), sequence: response.sequence, characteristics: Int(response.characteristics))
    }

    /// The object with `uuid`, or nil.
    public func object(with uuid: UUID) async throws -> HealthObject? {
        let response = try Self.decode(Healthledger_V1_FetchResponse.self, try await unary(.fetch, Healthledger_V1_FetchRequest.with { $0.uuid = Data(uuid.bytes) }))
        return response.hasObject ? try response.object.model() : nil
    }

    /// All results of a sample query.
    public func result(for query: SampleQueryDescriptor) async throws -> [HealthObject] {
        var objects: [HealthObject] = []
        // The first batch is taken as it is: appending it would copy every object.
        for try await batch in try await results(for: query) { if objects.isEmpty { objects = batch } else { objects += batch } }
        return objects
    }

    /// The results of a sample query as they arrive, in batches. Stopping the iteration
    /// (or cancelling its task) cancels the call.
    public func results(for query: SampleQueryDescriptor) async throws -> SampleBatches {
        let request = Healthledger_V1_SampleQueryRequest.with { request in
            request.type = query.type.identifier
            if let interval = query.interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
            request.limit = UInt32(clamping: query.limit)
            request.batchSize = UInt32(clamping: query.batchSize)
            request.sort = .init(query.sort)
            if let predicate = query.predicate { request.predicate = .init(predicate) }
        }
        return try await openStream(.querySamples, request, decode: HealthStore.sampleBatch)
    }

    /// A SampleBatch's objects (`repeated HealthObject objects = 1`), read in place; bytes
    /// that do not decode are the server's fault.
    static func sampleBatch(_ bytes: [UInt8]) throws -> [HealthObject] {
        do {
            return try HealthObjectDecoder.objects(in: bytes)
        } catch {
            throw RPCError(.internalError, "the server sent an invalid SampleBatch: \(error)")
        }
    }

    /// A field of a batch message, read in place.
    enum BatchField {
        case bytes(UnsafeRawBufferPointer)
        case varint(UInt64)
    }

    /// Reads a batch message's fields in place, calling `visit` with each known field and its
    /// value (fields this version does not know are skipped); malformed bytes (or an object
    /// that does not decode) are the server's fault.
    static func readBatch<Field: ProtoFields>(_ bytes: [UInt8], fields: Field.Type, _ visit: (Field, BatchField) throws -> Void) throws {
        do {
            try bytes.withUnsafeBytes { buffer in
                var reader = ProtoReader(buffer)
                while let (number, wireType) = try reader.next() {
                    switch (Field(rawValue: number), wireType) {
                    case (let field?, .lengthDelimited): try visit(field, .bytes(try reader.bytes()))
                    case (let field?, .varint): try visit(field, .varint(try reader.varint()))
                    default: try reader.skip(wireType)
                    }
                }
            }
        } catch {
            throw RPCError(.internalError, "the server sent an invalid \(Field.Message.protoMessageName): \(error)")
        }
    }

    /// Opens a server-streaming call whose messages `decode` reads.
    func openStream<Element>(
        _ method: RPCMethod, _ message: some SwiftProtobuf.Message, decode: @escaping @Sendable ([UInt8]) throws -> Element
    ) async throws -> DecodedStream<Element> {
        let (stream, consumed) = try await openStream(method, message)
        return DecodedStream(stream: stream, consumed: consumed, decode: decode)
    }

    /// Opens a server-streaming call; `consumed` grants the server one more message.
    /// Long-running methods get no deadline. A refusal naming the ledger's primary before the
    /// first message opens the call again there (``CallStream``).
    func openStream(_ method: RPCMethod, _ message: some SwiftProtobuf.Message) async throws -> (
        stream: CallStream, consumed: @Sendable () -> Void
    ) {
        let payload: [UInt8] = try message.serializedBytes()
        try requireFrameRoom(for: payload, method)
        let call = StreamCall()
        let open: @Sendable () async throws -> AsyncThrowingStream<[UInt8], any Error> = { [self] in
            let connection = try await connections.connection()
            let (id, stream) = try connection.stream(
                method, payload, credential: configuration.credential, timeout: method.isLongRunning ? nil : configuration.timeout,
                asOf: pointInTime)
            call.runs(on: connection, as: id)
            return stream
        }
        let stream = CallStream(first: try await open()) { [connections] refusal in
            guard let connection = call.connection, let primary = refusal.primary else { throw refusal }
            try await connections.redirect(to: primary, from: connection)
            return try await open()
        }
        return (stream, { call.grant() })
    }
}

/// A server stream's messages, each decoded as it arrives. Taking one grants the server the
/// next (flow control); stopping the iteration (or cancelling its task) cancels the call.
public struct DecodedStream<Element: Sendable>: AsyncSequence, Sendable {
    let stream: CallStream
    let consumed: @Sendable () -> Void
    let decode: @Sendable ([UInt8]) throws -> Element

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: CallStream.AsyncIterator
        let consumed: @Sendable () -> Void
        let decode: @Sendable ([UInt8]) throws -> Element

        public mutating func next() async throws -> Element? {
            guard let bytes = try await base.next() else { return nil }
            consumed()
            return try decode(bytes)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator(), consumed: consumed, decode: decode) }
}

/// Batches of a sample query's results.
public typealias SampleBatches = DecodedStream<[HealthObject]>

/// Opens the connection on first use and reopens it, with backoff, once it fails.
actor ConnectionManager {
    private let configuration: HealthStoreConfiguration
    /// Every connection of the store lives on this loop (see ``HealthStore/executor``).
    private let loop: any EventLoop
    private var current: ClientConnection?
    private var closed = false
    /// The servers to connect to, the one to try first first: the configuration's, then
    /// its other servers; a primary a follower named moves to the front.
    private var servers: [(host: String, port: Int)]

    init(configuration: HealthStoreConfiguration, loop: any EventLoop) {
        self.configuration = configuration
        self.loop = loop
        servers = [(configuration.host, configuration.port)] + configuration.otherServers.compactMap(HealthStoreConfiguration.address)
    }

    /// Makes `primary` the server to connect to, dropping `connection` (to a follower that
    /// refused a write) when it is still the one in use.
    func redirect(to primary: String, from connection: ClientConnection) async throws {
        guard let address = HealthStoreConfiguration.address(primary) else {
            throw RPCError(.unavailable, "a follower named its primary as '\(primary.prefix(100))', which is not HOST:PORT")
        }
        servers.removeAll { $0.host == address.host && $0.port == address.port }
        servers.insert(address, at: 0)
        guard current === connection else { return }
        current = nil
        usable.withLock { $0 = nil }
        await connection.close()
    }

    /// The keepalive of a store with other servers when none is configured.
    static let failoverKeepalive = Duration.seconds(2)

    /// Closes `connection` when it is the one in use, and makes its server the last tried:
    /// a call failed over from it.
    func setAside(_ connection: ClientConnection) async {
        guard current === connection else { return }
        current = nil
        usable.withLock { $0 = nil }
        if servers.count > 1 { servers.append(servers.removeFirst()) }
        await connection.close()
    }

    /// The usable connection, if there is one: read without entering the actor, which
    /// only (re)connects.
    private nonisolated let usable = Mutex<ClientConnection?>(nil)

    nonisolated func connection() async throws -> ClientConnection {
        if let connection = usable.withLock({ $0 }), connection.isUsable { return connection }
        return try await connect()
    }

    private func connect() async throws -> ClientConnection {
        guard !closed else { throw RPCError(.unavailable, "the store was closed") }
        if let current, current.isUsable { return current }
        var delay = Duration.milliseconds(50)
        var lastError: any Error = RPCError(.unavailable, "not connected")
        for attempt in 0..<max(1, configuration.connectAttempts) {
            if attempt > 0 {
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(2))
            }
            // Each attempt tries every server once, the last one that answered first.
            for (index, server) in servers.enumerated() {
                var target = configuration
                (target.host, target.port) = server
                // Among several servers, one that stops answering (paused, cut off) is found
                // out and left, rather than waited on.
                if !target.otherServers.isEmpty, target.keepaliveInterval == nil { target.keepaliveInterval = Self.failoverKeepalive }
                do {
                    let connection = try await ClientConnection.connect(target, group: loop)
                    if index > 0 { servers.insert(servers.remove(at: index), at: 0) }
                    current = connection
                    usable.withLock { $0 = connection }
                    return connection
                } catch {
                    lastError = error
                }
            }
        }
        throw lastError
    }

    func close() async {
        closed = true
        usable.withLock { $0 = nil }
        await current?.close()
        current = nil
    }
}
