import Foundation
import HealthModel
import LMDB
import LedgerSchema
import Synchronization
import TestSupport
import Testing

@testable import Ledger

/// Anchored object queries (docs/SEMANTICS.md §7) and what they show each reader (§6).
@Suite("Anchored object queries")
struct ChangeQueryTests {
    static let heartRate = Fixtures.heartRate.objectType
    static let app = Principal.app(Fixtures.appA)
    static let other = Principal.app(Fixtures.appB)

    /// Applies pages to a mirror of the reader's view, failing on a change seen twice.
    struct Mirror {
        var objects: [UUID: HealthObject] = [:]
        var anchor: QueryAnchor?

        mutating func follow(_ ledger: Ledger, as principal: Principal, type: ObjectType, limit: Int) throws -> [(count: Int, hasMore: Bool)] {
            var pages: [(Int, Bool)] = []
            while true {
                let page = try ledger.changes(ChangeQuery(type: type, anchor: anchor, limit: limit), as: principal)
                for object in page.added {
                    #expect(objects[object.uuid] == nil, "\(object.uuid) added twice")
                    objects[object.uuid] = object
                }
                for deleted in page.deleted { objects[deleted.uuid] = nil }
                anchor = page.anchor
                pages.append((page.count, page.hasMore))
                #expect(limit == 0 || page.count <= limit)
                if !page.hasMore { return pages }
            }
        }
    }

