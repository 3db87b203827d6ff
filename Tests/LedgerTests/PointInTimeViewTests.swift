import Foundation
import HealthModel
import Ledger
import Testing

@Suite("Point-in-time views of a ledger")
struct PointInTimeViewTests {
    /// The view directories on disk for the store's ledger `id`.
    static func viewDirectories(_ temporary: TemporaryStore, _ id: String) -> [String] {
        let root = temporary.directory.appending(path: "views")
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return processes.flatMap { process in
            ((try? FileManager.default.contentsOfDirectory(atPath: root.appending(path: process).appending(path: id).path)) ?? []).sorted()
        }
    }

    @Test("a view is the ledger as it stood then, read-only, reused at the same point, and evicted beyond capacity")
    func reuseAndEviction() async throws {
        let temporary = try TemporaryStore(configuration: LedgerConfiguration(viewCapacity: 2))
        let ledger = try temporary.ledgerStore.createLedger(id: "views")
        var heads: [UInt64] = []
        for round in 0..<4 {
            _ = try await ledger.save([Fixtures.heartRate(Double(60 + round), at: Double(round))], by: .owner)
            heads.append(try ledger.head().sequence)
        }
        let first = try temporary.ledgerStore.view(of: ledger, at: .sequence(heads[0]))
        #expect(first.viewOf == heads[0])
        #expect(try first.head().sequence == heads[0] && (try first.head().hash) == (try ledger.eventHashes(from: heads[0], limit: 1)[0]))
        #expect(try first.samples(SampleQuery(type: Fixtures.heartRate.objectType), as: .owner).count == 1)
        #expect(try first.verify().isValid && (try first.replay().identical), "a view is a consistent ledger")
        #expect(try temporary.ledgerStore.view(of: ledger, at: .sequence(heads[0])) === first, "reused at the same point")
        await #expect(throws: HealthError.self) { _ = try await first.save([Fixtures.heartRate(1, at: 99)], by: .owner) }
        #expect(throws: HealthError.self) { _ = try temporary.ledgerStore.view(of: first, at: .sequence(1)) }
        #expect(Self.viewDirectories(temporary, "views").count == 1)

        _ = try temporary.ledgerStore.view(of: ledger, at: .sequence(heads[1]))
        _ = try temporary.ledgerStore.view(of: ledger, at: .sequence(heads[2]))
        #expect(Self.viewDirectories(temporary, "views").count == 2, "the least recently used went beyond capacity 2")
        #expect(Self.viewDirectories(temporary, "views").allSatisfy { !$0.hasPrefix("\(heads[0])-") })
        // The evicted view still answers the reads that hold it; a new one is built when asked again.
        #expect(try first.samples(SampleQuery(type: Fixtures.heartRate.objectType), as: .owner).count == 1)
        #expect(try temporary.ledgerStore.view(of: ledger, at: .sequence(heads[0])) !== first)
        #expect(throws: HealthError.self) { _ = try temporary.ledgerStore.view(of: ledger, at: .sequence(heads[3] + 1)) }
    }
}
