import Foundation
import HealthLedgerSDK
import HealthModel
import LedgerSchema
import Testing
import TestSupport

extension ClusterTests {
    @Test("with --replicas 2, each placement group is kept on two of three members: the third holds none of its ledgers and sends their reads to the primary; a member killed has its groups copied to the others, which remove those copies once it is back")
    func keepersOnly() async throws {
        let base = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-cluster-\(UUID().uuidString)")
        defer { if ProcessInfo.processInfo.environment["HEALTHLEDGER_TEST_KEEP"] == nil { try? FileManager.default.removeItem(at: base) } }
        let etcd = try await EtcdMembers(count: 1, directory: base.appending(path: "etcd"))
        defer { etcd.stop() }
        let nodes = try ClusterNodes(base: base, etcd: etcd.endpoints, arguments: ["--replicas", "2"])
        defer { nodes.stopAll() }
        for node in 1...3 { try await nodes.start(node) }
        _ = try await nodes.settled(count: 3)
        let everyone: Set<Int> = [1, 2, 3]

        // One ledger in each placement group, with a sample saved: created and written
        // through n1, which sends each to its group's primary.
        let ids = (0..<Placement.groups).map { group in (0..<10_000).lazy.map { "patient\($0)" }.first { Placement.group(of: $0) == group }! }
        let admin = HealthStore(configuration: nodes.client(credential: nodes.operatorCredential, preferring: 1))
        defer { Task { await admin.close() } }
        var owners: [String: String] = [:]
        var saved: [String: UUID] = [:]
        for id in ids {
            #expect(try await admin.createLedger(id: id) == id)
            owners[id] = try await admin.issueCredential(ledger: id, for: .owner)
            let writer = HealthStore(configuration: nodes.client(credential: owners[id]!, preferring: 1))
            let sample = Samples.heartRate(60 + Double(saved.count), at: 1_000)
            try await writer.save(sample)
            saved[id] = sample.uuid
            await writer.close()
        }

        // Each group's ledgers end up on exactly its two keepers, which every member names
        // alike; the third member holds none of them.
        let kept = try await nodes.keptAsPlaced(on: everyone, ledgersPerGroup: 1)
        #expect(kept.allSatisfy { $0.count == 2 })
        let shown = try await runProcess(
            AuthCLITests.executable, ["cluster", "status", "--port", "\(nodes.port(of: 1))", "--credential", nodes.operatorCredential, "--ledger", ids[0]])
        let keepersOfFirst = kept[0].sorted().map { "n\($0)" }
        #expect(shown.status == 0 && shown.output.contains("\tkept on n"), "\(shown.output)\(shown.error)")
        #expect(
            shown.output.contains(", kept on \(keepersOfFirst.joined(separator: ","))") || shown.output.contains(", kept on \(keepersOfFirst.reversed().joined(separator: ","))"),
            "\(shown.output)")

        // A read sent to the member that keeps no copy goes to the group's primary (the SDK
        // follows the refusal), and finds the sample.
        for (group, keepers) in kept.enumerated() {
            let outsider = try #require(everyone.subtracting(keepers).first)
            let id = ids[group]
            let reader = HealthStore(configuration: .init(port: nodes.port(of: outsider), credential: owners[id]!, timeout: .seconds(60)))
            let found = try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).map(\.uuid)
            await reader.close()
            #expect(found == [saved[id]!], "ledger \(id) read through n\(outsider)")
        }

        // The C client, given only a member that keeps no copy of the ledger: its reads and
        // its save go to the primary.
        let build = try await runProcess(URL(filePath: "/bin/bash"), [CClientInteropTests.root.appending(path: "tools/c-client/build.sh").path])
        try #require(build.status == 0, "the C client's build.sh failed: \(build.error)")
        let cClient = URL(filePath: try #require(build.output.split(separator: "\n").last.map(String.init)))
        let outsider = try #require(everyone.subtracting(kept[0]).first)
        let cRun = try await runProcess(cClient, ["127.0.0.1:\(nodes.port(of: outsider))", owners[ids[0]]!])
        #expect(cRun.status == 0, "\(cRun.output)\n\(cRun.error)")
        #expect(cRun.output.contains("ping: ledger \(ids[0]) as owner") && cRun.output.contains("including the saved one: yes"), "\(cRun.output)")
        #expect(cRun.error.contains("sending it to the primary"), "\(cRun.error)")
        saved[ids[0]] = nil

        // n3 killed: the two left keep every group; each copies what it lacked.
        nodes.kill(3)
        _ = try await nodes.settled(count: 2)
        let allOnTwo = try await nodes.keptAsPlaced(on: [1, 2], ledgersPerGroup: 1)
        #expect(allOnTwo.allSatisfy { $0 == [1, 2] })

        // A stream on a member that keeps a group only while n3 is away.
        let borrowed = try #require(kept.indices.first { !kept[$0].contains(2) })
        let watcher = HealthStore(configuration: .init(port: nodes.port(of: 2), credential: owners[ids[borrowed]]!, timeout: .seconds(60)))
        defer { Task { await watcher.close() } }
        let watch = Task { () -> String in
            do {
                for try await _ in try await watcher.changes(for: AnchoredObjectQueryDescriptor(type: Samples.heartRate.objectType)) {}
                return "ended"
            } catch { return "\(error)" }
        }

        // n3 back (its copies as it had them): the groups are placed as before, and a member
        // that no longer keeps a group removes its copies of it, ending its streams.
        try await nodes.start(3)
        _ = try await nodes.settled(count: 3)
        #expect(try await nodes.keptAsPlaced(on: everyone, ledgersPerGroup: 1) == kept)
        let ended = await watch.value
        #expect(ended.contains("unavailable") && ended.contains("no longer keeps ledger '\(ids[borrowed])'"), "\(ended)")
        // Every sample is still there, read through any member.
        for (index, id) in ids.enumerated() {
            let reader = HealthStore(configuration: nodes.client(credential: owners[id]!, preferring: index % 3 + 1))
            let found = try await reader.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).map(\.uuid)
            await reader.close()
            #expect(saved[id].map { found == [$0] } ?? (found.count >= 2), "ledger \(id): \(found.count) samples")
        }
    }
}

extension ClusterNodes {
    /// Returns, once every member of `members` holds `ledgersPerGroup` ledgers of each group it
    /// keeps and none of the others, and all name the same keepers, each group's keepers (a
    /// guard of five minutes).
    func keptAsPlaced(on members: Set<Int>, ledgersPerGroup: UInt64) async throws -> [Set<Int>] {
        var last = ""
        for _ in 0..<1_500 {
            var views: [Int: ClusterStatus] = [:]
            for node in members { views[node] = try? await status(on: node) }
            let keepers = views[members.min()!].map { $0.groups.map { Set($0.keepers.compactMap { Int($0.dropFirst()) }) } }
            if let keepers, views.count == members.count,
                views.allSatisfy({ node, status in
                    status.groups.enumerated().allSatisfy { group, seen in
                        Set(seen.keepers.compactMap { Int($0.dropFirst()) }) == keepers[group]
                            && seen.ledgerCount == (keepers[group].contains(node) ? ledgersPerGroup : 0)
                    }
                })
            {
                return keepers
            }
            last = views.sorted { $0.key < $1.key }.map { node, status in "n\(node): " + status.groups.map { "\($0.keepers)=\($0.ledgerCount)" }.joined(separator: " ") }
                .joined(separator: "; ")
            try await Task.sleep(for: .milliseconds(200))
        }
        Issue.record("the ledgers were not kept as placed: \(last)")
        throw CancellationError()
    }
}
