import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import HealthModel
import Ledger
import LedgerSchema
import Logging
import SwiftProtobuf
import Synchronization
import Testing

/// Statements of docs/PROTOCOL.md that only raw frames reach, checked one by one against a
/// real server: the frame limit, the byte-by-byte example, the order of a request's checks,
/// deadlines, cancel, the stream window, pings, point-in-time points and the daemon's limits.
@Suite("The protocol document, statement by statement", .timeLimit(.minutes(3)))
struct ProtocolStatementTests {
    static let heartRate = "HKQuantityTypeIdentifierHeartRate"

    static func request(
        _ id: UInt64, _ method: RPCMethod, _ credential: String, _ message: some SwiftProtobuf.Message, timeout: UInt32 = 0, window: UInt32 = 0,
        asOf: PointInTime? = nil
    ) throws -> Healthledger_V1_Frame {
        .request(id: id, method: method, credential: credential, payload: try message.serializedBytes(), timeoutMilliseconds: timeout, window: window, asOf: asOf)
    }

    /// A frame of the connection's own kinds (cancel, window update, ping…) on `id`.
    static func control(_ id: UInt64, _ set: (inout Healthledger_V1_Frame) -> Void) -> Healthledger_V1_Frame {
        var frame = Healthledger_V1_Frame()
        frame.callID = id
        set(&frame)
        return frame
    }

    /// A query of every heart-rate sample, one per message.
    static let oneByOne = Healthledger_V1_SampleQueryRequest.with {
        $0.type = heartRate
        $0.batchSize = 1
    }

    /// The next decoded frame, or nil when the connection closed.
    static func next(_ raw: RawConnection) async -> Healthledger_V1_Frame? {
        while let inbound = await raw.next() {
            if case .frame(let frame) = inbound { return frame }
            Issue.record("the server sent a malformed frame")
        }
        return nil
    }

    /// Reads until the status of `id`; returns it with the frames that came before it.
    static func frames(until id: UInt64, on raw: RawConnection) async -> (before: [Healthledger_V1_Frame], status: Healthledger_V1_CallStatus?) {
        var before: [Healthledger_V1_Frame] = []
        while let frame = await next(raw) {
            if frame.callID == id, case .status(let status) = frame.kind { return (before, status) }
            before.append(frame)
        }
        return (before, nil)
    }

    static func isStatus(_ frame: Healthledger_V1_Frame) -> Bool {
        if case .status = frame.kind { true } else { false }
    }

    static func messages(of id: UInt64, in frames: [Healthledger_V1_Frame]) -> Int {
        frames.filter { if case .message = $0.kind { $0.callID == id } else { false } }.count
    }

    static func saveHeartRates(_ count: Int, on server: TestServer) async throws {
        try await server.client().save((0..<count).map { Samples.heartRate(60 + Double($0 % 40), at: Double($0) * 60) })
    }

    // MARK: §3: framing

    /// A Ping request whose frame body is exactly `size` bytes, padded with a field the
    /// request message does not have (skipped) and, for the last bytes, an initial window
    /// (which a unary call ignores).
    static func pingFrame(id: UInt64, credential: String, bodySize size: Int) throws -> [UInt8] {
        for window: UInt32 in [0, 1, 1 << 7, 1 << 14, 1 << 21] {
            for padding in 0..<size {
                var payload: [UInt8] = [0x7A]  // field 15, length-delimited
                var length = padding
                repeat {
                    payload.append(UInt8(length & 0x7F) | (length >= 0x80 ? 0x80 : 0))
                    length >>= 7
                } while length > 0
                payload += [UInt8](repeating: 0x41, count: padding)
                let frame = Healthledger_V1_Frame.request(id: id, method: .ping, credential: credential, payload: payload, window: window)
                let bytes = RawConnection.encode(frame)
                if bytes.count - 5 == size { return bytes }
                if bytes.count - 5 > size { break }
            }
        }
        throw CancellationError()
    }

