import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// Statistics and statistics collections.
extension LedgerCall {
    func statistics(_ request: Healthledger_V1_StatisticsRequest) throws -> [UInt8] {
        let query = StatisticsQuery(
            type: try QuantityType(request.type),
            interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
            options: StatisticsOptions(rawValue: Int(request.options)), predicate: request.hasPredicate ? try request.predicate.model() : nil)
        var response = Healthledger_V1_StatisticsResponse()
        if let statistics = try ledger.statistics(query, as: principal) { response.statistics = .init(statistics) }
        reads.add(query.type.identifier, objects: response.hasStatistics ? 1 : 0)
        return try response.serializedBytes()
    }

    /// StatisticsCollection: every populated interval, from one snapshot, in batches.
    func statisticsCollection(
        _ request: Healthledger_V1_StatisticsCollectionRequest, onScope: (ReadScope) -> Void, _ emit: (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        let (query, batchSize) = try collectionQuery(request)
        let results = try ledger.statisticsCollection(query, as: principal, onScope: onScope)
        reads.add(objects: results.count)
        try await Self.emit(results, batchSize: batchSize, emit)
    }

    /// WatchStatisticsCollection: the collection, then after each commit of the type the
    /// intervals whose statistics changed (emptied ones as results without values).
    func watchStatisticsCollection(
        _ request: Healthledger_V1_StatisticsCollectionRequest, onScope: @escaping (ReadScope) -> Void,
        _ emit: @escaping (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        let (query, batchSize) = try collectionQuery(request)
        var current: [Date: Statistics] = [:]
        try await following([query.type.objectType]) { first in
            let results = try ledger.statisticsCollection(query, as: principal, onScope: onScope)
            var latest: [Date: Statistics] = [:]
            for result in results { latest[result.startDate] = result }
            var changed = results.filter { current[$0.startDate] != $0 }
            for (start, gone) in current where latest[start] == nil {
                changed.append(Statistics(type: query.type, startDate: start, endDate: gone.endDate, values: StatisticsValues()))
            }
            current = latest
            if first || !changed.isEmpty {
                reads.add(objects: changed.count)
                try await Self.emit(changed.sorted { $0.startDate < $1.startDate }, batchSize: batchSize, emit)
            }
            // Each recomputation reads the whole range: under a stream of commits, let them
            // fold into the next one instead of recomputing after every commit.
            if !first { try await Task.sleep(for: Self.statisticsRecomputeInterval) }
        }
    }

    /// The shortest time between two recomputations of a watched collection.
    static let statisticsRecomputeInterval = Duration.milliseconds(100)

    /// Sends `results` in batches written straight from the model, the last one marked
    /// complete (one empty batch if none).
    private static func emit(_ results: [Statistics], batchSize: Int, _ emit: (_ batch: [UInt8]) async throws -> Void) async throws {
        var writer = StatisticsBatchWriter()
        var start = 0
        repeat {
            try Task.checkCancellation()
            let end = min(start + batchSize, results.count)
            try await emit(writer.batch(results[start..<end], complete: end == results.count))
            start = end
        } while start < results.count
    }

    private func collectionQuery(_ request: Healthledger_V1_StatisticsCollectionRequest) throws -> (StatisticsCollectionQuery, batchSize: Int) {
        let type = try QuantityType(request.type)
        guard request.startUs <= request.endUs else { throw HealthError.invalidArgument("the range ends before it starts", field: "end_us") }
        guard let unit = StatisticsIntervals.Unit(request.intervalUnit) else {
            throw HealthError.invalidArgument("interval_unit must be minute, hour, day, week, month or year", field: "interval_unit")
        }
        let zoneName = request.timeZone.isEmpty ? "UTC" : request.timeZone
        // A control character (a NUL) ends the name Foundation reads: "UTC\0…" would be UTC.
        let printable = zoneName.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }
        guard zoneName.utf8.count <= 64, printable, let timeZone = TimeZone(identifier: zoneName) else {
            let shown = String(String.UnicodeScalarView(zoneName.unicodeScalars.prefix(64).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
            throw HealthError.invalidArgument("'\(shown)' is not an IANA time zone\(printable ? "" : " (it holds a control character)")", field: "time_zone")
        }
        let intervals = try StatisticsIntervals(
            anchor: date(microseconds: request.anchorUs), every: Int(request.intervalCount), unit, timeZone: timeZone)
        let query = StatisticsCollectionQuery(
            type: type, range: DateInterval(start: date(microseconds: request.startUs), end: date(microseconds: request.endUs)), intervals: intervals,
            options: StatisticsOptions(rawValue: Int(request.options)), predicate: request.hasPredicate ? try request.predicate.model() : nil)
        return (query, Self.batchSize(request.batchSize, default: 1_000))
    }
}
