import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import LedgerSchema
import Ledger
import Logging
import NIOCore
import NIOPosix
import Testing

@Suite("End to end: server and SDK", .timeLimit(.minutes(3)))
struct EndToEndTests {
    @Test("a small save is answered from its commit with no task, a large one from a task: the same answers; each refusal still gets its status")
    func savesOnCommitAndInTasks() async throws {
        #expect(MethodTable.answersOnCommit(.save) && !MethodTable.answersOnCommit(.delete))
        try await withTestServer { server in
            let store = server.client()
            let small = (0..<10).map { Samples.heartRate(70, at: Double($0)) }
            let large = (0..<1000).map { Samples.heartRate(80, at: Double(100 + $0)) }
            // 1,000 samples are more than the server prepares on its event loop.
            #expect(HealthObject.encodedMessage(of: large).count > CallDispatcher.largestPayloadPreparedOnLoop)
            #expect(HealthObject.encodedMessage(of: small).count < CallDispatcher.largestPayloadPreparedOnLoop)
            async let first = store.save(small)
            async let second = store.save(large)
            let (smallResults, largeResults) = try await (first, second)
            #expect(smallResults.map(\.uuid) == small.map(\.uuid) && smallResults.allSatisfy { $0.disposition == .saved })
            #expect(largeResults.map(\.uuid) == large.map(\.uuid) && largeResults.allSatisfy { $0.disposition == .saved })
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: store).count == 1010)
            // Refused in the commit (a UUID saved already), before it (a bad credential), and as of
            // a past point (which goes to a task, and is refused there).
            let again = await #expect(throws: RPCError.self) { try await store.save([small[0]]) }
            #expect(again?.code == .alreadyExists)
            let stranger = await #expect(throws: RPCError.self) { try await server.client("nobody").save([Samples.heartRate(60, at: 5000)]) }
            #expect(stranger?.code == .unauthenticated)
            let past = await #expect(throws: RPCError.self) { try await store.asOf(.sequence(1)).save([Samples.heartRate(60, at: 6000)]) }
            #expect(past?.code == .invalidArgument)
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: store).count == 1010, "nothing refused was saved")
        }
    }

    @Test("a write handed to the ledger commits whatever comes after: a cancel or a passed deadline leaves it its own status, small or large")
    func writesOutliveCancelAndDeadline() async throws {
        try await withTestServer { server in
            let raw = try await RawConnection(port: server.port)
            var expected = 0
            var bytes: [UInt8] = []
            // Odd ids: a small save (answered on commit) and a large one (in a task), each once
            // cancelled in the same write as its request and once with a 1 ms deadline.
            for (index, count) in [10, 1000, 10, 1000].enumerated() {
                let id = UInt64(2 * index + 1)
                let samples = (0..<count).map { Samples.heartRate(70, at: Double(index * 10_000 + $0)) }
                expected += count
                var request = BadInputTests.request(id, RPCMethod.save.rawValue, credential: server.ownerCredential, payload: HealthObject.encodedMessage(of: samples))
                if index >= 2 { request.request.timeoutMs = 1 }
                bytes += RawConnection.encode(request)
                if index < 2 {
                    var cancel = Healthledger_V1_Frame()
                    cancel.callID = id
                    cancel.cancel = .init()
                    bytes += RawConnection.encode(cancel)
                }
            }
            try await raw.send(bytes)
            var statuses: [UInt64: Healthledger_V1_CallStatus] = [:]
            while statuses.count < 4, let frame = await raw.next() {
                if case .frame(let frame) = frame, case .status(let status) = frame.kind { statuses[frame.callID] = status }
            }
            #expect(statuses.keys.sorted() == [1, 3, 5, 7])
            #expect(statuses.values.allSatisfy { $0.code == .ok }, "\(statuses.values.map(\.message))")
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: server.client()).count == expected)
            await raw.close()
        }
    }

    @Test("calls from a task preferring the store's executor run on its connection's event loop, and resume there: a save, a query, a stream")
    func callsOnTheStoresExecutor() async throws {
        try await withTestServer { server in
            let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let loop = loops.next()
            let store = HealthStore(configuration: .init(port: server.port, credential: server.ownerCredential), group: loops)
            let samples = (0..<300).map { Samples.heartRate(60 + Double($0 % 40), at: Double($0)) }
            let threads = try await withTaskExecutorPreference(store.executor) {
                var onLoop = [loop.inEventLoop]
                for sample in samples.prefix(50) {
                    try await store.save(sample)
                    onLoop.append(loop.inEventLoop)
                }
                try await store.save(Array(samples.dropFirst(50)))
                onLoop.append(loop.inEventLoop)
                let found = try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: store)
                #expect(found.map(\.uuid) == samples.map(\.uuid))
                onLoop.append(loop.inEventLoop)
                var streamed = 0
                for try await batch in try await SampleQueryDescriptor(type: Samples.heartRate.objectType, batchSize: 16).results(for: store) {
                    streamed += batch.count
                    onLoop.append(loop.inEventLoop)
                }
                #expect(streamed == samples.count)
                return onLoop
            }
            #expect(threads.count > 50 && threads.allSatisfy { $0 }, "every step of the task ran on the connection's loop")
            // The same store from a task on the default executor.
            #expect(!loop.inEventLoop)
            #expect(try await store.ping().principal == "owner")
            await store.close()
            try await loops.shutdownGracefully()
        }
    }

    @Test("save, fetch, query and delete through the SDK")
    func roundTrip() async throws {
        try await withTestServer { server in
            let store = server.client(server.appCredential)
            let ping = try await store.ping()
            #expect(ping.ledgerID == "alice" && ping.principal == "app com.example.walk")

            let samples = (0..<1200).map { Samples.heartRate(Double(60 + $0 % 50), at: Double($0) * 60) }
            let outcomes = try await store.save(samples)
            #expect(outcomes.map(\.uuid) == samples.map(\.uuid))
            #expect(outcomes.allSatisfy { $0.disposition == .saved })

            let fetched = try #require(try await store.object(with: samples[5].uuid))
            #expect(fetched.uuid == samples[5].uuid)
            #expect(fetched.sourceRevision.source == TestServer.appSource)
            #expect(try await store.object(with: UUID()) == nil)

            // 1,200 results arrive in batches of 500 (more than the initial window of batches is not needed here).
            let all = try await store.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
            #expect(all.map(\.uuid) == samples.map(\.uuid))
            var batches = 0
            for try await batch in try await store.results(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, batchSize: 50)) {
                #expect(batch.count <= 50)
                batches += 1
            }
            #expect(batches == 24)
            let window = DateInterval(start: Samples.base, duration: 600)
            let recent = try await store.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, interval: window, limit: 3, sort: .startDate(ascending: false)))
            #expect(recent.map(\.uuid) == samples[0..<10].reversed().prefix(3).map(\.uuid))

            #expect(try await store.delete([samples[0].uuid, samples[1].uuid]) == 2)
            #expect(try await store.deleteObjects(of: Samples.heartRate.objectType, overlapping: window) == 8)
            #expect(try await store.object(with: samples[0].uuid) == nil)

            await store.close()
        }
    }

    @Test("errors carry the status and HealthKit's code")
    func errors() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let saved = Samples.heartRate(70, at: 0)
            try await owner.save(saved)

            // Another source's object: unknown to an app that may not read the type…
            let hidden = await #expect(throws: RPCError.self) { try await app.delete([saved.uuid]) }
            #expect(hidden?.code == .notFound && hidden?.healthErrorCode == .noData)
            // …and not the app's to delete once it may read it.
            try await app.requestAuthorization(toShare: [], read: [Samples.heartRate.objectType])
            try await owner.decideAuthorization(app: TestServer.appSource.bundleIdentifier, type: Samples.heartRate.objectType, direction: .read, decision: .granted)
            let denied = await #expect(throws: RPCError.self) { try await app.delete([saved.uuid]) }
            #expect(denied?.code == .permissionDenied && denied?.healthErrorCode == .authorizationDenied)
            let missing = await #expect(throws: RPCError.self) { try await owner.delete([UUID()]) }
            #expect(missing?.code == .notFound && missing?.healthErrorCode == .noData)
            // A UUID the ledger holds, live or deleted, is ALREADY_EXISTS; one repeated within the save is a bad request.
            let duplicate = await #expect(throws: RPCError.self) { try await owner.save([Samples.heartRate(71, at: 2), saved]) }
            #expect(duplicate?.code == .alreadyExists && duplicate?.healthErrorCode == .invalidArgument)
            #expect(duplicate?.message == "object 1: an object with UUID \(saved.uuid) already exists")
            let gone = Samples.heartRate(72, at: 3)
            try await owner.save(gone)
            try await owner.delete([gone.uuid])
            let deleted = await #expect(throws: RPCError.self) { try await owner.save(gone) }
            #expect(deleted?.code == .alreadyExists && deleted?.healthErrorCode == .invalidArgument)
            let fresh = Samples.heartRate(73, at: 4)
            let repeated = await #expect(throws: RPCError.self) { try await owner.save([fresh, fresh]) }
            #expect(repeated?.code == .invalidArgument && repeated?.message.contains("appears twice") == true)
            let bad = HealthObject.quantitySample(QuantitySample(
                type: Samples.heartRate, quantity: try Quantity(70, "count/min"), start: Samples.base, end: Samples.base.addingTimeInterval(-5)))
            let invalid = await #expect(throws: RPCError.self) { try await owner.save([Samples.heartRate(1, at: 1), bad]) }
            #expect(invalid?.code == .invalidArgument && invalid?.message.contains("endDate") == true)
            #expect(try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == 1, "the batch wrote nothing")

            for credential in ["", "hl1:alice:0000000000000000:nope", "hl1:bob:\(server.appCredential.split(separator: ":")[2]):x"] {
                let stranger = server.client(credential)
                let refused = await #expect(throws: RPCError.self) { try await stranger.ping() }
                #expect(refused?.code == .unauthenticated)
                await stranger.close()
            }

            // Revocation takes effect on the open connection's next call.
            #expect(try await app.ping().ledgerID == "alice")
            try await server.ledger.revokeCredential(id: String(server.appCredential.split(separator: ":")[2]))
            let revoked = await #expect(throws: RPCError.self) { try await app.ping() }
            #expect(revoked?.code == .unauthenticated)

            await owner.close()
            await app.close()
        }
    }

    @Test("sync-identifier upsert over the wire")
    func syncUpsert() async throws {
        // `throws` spelled out: its only `try`s are inside `#expect`, which does not make a closure throwing.
        try await withTestServer { server throws in
            let store = server.client(server.appCredential)
            func weight(_ version: Double) -> HealthObject {
                .quantitySample(QuantitySample(
                    type: try! QuantityType("HKQuantityTypeIdentifierBodyMass"), quantity: try! Quantity(70 + version, "kg"),
                    start: Samples.base, end: Samples.base,
                    metadata: [MetadataKey.syncIdentifier: .string("w"), MetadataKey.syncVersion: .number(version)]))
            }
            let first = weight(1)
            let second = weight(2)
            #expect(try await store.save(first).disposition == .saved)
            #expect(try await store.save(second).disposition == .replaced(previous: first.uuid))
            #expect(try await store.save(weight(2)).disposition == .ignored(existing: second.uuid))
            await store.close()
        }
    }

    @Test("keepalive pings keep a quiet connection open past the server's idle timeout")
    func keepalive() async throws {
        // A ping after each quiet second against an idle timeout of 12 s, its pong due
        // within 10 s: only a machine stalled for ten seconds fails this. (A full parallel
        // run of the suite on two cores once delayed a pong past one second.)
        try await withTestServer(configuration: ServerConfiguration(port: 0, idleTimeout: .seconds(12))) { server in
            var configuration = HealthStoreConfiguration(
                port: server.port, credential: server.ownerCredential, connectAttempts: 1, keepaliveInterval: .seconds(1), keepaliveTimeout: .seconds(10))
            let kept = HealthStore(configuration: configuration)
            configuration.keepaliveInterval = nil
            let quiet = HealthStore(configuration: configuration)
            for try await _ in try await kept.results(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)) {}
            _ = try await quiet.ping()
            #expect(server.server.openConnections == 2)
            // The server closes the quiet connection once it idles (no wall-clock bound here: the
            // suite's time limit is the only one)…
            while server.server.openConnections > 1 { try await Task.sleep(for: .milliseconds(50)) }
            // …while the kept one, as old, lives on, on its first connection.
            #expect(server.server.openConnections == 1)
            #expect(try await kept.ping().ledgerID == "alice")
            #expect(server.server.openConnections == 1, "the kept store did not need a new connection")
            await kept.close()
            await quiet.close()
        }
    }

    @Test("a keepalive ping left unanswered (a server that reads and never answers) closes the connection: the call open on it fails unavailable")
    func unansweredKeepalive() async throws {
        // Accepts connections and reads whatever comes, answering nothing.
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        let store = HealthStore(configuration: HealthStoreConfiguration(
            port: port, credential: "hl1:alice:0123456789abcdef:secret", timeout: .seconds(600), connectAttempts: 1,
            keepaliveInterval: .milliseconds(200), keepaliveTimeout: .milliseconds(300)))
        let error = await expectRPCError(.unavailable, nil, "a call on a connection whose keepalive went unanswered") { _ = try await store.ping() }
        #expect(error?.message == "the server did not answer a keepalive ping")
        await store.close()
        try await silent.close()
    }

    @Test("with a limit of one call per connection, strictly sequential calls are never refused: a call's slot is free before its status leaves (pings, a query, saves answered on commit)")
    func sequentialCallsAtTheLimit() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, maximumConcurrentCalls: 1)) { server in
            let store = server.client()
            for _ in 0..<2_000 { _ = try await store.ping() }
            #expect(try await store.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).isEmpty)
            // Small saves, answered from the committing thread: their slots too.
            for index in 0..<300 { _ = try await store.save(Samples.heartRate(60, at: Double(index))) }
            #expect(try await store.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == 300)
            await store.close()
        }
    }

    @Test("run() closes its listener and its connections when its task is cancelled")
    func cancelledRun() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-run-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LedgerStore(directory: directory)
        let credential = try await store.createLedger(id: "alice").issueCredential(for: .owner)
        let server = RPCServer(store: store, configuration: ServerConfiguration(port: 0), logger: Logger(label: "test"))
        let running = Task { try await server.run() }
        // Polled, not timed: the suite's time limit is the only bound.
        while server.localAddress == nil { try await Task.sleep(for: .milliseconds(20)) }
        let port = try #require(server.localAddress?.port)
        let client = HealthStore(configuration: .init(port: port, credential: credential, connectAttempts: 1))
        #expect(try await client.ping().ledgerID == "alice")

        running.cancel()
        try await running.value
        #expect(server.localAddress == nil && server.openConnections == 0)
        let late = HealthStore(configuration: .init(port: port, credential: credential, connectAttempts: 1))
        await expectRPCError(.unavailable, nil, "a call after the run ended") { _ = try await late.ping() }
        await client.close()
        await late.close()
    }

    @Test("many concurrent clients")
    func concurrentClients() async throws {
        try await withTestServer { server in
            let credential = server.ownerCredential
            let port = server.port
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<16 {
                    group.addTask {
                        let store = HealthStore(configuration: .init(port: port, credential: credential))
                        for index in 0..<20 { try await store.save(Samples.heartRate(60, at: Double(client * 100 + index))) }
                        await store.close()
                    }
                }
                try await group.waitForAll()
            }
            #expect(try server.ledger.count(of: Samples.heartRate.objectType) == 320)
        }
    }

    @Test("deadlines and cancellation")
    func deadlinesAndCancel() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save((0..<5000).map { Samples.heartRate(60, at: Double($0)) })
            // A consumer that stops after one batch cancels the stream; the connection stays usable.
            for try await batch in try await owner.results(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, batchSize: 10)) {
                #expect(batch.count == 10)
                break
            }
            #expect(try await owner.ping().ledgerID == "alice")
            // A task cancelled mid-call ends with cancelled.
            let task = Task { try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, batchSize: 1)) }
            task.cancel()
            let cancelled = await #expect(throws: (any Error).self) { try await task.value }
            #expect(cancelled is RPCError || cancelled is CancellationError)
            // A tiny deadline: a slow stream (the consumer never reads) is ended by the server.
            let hurried = server.client(timeout: .milliseconds(200))
            let stream = try await hurried.results(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, batchSize: 1))
            try await Task.sleep(for: .milliseconds(500))
            let late = await #expect(throws: RPCError.self) { for try await _ in stream {} }
            #expect(late?.code == .deadlineExceeded)
            await hurried.close()
            await owner.close()
        }
    }

    @Test("graceful shutdown lets calls in flight finish and refuses new ones")
    func gracefulShutdown() async throws {
        // Generous deadlines: this is about the drain, and a loaded machine is slow.
        try await withTestServer(configuration: ServerConfiguration(port: 0, drainTimeout: .seconds(600))) { server in
            let owner = server.client(timeout: .seconds(120))
            try await owner.save((0..<5000).map { Samples.heartRate(60, at: Double($0)) })
            // A streaming call is in flight: the server waits on its window after 16 batches.
            var iterator = try await owner.results(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, batchSize: 100)).makeAsyncIterator()
            var received = try #require(try await iterator.next()).count
            let shutdown = Task { await server.server.shutdown() }
            // New calls are refused once the drain has begun (on a loaded machine the shutdown
            // task may start late: until then pings are answered)…
            var refused: RPCError?
            while refused == nil {
                do {
                    _ = try await owner.ping()
                    try await Task.sleep(for: .milliseconds(20))
                } catch let error as RPCError {
                    refused = error
                }
            }
            #expect(refused?.code == .unavailable)
            // …while the call in flight runs to its end.
            while let batch = try await iterator.next() { received += batch.count }
            #expect(received == 5000)
            await shutdown.value
            await owner.close()
        }
    }
}
