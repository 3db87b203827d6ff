import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import TestSupport
import Testing

@testable import Ledger

/// A query read a batch at a time (how the server streams `QuerySamples` and
/// `QueryCorrelations`) must give what the whole query gives, from one snapshot, and pick
/// up where it was when the ledger takes its snapshot away.
@Suite("Query cursors")
struct QueryCursorTests {
    static let heartRate = Fixtures.heartRate.objectType
    static let sorts: [SampleSort] = [
        .startDate(ascending: true), .startDate(ascending: false), .endDate(ascending: true), .endDate(ascending: false),
    ]

    /// Samples by the owner and two apps, of varied lengths, many sharing a start date.
    static func fill(_ ledger: Ledger, seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [heartRate])
        for principal in [Principal.owner, .app(Fixtures.appA), .app(Fixtures.appB)] {
            let samples = (0..<40).map { _ in
                let start = Fixtures.base.addingTimeInterval(Double(Int.random(in: 0..<30, using: &random)) * 60)
                return HealthObject.quantitySample(QuantitySample(
                    type: Fixtures.heartRate, quantity: Quantity(Double.random(in: 40...180, using: &random).rounded(), Fixtures.bpm),
                    start: start, end: start.addingTimeInterval(Double(Int.random(in: 0..<4, using: &random)) * 300)))
            }
            _ = try await ledger.save(samples, by: principal)
        }
    }

    static func uuids(_ objects: [[UInt8]]) throws -> [UUID] {
        try objects.map { try Healthledger_V1_HealthObject(serializedBytes: $0).model().uuid }
    }

    /// Every plan the reads take: the type's start and end indexes, one source's index,
    /// several sources collected and sorted, UUIDs looked up, with a limit, and a range.
    static func queries(sort: SampleSort, some: Set<UUID>) -> [SampleQuery] {
        let middle = DateInterval(start: Fixtures.base.addingTimeInterval(600), duration: 900)
        return [
            SampleQuery(type: heartRate, sort: sort),
            SampleQuery(type: heartRate, interval: middle, sort: sort),
            SampleQuery(type: heartRate, predicate: .sources([Fixtures.appA.bundleIdentifier]), sort: sort),
            SampleQuery(type: heartRate, predicate: .sources([Fixtures.appA.bundleIdentifier, Fixtures.appB.bundleIdentifier]), sort: sort),
            SampleQuery(type: heartRate, predicate: .uuids(some), sort: sort),
            SampleQuery(type: heartRate, predicate: .quantity(.greater, Quantity(100, Fixtures.bpm)), limit: 23, sort: sort),
        ]
    }

    @Test("batch by batch, every plan and order gives the whole query's results, from the snapshot of the first batch")
    func batchesReadOneSnapshot() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "cursor")
        try await Self.fill(ledger, seed: 7)
        let all = try ledger.samples(SampleQuery(type: Self.heartRate), as: .owner).map(\.uuid)
        let some = Set(all.enumerated().filter { $0.offset % 3 == 0 }.map(\.element))
        var round = 0
        for reader in [Principal.owner, .app(Fixtures.appA)] {
            for sort in Self.sorts {
                for query in Self.queries(sort: sort, some: some) {
                    let expected = try ledger.samples(query, as: reader).map(\.uuid)
                    let cursor = try ledger.sampleCursor(query, as: reader)
                    var read = try Self.uuids(cursor.next(maxCount: 7, maxBytes: 1 << 20))
                    // Changes after the first batch are not seen by the rest.
                    round += 1
                    _ = try await ledger.save((0..<5).map { Fixtures.heartRate(90, at: Double(round * 7 + $0) * 60) }, by: reader)
                    if !expected.isEmpty { _ = try await ledger.delete(Array(expected.suffix(3)), by: .owner) }
                    while case let batch = try cursor.next(maxCount: 7, maxBytes: 1 << 20), !batch.isEmpty {
                        #expect(batch.count <= 7)
                        read += try Self.uuids(batch)
                    }
                    #expect(read == expected, "\(reader) \(sort) \(String(describing: query.predicate))")
                }
            }
        }
    }

    @Test("several named sources' samples come in the order of the type's own index, whatever the range, the direction and where a batch ends")
    func namedSourcesMerged() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "sources")
        try await Self.fill(ledger, seed: 11)
        let sources = [Fixtures.appA, .owner]
        let codes = Set(sources.map(\.bundleIdentifier))
        let ranges: [DateInterval?] = [
            nil, DateInterval(start: Fixtures.base.addingTimeInterval(600), duration: 900), DateInterval(start: Fixtures.base.addingTimeInterval(1500), duration: 1),
        ]
        for ascending in [true, false] {
            for interval in ranges {
                let sort = SampleSort.startDate(ascending: ascending)
                // Every source's samples through the type's start index, then only the named ones kept.
                let expected = try ledger.samples(SampleQuery(type: Self.heartRate, interval: interval, sort: sort), as: .owner)
                    .filter { codes.contains($0.sourceRevision.source.bundleIdentifier) }.map(\.uuid)
                let query = SampleQuery(type: Self.heartRate, interval: interval, predicate: .sources(codes), sort: sort)
                #expect(try ledger.samples(query, as: .owner).map(\.uuid) == expected, "\(sort) \(String(describing: interval))")
                for size in [1, 4, 13] {
                    let cursor = try ledger.sampleCursor(query, as: .owner)
                    var read: [UUID] = []
                    while case let batch = try cursor.next(maxCount: size, maxBytes: 1 << 20), !batch.isEmpty { read += try Self.uuids(batch) }
                    #expect(read == expected, "\(sort) \(String(describing: interval)), batches of \(size)")
                }
            }
        }
    }

    @Test("a batch stops at its byte budget, and holds at least one object")
    func byteBudget() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "bytes")
        try await Self.fill(ledger, seed: 3)
        let cursor = try ledger.sampleCursor(SampleQuery(type: Self.heartRate), as: .owner)
        let first = try cursor.next(maxCount: 500, maxBytes: 1)
        #expect(first.count == 1)
        // A batch ends with the object whose encoding in the SampleBatch reaches the budget.
        let budget = first[0].count * 5
        let second = try cursor.next(maxCount: 500, maxBytes: budget)
        let sizes = second.map { ProtoWriter.messageSize(field: 1, length: $0.count) }
        #expect(second.count > 1 && sizes.dropLast().reduce(0, +) < budget && sizes.reduce(0, +) >= budget)
        #expect(try cursor.next(maxCount: 3, maxBytes: 1 << 20).count == 3)
        cursor.close()
        #expect(try cursor.next(maxCount: 500, maxBytes: 1 << 20).isEmpty)
    }

    @Test("when the map grows under a paused cursor, it goes on after its last object in a newer snapshot")
    func resumesAfterMapGrowth() async throws {
        let temporary = try TemporaryStore(configuration: LedgerConfiguration(initialMapSize: 1 << 20))
        let ledger = try temporary.ledgerStore.createLedger(id: "grow")
        let first = (0..<100).map { Fixtures.heartRate(60, at: Double($0) * 60) }
        _ = try await ledger.save(first, by: .owner)
        for sort in [SampleSort.startDate(ascending: true), .endDate(ascending: true)] {
            let cursor = try ledger.sampleCursor(SampleQuery(type: Self.heartRate, sort: sort), as: .owner)
            var read = try Self.uuids(cursor.next(maxCount: 40, maxBytes: 1 << 20))
            // Enough later samples that the map must grow while the cursor waits.
            let before = ledger.mapSize
            var later: [UUID] = []
            while ledger.mapSize == before {
                let batch = (0..<2000).map { Fixtures.heartRate(70, at: 100 * 60 + Double(later.count + $0)) }
                _ = try await ledger.save(batch, by: .owner)
                later += batch.map(\.uuid)
            }
            while case let batch = try cursor.next(maxCount: 500, maxBytes: 1 << 20), !batch.isEmpty { read += try Self.uuids(batch) }
            // The rest of the first samples, then the later ones the newer snapshot holds.
            #expect(read == first.map(\.uuid) + later)
            _ = try await ledger.delete(later, by: .owner)
        }
    }

    @Test("the environment ends the transaction of the snapshot paused longest when too many are open, and that snapshot reads a newer one")
    func pausedSnapshotsGiveWay() throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "snapshots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = try Environment(path: directory.path, options: .init(mapSize: 1 << 20, maxReaders: 8, durable: false))
        let values = try environment.openDatabase("values")
        func set(_ value: UInt8) throws { try environment.write { try $0.put([value], forKey: [1], in: values) } }
        func value(_ txn: Transaction) throws -> UInt8? { try txn.bytes(forKey: [1], in: values)?.first }

        try set(1)
        // Eight readers at most, so two snapshots may hold a transaction while paused.
        let snapshots = (0..<3).map { _ in environment.snapshot() }
        #expect(try snapshots[0].read { txn, fresh in fresh ? try value(txn) : nil } == 1)
        #expect(try snapshots[1].read { txn, fresh in fresh ? try value(txn) : nil } == 1)
        try set(2)
        // The third ends the first's transaction (the one paused longest), not the second's.
        #expect(try snapshots[2].read { txn, fresh in fresh ? try value(txn) : nil } == 2)
        #expect(try snapshots[1].read { txn, fresh in fresh ? nil : try value(txn) } == 1)
        #expect(try snapshots[0].read { txn, fresh in fresh ? try value(txn) : nil } == 2)
        snapshots[0].close()
        #expect(throws: LMDBError.self) { try snapshots[0].read { _, _ in () } }
    }
}
