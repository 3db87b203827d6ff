import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger

/// The series kinds against a `healthledgerd` of its own: a 30 s electrocardiogram at 512 Hz
/// and a day of heartbeats in one series, each saved durably one at a time and read back whole,
/// beside a heart-rate sample of one value saved and read the same way in the same run (the
/// reference: what any save and read costs). Rounds alternate the kinds, so a slower minute
/// of this host weighs on each alike.
struct SeriesBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "series", abstract: "Electrocardiograms and heartbeat series: save and read times beside a sample of one value.")

    @Option(help: "Rounds; medians and 90th percentiles are reported.") var rounds = 30
    @Option(help: "Beats per minute of the day's heartbeat series.") var beatsPerMinute = 70
    @Option(help: "The folder holding a release build of healthledgerd.") var binaries = ".build/release"

    func run() async throws {
        let scratch = FileManager.default.temporaryDirectory.appending(path: "healthledger-series-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let data = scratch.appending(path: "server")
        let (server, credential) = try await ServerProcess.withLedger("series", dataDirectory: data, binaries: binaries)
        defer { server.stop() }
        let store = HealthStore(configuration: HealthStoreConfiguration(port: server.port, credential: credential))

        let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let day = 86_400.0
        // A day of beats, their intervals varying around the rate as a heart's do.
        let meanInterval = 60 / Double(beatsPerMinute)
        var beats: [HeartbeatSeriesBeat] = []
        var time = 0.0
        while time < day {
            beats.append(HeartbeatSeriesBeat(timeSinceSeriesStart: time, precededByGap: beats.count % 5_000 == 4_999))
            time += meanInterval * (0.9 + 0.2 * Double(beats.count % 17) / 16)
        }
        // A 1.2 Hz wave of 800 µV with a little noise.
        let voltages = (0..<(30 * 512)).map { (index: Int) -> Float in
            let phase = Double(index) / 512 * 2 * Double.pi * 1.2
            return Float(sin(phase) * 800 + Double(index % 7))
        }
        print("== one heart-rate sample, a 30 s ECG at 512 Hz (\(voltages.count) voltages), a day's heartbeat series (\(beats.count) beats); \(rounds) rounds, each kind saved durably one at a time, then read whole")

        var times: [String: [Double]] = [:]
        let clock = ContinuousClock()
        func timed(_ name: String, _ body: () async throws -> Void) async throws {
            let started = clock.now
            try await body()
            times[name, default: []].append(seconds(clock.now - started) * 1000)
        }
        let base = Date().addingTimeInterval(-400 * day).timeIntervalSince1970.rounded(.down)
        for round in 0..<rounds {
            let start = Date(timeIntervalSince1970: base + Double(round) * day)
            let sample = QuantitySample(type: heartRate, quantity: try Quantity(72, "count/min"), start: start, end: start)
            let recording = Electrocardiogram(
                classification: .sinusRhythm, averageHeartRate: try Quantity(72, "count/min"), samplingFrequency: try Quantity(512, "Hz"),
                voltages: voltages, start: start, end: start.addingTimeInterval(30))
            let series = HeartbeatSeriesSample(beats: beats, start: start, end: start.addingTimeInterval(day))
            try await timed("sample save") { try await store.save(.quantitySample(sample)) }
            try await timed("ECG save") { try await store.save(.electrocardiogram(recording)) }
            try await timed("heartbeat series save") { try await store.save(.heartbeatSeries(series)) }
            try await timed("sample read") {
                guard try await store.object(with: sample.uuid) != nil else { throw BenchFailure("the sample was not read back") }
            }
            try await timed("ECG read") {
                let read = try await ElectrocardiogramQueryDescriptor(recording.uuid).result(for: store)
                guard read.count == voltages.count else { throw BenchFailure("read \(read.count) voltages of \(voltages.count)") }
            }
            try await timed("heartbeat series read") {
                let read = try await HeartbeatSeriesQueryDescriptor(series.uuid).result(for: store)
                guard read.count == beats.count else { throw BenchFailure("read \(read.count) beats of \(beats.count)") }
            }
        }
        for operation in ["save", "read"] {
            let reference = median(times["sample \(operation)"]!)
            print(String(format: "RESULT sample of one value, %@: median %.2f ms, p90 %.2f ms", operation, reference, percentile(times["sample \(operation)"]!.sorted(), 0.9)))
            for kind in ["ECG", "heartbeat series"] {
                let values = times["\(kind) \(operation)"]!
                print(String(format: "RESULT %@, %@: median %.2f ms, p90 %.2f ms (×%.1f the sample's)", kind, operation, median(values), percentile(values.sorted(), 0.9), median(values) / reference))
            }
        }
        await store.close()
    }
}
