import Foundation
import HealthModel
import Ledger
import Testing

/// A save's rows of the time and change indexes are put in key order when its request ends,
/// not as each object is applied: whatever order a request's objects come in, the indexes,
/// the queries and a replay must see exactly what they saw when rows were put one by one.
@Suite("Index rows put in key order at the end of a request")
struct HeldIndexRowTests {
    /// One request whose objects run against every index's order: types interleaved, start
    /// dates falling, durations of every length, and sync identifiers replaced many times.
    static func shuffledRequest(count: Int) -> [HealthObject] {
        var objects: [HealthObject] = []
        for index in 0..<count {
            let offset = Double(count - index) * 60
            switch index % 4 {
            case 0: objects.append(Fixtures.heartRate(Double(60 + index), at: offset))
            case 1: objects.append(Fixtures.steps(Double(index), from: offset, to: offset + Double(index % 7) * 97))
            case 2:
                // In the last quarter, three identifiers each replaced again and again.
                let identifier = index < count * 3 / 4 ? "once-\(index)" : "w-\(index % 3)"
                objects.append(Fixtures.weight(Double(50 + index), syncIdentifier: identifier, version: Double(index), at: offset))
            default:
                objects.append(.categorySample(CategorySample(
                    type: Fixtures.sleep, value: index % 6, start: Fixtures.base.addingTimeInterval(offset),
                    end: Fixtures.base.addingTimeInterval(offset + 300))))
            }
        }
        return objects
    }

    /// 4,000 objects hold more rows than the most held at once (8,192) before the first
    /// replacement: some are put halfway through the request.
    @Test("queries by start and by end, anchored changes and a replay agree with the objects of one shuffled request", arguments: [120, 4000])
    func shuffledRequestIsIndexed(count: Int) async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "held")
        let objects = Self.shuffledRequest(count: count)
        let results = try await ledger.save(objects, by: .owner)
        // Weights w-0, w-1, w-2 were each saved, then replaced in the same request.
        let replaced = Set(results.compactMap { if case .replaced(let previous) = $0.disposition { previous } else { nil } })
        let lateWeights = (count * 3 / 4..<count).filter { $0 % 4 == 2 }.count
        #expect(replaced.count == lateWeights - 3)
        let kept = objects.filter { !replaced.contains($0.uuid) }

        for type in [Fixtures.heartRate.objectType, Fixtures.steps.objectType, Fixtures.bodyMass.objectType, Fixtures.sleep.objectType] {
            let ofType = kept.filter { $0.objectType == type }
            let starts = try ledger.samples(SampleQuery(type: type, sort: .startDate(ascending: true)), as: .owner).map(\.uuid)
            #expect(starts == ofType.sorted { $0.startDate < $1.startDate }.map(\.uuid), "\(type.identifier): in start order")
            let ends = try ledger.samples(SampleQuery(type: type, sort: .endDate(ascending: true)), as: .owner).map(\.endDate)
            #expect(ends == ofType.map(\.endDate).sorted(), "\(type.identifier): in end order")
            // Changes come in log order: the request's order of the objects it kept.
            let changes = try ledger.changes(ChangeQuery(type: type), as: .owner)
            #expect(changes.added.map(\.uuid) == ofType.map(\.uuid), "\(type.identifier): changes in log order")
        }
        #expect(kept.filter { $0.objectType == Fixtures.bodyMass.objectType }.count == count / 4 - lateWeights + 3)
        let report = try ledger.replay()
        #expect(report.identical)
    }

    @Test("a request that fails in a group commit leaves none of its rows; the requests around it keep theirs")
    func failedRequestTakesItsRows() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "rollback")
        let taken = Fixtures.heartRate(70, at: 0)
        _ = try await ledger.save([taken], by: .owner)
        // Requests committed together: the failing one (a UUID already stored, after objects
        // whose rows it had held) is rolled back alone, whichever commit each lands in.
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for request in 0..<12 {
                group.addTask {
                    var objects = (0..<20).map { Fixtures.heartRate(Double(request), at: Double(1000 * (request + 1) - $0)) }
                    if request == 5 { objects.append(taken) }
                    do {
                        _ = try await ledger.save(objects, by: .owner)
                        return (request, true)
                    } catch {
                        return (request, false)
                    }
                }
            }
            return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.filter(\.value).count == 11)
        #expect(outcomes[5] == false)
        let values = try ledger.samples(SampleQuery(type: Fixtures.heartRate.objectType), as: .owner)
        #expect(values.count == 1 + 11 * 20)
        #expect(!values.contains { $0.quantitySampleValue == 5 })
        let changes = try ledger.changes(ChangeQuery(type: Fixtures.heartRate.objectType), as: .owner)
        #expect(changes.added.count == 1 + 11 * 20)
        #expect(try ledger.replay().identical)
    }
}

private extension HealthObject {
    var quantitySampleValue: Double? {
        if case .quantitySample(let sample) = self { sample.quantity.value } else { nil }
    }
}
