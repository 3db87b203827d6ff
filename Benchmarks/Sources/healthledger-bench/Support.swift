import Foundation
import Ledger
import Synchronization

/// An error the benchmark prints as `Error: <message>` with exit code 1.
struct BenchFailure: LocalizedError, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
    var errorDescription: String? { message }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The value below which `fraction` of `sorted` lies (nearest rank).
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

/// Hands out 0, 1, 2, … across tasks.
final class Counter: Sendable {
    private let value = Mutex(0)

    func take(below limit: Int) -> Int? {
        value.withLock { current in
            guard current < limit else { return nil }
            defer { current += 1 }
            return current
        }
    }
}

/// Saves `count` items in batches of 1,000 with 4 batches in flight, as an ingest pipeline
/// does: `save` is given each batch's range of item indexes.
func pipelinedBatches(count: Int, _ save: @escaping @Sendable (Range<Int>) async throws -> Void) async throws {
    let next = Counter()
    let batches = (count + 999) / 1000
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<4 {
            group.addTask {
                while let batch = next.take(below: batches) { try await save(batch * 1000..<min(count, batch * 1000 + 1000)) }
            }
        }
        try await group.waitForAll()
    }
}

/// Runs `body` on `count` threads of their own and waits for all: for the peers' blocking
/// client libraries, which must not hold the cooperative pool's few threads.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let failure = Mutex<(any Error)?>(nil)
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            defer { group.leave() }
            do { try body(index) } catch { failure.withLock { $0 = $0 ?? error } }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    group.wait()
    if let error = failure.withLock({ $0 }) { throw error }
}

/// Raw figures from `limits.sh` (raw LMDB and loopback TCP), run in the same process tree
/// as the benchmark.
struct Reference {
    var batchedAppends: Double?
    var singleCommits: Double?
    var scan: Double?
    var pingPongMicroseconds: Double?
    var output: String

    var summary: String { output.isEmpty ? "  (reference unavailable)" : output.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") }

    static func measure(script: String) -> Reference {
        guard FileManager.default.fileExists(atPath: script) else {
            return Reference(output: "reference script \(script) not found: ratios omitted")
        }
        let process = Process()
        process.executableURL = URL(filePath: "/bin/bash")
        process.arguments = [script]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        do {
            try process.run()
        } catch {
            return Reference(output: "cannot run \(script): \(error)")
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let output = String(decoding: data, as: UTF8.self)
        var reference = Reference(output: output.trimmingCharacters(in: .whitespacesAndNewlines))
        for line in output.split(separator: "\n") {
            let rate = line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
            if line.hasPrefix("append"), line.contains("batch=1000"), line.contains("sync=1") { reference.batchedAppends = rate }
            if line.hasPrefix("append"), line.contains("batch=1 "), line.contains("sync=1") { reference.singleCommits = rate }
            if line.hasPrefix("scan"), reference.scan == nil { reference.scan = rate }
            if line.hasPrefix("loopback ping-pong:") {
                reference.pingPongMicroseconds = line.split(separator: " ").dropFirst(2).first.flatMap { Double($0) }
            }
        }
        return reference
    }
}

/// A process's resident memory now (`VmRSS`) and at its peak (`VmHWM`), in KiB.
func residentKiB(of pid: Int32) -> (now: Int, peak: Int) {
    (ImportScenario.statusKiB("VmRSS:", of: pid), ImportScenario.statusKiB("VmHWM:", of: pid))
}

/// Encryption at rest for a run (`--encrypted`): a master key made in `scratch`, named by
/// `HEALTHLEDGER_MASTER_KEY_FILE` so that the server processes the run starts use it too.
enum BenchEncryption {
    static func enable(in scratch: URL) throws {
        let keys = scratch.appending(path: "keys", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: keys, withIntermediateDirectories: true)
        let key = try MasterKey.create(at: keys.appending(path: "master.key").path)
        setenv("HEALTHLEDGER_MASTER_KEY_FILE", key.path, 1)
        print("== encryption at rest: on (master key \(key.id))")
    }

    /// The ledgers' settings of this run: encrypted when ``enable(in:)`` ran.
    static func configuration() throws -> LedgerConfiguration {
        var configuration = LedgerConfiguration()
        configuration.masterKey = try ProcessInfo.processInfo.environment["HEALTHLEDGER_MASTER_KEY_FILE"].map(MasterKey.load(from:))
        return configuration
    }
}