    @Test("§3.1: a frame body of exactly the limit is taken; one byte more gets a go-away naming both sizes, then the close")
    func frameLimit() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, maximumFrameSize: 1024)) { server in
            let raw = try await RawConnection(port: server.port)
            try await raw.send(try Self.pingFrame(id: 1, credential: server.ownerCredential, bodySize: 1024))
            #expect(await raw.status(of: 1)?.code == .ok)
            try await raw.send(try Self.pingFrame(id: 2, credential: server.ownerCredential, bodySize: 1025))
            let goAway = await Self.next(raw)
            guard case .goAway(let away)? = goAway?.kind else { Issue.record("no go-away: \(String(describing: goAway))"); return }
            #expect(away.reason == "frame of 1025 bytes exceeds the limit of 1024 bytes")
            #expect(away.lastCallID == 1, "call 2 never started")
            #expect(await Self.next(raw) == nil, "the connection closed")
        }
    }

    @Test("§3.1: a malformed body is refused on call 0 with its reason and the connection goes on; non-zero flags get a go-away, then the close")
    func malformedAndFlags() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            try await raw.send([0, 0, 0, 0, 3, 0xFF, 0xFF, 0xFF])
            let refused = await raw.status(of: 0)
            #expect(refused?.code == .invalidArgument && refused?.message == "the frame body is not a valid healthledger.v1.Frame")
            try await raw.send(try Self.request(1, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
            #expect(await raw.status(of: 1)?.code == .ok, "the connection goes on")
            try await raw.send([0x01, 0, 0, 0, 0])
            let goAway = await Self.next(raw)
            guard case .goAway(let away)? = goAway?.kind else { Issue.record("no go-away: \(String(describing: goAway))"); return }
            #expect(away.reason == "unsupported frame flags 0x1" && away.lastCallID == 1)
            #expect(await Self.next(raw) == nil, "the connection closed")
        }
    }

    @Test("§3.2: pong, go-away and a kind unknown to the server are refused on call 0; the connection goes on")
    func serverOnlyKinds() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            let pong = Self.control(7) { $0.pong = .with { $0.nonce = 1 } }
            let goAway = Self.control(7) { $0.goAway = .with { $0.reason = "bye" } }
            // Field 15 of Frame, which no version defines: a frame of no kind the server knows.
            let unknown: [UInt8] = [0, 0, 0, 0, 4, 0x08, 0x07, 0x7A, 0x00]
            for bytes in [RawConnection.encode(pong), RawConnection.encode(goAway), unknown] {
                try await raw.send(bytes)
                let refused = await raw.status(of: 0)
                #expect(refused?.code == .invalidArgument && refused?.message == "a client may not send this frame (on call 7)")
            }
            try await raw.send(try Self.request(1, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
            #expect(await raw.status(of: 1)?.code == .ok)
        }
    }

    /// The bytes of the first code block after `marker` in PROTOCOL.md: on each line, the hex
    /// pairs before the first word that is not one (after a leading "client:" or "server:").
    static func documentedBytes(after marker: String, in document: String) throws -> [UInt8] {
        let start = try #require(document.range(of: marker), "\(marker)")
        let open = try #require(document.range(of: "```\n", range: start.upperBound..<document.endIndex))
        let close = try #require(document.range(of: "```", range: open.upperBound..<document.endIndex))
        var bytes: [UInt8] = []
        for line in document[open.upperBound..<close.lowerBound].split(separator: "\n") {
            var words = line.split(separator: " ")[...]
            if let first = words.first, first.hasSuffix(":") { words = words.dropFirst() }
            for word in words {
                guard word.count == 2, let byte = UInt8(word, radix: 16) else { break }
                bytes.append(byte)
            }
        }
        return bytes
    }

    @Test("§3.3: the byte-by-byte Ping example is what the encoder writes and what the server answers")
    func byteByByteExample() async throws {
        let document = try MethodTableTests.protocolDocument()
        let requestBytes = try Self.documentedBytes(after: "As one line:", in: document)
        let credential = "hl1:demo:0123456789abcdef:s3cr3t"
        let request = Healthledger_V1_Frame.request(id: 1, method: .ping, credential: credential, payload: [])
        #expect(RawConnection.encode(request) == requestBytes)
        #expect(requestBytes.count == 72)
        var timed = request
        timed.request.timeoutMs = 5000
        let timedBytes = RawConnection.encode(timed)
        #expect(timedBytes[4] == 0x46 && timedBytes[8] == 0x42 && timedBytes.suffix(3) == [0x18, 0x88, 0x27], "timeout_ms = 5000")

        let answer = try Self.documentedBytes(after: "the server answers\nwith two frames:", in: document)
        let refusal = try Self.documentedBytes(after: "With a bad credential the only frame is the status:", in: document)
        let ping = try Self.documentedBytes(after: "Connection-level ping with nonce 7 and its answer:", in: document)
        try await withTestServer { server in
            // The documented bytes themselves, with their fake credential.
            let raw = try await RawConnection(port: server.port)
            try await raw.send(requestBytes)
            let refused = try #require(await Self.next(raw))
            #expect(RawConnection.encode(refused).starts(with: refusal) && refusal.count == 20)
            #expect(refused.status.message == "the credential is invalid or unknown" && refused.status.healthErrorCode == 0)
            // The same call with a real credential of a ledger named demo.
            let demo = try server.store.createLedger(id: "demo")
            var real = request
            real.request.credential = try await demo.issueCredential(for: .owner)
            try await raw.send(real)
            let response = try #require(await Self.next(raw))
            let status = try #require(await Self.next(raw))
            #expect(RawConnection.encode(response) + RawConnection.encode(status) == answer)
            // The connection-level ping: the client's 9 bytes, then the server's.
            try await raw.send(Array(ping.prefix(9)))
            let pong = try #require(await Self.next(raw))
            #expect(RawConnection.encode(pong) == Array(ping.suffix(9)))
        }
    }

    // MARK: §4.2: the order of a request's checks

    @Test("§4.2: the checks come in the documented order: method, credential, the point's form, the payload, the caller, the point in the ledger")
    func checkOrder() async throws {
        try await withTestServer { server in
            try await Self.saveHeartRates(3, on: server)
            let raw = try await RawConnection(port: server.port)
            let bad = "hl1:alice:0000000000000000:nope"
            let garbage: [UInt8] = [0xFF, 0xFF, 0xFF]
            let head = try server.ledger.head().sequence
            var both = try Self.request(0, .querySamples, server.ownerCredential, Self.oneByOne, asOf: .sequence(1))
            both.request.asOfTimeUs = 1

            func expect(_ frame: Healthledger_V1_Frame, _ code: Healthledger_V1_StatusCode, _ message: String, health: Int32, _ what: Comment) async throws {
                try await raw.send(frame)
                let status = await raw.status(of: frame.callID)
                #expect(status?.code == code && status?.message == message && status?.healthErrorCode == health, what)
            }
            // 5 before 7: an unknown method with a bad credential.
            var unknown = Healthledger_V1_Frame.request(id: 1, method: .ping, credential: bad, payload: [])
            unknown.request.method = "healthledger.v1.Ledger/Nope"
            try await expect(unknown, .unimplemented, "unknown method 'healthledger.v1.Ledger/Nope'", health: 0, "5 before 7")
            // 7 before 8: a bad credential asking as of two points.
            var badBoth = both
            badBoth.callID = 2
            badBoth.request.credential = bad
            try await expect(badBoth, .unauthenticated, "the credential is invalid or unknown", health: 0, "7 before 8")
            // 8 before 9: two points and a payload that does not decode; a write as of a point.
            var bothGarbage = both
            bothGarbage.callID = 3
            bothGarbage.request.payload = Data(garbage)
            try await expect(bothGarbage, .invalidArgument, "a call reads as of a sequence or a time, not both", health: 3, "8 before 9")
            let saveAsOf = Healthledger_V1_Frame.request(id: 4, method: .save, credential: server.ownerCredential, payload: garbage, asOf: .sequence(1))
            try await expect(saveAsOf, .invalidArgument, "healthledger.v1.Ledger/Save cannot be asked as of a past point: only reads that end by themselves can", health: 3, "8 before 9, a write")
            // 9 before 10: a payload that does not decode, or an unknown type, as of a point past the head.
            let garbageLate = Healthledger_V1_Frame.request(
                id: 5, method: .querySamples, credential: server.ownerCredential, payload: garbage, asOf: .sequence(head + 100))
            try await expect(garbageLate, .invalidArgument, "the request is not a valid healthledger.v1.SampleQueryRequest", health: 3, "9 before 10")
            let unknownType = try Self.request(6, .querySamples, server.ownerCredential, Healthledger_V1_SampleQueryRequest.with { $0.type = "HKNothing" }, asOf: .sequence(head + 100))
            try await raw.send(unknownType)
            let typeStatus = await raw.status(of: 6)
            #expect(typeStatus?.code == .invalidArgument && typeStatus?.message.contains("HKNothing") == true, "the types before the point: \(String(describing: typeStatus))")
            // 9 before 10: an app's payload that does not decode, to an owner's method.
            let appGarbage = Healthledger_V1_Frame.request(id: 8, method: .decideAuthorization, credential: server.appCredential, payload: garbage)
            try await expect(appGarbage, .invalidArgument, "the request is not a valid healthledger.v1.DecideAuthorizationRequest", health: 3, "9 before 10")
            // 10 before 11: an app asking an owner's method as of a point past the head.
            let appLate = try Self.request(9, .authorizationHistory, server.appCredential, Healthledger_V1_AuthorizationsRequest(), asOf: .sequence(head + 100))
            try await expect(appLate, .permissionDenied, "only the owner manages authorization", health: 4, "10 before 11")
            // 10 before 12: the caller before the fields, for every method reserved to a caller.
            let reserved: [(RPCMethod, String, any SwiftProtobuf.Message, Healthledger_V1_StatusCode, String, Int32)] = [
                (.decideAuthorization, server.appCredential, Healthledger_V1_DecideAuthorizationRequest.with { $0.type = "HKNothing" },
                 .permissionDenied, "only the owner manages authorization", 4),
                (.setObjectReadSelection, server.appCredential, Healthledger_V1_ObjectReadSelectionRequest.with { $0.uuids = [Data([1])] },
                 .permissionDenied, "only the owner manages authorization", 4),
                (.authorizations, server.appCredential, Healthledger_V1_AuthorizationsRequest(), .permissionDenied, "only the owner manages authorization", 4),
                (.pendingAuthorizations, server.appCredential, Healthledger_V1_AuthorizationsRequest(), .permissionDenied, "only the owner manages authorization", 4),
                (.sourcePriority, server.appCredential, Healthledger_V1_SourcePriorityRequest.with { $0.type = "HKNothing" },
                 .permissionDenied, "only the owner manages authorization", 4),
                (.setSourcePriority, server.appCredential, Healthledger_V1_SetSourcePriorityRequest.with { $0.type = "HKNothing" },
                 .permissionDenied, "only the owner manages authorization", 4),
                (.setCharacteristic, server.appCredential, Healthledger_V1_Characteristic.with { $0.type = "HKNothing" },
                 .permissionDenied, "only the owner sets characteristics", 4),
                (.audit, server.appCredential, Healthledger_V1_AuditRequest.with { $0.objectUuid = Data([1]) },
                 .permissionDenied, "the audit trail is the owner's: an app may not read it", 4),
                (.watchAudit, server.appCredential, Healthledger_V1_AuditRequest.with { $0.toSequence = 1 },
                 .permissionDenied, "the audit trail is the owner's: an app may not read it", 4),
                (.treeHead, server.appCredential, Healthledger_V1_Empty(), .permissionDenied, "tree heads and proofs are the owner's: an app may not read them", 4),
                (.inclusionProof, server.appCredential, Healthledger_V1_InclusionProofRequest.with { $0.sequence = head + 100 },
                 .permissionDenied, "tree heads and proofs are the owner's: an app may not read them", 4),
                (.consistencyProof, server.appCredential, Healthledger_V1_ConsistencyProofRequest.with { $0.firstSize = head + 100 },
                 .permissionDenied, "tree heads and proofs are the owner's: an app may not read them", 4),
                (.requestAuthorization, server.ownerCredential, Healthledger_V1_AuthorizationRequest.with { $0.readTypes = ["HKNothing"] },
                 .invalidArgument, "only apps request authorization; the owner has it all", 3),
                (.getRequestStatus, server.ownerCredential, Healthledger_V1_AuthorizationRequest.with { $0.readTypes = ["HKNothing"] },
                 .invalidArgument, "only apps request authorization; the owner has it all", 3),
                (.requestObjectReadAuthorization, server.ownerCredential, Healthledger_V1_ObjectReadAuthorizationRequest.with { $0.startUs = 10; $0.endUs = 5 },
                 .invalidArgument, "only apps request authorization; the owner has it all", 3),
            ]
            for (index, (method, credential, message, code, reason, health)) in reserved.enumerated() {
                try await expect(try Self.request(UInt64(20 + index), method, credential, message), code, reason, health: health, "10 before 12: \(method)")
            }
            // 11: only then the point itself.
            let late = try Self.request(7, .querySamples, server.ownerCredential, Self.oneByOne, asOf: .sequence(head + 100))
            try await raw.send(late)
            let lateStatus = await raw.status(of: 7)
            #expect(lateStatus?.code == .invalidArgument && lateStatus?.healthErrorCode == 3 && lateStatus?.message.contains("\(head + 100)") == true, "\(String(describing: lateStatus))")
        }
    }

    // MARK: §4.4–§4.7: deadlines, cancel, the window, ping

    @Test("§4.4: the default deadline and the cap end a stalled stream with the deadline in the message; a long-running call has none unless it asks")
    func deadlines() async throws {
        let configuration = ServerConfiguration(port: 0, defaultTimeout: .seconds(1), maximumTimeout: .seconds(2))
        try await withTestServer(configuration: configuration) { server in
            try await Self.saveHeartRates(20, on: server)
            let raw = try await RawConnection(port: server.port)
            // Streams granted one message, never more: only their deadline ends them.
            let cases: [(timeout: UInt32, written: String)] = [(0, "1.0 seconds"), (60_000, "2.0 seconds"), (300, "0.3 seconds")]
            for (index, (timeout, written)) in cases.enumerated() {
                let id = UInt64(index + 1)
                try await raw.send(try Self.request(id, .querySamples, server.ownerCredential, Self.oneByOne, timeout: timeout, window: 1))
                let (before, status) = await Self.frames(until: id, on: raw)
                // Never more than the window; on a loaded machine the deadline may pass before the first.
                #expect(Self.messages(of: id, in: before) <= 1)
                #expect(status?.code == .deadlineExceeded && status?.message == "the call's deadline of \(written) passed", "\(String(describing: status))")
            }
            // A long-running call asking none outlives the default deadline; one asking 500 ms ends then.
            let watch = Healthledger_V1_ChangeQueryRequest.with { $0.type = Self.heartRate }
            try await raw.send(try Self.request(10, .watchChanges, server.ownerCredential, watch))
            try await raw.send(try Self.request(11, .watchChanges, server.ownerCredential, watch, timeout: 500))
            let (early, timedOut) = await Self.frames(until: 11, on: raw)
            #expect(timedOut?.code == .deadlineExceeded && timedOut?.message == "the call's deadline of 0.5 seconds passed")
            #expect(!early.contains { $0.callID == 10 && Self.isStatus($0) }, "the watch asking no deadline is still open")
            try await Task.sleep(for: .milliseconds(1500))
            try await server.client().save(Samples.heartRate(99, at: 86_400))
            var delivered = false
            while !delivered, let frame = await Self.next(raw) {
                #expect(frame.callID == 10)
                if case .status(let status) = frame.kind { Issue.record("the watch ended: \(status)"); break }
                if case .message(let bytes) = frame.kind {
                    delivered = try Healthledger_V1_ChangeBatch(serializedBytes: bytes).added.count == 1
                }
            }
            #expect(delivered, "the watch with no deadline delivered a save made after the default deadline")
            try await raw.send(Self.control(10) { $0.cancel = .init() })
            let cancelled = await raw.status(of: 10)
            #expect(cancelled?.code == .cancelled && cancelled?.message == "the call was cancelled")
        }
        let defaults = ServerConfiguration()
        #expect(defaults.defaultTimeout == .seconds(30) && defaults.maximumTimeout == .seconds(600))
        #expect(defaults.idleTimeout == .seconds(300) && defaults.drainTimeout == .seconds(10))
        #expect(defaults.maximumConcurrentCalls == 128 && defaults.maximumFrameSize == 4_194_304)
    }

    @Test("§4.4/§4.5: a read whose task is stopped ends cancelled, or past its deadline, even when its work came to an end; a write keeps its own status")
    func stoppedReadsAndWrites() async throws {
        try await withTestServer { server in
            try await Self.saveHeartRates(50, on: server)
            let kept = Samples.heartRate(70, at: 100_000)
            try await server.client().save(kept)
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            let dispatcher = CallDispatcher(store: server.store, configuration: ServerConfiguration(port: 0), logger: logger, metrics: CallMetrics())

            /// Runs the call in a task that is cancelled before the call starts (as the
            /// connection cancels it), with its deadline marked passed when `expired`. A call
            /// that fails sends no response, though its work may have come to an end.
            func run(_ method: RPCMethod, _ message: some SwiftProtobuf.Message, cancelled: Bool, expired: Bool = false) async throws -> RPCError? {
                let request = try Self.request(1, method, server.ownerCredential, message).request
                let outcome = Mutex<(response: [UInt8]?, failure: RPCError?)?>(nil)
                await Task {
                    let deadline = CallDeadline()
                    if expired { deadline.expire() }
                    if cancelled { withUnsafeCurrentTask { $0?.cancel() } }
                    await dispatcher.run(id: 1, method: method, request: request, deadline: deadline, send: { _ in }) { response, failure in
                        outcome.withLock { $0 = (response, failure) }
                    }
                }.value
                let (response, failure) = try #require(outcome.withLock { $0 }, "the call finished")
                #expect((response == nil) == (failure != nil), "a response exactly when the call succeeds: \(method), \(String(describing: failure))")
                return failure
            }
            let statistics = Healthledger_V1_StatisticsRequest.with {
                $0.type = Self.heartRate
                $0.options = 8
            }
            #expect(try await run(.statistics, statistics, cancelled: false) == nil, "not stopped, it answers")
            #expect(try await run(.statistics, statistics, cancelled: true) == RPCError(.cancelled, "the call was cancelled"))
            #expect(try await run(.statistics, statistics, cancelled: true, expired: true) == RPCError(.deadlineExceeded, "the call's deadline of 30.0 seconds passed"))
            // Writes: an unknown UUID fails with its own status, a known one is deleted.
            let unknown = Healthledger_V1_DeleteRequest.with { $0.uuids = [Data(repeating: 7, count: 16)] }
            #expect(try await run(.delete, unknown, cancelled: true, expired: true)?.code == .notFound)
            let known = Healthledger_V1_DeleteRequest.with { $0.uuids = [withUnsafeBytes(of: kept.uuid.uuid) { Data($0) }] }
            #expect(try await run(.delete, known, cancelled: true, expired: true) == nil)
            #expect(try await server.client().object(with: kept.uuid) == nil, "the delete committed")
        }
    }

    @Test("§4.5/§4.6: the window starts at 16 and grows by each update; a cancel ends a stream with its message; cancels and updates for ids not open are ignored")
    func windowAndCancel() async throws {
        try await withTestServer { server in
            try await Self.saveHeartRates(40, on: server)
            let raw = try await RawConnection(port: server.port)
            // Ids 98 and 99 are not open: ignored, so nothing answers them.
            try await raw.send(Self.control(99) { $0.cancel = .init() })
            try await raw.send(Self.control(98) { $0.windowUpdate = .with { $0.messages = 5 } })
            try await raw.send(try Self.request(1, .querySamples, server.ownerCredential, Self.oneByOne))
            var received = 0
            var pings: UInt64 = 100
            /// Waits for `count` more of call 1's messages, then makes sure no more came: a ping
            /// call's status after them (a stream past its window would have sent on).
            func expectMessages(_ count: Int) async throws {
                while received < count, let frame = await Self.next(raw) {
                    #expect(frame.callID == 1, "\(frame)")
                    if case .message = frame.kind { received += 1 } else { Issue.record("\(frame)"); return }
                }
                pings += 1
                try await raw.send(try Self.request(pings, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
                let (before, status) = await Self.frames(until: pings, on: raw)
                #expect(status?.code == .ok)
                #expect(Self.messages(of: 1, in: before) == 0, "no message beyond the window")
                #expect(!before.contains { $0.callID == 0 || $0.callID == 98 || $0.callID == 99 })
            }
            try await expectMessages(16)
            try await raw.send(Self.control(1) { $0.windowUpdate = .with { $0.messages = 2 } })
            try await raw.send(Self.control(1) { $0.windowUpdate = .with { $0.messages = 1 } })
            try await expectMessages(19)
            try await raw.send(Self.control(1) { $0.cancel = .init() })
            let (_, cancelled) = await Self.frames(until: 1, on: raw)
            #expect(cancelled?.code == .cancelled && cancelled?.message == "the call was cancelled")

            // A stream granted without bound (the update capped) runs to its end.
            try await raw.send(try Self.request(2, .querySamples, server.ownerCredential, Self.oneByOne, window: .max))
            let (all, status) = await Self.frames(until: 2, on: raw)
            #expect(Self.messages(of: 2, in: all) == 40 && status?.code == .ok)
        }
    }

    @Test("§4.7: a ping on any call id is answered on call 0 with its nonce, also with the call limit reached")
    func connectionPing() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, maximumConcurrentCalls: 1)) { server in
            let raw = try await RawConnection(port: server.port)
            try await raw.send(try Self.request(1, .watchChanges, server.ownerCredential, Healthledger_V1_ChangeQueryRequest.with { $0.type = Self.heartRate }))
            try await raw.send(try Self.request(2, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
            let (_, refused) = await Self.frames(until: 2, on: raw)
            #expect(refused?.code == .resourceExhausted && refused?.message == "1 call is already open on this connection, its limit")
            try await raw.send(Self.control(5) { $0.ping = .with { $0.nonce = 9 } })
            while let frame = await Self.next(raw) {
                guard case .pong(let pong) = frame.kind else { continue }
                #expect(frame.callID == 0 && pong.nonce == 9)
                break
            }
        }
    }

    @Test("§4.2/§4.9: a go-away's last_call_id counts the calls started (refused from check 5 on), not those refused by checks 1–4")
    func lastCallID() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, maximumConcurrentCalls: 2)) { server in
            let raw = try await RawConnection(port: server.port)
            let watch = Healthledger_V1_ChangeQueryRequest.with { $0.type = Self.heartRate }
            try await raw.send(try Self.request(1, .watchChanges, server.ownerCredential, watch))
            // Started, though refused: an unknown credential (check 7), an unknown method (check 5).
            try await raw.send(try Self.request(3, .ping, "hl1:alice:0000000000000000:nope", Healthledger_V1_PingRequest()))
            #expect(await raw.status(of: 3)?.code == .unauthenticated)
            var unknown = Healthledger_V1_Frame.request(id: 4, method: .ping, credential: server.ownerCredential, payload: [])
            unknown.request.method = "healthledger.v1.Ledger/Nope"
            try await raw.send(unknown)
            #expect(await raw.status(of: 4)?.code == .unimplemented)
            try await raw.send(try Self.request(2, .watchChanges, server.ownerCredential, watch))
            // Never started: call 9 past the limit of 2 (check 4), call 0 (check 1), call 2 again (check 2).
            try await raw.send(try Self.request(9, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
            #expect(await raw.status(of: 9)?.code == .resourceExhausted)
            try await raw.send(try Self.request(0, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
            try await raw.send(try Self.request(2, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
            // A broken byte stream: the go-away names the highest call started.
            try await raw.send([0x01, 0, 0, 0, 0])
            var goAway: Healthledger_V1_GoAway?
            while let frame = await Self.next(raw) {
                if case .goAway(let away) = frame.kind { goAway = away }
            }
            #expect(goAway?.reason == "unsupported frame flags 0x1" && goAway?.lastCallID == 4)
        }
    }

    @Test("§4.9/§9: a drain lets a call in flight run until the drain timeout, then cancels it and closes the connection")
    func drainTimeout() async throws {
        let log = CapturedLog()
        // The call's own deadline is far beyond the test's time limit: only the drain can end it.
        let configuration = ServerConfiguration(port: 0, defaultTimeout: .seconds(600), drainTimeout: .milliseconds(300))
        try await withTestServer(configuration: configuration, logger: Logger(label: "test") { _ in log }) { server in
            try await Self.saveHeartRates(5, on: server)
            let raw = try await RawConnection(port: server.port)
            try await raw.send(try Self.request(1, .querySamples, server.ownerCredential, Self.oneByOne, window: 1))
            let first = await Self.next(raw)
            #expect(first?.callID == 1 && first.map { if case .message = $0.kind { true } else { false } } == true)
            let stopping = Task { await server.stop() }
            let goAway = await Self.next(raw)
            guard case .goAway(let away)? = goAway?.kind else { Issue.record("no go-away: \(String(describing: goAway))"); return }
            #expect(away.reason == "the server is shutting down" && away.lastCallID == 1)
            while let frame = await Self.next(raw) {
                #expect(frame.callID == 1 && Self.isStatus(frame), "only the stalled call's status may follow: \(frame)")
            }
            await stopping.value
            #expect(log.lines.contains { $0.message == "calls still running after the drain timeout; closing them" })
        }
    }

    @Test("§8.1/§9: a save or delete of more than 100,000 items is refused whole with resourceExhausted, health code 13")
    func itemLimit() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, maximumFrameSize: 64 << 20)) { server throws in
            var configuration = HealthStoreConfiguration(port: server.port, credential: server.ownerCredential)
            configuration.maximumFrameSize = 64 << 20
            let owner = HealthStore(configuration: configuration)
            let delete = await expectRPCError(.resourceExhausted, .dataSizeExceeded, "delete") { _ = try await owner.delete((0...100_000).map { _ in UUID() }) }
            #expect(delete?.message == "a delete holds at most 100000 UUIDs, got 100001")
            let save = await expectRPCError(.resourceExhausted, .dataSizeExceeded, "save") {
                try await owner.save((0...100_000).map { Samples.heartRate(60, at: Double($0)) })
            }
            #expect(save?.message == "a save holds at most 100000 objects, got 100001")
            #expect(try await owner.result(for: SampleQueryDescriptor(type: Types.heartRate)).isEmpty, "nothing saved")
            await owner.close()
        }
    }

    @Test("§6.1/§7.10/§7.12: a workout's 256 activities and 4,096 events, an association's 10,000 samples and an object's 100 attachments are limits: one more is resourceExhausted, health code 13")
    func sizeLimits() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let start = Samples.base
            func workout(activities: Int, markers: Int) -> HealthObject {
                .workout(Workout(
                    configuration: WorkoutConfiguration(activityType: .running), start: start, end: start.addingTimeInterval(10_000),
                    events: (0..<markers).map { WorkoutEvent(type: .marker, start: start.addingTimeInterval(Double($0) * 2)) },
                    activities: (0..<activities).map { index in
                        WorkoutActivity(
                            configuration: WorkoutConfiguration(activityType: .running), start: start.addingTimeInterval(Double(index) * 10),
                            end: start.addingTimeInterval(Double(index) * 10 + 5))
                    }))
            }
            let largest = workout(activities: 256, markers: 4096)
            try await owner.save(largest)
            await expectRPCError(.resourceExhausted, .dataSizeExceeded, "10,001 associated samples") {
                try await owner.add((0...10_000).map { _ in UUID() }, to: largest.uuid)
            }
            await expectRPCError(.resourceExhausted, .dataSizeExceeded, "257 activities") { try await owner.save(workout(activities: 257, markers: 0)) }
            await expectRPCError(.resourceExhausted, .dataSizeExceeded, "4,097 events") { try await owner.save(workout(activities: 0, markers: 4097)) }

            let sample = Samples.heartRate(60, at: 0)
            try await owner.save(sample)
            let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3]
            for index in 0..<100 { _ = try await owner.addAttachment(to: sample.uuid, name: "scan-\(index).png", contentType: "image/png", data: png) }
            await expectRPCError(.resourceExhausted, .dataSizeExceeded, "a 101st attachment") {
                _ = try await owner.addAttachment(to: sample.uuid, name: "one-more.png", contentType: "image/png", data: png)
            }
            #expect(try await owner.attachments(of: sample.uuid).count == 100)
            await owner.close()
        }
    }

    // MARK: §7.7: change batches

    @Test("§7.7: a call's change batches hold at most 128, 256, 512… changes, never more than batch_size; each resumes after itself")
    func changeBatches() async throws {
        try await withTestServer { server in
            try await Self.saveHeartRates(1_000, on: server)
            let raw = try await RawConnection(port: server.port)
            var id: UInt64 = 0
            func batches(limit: UInt32 = 0, batchSize: UInt32, anchor: Data = Data(), interval: Range<Int64>? = nil) async throws
                -> [Healthledger_V1_ChangeBatch]
            {
                id += 1
                let request = Healthledger_V1_ChangeQueryRequest.with {
                    $0.type = Self.heartRate
                    $0.limit = limit
                    $0.batchSize = batchSize
                    $0.anchor = anchor
                    if let interval {
                        $0.startUs = interval.lowerBound
                        $0.endUs = interval.upperBound
                    }
                }
                try await raw.send(try Self.request(id, .queryChanges, server.ownerCredential, request, window: .max))
                let (frames, status) = await Self.frames(until: id, on: raw)
                #expect(status?.code == .ok)
                return try frames.compactMap { frame in
                    guard frame.callID == id, case .message(let bytes) = frame.kind else { return nil }
                    return try Healthledger_V1_ChangeBatch(serializedBytes: bytes)
                }
            }
            let whole = try await batches(batchSize: 1_000)
            #expect(whole.map(\.added.count) == [128, 256, 512, 104])
            #expect(whole.map(\.caughtUp) == [false, false, false, true] && !whole.contains(where: \.hasMore_p))
            #expect(try await batches(batchSize: 100).map(\.added.count) == Array(repeating: 100, count: 10))
            // The default batch_size (500) caps the third batch; a limit ends the second.
            #expect(try await batches(batchSize: 0).map(\.added.count) == [128, 256, 500, 116])
            let limited = try await batches(limit: 300, batchSize: 0)
            #expect(limited.map(\.added.count) == [128, 172] && limited.map(\.hasMore_p) == [false, true])
            // Each batch's anchor resumes after it: from the first's, the other 872 follow.
            let rest = try await batches(batchSize: 1_000, anchor: whole[0].anchor)
            #expect(rest.map(\.added.count) == [128, 256, 488])
            #expect(whole[0].added + rest.flatMap(\.added) == whole.flatMap(\.added))

            // A watch's initial batches follow the same sequence, and its next batch the one after.
            id += 1
            let watch = id
            let request = Healthledger_V1_ChangeQueryRequest.with {
                $0.type = Self.heartRate
                $0.batchSize = 1_000
            }
            try await raw.send(try Self.request(watch, .watchChanges, server.ownerCredential, request, window: .max))
            var sizes: [Int] = []
            while sizes.count < 5, let frame = await Self.next(raw) {
                guard frame.callID == watch, case .message(let bytes) = frame.kind else {
                    Issue.record("\(frame)")
                    break
                }
                let batch = try Healthledger_V1_ChangeBatch(serializedBytes: bytes)
                sizes.append(batch.added.count)
                if batch.caughtUp, sizes.count == 4 {
                    // Caught up: 600 more, in one batch under 1,000.
                    try await server.client().save((0..<600).map { Samples.heartRate(70, at: Double(100_000 + $0 * 60)) })
                }
            }
            #expect(sizes == [128, 256, 512, 104, 600])
            try await raw.send(Self.control(watch) { $0.cancel = .init() })
            #expect(await raw.status(of: watch)?.code == .cancelled)

            // A batch also ends once its objects' encoding reaches 1 MiB, which it may exceed by one.
            let metadata = Dictionary(uniqueKeysWithValues: (0..<4).map { ("k\($0)", MetadataValue.string(String(repeating: "x", count: 4_000))) })
            let later = 10_000_000.0
            try await server.client().save((0..<100).map { Samples.heartRate(80, at: later + Double($0), metadata: metadata) })
            let start = Int64((Samples.base.timeIntervalSince1970 + later) * 1_000_000)
            let heavy = try await batches(batchSize: 1_000, interval: start..<(start + 200_000_000))
            #expect(heavy.map(\.added.count).reduce(0, +) == 100 && heavy.count > 1 && heavy[0].added.count < 128)
            for batch in heavy.dropLast() {
                let objectSizes = try batch.added.map { (try $0.serializedBytes() as [UInt8]).count }
                #expect(objectSizes.dropLast().reduce(0, +) < 1 << 20 && objectSizes.reduce(0, +) >= 1 << 20, "\(objectSizes.count) objects")
            }
        }
    }

    // MARK: §4.10, §5: points and credentials

    @Test("§4.10/§5: a time after the head reads the head; a revoked credential cannot read the past; anchors of the present and of a view are interchangeable")
    func pointsAndCredentials() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let first = (0..<3).map { Samples.heartRate(60, at: Double($0)) }
            try await owner.save(first)
            let point = try server.ledger.head().sequence
            let later = Samples.heartRate(61, at: 100)
            try await owner.save(later)
            let query = AnchoredObjectQueryDescriptor(type: Types.heartRate)
            let future = try await owner.asOf(.time(Date().addingTimeInterval(86_400))).result(for: query)
            #expect(future.addedObjects.map(\.uuid) == (first + [later]).map(\.uuid), "a time after the head reads the head")

            // An anchor from a view, used on the present, goes on from the point; one from the present, used on a view at the head, finds nothing new.
            let past = try await owner.asOf(.sequence(point)).result(for: query)
            #expect(try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: past.newAnchor)).addedObjects.map(\.uuid) == [later.uuid])
            let present = try await owner.result(for: query)
            let head = try server.ledger.head().sequence
            #expect(try await owner.asOf(.sequence(head)).result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: present.newAnchor)).addedObjects.isEmpty)

            // A credential revoked now reads no past either.
            let second = try await server.ledger.issueCredential(for: .app(TestServer.appSource), label: "second")
            try await server.ledger.revokeCredential(id: credentialID(second))
            await expectRPCError(.unauthenticated, nil, "as of, revoked") { _ = try await server.client(second).asOf(.sequence(point)).result(for: query) }
            let failure = await expectRPCError(.unauthenticated, nil, "a garbage credential") { _ = try await server.client("hl1:alice:" + String(repeating: "0", count: 16) + ":" + String(repeating: "x", count: 240)).ping() }
            #expect(failure?.message == "the credential is invalid or unknown")
            await owner.close()
        }
        // The views the server keeps (§4.10) and how often it looks for other processes' events (§5.2), as healthledgerd configures its store.
        let defaults = LedgerConfiguration()
        #expect(defaults.viewCapacity == 8 && defaults.viewDiskLimit == 8 << 30 && defaults.viewIdleLifetime == .seconds(600))
        #expect(defaults.followInterval == .milliseconds(250))
    }

    // MARK: §9: the daemon's limits

    @Test("§9: healthledgerd takes its limits from flags and the environment, and refuses limits below their minimum")
    func daemonLimits() async throws {
        try await withTestServer { server in
            for flags in [["--max-frame-size", "1000"], ["--max-calls", "0"], ["--idle-timeout", "0"]] {
                let refused = await #expect(throws: DaemonProcess.DaemonFailure.self) { _ = try await DaemonProcess(dataDirectory: server.directory, arguments: flags) }
                #expect(refused?.message.contains("--max-frame-size must be at least 1024, --max-calls at least 1 and --idle-timeout at least 1") == true, "\(flags)")
            }
            let daemon = try await DaemonProcess(
                dataDirectory: server.directory, arguments: ["--max-frame-size", "2048"], environment: ["HEALTHLEDGER_MAX_CALLS": "1"])
            defer { daemon.stop() }
            let raw = try await RawConnection(port: daemon.port)
            try await raw.send(try Self.request(1, .watchChanges, server.ownerCredential, Healthledger_V1_ChangeQueryRequest.with { $0.type = Self.heartRate }))
            try await raw.send(try Self.request(2, .ping, server.ownerCredential, Healthledger_V1_PingRequest()))
            let (_, refused) = await Self.frames(until: 2, on: raw)
            #expect(refused?.code == .resourceExhausted && refused?.message == "1 call is already open on this connection, its limit")
            try await raw.send(try Self.pingFrame(id: 3, credential: server.ownerCredential, bodySize: 2049))
            var goAway: Healthledger_V1_GoAway?
            while let frame = await Self.next(raw) {
                if case .goAway(let away) = frame.kind { goAway = away }
            }
            #expect(goAway?.reason == "frame of 2049 bytes exceeds the limit of 2048 bytes")

            // Idle for a second with no call open: the go-away, then the close. (A daemon of its
            // own: the connections above must not close for idleness however slow the machine.)
            let idler = try await DaemonProcess(dataDirectory: server.directory, environment: ["HEALTHLEDGER_IDLE_TIMEOUT": "1"])
            defer { idler.stop() }
            let idle = try await RawConnection(port: idler.port)
            let frame = await Self.next(idle)
            guard case .goAway(let away)? = frame?.kind else { Issue.record("no go-away: \(String(describing: frame))"); return }
            #expect(away.reason.hasPrefix("the connection was idle for 1") && away.lastCallID == 0)
            #expect(await Self.next(idle) == nil)
        }
    }
}
