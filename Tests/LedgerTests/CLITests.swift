import Foundation
import TestSupport
import Testing

/// The `healthledger` command as a user runs it.
@Suite("healthledger CLI")
struct CLITests {
    static func run(_ arguments: [String]) throws -> ProcessRun {
        try runProcess(CrashTests.executable, arguments)
    }

    @Test("unit convert prints the value, or one clear error line and a non-zero exit")
    func unitConvert() throws {
        #expect(try Self.run(["unit", "convert", "150", "lb", "kg"]).output == "68.0388\n")
        #expect(try Self.run(["unit", "convert", "98.6", "degF", "degC"]).output == "37\n")
        #expect(try Self.run(["unit", "convert", "72", "count/min", "count/s"]).output == "1.2\n")
        let incompatible = try Self.run(["unit", "convert", "1", "kg", "m"])
        #expect(incompatible.status != 0)
        #expect(incompatible.error.contains("'kg'") && incompatible.error.contains("'m'"))
        #expect(incompatible.error.split(separator: "\n").count == 1)
        let unknown = try Self.run(["unit", "convert", "1", "furlong", "m"])
        #expect(unknown.status != 0 && unknown.error.contains("furlong"))
        let notANumber = try Self.run(["unit", "convert", "abc", "kg", "g"])
        #expect(notANumber.status != 0 && notANumber.error.contains("abc"))
    }

    @Test("docs/TYPES.md is what `healthledger types --markdown` prints: every type's canonical and display unit")
    func typesDocument() throws {
        let document = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "../../docs/TYPES.md")
        let run = try Self.run(["types", "--markdown"])
        #expect(run.status == 0)
        #expect(run.output == (try String(contentsOf: document, encoding: .utf8)), "regenerate docs/TYPES.md with `healthledger types --markdown`")
        #expect(run.output.contains("| HeartRate | `count/s` | `count/min` | discreteTemporallyWeighted |"))
    }

    @Test("create, list, verify, replay and log a ledger")
    func ledgerLifecycle() throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let dataDir = ["--data-dir", directory.path]
        let created = try Self.run(["ledger", "create", "alice", "--name", "Alice"] + dataDir)
        #expect(created.status == 0 && created.output == "alice\n")
        let again = try Self.run(["ledger", "create", "alice"] + dataDir)
        #expect(again.status != 0 && again.error.contains("already exists"))
        let bad = try Self.run(["ledger", "create", "Not/Valid"] + dataDir)
        #expect(bad.status != 0 && bad.error.contains("invalid ledger id"))

        let ingest = try Self.run(["debug", "ingest", "alice", "--batches", "5", "--batch-size", "10"] + dataDir)
        #expect(ingest.status == 0)
        let list = try Self.run(["ledger", "list"] + dataDir)
        #expect(list.output.contains("alice") && list.output.contains("51"))
        let verify = try Self.run(["verify", "alice"] + dataDir)
        #expect(verify.status == 0 && verify.output.contains("OK: 51 events"))
        let replay = try Self.run(["replay", "alice"] + dataDir)
        #expect(replay.status == 0 && replay.output.contains("IDENTICAL"))
        let log = try Self.run(["log", "alice", "--limit", "2"] + dataDir)
        #expect(log.output.contains("ledgerCreated") && log.output.contains("objectSaved"))
        let missing = try Self.run(["verify", "bob"] + dataDir)
        #expect(missing.status != 0 && missing.error.contains("no ledger 'bob'"))
    }
}
