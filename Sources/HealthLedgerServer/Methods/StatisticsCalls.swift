import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// Statistics and statistics collections.
extension LedgerCall {
    func statistics() throws -> [UInt8] {
        let request = try decode(Healthledger_V1_StatisticsRequest.self)
        let query = StatisticsQuery(
            type: try QuantityType(request.type),
            interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
            options: StatisticsOptions(rawValue: Int(request.options)))
        var response = Healthledger_V1_StatisticsResponse()
        if let statistics = try ledger.statistics(query, as: principal) { response.statistics = .init(statistics) }
        return try response.serializedBytes()
    }

    /// StatisticsCollection: every populated interval, from one snapshot, in batches.
    func statisticsCollection(onScope: (ReadScope) -> Void, _ emit: (_ batch: [UInt8]) async throws -> Void) async throws {
        let request = try decode(Healthledger_V1_StatisticsCollectionRequest.self)
        let type = try QuantityType(request.type)
        guard request.startUs <= request.endUs else { throw HealthError.invalidArgument("the range ends before it starts", field: "end_us") }
        guard let unit = StatisticsIntervals.Unit(request.intervalUnit) else {
            throw HealthError.invalidArgument("interval_unit must be minute, hour, day, week, month or year", field: "interval_unit")
        }
        let zoneName = request.timeZone.isEmpty ? "UTC" : request.timeZone
        guard zoneName.utf8.count <= 64, let timeZone = TimeZone(identifier: zoneName) else {
            throw HealthError.invalidArgument("'\(zoneName.prefix(64))' is not an IANA time zone", field: "time_zone")
        }
        let intervals = try StatisticsIntervals(
            anchor: date(microseconds: request.anchorUs), every: Int(min(request.intervalCount, 1_000_000)), unit, timeZone: timeZone)
        let query = StatisticsCollectionQuery(
            type: type, range: DateInterval(start: date(microseconds: request.startUs), end: date(microseconds: request.endUs)), intervals: intervals,
            options: StatisticsOptions(rawValue: Int(request.options)))
        let results = try ledger.statisticsCollection(query, as: principal, onScope: onScope)
        let batchSize = request.batchSize == 0 ? 1_000 : Int(min(request.batchSize, 10_000))
        var start = 0
        repeat {
            try Task.checkCancellation()
            let slice = results[start..<min(start + batchSize, results.count)]
            try await emit(try Healthledger_V1_StatisticsBatch.with { $0.results = slice.map(Healthledger_V1_StatisticsResult.init) }.serializedBytes())
            start += batchSize
        } while start < results.count
    }
}
