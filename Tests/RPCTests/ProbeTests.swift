import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

/// `healthledgerd`'s liveness and readiness probes and its ledger gauges, from a daemon of its
/// own: idle ledgers closing, and a full disk named as one, counted, and failing readiness
/// while it lasts.
@Suite("Liveness, readiness and full disks", .timeLimit(.minutes(5)))
struct ProbeTests {
    @Test("/healthz and /readyz answer; ledgers touched close after --ledger-idle-timeout and open again on their next call")
    func probesAndIdleLedgers() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-probes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var credentials: [String] = []
        do {
            let store = try LedgerStore(directory: directory, configuration: try .forTests())
            for index in 0..<5 { credentials.append(try await store.createLedger(id: "p\(index)").issueCredential(for: .owner)) }
        }
        let daemon = try await DaemonProcess(dataDirectory: directory, arguments: ["--ledger-idle-timeout", "1"], metrics: true)
        defer { daemon.stop() }
        let metricsPort = try #require(daemon.metricsPort)
        let live = try await HTTPGet.fetch(port: metricsPort, path: "/healthz")
        #expect(live.status == 200 && live.body == "ok\n")
        let ready = try await HTTPGet.fetch(port: metricsPort, path: "/readyz")
        #expect(ready.status == 200 && ready.body == "ready\n")

        for credential in credentials {
            let owner = HealthStore(configuration: .init(port: daemon.port, credential: credential))
            try await owner.save(Samples.heartRate(70, at: 0))
            await owner.close()
        }
        // However long the machine takes: all five open, then all five closed.
        // (A ledger the server let go of is in use until it has closed: a last checkpoint.)
        let touched = try await Scrape.fetch(metricsPort, until: {
            $0.value("healthledger_ledgers_open") == 0 && $0.value("healthledger_ledgers_in_use") == 0
        })
        #expect(touched.value("healthledger_ledgers_open") == 0 && touched.value("healthledger_ledgers_in_use") == 0)
        let again = HealthStore(configuration: .init(port: daemon.port, credential: credentials[2]))
        #expect(try await again.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == 1)
        #expect(try await Scrape.fetch(metricsPort).value("healthledger_ledgers_open") == 1)
        await again.close()
        // An open ledger has its commit journal; stopped (SIGTERM), the server closes it.
        let journal = directory.appending(path: "ledgers/p2/commits.journal").path
        #expect(FileManager.default.fileExists(atPath: journal))
        daemon.stop()
        #expect(!FileManager.default.fileExists(atPath: journal))
    }

    @Test(
        "a full disk: the save names it and loses nothing, readiness fails and the metric counts it while it lasts; saves resume once space returns",
        .enabled(if: getuid() == 0, "mounting a small file system needs root"))
    func fullDisk() async throws {
        let mountPoint = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-full-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: mountPoint) }
        let mounted = try await runProcess(URL(filePath: "/bin/mount"), ["-t", "tmpfs", "-o", "size=24m", "tmpfs", mountPoint.path])
        try #require(mounted.status == 0, "mount: \(mounted.error)")
        defer { _ = umount2(mountPoint.path, 2 /* MNT_DETACH */) }
        let directory = mountPoint.appending(path: "data")
        let credential: String
        do {
            let store = try LedgerStore(directory: directory, configuration: try .forTests())
            credential = try await store.createLedger(id: "alice").issueCredential(for: .owner)
        }
        // Room that the test gives back later.
        let ballast = mountPoint.appending(path: "ballast")
        try Data(count: 6 << 20).write(to: ballast)

        let daemon = try await DaemonProcess(dataDirectory: directory, metrics: true)
        defer { daemon.stop() }
        let metricsPort = try #require(daemon.metricsPort)
        let owner = HealthStore(configuration: .init(port: daemon.port, credential: credential))
        var saved = 0
        var failure: RPCError?
        // Batches with a large metadata value each, until the disk refuses one.
        while failure == nil, saved < 100_000 {
            let batch = (0..<200).map { Samples.heartRate(70, at: Double(saved + $0), metadata: ["note": .string(String(repeating: "x", count: 2_000))]) }
            do {
                try await owner.save(batch)
                saved += batch.count
            } catch let error as RPCError {
                failure = error
            }
        }
        let refused = try #require(failure, "24 MiB never filled")
        #expect(refused.code == .unavailable || refused.code == .internalError || refused.code == .resourceExhausted, "\(refused)")
        #expect(refused.message.contains("the disk holding ledger 'alice'") && refused.message.contains("is full") && refused.message.contains("nothing was written"), "\(refused)")

        let unready = try await HTTPGet.fetch(port: metricsPort, path: "/readyz")
        #expect(unready.status == 503 && unready.body == "not ready: the disk is full for ledger 'alice'\n", "\(unready.body)")
        #expect((try await HTTPGet.fetch(port: metricsPort, path: "/healthz")).status == 200)
        let scrape = try await Scrape.fetch(metricsPort)
        #expect(scrape.value("healthledger_ledgers_on_full_disk") == 1)
        #expect((scrape.value("healthledger_full_disk_failures") ?? 0) >= 1)
        // Nothing acknowledged was lost, and nothing refused was written.
        #expect(try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == saved)

        // Space returns: the next save goes through, and the server is ready again.
        try FileManager.default.removeItem(at: ballast)
        try await owner.save(Samples.heartRate(71, at: -1))
        #expect(try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == saved + 1)
        let readyAgain = try await HTTPGet.fetch(port: metricsPort, path: "/readyz")
        #expect(readyAgain.status == 200, "\(readyAgain.body)")
        #expect(try await Scrape.fetch(metricsPort).value("healthledger_ledgers_on_full_disk") == 0)
        await owner.close()
    }
}
