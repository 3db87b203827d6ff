import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger

/// Many ledgers on one node: a data directory of `count` ledgers (made once and kept), served
/// by a `healthledgerd` of its own. The server's resident memory and descriptors with 1,000
/// ledgers active, after more were touched, and once they idle; the first call to a closed
/// ledger against a call to an open one (each on a new connection, p50 and p99); and the same
/// with nothing ever closed (`--max-open-ledgers` and `--ledger-idle-timeout` out of reach).
struct ManyLedgersBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "many-ledgers", abstract: "100,000 ledgers on one node: memory, descriptors and the first call to a closed ledger.")

    @Option(help: "Ledgers in the data directory.") var count = 100_000
    @Option(help: "Ledgers kept busy.") var active = 1_000
    @Option(help: "Ledgers touched beyond the active ones, one first call each (measured).") var cold = 3_000
    @Option(help: "The data directory, made on the first run and reused.") var data = "/tmp/healthledger-many-ledgers"
    @Option(help: "The folder holding a release build of healthledgerd.") var binaries = ".build/release"

    func run() async throws {
        let directory = URL(filePath: data, directoryHint: .isDirectory)
        let credentials = try await Self.ledgers(count, in: directory)
        guard active + cold <= credentials.count else { throw BenchFailure("--active plus --cold is more than --count") }
        let executable = URL(filePath: binaries).appending(path: "healthledgerd")
        print("== \(credentials.count) ledgers in \(directory.path); \(active) active, \(cold) more touched once")
        for (name, arguments) in [
            ("closing (defaults, --ledger-idle-timeout 10)", ["--ledger-idle-timeout", "10"]),
            ("all open (nothing closed)", ["--max-open-ledgers", "1000000", "--ledger-idle-timeout", "1000000"]),
        ] {
            let server = try ServerProcess(executable: executable, dataDirectory: directory, arguments: arguments)
            defer { server.stop() }
            print("-- \(name)")
            print("RESULT started: \(Self.usage(of: server.processIdentifier))")
            // The active ledgers: three rounds of a ping and a durable save each, 16 at a time.
            let busy = Array(credentials.prefix(active))
            for round in 0..<3 {
                try await Self.concurrently(busy, width: 16) { credential in
                    let store = HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: credential))
                    _ = try await store.ping()
                    try await store.save(try Self.sample(round))
                    await store.close()
                }
            }
            print("RESULT \(active) active: \(Self.usage(of: server.processIdentifier))")
            // A first call each to ledgers not open, against a call to an open one, each on a new connection.
            let coldCalls = try await Self.firstCalls(Array(credentials.dropFirst(active).prefix(cold)), port: server.port)
            let warmCalls = try await Self.firstCalls(Array(busy.prefix(min(active, cold))), port: server.port)
            print(String(format: "RESULT first call (connect + ping) to a closed ledger: p50 %.2f ms, p99 %.2f ms; to an open one: p50 %.2f ms, p99 %.2f ms (%d each)",
                percentile(coldCalls, 0.5), percentile(coldCalls, 0.99), percentile(warmCalls, 0.5), percentile(warmCalls, 0.99), coldCalls.count))
            print("RESULT after \(active + cold) touched: \(Self.usage(of: server.processIdentifier))")
            let before = Self.cpuSeconds(of: server.processIdentifier)
            try await Task.sleep(for: .seconds(15))
            let idleCPU = Self.cpuSeconds(of: server.processIdentifier) - before
            print(String(format: "RESULT after 15 s idle: %@; CPU used while idle: %.2f s", Self.usage(of: server.processIdentifier), idleCPU))
        }
    }

    static func sample(_ index: Int) throws -> HealthObject {
        let time = Date(timeIntervalSince1970: 1_700_000_000 + Double(index) * 60)
        return .quantitySample(QuantitySample(type: try QuantityType("HKQuantityTypeIdentifierHeartRate"), quantity: try Quantity(70, "count/min"), start: time, end: time))
    }

    /// Each credential's first call (a new connection and a ping), one after another, in ms, sorted.
    static func firstCalls(_ credentials: [String], port: Int) async throws -> [Double] {
        let clock = ContinuousClock()
        var times: [Double] = []
        for credential in credentials {
            let store = HealthStore(configuration: HealthStoreConfiguration(port: port, credential: credential))
            let started = clock.now
            _ = try await store.ping()
            times.append(seconds(clock.now - started) * 1e3)
            await store.close()
        }
        return times.sorted()
    }

    /// User and system CPU time the process has used.
    static func cpuSeconds(of pid: Int32) -> Double {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        // After the command's closing parenthesis: fields 3 onwards; utime and stime are 14 and 15.
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory and open descriptors of the process.
    static func usage(of pid: Int32) -> String {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.map { $0.dropFirst(6).trimmingCharacters(in: .whitespaces) } ?? "?"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
        let ledgerFiles = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count { entry in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(entry)"))?.hasSuffix(".mdb") == true
        }
        return "resident \(rss), \(descriptors) descriptors (\(ledgerFiles) on ledger files)"
    }

    static func concurrently(_ items: [String], width: Int, _ body: @escaping @Sendable (String) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, item) in items.enumerated() {
                if index >= width { try await group.next() }
                group.addTask { try await body(item) }
            }
            try await group.waitForAll()
        }
    }

    /// The credentials of `count` ledgers in `directory`, making the ledgers missing (an owner
    /// credential each, kept in `credentials.txt`).
    static func ledgers(_ count: Int, in directory: URL) async throws -> [String] {
        let file = directory.appending(path: "credentials.txt")
        var credentials = ((try? String(contentsOf: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        guard credentials.count < count else { return Array(credentials.prefix(count)) }
        var configuration = try BenchEncryption.configuration()
        configuration.maximumOpenLedgers = 64
        configuration.ledgerIdleLifetime = .seconds(1)
        configuration.followInterval = nil
        let store = try LedgerStore(directory: directory, configuration: configuration)
        let clock = ContinuousClock()
        let started = clock.now
        let output = try FileHandle(forWritingTo: { if !FileManager.default.fileExists(atPath: file.path) { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }; return file }())
        defer { try? output.close() }
        try output.seekToEnd()
        while credentials.count < count {
            let next = credentials.count
            let batch = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for index in next..<min(count, next + 16) {
                    group.addTask {
                        let id = String(format: "person-%06d", index)
                        let ledger = try (try? store.ledger(id)) ?? store.createLedger(id: id)
                        return (index, try await ledger.issueCredential(for: .owner))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }.sorted { $0.0 < $1.0 }.map(\.1)
            }
            credentials += batch
            try output.write(contentsOf: Data(batch.map { $0 + "\n" }.joined().utf8))
            if credentials.count % 10_000 == 0 {
                print(String(format: "   made %d ledgers (%.0f s)", credentials.count, seconds(clock.now - started)))
            }
        }
        return credentials
    }
}
