import Foundation
import HealthLedgerSDK
import Ledger
import LedgerSchema
import TestSupport
import Testing

/// The CLI and the daemon refuse bad input with one clear line and a non-zero exit, and leave
/// nothing behind: no crash on a port out of range, no raw Foundation error for a missing
/// file or a directory, no data directory made where a path was mistyped, no half-written
/// export.
@Suite("healthledger and healthledgerd: bad input", .timeLimit(.minutes(3)))
struct CLIBadInputTests {
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessRun {
        try await runProcess(AuthCLITests.executable, arguments, environment: environment)
    }

    /// Expects exit status 1 and `message` in standard error.
    static func expectRefused(_ run: ProcessRun, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(run.status == 1 && run.error.contains(message), "\(run.status): \(run.error)", sourceLocation: sourceLocation)
        #expect(!run.error.contains("NSCocoaErrorDomain") && !run.error.contains("Fatal error"), "\(run.error)", sourceLocation: sourceLocation)
    }

    @Test("client commands: a port out of range or not a number, a missing or directory input, a failed export's file")
    func clientCommands() async throws {
        try await withTestServer { server in
            let scratch = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-cli-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let owner = ["--port", "\(server.port)", "--credential", server.ownerCredential]

            for port in ["70000", "-1", "0"] {
                Self.expectRefused(try await Self.run(["ping", "--port=\(port)", "--credential", server.ownerCredential]), "port \(port) is not a TCP port: 1 to 65535")
            }
            Self.expectRefused(
                try await Self.run(["ping", "--credential", server.ownerCredential], environment: ["HEALTHLEDGER_PORT": "abc"]),
                "HEALTHLEDGER_PORT is 'abc', not a port number")

            let missing = scratch.appending(path: "missing.json").path
            Self.expectRefused(try await Self.run(["save", "--input", missing] + owner), "no file at \(missing)")
            Self.expectRefused(try await Self.run(["correlation", "save", "--input", scratch.path] + owner), "\(scratch.path) is a directory, not a file")
            Self.expectRefused(try await Self.run(["import", "apple-health", scratch.path] + owner), "\(scratch.path) is a directory, not a file")
            Self.expectRefused(try await Self.run(["import", "healthledger", missing] + owner), "no file at \(missing)")
            Self.expectRefused(try await Self.run(["verify", "--events", scratch.path]), "\(scratch.path) is a directory, not a file")

            // A failed export leaves no file behind, so the next one is not refused as "exists".
            let events = scratch.appending(path: "alice.events").path
            let refused = try await Self.run(["export", "alice", "--events", "-o", events, "--port", "\(server.port)", "--credential", server.appCredential])
            #expect(refused.status == 1 && refused.error.contains("permissionDenied"), "\(refused.error)")
            #expect(!FileManager.default.fileExists(atPath: events), "the failed export's file is removed")
            let exported = try await Self.run(["export", "alice", "--events", "-o", events] + owner)
            #expect(exported.status == 0, "\(exported.error)")
        }
    }

    @Test("data-directory commands: a mistyped directory is refused and not made; replay names --until; healthledgerd refuses an unknown log level")
    func dataDirectoryCommands() async throws {
        try await withTestServer { server in
            let typo = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-typo-\(UUID().uuidString)").path
            for arguments in [["verify", "alice"], ["replay", "alice"], ["log", "alice"], ["ledger", "list"], ["admin", "credentials", "alice"], ["backup", "alice", typo + "-backup"]] {
                Self.expectRefused(try await Self.run(arguments + ["--data-dir", typo]), "no data directory at \(typo)")
                #expect(!FileManager.default.fileExists(atPath: typo), "\(arguments) made the directory")
            }
            // A restore that fails removes the data directory it made.
            Self.expectRefused(try await Self.run(["restore", typo + "-nothing", "--data-dir", typo]), "no backup at \(typo)-nothing")
            #expect(!FileManager.default.fileExists(atPath: typo), "a failed restore leaves no data directory")

            let until = try await Self.run(["replay", "alice", "--until", "yesterday", "--output", typo, "--data-dir", server.directory.path])
            Self.expectRefused(until, "--until 'yesterday'")

            let daemon = try await runProcess(
                DaemonProcess.executable, ["--data-dir", server.directory.path, "--port", "0", "--metrics-port=-1", "--grpc-port=-1", "--web-port=-1", "--log-level", "loud"])
            #expect(daemon.status != 0 && daemon.error.contains("--log-level 'loud' is not one of trace, debug, info, notice, warning, error, critical"), "\(daemon.error)")
        }
    }

    @Test("verify --against another ledger's event-log export says whose it is, not that history was rewritten")
    func verifyAgainstAnotherLedger() async throws {
        try await withTestServer { server in
            let bob = try server.store.createLedger(id: "bob")
            let bobOwner = try await bob.issueCredential(for: .owner)
            let file = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-bob-\(UUID().uuidString).events").path
            defer { try? FileManager.default.removeItem(atPath: file) }
            let exported = try await Self.run(["export", "bob", "--events", "-o", file, "--port", "\(server.port)", "--credential", bobOwner])
            #expect(exported.status == 0, "\(exported.error)")
            let verified = try await Self.run(["verify", "alice", "--quick", "--against", file, "--data-dir", server.directory.path])
            #expect(verified.status == 2 && verified.output.contains("FAILED: the export is of ledger 'bob', not 'alice'"), "\(verified.output)\(verified.error)")
            let own = try await Self.run(["verify", "bob", "--quick", "--against", file, "--data-dir", server.directory.path])
            #expect(own.status == 0 && own.output.contains("extends the history in"), "\(own.output)\(own.error)")
        }
    }

