import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf
import Testing

/// A statistics collection's batches, written and read without SwiftProtobuf's messages,
/// are the same bytes and the same statistics as through them.
@Suite("Statistics batch coding")
struct StatisticsCodingTests {
    static let sources = [Source.owner, Fixtures.appA, Fixtures.appB, Source(bundleIdentifier: "com.example.unnamed", name: "")]

    static func values(_ random: inout SystemRandomNumberGenerator, unit: HealthUnit) -> StatisticsValues {
        func maybe() -> Quantity? {
            guard Bool.random(using: &random) else { return nil }
            // Zero and negative zero too: a present optional is written whatever its value.
            return Quantity([0, -0.0, 1.5, -3.25e-7, Double.random(in: -1e9...1e9, using: &random)].randomElement(using: &random)!, unit)
        }
        let start = Date(timeIntervalSince1970: Double(Int.random(in: -1_000_000...2_000_000_000, using: &random)))
        return StatisticsValues(
            sum: maybe(), average: maybe(), minimum: maybe(), maximum: maybe(), mostRecent: maybe(),
            mostRecentInterval: Bool.random(using: &random) ? DateInterval(start: start, duration: Double(Int.random(in: 0...7200, using: &random))) : nil,
            duration: Bool.random(using: &random) ? [0, 42.5].randomElement(using: &random)! : nil)
    }

    @Test("the writer's bytes are SwiftProtobuf's, and the reader gives what the messages' model gives, for random statistics")
    func writerAndReaderAgreeWithMessages() throws {
        var random = SystemRandomNumberGenerator()
        for type in [Fixtures.steps, Fixtures.heartRate, Fixtures.bodyMass] {
            let unit = type.canonicalUnit
            let results = (0..<300).map { index in
                let start = Date(timeIntervalSince1970: Double(index * 3600 - 7200))
                let present = Array(Self.sources.shuffled(using: &random).prefix(Int.random(in: 0...4, using: &random)))
                var bySource: [Source: StatisticsValues] = [:]
                for source in present where Bool.random(using: &random) { bySource[source] = Self.values(&random, unit: unit) }
                return Statistics(
                    type: type, startDate: start, endDate: start.addingTimeInterval(3600), values: Self.values(&random, unit: unit), valuesBySource: bySource,
                    sources: present)
            }
            var writer = StatisticsBatchWriter()
            var reader = StatisticsBatchReader()
            for (slice, complete) in [(results[0..<0], false), (results[0..<100], false), (results[100...], true)] {
                let bytes = writer.batch(slice, complete: complete)
                let message = Healthledger_V1_StatisticsBatch.with {
                    $0.results = slice.map(Healthledger_V1_StatisticsResult.init)
                    $0.complete = complete
                }
                #expect(bytes == (try message.serializedBytes()))
                let read = try reader.read(bytes, type: type)
                #expect(read.complete == complete)
                #expect(read.results == (try message.results.map { try $0.model(type: type) }))
                #expect(read.results == Array(slice))
            }
        }
    }

    @Test("the reader takes what SwiftProtobuf takes: fields out of order, repeated and merged, unknown fields; and refuses malformed bytes and bad results")
    func readerFollowsTheWireRules() throws {
        let type = Fixtures.steps
        var result = Healthledger_V1_StatisticsResult()
        result.startUs = 3_600_000_000
        result.endUs = 7_200_000_000
        result.unit = "count"
        result.values.sum = 12
        result.sources = [.with { $0.source = .init(Fixtures.appA) }]
        var bytes: [UInt8] = try Healthledger_V1_StatisticsBatch.with { $0.results = [result]; $0.complete = true }.serializedBytes()
        // An unknown field, and a second values message that merges into the first.
        var extra = Healthledger_V1_StatisticsResult()
        extra.values.average = 3
        extra.unit = "count"
        var unknown = ProtoWriter(capacity: 16)
        unknown.string(field: 99, "ignored")
        var merged = try extra.serializedBytes() + unknown.buffer
        var wrapper = ProtoWriter(capacity: merged.count + 4)
        wrapper.message(field: 1, merged)
        // Appended to the batch: a second result with only the average (start and end 0).
        bytes += wrapper.buffer
        var reader = StatisticsBatchReader()
        let read = try reader.read(bytes, type: type)
        let expected = try Healthledger_V1_StatisticsBatch(serializedBytes: bytes)
        #expect(read.results == (try expected.results.map { try $0.model(type: type) }))
        #expect(read.complete)

        // One result whose values come in two messages: merged, as SwiftProtobuf merges them.
        merged = try result.serializedBytes() + (try extra.serializedBytes())
        wrapper = ProtoWriter(capacity: merged.count + 4)
        wrapper.message(field: 1, merged)
        let mergedRead = try reader.read(wrapper.buffer, type: type)
        let mergedExpected = try Healthledger_V1_StatisticsBatch(serializedBytes: wrapper.buffer)
        #expect(mergedRead.results == (try mergedExpected.results.map { try $0.model(type: type) }))
        #expect(mergedRead.results.first?.values.sum != nil && mergedRead.results.first?.values.average != nil)

        // Truncated bytes, a reversed result and a unit that does not parse are refused.
        #expect(throws: ProtoReader.Malformed.self) { _ = try reader.read(Array(bytes.dropLast(3)), type: type) }
        var reversed = result
        reversed.endUs = 0
        #expect(throws: HealthError.self) {
            _ = try reader.read(try Healthledger_V1_StatisticsBatch.with { $0.results = [reversed] }.serializedBytes(), type: type)
        }
        var badUnit = result
        badUnit.unit = "furlongs per fortnight"
        #expect(throws: HealthError.self) {
            _ = try reader.read(try Healthledger_V1_StatisticsBatch.with { $0.results = [badUnit] }.serializedBytes(), type: type)
        }
    }
}
