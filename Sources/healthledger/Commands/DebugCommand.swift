import ArgumentParser
import Foundation
import HealthExport
import HealthModel
import Ledger

struct DebugCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug", abstract: "Tools for testing the ledger itself.", shouldDisplay: false,
        subcommands: [Ingest.self, GenerateExport.self])

    /// Writes the benchmark's generated Apple Health export, to import by hand.
    struct GenerateExport: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate-export",
            abstract: "Write a realistic generated export.xml (about 375 bytes a record), zipped as the Health app does when the name ends in .zip.")

        @Option var records = 100_000
        @Option(name: .shortAndLong) var output: String

        func run() async throws {
            do {
                let count = try SyntheticExport(records: records).write(to: URL(filePath: output))
                print("\(count) records in \(output)")
            } catch { throw fail(error) }
        }
    }

    /// Saves numbered batches and reports each one on stdout once it is durable; the crash
    /// test kills this process at random moments and checks every acknowledged batch.
    struct Ingest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Save batches of heart-rate samples, printing `ack N` after batch N is durable.")

        @OptionGroup var store: StoreOptions
        @Argument var ledger: String
        @Option var batches = 1000
        @Option(name: .customLong("batch-size")) var batchSize = 100
        @Option var concurrency = 8
        @Option(help: "Added to batch numbers, so several runs can share a ledger.") var offset = 0
        @Option(name: .customLong("checkpoint-interval-ms"), help: "How often the ledger's commit journal takes a checkpoint (milliseconds).")
        var checkpointInterval = 1000

        func run() async throws {
            guard checkpointInterval > 0 else { throw ValidationErrorExit("--checkpoint-interval-ms must be at least 1") }
            let ledger = try store.openStore { $0.checkpointInterval = .milliseconds(checkpointInterval) }.ledger(ledger)
            let type = try QuantityType("HKQuantityTypeIdentifierHeartRate")
            let unit = try HealthUnit("count/min")
            let next = Counter()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<concurrency {
                    group.addTask {
                        while let index = next.take(below: batches) {
                            let batch = offset + index
                            let samples = (0..<batchSize).map { item in
                                let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(batch * batchSize + item))
                                return HealthObject.quantitySample(QuantitySample(
                                    type: type, quantity: Quantity(Double(60 + item % 100), unit), start: date, end: date,
                                    uuid: Self.uuid(batch: batch, item: item)))
                            }
                            _ = try await ledger.save(samples, by: .owner)
                            FileHandle.standardOutput.write(Data("ack \(batch)\n".utf8))
                        }
                    }
                }
                try await group.waitForAll()
            }
        }

        /// The UUID of item `item` of batch `batch`: 00000000-BBBB-4BBB-8III-IIIIIIIIIIII style.
        static func uuid(batch: Int, item: Int) -> UUID {
            UUID(uuidString: String(format: "%08x-0000-4000-8000-%012x", batch, item))!
        }
    }
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

import Synchronization
