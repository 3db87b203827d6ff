import ArgumentParser
import BenchmarkPeers
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import Synchronization

/// Failover of a cluster on etcd: three `healthledgerd` processes (or `--members`, each group
/// kept on `--replicas` of them) on a three-member etcd (Debian's etcd-server), one client saving one sample after another through the SDK with
/// every member as a seed, for every round; each round kills the primary of the ledger's
/// placement group (-9) once that group is where the placement puts it and has a standby, and
/// measures the time from the kill to the first save answered after it, then starts the
/// killed member again and, while the group is handed back to it, the longest wait between
/// two answered saves. At the end every acknowledged save is looked for on every member that
/// keeps the ledger.
struct FailoverBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "failover", abstract: "Kill -9 of a ledger's primary in a cluster under saves: time to the next acknowledged save, saves lost.")

    @Option(help: "Rounds (a kill each).") var rounds = 20
    @Option(name: .customLong("lease-seconds"), help: "The members' --lease-seconds (etcd's lease time to live).") var leaseSeconds = 5
    @Option(help: "Members of the cluster.") var members = 3
    @Option(help: "The members' --replicas (the server's default when not given).") var replicas: Int?
    @Option(help: "The folder holding a release build of healthledgerd.") var binaries = ".build/release"

    func run() async throws {
        let scratch = FileManager.default.temporaryDirectory.appending(path: "healthledger-failover-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let executable = URL(filePath: binaries).appending(path: "healthledgerd")
        let etcd = try EtcdCluster(directory: scratch.appending(path: "etcd"))
        defer { etcd.stop() }

        let operatorCredential = try LedgerStore(directory: scratch.appending(path: "n1")).issueOperatorCredential(label: "bench")
        let credentialFile = scratch.appending(path: "cluster-operator")
        try operatorCredential.write(to: credentialFile, atomically: true, encoding: .utf8)
        let count = members
        var members: [Int: ServerProcess] = [:]
        func start(_ node: Int) throws {
            members[node] = try ServerProcess(
                executable: executable, dataDirectory: scratch.appending(path: "n\(node)"),
                arguments: [
                    "--etcd", etcd.endpoints, "--node-id", "n\(node)", "--advertise", "127.0.0.1:0", "--cluster-credential-file", credentialFile.path,
                    "--lease-seconds", "\(leaseSeconds)",
                ] + (replicas.map { ["--replicas", "\($0)"] } ?? []))
        }
        for node in 1...count { try start(node) }
        defer { for member in members.values { member.stop() } }
        func configuration(_ credential: String) -> HealthStoreConfiguration {
            let ports = members.keys.sorted().map { members[$0]!.port }
            var configuration = HealthStoreConfiguration(
                port: ports[0], credential: credential, timeout: .seconds(120), keepaliveInterval: .seconds(1),
                otherServers: ports.dropFirst().map { "127.0.0.1:\($0)" })
            configuration.failoverPatience = .seconds(120)
            return configuration
        }
        /// The primary of the ledger's placement group, once it is the member the placement
        /// gives the group to and has named a standby (asked of every member until one says so
        /// of itself).
        func primaryWithStandby() async throws -> Int {
            for _ in 0..<1_200 {
                for (node, member) in members {
                    let store = HealthStore(configuration: .init(port: member.port, credential: operatorCredential, timeout: .seconds(10)))
                    let group = try? await store.clusterStatus().group(of: "bench")
                    await store.close()
                    if let group, group.leader == "n\(node)", group.placedOn == group.leader, group.standby != nil { return node }
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw BenchFailure("the ledger's placement group got no primary with a standby")
        }

        let admin = HealthStore(configuration: configuration(operatorCredential))
        _ = try await admin.createLedger(id: "bench")
        let owner = try await admin.issueCredential(ledger: "bench", for: .owner)
        await admin.close()
        print(
            "== \(count) members\(replicas.map { ", --replicas \($0)," } ?? "") on a 3-member etcd, --lease-seconds \(leaseSeconds); \(rounds) rounds of kill -9 of the ledger's primary under sequential saves"
        )

        let workload = try Workload(days: 1)
        let acknowledged = Acknowledged()
        var failovers: [Duration] = []
        var handOvers: [Duration] = []
        // One writer for every round: it carries on through each kill and each hand-over.
        let writer = HealthStore(configuration: configuration(owner))
        let saving = Task {
            var failed = 0
            var index = 0
            while !acknowledged.stopping {
                index += 1
                do {
                    let saved = try await writer.save(workload.ingest(index).object)
                    acknowledged.saves.withLock { $0.append((saved.uuid, .now)) }
                } catch {
                    failed += 1
                    acknowledged.failures.withLock { $0["\(error)".prefix(300).description, default: 0] += 1 }
                }
            }
            return failed
        }
        /// The longest wait between two answered saves from `start` on, counting from `start`.
        func longestGap(since start: ContinuousClock.Instant) -> Duration {
            let times = [start] + acknowledged.saves.withLock { $0.map(\.at).filter { $0 > start } }
            return zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? .zero
        }
        for round in 1...rounds {
            let leader = try await primaryWithStandby()
            try await Task.sleep(for: .milliseconds(500))
            // From the primary's end: a save answered after it is the new primary's.
            members.removeValue(forKey: leader)?.kill()
            let killed = ContinuousClock.now
            var first: ContinuousClock.Instant?
            for _ in 0..<12_000 {
                first = acknowledged.saves.withLock { $0.first(where: { $0.at > killed })?.at }
                if first != nil { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            guard let first else { throw BenchFailure("round \(round): no save was answered after the kill") }
            failovers.append(first - killed)
            // Back, the member gets its group again by a hand-over, under the writer.
            try start(leader)
            let restarted = ContinuousClock.now
            _ = try await primaryWithStandby()
            try await Task.sleep(for: .milliseconds(500))
            handOvers.append(longestGap(since: restarted))
            print(
                String(
                    format: "  round %d: n%d killed, next save answered after %.2f s; back, it got the group again with saves paused %.3f s at most",
                    round, leader, seconds(first - killed), seconds(handOvers.last!)))
        }
        acknowledged.stop.store(true, ordering: .relaxed)
        let failures = await saving.value
        await writer.close()

        // Every acknowledged save, on every member that keeps the ledger.
        try await Task.sleep(for: .seconds(2))
        let wanted = Set(acknowledged.saves.withLock { $0.map(\.uuid) })
        let status = HealthStore(configuration: .init(port: members[1]!.port, credential: operatorCredential, timeout: .seconds(10)))
        let keepers = try await status.clusterStatus().group(of: "bench").keepers
        await status.close()
        var lost: [Int: Int] = [:]
        for (node, member) in members.sorted(by: { $0.key < $1.key }) where keepers.contains("n\(node)") {
            let reader = HealthStore(configuration: .init(port: member.port, credential: owner, timeout: .seconds(120)))
            var held = Set<UUID>()
            for _ in 0..<600 {
                held = Set(try await reader.result(for: SampleQueryDescriptor(type: workload.heartRate.objectType)).map(\.uuid))
                if wanted.isSubset(of: held) { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            await reader.close()
            lost[node] = wanted.subtracting(held).count
        }
        let sorted = failovers.sorted()
        print(
            String(
                format: "failover (kill -9 to the next acknowledged save), %d rounds: median %.2f s, p90 %.2f s, max %.2f s", sorted.count,
                seconds(sorted[sorted.count / 2]), seconds(sorted[min(sorted.count - 1, sorted.count * 9 / 10)]), seconds(sorted.last!)))
        let paused = handOvers.sorted()
        let saves = acknowledged.saves.withLock { $0.map(\.at) }
        let gaps = zip(saves, saves.dropFirst()).map { $1 - $0 }.sorted()
        print(
            String(
                format: "hand-over (the longest wait between answered saves while the group moved back), %d rounds: median %.3f s, max %.3f s; any two saves: median %.4f s",
                paused.count, seconds(paused[paused.count / 2]), seconds(paused.last!), seconds(gaps[gaps.count / 2])))
        print("saves acknowledged: \(wanted.count); lost, on each member keeping the ledger: \(lost.sorted { $0.key < $1.key }.map { "n\($0.key) \($0.value)" }.joined(separator: ", ")); calls that failed (never acknowledged): \(failures)")
        for (failure, count) in acknowledged.failures.withLock({ $0 }).sorted(by: { $0.value > $1.value }).prefix(5) { print("  \(count)× \(failure)") }
    }
}

/// The saves acknowledged so far, with when; and whether the writer is to stop.
private final class Acknowledged: Sendable {
    let saves = Mutex<[(uuid: UUID, at: ContinuousClock.Instant)]>([])
    let stop = Atomic<Bool>(false)
    /// Why calls failed, with how many times.
    let failures = Mutex<[String: Int]>([:])

    var stopping: Bool { stop.load(ordering: .relaxed) }
}

/// etcd members on loopback, as one cluster (Debian's etcd-server).
final class EtcdCluster: Sendable {
    private let processes: [Process]
    let endpoints: String

    init(count: Int = 3, directory: URL) throws {
        guard let executable = ["/usr/bin/etcd", "/usr/local/bin/etcd"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw BenchFailure("etcd is not installed: apt-get install etcd-server")
        }
        let ports = try (0..<count).map { _ in
            guard let client = unusedLoopbackPort(), let peer = unusedLoopbackPort() else { throw BenchFailure("no free loopback port") }
            return (client: client, peer: peer)
        }
        let cluster = ports.indices.map { "e\($0)=http://127.0.0.1:\(ports[$0].peer)" }.joined(separator: ",")
        processes = try ports.indices.map { index in
            let process = Process()
            process.executableURL = URL(filePath: executable)
            process.arguments = [
                "--name", "e\(index)", "--data-dir", directory.appending(path: "e\(index)").path,
                "--listen-client-urls", "http://127.0.0.1:\(ports[index].client)", "--advertise-client-urls", "http://127.0.0.1:\(ports[index].client)",
                "--listen-peer-urls", "http://127.0.0.1:\(ports[index].peer)", "--initial-advertise-peer-urls", "http://127.0.0.1:\(ports[index].peer)",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            return process
        }
        endpoints = ports.map { "http://127.0.0.1:\($0.client)" }.joined(separator: ",")
    }

    func stop() {
        for process in processes where process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }
}
