import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger

/// The series kinds against a `healthledgerd` of its own: a 30 s electrocardiogram at 512 Hz
/// and a day of heartbeats in one series, each saved durably one at a time and read back whole,
/// beside a heart-rate sample of one value saved and read the same way in the same run (the
/// reference: what any save and read costs). Rounds alternate the kinds, so a slower minute
/// of this host weighs on each alike. Then hourly statistics over a day of heart rate held as
/// 24 series samples, beside the same values as single samples.
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
        // A day of heart rate every 5 s, held as 24 hourly series samples and, on another day,
        // as 17,280 samples of one value; hourly statistics over each day, alternated. Statistics
        // count a series' values one by one, read from its save event: for intervals on clock
        // hours the rollups answer, for intervals half an hour off (as in India's time zone) the
        // values are read.
        let perHour = 720
        let seriesDay = (base / day).rounded(.down) * day + Double(rounds + 1) * day
        let samplesDay = seriesDay + day
        func rate(_ index: Int) -> Double { 60 + Double(index % 97) * 0.75 }
        let hours = (0..<24).map { hour in
            QuantitySample(type: heartRate, unit: try! HealthUnit("count/min"), series: (0..<perHour).map { index in
                let at = Date(timeIntervalSince1970: seriesDay + Double(hour * 3600 + index * 5))
                return QuantitySeriesEntry(value: rate(hour * perHour + index), start: at, end: at)
            })
        }
        try await store.save(hours.map { .quantitySample($0) })
        let singles = try (0..<(24 * perHour)).map { index in
            let at = Date(timeIntervalSince1970: samplesDay + Double(index * 5))
            return HealthObject.quantitySample(QuantitySample(type: heartRate, quantity: try Quantity(rate(index), "count/min"), start: at, end: at))
        }
        for batch in stride(from: 0, to: singles.count, by: 1_000) { try await store.save(Array(singles[batch..<min(batch + 1_000, singles.count)])) }
        // Close the last hour of each day, so that both are read as a day long past would be.
        try await store.save([
            .quantitySample(QuantitySample(type: heartRate, quantity: try Quantity(70, "count/min"), start: Date(timeIntervalSince1970: samplesDay + 2 * day), end: Date(timeIntervalSince1970: samplesDay + 2 * day))),
        ])
        func hourly(_ dayStart: Double, offset: Double) async throws {
            let start = Date(timeIntervalSince1970: dayStart + offset)
            let result = try await store.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: heartRate, range: DateInterval(start: start, duration: day),
                intervals: try StatisticsIntervals(anchor: start, every: 1, .hour, timeZone: .gmt), options: [.discreteMin, .discreteMax, .discreteAverage]))
            guard result.statistics.count == 24 else { throw BenchFailure("\(result.statistics.count) hours of statistics, not 24") }
        }
        for round in 0..<rounds {
            for offset in [0.0, 1800] {
                for (name, dayStart) in round % 2 == 0 ? [("series", seriesDay), ("samples", samplesDay)] : [("samples", samplesDay), ("series", seriesDay)] {
                    try await timed("hourly \(name) \(offset)") { try await hourly(dayStart, offset: offset) }
                }
            }
        }
        for (offset, how) in [(0.0, "on clock hours (from rollups)"), (1800, "half an hour off (from the values)")] {
            let singleHours = times["hourly samples \(offset)"]!
            let seriesHours = times["hourly series \(offset)"]!
            print(String(format: "RESULT hourly statistics %@ over a day of heart rate as %d samples of one value: median %.2f ms, p90 %.2f ms", how, 24 * perHour, median(singleHours), percentile(singleHours.sorted(), 0.9)))
            print(String(format: "RESULT the same as 24 series samples of %d values: median %.2f ms, p90 %.2f ms (×%.2f the samples')", perHour, median(seriesHours), percentile(seriesHours.sorted(), 0.9), median(seriesHours) / median(singleHours)))
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
