import ArgumentParser
import FoundationXML
import Foundation
import HealthExport
import HealthLedgerSDK
import HealthModel
import Ledger

/// The Apple Health import benchmark: a generated `export.xml` imported into `healthledgerd`
/// running as its own process, next to `xmllint --stream` reading the same file (libxml2's
/// own streaming parser: the reference) and the two parsers the importer could use.
struct ImportBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Benchmark the Apple Health import (build with -c release): records/s and peak memory, against xmllint --stream.")

    @Option(help: "Records in the generated export.xml (3,500,000 is about 1 GB).") var records = 3_500_000
    @Option(help: "Use this export.xml instead of generating one.") var file: String?
    @Option(help: "Rounds of the parse-only scenarios; medians are reported.") var rounds = 3
    @Option(help: "Records of the smaller file the two parsers are compared on.") var parserRecords = 300_000
    @Option(name: .customLong("work-dir"), help: "Scratch directory (default: a temporary one).") var workDirectory: String?
    @Option(help: "The folder holding release builds of healthledgerd and healthledger.") var binaries = ".build/release"

    func run() async throws {
        let scratch = URL(filePath: workDirectory ?? NSTemporaryDirectory(), directoryHint: .isDirectory)
            .appending(path: "healthledger-import-bench-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let clock = ContinuousClock()

        let big: URL
        if let file { big = URL(filePath: file) } else {
            big = scratch.appending(path: "export.xml")
            let started = clock.now
            let count = try SyntheticExport(records: records).write(to: big)
            print("generated \(count) records, \(ImportScenario.fileSize(big) >> 20) MiB in \(String(format: "%.1f", seconds(clock.now - started))) s")
        }
        let small = scratch.appending(path: "small.xml")
        try SyntheticExport(records: parserRecords, seed: 7).write(to: small)
        // Foundation's XMLParser on Linux crashes (a null default value in its attribute-
        // declaration callback) on the DTD every Health export carries, so it reads a copy
        // without the DTD.
        let smallWithoutDTD = scratch.appending(path: "small-no-dtd.xml")
        let text = try String(contentsOf: small, encoding: .utf8)
        guard let dtd = text.range(of: "<!DOCTYPE"), let dtdEnd = text.range(of: "]>\n") else { throw BenchFailure("the generated file has no DTD") }
        try Data((String(text[..<dtd.lowerBound]) + String(text[dtdEnd.upperBound...])).utf8).write(to: smallWithoutDTD)

        // The reference: libxml2's streaming reader doing nothing but read.
        let elements = try ImportScenario.countRecords(big)
        let lint = try ImportScenario.xmllint(big, rounds: rounds)
        print("== reference: xmllint --stream --noout: \(String(format: "%.2f", lint.median)) s, \(Int(Double(elements) / lint.median)) records/s (median of \(rounds))")

        // The two parsers, on the smaller file: the importer's libxml2 SAX reader and Foundation's XMLParser.
        let smallCount = try ImportScenario.countRecords(small)
        var saxTimes: [Double] = []
        var rawTimes: [Double] = []
        var foundationTimes: [Double] = []
        for _ in 0..<rounds {
            var started = clock.now
            let raw = StreamCounter()
            let rawParser = XMLStreamParser(handler: raw)
            try ExportArchive(url: smallWithoutDTD).readXML { try rawParser.feed($0) }
            try rawParser.finish()
            rawTimes.append(seconds(clock.now - started))
            started = clock.now
            _ = try ImportScenario.countRecords(small)
            saxTimes.append(seconds(clock.now - started))
            started = clock.now
            let parser = XMLParser(contentsOf: smallWithoutDTD)!
            let counter = FoundationCounter()
            parser.delegate = counter
            guard parser.parse() else { throw BenchFailure("XMLParser failed: \(parser.parserError.map { "\($0)" } ?? "")") }
            foundationTimes.append(seconds(clock.now - started))
        }
        print("parsers on \(smallCount) records (\(ImportScenario.fileSize(small) >> 20) MiB), median of \(rounds):")
        print("  libxml2 SAX (XMLStreamParser), elements and attributes only: \(Int(Double(smallCount) / median(rawTimes))) records/s")
        print("  libxml2 SAX + mapping to objects (the importer's reader): \(Int(Double(smallCount) / median(saxTimes))) records/s")
        print("  Foundation XMLParser (crashes on the export's DTD; read without it), elements and attributes only: \(Int(Double(smallCount) / median(foundationTimes))) records/s")

        // The import through a server of its own, on a quarter of the file and the whole, for memory.
        let quarter = scratch.appending(path: "quarter.xml")
        try SyntheticExport(records: max(1, elements / 4)).write(to: quarter)
        for (name, url) in [("quarter", quarter), ("whole", big)] {
            let result = try await ImportScenario.importThroughServer(url, scratch: scratch.appending(path: name), binaries: binaries)
            print("import (\(name), \(result.elements) records, \(ImportScenario.fileSize(url) >> 20) MiB): \(Int(Double(result.elements) / result.seconds)) records/s,"
                + " importer peak RSS \(result.importerPeakKiB >> 10) MiB, server peak RSS \(result.serverPeakKiB >> 10) MiB"
                    + " (anonymous memory at most \(result.serverAnonymousPeakKiB >> 10) MiB; the rest is the ledger's mapped file)")
        }
        print("target: ≥ 200,000 records/s with memory flat")
    }
}

/// Counts elements and attributes, as ``FoundationCounter`` does.
private final class StreamCounter: XMLStreamHandler {
    var elements = 0
    var attributes = 0

