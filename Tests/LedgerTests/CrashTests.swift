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
        let temporary = try Self.crashStore()

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
            try Self.check(temporary.reopen().ledger("crash"), sizes: Array(repeating: Self.batchSize, count: offset), acknowledged: acknowledged, round: round)
            temporary.close()
        }
        #expect(!acknowledged.isEmpty)
    }

    /// A store holding the ledger `crash`, closed, for the child process to open.
    static func crashStore() throws -> TemporaryStore {
        #expect(FileManager.default.isExecutableFile(atPath: executable.path), "build the healthledger product first")
        let temporary = try TemporaryStore()
        _ = try temporary.ledgerStore.createLedger(id: "crash")
        temporary.close()
        return temporary
    }

    /// Checks the ledger reopened after round `round`: the chain verifies, replay is
    /// identical, and each batch `b` (of `sizes[b]` samples) is there whole or not at all,
    /// whole when it was acknowledged.
    static func check(_ ledger: Ledger, sizes: [Int], acknowledged: Set<Int>, round: Int) throws {
        let verify = try ledger.verify()
        #expect(verify.isValid, "round \(round): \(verify.problem.map(String.init(describing:)) ?? "")")
        for (batch, size) in sizes.enumerated() {
            let present = try (0..<size).filter {
                try ledger.object(with: Self.uuid(batch: batch, item: $0), as: .owner) != nil
            }.count
            #expect(present == 0 || present == size, "round \(round): batch \(batch) is partial (\(present) of \(size))")
            if acknowledged.contains(batch) {
                #expect(present == size, "round \(round): acknowledged batch \(batch) lost")
            }
        }
        #expect(try ledger.replay().identical)
    }

    /// A power loss, as the disk may have it after one: the child is killed (what it wrote
    /// but did not sync is in the page cache), then everything a power loss could lose or
    /// tear is made garbage — both LMDB meta pages, and every page past the last page of the
    /// journal's checkpoint (all written since it). Recovery must rebuild every acknowledged
    /// batch from the checkpoint and the journal (docs/LEDGER.md, "Durability").
    @Test("a power loss (meta pages and every page since the journal's checkpoint garbage) loses no acknowledged save")
    func powerLossAfterCheckpoints() async throws {
        let temporary = try Self.crashStore()
        let ledgerDirectory = temporary.directory.appending(path: "ledgers/crash")

        var acknowledged = Set<Int>()
        var offset = 0
        var roundsWithPagesLost = 0
        var sizes: [Int] = []
        for round in 0..<Self.rounds {
            // Batches of 20 are journaled; batches of 600 (about 350 KB) are too large for the journal, and
            // each commit is followed by a checkpoint instead.
            let batches = 600
            let size = round % 4 < 2 ? Self.batchSize : 600
            let acks = try await Self.runAndKill(
                directory: temporary.directory, offset: offset, batches: batches,
                killAfter: Int.random(in: size == Self.batchSize ? 50...400 : 5...40), concurrency: round % 2 == 0 ? 1 : 8,
                batchSize: size, checkpointIntervalMilliseconds: 5)
            acknowledged.formUnion(acks)
            offset += batches
            sizes += Array(repeating: size, count: batches)
            // A checkpoint just before the kill may leave no page past its last.
            if try Self.losePower(in: ledgerDirectory) > 0 { roundsWithPagesLost += 1 }

            try Self.check(temporary.reopen().ledger("crash"), sizes: sizes, acknowledged: acknowledged, round: round)
            temporary.close()
        }
        #expect(!acknowledged.isEmpty)
        #expect(roundsWithPagesLost > 0, "no round wrote a page past its last checkpoint")
    }

    /// Makes garbage of what a power loss could take from the ledger in `directory` after its
    /// process died: both meta pages of `data.mdb`, and the pages past the last one of the
    /// checkpoint in `commits.journal` (the valid header slot with the higher generation;
    /// docs/LEDGER.md gives the layout). And as the machine restarted, the checkpoint is
    /// made to say it was taken in another boot (its checksum written again). Returns how
    /// many pages past the checkpoint's last there were.
    static func losePower(in directory: URL) throws -> Int {
        let journalURL = directory.appending(path: "commits.journal")
        var journal = try Data(contentsOf: journalURL)
        func integer<T: FixedWidthInteger>(_: T.Type, _ offset: Int) -> T {
            journal.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        }
        let slotSize = 4 << 10
        let slots = (0..<2).filter { integer(UInt32.self, $0 * slotSize) == 0x484A_4C48 }
        let slot = try #require(slots.max { integer(UInt64.self, $0 * slotSize + 8) < integer(UInt64.self, $1 * slotSize + 8) }) * slotSize
        let pageSize = Int(integer(UInt32.self, slot + 32))
        let kept = Int(integer(UInt32.self, slot + 36))
        // Each meta page: a 16-byte page header, then the meta (last page at 120, transaction at 128).
        let metas = (0..<2).map { slot + 64 + $0 * kept + 16 }
        let newest = metas.max { integer(UInt64.self, $0 + 128) < integer(UInt64.self, $1 + 128) }!
        let lastPage = Int(integer(UInt64.self, newest + 120))
        // Another boot: a different id, and the checksum over the header's first 56 bytes and the meta bytes.
        journal.replaceSubrange(slot + 40..<slot + 56, with: (0..<16).map { _ in UInt8.random(in: 0...255) })
        var checksum = Checksum64()
        checksum.update(journal[slot..<slot + 56])
        checksum.update(journal[slot + 64..<slot + 64 + 2 * kept])
        withUnsafeBytes(of: checksum.value.littleEndian) { journal.replaceSubrange(slot + 56..<slot + 64, with: $0) }
        try journal.write(to: journalURL)

        let file = directory.appending(path: "data.mdb").path
        let fd = open(file, O_RDWR)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        defer { close(fd) }
        let pages = Int(lseek(fd, 0, SEEK_END)) / pageSize
        var random = SystemRandomNumberGenerator()
        for page in [0, 1] + Array(stride(from: lastPage + 1, to: pages, by: 1)) {
            let bytes = (0..<pageSize).map { _ in UInt8.random(in: 0...255, using: &random) }
            guard bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, pageSize, off_t(page * pageSize)) }) == pageSize else {
                throw POSIXError(.init(rawValue: errno)!)
            }
        }
        return max(pages - lastPage - 1, 0)
    }

    /// The journal's checksum, as docs/LEDGER.md defines it.
    struct Checksum64 {
        var value: UInt64 = 0x2545_F491_4F6C_DD1D

        mutating func update(_ bytes: Data) {
            let bytes = [UInt8](bytes)
            for start in stride(from: 0, to: bytes.count, by: 8) {
                var word: UInt64 = 0
                for (index, byte) in bytes[start..<min(start + 8, bytes.count)].enumerated() { word |= UInt64(byte) << (8 * UInt64(index)) }
                value = (value ^ word) &* 0x9E37_79B9_7F4A_7C15
                value ^= value >> 29
            }
        }
    }

    /// The UUIDs `healthledger debug ingest` gives its samples.
    static func uuid(batch: Int, item: Int) -> UUID {
        UUID(uuidString: String(format: "%08x-0000-4000-8000-%012x", batch, item))!
    }

    /// Starts the ingest child, waits for `killAfter` acknowledgements, kills it with SIGKILL
    /// and returns the batches it acknowledged.
    static func runAndKill(
        directory: URL, offset: Int, batches: Int, killAfter: Int, concurrency: Int, batchSize: Int = batchSize,
        checkpointIntervalMilliseconds: Int = 1000
    ) async throws -> Set<Int> {
        let process = try ChildProcess(
            executable,
            [
                "debug", "ingest", "crash", "--data-dir", directory.path, "--batches", "\(batches)",
                "--batch-size", "\(batchSize)", "--concurrency", "\(concurrency)", "--offset", "\(offset)",
                "--checkpoint-interval-ms", "\(checkpointIntervalMilliseconds)",
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
