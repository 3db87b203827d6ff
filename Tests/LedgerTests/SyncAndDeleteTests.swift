import Foundation
import HealthModel
import Ledger
import Testing

@Suite("Sync identifiers (docs/SEMANTICS.md §4) and deletion (§5)")
struct SyncAndDeleteTests {
    @Test("a higher version replaces, an equal or lower one is ignored")
    func upsertOutcomes() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "sync")
        try await ledger.authorize([Fixtures.appA], share: [Fixtures.bodyMass.objectType])
        let app = Principal.app(Fixtures.appA)
        let first = Fixtures.weight(70, syncIdentifier: "w-1", version: 1)
        #expect(try await ledger.save([first], by: app) == [SaveResult(uuid: first.uuid, disposition: .saved)])

        let second = Fixtures.weight(71, syncIdentifier: "w-1", version: 2)
        #expect(try await ledger.save([second], by: app) == [SaveResult(uuid: second.uuid, disposition: .replaced(previous: first.uuid))])
        #expect(try ledger.object(with: first.uuid, as: .owner) == nil)
        let tombstone = try #require(try ledger.tombstone(for: first.uuid))
        #expect(tombstone.syncIdentifier == "w-1")
        #expect(tombstone.syncVersion == 1)
        #expect(tombstone.reason == .replacedBySyncVersion)
        #expect(tombstone.objectType == Fixtures.bodyMass.identifier)

        let head = try ledger.head()
        let equal = Fixtures.weight(72, syncIdentifier: "w-1", version: 2)
        let lower = Fixtures.weight(73, syncIdentifier: "w-1", version: 1)
        #expect(try await ledger.save([equal, lower], by: app) == [
            SaveResult(uuid: equal.uuid, disposition: .ignored(existing: second.uuid)),
            SaveResult(uuid: lower.uuid, disposition: .ignored(existing: second.uuid)),
        ])
        #expect(try ledger.head() == head, "an ignored save writes nothing")
        #expect(try ledger.samples(SampleQuery(type: Fixtures.bodyMass.objectType), as: .owner).map(\.uuid) == [second.uuid])
    }

    @Test("the scope is the source and the type")
    func scope() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "scope")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Fixtures.bodyMass.objectType, try ObjectType("HKQuantityTypeIdentifierHeight")])
        let mine = Fixtures.weight(70, syncIdentifier: "shared", version: 5)
        _ = try await ledger.save([mine], by: .app(Fixtures.appA))
        // Another app using the same identifier never touches App A's object.
        let theirs = Fixtures.weight(90, syncIdentifier: "shared", version: 9)
        #expect(try await ledger.save([theirs], by: .app(Fixtures.appB)).first?.disposition == .saved)
        // The same identifier on another type is another object too.
        let date = Fixtures.base
        let height = HealthObject.quantitySample(QuantitySample(
            type: try QuantityType("HKQuantityTypeIdentifierHeight"), quantity: try Quantity(1.8, "m"), start: date, end: date,
            metadata: [MetadataKey.syncIdentifier: .string("shared"), MetadataKey.syncVersion: .number(9)]))
        #expect(try await ledger.save([height], by: .app(Fixtures.appA)).first?.disposition == .saved)
        #expect(try ledger.object(with: mine.uuid, as: .owner) != nil)
        #expect(try ledger.object(with: theirs.uuid, as: .owner) != nil)
    }

    /// Identifiers that sort after every stored one are answered without a look-up; these come
    /// in every order against that bound: below it, past it, equal to one just put past it, and
    /// in a range (another type) the transaction has not looked at yet.
    @Test("identifiers below, past and at the highest stored one are all held to the sync rules")
    func identifiersAroundTheHighest() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "bounds")
        let height = try QuantityType("HKQuantityTypeIdentifierHeight")
        func heightSample(_ identifier: String, _ version: Double) -> HealthObject {
            .quantitySample(QuantitySample(
                type: height, quantity: try! Quantity(1.8, "m"), start: Fixtures.base, end: Fixtures.base,
                metadata: [MetadataKey.syncIdentifier: .string(identifier), MetadataKey.syncVersion: .number(version)]))
        }
        let b1 = Fixtures.weight(70, syncIdentifier: "b", version: 1)
        _ = try await ledger.save([b1], by: .owner)
        let a1 = Fixtures.weight(71, syncIdentifier: "a", version: 1)
        let c1 = Fixtures.weight(72, syncIdentifier: "c", version: 1)
        let c2 = Fixtures.weight(73, syncIdentifier: "c", version: 2)
        let b0 = Fixtures.weight(74, syncIdentifier: "b", version: 0)
        let hc = heightSample("c", 1)
        let d1 = Fixtures.weight(75, syncIdentifier: "d", version: 1)
        let d1again = Fixtures.weight(76, syncIdentifier: "d", version: 1)
        #expect(try await ledger.save([a1, c1, c2, b0, hc, d1, d1again], by: .owner).map(\.disposition) == [
            .saved, .saved, .replaced(previous: c1.uuid), .ignored(existing: b1.uuid), .saved, .saved, .ignored(existing: d1.uuid),
        ])
        // The next transaction finds the highest stored identifier again.
        let a2 = Fixtures.weight(77, syncIdentifier: "a", version: 2)
        let d2 = Fixtures.weight(78, syncIdentifier: "d", version: 2)
        let e1 = Fixtures.weight(79, syncIdentifier: "e", version: 1)
        let hc2 = heightSample("c", 2)
        #expect(try await ledger.save([a2, d2, e1, hc2], by: .owner).map(\.disposition) == [
            .replaced(previous: a1.uuid), .replaced(previous: d1.uuid), .saved, .replaced(previous: hc.uuid),
        ])
        let weights = try ledger.samples(SampleQuery(type: Fixtures.bodyMass.objectType), as: .owner).map(\.uuid)
        #expect(Set(weights) == [b1.uuid, c2.uuid, a2.uuid, d2.uuid, e1.uuid])
        #expect(try ledger.replay().identical)
    }

    @Test("a batch carrying several versions of one identifier keeps the highest")
    func withinBatch() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "batch")
        let versions = [3.0, 1, 7, 7, 2].map { Fixtures.weight($0 + 60, syncIdentifier: "x", version: $0) }
        let results = try await ledger.save(versions, by: .owner)
        #expect(results.map(\.disposition) == [
            .saved, .ignored(existing: versions[0].uuid), .replaced(previous: versions[0].uuid),
            .ignored(existing: versions[2].uuid), .ignored(existing: versions[2].uuid),
        ])
        #expect(try ledger.samples(SampleQuery(type: Fixtures.bodyMass.objectType), as: .owner).map(\.uuid) == [versions[2].uuid])
    }

    @Test("concurrent saves of one identifier end with exactly the highest version", arguments: [1, 2, 3])
    func concurrentSameIdentifier(round: Int) async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "race")
        try await ledger.authorize([Fixtures.appA], share: [Fixtures.bodyMass.objectType])
        let app = Principal.app(Fixtures.appA)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for version in (1...40).shuffled() {
                group.addTask {
                    _ = try await ledger.save([Fixtures.weight(Double(version), syncIdentifier: "race-\(round)", version: Double(version))], by: app)
                }
            }
            try await group.waitForAll()
        }
        let stored = try ledger.samples(SampleQuery(type: Fixtures.bodyMass.objectType), as: .owner)
        #expect(stored.count == 1)
        #expect(stored.first?.syncVersion == 40)
        #expect(try ledger.replay().identical)
    }

    @Test("apps delete only their own objects; the owner deletes any")
    func deleteRules() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "delete")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Fixtures.heartRate.objectType])
        let mine = Fixtures.heartRate(60, at: 0)
        let theirs = Fixtures.heartRate(61, at: 1)
        _ = try await ledger.save([mine], by: .app(Fixtures.appA))
        _ = try await ledger.save([theirs], by: .app(Fixtures.appB))

        // Without read authorization, another source's object is as unknown as a made-up UUID.
        let hidden = await #expect(throws: HealthError.self) { try await ledger.delete([mine.uuid, theirs.uuid], by: .app(Fixtures.appA)) }
        #expect(hidden?.code == .noData)
        #expect(hidden?.message == "no object with UUID \(theirs.uuid)")
        // With it, the app may see the object but still not delete it.
        try await ledger.authorize([Fixtures.appA], share: [], read: [Fixtures.heartRate.objectType])
        let denied = await #expect(throws: HealthError.self) { try await ledger.delete([mine.uuid, theirs.uuid], by: .app(Fixtures.appA)) }
        #expect(denied?.code == .authorizationDenied)
        #expect(try ledger.object(with: mine.uuid, as: .owner) != nil, "a refused delete deletes nothing")

        #expect(try await ledger.delete([mine.uuid], by: .app(Fixtures.appA)) == 1)
        #expect(try ledger.object(with: mine.uuid, as: .owner) == nil)
        #expect(try ledger.tombstone(for: mine.uuid)?.reason == .deleted)
        #expect(try await ledger.delete([theirs.uuid], by: .owner) == 1)

        let unknown = await #expect(throws: HealthError.self) { try await ledger.delete([UUID()], by: .owner) }
        #expect(unknown?.code == .noData)
        let again = await #expect(throws: HealthError.self) { try await ledger.delete([mine.uuid], by: .owner) }
        #expect(again?.code == .noData)
        let empty = await #expect(throws: HealthError.self) { try await ledger.delete([], by: .owner) }
        #expect(empty?.code == .invalidArgument)
        await #expect(throws: HealthError.self) { try await ledger.delete([theirs.uuid], by: .operator) }
    }

    @Test("delete by type and range removes only the caller's matching objects and counts them")
    func deleteByPredicate() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "predicate")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Fixtures.heartRate.objectType])
        let mine = (0..<10).map { Fixtures.heartRate(60, at: Double($0) * 60) }
        let theirs = (0..<10).map { Fixtures.heartRate(70, at: Double($0) * 60 + 30) }
        _ = try await ledger.save(mine, by: .app(Fixtures.appA))
        _ = try await ledger.save(theirs, by: .app(Fixtures.appB))
        let type = Fixtures.heartRate.objectType

        // Minutes 0–4 hold five of mine and five of theirs.
        let window = DateInterval(start: Fixtures.base, duration: 300)
        #expect(try await ledger.deleteObjects(of: type, overlapping: window, by: .app(Fixtures.appA)) == 5)
        #expect(try ledger.count(of: type) == 15)
        for object in theirs { #expect(try ledger.object(with: object.uuid, as: .owner) != nil) }
        #expect(try await ledger.deleteObjects(of: type, overlapping: window, by: .app(Fixtures.appA)) == 0)

        #expect(try await ledger.deleteObjects(of: type, by: .owner) == 15)
        #expect(try ledger.count(of: type) == 0)
        #expect(try ledger.replay().identical)
    }

    @Test("after an explicit delete the sync identifier can be used again")
    func syncAfterDelete() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "reuse")
        let first = Fixtures.weight(70, syncIdentifier: "r", version: 5)
        _ = try await ledger.save([first], by: .owner)
        try await ledger.delete([first.uuid], by: .owner)
        let tombstone = try #require(try ledger.tombstone(for: first.uuid))
        #expect(tombstone.syncIdentifier == "r" && tombstone.syncVersion == 5)
        let second = Fixtures.weight(71, syncIdentifier: "r", version: 1)
        #expect(try await ledger.save([second], by: .owner).first?.disposition == .saved)
    }

    @Test("long identifiers: equal ones replace, ones that differ past the key's 400 bytes stay apart, and replay agrees")
    func longIdentifiers() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "long")
        let stem = String(repeating: "x", count: 600)
        let first = Fixtures.weight(70, syncIdentifier: stem + "a", version: 1)
        let other = Fixtures.weight(71, syncIdentifier: stem + "b", version: 1)
        let short = Fixtures.weight(72, syncIdentifier: "x", version: 1)
        let prefix = Fixtures.weight(73, syncIdentifier: "xx", version: 1)
        #expect(try await ledger.save([first, other, short, prefix], by: .owner).map(\.disposition) == [.saved, .saved, .saved, .saved])
        let newer = Fixtures.weight(74, syncIdentifier: stem + "a", version: 2)
        let older = Fixtures.weight(75, syncIdentifier: stem + "b", version: 1)
        #expect(try await ledger.save([newer, older], by: .owner).map(\.disposition) == [
            .replaced(previous: first.uuid), .ignored(existing: other.uuid),
        ])
        try await ledger.delete([newer.uuid], by: .owner)
        let again = Fixtures.weight(76, syncIdentifier: stem + "a", version: 1)
        #expect(try await ledger.save([again], by: .owner).first?.disposition == .saved, "the delete freed the identifier")
        let report = try ledger.replay()
        #expect(report.identical)
    }
}
