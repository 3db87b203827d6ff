import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import TestSupport
import Testing

@testable import Ledger

/// `by_end` holds only samples that last: an instant ends when it starts, so the end-date
/// order merges `by_end` with the instants of `by_start`. These tests hold that merge, and
/// the start-date order, to a sort done here over every way a query reaches them.
@Suite("End-date order")
struct EndDateOrderTests {
    static let type = Fixtures.steps.objectType

    /// Overlap as SampleQuery's interval means it: an instant in [start, end), a lasting sample
    /// starting before the end and ending after the start.
    static func overlaps(_ sample: QuantitySample, _ interval: DateInterval?) -> Bool {
        guard let interval else { return true }
        if sample.startDate == sample.endDate { return sample.startDate >= interval.start && sample.startDate < interval.end }
        return sample.startDate < interval.end && sample.endDate > interval.start
    }

    /// Byte order of a UUID, the index's tie-break.
    static func precedes(_ a: UUID, _ b: UUID) -> Bool { a.uuidString.lowercased() < b.uuidString.lowercased() }

    @Test("instants and lasting samples of three sources come in end-date and start-date order, both ways, whole and in batches, over random samples and intervals", arguments: [1, 2, 3])
    func mergedOrder(seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "ends")
        // Starts on a coarse grid so that ends collide: an instant at t and a sample ending at t.
        var samples: [QuantitySample] = (0..<300).map { _ in
            let start = Fixtures.base.addingTimeInterval(Double(Int.random(in: 0..<40, using: &random)) * 60)
            let length = [0, 0, 0, 60, 120, 600, 3600][Int.random(in: 0..<7, using: &random)]
            return QuantitySample(type: Fixtures.steps, quantity: Quantity(Double(Int.random(in: 1...100, using: &random)), .count), start: start, end: start.addingTimeInterval(Double(length)))
        }
        // Three sources, so that a reader of every source merges their ranges of the start index.
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.type])
        for (part, principal) in [Principal.owner, .app(Fixtures.appA), .app(Fixtures.appB)].enumerated() {
            let mine = samples.enumerated().filter { $0.offset % 3 == part }.map { HealthObject.quantitySample($0.element) }
            _ = try await ledger.save(mine, by: principal)
        }
        // Deleted samples leave both indexes.
        let deleted = Set(samples.prefix(30).map(\.uuid))
        _ = try await ledger.delete(Array(deleted), by: .owner)
        samples.removeAll { deleted.contains($0.uuid) }

        var intervals: [DateInterval?] = [nil, DateInterval(start: Fixtures.base, duration: 0.000_001)]
        for _ in 0..<6 {
            let start = Fixtures.base.addingTimeInterval(Double(Int.random(in: -10..<45, using: &random)) * 60)
            intervals.append(DateInterval(start: start, duration: Double(Int.random(in: 1..<30, using: &random)) * 60))
        }
        for interval in intervals {
            for (byEnd, ascending) in [(true, true), (true, false), (false, true), (false, false)] {
                let date: (QuantitySample) -> Date = { byEnd ? $0.endDate : $0.startDate }
                let expected = samples.filter { Self.overlaps($0, interval) }.sorted { a, b in
                    let (x, y) = ascending ? (a, b) : (b, a)
                    return date(x) != date(y) ? date(x) < date(y) : Self.precedes(x.uuid, y.uuid)
                }.map(\.uuid)
                let sort: SampleSort = byEnd ? .endDate(ascending: ascending) : .startDate(ascending: ascending)
                let query = SampleQuery(type: Self.type, interval: interval, sort: sort)
                #expect(try ledger.samples(query, as: .owner).map(\.uuid) == expected, "\(String(describing: interval)) \(sort)")
                let limit = Int.random(in: 1...20, using: &random)
                let limited = SampleQuery(type: Self.type, interval: interval, limit: limit, sort: sort)
                #expect(try ledger.samples(limited, as: .owner).map(\.uuid) == Array(expected.prefix(limit)))

                // In batches, each resuming after the last one's final sample.
                let cursor = try ledger.sampleCursor(query, as: .owner)
                var read: [UUID] = []
                while case let batch = try cursor.next(maxCount: Int.random(in: 1...9, using: &random), maxBytes: 1 << 20), !batch.isEmpty {
                    read += try batch.map { try Healthledger_V1_HealthObject(serializedBytes: $0).model().uuid }
                }
                #expect(read == expected, "in batches: \(String(describing: interval)) \(sort)")
            }
        }
        #expect(try ledger.replay().identical)
    }

    @Test("only lasting samples are in by_end")
    func instantsStayOutOfTheEndIndex() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "rows")
        let instant = Fixtures.steps(5, from: 60, to: 60)
        let lasting = Fixtures.steps(7, from: 0, to: 60)
        _ = try await ledger.save([instant, lasting], by: .owner)
        func endRows() throws -> Int { try ledger.read { snapshot in try snapshot.txn.count(in: snapshot.databases.byEnd) } }
        #expect(try endRows() == 1)
        _ = try await ledger.delete([lasting.uuid, instant.uuid], by: .owner)
        #expect(try endRows() == 0)
    }

    @Test("a ledger from layout 9 (instants in by_end, the checkpoint and every source's changes in databases of their own) is rebuilt on opening, the retired databases dropped")
    func layoutNineUpgrade() async throws {
        let temporary = try TemporaryStore()
        func writeLayoutNine() async throws -> (digest: [UInt8], ends: [UUID]) {
            let ledger = try temporary.ledgerStore.createLedger(id: "nine")
            let objects = (0..<10).map { Fixtures.steps(Double($0), from: Double($0) * 60, to: Double($0 % 2) * 120 + Double($0) * 60) }
            _ = try await ledger.save(objects, by: .owner)
            let digest = try ledger.projectionDigest()
            let ends = try ledger.samples(SampleQuery(type: Self.type, sort: .endDate(ascending: false)), as: .owner).map(\.uuid)
            // Layout 9: every sample in by_end, the checkpoint and the `changes` index in databases of their own.
            let checkpoint = try ledger.environment.openDatabase("checkpoint")
            let changes = try ledger.environment.openDatabase("changes")
            try ledger.environment.write { txn in
                let databases = ledger.databases
                for case .quantitySample(let sample) in objects where sample.startDate == sample.endDate {
                    let (start, uuid) = (Int64(sample.startDate.timeIntervalSince1970 * 1_000_000), withUnsafeBytes(of: sample.uuid.uuid) { Array($0) })
                    try txn.put(
                        EndIndexRow.value(start: start, sequence: 2, source: 0, series: false),
                        forKey: EndIndexRow.key(type: Self.type.code, end: start, uuid: uuid), in: databases.byEnd)
                }
                for (offset, object) in objects.enumerated() {
                    let uuid = withUnsafeBytes(of: object.uuid.uuid) { Array($0) }
                    var key = KeyEncoding.typeKey(Self.type.code)
                    KeyEncoding.append(UInt64(offset + 2), to: &key)
                    try txn.put(ChangeIndexRow.value(ChangeIndexRow.added, uuid: uuid), forKey: key, in: changes)
                }
                let applied = try #require(try txn.get(Projector.checkpointKey, in: databases.meta))
                try txn.put(Array(applied), forKey: Projector.checkpointKey, in: checkpoint)
                _ = try txn.delete(Projector.checkpointKey, in: databases.meta)
                try txn.put([0, 0, 0, 9], forKey: ProjectionLayout.key, in: databases.meta)
            }
            #expect(try ledger.projectionDigest() != digest)
            return (digest, ends)
        }
        let (digest, ends) = try await writeLayoutNine()
        temporary.close()

        let reopened = try temporary.reopen().ledger("nine")
        #expect(try reopened.projectionDigest() == digest)
        #expect(try reopened.read { try ProjectionLayout.recorded(in: $0) } == ProjectionLayout.current)
        #expect(try reopened.samples(SampleQuery(type: Self.type, sort: .endDate(ascending: false)), as: .owner).map(\.uuid) == ends)
        #expect(try reopened.verify().isValid)
        for retired in ["checkpoint", "changes"] {
            #expect(try reopened.environment.dropDatabase(retired) == false, "the retired database \(retired) is gone")
        }
    }
}
