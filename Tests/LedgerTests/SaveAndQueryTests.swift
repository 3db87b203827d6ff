import Foundation
import HealthModel
import LMDB
import Ledger
import TestSupport
import Testing

@Suite("Saving, fetching and querying")
struct SaveAndQueryTests {
    @Test("a saved object round-trips with its source, device and metadata")
    func roundTrip() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "alice")
        let device = Device(name: "Watch", manufacturer: "Example", model: "W1", softwareVersion: "10.1")
        let sample = QuantitySample(
            type: Fixtures.bodyMass, quantity: try Quantity(150, "lb"), start: Fixtures.base, end: Fixtures.base.addingTimeInterval(1.5),
            device: device,
            metadata: ["note": .string("after run"), "temp": .quantity(try Quantity(21.5, "degC")), "when": .date(Fixtures.base), "n": .number(3)],
            sourceRevision: SourceRevision(source: Fixtures.appB, version: "2.0", productType: "Watch6,1", operatingSystemVersion: "10.1"))
        try await ledger.authorize([Fixtures.appA], share: [Fixtures.bodyMass.objectType])
        let results = try await ledger.save([.quantitySample(sample)], by: .app(Fixtures.appA))
        #expect(results == [SaveResult(uuid: sample.uuid, disposition: .saved)])

        let fetched = try #require(try ledger.object(with: sample.uuid, as: .owner)?.quantitySample)
        // The app's identity, not what the object claimed, is its source; the revision details stay.
        #expect(fetched.sourceRevision.source == Fixtures.appA)
        #expect(fetched.sourceRevision.productType == "Watch6,1")
        #expect(fetched.device == device)
        #expect(fetched.metadata == sample.metadata)
        #expect(abs(try fetched.quantity.doubleValue(for: HealthUnit("kg")) - 68.0388) < 1e-9)
        #expect(fetched.endDate == sample.endDate)

        let sleep = CategorySample(type: Fixtures.sleep, value: 5, start: Fixtures.base, end: Fixtures.base.addingTimeInterval(600))
        _ = try await ledger.save([.categorySample(sleep)], by: .owner)
        #expect(try ledger.object(with: sleep.uuid, as: .owner)?.categorySample?.value == 5)
        #expect(try ledger.object(with: UUID(), as: .owner) == nil)
    }

    @Test("sample queries filter by date range, sort both ways and limit")
    func sampleQuery() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "q")
        // Steps spanning [i·600, i·600 + 900]: overlapping neighbours.
        let objects = (0..<20).map { Fixtures.steps(Double($0), from: Double($0) * 600, to: Double($0) * 600 + 900) }
        _ = try await ledger.save(objects.shuffled(), by: .owner)
        let type = Fixtures.steps.objectType

        let all = try ledger.samples(SampleQuery(type: type), as: .owner)
        #expect(all.count == 20)
        #expect(all.map(\.startDate) == all.map(\.startDate).sorted())

        // [3000, 4800) overlaps samples starting at 2400 (ends 3300) … 4200.
        let window = DateInterval(start: Fixtures.base.addingTimeInterval(3000), end: Fixtures.base.addingTimeInterval(4800))
        let inWindow = try ledger.samples(SampleQuery(type: type, interval: window), as: .owner)
        #expect(inWindow.map { $0.startDate.timeIntervalSince(Fixtures.base) } == [2400, 3000, 3600, 4200])

        let descending = try ledger.samples(SampleQuery(type: type, interval: window, sort: .startDate(ascending: false)), as: .owner)
        #expect(descending.map(\.uuid) == inWindow.reversed().map(\.uuid))

        let byEnd = try ledger.samples(SampleQuery(type: type, interval: window, sort: .endDate(ascending: true)), as: .owner)
        #expect(byEnd.map(\.uuid) == inWindow.map(\.uuid))
        let byEndDescending = try ledger.samples(SampleQuery(type: type, interval: window, limit: 2, sort: .endDate(ascending: false)), as: .owner)
        #expect(byEndDescending.map(\.uuid) == inWindow.reversed().prefix(2).map(\.uuid))

        let limited = try ledger.samples(SampleQuery(type: type, limit: 3), as: .owner)
        #expect(limited.map(\.uuid) == all.prefix(3).map(\.uuid))

        // Another type sees none of them.
        #expect(try ledger.samples(SampleQuery(type: Fixtures.heartRate.objectType), as: .owner).isEmpty)
        #expect(throws: HealthError.self) { try ledger.samples(SampleQuery(type: type, limit: -1), as: .owner) }
    }

    @Test("ties on the sort date are broken deterministically by UUID")
    func ties() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "ties")
        let objects = (0..<10).map { Fixtures.heartRate(Double(60 + $0), at: 0) }
        _ = try await ledger.save(objects, by: .owner)
        let ascending = try ledger.samples(SampleQuery(type: Fixtures.heartRate.objectType), as: .owner).map(\.uuid)
        #expect(ascending == objects.map(\.uuid).sorted { $0.uuidString.lowercased() < $1.uuidString.lowercased() })
        let descending = try ledger.samples(SampleQuery(type: Fixtures.heartRate.objectType, sort: .startDate(ascending: false)), as: .owner).map(\.uuid)
        #expect(descending == ascending.reversed())
    }

    @Test("a duplicate UUID is invalidArgument, in the ledger or within one save")
    func duplicateUUID() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "dup")
        let uuid = UUID()
        _ = try await ledger.save([Fixtures.heartRate(60, at: 0, uuid: uuid)], by: .owner)
        let again = await #expect(throws: HealthError.self) { try await ledger.save([Fixtures.heartRate(61, at: 1, uuid: uuid)], by: .owner) }
        #expect(again?.code == .invalidArgument)
        let twice = await #expect(throws: HealthError.self) {
            let shared = UUID()
            try await ledger.save([Fixtures.heartRate(1, at: 0, uuid: shared), Fixtures.heartRate(2, at: 0, uuid: shared)], by: .owner)
        }
        #expect(twice?.code == .invalidArgument)
        // A deleted object's UUID stays taken.
        try await ledger.delete([uuid], by: .owner)
        await #expect(throws: HealthError.self) { try await ledger.save([Fixtures.heartRate(62, at: 2, uuid: uuid)], by: .owner) }
    }

    @Test("a batch with one bad object writes nothing")
    func atomicBatch() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "atomic")
        let existing = UUID()
        _ = try await ledger.save([Fixtures.heartRate(60, at: 0, uuid: existing)], by: .owner)
        let head = try ledger.head()

        // Invalid by validation (end before start) in the middle of the batch.
        var batch = (0..<50).map { Fixtures.heartRate(Double(70 + $0), at: Double($0)) }
        let bad = QuantitySample(type: Fixtures.heartRate, quantity: Quantity(80, Fixtures.bpm), start: Fixtures.base, end: Fixtures.base.addingTimeInterval(-1))
        batch.insert(.quantitySample(bad), at: 25)
        let error = await #expect(throws: HealthError.self) { try await ledger.save(batch, by: .owner) }
        #expect(error?.field == "endDate")
        #expect(error?.message.contains("object 25") == true)

        // Invalid only against stored state (a UUID that exists), as the last object.
        var late = (0..<50).map { Fixtures.heartRate(Double(70 + $0), at: Double($0)) }
        late.append(Fixtures.heartRate(99, at: 99, uuid: existing))
        await #expect(throws: HealthError.self) { try await ledger.save(late, by: .owner) }

        #expect(try ledger.head() == head)
        #expect(try ledger.count(of: Fixtures.heartRate.objectType) == 1)
        for object in batch + late where object.uuid != existing {
            #expect(try ledger.object(with: object.uuid, as: .owner) == nil)
        }
        #expect(try ledger.verify().isValid)
    }

    @Test("concurrent writers are group-committed and all durable")
    func groupCommit() async throws {
        let batches = BatchSizes()
        let temporary = try TemporaryStore(configuration: LedgerConfiguration(onCommit: { requests, _ in batches.record(requests) }))
        let ledger = try temporary.ledgerStore.createLedger(id: "group")
        let uuids = try await withThrowingTaskGroup(of: UUID.self) { group in
            for index in 0..<256 {
                group.addTask {
                    let object = Fixtures.heartRate(Double(index % 100 + 40), at: Double(index))
                    _ = try await ledger.save([object], by: .owner)
                    return object.uuid
                }
            }
            return try await group.reduce(into: [UUID]()) { $0.append($1) }
        }
        #expect(Set(uuids).count == 256)
        for uuid in uuids { #expect(try ledger.object(with: uuid, as: .owner) != nil) }
        // 256 saves took fewer commits than saves: they were coalesced.
        #expect(batches.commits < 256)
        #expect(batches.largest > 1)
        #expect(try ledger.verify().isValid)
        #expect(try ledger.replay().identical)
    }

    @Test("a request refused inside a group commit takes its events back from the Merkle tree and its new sources back from the source codes")
    func refusedRequestInGroupCommit() async throws {
        let batches = BatchSizes()
        let temporary = try TemporaryStore(configuration: LedgerConfiguration(onCommit: { requests, _ in batches.record(requests) }))
        let ledger = try temporary.ledgerStore.createLedger(id: "refused")
        let existing = Fixtures.heartRate(60, at: -1)
        _ = try await ledger.save([existing], by: .owner)
        // Each request saves 300 samples (more than one hand-over to the hashing helper); every
        // third then repeats a UUID already stored, so it fails after its 300 events were appended.
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for request in 0..<48 {
                group.addTask {
                    // Requests share sources first seen in this test, so a refused request may
                    // be the one that assigned a source its neighbours in the commit use.
                    let source = Source(bundleIdentifier: "com.example.source\(request % 5)", name: "Source \(request % 5)")
                    var objects = (0..<300).map { index -> HealthObject in
                        let date = Fixtures.base.addingTimeInterval(Double(request * 300 + index))
                        return .quantitySample(QuantitySample(
                            type: Fixtures.heartRate, quantity: Quantity(Double(40 + index % 100), Fixtures.bpm), start: date, end: date,
                            sourceRevision: SourceRevision(source: source)))
                    }
                    if request % 3 == 1 { objects.append(Fixtures.heartRate(70, at: 0, uuid: existing.uuid)) }
                    do {
                        _ = try await ledger.save(objects, by: .owner)
                        return (request, true)
                    } catch is HealthError {
                        return (request, false)
                    }
                }
            }
            return try await group.reduce(into: [Int: Bool]()) { $0[$1.0] = $1.1 }
        }
        for (request, saved) in outcomes { #expect(saved == (request % 3 != 1), "request \(request)") }
        #expect(batches.largest > 1)
        #expect(try ledger.count(of: Fixtures.heartRate.objectType) == 1 + 32 * 300)
        let sources = try ledger.sourcePriority(for: Fixtures.heartRate.objectType, as: .owner).map(\.bundleIdentifier)
        #expect(Set(sources) == Set((0..<5).map { "com.example.source\($0)" } + [Fixtures.heartRate(60, at: 0).sourceRevision.source.bundleIdentifier]))

        // The tree head is RFC 9162's root over exactly the events in the log.
        var hashes: [[UInt8]] = []
        var next: UInt64 = 1
        while true {
            let page = try ledger.audit(AuditFilter(), from: next, limit: Ledger.maximumAuditPage, as: .owner)
            hashes += page.events.map(\.hash)
            next = page.next
            if page.caughtUp { break }
        }
        let head = try ledger.signedTreeHead(as: .owner)
        #expect(head.size == UInt64(hashes.count))
        #expect(head.rootHash == ReferenceTree.root(hashes.map(ReferenceTree.leaf)[...]))
        #expect(try ledger.verify().isValid)
        #expect(try ledger.replay().identical)
    }

    @Test("the map grows when it fills")
    func mapGrowth() async throws {
        let temporary = try TemporaryStore(configuration: LedgerConfiguration(initialMapSize: 1 << 20))
        let ledger = try temporary.ledgerStore.createLedger(id: "grow")
        let before = ledger.mapSize
        for round in 0..<10 {
            _ = try await ledger.save((0..<2000).map { Fixtures.heartRate(60, at: Double(round * 2000 + $0)) }, by: .owner)
        }
        #expect(ledger.mapSize > before)
        #expect(try ledger.count(of: Fixtures.heartRate.objectType) == 20_000)
        #expect(try ledger.verify().isValid)
    }

    @Test("a save past the map's maximum size fails as storage, with LMDB's error as its cause, and writes nothing")
    func mapFull() async throws {
        let temporary = try TemporaryStore(configuration: LedgerConfiguration(initialMapSize: 1 << 20, maximumMapSize: 2 << 20))
        let ledger = try temporary.ledgerStore.createLedger(id: "full")
        var saved = 0
        var failure: LedgerFailure?
        for round in 0..<50 where failure == nil {
            do {
                _ = try await ledger.save((0..<1000).map { Fixtures.heartRate(60, at: Double(round * 1000 + $0)) }, by: .owner)
                saved += 1000
            } catch let error as LedgerFailure {
                failure = error
            }
        }
        let full = try #require(failure)
        #expect(full.kind == .storage && full.message.contains("maximum size"))
        #expect((full.cause as? LMDBError)?.code == .mapFull)
        #expect("\(full)".contains("cause:"))
        #expect(try ledger.count(of: Fixtures.heartRate.objectType) == saved)
        #expect(try ledger.verify().isValid)
    }

    @Test("ledgers are isolated and ids are validated")
    func isolation() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let alice = try store.createLedger(id: "alice")
        let bob = try store.createLedger(id: "bob")
        let sample = Fixtures.heartRate(70, at: 0)
        _ = try await alice.save([sample], by: .owner)
        #expect(try bob.object(with: sample.uuid, as: .owner) == nil)
        #expect(try store.ledgerIDs() == ["alice", "bob"])
        #expect(throws: LedgerFailure.self) { try store.createLedger(id: "alice") }
        for bad in ["", "../x", "Alice", "a/b", String(repeating: "a", count: 65), ".hidden"] {
            #expect(throws: LedgerFailure.self) { try store.createLedger(id: bad) }
        }
        let missing = #expect(throws: LedgerFailure.self) { try store.ledger("carol") }
        #expect(missing?.kind == .notFound)
    }

    @Test("an audit page reads at most 50,000 events: a filter matching none comes back empty, not caught up, and says where to go on")
    func auditScanBudget() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "budget")
        for part in 0..<2 {
            try await ledger.save((0..<60_000).map { Fixtures.heartRate(60, at: Double(part * 60_000 + $0)) }, by: .owner)
        }
        let head = try ledger.head().sequence
        #expect(head == 120_001)
        let nothing = AuditFilter(kinds: [.characteristicSet])
        var pages: [(next: UInt64, caughtUp: Bool, count: Int)] = []
        var next: UInt64 = 1
        while true {
            let page = try ledger.audit(nothing, from: next, as: .owner)
            pages.append((page.next, page.caughtUp, page.events.count))
            if page.caughtUp { break }
            next = page.next
        }
        #expect(pages.map(\.next) == [50_001, 100_001, head + 1])
        #expect(pages.map(\.caughtUp) == [false, false, true] && pages.allSatisfy { $0.count == 0 })
    }
}

/// Records group-commit batch sizes.
final class BatchSizes: @unchecked Sendable {
    private let lock = NSLock()
    private var sizes: [Int] = []

    func record(_ size: Int) { lock.withLock { sizes.append(size) } }
    var commits: Int { lock.withLock { sizes.count } }
    var largest: Int { lock.withLock { sizes.max() ?? 0 } }
}
