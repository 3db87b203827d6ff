import Foundation
import HealthLedgerReplica
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import LedgerSchema
import Logging
import NIOCore
import NIOPosix
import SwiftProtobuf
import TestSupport
import Testing

/// A follower server beside a test's primary: its own store, an RPC server that refuses
/// writes naming the primary, and a ``PrimaryFollower`` tailing the primary's ledgers.
private final class FollowerServer: @unchecked Sendable {
    let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-follower-\(UUID().uuidString)")
    let store: LedgerStore
    let server: RPCServer
    let port: Int
    private let follower: PrimaryFollower
    private var following: Task<Void, any Error>

    init(primary: TestServer, name: String = "follower-1", wait: Duration = .seconds(2), idleAfter: Duration = .seconds(4)) async throws {
        store = try LedgerStore(directory: directory, configuration: try .forTests())
        var configuration = ServerConfiguration(port: 0)
        configuration.primaryAddress = "127.0.0.1:\(primary.port)"
        server = RPCServer(store: store, configuration: configuration, logger: Logger(label: "follower"))
        port = try await server.start().port!
        let credential = try primary.store.issueOperatorCredential(label: "replication")
        let follower = PrimaryFollower(
            store: store, primary: .init(port: primary.port, credential: credential, timeout: .seconds(60)), name: name,
            logger: Logger(label: "follower"), wait: wait, idleAfter: idleAfter)
        self.follower = follower
        following = Task { try await follower.run() }
    }

    /// Follows again after ``stopFollowing()``.
    func startFollowing() {
        following = Task { [follower] in try await follower.run() }
    }

