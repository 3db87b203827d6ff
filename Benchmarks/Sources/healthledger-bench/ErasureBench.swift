import Foundation
import HealthModel
import Ledger
import Synchronization

/// `healthledger-bench ledger --only ingest,erasure`: erasing `count` samples of the ingest
/// ledger (a run of consecutive minutes of heart rate, by type and interval), online: how long
/// the erasure takes (its commit, the projections' rebuild and the data file's scrub), and the
/// latency of single durable saves into the same ledger and of small queries while it runs,
/// against the same calls just before it.
struct ErasureBench {
    let ledger: Ledger
    let count: Int
    let sample: @Sendable (Int) -> HealthObject

    func run() async throws {
        let clock = ContinuousClock()
        let events = try ledger.head().sequence
        let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate").objectType
        // The ingest's samples are a minute apart from 1,600,000,000 s: erase a run from the middle.
        let firstMinute = max(0, Int(events) / 2 - count / 2)
        let interval = DateInterval(
            start: Date(timeIntervalSince1970: 1_600_000_000 + Double(firstMinute) * 60), duration: Double(count) * 60)
        let query = SampleQuery(type: heartRate, interval: DateInterval(start: Date(timeIntervalSince1970: 1_600_000_000), duration: 3600))

        /// Single durable saves one after another until `stop`, each one's latency in ms.
        @Sendable func saves(until stop: StopSignal, from base: Int) async throws -> [Double] {
            var latencies: [Double] = []
            var index = base
            while !stop.isSet {
                let started = clock.now
                _ = try await ledger.save([sample(index)], by: .owner)
                latencies.append(seconds(clock.now - started) * 1e3)
                index += 1
            }
            return latencies
        }
        /// One-hour sample queries one after another until `stop`, beside the saves.
        @Sendable func reads(until stop: StopSignal) async throws -> [Double] {
            var latencies: [Double] = []
            while !stop.isSet {
                let started = clock.now
                _ = try ledger.samples(query, as: .owner)
                latencies.append(seconds(clock.now - started) * 1e3)
                await Task.yield()
            }
            return latencies
        }
        func summary(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return String(format: "p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d calls)", percentile(sorted, 0.5), percentile(sorted, 0.99), sorted.last ?? 0, sorted.count)
        }

        // The same calls for two seconds first, as the reference.
        let quiet = StopSignal()
        async let baselineSaves = saves(until: quiet, from: 50_000_000)
        async let baselineReads = reads(until: quiet)
        try await Task.sleep(for: .seconds(2))
        quiet.set()
        let before = (saves: try await baselineSaves, reads: try await baselineReads)

        let busy = StopSignal()
        async let duringSaves = saves(until: busy, from: 60_000_000)
        async let duringReads = reads(until: busy)
        let started = clock.now
        let report = try await ledger.erase(.matching(type: heartRate, interval: interval, predicate: nil), reason: "benchmark", by: .owner)
        let took = seconds(clock.now - started)
        busy.set()
        let load = (saves: try await duringSaves, reads: try await duringReads)
        guard report.objects == count else { throw BenchFailure("erased \(report.objects) samples, not \(count)") }
        guard try ledger.verify().isValid else { throw BenchFailure("the ledger does not verify after the erasure") }
        print(String(format: "RESULT erasure of %d samples in a ledger of %d events, online: %.2f s (%d events emptied; %d free pages and %d page gaps zeroed, %d held)",
            report.objects, events, took, report.events, report.scrubbedPages, report.zeroedGaps, report.heldPages))
        print("RESULT single durable saves before it: \(summary(before.saves)); during it: \(summary(load.saves))")
        print("RESULT one-hour sample queries before it: \(summary(before.reads)); during it: \(summary(load.reads))")
    }
}

/// A flag one task sets and another polls.
final class StopSignal: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}
