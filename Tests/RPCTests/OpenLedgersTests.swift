import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import Testing

/// Many ledgers on one node: a store closes idle ledgers and keeps a bound on the open ones,
/// never under a call or stream that uses one; a closed ledger opens again on its next call.
@Suite("Open ledgers: closed when idle or past the bound, reopened on demand", .timeLimit(.minutes(5)))
struct OpenLedgersTests {
    /// The descriptors this process holds on files under `directory` (data.mdb and lock.mdb).
    static func descriptors(under directory: URL) -> Int {
        let prefix = directory.standardizedFileURL.resolvingSymlinksInPath().path + "/"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.count { entry in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"))?.hasPrefix(prefix) == true
        }
    }

    /// Waits (however long the machine takes: the suite's time limit is the guard) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async throws {
        while !condition() { try await Task.sleep(for: .milliseconds(20)) }
    }

    @Test("twelve ledgers under concurrent calls with four open at most: every call answers; a streamed ledger stays open under its stream; idle ones close, descriptors and all, and reopen with their data")
    func idleAndBounded() async throws {
        var ledgers = LedgerConfiguration()
        ledgers.maximumOpenLedgers = 4
        ledgers.ledgerIdleLifetime = .milliseconds(200)
        try await withTestServer(ledgers: ledgers) { server in
            let ids = (0..<12).map { "person-\($0)" }
            var issued: [String: String] = [:]
            for id in ids { issued[id] = try await server.store.createLedger(id: id).issueCredential(for: .owner) }
            let credentials = issued
            let directory = { (id: String) in server.directory.appending(path: "ledgers/\(id)") }

            // A stream on the first ledger, open throughout.
            let watcher = server.client(credentials[ids[0]]!)
            var updates = try await watcher.observe(Samples.heartRate.objectType).makeAsyncIterator()

            // Three rounds over every ledger, four clients at a time each saving and reading back.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, id) in ids.enumerated() {
                    group.addTask {
                        let client = server.client(credentials[id]!)
                        defer { Task { await client.close() } }
                        for round in 0..<3 {
                            try await client.save(Samples.heartRate(Double(60 + round), at: Double(index * 100 + round)))
                            let read = try await client.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
                            #expect(read.count == round + 1, "\(id), round \(round)")
                        }
                    }
                    if index >= 3 { try await group.next() }
                }
                try await group.waitForAll()
            }
            // Past the bound the store let the least recently used go, and idle ones close.
            try await Self.eventually { server.store.openLedgerCount <= 1 }
            for id in ids.dropFirst() {
                try await Self.eventually { Self.descriptors(under: directory(id)) == 0 }
                // Closed after a last checkpoint, a ledger keeps no commit journal.
                #expect(!FileManager.default.fileExists(atPath: directory(id).appending(path: "commits.journal").path))
            }
            // The streamed ledger is still open, under its stream, and the stream still tells.
            #expect(Self.descriptors(under: directory(ids[0])) > 0)
            #expect(FileManager.default.fileExists(atPath: directory(ids[0]).appending(path: "commits.journal").path))
            let writer = server.client(credentials[ids[0]]!)
            try await writer.save(Samples.heartRate(99, at: 5_000))
            #expect(try await updates.next() != nil)
            await watcher.close()
            try await Self.eventually { Self.descriptors(under: directory(ids[0])) == 0 }

            // A closed ledger opens again on its next call, with everything it held.
            let again = server.client(credentials[ids[7]]!)
            #expect(try await again.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == 3)
            #expect(Self.descriptors(under: directory(ids[7])) > 0)
            #expect(try server.store.ledger(ids[7]).verify().isValid)
            await again.close()
            await writer.close()
        }
    }
}
