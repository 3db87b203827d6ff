import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Quantity series samples over RPC", .timeLimit(.minutes(3)))
struct QuantitySeriesRPCTests {
    static let steps = try! QuantityType("HKQuantityTypeIdentifierStepCount")
    static let perMinute = try! HealthUnit("count/min")

    /// `values` each over `seconds` from `offset` seconds after the base, one after another.
    static func entries(_ values: [Double], from offset: TimeInterval = 0, seconds: TimeInterval = 5) -> [QuantitySeriesEntry] {
        values.enumerated().map { index, value in
            let start = Samples.base.addingTimeInterval(offset + Double(index) * seconds)
            return QuantitySeriesEntry(value: value, start: start, end: start.addingTimeInterval(seconds))
        }
    }

    @Test("an app saves series samples (their quantity the values' mean or sum) and reads each value with its interval; apps read only what they may; one that breaks the rules is refused naming its field")
    func seriesSamples() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let (source, credential) = try await server.addApp("com.example.watch", name: "Watch", share: [Samples.heartRate.objectType, Self.steps.objectType])
            let app = server.client(credential)
            let heartRates = QuantitySample(type: Samples.heartRate, unit: Self.perMinute, series: Self.entries([96, 101, 110, 118, 124, 121]))
            #expect(heartRates.quantity.value == 111.66666666666667 && heartRates.count == 6 && heartRates.endDate.timeIntervalSince(heartRates.startDate) == 30)
            let steps = QuantitySample(type: Self.steps, unit: .count, series: Self.entries([40, 52, 0, 61], seconds: 60))
            #expect(steps.quantity.value == 153, "a cumulative type's series holds the sum")
            try await app.save([.quantitySample(heartRates), .quantitySample(steps)])
            let single = Samples.heartRate(70, at: 3_600)
            try await owner.save(single)

            let stored = try #require(try await owner.object(with: heartRates.uuid)?.quantitySample)
            #expect(stored.series == heartRates.series && stored.quantity == heartRates.quantity && stored.sourceRevision.source == source)
            let values = try await QuantitySeriesSampleQueryDescriptor(type: Samples.heartRate).result(for: owner)
            #expect(values.map { $0.quantity.value } == [96, 101, 110, 118, 124, 121, 70], "each value of the series, then the sample of one value")
            #expect(values[2].dateInterval == DateInterval(start: Samples.base.addingTimeInterval(10), duration: 5) && values[2].sample.uuid == heartRates.uuid)
            #expect(values[6].sample.uuid == single.uuid && values[6].dateInterval.duration == 0)
            let inWindow = try await QuantitySeriesSampleQueryDescriptor(type: Samples.heartRate, interval: DateInterval(start: Samples.base, duration: 60)).result(for: owner)
            #expect(inWindow.count == 6)
            // Sound levels: the mean of their energies, back in decibels.
            let noise = QuantitySample(type: try QuantityType("HKQuantityTypeIdentifierEnvironmentalAudioExposure"), unit: try HealthUnit("dBASPL"), series: Self.entries([60, 90]))
            #expect(abs(noise.quantity.value - 10 * log10((1e6 + 1e9) / 2)) < 1e-9)
            try await owner.save(.quantitySample(noise))
            let total = try await owner.statistics(for: StatisticsQueryDescriptor(type: Self.steps, options: .cumulativeSum))
            #expect(total?.sumQuantity()?.value == 153)
            // Statistics count each value over its own interval, as HealthKit's do: the extremes
            // are the values' (not the sample's mean), and each minute sums its own steps.
            let extremes = try #require(try await owner.statistics(for: StatisticsQueryDescriptor(
                type: Samples.heartRate, interval: DateInterval(start: Samples.base, duration: 60), options: [.discreteMin, .discreteMax])))
            #expect(try extremes.minimumQuantity()?.doubleValue(for: Self.perMinute).rounded() == 96)
            #expect(try extremes.maximumQuantity()?.doubleValue(for: Self.perMinute).rounded() == 124)
            let minutes = try await owner.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: Self.steps, range: DateInterval(start: Samples.base, duration: 240),
                intervals: try StatisticsIntervals(anchor: Samples.base, every: 1, .minute, timeZone: .gmt), options: .cumulativeSum))
            #expect(minutes.statistics.map { $0.sumQuantity()?.value } == [40, 52, 0, 61])
            // Without a read grant the app reads its own only.
            #expect(try await QuantitySeriesSampleQueryDescriptor(type: Samples.heartRate).result(for: app).map(\.sample.uuid) == Array(repeating: heartRates.uuid, count: 6))

            // The command line shows each value with its interval.
            let cli = AuthCLITests.Session(server: server)
            let rows = try #require(try await cli.json(server.ownerCredential, ["query", "--type", "StepCount"]) as? [[String: Any]])
            let series = try #require(rows.first?["series"] as? [[String: Any]])
            #expect(rows.first?["count"] as? Int == 4 && series.map { $0["value"] as? Double } == [40, 52, 0, 61] && series[1]["start"] as? String == "2023-11-14T22:14:20Z")
            let perMinute = try #require(try await cli.json(server.ownerCredential, [
                "stats", "--type", "StepCount", "--from", "2023-11-14T22:13:20Z", "--to", "2023-11-14T22:17:20Z", "--every", "1minute",
                "--anchor", "2023-11-14T22:13:20Z",
            ]) as? [[String: Any]])
            #expect(perMinute.map { ($0["values"] as? [String: Any])?["sum"] as? Double } == [40, 52, 0, 61])

            func broken(_ change: (inout QuantitySample) -> Void) -> QuantitySample {
                var copy = QuantitySample(type: Samples.heartRate, unit: Self.perMinute, series: Self.entries([96, 101, 110]))
                change(&copy)
                return copy
            }
            let cases: [(QuantitySample, String)] = [
                (broken { $0.series[1].value = .nan }, "series[1]"),
                (broken { $0.series[2].endDate = $0.endDate.addingTimeInterval(1) }, "series[2]"),
                (broken { $0.series[0].startDate = $0.startDate.addingTimeInterval(-1) }, "series[0]"),
                (broken { $0.series.swapAt(0, 1) }, "series[1]"),
                (broken { $0.series[1].endDate = $0.series[1].startDate.addingTimeInterval(-1) }, "series[1]"),
                (broken { $0.quantity = Quantity(100, Self.perMinute) }, "quantity"),
                (QuantitySample(type: Self.steps, unit: .count, series: Self.entries([5, -1])), "series[1]"),
                // Values whose sum is no finite number, whatever quantity is given.
                (QuantitySample(
                    type: Self.steps, quantity: Quantity(1, .count), start: Samples.base, end: Samples.base.addingTimeInterval(10),
                    series: Self.entries([1e308, 1e308])), "series"),
            ]
            for (sample, field) in cases {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await app.save(.quantitySample(sample)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: owner).count == 2, "nothing refused was kept")
            #expect(try server.ledger.verify().isValid)
            await app.close()
            await owner.close()
        }
    }
}
