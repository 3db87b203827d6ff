import ArgumentParser
import Foundation
import HealthExport
import HealthLedgerSDK

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import health data through the running server, as the ledger's owner.",
        subcommands: [AppleHealth.self, HealthLedgerLines.self])

    struct AppleHealth: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apple-health",
            abstract: "Import the Health app's export (export.zip, or export.xml beside its workout-routes folder).",
            discussion: """
                Streams the file: memory stays flat whatever its size. Each record becomes an object of a
                source named after its sourceName (under org.healthledger.import., never an app's), with a
                sync identifier derived from its content, so importing the same export again, or a later one
                that overlaps it, adds nothing twice. A record the ledger cannot take is rejected with its line
                and reason and the import goes on; elements the ledger does not hold are counted as skipped.
                Needs the owner's credential. Exit status 0 when the whole file was read, 1 otherwise.
                """)
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "export.zip or export.xml.") var path: String
        @Option(help: "Objects per save (1–10000; a save too large for a frame is split).") var batchSize = 5000
        @Flag(help: "No progress bar, even on a terminal.") var quiet = false

        func validate() throws {
            guard (1...10_000).contains(batchSize) else { throw ValidationError("--batch-size must be between 1 and 10000") }
        }

        func run() async throws {
            let archive: ExportArchive
            do { archive = try ExportArchive(url: try inputFile(path)) } catch let error as ValidationErrorExit { throw error } catch { throw ValidationErrorExit("\(error)") }
            var summary = ImportSummary()
            try await connection.withStore { store in
                let importer = AppleHealthImporter(store: store, archive: archive)
                importer.batchSize = batchSize
                let bar = ProgressBar(enabled: !quiet && isatty(STDERR_FILENO) == 1)
                importer.progress = { bar.show($0) }
                summary = try await importer.run()
                bar.done()
            }
            try ImportCommand.report(summary, json: connection.json)
        }
    }

    /// Prints an import's summary (a table, or JSON), then fails with status 1 when the import
    /// stopped early.
    static func report(_ summary: ImportSummary, json: Bool) throws {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(summary), as: UTF8.self))
        } else {
            printSummary(summary)
        }
        if let error = summary.error {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }

    private static func printSummary(_ summary: ImportSummary) {
        let rate = summary.seconds > 0 ? Int(Double(summary.elements) / summary.seconds) : 0
        print("read \(summary.elements) elements in \(String(format: "%.1f", summary.seconds)) s (\(rate)/s)")
        print("imported \(summary.importedTotal): " + summary.imported.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))
        print("already present \(summary.alreadyPresent)")
        if summary.associatedWithWorkouts > 0 { print("associated with workouts \(summary.associatedWithWorkouts) samples") }
        print("skipped \(summary.skippedTotal)")
        for (reason, count) in summary.skipped.sorted(by: { $0.key < $1.key }) { print("  \(count)\t\(reason)") }
        print("rejected \(summary.rejectedTotal)")
        for (kind, count) in summary.rejected.sorted(by: { $0.key < $1.key }) { print("  \(count)\t\(kind)") }
        for rejection in summary.rejections.prefix(20) {
            // A line of a JSON-lines file is its own element: named once.
            print("  line \(rejection.line): " + (rejection.element == "line" ? "" : "\(rejection.element): ") + rejection.reason)
        }
        if summary.rejections.count > 20 { print("  … \(summary.rejectedTotal - 20) more (--json lists the first \(ImportSummary.detailLimit))") }
    }
}

/// A one-line progress bar on standard error: records, records/s and the share of the file read.
final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private let lock = NSLock()
    private var lastDraw = ContinuousClock.now - .seconds(1)

    init(enabled: Bool) { self.enabled = enabled }

    func show(_ progress: ImportProgress) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let now = ContinuousClock.now
        guard now - lastDraw >= .milliseconds(200) else { return }
        lastDraw = now
        let width = 30
        let filled = Int(progress.fraction * Double(width))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let line = String(format: "\r%@ %5.1f%%  %d records  %d/s ", bar, progress.fraction * 100, progress.elements, Int(progress.elementsPerSecond))
        FileHandle.standardError.write(Data(line.utf8))
    }

    func done() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
