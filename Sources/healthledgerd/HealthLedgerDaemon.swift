import ArgumentParser
import Foundation
import HealthModel
import Ledger
import Logging

/// The HealthLedger server. Until the RPC layer lands, it opens the data directory,
/// creates a demo ledger with a day of samples when there is none, verifies every
/// ledger and prints the state of each.
@main
struct HealthLedgerDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthledgerd", abstract: "The HealthLedger server (ledger core preview: prints the state of the store).")

    @Option(name: .customLong("data-dir"), help: "The data directory (default: $HEALTHLEDGER_DATA_DIR or ./data).")
    var dataDirectory: String?

    func run() async throws {
        LoggingSystem.bootstrap(StreamLogHandler.standardError)
        let logger = Logger(label: "healthledgerd")
        let path = dataDirectory ?? ProcessInfo.processInfo.environment["HEALTHLEDGER_DATA_DIR"] ?? "data"
        let store = try LedgerStore(directory: URL(filePath: path, directoryHint: .isDirectory), logger: logger)
        if try store.ledgerIDs().isEmpty {
            let ledger = try store.createLedger(id: "demo", displayName: "Demo")
            try await Self.seed(ledger)
            logger.info("created the demo ledger", metadata: ["ledger.id": "demo"])
        }
        print("HealthLedger store at \(store.directory.path)")
        for id in try store.ledgerIDs() {
            let ledger = try store.ledger(id)
            let verify = try ledger.verify()
            let head = try ledger.head()
            print("ledger \(id): \(head.sequence) events, head \(head.hash.prefix(8).map { String(format: "%02x", $0) }.joined())…, "
                + (verify.isValid ? "chain verified" : "VERIFY FAILED: \(verify.problem!)"))
            for identifier in ["HKQuantityTypeIdentifierHeartRate", "HKQuantityTypeIdentifierStepCount", "HKCategoryTypeIdentifierSleepAnalysis"] {
                let type = try ObjectType(identifier)
                let count = try ledger.count(of: type)
                if count > 0 { print("  \(identifier): \(count) objects") }
            }
        }
        print("(the RPC server arrives with the next issue; use `healthledger` to manage ledgers)")
    }

    /// One day of heart rate, steps and a night's sleep.
    static func seed(_ ledger: Ledger) async throws {
        let day = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 / 86_400).rounded(.down) * 86_400 - 86_400)
        let watch = SourceRevision(source: Source(bundleIdentifier: "com.example.watch", name: "Example Watch"), productType: "Watch6,1")
        let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
        let sleep = try CategoryType("HKCategoryTypeIdentifierSleepAnalysis")
        var objects: [HealthObject] = []
        for minute in stride(from: 0, to: 1440, by: 5) {
            let date = day.addingTimeInterval(Double(minute) * 60)
            objects.append(.quantitySample(QuantitySample(
                type: heartRate, quantity: try Quantity(Double(55 + (minute / 5) % 40), "count/min"), start: date, end: date,
                sourceRevision: watch)))
        }
        for hour in 8..<20 {
            let start = day.addingTimeInterval(Double(hour) * 3600)
            objects.append(.quantitySample(QuantitySample(
                type: steps, quantity: try Quantity(Double(300 + hour * 17), "count"), start: start, end: start.addingTimeInterval(3600),
                sourceRevision: watch)))
        }
        for (offset, stage) in [(0, 3), (90, 4), (150, 5), (210, 3), (300, 2)] {
            let start = day.addingTimeInterval(Double(offset) * 60)
            objects.append(.categorySample(CategorySample(
                type: sleep, value: stage, start: start, end: start.addingTimeInterval(60 * 60), sourceRevision: watch)))
        }
        _ = try await ledger.save(objects, by: .owner)
    }
}