    /// Waits until this follower's copy of `ledger` has every event the primary's has now
    /// (giving up after ten minutes, so that a broken follower fails the test rather than hangs it).
    func caughtUp(with ledger: Ledger) async throws -> Ledger {
        let head = try ledger.head()
        for _ in 0..<30_000 {
            if let copy = try? store.ledger(ledger.id), try copy.head() == head { return copy }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LedgerFailure(.storage, "the follower did not catch up with event \(head.sequence)")
    }

    func client(_ credential: String) -> HealthStore {
        HealthStore(configuration: .init(port: port, credential: credential, timeout: .seconds(120)))
    }

    func stopFollowing() async {
        following.cancel()
        _ = await following.result
    }

    func stop() async {
        await stopFollowing()
        await server.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A loopback port nothing listens on (bound, then closed).
private func closedPort() async throws -> Int {
    let socket = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
    let port = socket.localAddress!.port!
    try await socket.close()
    return port
}

@Suite("Replication: a follower tails its primary's log")
struct ReplicationTests {
    /// A primary whose writes wait for a connected follower as long as a loaded machine may
    /// take: the tests assert what a semi-synchronous answer means, not how soon it comes.
    static var patientPrimary: ServerConfiguration {
        var configuration = ServerConfiguration(port: 0)
        configuration.followerWindow = .seconds(600)
        return configuration
    }

    @Test("a follower tails only the ledgers in use: the primary closes the others, and a write to one of them is on the follower when answered")
    func idleLedgersClose() async throws {
        var ledgers = LedgerConfiguration()
        ledgers.ledgerIdleLifetime = .milliseconds(200)
        try await withTestServer(configuration: Self.patientPrimary, ledgers: ledgers) { primary in
            let ids = (1...24).map { "patient-\($0)" }
            var owners: [String] = []
            for id in ids { owners.append(try await primary.store.createLedger(id: id).issueCredential(for: .owner)) }
            let follower = try await FollowerServer(primary: primary, wait: .milliseconds(500), idleAfter: .seconds(1))
            do {
                /// A semi-synchronous save to `id`, which the follower has when it is answered.
                func save(to index: Int, _ value: Double) async throws {
                    let owner = HealthStore(configuration: .init(port: primary.port, credential: owners[index], timeout: .seconds(120)))
                    defer { Task { await owner.close() } }
                    try await owner.save(Samples.heartRate(value, at: value))
                    #expect(try follower.store.ledger(ids[index]).head() == primary.store.ledger(ids[index]).head())
                }
                // A first watch names every ledger: each is copied.
                for id in ids { _ = try await follower.caughtUp(with: try primary.store.ledger(id)) }
                for index in ids.indices { try await save(to: index, 60) }

                /// Returns once none of the ledgers is open on the primary: their tails stopped.
                func allClosed() async throws -> Bool {
                    for _ in 0..<6_000 {
                        if !ids.contains(where: primary.store.isOpenInProcess) { return true }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    return false
                }
                #expect(try await allClosed(), "the primary still holds \(ids.filter(primary.store.isOpenInProcess))")

                // A write to a closed ledger: the follower hears of it, tails it, and has it
                // when the save is answered (the primary waits for a follower watching it).
                let before = try follower.store.ledger(ids[16]).head().sequence
                try await save(to: 16, 61)
                #expect(try follower.store.ledger(ids[16]).head().sequence > before)
                #expect(try await allClosed())
            } catch {
                await follower.stop()
                throw error
            }
            await follower.stop()
        }
    }

    @Test("a follower copies a ledger byte for byte; a semi-synchronous save is on it when answered; writes to it are refused naming the primary")
    func followerCopiesTheLedger() async throws {
        try await withTestServer(configuration: Self.patientPrimary) { primary in
            let owner = primary.client()
            try await owner.save(Samples.heartRate(61, at: 0, metadata: ["marker": .string("before-the-follower")]))
            let follower = try await FollowerServer(primary: primary)
            do {
                // A new follower starts from a snapshot, then tails the log.
                let copy = try await follower.caughtUp(with: primary.ledger)
                #expect(try copy.projectionDigest() == primary.ledger.projectionDigest())

                // Semi-synchronous: once answered, the follower has it durable.
                for value in 62...71 {
                    try await owner.save(Samples.heartRate(Double(value), at: Double(value)))
                    #expect(try copy.head() == primary.ledger.head())
                }
                let batch = (0..<500).map { Samples.heartRate(80, at: 1_000 + Double($0)) }
                try await owner.save(batch)
                #expect(try copy.head() == primary.ledger.head())
                #expect(try copy.projectionDigest() == primary.ledger.projectionDigest())
                #expect(try copy.verify().isValid)

                // The follower serves reads with the ledger's own credentials (they are in its log).
                let reader = follower.client(primary.ownerCredential)
                let samples = try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
                #expect(samples.count == 511)

                // And refuses writes, naming the primary in the status.
                let raw = try await RawConnection(port: follower.port)
                let save = Samples.heartRate(99, at: 5_000)
                try await raw.send(Healthledger_V1_Frame.with {
                    $0.callID = 1
                    $0.request = .with {
                        $0.method = RPCMethod.save.rawValue
                        $0.credential = primary.ownerCredential
                        $0.payload = Data(HealthObject.encodedMessage(of: [save]))
                    }
                })
                let status = await raw.status(of: 1)
                #expect(status?.code == .failedPrecondition)
                #expect(status?.primary == "127.0.0.1:\(primary.port)")
                await raw.close()
                #expect(try primary.ledger.object(with: save.uuid, as: .owner) == nil)

                // The SDK follows the refusal to the primary and sends the save there.
                try await reader.save(save)
                #expect(try primary.ledger.object(with: save.uuid, as: .owner) != nil)
                #expect(try copy.head() == primary.ledger.head())
                await reader.close()

                // A store whose first server is gone tries the others.
                let unreachable = try await closedPort()
                let roaming = HealthStore(
                    configuration: .init(
                        port: unreachable, credential: primary.ownerCredential, timeout: .seconds(120), connectAttempts: 1,
                        otherServers: ["127.0.0.1:\(follower.port)"]))
                #expect(try await roaming.ping().ledgerID == "alice")
                try await roaming.save(Samples.heartRate(98, at: 5_001))
                #expect(try copy.head() == primary.ledger.head())
                await roaming.close()
            } catch {
                await follower.stop()
                throw error
            }
            await follower.stop()
            await owner.close()
        }
    }

    @Test("erasures, revocations and authorization changes reach the follower like any event")
    func erasureAndRevocationReplicate() async throws {
        try await withTestServer(configuration: Self.patientPrimary) { primary in
            let owner = primary.client()
            let app = primary.client(primary.appCredential)
            let follower = try await FollowerServer(primary: primary)
            do {
                _ = try await follower.caughtUp(with: primary.ledger)
                let marked = Samples.heartRate(64, at: 10, metadata: ["marker": .string("erase-me-on-every-copy")])
                try await app.save(marked)
                try await owner.save(Samples.heartRate(65, at: 20))
                let copy = try await follower.caughtUp(with: primary.ledger)
                // The app may read on the follower what it may read on the primary.
                let appOnFollower = follower.client(primary.appCredential)
                _ = try await appOnFollower.ping()

                // A stream open on the follower with a second owner credential, revoked on the primary below.
                let watcherCredential = try await primary.ledger.issueCredential(for: .owner)
                _ = try await follower.caughtUp(with: primary.ledger)
                let watcher = follower.client(watcherCredential)
                var watch = try await watcher.changes(for: AnchoredObjectQueryDescriptor(type: Samples.heartRate.objectType)).makeAsyncIterator()
                _ = try await watch.next()

                let erased = try await owner.erase(.objects([marked.uuid]), reason: "the person asked")
                #expect(erased.objects == 1)
                try await owner.revokeCredential(id: String(primary.appCredential.split(separator: ":")[2]))
                _ = try await follower.caughtUp(with: primary.ledger)
                #expect(try copy.projectionDigest() == primary.ledger.projectionDigest())
                #expect(try copy.verify().isValid)
                let events = try copy.events(from: 1, limit: 1_000)
                #expect(events.contains { $0.kind == .objectsErased })
                #expect(events.filter { $0.objectUUID == marked.uuid && $0.kind == .objectSaved }.allSatisfy { $0.isErased })
                if try LedgerConfiguration.testMasterKey() == nil {
                    let file = try Data(contentsOf: copy.directory.appending(path: "data.mdb"))
                    #expect(file.range(of: Data("erase-me-on-every-copy".utf8)) == nil)
                }
                try await owner.revokeCredential(id: String(watcherCredential.split(separator: ":")[2]))
                do {
                    while try await watch.next() != nil {}
                    Issue.record("a stream of a credential revoked on the primary ended without an error on the follower")
                } catch let error as RPCError {
                    #expect(error.code == .permissionDenied)
                }
                await watcher.close()
                do {
                    _ = try await appOnFollower.ping()
                    Issue.record("a revoked credential still works on the follower")
                } catch let error as RPCError {
                    #expect(error.code == .unauthenticated)
                }
                await appOnFollower.close()

                // A legal hold (not an event) comes with the fetches.
                try primary.ledger.setLegalHold(reason: "litigation 2026-17")
                for _ in 0..<30_000 where try copy.legalHold() == nil { try await Task.sleep(for: .milliseconds(20)) }
                #expect(try copy.legalHold() == "litigation 2026-17")
            } catch {
                await follower.stop()
                throw error
            }
            await follower.stop()
            await owner.close()
            await app.close()
        }
    }

    @Test("access records go both ways: a follower's reads reach the primary, the primary's (and those forwarded to it) the follower, each kept once; bad forwards and fetches are refused")
    func followerReadsReachThePrimary() async throws {
        try await withTestServer(configuration: Self.patientPrimary) { primary in
            let owner = primary.client()
            try await owner.save([Samples.heartRate(61, at: 0), Samples.heartRate(62, at: 60)])
            let follower = try await FollowerServer(primary: primary)
            do {
                let copy = try await follower.caughtUp(with: primary.ledger)
                let reader = follower.client(primary.ownerCredential)
                let samples = try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
                #expect(samples.count == 2)

                /// The records of `store` for QuerySamples calls, once there are any (waiting up to ten minutes).
                func querySamplesRecords(on store: HealthStore) async throws -> [AccessRecord] {
                    for _ in 0..<30_000 {
                        let records = try await store.accessRecords().records.filter { $0.methodName == "QuerySamples" }
                        if !records.isEmpty { return records }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    return []
                }
                // No one read the primary: its record of the read is the follower's.
                let onPrimary = try await querySamplesRecords(on: owner)
                #expect(onPrimary.count == 1)
                #expect(onPrimary.first?.objects == 2)
                #expect(onPrimary.first?.principal == .owner)
                #expect(onPrimary.first?.types == [Samples.heartRate.identifier])
                #expect(try await querySamplesRecords(on: reader) == onPrimary)
                for _ in 0..<30_000 {
                    if try copy.accessOutboxIsEmpty { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(try copy.accessOutboxIsEmpty)

                // A read on the primary reaches the follower's copy, beside the follower's own.
                _ = try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, limit: 1))
                var onFollower: [AccessRecord] = []
                for _ in 0..<30_000 {
                    onFollower = try await querySamplesRecords(on: reader)
                    if onFollower.count == 2 { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(onFollower.map(\.objects).sorted() == [1, 2])
                #expect(try await querySamplesRecords(on: owner) == onFollower)

                // Reads answered while the follower is away wait in the outbox, and go when it is back.
                await follower.stopFollowing()
                _ = try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType, limit: 1))
                try copy.flushAccessRecords()
                #expect(try !copy.accessOutboxIsEmpty)
                follower.startFollowing()
                for _ in 0..<30_000 {
                    if try await querySamplesRecords(on: owner).count == 3 { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(try await querySamplesRecords(on: owner).count == 3)
                await reader.close()
            } catch {
                await follower.stop()
                throw error
            }
            await follower.stop()

            // ForwardAccessRecords itself: a record forwarded twice is kept once, an expired
            // one not at all; malformed forwards are refused whole; only an operator forwards.
            let credential = try primary.store.issueOperatorCredential(label: "replication")
            let client = HealthStore(configuration: .init(port: primary.port, credential: credential))
            let now = Date()
            func forwarded(at time: Date, method: String = "healthledger.v1.Ledger/Statistics") -> ForwardedAccessRecord {
                var key = [UInt8](repeating: 0, count: 16)
                let microseconds = UInt64(bitPattern: LedgerSchema.microseconds(time)) ^ (1 << 63)
                for index in 0..<8 { key[index] = UInt8(truncatingIfNeeded: microseconds >> (56 - 8 * UInt64(index))) }
                key[15] = 1
                return ForwardedAccessRecord(
                    key: key, record: AccessRecord(time: time, credentialID: "c1", principal: .owner, method: method, types: [], objects: 3))
            }
            let record = forwarded(at: now)
            #expect(try await client.forwardAccessRecords(ledger: "alice", [record], follower: "f") == 1)
            #expect(try await client.forwardAccessRecords(ledger: "alice", [record], follower: "f") == 0)
            #expect(try await client.forwardAccessRecords(ledger: "alice", [forwarded(at: now.addingTimeInterval(-7 * 366 * 86_400))], follower: "f") == 0)
            var shifted = forwarded(at: now.addingTimeInterval(1))
            shifted.record.time = now.addingTimeInterval(-3_600)
            var short = forwarded(at: now.addingTimeInterval(2))
            short.key.removeLast()
            let future = forwarded(at: now.addingTimeInterval(3_600))
            let fine = forwarded(at: now.addingTimeInterval(3), method: "healthledger.v1.Ledger/Fetch")
            for (records, follower) in [
                ([shifted], "f"), ([short], "f"), ([forwarded(at: now, method: "")], "f"), ([future], "f"), ([fine, short], "f"), ([], "f"),
                ([forwarded(at: now)], ""),
            ] {
                do {
                    _ = try await client.forwardAccessRecords(ledger: "alice", records, follower: follower)
                    Issue.record("a malformed forward was answered")
                } catch let error as RPCError {
                    #expect(error.code == .invalidArgument)
                }
            }
            do {
                _ = try await primary.client().forwardAccessRecords(ledger: "alice", [forwarded(at: now)], follower: "f")
                Issue.record("an owner credential forwarded access records")
            } catch let error as RPCError {
                #expect(error.code == .unauthenticated)
            }
            let statistics = try await owner.accessRecords().records.filter { $0.methodName == "Statistics" }
            #expect(statistics.count == 1)
            // A batch refused is refused whole.
            #expect(try await owner.accessRecords().records.allSatisfy { $0.methodName != "Fetch" })

            // FetchAccessRecords: in order of arrival; a place that names another key starts
            // over from the first; malformed fetches refused.
            let all = try await client.fetchAccessRecords(ledger: "alice", after: 0, afterKey: [], follower: "f")
            #expect(!all.restarted && !all.hasMore && all.records.count == 4)
            #expect(all.records.last?.record.methodName == "Statistics")
            let stale = try await client.fetchAccessRecords(ledger: "alice", after: all.next, afterKey: Array(repeating: 7, count: 16), follower: "f")
            #expect(stale.restarted && stale.records == all.records)
            let after = try await client.fetchAccessRecords(ledger: "alice", after: all.next, afterKey: all.nextKey, follower: "f")
            #expect(!after.restarted && after.records.isEmpty)
            let firstTwo = try await client.fetchAccessRecords(ledger: "alice", after: 0, afterKey: [], limit: 2, follower: "f")
            #expect(firstTwo.hasMore && firstTwo.records == Array(all.records.prefix(2)))
            let beyond = try await client.fetchAccessRecords(ledger: "alice", after: all.next + 10, afterKey: all.nextKey, follower: "f")
            #expect(beyond.restarted && beyond.records == all.records)
            for (key, limit, follower) in [([UInt8](repeating: 1, count: 5), 0, "f"), ([], 10_001, "f"), ([], 0, "")] {
                do {
                    _ = try await client.fetchAccessRecords(ledger: "alice", after: 1, afterKey: key, limit: limit, follower: follower)
                    Issue.record("a malformed fetch of access records was answered")
                } catch let error as RPCError {
                    #expect(error.code == .invalidArgument)
                }
            }

            // `audit --reads --follow` shows a record forwarded after newer ones, in its time's
            // place, once: the reads on the follower and the primary, the Statistics record, then the late ones.
            let follow = try LineProcess(
                AuthCLITests.executable, ["audit", "--reads", "--follow", "--json", "--port", "\(primary.port)", "--credential", primary.ownerCredential])
            defer { follow.stop() }
            var methods: [String] = []
            while methods.count < 4, let line = try await follow.nextObject() { methods.append(line["method"] as? String ?? "") }
            #expect(methods == ["QuerySamples", "QuerySamples", "QuerySamples", "Statistics"])
            #expect(try await client.forwardAccessRecords(ledger: "alice", [forwarded(at: now.addingTimeInterval(-10), method: "healthledger.v1.Ledger/Characteristics")], follower: "f") == 1)
            #expect(try await follow.nextObject()?["method"] as? String == "Characteristics")
            #expect(try await client.forwardAccessRecords(ledger: "alice", [forwarded(at: now.addingTimeInterval(-9), method: "healthledger.v1.Ledger/AttachmentData")], follower: "f") == 1)
            #expect(try await follow.nextObject()?["method"] as? String == "AttachmentData")
            await client.close()
            await owner.close()
        }
    }

    @Test("a ledger erased whole on the primary is erased on its followers before the erasure is answered: a copy in use (its streams end), one of a follower that was away; a new follower records both; no snapshot of one is served")
    func ledgerErasureReplicates() async throws {
        try await withTestServer(configuration: Self.patientPrimary) { primary in
            let ops = primary.client(try primary.store.issueOperatorCredential(label: "ops"))
            var owners: [String: String] = [:]
            for id in ["bob", "dave"] {
                _ = try await ops.createLedger(id: id)
                owners[id] = try await ops.issueCredential(ledger: id, for: .owner)
                let owner = primary.client(owners[id])
                try await owner.save(Samples.heartRate(70, at: 0, metadata: ["marker": .string("erase-\(id)-everywhere")]))
                await owner.close()
            }
            let follower = try await FollowerServer(primary: primary)
            /// Waits until `condition` holds (giving up after ten minutes, so that a broken
            /// follower fails the test rather than hangs it).
            func eventually(_ condition: () throws -> Bool) async throws -> Bool {
                for _ in 0..<30_000 {
                    if try condition() { return true }
                    try await Task.sleep(for: .milliseconds(20))
                }
                return false
            }
            /// Whether `store` holds no copy of ledger `id` and records its erasure.
            func erased(_ id: String, in store: LedgerStore) throws -> Bool {
                try !store.ledgerIDs().contains(id) && store.wasErasedWhole(id)
            }
            do {
                for id in ["alice", "bob", "dave"] { _ = try await follower.caughtUp(with: try primary.store.ledger(id)) }
                // A stream open on the follower's copy of bob.
                let reader = follower.client(owners["bob"]!)
                var watch = try await reader.changes(for: AnchoredObjectQueryDescriptor(type: Samples.heartRate.objectType)).makeAsyncIterator()
                _ = try await watch.next()

                // A legal hold the follower copied, lifted on the primary just before the
                // erasure: the follower's copy goes all the same (the primary decided).
                try primary.store.ledger("bob").setLegalHold(reason: "audit 2026-3")
                #expect(try await eventually { try follower.store.ledger("bob").legalHold() != nil }, "the hold reaches the follower")
                try primary.store.ledger("bob").setLegalHold(reason: nil)
                // Semi-synchronous: answered once the follower erased its copy too.
                try await ops.eraseLedger("bob", reason: "left the service")
                #expect(try erased("bob", in: follower.store), "the follower still holds bob")
                await expectRPCError(.notFound, nil, "the stream on the follower's erased copy") { while try await watch.next() != nil {} }
                await expectRPCError(.unauthenticated, nil, "bob's owner on the follower") { _ = try await reader.ping() }
                await reader.close()

                // Erased while the follower is away (within the follower window): the erasure is
                // answered once the follower is back and has erased its copy.
                await follower.stopFollowing()
                async let erasing: Void = ops.eraseLedger("dave")
                try await Task.sleep(for: .milliseconds(200))
                follower.startFollowing()
                try await erasing
                #expect(try erased("dave", in: follower.store), "the follower still holds dave")
                #expect(try await follower.caughtUp(with: primary.ledger).verify().isValid, "the other ledgers go on")

                // A follower new to the primary records both erasures, holding neither.
                let newcomer = try await FollowerServer(primary: primary, name: "follower-2")
                do {
                    _ = try await newcomer.caughtUp(with: primary.ledger)
                    #expect(try await eventually { try erased("bob", in: newcomer.store) && erased("dave", in: newcomer.store) })
                    #expect(try newcomer.store.ledgerIDs() == ["alice"])
                } catch {
                    await newcomer.stop()
                    throw error
                }
                await newcomer.stop()
                // A snapshot of an erased ledger is refused (nothing of it is left to copy).
                await expectRPCError(.notFound, nil, "a snapshot of an erased ledger") {
                    _ = try await ops.fetchSnapshot(.with { $0.ledgerID = "bob" })
                }
            } catch {
                await follower.stop()
                throw error
            }
            await follower.stop()
            await ops.close()
        }
    }

    @Test("a copy holding events its primary does not have discards them (the last shared event found by the follower) and follows again")
    func divergedCopy() async throws {
        var configuration = ServerConfiguration(port: 0)
        configuration.replicationAcknowledgement = .asynchronous
        try await withTestServer(configuration: configuration) { primary in
            let owner = primary.client()
            let follower = try await FollowerServer(primary: primary)
            do {
                let kept = Samples.heartRate(60, at: 0)
                try await owner.save(kept)
                let copy = try await follower.caughtUp(with: primary.ledger)
                let shared = try copy.head()
                await follower.stopFollowing()
                // The copy takes writes of its own, as a cut-off primary might — an erasure of a
                // shared object among them; the primary others.
                let stray = Samples.heartRate(90, at: 100, metadata: ["marker": .string("no-one-acknowledged-me")])
                try await copy.save([stray], by: .owner)
                try await copy.save([Samples.heartRate(91, at: 101)], by: .owner)
                _ = try await copy.erase(.objects([kept.uuid]), reason: "never acknowledged", by: .owner)
                try await owner.save(Samples.heartRate(92, at: 102))
                #expect(try copy.object(with: kept.uuid, as: .owner) == nil)

                follower.startFollowing()
                let caught = try await follower.caughtUp(with: primary.ledger)
                #expect(try caught.object(with: stray.uuid, as: .owner) == nil)
                // The tail's erasure emptied a shared event: it came back from the primary whole.
                #expect(try caught.object(with: kept.uuid, as: .owner) != nil)
                #expect(try caught.projectionDigest() == primary.ledger.projectionDigest())
                #expect(try caught.verify().isValid)
                let log = try caught.events(from: shared.sequence + 1, limit: 10)
                #expect(log.count == 1 && log.allSatisfy { $0.objectUUID != stray.uuid })
            } catch {
                await follower.stop()
                throw error
            }
            await follower.stop()
            await owner.close()
        }
    }

    @Test("tree heads sign only what a connected follower has durable")
    func treeHeadsSignReplicatedHistory() async throws {
        var configuration = ServerConfiguration(port: 0)
        configuration.replicationAcknowledgement = .asynchronous
        configuration.followerWindow = .seconds(600)
        try await withTestServer(configuration: configuration) { primary in
            let owner = primary.client()
            #expect(try await owner.treeHead().size == primary.ledger.head().sequence)
            // A follower that has every event so far and waits on the primary for the next.
            let credential = try primary.store.issueOperatorCredential(label: "replication")
            let operatorClient = HealthStore(configuration: .init(port: primary.port, credential: credential, timeout: .seconds(120)))
            let replicated = try primary.ledger.head()
            let waiting = Task {
                try await operatorClient.fetchLog(ledger: "alice", after: replicated.sequence, hash: replicated.hash, wait: .seconds(30), follower: "slow")
            }
            while primary.ledger.followers.connected(within: .seconds(600)).isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            try await owner.save(Samples.heartRate(70, at: 0))
            _ = try await waiting.value
            // Saved (asynchronously), not yet acknowledged: the signed tree stops before it.
            #expect(try primary.ledger.head().sequence == replicated.sequence + 1)
            let head = try await owner.treeHead()
            #expect(head.size == replicated.sequence)
            // Acknowledged with the follower's next fetch: signed.
            let next = try primary.ledger.head()
            _ = try await operatorClient.fetchLog(ledger: "alice", after: next.sequence, hash: next.hash, wait: .zero, follower: "slow")
            #expect(try await owner.treeHead().size == next.sequence)
            await operatorClient.close()
            await owner.close()
        }
    }

    @Test("a follower that leaves holds no write up: the next is answered after the follower window")
    func followerThatLeaves() async throws {
        var configuration = ServerConfiguration(port: 0)
        configuration.followerWindow = .milliseconds(500)
        try await withTestServer(configuration: configuration) { primary in
            let owner = primary.client()
            let follower = try await FollowerServer(primary: primary)
            _ = try await follower.caughtUp(with: primary.ledger)
            await follower.stopFollowing()
            try await owner.save(Samples.heartRate(70, at: 0))
            try await owner.save(Samples.heartRate(71, at: 1))
            #expect(try follower.store.ledger(primary.ledger.id).head().sequence < primary.ledger.head().sequence)
            await follower.stop()
            await owner.close()
        }
    }

    @Test("the primary refuses a follower whose history is not its own, and bad fetches")
    func refusals() async throws {
        try await withTestServer { primary in
            let credential = try primary.store.issueOperatorCredential(label: "replication")
            let client = HealthStore(configuration: .init(port: primary.port, credential: credential))
            let head = try primary.ledger.head()
            let fetched = try await client.fetchLog(ledger: "alice", after: 0, hash: Array(repeating: 0, count: 32), wait: .zero, follower: "f")
            #expect(UInt64(fetched.events.count) == head.sequence)
            #expect(fetched.headSequence == head.sequence)
            await #expect(throws: RPCError.self) {
                try await client.fetchLog(ledger: "alice", after: 1, hash: Array(repeating: 7, count: 32), wait: .zero, follower: "f")
            }
            do {
                _ = try await client.fetchLog(ledger: "alice", after: 1, hash: Array(repeating: 7, count: 32), wait: .zero, follower: "f")
            } catch let error as RPCError {
                #expect(error.code == .outOfRange)
                #expect(error.message.contains("diverged"))
            }
            for (sequence, hash, follower) in [(UInt64(0), [UInt8](repeating: 0, count: 31), "f"), (0, [UInt8](repeating: 0, count: 32), "")] {
                do {
                    _ = try await client.fetchLog(ledger: "alice", after: sequence, hash: hash, wait: .zero, follower: follower)
                    Issue.record("a malformed fetch was answered")
                } catch let error as RPCError {
                    #expect(error.code == .invalidArgument)
                }
            }
            do {
                _ = try await client.fetchLog(ledger: "nobody", after: 0, hash: Array(repeating: 0, count: 32), wait: .zero, follower: "f")
                Issue.record("a fetch of an unknown ledger was answered")
            } catch let error as RPCError {
                #expect(error.code == .notFound)
            }
            // Only an operator credential fetches.
            let owner = HealthStore(configuration: .init(port: primary.port, credential: primary.ownerCredential))
            do {
                _ = try await owner.fetchLog(ledger: "alice", after: 0, hash: Array(repeating: 0, count: 32), wait: .zero, follower: "f")
                Issue.record("an owner credential fetched the log")
            } catch let error as RPCError {
                #expect(error.code == .unauthenticated)
            }
            // Snapshots: names checked, files read by plain names only.
            for request in [
                Healthledger_V1_FetchSnapshotRequest.with { $0.ledgerID = "alice"; $0.snapshotID = "../../etc"; $0.file = "passwd" },
                .with { $0.ledgerID = "alice"; $0.snapshotID = UUID().uuidString; $0.file = "data.mdb" },
            ] {
                do {
                    _ = try await client.fetchSnapshot(request)
                    Issue.record("a bad snapshot request was answered")
                } catch let error as RPCError {
                    #expect(error.code == .invalidArgument || error.code == .notFound)
                }
            }
            let taken = try await client.fetchSnapshot(.with { $0.ledgerID = "alice" })
            do {
                _ = try await client.fetchSnapshot(.with { $0.ledgerID = "alice"; $0.snapshotID = taken.snapshotID; $0.file = "../operators.json" })
                Issue.record("a snapshot read a file outside itself")
            } catch let error as RPCError {
                #expect(error.code == .notFound)
            }
            _ = try await client.fetchSnapshot(.with { $0.ledgerID = "alice"; $0.snapshotID = taken.snapshotID; $0.release = true })
            await client.close()
            await owner.close()
        }
    }
}

@Suite("Replication between healthledgerd processes")
struct ReplicationProcessTests {
    @Test("a follower of a follower: it copies every ledger (created later too, written to or not), its refusal of a write leads the SDK through the follower to the primary, and its reads reach the primary's records")
    func followerOfAFollower() async throws {
        let base = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-cascade-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let directories = (primary: base.appending(path: "primary"), middle: base.appending(path: "middle"), leaf: base.appending(path: "leaf"))
        let credentialFiles = (primary: base.appending(path: "primary-operator"), middle: base.appending(path: "middle-operator"))
        let (owner, operatorCredential): (String, String)
        do {
            let store = try LedgerStore(directory: directories.primary, configuration: try .forTests())
            owner = try await store.createLedger(id: "alice").issueCredential(for: .owner)
            try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
            operatorCredential = try store.issueOperatorCredential(label: "replication")
            try operatorCredential.write(to: credentialFiles.primary, atomically: true, encoding: .utf8)
            // The leaf follows the middle one: an operator credential of the middle one's own.
            try LedgerStore(directory: directories.middle, configuration: try .forTests()).issueOperatorCredential(label: "replication")
                .write(to: credentialFiles.middle, atomically: true, encoding: .utf8)
        }
        let primary = try await DaemonProcess(dataDirectory: directories.primary, arguments: ["--follower-window", "600"])
        defer { primary.stop() }
        let middle = try await DaemonProcess(
            dataDirectory: directories.middle,
            arguments: ["--follow", "127.0.0.1:\(primary.port)", "--follow-credential-file", credentialFiles.primary.path, "--node-name", "middle"])
        defer { middle.stop() }
        let leaf = try await DaemonProcess(
            dataDirectory: directories.leaf,
            arguments: ["--follow", "127.0.0.1:\(middle.port)", "--follow-credential-file", credentialFiles.middle.path, "--node-name", "leaf"])
        defer { leaf.stop() }
        func store(_ port: Int, _ credential: String) -> HealthStore {
            HealthStore(configuration: .init(port: port, credential: credential, timeout: .seconds(120)))
        }
        func count(on port: Int, _ credential: String) async throws -> Int {
            let reader = store(port, credential)
            defer { Task { await reader.close() } }
            return try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count
        }
        /// Whether the server at `port` comes to hold `expected` samples (polling for up to ten minutes).
        func holds(_ expected: Int, on port: Int, _ credential: String) async throws -> Bool {
            for _ in 0..<12_000 {
                if (try? await count(on: port, credential)) == expected { return true }
                try await Task.sleep(for: .milliseconds(50))
            }
            return false
        }
        let writer = store(primary.port, owner)
        defer { Task { await writer.close() } }
        for index in 0..<3 { try await writer.save(Samples.heartRate(60 + Double(index), at: Double(index))) }
        try #require(try await holds(3, on: leaf.port, owner))

        // Ledgers created on the primary afterwards reach the leaf through the middle one:
        // one written to, and one that has only its owner's credential (the middle one gets
        // it whole from a snapshot, with no commit of its own to tell the leaf).
        let operatorStore = store(primary.port, operatorCredential)
        defer { Task { await operatorStore.close() } }
        let bob = try await operatorStore.createLedger(id: "bob")
        let bobOwner = try await operatorStore.issueCredential(ledger: bob, for: .owner)
        let bobWriter = store(primary.port, bobOwner)
        defer { Task { await bobWriter.close() } }
        try await bobWriter.save(Samples.heartRate(70, at: 0))
        try #require(try await holds(1, on: leaf.port, bobOwner))
        let carolOwner = try await operatorStore.issueCredential(ledger: try await operatorStore.createLedger(id: "carol"), for: .owner)
        try #require(try await holds(0, on: leaf.port, carolOwner))

        // A save sent to the leaf: refused naming the middle one, whose refusal names the
        // primary; the SDK follows both and the save is on every copy.
        let roaming = store(leaf.port, owner)
        defer { Task { await roaming.close() } }
        try await roaming.save(Samples.heartRate(99, at: 100))
        #expect(try await count(on: primary.port, owner) == 4)
        try #require(try await holds(4, on: leaf.port, owner))

        // The leaf's reads reach the primary's records through the middle one: of alice's
        // queries, the primary answered one and the middle one none, the leaf at least two
        // (calls alike within a second share a record, counted in its calls).
        var queries: UInt64 = 0
        var polls = 0
        while queries < 3, polls < 12_000 {
            queries = try await writer.accessRecords().records.filter { $0.methodName == "QuerySamples" }.reduce(0) { $0 + $1.calls }
            polls += 1
            if queries < 3 { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(queries >= 3, "the leaf's reads never reached the primary's access records")
    }

    @Test("healthledgerd --follow serves the primary's ledgers, refuses writes, and after kill -9 resumes from its own head")
    func followerDaemon() async throws {
        let base = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-follow-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let (primaryDirectory, followerDirectory) = (base.appending(path: "primary"), base.appending(path: "follower"))
        let credentialFile = base.appending(path: "primary-operator")
        let owner: String
        do {
            let store = try LedgerStore(directory: primaryDirectory, configuration: try .forTests())
            owner = try await store.createLedger(id: "alice").issueCredential(for: .owner)
            try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
            try store.issueOperatorCredential(label: "replication").write(to: credentialFile, atomically: true, encoding: .utf8)
        }
        // A window no loaded machine's follower misses while the tests assert what a
        // semi-synchronous answer means; a short one (the primary restarted) for the kill below.
        var primary = try await DaemonProcess(dataDirectory: primaryDirectory, arguments: ["--follower-window", "600"])
        defer { primary.stop() }
        var follow = ["--follow", "127.0.0.1:\(primary.port)", "--follow-credential-file", credentialFile.path, "--node-name", "replica-1"]
        var follower = try await DaemonProcess(dataDirectory: followerDirectory, arguments: follow)
        var writer = HealthStore(configuration: .init(port: primary.port, credential: owner, timeout: .seconds(120)))
        defer {
            let last = writer
            Task { await last.close() }
        }
        func count(on port: Int) async throws -> Int {
            let reader = HealthStore(configuration: .init(port: port, credential: owner, timeout: .seconds(120)))
            defer { Task { await reader.close() } }
            return try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count
        }
        func caughtUp(_ expected: Int, on port: Int) async throws {
            for _ in 0..<6_000 {
                if (try? await count(on: port)) == expected { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            Issue.record("the follower never held \(expected) samples")
        }
        try await writer.save(Samples.heartRate(60, at: 0))
        try await caughtUp(1, on: follower.port)
        // Semi-synchronous: each save is on the follower when answered.
        for index in 1...10 {
            try await writer.save(Samples.heartRate(60, at: Double(index)))
            #expect(try await count(on: follower.port) == index + 1)
        }
        // The SDK sends a save the follower refuses to the primary the refusal names.
        do {
            let roaming = HealthStore(configuration: .init(port: follower.port, credential: owner))
            defer { Task { await roaming.close() } }
            try await roaming.save(Samples.heartRate(99, at: 100))
            #expect(try await count(on: primary.port) == 12)
            #expect(try await count(on: follower.port) == 12)
        }
        // kill -9 of the follower: the primary carries on (its writes wait out the window
        // once), and the follower, started again, resumes from its own head.
        primary.stop()
        primary = try await DaemonProcess(dataDirectory: primaryDirectory, arguments: ["--follower-window", "1"])
        await writer.close()
        writer = HealthStore(configuration: .init(port: primary.port, credential: owner, timeout: .seconds(120)))
        follow[1] = "127.0.0.1:\(primary.port)"
        follower.kill()
        for index in 11...15 { try await writer.save(Samples.heartRate(60, at: Double(index))) }
        follower = try await DaemonProcess(dataDirectory: followerDirectory, arguments: follow, metrics: true)
        defer { follower.stop() }
        try await caughtUp(17, on: follower.port)
        // Ready once caught up (/readyz), which it says after its next fetch.
        var ready = try await HTTPGet.fetch(port: try #require(follower.metricsPort), path: "/readyz")
        for _ in 0..<600 where ready.status != 200 {
            try await Task.sleep(for: .milliseconds(100))
            ready = try await HTTPGet.fetch(port: try #require(follower.metricsPort), path: "/readyz")
        }
        #expect(ready.status == 200, "\(ready.body)")
        // A follower whose primary cannot be reached is not ready, and says why.
        let stranded = try await DaemonProcess(
            dataDirectory: base.appending(path: "stranded"),
            arguments: ["--follow", "127.0.0.1:1", "--follow-credential-file", credentialFile.path], metrics: true)
        let unready = try await HTTPGet.fetch(port: try #require(stranded.metricsPort), path: "/readyz")
        #expect(unready.status == 503 && unready.body == "not ready: the primary's list of ledgers was not read yet\n", "\(unready.body)")
        stranded.stop()

        // The CLI: a save sent to the follower lands on the primary (and, semi-synchronously,
        // on the follower); a first server that is gone gives way to --other-server.
        let saved = try await runProcess(
            AuthCLITests.executable,
            ["save", "--type", "HeartRate", "--value", "61", "--unit", "count/min", "--port", "\(follower.port)", "--credential", owner])
        #expect(saved.status == 0, "\(saved.error)")
        #expect(try await count(on: primary.port) == 18)
        #expect(try await count(on: follower.port) == 18)
        let pinged = try await runProcess(
            AuthCLITests.executable, ["ping", "--port", "1", "--other-server", "127.0.0.1:\(follower.port)", "--credential", owner])
        #expect(pinged.status == 0, "\(pinged.error)")
        let refused = try await runProcess(AuthCLITests.executable, ["ping", "--other-server", "nowhere", "--credential", owner])
        #expect(refused.status != 0 && refused.error.contains("--other-server takes HOST:PORT, got 'nowhere'"), "\(refused.error)")

        // Bad settings are refused with what is wrong.
        for (arguments, message) in [
            (["--follow", "nowhere"], "--follow takes the primary's HOST:PORT, got 'nowhere'"),
            (["--follow", "127.0.0.1:7411"], "--follow needs --follow-credential-file"),
            (["--follow-credential-file", credentialFile.path], "--follow-credential-file is for --follow"),
            (["--follow", "127.0.0.1:7411", "--follow-credential-file", base.appending(path: "missing").path], "cannot read --follow-credential-file"),
            (["--replication-acks", "sometimes"], "--replication-acks is semi-sync or async, got 'sometimes'"),
        ] {
            let refused = try await runProcess(
                DaemonProcess.executable,
                ["--data-dir", base.appending(path: "other").path, "--port", "0", "--metrics-port=-1", "--grpc-port=-1", "--web-port=-1"] + arguments)
            #expect(refused.status != 0 && refused.error.contains(message), "\(arguments): \(refused.error)")
        }
    }
}
