import Foundation
import HealthModel
import Ledger
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Kills a child process that is ingesting (`healthledger debug ingest`) at random
/// moments and checks, on reopen, that every acknowledged batch is there in full, that no
/// batch is there in part, that the hash chain verifies and that a replay is identical.
@Suite("Crash safety", .serialized)
struct CrashTests {
    static var executable: URL {
        URL(filePath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appending(path: "healthledger")
    }

    static let batchSize = 20

    /// Rounds per run; set HEALTHLEDGER_CRASH_ROUNDS for a longer soak (the robustness target is 50).
    static var rounds: Int { Int(ProcessInfo.processInfo.environment["HEALTHLEDGER_CRASH_ROUNDS"] ?? "") ?? 6 }

    @Test("kill -9 mid-ingest loses no acknowledged save and leaves no partial batch")
    func killDuringIngest() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.executable.path), "build the healthledger product first")
        let temporary = try TemporaryStore()
        _ = try temporary.ledgerStore.createLedger(id: "crash")
        temporary.close()

        var acknowledged = Set<Int>()
        var offset = 0
        for round in 0..<Self.rounds {
            let batches = 400
            let acks = try await Self.runAndKill(
                directory: temporary.directory, offset: offset, batches: batches,
                killAfter: Int.random(in: 1...60), concurrency: round % 2 == 0 ? 8 : 1)
            acknowledged.formUnion(acks)
            offset += batches

            // Reopen as a fresh process would, and check everything.
            let ledger = try temporary.reopen().ledger("crash")
            let verify = try ledger.verify()
            #expect(verify.isValid, "round \(round): \(verify.problem.map(String.init(describing:)) ?? "")")
            for batch in 0..<offset {
                let present = try (0..<Self.batchSize).filter {
                    try ledger.object(with: Self.uuid(batch: batch, item: $0), as: .owner) != nil
                }.count
                #expect(present == 0 || present == Self.batchSize, "round \(round): batch \(batch) is partial (\(present) of \(Self.batchSize))")
                if acknowledged.contains(batch) {
                    #expect(present == Self.batchSize, "round \(round): acknowledged batch \(batch) lost")
                }
            }
            #expect(try ledger.replay().identical)
            temporary.close()
        }
        #expect(!acknowledged.isEmpty)
    }

    /// The UUIDs `healthledger debug ingest` gives its samples.
    static func uuid(batch: Int, item: Int) -> UUID {
        UUID(uuidString: String(format: "%08x-0000-4000-8000-%012x", batch, item))!
    }

    /// Starts the ingest child, waits for `killAfter` acknowledgements, kills it with SIGKILL
    /// and returns the batches it acknowledged.
    static func runAndKill(directory: URL, offset: Int, batches: Int, killAfter: Int, concurrency: Int) async throws -> Set<Int> {
        let process = try ChildProcess(
            executable,
            [
                "debug", "ingest", "crash", "--data-dir", directory.path, "--batches", "\(batches)",
                "--batch-size", "\(batchSize)", "--concurrency", "\(concurrency)", "--offset", "\(offset)",
            ], captureError: false)
        var acknowledged = Set<Int>()
        var buffer = Data()
        while acknowledged.count < killAfter {
            let chunk = ChildProcess.readSome(process.output)
            if chunk.isEmpty { break }
            buffer.append(chunk)
            acknowledged.formUnion(parse(&buffer))
        }
        process.terminate(SIGKILL)
        process.wait()
        // Acknowledgements written before the kill are still in the pipe.
        buffer.append(ChildProcess.readAll(process.output))
        acknowledged.formUnion(parse(&buffer))
        return acknowledged
    }

    static func parse(_ buffer: inout Data) -> Set<Int> {
        var result = Set<Int>()
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            if line.hasPrefix("ack "), let batch = Int(line.dropFirst(4)) { result.insert(batch) }
        }
        return result
    }
}