    @Test("added objects, tombstones with sync identifiers, and nothing again after the new anchor")
    func addedAndDeleted() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "changes")
        let samples = (0..<6).map { Fixtures.heartRate(Double(60 + $0), at: Double($0) * 60) }
        try await ledger.save(samples, by: .owner)
        try await ledger.save([Fixtures.weight(70, syncIdentifier: "w", version: 1)], by: .owner)
        _ = try await ledger.delete([samples[1].uuid, samples[4].uuid], by: .owner)

        let first = try ledger.changes(ChangeQuery(type: Self.heartRate), as: .owner)
        #expect(first.added.map(\.uuid) == [0, 2, 3, 5].map { samples[$0].uuid })
        #expect(first.deleted.map(\.uuid) == [samples[1].uuid, samples[4].uuid])
        #expect(!first.hasMore)
        #expect(try ledger.changes(ChangeQuery(type: Self.heartRate, anchor: first.anchor), as: .owner).count == 0)

        // A higher sync version replaces the stored object: its tombstone keeps the identifier.
        let weight = Fixtures.bodyMass.objectType
        let before = try ledger.changes(ChangeQuery(type: weight), as: .owner)
        let replacement = Fixtures.weight(71, syncIdentifier: "w", version: 2)
        try await ledger.save([replacement], by: .owner)
        let after = try ledger.changes(ChangeQuery(type: weight, anchor: before.anchor), as: .owner)
        #expect(after.added.map(\.uuid) == [replacement.uuid])
        #expect(after.deleted == [DeletedObject(uuid: before.added[0].uuid, syncIdentifier: "w", syncVersion: 1)])

        // The interval narrows added objects; deletions are reported whatever their dates.
        let late = DateInterval(start: Fixtures.base.addingTimeInterval(150), duration: 3_600)
        let narrowed = try ledger.changes(ChangeQuery(type: Self.heartRate, interval: late), as: .owner)
        #expect(narrowed.added.map(\.uuid) == [3, 5].map { samples[$0].uuid })
        #expect(narrowed.deleted.count == 2)
    }

    @Test("pages chained by anchor neither skip nor repeat a change, for the owner and a read-denied app", arguments: [7, 8] as [UInt64])
    func paging(seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "paging")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.heartRate])
        var owner = Mirror()
        var app = Mirror()
        for _ in 0..<25 {
            for principal in [Principal.owner, Self.app, Self.other] where Bool.random(using: &random) {
                let count = Int.random(in: 1...30, using: &random)
                try await ledger.save((0..<count).map { _ in Fixtures.heartRate(70, at: Double(Int.random(in: 0..<500, using: &random)) * 60) }, by: principal)
            }
            if Bool.random(using: &random) {
                let start = Fixtures.base.addingTimeInterval(Double(Int.random(in: 0..<500, using: &random)) * 60)
                _ = try await ledger.deleteObjects(of: Self.heartRate, overlapping: DateInterval(start: start, duration: 1_800), by: Bool.random(using: &random) ? .owner : Self.app)
            }
            _ = try owner.follow(ledger, as: .owner, type: Self.heartRate, limit: Int.random(in: 0...12, using: &random))
            _ = try app.follow(ledger, as: Self.app, type: Self.heartRate, limit: Int.random(in: 0...12, using: &random))
            let everything = try ledger.samples(SampleQuery(type: Self.heartRate), as: .owner)
            #expect(Set(owner.objects.keys) == Set(everything.map(\.uuid)))
            let own = try ledger.samples(SampleQuery(type: Self.heartRate), as: Self.app)
            #expect(Set(app.objects.keys) == Set(own.map(\.uuid)))
        }
    }

    @Test("a reader of every source gets each source's changes merged in commit order, in pages of any size", arguments: [3, 4] as [UInt64])
    func mergedSources(seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "merged")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.heartRate])
        // What each source saves and deletes, in the order the ledger commits it.
        var saved: [UUID] = []
        var deleted: [UUID] = []
        for _ in 0..<30 {
            let principal = [Principal.owner, Self.app, Self.other][Int.random(in: 0..<3, using: &random)]
            let objects = (0..<Int.random(in: 1...6, using: &random)).map { _ in Fixtures.heartRate(70, at: Double(Int.random(in: 0..<300, using: &random)) * 60) }
            try await ledger.save(objects, by: principal)
            saved += objects.map(\.uuid)
            if Bool.random(using: &random), let victim = saved.filter({ !deleted.contains($0) }).randomElement(using: &random) {
                _ = try await ledger.delete([victim], by: .owner)
                deleted.append(victim)
            }
        }
        let expectedAdded = saved.filter { !deleted.contains($0) }
        for limit in [0, 1, 4, 17] {
            var (added, gone): ([UUID], [UUID]) = ([], [])
            var anchor: QueryAnchor?
            repeat {
                let page = try ledger.changes(ChangeQuery(type: Self.heartRate, anchor: anchor, limit: limit), as: .owner)
                added += page.added.map(\.uuid)
                gone += page.deleted.map(\.uuid)
                anchor = page.anchor
                if !page.hasMore { break }
            } while true
            #expect(added == expectedAdded, "limit \(limit)")
            #expect(gone == deleted, "limit \(limit)")
            // The latest anchor is past every source's last change.
            let latest = try ledger.latestAnchor(for: [Self.heartRate], as: .owner)
            #expect(try ledger.changes(ChangeQuery(type: Self.heartRate, anchor: latest), as: .owner).count == 0)
            #expect(try ledger.changes(ChangeQuery(type: Self.heartRate, anchor: anchor), as: .owner).count == 0)
        }
        // A change after the latest anchor, by whichever source, is the only one found.
        let latest = try ledger.latestAnchor(for: [Self.heartRate], as: .owner)
        let late = Fixtures.heartRate(75, at: 30)
        try await ledger.save([late], by: Self.other)
        #expect(try ledger.changes(ChangeQuery(type: Self.heartRate, anchor: latest), as: .owner).added.map(\.uuid) == [late.uuid])
    }

    @Test("a read-denied app's pages are the same whether or not others saved and deleted data")
    func deniedPagesRevealNothing() async throws {
        var random = SplitMix(state: 11)
        let crowdedStore = try TemporaryStore()
        let aloneStore = try TemporaryStore()
        let crowded = try crowdedStore.ledgerStore.createLedger(id: "crowded")
        let alone = try aloneStore.ledgerStore.createLedger(id: "alone")
        for ledger in [crowded, alone] { try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.heartRate]) }
        var crowdedMirror = Mirror()
        var aloneMirror = Mirror()
        for round in 0..<10 {
            let own = (0..<Int.random(in: 1...20, using: &random)).map { Fixtures.heartRate(70, at: Double(round * 100 + $0) * 60) }
            for ledger in [crowded, alone] { try await ledger.save(own, by: Self.app) }
            try await crowded.save((0..<40).map { Fixtures.heartRate(80, at: Double(round * 100 + $0) * 60) }, by: .owner)
            try await crowded.save((0..<40).map { Fixtures.heartRate(90, at: Double(round * 100 + $0) * 60) }, by: Self.other)
            if round % 3 == 2 {
                let window = DateInterval(start: Fixtures.base.addingTimeInterval(Double(round * 100) * 60), duration: 300)
                _ = try await crowded.deleteObjects(of: Self.heartRate, overlapping: window, by: .owner)
                _ = try await alone.deleteObjects(of: Self.heartRate, overlapping: window, by: .owner)
            }
            let limit = Int.random(in: 0...7, using: &random)
            let crowdedPages = try crowdedMirror.follow(crowded, as: Self.app, type: Self.heartRate, limit: limit)
            let alonePages = try aloneMirror.follow(alone, as: Self.app, type: Self.heartRate, limit: limit)
            #expect(crowdedPages.map(\.count) == alonePages.map(\.count))
            #expect(crowdedPages.map(\.hasMore) == alonePages.map(\.hasMore))
            #expect(Set(crowdedMirror.objects.keys) == Set(aloneMirror.objects.keys))
        }
        #expect(crowdedMirror.anchor?.bytes.count == aloneMirror.anchor?.bytes.count)
    }

    @Test("per-object reads: selected prescriptions appear, deselected and deleted ones go, each once")
    func selection() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "eyes")
        try await ledger.authorize([Fixtures.appA], share: [.visionPrescription])
        let owned = (0..<3).map { VisionPrescriptionLedgerTests.glasses(issuedAt: Double($0) * 86_400) }
        try await ledger.save(owned.map(HealthObject.visionPrescription), by: .owner)
        let mine = VisionPrescriptionLedgerTests.contacts()
        try await ledger.save([.visionPrescription(mine)], by: Self.app)
        let bundle = Fixtures.appA.bundleIdentifier
        var mirror = Mirror()

        func step(added: [UUID], deleted: [UUID]) throws {
            let page = try ledger.changes(ChangeQuery(type: .visionPrescription, anchor: mirror.anchor), as: Self.app)
            #expect(page.added.map(\.uuid) == added)
            #expect(page.deleted.map(\.uuid) == deleted)
            for object in page.added { mirror.objects[object.uuid] = object }
            for gone in page.deleted { mirror.objects[gone.uuid] = nil }
            mirror.anchor = page.anchor
            let readable = try ledger.samples(SampleQuery(type: .visionPrescription), as: Self.app).map(\.uuid)
            #expect(Set(mirror.objects.keys) == Set(readable))
        }

        try step(added: [mine.uuid], deleted: [])
        try await ledger.setObjectReadSelection(app: bundle, type: .visionPrescription, objects: [owned[0].uuid, owned[1].uuid], by: .owner)
        try step(added: [owned[0].uuid, owned[1].uuid].sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }, deleted: [])
        try step(added: [], deleted: [])
        // Selecting the app's own object changes nothing it sees.
        try await ledger.setObjectReadSelection(app: bundle, type: .visionPrescription, objects: [owned[1].uuid, owned[2].uuid, mine.uuid], by: .owner)
        try step(added: [owned[2].uuid], deleted: [owned[0].uuid])
        _ = try await ledger.delete([owned[2].uuid], by: .owner)
        try step(added: [], deleted: [owned[2].uuid])
        // Deselecting an object already deleted reports nothing more.
        try await ledger.setObjectReadSelection(app: bundle, type: .visionPrescription, objects: [owned[1].uuid], by: .owner)
        try step(added: [], deleted: [])
        // Reselecting a deselected one adds it again.
        try await ledger.setObjectReadSelection(app: bundle, type: .visionPrescription, objects: [owned[0].uuid, owned[1].uuid], by: .owner)
        try step(added: [owned[0].uuid], deleted: [])

        // From the beginning: what it may read now, and the prescriptions it lost along the way.
        let fresh = try ledger.changes(ChangeQuery(type: .visionPrescription), as: Self.app)
        #expect(Set(fresh.added.map(\.uuid)) == [mine.uuid, owned[0].uuid, owned[1].uuid])
        #expect(fresh.deleted.map(\.uuid) == [owned[2].uuid])
        #expect(try ledger.replay().identical)
    }

    @Test("one selection changes several objects at one sequence: pages of one or two split it without skipping or repeating")
    func selectionSplitAcrossPages() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "split")
        try await ledger.authorize([Fixtures.appA], share: [.visionPrescription])
        let owned = (0..<7).map { VisionPrescriptionLedgerTests.glasses(issuedAt: Double($0) * 86_400) }
        try await ledger.save(owned.map(HealthObject.visionPrescription), by: .owner)
        try await ledger.setObjectReadSelection(app: Fixtures.appA.bundleIdentifier, type: .visionPrescription, objects: owned.map(\.uuid), by: .owner)
        let inOrder = owned.map(\.uuid).sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
        for limit in [1, 2, 3] {
            var mirror = Mirror()
            var seen: [UUID] = []
            repeat {
                let page = try ledger.changes(ChangeQuery(type: .visionPrescription, anchor: mirror.anchor, limit: limit), as: Self.app)
                seen += page.added.map(\.uuid)
                mirror.anchor = page.anchor
                if !page.hasMore { break }
            } while true
            #expect(seen == inOrder, "limit \(limit)")
        }
    }

    @Test("change positions order by sequence, then by UUID bytes; no UUID comes first")
    func positionOrder() {
        var random = SplitMix(state: 3)
        func uuid() -> [UInt8] {
            // Few distinct values per byte, so equal prefixes and equal UUIDs occur.
            (0..<16).map { _ in UInt8.random(in: 0...2, using: &random) * 127 }
        }
        let positions = (0..<400).map { index in
            ChangePosition(sequence: UInt64.random(in: 1...3, using: &random), uuid: index % 10 == 0 ? [] : uuid())
        }
        for a in positions {
            #expect(ChangePosition(sequence: a.sequence, uuid: a.uuid) == a)
            for b in positions.prefix(100) {
                let expected = a.sequence != b.sequence ? a.sequence < b.sequence : a.uuid.lexicographicallyPrecedes(b.uuid)
                #expect((a < b) == expected)
                #expect((a == b) == (a.sequence == b.sequence && a.uuid == b.uuid))
            }
        }
    }

    @Test("after a read grant an anchor catches up on what became readable; after a revocation, on what no longer is", arguments: [0, 1, 2])
    func scopeChanges(limit: Int) async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "scope-changes")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.heartRate])
        try await ledger.requestAuthorization(toShare: [], read: [Self.heartRate], by: Self.app)
        var mirror = Mirror()
        func check() throws {
            _ = try mirror.follow(ledger, as: Self.app, type: Self.heartRate, limit: limit)
            let readable = try ledger.samples(SampleQuery(type: Self.heartRate), as: Self.app).map(\.uuid)
            #expect(Set(mirror.objects.keys) == Set(readable), "limit \(limit)")
        }
        try await ledger.save((0..<3).map { Fixtures.heartRate(80, at: Double($0)) }, by: .owner)
        try await ledger.save((0..<2).map { Fixtures.heartRate(70, at: Double(10 + $0)) }, by: Self.app)
        try await ledger.save([Fixtures.heartRate(90, at: 20)], by: Self.other)
        try check()
        #expect(mirror.objects.count == 2)

        let bundle = Fixtures.appA.bundleIdentifier
        try await ledger.decideAuthorization(app: bundle, type: Self.heartRate, direction: .read, decision: .granted, by: .owner)
        try check()
        #expect(mirror.objects.count == 6, "the owner's and the other app's samples arrive, the app's own are not sent twice")
        try await ledger.save([Fixtures.heartRate(81, at: 30)], by: .owner)
        let deleted = try #require(try ledger.samples(SampleQuery(type: Self.heartRate), as: .owner).first)
        _ = try await ledger.delete([deleted.uuid], by: .owner)
        try check()

        try await ledger.decideAuthorization(app: bundle, type: Self.heartRate, direction: .read, decision: .revoked, by: .owner)
        try check()
        #expect(mirror.objects.count == 2, "the others' samples are reported gone")
        try await ledger.save([Fixtures.heartRate(82, at: 40)], by: .owner)
        try await ledger.save([Fixtures.heartRate(71, at: 41)], by: Self.app)
        try check()
        // Granted again, from an anchor taken mid-way (the boundary is kept across pages).
        try await ledger.decideAuthorization(app: bundle, type: Self.heartRate, direction: .read, decision: .granted, by: .owner)
        try check()
        #expect(Set(mirror.objects.keys) == Set(try ledger.samples(SampleQuery(type: Self.heartRate), as: .owner).map(\.uuid)))
    }

    @Test("a deselected prescription deleted later reports no sync identifier: the deletion stays hidden")
    func deselectedThenDeleted() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "hidden-deletion")
        try await ledger.authorize([Fixtures.appA], share: [.visionPrescription])
        let synced = VisionPrescriptionLedgerTests.glasses(metadata: [MetadataKey.syncIdentifier: .string("rx-1"), MetadataKey.syncVersion: .number(1)])
        try await ledger.save([.visionPrescription(synced)], by: .owner)
        let bundle = Fixtures.appA.bundleIdentifier
        try await ledger.setObjectReadSelection(app: bundle, type: .visionPrescription, objects: [synced.uuid], by: .owner)
        let seen = try ledger.changes(ChangeQuery(type: .visionPrescription), as: Self.app)
        #expect(seen.added.map(\.uuid) == [synced.uuid])
        try await ledger.setObjectReadSelection(app: bundle, type: .visionPrescription, objects: [], by: .owner)
        let before = try ledger.changes(ChangeQuery(type: .visionPrescription, anchor: seen.anchor), as: Self.app)
        #expect(before.deleted == [DeletedObject(uuid: synced.uuid)])
        _ = try await ledger.delete([synced.uuid], by: .owner)
        #expect(try ledger.changes(ChangeQuery(type: .visionPrescription, anchor: seen.anchor), as: Self.app).deleted == [DeletedObject(uuid: synced.uuid)])
        #expect(try ledger.changes(ChangeQuery(type: .visionPrescription, anchor: before.anchor), as: Self.app).count == 0)
        // The owner sees the real deletion, with its sync identifier.
        #expect(try ledger.changes(ChangeQuery(type: .visionPrescription), as: .owner).deleted
            == [DeletedObject(uuid: synced.uuid, syncIdentifier: "rx-1", syncVersion: 1)])
    }

    @Test("anchors are sealed: refused from another ledger, for another type, or damaged")
    func anchors() async throws {
        let temporary = try TemporaryStore()
        let one = try temporary.ledgerStore.createLedger(id: "one")
        let two = try temporary.ledgerStore.createLedger(id: "two")
        try await one.save([Fixtures.heartRate(60, at: 0)], by: .owner)
        let anchor = try one.changes(ChangeQuery(type: Self.heartRate), as: .owner).anchor
        #expect(try one.changes(ChangeQuery(type: Self.heartRate), as: .owner).anchor != anchor, "a fresh nonce each time")

        func refused(_ ledger: Ledger, _ type: ObjectType, _ anchor: QueryAnchor) {
            #expect {
                try ledger.changes(ChangeQuery(type: type, anchor: anchor), as: .owner)
            } throws: { ($0 as? HealthError)?.code == .invalidArgument }
        }
        refused(two, Self.heartRate, anchor)
        refused(one, Fixtures.steps.objectType, anchor)
        var flipped = anchor
        flipped.bytes[20] ^= 1
        refused(one, Self.heartRate, flipped)
        refused(one, Self.heartRate, QueryAnchor(bytes: [1, 2, 3]))
        refused(one, Self.heartRate, QueryAnchor(bytes: Array(repeating: 7, count: 4096)))
        // The operator reads no health data, changes included.
        #expect { try one.changes(ChangeQuery(type: Self.heartRate), as: .operator) } throws: { ($0 as? HealthError)?.code == .authorizationDenied }
        #expect { try one.latestAnchor(for: Self.heartRate, as: .operator) } throws: { ($0 as? HealthError)?.code == .authorizationDenied }
        // The key survives reopening: old anchors stay valid.
        temporary.close()
        let reopened = try temporary.reopen().ledger("one")
        #expect(try reopened.changes(ChangeQuery(type: Self.heartRate, anchor: anchor), as: .owner).count == 0)
    }

    @Test("a ledger from layout 2 (no per-source change index, bare selections) is rebuilt on opening")
    func layoutTwoUpgrade() async throws {
        let temporary = try TemporaryStore()
        func writeLayoutTwo() async throws -> [UInt8] {
            let ledger = try temporary.ledgerStore.createLedger(id: "two")
            try await ledger.authorize([Fixtures.appA], share: [Self.heartRate, .visionPrescription])
            try await ledger.save((0..<5).map { Fixtures.heartRate(60, at: Double($0)) }, by: Self.app)
            let prescription = VisionPrescriptionLedgerTests.glasses()
            try await ledger.save([.visionPrescription(prescription)], by: .owner)
            try await ledger.setObjectReadSelection(app: Fixtures.appA.bundleIdentifier, type: .visionPrescription, objects: [prescription.uuid], by: .owner)
            let digest = try ledger.projectionDigest()
            try ledger.environment.write { txn in
                let databases = ledger.databases
                try txn.removeAll(in: databases.sourceChanges)
                var keys: [[UInt8]] = []
                try txn.withCursor(on: databases.objectReads) { cursor in
                    var entry = try cursor.first()
                    while let current = entry {
                        keys.append(Array(current.key))
                        entry = try cursor.next()
                    }
                }
                for key in keys { try txn.put([], forKey: key, in: databases.objectReads) }
                try txn.put([0, 0, 0, 2], forKey: ProjectionLayout.key, in: databases.meta)
            }
            return digest
        }
        let digest = try await writeLayoutTwo()
        temporary.close()
        let reopened = try temporary.reopen().ledger("two")
        #expect(try reopened.projectionDigest() == digest)
        #expect(try reopened.changes(ChangeQuery(type: Self.heartRate), as: Self.app).added.count == 5)
        #expect(try reopened.changes(ChangeQuery(type: .visionPrescription), as: Self.app).added.count == 1)
    }

    @Test("observers' checks: the latest anchor, changes after it, and commit notifications per type")
    func observing() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "observed")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.heartRate])
        try await ledger.save((0..<5).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
        let notified = Mutex(0)
        let token = ledger.changeWatchers.add(type: Self.heartRate) { notified.withLock { $0 += 1 } }
        defer { ledger.changeWatchers.remove(token) }

        let ownerAnchor = try ledger.latestAnchor(for: Self.heartRate, as: .owner)
        let appAnchor = try ledger.latestAnchor(for: Self.heartRate, as: Self.app)
        #expect(try !ledger.hasChanges(ChangeQuery(type: Self.heartRate, anchor: ownerAnchor), as: .owner).changed)
        try await ledger.save([Fixtures.heartRate(61, at: 10)], by: Self.other)
        #expect(notified.withLock { $0 } == 1)
        let (changed, next) = try ledger.hasChanges(ChangeQuery(type: Self.heartRate, anchor: ownerAnchor), as: .owner)
        #expect(changed)
        #expect(try !ledger.hasChanges(ChangeQuery(type: Self.heartRate, anchor: next), as: .owner).changed)
        #expect(try !ledger.hasChanges(ChangeQuery(type: Self.heartRate, anchor: appAnchor), as: Self.app).changed, "another source's save")
        try await ledger.save([Fixtures.heartRate(62, at: 20)], by: Self.app)
        #expect(try ledger.hasChanges(ChangeQuery(type: Self.heartRate, anchor: appAnchor), as: Self.app).changed)
        let outside = DateInterval(start: Fixtures.base.addingTimeInterval(3_600), duration: 60)
        #expect(try !ledger.hasChanges(ChangeQuery(type: Self.heartRate, interval: outside, anchor: appAnchor), as: Self.app).changed)

        try await ledger.save([Fixtures.steps(10, from: 0, to: 60)], by: .owner)
        #expect(notified.withLock { $0 } == 2, "another type's commit is not announced")
    }
}

@Suite("Callbacks told of commits")
struct CommitCallbackTests {
    /// A closure kept bare in a `Mutex` came back from each `withLock` wrapped twice more, so
    /// the store's note of every commit ran two frames deeper at each commit (thousands after a
    /// few seconds of single saves, until the committing thread's stack would have run out).
    @Test("the store's note of each commit runs at the same stack depth at every commit")
    func sameDepthAtEveryCommit() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "alice")
        let depths = Mutex<[Int]>([])
        let note = try #require(ledger.changeWatchers.storeNote.withLock { $0 }, "the store notes the ledger's commits")
        ledger.changeWatchers.storeNote.withLock {
            $0 = Callback { _ in
                depths.withLock { $0.append(Thread.callStackReturnAddresses.count) }
                note.call(())
            }
        }
        for index in 0..<100 { _ = try await ledger.save([Fixtures.heartRate(60, at: Double(index))], by: .owner) }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 100 && Set(seen).count == 1, "depths from \(seen.min() ?? 0) to \(seen.max() ?? 0)")
    }
}