    func startElement(_ name: String, attributes: [XMLAttribute], line: Int) {
        elements += 1
        self.attributes += attributes.count
    }

    func endElement(_ name: String) {}
}

/// Polls a field of a process's memory status until stopped, keeping the largest value.
private final class PeakWatcher: @unchecked Sendable {
    private let lock = NSLock()
    private var peak = 0
    private var running = true

    init(pid: Int32, field: String) {
        Thread.detachNewThread { [self] in
            while lock.withLock({ running }) {
                let value = ImportScenario.statusKiB(field, of: pid)
                lock.withLock { peak = max(peak, value) }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
    }

    func stop() -> Int {
        lock.withLock {
            running = false
            return peak
        }
    }
}

/// Counts what Foundation's XMLParser reports, keeping each element's attributes as it hands
/// them over (the least an importer would do).
private final class FoundationCounter: NSObject, XMLParserDelegate {
    var elements = 0
    var attributes = 0

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        elements += 1
        attributes += attributeDict.count
    }
}

/// The import's measurements, shared by `import` and the report: the import through a server
/// process of its own, and the parsing reference.
enum ImportScenario {
    struct ImportResult {
        var elements: Int
        var seconds: Double
        var importerPeakKiB: Int
        var serverPeakKiB: Int
        /// The largest `RssAnon` seen: the server's heap and stacks, without the pages of
        /// the memory-mapped ledger that `VmHWM` also counts.
        var serverAnonymousPeakKiB: Int
    }

    /// Starts `healthledgerd` on a fresh data directory, imports with the CLI (a process of its
    /// own, so its peak memory is its own), and stops the server.
    static func importThroughServer(_ url: URL, scratch: URL, binaries: String) async throws -> ImportResult {
        let store = try LedgerStore(directory: scratch)
        let ledger = try store.createLedger(id: "bench")
        let credential = try await ledger.issueCredential(for: .owner)
        let binaries = URL(filePath: binaries, directoryHint: .isDirectory)
        let port = 20_000 + Int.random(in: 0..<20_000)
        let server = Process()
        server.executableURL = binaries.appending(path: "healthledgerd")
        server.arguments = ["--data-dir", scratch.path, "--port", "\(port)", "--metrics-port", "0", "--grpc-port=-1", "--web-port=-1", "--log-level", "warning"]
        try server.run()
        defer { if server.isRunning { server.terminate() } }
        let probe = HealthStore(configuration: .init(port: port, credential: credential, connectAttempts: 40))
        _ = try await probe.ping()
        await probe.close()
        let started = ContinuousClock.now
        let importer = Process()
        importer.executableURL = binaries.appending(path: "healthledger")
        importer.arguments = ["import", "apple-health", url.path, "--port", "\(port)", "--credential", credential, "--json", "--quiet"]
        let output = Pipe()
        importer.standardOutput = output
        try importer.run()
        // The importer's peak, read from /proc while it runs (its high-water mark only grows).
        let importerPeak = PeakWatcher(pid: importer.processIdentifier, field: "VmHWM:")
        let serverAnonymousPeak = PeakWatcher(pid: server.processIdentifier, field: "RssAnon:")
        let data = output.fileHandleForReading.readDataToEndOfFile()
        importer.waitUntilExit()
        let elapsed = seconds(ContinuousClock.now - started)
        let serverPeak = Self.statusKiB("VmHWM:", of: server.processIdentifier)
        let serverAnonymous = serverAnonymousPeak.stop()
        server.terminate()
        server.waitUntilExit()
        guard importer.terminationStatus == 0, let summary = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw BenchFailure("the import failed: \(String(decoding: data, as: UTF8.self))")
        }
        return ImportResult(
            elements: summary["elements"] as? Int ?? 0, seconds: elapsed, importerPeakKiB: importerPeak.stop(), serverPeakKiB: serverPeak,
            serverAnonymousPeakKiB: serverAnonymous)
    }

    /// The records (every element the importer saves) in an export.
    static func countRecords(_ url: URL) throws -> Int {
        var count = 0
        let reader = AppleHealthReader { item in
            switch item {
            case .sample, .correlation, .workout, .visionPrescription, .characteristic, .activitySummary, .audiogram, .clinicalRecord, .heartbeatSeries, .stateOfMind, .medication, .medicationDose:
                count += 1
            case .skipped, .rejected, .sourcePriority: break
            }
        }
        let parser = XMLStreamParser(handler: reader)
        try ExportArchive(url: url).readXML { try parser.feed($0) }
        try parser.finish()
        return count
    }

    static func fileSize(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// A field of `/proc/PID/status` in KiB (`VmHWM:`, `RssAnon:`), 0 when unreadable.
    static func statusKiB(_ field: String, of pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }

    static func which(_ name: String) throws -> URL {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            let candidate = URL(filePath: String(directory)).appending(path: name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw BenchFailure("\(name) is not installed (Debian: apt-get install libxml2-utils)")
    }

    static func runChild(_ executable: URL, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Seconds `xmllint --stream --noout` takes to read `file`, each round.
    static func xmllint(_ file: URL, rounds: Int) throws -> Figure {
        let xmllint = try which("xmllint")
        var times: [Double] = []
        for _ in 0..<rounds {
            let started = ContinuousClock.now
            guard try runChild(xmllint, ["--stream", "--noout", file.path]) == 0 else { throw BenchFailure("xmllint --stream failed on \(file.path)") }
            times.append(seconds(ContinuousClock.now - started))
        }
        return Figure(times)
    }
}
