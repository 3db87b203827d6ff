import Foundation
import HealthLedgerCluster
import HealthLedgerSDK
import HealthModel
import Ledger
import LedgerSchema
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Three servers on a three-member etcd, all started by the test on loopback: the placement
/// groups shared out, and a ledger's primary killed (-9) and paused (SIGSTOP past its lease)
/// under a stream of saves.
@Suite("A cluster on etcd", .serialized)
struct ClusterTests {
    @Test("the members share the placement groups; kill -9 and a pause of a ledger's primary, and a follower cut off and back, lose no acknowledged save; the SDK and the C client carry on by themselves; the paused primary is fenced; replicas agree; the groups are shared again")
    func failover() async throws {
        // HEALTHLEDGER_TEST_KEEP=1 keeps the directory, with each server's log.
        let base = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-cluster-\(UUID().uuidString)")
        defer { if ProcessInfo.processInfo.environment["HEALTHLEDGER_TEST_KEEP"] == nil { try? FileManager.default.removeItem(at: base) } }
        let etcd = try await EtcdMembers(directory: base.appending(path: "etcd"))
        defer { etcd.stop() }
        let build = try await runProcess(
            URL(filePath: "/bin/bash"), [CClientInteropTests.root.appending(path: "tools/c-client/build.sh").path])
        try #require(build.status == 0, "the C client's build.sh failed: \(build.error)")
        let cClient = URL(filePath: try #require(build.output.split(separator: "\n").last.map(String.init)))
        let nodes = try ClusterNodes(base: base, etcd: etcd.endpoints)
        defer { nodes.stopAll() }
        let (credentialFile, operatorCredential) = (nodes.credentialFile, nodes.operatorCredential)
        for node in 1...3 { try await nodes.start(node) }
        // The 16 placement groups shared out: 5, 5 and 6, each with a synchronous standby.
        #expect(try await nodes.settled(count: 3).values.sorted() == [5, 5, 6])

        // The operator creates two ledgers of one placement group through a member that is
        // not their primary: they go to it.
        let bobID = try #require((0..<1_000).lazy.map { "bob\($0)" }.first { Placement.group(of: $0) == Placement.group(of: "alice") })
        let first = try await nodes.primary(of: "alice", among: [1, 2, 3])
        let follower = [1, 2, 3].first { $0 != first }!
        let admin = HealthStore(configuration: nodes.client(credential: operatorCredential, preferring: follower))
        #expect(try await admin.createLedger(id: "alice") == "alice")
        let owner = try await admin.issueCredential(ledger: "alice", for: .owner)
        #expect(try await admin.createLedger(id: bobID) == bobID)
        let bob = try await admin.issueCredential(ledger: bobID, for: .owner)
        await admin.close()
        // A save sent at once with a credential just issued, to a member that does not lead the
        // ledger's group (and may not know the credential yet), goes to the group's primary.
        do {
            let early = HealthStore(configuration: .init(port: nodes.port(of: follower), credential: owner, timeout: .seconds(60)))
            defer { Task { await early.close() } }
            _ = try await early.save(Samples.heartRate(50, at: 5_000))
        }

        // The C client, given a dead address and a follower: the follower serves its reads
        // and sends its save to the leader.
        try await nodes.waitUntilAccepting(bob, on: follower)
        let seeds = "127.0.0.1:\(try EtcdMembers.unusedPort()),127.0.0.1:\(nodes.port(of: follower))"
        let followed = try await runProcess(cClient, [seeds, bob])
        #expect(followed.status == 0, "\(followed.output)\n\(followed.error)")
        #expect(followed.error.contains("does not lead; sending it to the primary 127.0.0.1:\(nodes.port(of: first))"), "\(followed.error)")
        #expect(followed.output.contains("ping: ledger \(bobID) as owner") && followed.output.contains("including the saved one: yes"), "\(followed.output)")

        // A writer with every member as a seed, saving one sample after another.
        let writer = HealthStore(configuration: nodes.client(credential: owner, preferring: first))
        defer {
            let last = writer
            Task { await last.close() }
        }
        let saves = SaveStream(writer)
        try await saves.until(count: 20)
        let signedBefore = try await writer.treeHead()

        // The operator's view: any member says where a ledger's primary is; the primary also
        // shows its followers' progress.
        let standby = try await nodes.standby(of: "alice", on: first)
        let group = Placement.group(of: "alice")
        let shown = try await runProcess(
            AuthCLITests.executable, ["cluster", "status", "--port", "\(nodes.port(of: follower))", "--credential", operatorCredential, "--ledger", "alice"])
        #expect(shown.status == 0, "\(shown.error)")
        #expect(
            shown.output.contains("ledger alice: placement group \(group), primary n\(first) at 127.0.0.1:\(nodes.port(of: first))"), "\(shown.output)")
        #expect(shown.output.contains("  \(group)\tn\(first)\tepoch ") && shown.output.contains("standby n\(standby)"), "\(shown.output)")
        let onPrimary = try await runProcess(
            AuthCLITests.executable, ["cluster", "status", "--port", "\(nodes.port(of: first))", "--credential", operatorCredential])
        #expect(onPrimary.status == 0 && onPrimary.output.contains(" behind") && onPrimary.output.contains("  alice\thead "), "\(onPrimary.output)")
        #expect(onPrimary.output.contains("ledgers 2, ") && onPrimary.output.contains("leads 5 groups"), "\(onPrimary.output)")

        // The owner's read on the primary is on every member's record before the kill (a
        // member that takes over keeps it), as a read on a follower is on the primary's.
        for (reader, type, others) in [
            (first, "HKQuantityTypeIdentifierBodyMass", [1, 2, 3].filter { $0 != first }), (follower, "HKQuantityTypeIdentifierHeight", [first]),
        ] {
            let store = HealthStore(configuration: .init(port: nodes.port(of: reader), credential: owner, timeout: .seconds(60)))
            _ = try await store.result(for: SampleQueryDescriptor(type: try QuantityType(type).objectType))
            await store.close()
            for node in others {
                #expect(try await nodes.recordedRead(of: type, on: node, credential: owner), "n\(node) has no record of the read on n\(reader)")
            }
        }

        // kill -9 of the leader mid-stream: the standby takes over, the writer carries on, and
        // so does the C client started at that moment with the dead leader first.
        let everyone = ([first] + [1, 2, 3].filter { $0 != first }).map { "127.0.0.1:\(nodes.port(of: $0))" }.joined(separator: ",")
        let killedEpoch = try await nodes.status(on: first).group(of: "alice").epoch
        nodes.kill(first)
        // Asked from now on: the standby takes the group, which may then move on (placement).
        async let takenOver = nodes.primary(of: "alice", among: Set([1, 2, 3]).subtracting([first]))
        async let failedOver = runProcess(cClient, [everyone, bob])
        let atKill = saves.acknowledged.count
        try await saves.until(count: atKill + 20)
        let cRun = try await failedOver
        #expect(cRun.status == 0, "\(cRun.output)\n\(cRun.error)")
        #expect(cRun.output.contains("changes: 2 added, 0 deleted, the saved one added: yes"), "\(cRun.output)")
        let afterKill = try await takenOver
        #expect(afterKill == standby)
        // The new leader's tree head extends the one signed before (the SDK checks the proof).
        let signedAfter = try await writer.treeHead()
        #expect(signedAfter.size > signedBefore.size)

        // The old primary comes back as a follower and catches up; the groups are shared again.
        try await nodes.start(first)
        try await nodes.waitUntilHolding(saves.acknowledged, on: [1, 2, 3], credential: owner)
        _ = try await nodes.settled(count: 3)

        // A pause of the primary past its lease: its standby takes over; the paused one,
        // resumed, takes no write (it follows the new primary, discarding anything only it had).
        let second = try await nodes.primary(of: "alice", among: [1, 2, 3])
        let secondStandby = try await nodes.standby(of: "alice", on: second)
        let pausedEpoch = try await nodes.status(on: second).group(of: "alice").epoch
        nodes.pause(second)
        async let pausedOver = nodes.primary(of: "alice", among: Set([1, 2, 3]).subtracting([second]))
        let atPause = saves.acknowledged.count
        try await saves.until(count: atPause + 20)
        let third = try await pausedOver
        #expect(third == secondStandby)
        nodes.resume(second)
        do {
            // Straight to the old leader, with no other server to fall back on.
            let stale = HealthStore(configuration: .init(port: nodes.port(of: second), credential: owner, timeout: .seconds(60)))
            defer { Task { await stale.close() } }
            if let saved = try? await stale.save(Samples.heartRate(150, at: 10_000)) { saves.record(saved.uuid) }
        }
        try await saves.until(count: saves.acknowledged.count + 5)

        // A follower cut off (paused past the follower window) and back: the primary stops
        // waiting for it (writes carry on), and it catches up (checked below with the others).
        _ = try await nodes.settled(count: 3)
        let primaryNow = try await nodes.primary(of: "alice", among: [1, 2, 3])
        let cutOff = try await nodes.standby(of: "alice", on: primaryNow)
        nodes.pause(cutOff)
        let atCut = saves.acknowledged.count
        try await saves.until(count: atCut + 20)
        nodes.resume(cutOff)
        try await saves.until(count: saves.acknowledged.count + 5)
        let failures = await saves.stop()
        // The SDK's failover patience covered the kill; a pause may time a call out, which is
        // never an acknowledgement.
        #expect(failures.filter { !$0.contains("deadlineExceeded") }.isEmpty, "\(failures)")

        // Every acknowledged save is on every member, and the members hold the same samples.
        let acknowledged = saves.acknowledged
        try await nodes.waitUntilHolding(acknowledged, on: [1, 2, 3], credential: owner)
        var holdings: [Set<UUID>] = []
        for node in 1...3 { holdings.append(try await nodes.samples(on: node, credential: owner)) }
        #expect(holdings[0] == holdings[1] && holdings[1] == holdings[2])
        #expect(Set(acknowledged).isSubset(of: holdings[0]))

        // Each leadership is in the ledger's hash chain, alike on every member: epochs grow,
        // the first primary's term comes first, and the saves after the kill and during the
        // pause were each written under a later epoch by another member (the one that took
        // over, or the one it handed the group to, before or after a write).
        var terms: [[String]] = []
        for node in 1...3 { terms.append(try await nodes.primaryChanges(on: node, credential: owner)) }
        #expect(terms[0] == terms[1] && terms[1] == terms[2], "\(terms)")
        let epochs = terms[0].compactMap { $0.split(separator: " ").last.flatMap { UInt64($0.dropLast()) } }
        #expect(epochs.count == terms[0].count && epochs == epochs.sorted() && Set(epochs).count == epochs.count, "\(terms[0])")
        let leaders = terms[0].compactMap { $0.split(separator: " ").dropFirst().first.map(String.init) }
        #expect(leaders.first == "n\(first)", "\(terms[0])")
        let led = Array(zip(leaders, epochs))
        #expect(led.contains { $0.0 != "n\(first)" && $0.1 > killedEpoch && $0.1 <= pausedEpoch }, "\(terms[0])")
        #expect(led.contains { $0.0 != "n\(second)" && $0.1 > pausedEpoch }, "\(terms[0])")

        // Every member back, the groups are shared as at the start.
        #expect(try await nodes.settled(count: 3).values.sorted() == [5, 5, 6])

        // The operator erases bob whole through a member that may not lead its group: its
        // primary erases it, and every member's copy goes (its erasure journaled there).
        let eraser = HealthStore(configuration: nodes.client(credential: operatorCredential, preferring: follower))
        try await eraser.eraseLedger(bobID, reason: "left the care team")
        await eraser.close()
        for node in 1...3 {
            let directory = base.appending(path: "n\(node)")
            var gone = false
            for _ in 0..<30_000 {
                let journal = try? String(contentsOf: directory.appending(path: "erasures/\(bobID).jsonl"), encoding: .utf8)
                gone = !FileManager.default.fileExists(atPath: directory.appending(path: "ledgers/\(bobID)").path) && journal?.contains("ledgerErased") == true
                if gone { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(gone, "member n\(node) still holds \(bobID), or did not journal its erasure")
        }

        // A backup taken on a member names it.
        let backup = try await runProcess(
            AuthCLITests.executable, ["backup", "alice", base.appending(path: "alice-from-n\(third)").path, "--data-dir", base.appending(path: "n\(third)").path])
        #expect(backup.status == 0 && backup.output.contains("backed up ledger 'alice' from node n\(third) of cluster healthledger: head event"), "\(backup.output)\n\(backup.error)")

        // A second member under a name already in the cluster is kept out, saying why.
        let twin = try await DaemonProcess(
            dataDirectory: base.appending(path: "twin"),
            arguments: ["--etcd", etcd.endpoints, "--node-id", "n\(third)", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path])
        let refusal = try await Self.firstLine(of: twin) { $0.contains("another member named 'n\(third)' is in the cluster") }
        twin.stop()
        #expect(refusal != nil)

        // Bad cluster settings are refused with what is wrong.
        for (arguments, message) in [
            (["--etcd", "http://127.0.0.1:2379"], "--etcd needs --advertise HOST:PORT"),
            (["--etcd", "http://127.0.0.1:2379", "--advertise", "nowhere"], "--advertise takes HOST:PORT, got 'nowhere'"),
            (["--etcd", "http://127.0.0.1:2379", "--advertise", "127.0.0.1:0"], "--etcd needs --cluster-credential-file"),
            (["--etcd", "etcd:many", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path], "etcd endpoint 'etcd:many' is not http://HOST:PORT"),
            (["--etcd", "http://127.0.0.1:2379", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path, "--lease-seconds", "1"], "--lease-seconds is 2 to 600, got 1"),
            (["--etcd", "http://127.0.0.1:2379", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path, "--follow", "127.0.0.1:7411", "--follow-credential-file", credentialFile.path], "--etcd and --follow exclude each other"),
            (["--etcd", "http://127.0.0.1:2379", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path, "--replicas", "1"], "--replicas is 2 to 16 (a primary and at least one standby), got 1"),
            (["--cluster", "c1"], "--cluster, --advertise, --cluster-credential-file, --lease-seconds, --replicas, --etcd-ca, --etcd-cert and --etcd-key are for --etcd"),
            (
                ["--etcd", "http://127.0.0.1:2379", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path, "--tls-cert", "c.pem", "--tls-key", "k.pem"],
                "a cluster over TLS (--tls-cert) needs --follow-tls-ca"
            ),
        ] {
            let refused = try await runProcess(
                DaemonProcess.executable,
                ["--data-dir", base.appending(path: "other").path, "--port", "0", "--metrics-port=-1", "--grpc-port=-1", "--web-port=-1"] + arguments)
            #expect(refused.status != 0 && refused.error.contains(message), "\(arguments): \(refused.error)")
        }
    }
}

extension ClusterTests {
    @Test("a standby that lets a write's wait run out is dropped: writes go on, and it is not chosen again before it catches up")
    func stuckStandbyDropped() async throws {
        try await Self.withOneMember { nodes, etcd in try await Self.stuckStandbyDropped(nodes, etcd) }
    }

    /// Runs `body` against a cluster of one member, n1, on an etcd of one, started for it and
    /// stopped after.
    static func withOneMember(_ body: (ClusterNodes, EtcdMembers) async throws -> Void) async throws {
        let base = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-cluster-\(UUID().uuidString)")
        defer { if ProcessInfo.processInfo.environment["HEALTHLEDGER_TEST_KEEP"] == nil { try? FileManager.default.removeItem(at: base) } }
        let etcd = try await EtcdMembers(count: 1, directory: base.appending(path: "etcd"))
        defer { etcd.stop() }
        let nodes = try ClusterNodes(base: base, etcd: etcd.endpoints)
        defer { nodes.stopAll() }
        try await nodes.start(1)
        _ = try await nodes.settled(count: 1)
        try await body(nodes, etcd)
    }

    private static func stuckStandbyDropped(_ nodes: ClusterNodes, _ etcd: EtcdMembers) async throws {
        let operatorCredential = nodes.operatorCredential
        let admin = HealthStore(configuration: .init(port: nodes.port(of: 1), credential: operatorCredential, timeout: .seconds(60)))
        defer { Task { await admin.close() } }
        #expect(try await admin.createLedger(id: "alice") == "alice")
        let owner = HealthStore(configuration: .init(port: nodes.port(of: 1), credential: try await admin.issueCredential(ledger: "alice", for: .owner), timeout: .seconds(60)))
        defer { Task { await owner.close() } }
        try await owner.save(Samples.heartRate(60, at: 0))

        // A member that watches alice's placement group and says it applied its first answer,
        // but never fetches a ledger: its copy is stuck. (Named so that the placement leaves
        // alice's group on n1: n1 is not to hand it over.)
        let group = Placement.group(of: "alice")
        let fake = try #require((9..<100).lazy.map { "n\($0)" }.first { Placement.assignment(of: ["n1", $0])[group] == "n1" })
        let client = try Etcd(endpoints: etcd.endpoints)
        let running = Task { try await client.run() }
        defer { client.close(); running.cancel() }
        try await client.put("/healthledger/healthledger/nodes/\(fake)", Data(#"{"node":"\#(fake)","address":"127.0.0.1:1"}"#.utf8))
        let epoch = try await admin.clusterStatus().group(of: "alice").epoch
        let watcher = Task {
            var (cursor, applied): ([UInt8], [UInt8]?) = ([], nil)
            while !Task.isCancelled {
                let watched = HealthStore.WatchedGroup(group: group, epoch: epoch, cursor: cursor, applied: applied ?? [])
                guard let answer = try? await admin.watchLedgers(wait: .milliseconds(300), follower: fake, groups: [watched]) else { continue }
                (cursor, applied) = (answer.cursor, applied ?? answer.cursor)
            }
        }
        defer { watcher.cancel() }
        for _ in 0..<2_400 where try await admin.clusterStatus().group(of: "alice").standby != fake { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await admin.clusterStatus().group(of: "alice").standby == fake)

        // A write it does not acknowledge is refused UNAVAILABLE; then the leader drops it,
        // and writes go on, answered after the leader's own commit.
        let refusal = await #expect(throws: RPCError.self) { try await owner.save(Samples.heartRate(61, at: 1)) }
        #expect(refusal?.code == .unavailable && refusal?.message.contains("'\(fake)' did not acknowledge it") == true, "\(String(describing: refusal))")
        var saved = false
        for attempt in 0..<100 where !saved {
            saved = (try? await owner.save(Samples.heartRate(62, at: 2 + Double(attempt)))) != nil
        }
        #expect(saved)
        // It is not made the standby again: it never applied what it missed.
        for value in 0..<5 { try await owner.save(Samples.heartRate(70, at: 200 + Double(value))) }
        let status = try await admin.clusterStatus().group(of: "alice")
        #expect(status.standby == nil && status.pendingStandby == nil, "\(status)")
    }

    /// The first line of `daemon`'s log that `matches`, or nil once 10,000 lines (or two
    /// minutes, a guard against hanging, not a deadline the test relies on) went by without one.
    static func firstLine(of daemon: DaemonProcess, where matches: @escaping @Sendable (String) -> Bool) async throws -> String? {
        try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                for _ in 0..<10_000 {
                    guard let line = await daemon.nextLine() else { return nil }
                    if matches(line) { return line }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(120))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
    }
}

/// Saves one heart-rate sample after another until stopped, keeping the UUIDs of those
/// answered as saved and what each failure said.
final class SaveStream: Sendable {
    private final class State: Sendable {
        let mutex = Mutex<(acknowledged: [UUID], failures: [String], stopping: Bool)>(([], [], false))

        func withLock<R>(_ body: (inout (acknowledged: [UUID], failures: [String], stopping: Bool)) -> R) -> R { mutex.withLock { body(&$0) } }
    }

    private let state = State()
    private let task: Task<Void, Never>

    init(_ store: HealthStore) {
        let state = self.state
        task = Task {
            var index = 0
            while !state.withLock({ $0.stopping }) {
                index += 1
                do {
                    let saved = try await store.save(Samples.heartRate(Double(60 + index % 100), at: Double(index)))
                    state.withLock { $0.acknowledged.append(saved.uuid) }
                } catch {
                    state.withLock { $0.failures.append("\(error)") }
                }
            }
        }
    }

    var acknowledged: [UUID] { state.withLock { $0.acknowledged } }

    /// A save acknowledged outside the stream.
    func record(_ uuid: UUID) { state.withLock { $0.acknowledged.append(uuid) } }

    /// Returns once `count` saves were acknowledged (a guard of five minutes, which no
    /// loaded machine comes near, against hanging; not a deadline the test relies on).
    func until(count: Int) async throws {
        for _ in 0..<6_000 {
            if state.withLock({ $0.acknowledged.count >= count }) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("only \(acknowledged.count) of \(count) saves were acknowledged; failures: \(state.withLock { $0.failures.suffix(5) })")
        throw CancellationError()
    }

    /// Stops after the save under way; what the failures said.
    func stop() async -> [String] {
        state.withLock { $0.stopping = true }
        await task.value
        return state.withLock { $0.failures }
    }
}

/// The servers of a test cluster, by number (1, 2, 3), each with its data directory under `base`.
final class ClusterNodes: Sendable {
    private let base: URL
    private let etcd: String
    /// The operator credential every member accepts, and its file (`--cluster-credential-file`).
    let operatorCredential: String
    let credentialFile: URL
    private let running = Mutex<[Int: DaemonProcess]>([:])

    /// Flags every member is started with beside the cluster's own (etcd's TLS files, say).
    private let arguments: [String]

    init(base: URL, etcd: String, arguments: [String] = []) throws {
        self.base = base
        self.etcd = etcd
        self.arguments = arguments
        credentialFile = base.appending(path: "cluster-operator")
        // Issued on n1's data directory (any member's would do), before n1 starts.
        let store = try LedgerStore(directory: base.appending(path: "n1"), configuration: try .forTests())
        operatorCredential = try store.issueOperatorCredential(label: "cluster")
        try operatorCredential.write(to: credentialFile, atomically: true, encoding: .utf8)
    }

    func start(_ node: Int) async throws {
        let process = try await DaemonProcess(
            dataDirectory: base.appending(path: "n\(node)"),
            arguments: [
                "--etcd", etcd, "--node-id", "n\(node)", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path,
                // Short enough for a quick test, long enough that a loaded machine's slow etcd
                // round trip does not cost the leader its lease.
                "--lease-seconds", "3",
            ] + arguments, metrics: true)
        process.keepLog(in: base.appending(path: "n\(node)-\(UUID().uuidString.prefix(4)).log"))
        running.withLock { $0[node] = process }
    }

    func port(of node: Int) -> Int { running.withLock { $0[node]!.port } }

    var addresses: [Int: String] { running.withLock { $0.mapValues { "127.0.0.1:\($0.port)" } } }

    /// A client of the cluster: `node` first, every other running member as another server.
    func client(credential: String, preferring node: Int) -> HealthStoreConfiguration {
        let others = addresses.filter { $0.key != node }.sorted { $0.key < $1.key }.map(\.value)
        return HealthStoreConfiguration(
            port: port(of: node), credential: credential, timeout: .seconds(60), keepaliveInterval: .seconds(1), otherServers: others)
    }

    func kill(_ node: Int) {
        running.withLock { $0.removeValue(forKey: node) }?.kill()
    }

    func pause(_ node: Int) { running.withLock { $0[node] }?.pause() }
    func resume(_ node: Int) { running.withLock { $0[node] }?.resume() }

    func stopAll() {
        for process in running.withLock({ $0.values }) {
            process.resume()
            process.stop()
        }
    }

    /// The cluster's status as `node` sees it.
    func status(on node: Int) async throws -> ClusterStatus {
        let store = HealthStore(configuration: .init(port: port(of: node), credential: operatorCredential, timeout: .seconds(60)))
        defer { Task { await store.close() } }
        return try await store.clusterStatus()
    }

    /// The member of `candidates` that leads `ledger`'s placement group, as it sees itself
    /// (asked until one does).
    func primary(of ledger: String, among candidates: Set<Int>) async throws -> Int {
        for _ in 0..<2_400 {
            for node in candidates.sorted() where running.withLock({ $0[node] != nil }) {
                if let status = try? await status(on: node), status.group(of: ledger).leader == "n\(node)" { return node }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no member of \(candidates.sorted()) leads \(ledger)'s placement group")
        throw CancellationError()
    }

    /// The synchronous standby of `ledger`'s placement group that its primary `node` named
    /// (asked until it has one).
    func standby(of ledger: String, on node: Int) async throws -> Int {
        for _ in 0..<2_400 {
            if let standby = try await status(on: node).group(of: ledger).standby, let number = Int(standby.dropFirst()) { return number }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("n\(node) named no standby for \(ledger)")
        throw CancellationError()
    }

    /// Returns, once the cluster has `count` members and every placement group is led by the
    /// member the placement gives it to (with a synchronous standby, given two members or
    /// more), how many groups each member leads (a guard of five minutes).
    func settled(count: Int) async throws -> [Int: Int] {
        // Seen so by every member, three times in a row (a member's view may lag a round).
        var streak = 0
        for _ in 0..<3_000 {
            var views: [ClusterStatus] = []
            for node in running.withLock({ $0.keys.sorted() }) {
                if let status = try? await status(on: node) { views.append(status) }
            }
            let settled =
                views.count == count
                && views.allSatisfy { status in
                    status.members.count == count
                        && status.groups.allSatisfy { $0.leader != nil && $0.leader == $0.placedOn && (count == 1 || ($0.standby != nil && $0.standby != $0.leader)) }
                        && status.groups.map(\.leader) == views[0].groups.map(\.leader)
                }
            streak = settled ? streak + 1 : 0
            if streak == 3 { return Dictionary(uniqueKeysWithValues: views[0].members.map { (Int($0.node.dropFirst())!, $0.leads.count) }) }
            try await Task.sleep(for: .milliseconds(200))
        }
        Issue.record("the placement groups were not shared out over \(count) members")
        throw CancellationError()
    }

    /// The sentences of the `primaryChanged` events of `node`'s copy of the ledger, in order
    /// ("server n2 of cluster default became this ledger's primary (epoch 41)").
    func primaryChanges(on node: Int, credential: String) async throws -> [String] {
        let reader = HealthStore(configuration: .init(port: port(of: node), credential: credential, timeout: .seconds(60)))
        defer { Task { await reader.close() } }
        return try await reader.audit(AuditFilter(kinds: [.primaryChanged])).reduce(into: [String]()) { $0 += $1.events.map(\.sentence) }
    }

    /// Returns once `node` accepts `credential` (a follower learns of it by replication; a
    /// guard of two minutes).
    func waitUntilAccepting(_ credential: String, on node: Int) async throws {
        let store = HealthStore(configuration: .init(port: port(of: node), credential: credential, timeout: .seconds(60)))
        defer { Task { await store.close() } }
        for _ in 0..<2_400 {
            if (try? await store.ping()) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("n\(node) never accepted the credential")
        throw CancellationError()
    }

    /// The samples `node` holds, read there (a follower serves reads).
    func samples(on node: Int, credential: String) async throws -> Set<UUID> {
        let reader = HealthStore(configuration: .init(port: port(of: node), credential: credential, timeout: .seconds(60)))
        defer { Task { await reader.close() } }
        return Set(try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).map(\.uuid))
    }

    /// Whether `node`'s access records come to hold a read of `type` by `credential`'s owner
    /// (a guard of five minutes).
    func recordedRead(of type: String, on node: Int, credential: String) async throws -> Bool {
        let reader = HealthStore(configuration: .init(port: port(of: node), credential: credential, timeout: .seconds(60)))
        defer { Task { await reader.close() } }
        for _ in 0..<3_000 {
            if let page = try? await reader.accessRecords(AccessRecordFilter(type: type)), !page.records.isEmpty { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// Returns once each of `nodes` holds every sample of `uuids` (a guard of five minutes).
    func waitUntilHolding(_ uuids: [UUID], on nodes: [Int], credential: String) async throws {
        let wanted = Set(uuids)
        for node in nodes {
            var held = Set<UUID>()
            for _ in 0..<3_000 {
                held = (try? await samples(on: node, credential: credential)) ?? []
                if wanted.isSubset(of: held) { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(wanted.isSubset(of: held), "n\(node) lacks \(wanted.subtracting(held).count) acknowledged saves")
        }
    }
}

/// etcd members on loopback (Debian's etcd-server, which tools/test.sh installs), each with
/// its data directory under `directory`, as one cluster.
final class EtcdMembers: Sendable {
    private let processes: [LineProcess]
    /// The members' client URLs, comma-separated (what `healthledgerd --etcd` takes).
    let endpoints: String

    static let executable: URL? = ["/usr/bin/etcd", "/usr/local/bin/etcd"].map { URL(filePath: $0) }.first {
        FileManager.default.isExecutableFile(atPath: $0.path)
    }

    /// - Parameter tls: serve clients over TLS with these files, asking for their certificates.
    init(count: Int = 3, directory: URL, tls: TLSFiles? = nil) async throws {
        guard let executable = Self.executable else {
            Issue.record("etcd is not installed (Debian: apt-get install etcd-server; tools/test.sh does it)")
            throw CancellationError()
        }
        let ports = try (0..<count).map { _ in (client: try Self.unusedPort(), peer: try Self.unusedPort()) }
        let scheme = tls == nil ? "http" : "https"
        let cluster = ports.indices.map { "e\($0)=http://127.0.0.1:\(ports[$0].peer)" }.joined(separator: ",")
        processes = try ports.indices.map { index in
            try LineProcess(
                executable,
                [
                    "--name", "e\(index)", "--data-dir", directory.appending(path: "e\(index)").path,
                    "--listen-client-urls", "\(scheme)://127.0.0.1:\(ports[index].client)",
                    "--advertise-client-urls", "\(scheme)://127.0.0.1:\(ports[index].client)",
                    "--listen-peer-urls", "http://127.0.0.1:\(ports[index].peer)",
                    "--initial-advertise-peer-urls", "http://127.0.0.1:\(ports[index].peer)",
                    "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", directory.lastPathComponent,
                ] + (tls.map { ["--cert-file", $0.serverCertificate.path, "--key-file", $0.serverKey.path, "--client-cert-auth", "--trusted-ca-file", $0.ca.path] } ?? []),
                readingStandardError: true)
        }
        endpoints = ports.map { "\(scheme)://127.0.0.1:\($0.client)" }.joined(separator: ",")
        for process in processes {
            var lines: [String] = []
            while true {
                guard let line = await process.nextLine() else {
                    stop()
                    throw DaemonProcess.DaemonFailure(message: "etcd exited before serving: \(lines.suffix(20).joined(separator: "\n"))")
                }
                lines.append(line)
                if line.contains("ready to serve client requests") { break }
            }
        }
    }

    func stop() {
        for process in processes { process.stop() }
    }

    /// A loopback port nothing listens on now (etcd takes no port 0).
    static func unusedPort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw DaemonProcess.DaemonFailure(message: "socket: \(errno)") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw DaemonProcess.DaemonFailure(message: "bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

extension ClusterTests {
    @Test("a watch names each placement group's changes after that group's own cursor, and lists a group whose cursor is empty or of no use")
    func watchPerGroup() async throws {
        try await Self.withOneMember { nodes, _ in try await Self.watchPerGroup(nodes) }
    }

    private static func watchPerGroup(_ nodes: ClusterNodes) async throws {
        let admin = HealthStore(configuration: .init(port: nodes.port(of: 1), credential: nodes.operatorCredential, timeout: .seconds(60)))
        defer { Task { await admin.close() } }
        // Two ledgers of two groups, each with one save.
        let other = try #require((1..<100).lazy.map { "patient-\($0)" }.first { Placement.group(of: $0) != Placement.group(of: "alice") })
        var owners: [String: HealthStore] = [:]
        for id in ["alice", other] {
            #expect(try await admin.createLedger(id: id) == id)
            owners[id] = HealthStore(configuration: .init(port: nodes.port(of: 1), credential: try await admin.issueCredential(ledger: id, for: .owner), timeout: .seconds(60)))
            try await owners[id]!.save(Samples.heartRate(60, at: 0))
        }
        defer { for owner in owners.values { Task { await owner.close() } } }
        let status = try await admin.clusterStatus()
        let (a, b) = (status.group(of: "alice"), status.group(of: other))
        let watch = { (groups: [HealthStore.WatchedGroup]) in try await admin.watchLedgers(wait: .zero, follower: "watcher", groups: groups) }

        // A group without a cursor is listed whole, and only that group.
        let first = try await watch([.init(group: a.group, epoch: a.epoch)])
        #expect(first.listed == ["alice"] && first.changed.isEmpty, "\(first)")

        // Alice's group goes on from its cursor (her change named with its head); the other
        // group, new to the watch, is listed.
        try await owners["alice"]!.save(Samples.heartRate(61, at: 1))
        let second = try await watch([.init(group: a.group, epoch: a.epoch, cursor: first.cursor), .init(group: b.group, epoch: b.epoch)])
        #expect(second.changed.map(\.id) == ["alice"] && second.listed == [other], "\(second)")
        let aliceHead = try await owners["alice"]!.treeHead().size
        #expect(second.changed.first?.head == aliceHead)

        // Each group from its own cursor: a change of the other ledger only, named once.
        try await owners[other]!.save(Samples.heartRate(62, at: 2))
        let third = try await watch([.init(group: a.group, epoch: a.epoch, cursor: second.cursor), .init(group: b.group, epoch: b.epoch, cursor: second.cursor)])
        #expect(third.changed.map(\.id) == [other] && third.listed.isEmpty, "\(third)")
        let fourth = try await watch([.init(group: a.group, epoch: a.epoch, cursor: third.cursor), .init(group: b.group, epoch: b.epoch, cursor: third.cursor)])
        #expect(fourth.changed.isEmpty && fourth.listed.isEmpty, "\(fourth)")
        // A cursor from another run of the primary lists its group.
        let foreign = [UInt8](repeating: 7, count: 16)
        let fifth = try await watch([.init(group: a.group, epoch: a.epoch, cursor: foreign), .init(group: b.group, epoch: b.epoch, cursor: third.cursor)])
        #expect(fifth.listed == ["alice"] && fifth.changed.isEmpty, "\(fifth)")

        // Bad input: a cursor that is not one, a store-wide cursor in a cluster, an old epoch.
        let short = await #expect(throws: RPCError.self) { try await watch([.init(group: a.group, epoch: a.epoch, cursor: [1, 2, 3])]) }
        #expect(short?.code == .invalidArgument && short?.message.contains("a cursor is 16 bytes, got 3") == true, "\(String(describing: short))")
        let storeWide = await #expect(throws: RPCError.self) {
            try await admin.watchLedgers(cursor: first.cursor, wait: .zero, follower: "watcher", groups: [.init(group: a.group, epoch: a.epoch)])
        }
        #expect(storeWide?.code == .invalidArgument && storeWide?.message.contains("each watched group carries its own cursor") == true)
        let stale = await #expect(throws: RPCError.self) { try await watch([.init(group: a.group, epoch: a.epoch - 1)]) }
        #expect(stale != nil && stale?.code != .invalidArgument, "\(String(describing: stale))")
    }
}
