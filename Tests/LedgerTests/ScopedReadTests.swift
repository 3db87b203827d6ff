import Foundation
import HealthModel
import LMDB
import TestSupport
import Testing

@testable import Ledger

/// An app that may not read a type reads it through its own source's index (and the
/// objects selected for it) instead of filtering every source's: its answers must be
/// exactly the owner's view narrowed to what it may see, in every order, range and limit.
@Suite("Reads narrowed to the reader's scope")
struct ScopedReadTests {
    static let heartRate = Fixtures.heartRate.objectType
    static let app = Principal.app(Fixtures.appA)

    static let sorts: [SampleSort] = [
        .startDate(ascending: true), .startDate(ascending: false), .endDate(ascending: true), .endDate(ascending: false),
    ]

    /// A sample of `duration` seconds starting `offset` seconds after the base date.
    static func sample(at offset: Double, lasting duration: Double, _ random: inout SplitMix) -> HealthObject {
        let start = Fixtures.base.addingTimeInterval(offset)
        return .quantitySample(QuantitySample(
            type: Fixtures.heartRate, quantity: Quantity(Double.random(in: 40...180, using: &random).rounded(), Fixtures.bpm),
            start: start, end: start.addingTimeInterval(duration)))
    }

    @Test("property: a read-denied app's queries are the owner's, narrowed to its own objects", arguments: [1, 2, 3] as [UInt64])
    func ownObjects(seed: UInt64) async throws {
        var random = SplitMix(state: seed)
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "scoped")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.heartRate])
        // Others' samples are longer than the app's (up to two hours against ten minutes), so
        // a scan bounded by the type's longest sample would start earlier than the app's needs.
        // Several samples share a start date, so ties are broken by UUID.
        var own: [HealthObject] = []
        for round in 0..<3 {
            for principal in [Principal.owner, .app(Fixtures.appB), Self.app] {
                let objects = (0..<60).map { _ in
                    Self.sample(
                        at: Double(Int.random(in: 0..<200, using: &random)) * 60,
                        lasting: principal == Self.app ? Double(Int.random(in: 0...10, using: &random)) * 60 : Double.random(in: 0...7_200, using: &random),
                        &random)
                }
                try await ledger.save(objects, by: principal)
                if principal == Self.app { own += objects }
            }
            // Each source deletes some of its own.
            _ = try await ledger.deleteObjects(
                of: Self.heartRate, overlapping: DateInterval(start: Fixtures.base.addingTimeInterval(Double(round) * 3_000), duration: 300), by: .owner)
        }
        let ownIDs = Set(own.map(\.uuid))

        for _ in 0..<150 {
            let sort = Self.sorts.randomElement(using: &random)!
            var interval: DateInterval?
            if Bool.random(using: &random) {
                let start = Fixtures.base.addingTimeInterval(Double(Int.random(in: -60..<200, using: &random)) * 60)
                interval = DateInterval(start: start, duration: Double(Int.random(in: 0..<120, using: &random)) * 60)
            }
            let limit = Bool.random(using: &random) ? 0 : Int.random(in: 1...25, using: &random)
            let everything = try ledger.samples(SampleQuery(type: Self.heartRate, interval: interval, sort: sort), as: .owner).map(\.uuid)
            let expected = everything.filter(ownIDs.contains)
            let query = SampleQuery(type: Self.heartRate, interval: interval, limit: limit, sort: sort)
            let answer = try ledger.samples(query, as: Self.app).map(\.uuid)
            #expect(answer == Array(limit == 0 ? expected[...] : expected.prefix(limit)), "\(sort) \(String(describing: interval)) limit \(limit)")
        }

        // Deleting by range removes exactly the app's own matching objects.
        let window = DateInterval(start: Fixtures.base.addingTimeInterval(3_600), duration: 3_600)
        let ownInWindow = try ledger.samples(SampleQuery(type: Self.heartRate, interval: window), as: Self.app).map(\.uuid)
        let othersBefore = try ledger.samples(SampleQuery(type: Self.heartRate), as: .owner).map(\.uuid).filter { !ownIDs.contains($0) }
        #expect(!ownInWindow.isEmpty)
        #expect(try await ledger.deleteObjects(of: Self.heartRate, overlapping: window, by: Self.app) == ownInWindow.count)
        #expect(try ledger.samples(SampleQuery(type: Self.heartRate, interval: window), as: Self.app).isEmpty)
        #expect(try ledger.samples(SampleQuery(type: Self.heartRate), as: .owner).map(\.uuid).filter { !ownIDs.contains($0) } == othersBefore)

        // Once it may read, it reads what the owner does.
        try await ledger.requestAuthorization(toShare: [], read: [Self.heartRate], by: Self.app)
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .read, decision: .granted, by: .owner)
        for sort in Self.sorts {
            let query = SampleQuery(type: Self.heartRate, limit: 17, sort: sort)
            #expect(try ledger.samples(query, as: Self.app).map(\.uuid) == ledger.samples(query, as: .owner).map(\.uuid))
        }
        #expect(try ledger.replay().identical)
    }

    @Test("an app that never saved reads nothing, and deletes nothing by range")
    func noSource() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "nosource")
        try await ledger.authorize([Fixtures.appA], share: [Self.heartRate])
        try await ledger.save((0..<10).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
        for sort in Self.sorts {
            #expect(try ledger.samples(SampleQuery(type: Self.heartRate, sort: sort), as: Self.app).isEmpty)
        }
        #expect(try await ledger.deleteObjects(of: Self.heartRate, by: Self.app) == 0)
        #expect(try ledger.samples(SampleQuery(type: Self.heartRate), as: .owner).count == 10)
    }

    @Test("per-object read: the app's own and the selected prescriptions, in every order, range and limit")
    func selectedObjects() async throws {
        var random = SplitMix(state: 7)
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "selected")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [.visionPrescription])
        func prescription() -> VisionPrescription {
            Bool.random(using: &random)
                ? VisionPrescriptionLedgerTests.glasses(issuedAt: Double(Int.random(in: 0..<40, using: &random)) * 86_400)
                : VisionPrescriptionLedgerTests.contacts(issuedAt: Double(Int.random(in: 0..<40, using: &random)) * 86_400)
        }
        let owners = (0..<20).map { _ in prescription() }
        let others = (0..<10).map { _ in prescription() }
        let own = (0..<8).map { _ in prescription() }
        try await ledger.save(owners.map { .visionPrescription($0) }, by: .owner)
        try await ledger.save(others.map { .visionPrescription($0) }, by: .app(Fixtures.appB))
        try await ledger.save(own.map { .visionPrescription($0) }, by: Self.app)
        // Selected: some of the owner's, some of the other app's, one of the app's own, and
        // one the owner then deletes.
        let selected = [owners[0], owners[3], owners[4], owners[11], others[2], others[7], own[1]].map(\.uuid)
        try await ledger.setObjectReadSelection(app: Fixtures.appA.bundleIdentifier, type: .visionPrescription, objects: selected, by: .owner)
        #expect(try await ledger.delete([owners[4].uuid], by: .owner) == 1)
        let visible = Set(own.map(\.uuid) + selected).subtracting([owners[4].uuid])

        for sort in Self.sorts {
            for limit in [0, 1, 3, 8, 13, 100] {
                for interval in [nil, DateInterval(start: Fixtures.base.addingTimeInterval(400 * 86_400), duration: 30 * 86_400)] {
                    let everything = try ledger.samples(SampleQuery(type: .visionPrescription, interval: interval, sort: sort), as: .owner).map(\.uuid)
                    let expected = everything.filter(visible.contains)
                    let answer = try ledger.samples(SampleQuery(type: .visionPrescription, interval: interval, limit: limit, sort: sort), as: Self.app)
                    #expect(answer.map(\.uuid) == Array(limit == 0 ? expected[...] : expected.prefix(limit)), "\(sort) limit \(limit)")
                }
            }
        }
        #expect(try ledger.object(with: owners[3].uuid, as: Self.app) != nil)
        #expect(try ledger.object(with: owners[5].uuid, as: Self.app) == nil)
        #expect(try ledger.object(with: owners[4].uuid, as: Self.app) == nil)
    }

    @Test("workout routes need their own read grant: one for workouts does not cover them")
    func workoutRoutes() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "routes")
        let workout = try ObjectType("HKWorkoutTypeIdentifier")
        let route = try ObjectType("HKWorkoutRouteTypeIdentifier")
        try await ledger.requestAuthorization(toShare: [workout], read: [workout], by: Self.app)
        for direction in [AuthorizationDirection.share, .read] {
            try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: workout, direction: direction, decision: .granted, by: .owner)
        }
        #expect(try ledger.readScope(of: workout, for: Self.app).all)
        #expect(try !ledger.readScope(of: route, for: Self.app).all)
        #expect(try ledger.sharingStatus(for: route, of: Self.app) == .notDetermined)
        #expect(try ledger.requestStatus(toShare: [route], read: [route], for: Self.app) == .shouldRequest)
        #expect(try await ledger.requestAuthorization(toShare: [route], read: [route], by: Self.app) == 2)
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: route, direction: .read, decision: .granted, by: .owner)
        #expect(try ledger.readScope(of: route, for: Self.app).all)
    }

    @Test("a ledger whose projections an earlier layout wrote rebuilds them on opening")
    func layoutUpgrade() async throws {
        let temporary = try TemporaryStore()
        // Written in a function of its own so that the ledger is closed when it returns.
        func writeLayoutOne() async throws -> (digest: [UInt8], own: [UUID]) {
            let ledger = try temporary.ledgerStore.createLedger(id: "upgrade")
            try await ledger.authorize([Fixtures.appA], share: [Self.heartRate])
            let own = (0..<20).map { Fixtures.heartRate(60, at: Double($0) * 60) }
            try await ledger.save((0..<50).map { Fixtures.heartRate(70, at: Double($0) * 30) }, by: .owner)
            try await ledger.save(own, by: Self.app)
            _ = try await ledger.delete([own[3].uuid], by: Self.app)
            let digest = try ledger.projectionDigest()
            #expect(try ledger.read { try ProjectionLayout.recorded(in: $0) } == ProjectionLayout.current)

            // Layout 1: no by_source, 8-byte objects entries (the save's sequence only) and
            // 8-byte type_sources entries (the first save only), no layout record.
            try ledger.environment.write { txn in
                let databases = ledger.databases
                try txn.removeAll(in: databases.bySource)
                for database in [databases.objects, databases.typeSources] {
                    var entries: [([UInt8], [UInt8])] = []
                    try txn.withCursor(on: database) { cursor in
                        var entry = try cursor.first()
                        while let current = entry {
                            entries.append((Array(current.key), Array(current.value.prefix(8))))
                            entry = try cursor.next()
                        }
                    }
                    for (key, value) in entries { try txn.put(value, forKey: key, in: database) }
                }
                _ = try txn.delete(ProjectionLayout.key, in: databases.meta)
            }
            #expect(try ledger.projectionDigest() != digest)
            return (digest, own.map(\.uuid).filter { $0 != own[3].uuid })
        }
        let (digest, expected) = try await writeLayoutOne()
        temporary.close()

        let reopened = try temporary.reopen().ledger("upgrade")
        #expect(try reopened.projectionDigest() == digest, "the rebuilt projections are the ones the current layout writes")
        #expect(try reopened.read { try ProjectionLayout.recorded(in: $0) } == ProjectionLayout.current)
        #expect(try reopened.samples(SampleQuery(type: Self.heartRate), as: Self.app).map(\.uuid) == expected)
        #expect(try reopened.replay().identical)
    }
}