    @Test("replay finds damaged projections (DIFFERENT, exit 2), --install repairs them (REPAIRED), and then they are IDENTICAL; verify says FAILED until then")
    func replayRepairs() async throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-replay-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sample = Samples.heartRate(70, at: 0)
        do {
            let store = try LedgerStore(directory: directory, configuration: .forTests())
            try await store.createLedger(id: "alice").save([sample, Samples.heartRate(71, at: 60)], by: .owner)
        }
        #expect(try dropObjectProjection(ledgerAt: directory.appending(path: "ledgers/alice"), uuid: Array(sample.uuid.bytes)))
        let dataDir = ["--data-dir", directory.path]
        let verify = try await Self.run(["verify", "alice"] + dataDir)
        #expect(verify.status == 2 && verify.output.contains("FAILED: the live projections differ from a fresh replay"), "\(verify.output)\(verify.error)")
        let different = try await Self.run(["replay", "alice"] + dataDir)
        #expect(different.status == 2 && different.output.contains("DIFFERENT: the live projections do not match the log"), "\(different.output)")
        let repaired = try await Self.run(["replay", "alice", "--install"] + dataDir)
        #expect(repaired.status == 0 && repaired.output.contains("REPAIRED"), "\(repaired.output)\(repaired.error)")
        let identical = try await Self.run(["replay", "alice"] + dataDir)
        #expect(identical.status == 0 && identical.output.contains("IDENTICAL"), "\(identical.output)")
        #expect(try await Self.run(["verify", "alice"] + dataDir).status == 0)
    }

    @Test("export and import refusals: an existing file, a zip to standard output, --events with a format, an app's import")
    func exportImportRefusals() async throws {
        try await withTestServer { server in
            let scratch = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-io-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let owner = ["--port", "\(server.port)", "--credential", server.ownerCredential]
            try await server.client().save(Samples.heartRate(70, at: 0))
            let existing = scratch.appending(path: "alice.jsonl").path
            try Data("keep me".utf8).write(to: URL(filePath: existing))
            Self.expectRefused(try await Self.run(["export", "alice", "-o", existing] + owner), "\(existing) exists: choose a new file")
            #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me", "the existing file is untouched")
            let zip = try await Self.run(["export", "alice", "--format", "apple-health"] + owner)
            #expect(zip.status != 0 && zip.error.contains("--format apple-health writes a zip: give --output FILE"), "\(zip.error)")
            let formatted = try await Self.run(["export", "alice", "--events", "--format", "apple-health", "-o", scratch.appending(path: "e").path] + owner)
            #expect(formatted.status != 0 && formatted.error.contains("--events writes JSON Lines: leave out --format"), "\(formatted.error)")

            let lines = scratch.appending(path: "export.jsonl").path
            #expect(try await Self.run(["export", "alice", "-o", lines] + owner).status == 0)
            let head = try server.ledger.head()
            let app = try await Self.run(["import", "healthledger", lines, "--port", "\(server.port)", "--credential", server.appCredential])
            #expect(app.status == 1 && app.error.contains("permissionDenied") && app.error.contains("only the owner may do"), "\(app.error)")
            #expect(try server.ledger.head() == head, "the app's import wrote nothing")
        }
    }

    @Test("proof -o and attachment get --output never replace a file: a pinned tree head survives a consistency proof written over it")
    func outputsNeverReplace() async throws {
        try await withTestServer { server in
            let scratch = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-out-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let owner = ["--port", "\(server.port)", "--credential", server.ownerCredential]
            let sample = Samples.heartRate(70, at: 0)
            let client = server.client()
            try await client.save(sample)
            let head = scratch.appending(path: "head.json").path
            #expect(try await Self.run(["proof", "tree-head", "-o", head] + owner).status == 0)
            let pinned = try Data(contentsOf: URL(filePath: head))
            try await client.save(Samples.heartRate(71, at: 60))
            Self.expectRefused(try await Self.run(["proof", "consistency", "--from", head, "-o", head] + owner), "\(head) exists: choose a new file")
            Self.expectRefused(try await Self.run(["proof", "tree-head", "-o", head] + owner), "\(head) exists: choose a new file")
            #expect(try Data(contentsOf: URL(filePath: head)) == pinned, "the pinned head is untouched")

            let png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3])
            let attachment = try await client.addAttachment(to: sample.uuid, name: "scan.png", contentType: "image/png", data: Array(png))
            let copy = scratch.appending(path: "scan.png").path
            try Data("mine".utf8).write(to: URL(filePath: copy))
            Self.expectRefused(try await Self.run(["attachment", "get", "--uuid", attachment.uuid.uuidString, "--output", copy] + owner), "\(copy) exists: choose a new file")
            #expect(try String(contentsOfFile: copy, encoding: .utf8) == "mine")
            await client.close()
        }
    }
}
