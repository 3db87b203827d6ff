import Foundation
import HealthModel
import Ledger

/// The `predicates` scenario of `healthledger-bench ledger`: predicate queries next to a million
/// samples, each against the same query without a predicate (the owner's reads), and a
/// read-denied app's predicate queries alone and among other sources' samples.
struct PredicateBench {
    let store: LedgerStore
    let rounds: Int
    /// Samples in the ledger, one a minute, from four sources.
    let samples: Int

    static let sources = (0..<4).map { Source(bundleIdentifier: "com.example.source\($0)", name: "Source \($0)") }

    func run() async throws {
        let type = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let unit = try HealthUnit("count/min")
        let base = Date(timeIntervalSince1970: 1_600_000_000)
        print("== predicates: queries over one day among \(samples) heart-rate samples from 4 sources, with and without a predicate")
        let ledger = try store.createLedger(id: "predicates")
        var uuids: [UUID] = []
        let day = DateInterval(start: base.addingTimeInterval(Double(samples / 2) * 60), duration: 86_400)
        for start in stride(from: 0, to: samples, by: 10_000) {
            let batch = (start..<min(start + 10_000, samples)).map { index -> HealthObject in
                let date = base.addingTimeInterval(Double(index) * 60)
                var metadata: Metadata = [:]
                if index % 10 == 0 { metadata[MetadataKey.heartRateMotionContext] = .number(Double(1 + index / 10 % 2)) }
                let sample = QuantitySample(
                    type: type, quantity: Quantity(Double(50 + index % 120), unit), start: date, end: date, metadata: metadata,
                    sourceRevision: SourceRevision(source: Self.sources[index % 4]))
                if day.contains(date), uuids.count < 100, index % 7 == 0 { uuids.append(sample.uuid) }
                return .quantitySample(sample)
            }
            _ = try await ledger.save(batch, by: .owner)
        }
        let query = SampleQuery(type: type.objectType, interval: day)
        let reads: [(String, ObjectPredicate)] = [
            ("source predicate (one of four sources, per-source index)", .sources([Self.sources[1].bundleIdentifier])),
            ("UUID predicate (100 UUIDs, looked up)", .uuids(Set(uuids))),
            ("metadata predicate (motion context = active)", .metadata(MetadataKey.heartRateMotionContext, .comparison(.equal, .number(2)))),
            ("quantity predicate (> 120 count/min, from the index)", .quantity(.greater, Quantity(120, unit))),
        ]
        let plain = try timed { try ledger.samples(query, as: .owner).count }
        print(String(format: "RESULT predicates, no predicate (one day): median %.1f µs, %d samples", plain.microseconds, plain.answer))
        for (name, predicate) in reads {
            var filtered = query
            filtered.predicate = predicate
            let result = try timed { try ledger.samples(filtered, as: .owner).count }
            print(String(
                format: "RESULT predicates, %@: median %.1f µs, %d samples | no predicate %.1f µs | ratio %.2f",
                name, result.microseconds, result.answer, plain.microseconds, result.microseconds / plain.microseconds))
        }
    }

    private func timed(_ read: () throws -> Int) throws -> (microseconds: Double, answer: Int) {
        let clock = ContinuousClock()
        var durations: [Double] = []
        var answer = 0
        for _ in 0..<max(rounds * 20, 20) {
            let started = clock.now
            answer = try read()
            durations.append(seconds(clock.now - started) * 1e6)
        }
        return (median(durations), answer)
    }
}
