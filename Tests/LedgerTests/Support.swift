import Foundation
import HealthModel
import Ledger

/// A store in a fresh temporary directory, removed when the value is released.
final class TemporaryStore: @unchecked Sendable {
    let directory: URL
    private(set) var store: LedgerStore?

    init(configuration: LedgerConfiguration = .init()) throws {
        directory = URL(filePath: NSTemporaryDirectory(), directoryHint: .isDirectory)
            .appending(path: "healthledger-test-\(UUID().uuidString)", directoryHint: .isDirectory)
        store = try LedgerStore(directory: directory, configuration: configuration)
    }

    var ledgerStore: LedgerStore { store! }

    /// Drops the store (closing its ledgers) so files can be edited or reopened.
    func close() { store = nil }

    func reopen(configuration: LedgerConfiguration = .init()) throws -> LedgerStore {
        store = try LedgerStore(directory: directory, configuration: configuration)
        return store!
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

enum Fixtures {
    static let heartRate = try! QuantityType("HKQuantityTypeIdentifierHeartRate")
    static let steps = try! QuantityType("HKQuantityTypeIdentifierStepCount")
    static let bodyMass = try! QuantityType("HKQuantityTypeIdentifierBodyMass")
    static let sleep = try! CategoryType("HKCategoryTypeIdentifierSleepAnalysis")
    static let bpm = try! HealthUnit("count/min")
    static let base = Date(timeIntervalSince1970: 1_700_000_000)
    static let appA = Source(bundleIdentifier: "com.example.a", name: "App A")
    static let appB = Source(bundleIdentifier: "com.example.b", name: "App B")

    static func heartRate(_ value: Double, at offset: TimeInterval, uuid: UUID = UUID(), metadata: Metadata = [:]) -> HealthObject {
        let date = base.addingTimeInterval(offset)
        return .quantitySample(QuantitySample(type: heartRate, quantity: Quantity(value, bpm), start: date, end: date, metadata: metadata, uuid: uuid))
    }

    static func steps(_ count: Double, from start: TimeInterval, to end: TimeInterval) -> HealthObject {
        .quantitySample(QuantitySample(
            type: steps, quantity: Quantity(count, .count), start: base.addingTimeInterval(start), end: base.addingTimeInterval(end)))
    }

    static func weight(_ kilograms: Double, syncIdentifier: String, version: Double, at offset: TimeInterval = 0) -> HealthObject {
        let date = base.addingTimeInterval(offset)
        return .quantitySample(QuantitySample(
            type: bodyMass, quantity: try! Quantity(kilograms, "kg"), start: date, end: date,
            metadata: [MetadataKey.syncIdentifier: .string(syncIdentifier), MetadataKey.syncVersion: .number(version)]))
    }
}

extension Ledger {
    /// Has each app ask for `share` and `read`, and the owner grant all of it.
    func authorize(_ apps: [Source], share: [ObjectType], read: [ObjectType] = []) async throws {
        for app in apps {
            try await requestAuthorization(toShare: Set(share), read: Set(read), by: .app(app))
            for type in share { try await decideAuthorization(app: app.bundleIdentifier, type: type, direction: .share, decision: .granted, by: .owner) }
            for type in read { try await decideAuthorization(app: app.bundleIdentifier, type: type, direction: .read, decision: .granted, by: .owner) }
        }
    }
}

/// A small generator with a seed, so that a randomized test repeats the same cases for the
/// same argument (a linear congruential step, its state's high bits folded in).
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state ^ (state >> 29)
    }
}
