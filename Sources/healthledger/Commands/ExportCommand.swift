import ArgumentParser
import Foundation
import HealthExport
import HealthLedgerSDK

struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export every object the credential may read, through the running server.",
        discussion: """
            --format jsonl (the default): HealthLedger's JSON Lines (docs/EXPORT.md), read back by
            `healthledger import healthledger`. --format apple-health: a zip with
            apple_health_export/export.xml (with the Health app's DTD) and workout-routes/*.gpx, read by
            `healthledger import apple-health` and by the tools people use on the Health app's exports.
            The owner's credential exports everything; an app's, what it may read.
            --events (the owner's only): the raw hash-chained event log with its head, as JSON Lines
            (docs/EXPORT.md §4), which `healthledger verify --events FILE` checks anywhere.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case jsonl, appleHealth = "apple-health" }

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The ledger (checked against the credential's).") var ledger: String
    @Option(name: .shortAndLong, help: "Where to write: a file, or - for standard output (jsonl only).") var output = "-"
    @Option(help: "jsonl or apple-health.") var format = Format.jsonl
    @Flag(help: "Export the raw event log with its head instead of the objects (owner only).") var events = false

    func validate() throws {
        if format == .appleHealth && output == "-" { throw ValidationError("--format apple-health writes a zip: give --output FILE") }
        if events && format != .jsonl { throw ValidationError("--events writes JSON Lines: leave out --format") }
    }

    func run() async throws {
        let destination = URL(filePath: output)
        if output != "-" {
            guard !FileManager.default.fileExists(atPath: destination.path) else {
                throw ValidationErrorExit("\(output) exists: choose a new file")
            }
        }
        var summary = ExportSummary()
        do {
            try await write(to: destination, into: &summary)
        } catch {
            // The file was new: a failed export leaves none behind (a rerun would find it "exists").
            if output != "-" { try? FileManager.default.removeItem(at: destination) }
            throw error
        }
        if events { return }
        let counts = summary.objects.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        let total = summary.objects.values.reduce(0, +)
        FileHandle.standardError.write(Data("exported \(total) objects (\(counts)), \(summary.characteristics) characteristics, \(summary.associations) workout associations, \(summary.attachments) attachments, \(summary.sourceOrders) source orders in \(String(format: "%.1f", summary.seconds)) s\n".utf8))
    }

    private func write(to destination: URL, into summary: inout ExportSummary) async throws {
        var result = ExportSummary()
        try await connection.withStore { store in
            let ping = try await store.ping()
            guard ping.ledgerID == ledger else {
                throw ValidationErrorExit("the credential is for ledger '\(ping.ledgerID)', not '\(ledger)'")
            }
            if events {
                let (handle, close) = try Self.open(output, destination)
                defer { close() }
                let head = try await EventLogExport.export(from: store, ledgerID: ledger, to: LineWriter(handle: handle))
                FileHandle.standardError.write(Data("exported \(head.sequence) events, head \(head.sequence):\(hex(head.hash))\n".utf8))
                return
            }
            switch format {
            case .jsonl:
                let (handle, close) = try Self.open(output, destination)
                defer { close() }
                result = try await LedgerLinesExporter(store: store).export(ledgerID: ledger, to: LineWriter(handle: handle))
            case .appleHealth:
                result = try await AppleHealthExporter(store: store).export(to: destination)
            }
        }
        summary = result
    }
}

extension ExportCommand {
    /// Standard output for "-", else a new file; and how to close it.
    static func open(_ output: String, _ destination: URL) throws -> (FileHandle, () -> Void) {
        if output == "-" { return (.standardOutput, {}) }
        guard FileManager.default.createFile(atPath: destination.path, contents: nil) else { throw ValidationErrorExit("cannot create \(output)") }
        let handle = try FileHandle(forWritingTo: destination)
        return (handle, { try? handle.close() })
    }
}

extension ImportCommand {
    struct HealthLedgerLines: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "healthledger",
            abstract: "Import a HealthLedger JSON Lines export (`healthledger export`) into the credential's ledger.",
            discussion: """
                Objects keep their UUIDs, sources, devices and metadata, so queries and statistics answer as they
                did. Objects already present are counted, not saved twice. Needs the owner's credential.
                """)
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The .jsonl file.") var path: String

        func run() async throws {
            let file = try inputFile(path)
            var summary = ImportSummary()
            try await connection.withStore { store in
                do {
                    summary = try await LedgerLinesImporter(store: store).run(file)
                } catch let error as ExportArchiveError {
                    throw ValidationErrorExit(error.description)
                }
            }
            try ImportCommand.report(summary, json: connection.json)
        }
    }
}
