import Foundation
import HealthModel
import Ledger
import Synchronization
import Testing

/// docs/SEMANTICS.md §6 on the ledger API: requests and decisions as events, share checks, read
/// scopes, per-object selections, source priority, and replay of all of it.
@Suite("Authorization in the ledger")
struct AuthorizationLedgerTests {
    static let heartRate = Fixtures.heartRate.objectType
    static let steps = Fixtures.steps.objectType
    static let app = Principal.app(Fixtures.appA)

    @Test("requests are validated, recorded once, and change the request status")
    func requests() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "requests")
        #expect(try ledger.requestStatus(toShare: [Self.steps], read: [Self.heartRate], for: Self.app) == .shouldRequest)
        #expect(try await ledger.requestAuthorization(toShare: [Self.steps], read: [Self.heartRate, Self.steps], by: Self.app) == 3)
        let head = try ledger.head()
        #expect(try await ledger.requestAuthorization(toShare: [Self.steps], read: [Self.heartRate], by: Self.app) == 0)
        #expect(try ledger.head() == head, "asking again writes nothing")
        #expect(try ledger.requestStatus(toShare: [Self.steps], read: [Self.heartRate], for: Self.app) == .unnecessary)
        #expect(try ledger.requestStatus(toShare: [Self.heartRate], read: [], for: Self.app) == .shouldRequest)

        let refusals: [(Set<ObjectType>, Set<ObjectType>, String)] = [
            ([], [], "nothing requested"),
            ([], [try ObjectType("HKCorrelationTypeIdentifierBloodPressure")], "member types"),
            ([try ObjectType("HKCharacteristicTypeIdentifierDateOfBirth")], [], "read-only"),
            ([], [.visionPrescription], "per object"),
        ]
        for (share, read, message) in refusals {
            let error = await #expect(throws: HealthError.self) { try await ledger.requestAuthorization(toShare: share, read: read, by: Self.app) }
            #expect(error?.code == .invalidArgument && error?.message.contains(message) == true, "\(message)")
        }
        // The owner needs no authorization; the operator gets none.
        await #expect(throws: HealthError.self) { try await ledger.requestAuthorization(toShare: [Self.steps], read: [], by: .owner) }
        let pending = try ledger.pendingAuthorizations(as: .owner)
        #expect(pending.count == 3 && pending.allSatisfy { $0.app == Fixtures.appA && $0.requestedAt != nil })
        #expect(throws: HealthError.self) { try ledger.pendingAuthorizations(as: Self.app) }
    }

    @Test("share status follows the owner's decisions, and saves and deletes obey it")
    func sharing() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "share")
        let sample = Fixtures.heartRate(60, at: 0)
        #expect(try ledger.sharingStatus(for: Self.heartRate, of: Self.app) == .notDetermined)
        let undecided = await #expect(throws: HealthError.self) { try await ledger.save([sample], by: Self.app) }
        #expect(undecided?.code == .authorizationNotDetermined)

        try await ledger.requestAuthorization(toShare: [Self.heartRate], read: [], by: Self.app)
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .share, decision: .denied, by: .owner)
        #expect(try ledger.sharingStatus(for: Self.heartRate, of: Self.app) == .sharingDenied)
        let denied = await #expect(throws: HealthError.self) { try await ledger.save([sample], by: Self.app) }
        #expect(denied?.code == .authorizationDenied)

        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .share, decision: .granted, by: .owner)
        #expect(try ledger.sharingStatus(for: Self.heartRate, of: Self.app) == .sharingAuthorized)
        try await ledger.save([sample], by: Self.app)
        // A batch is all or nothing: one type without authorization refuses the whole save.
        let mixed = [Fixtures.heartRate(61, at: 1), Fixtures.steps(10, from: 0, to: 60)]
        await #expect(throws: HealthError.self) { try await ledger.save(mixed, by: Self.app) }
        #expect(try ledger.object(with: mixed[0].uuid, as: .owner) == nil)

        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .share, decision: .revoked, by: .owner)
        let revoked = await #expect(throws: HealthError.self) { try await ledger.delete([sample.uuid], by: Self.app) }
        #expect(revoked?.code == .authorizationDenied)
        await #expect(throws: HealthError.self) { try await ledger.deleteObjects(of: Self.heartRate, by: Self.app) }
        #expect(try ledger.object(with: sample.uuid, as: .owner) != nil)

        // Decisions are the owner's, on apps the ledger knows, and on types that can be decided.
        await #expect(throws: HealthError.self) {
            try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .read, decision: .granted, by: Self.app)
        }
        let unknown = await #expect(throws: HealthError.self) {
            try await ledger.decideAuthorization(app: "com.example.typo", type: Self.heartRate, direction: .read, decision: .granted, by: .owner)
        }
        #expect(unknown?.code == .noData)
        await #expect(throws: HealthError.self) {
            try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: .visionPrescription, direction: .read, decision: .granted, by: .owner)
        }
    }

    @Test("reads show an app its own objects, everything once it may read, and nothing to the operator")
    func readScopes() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "read")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.heartRate])
        let mine = (0..<5).map { Fixtures.heartRate(60, at: Double($0) * 10) }
        let theirs = (0..<5).map { Fixtures.heartRate(70, at: Double($0) * 10 + 5) }
        try await ledger.save(mine, by: Self.app)
        try await ledger.save(theirs, by: .app(Fixtures.appB))
        let query = SampleQuery(type: Self.heartRate, limit: 3)

        #expect(try ledger.samples(query, as: Self.app).map(\.uuid) == mine.prefix(3).map(\.uuid), "the limit counts only visible objects")
        #expect(try ledger.object(with: theirs[0].uuid, as: Self.app) == nil)
        #expect(try ledger.sampleCursor(SampleQuery(type: Self.heartRate), as: Self.app).next(maxCount: 100, maxBytes: 1 << 20).count == 5)

        try await ledger.requestAuthorization(toShare: [], read: [Self.heartRate], by: Self.app)
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .read, decision: .granted, by: .owner)
        #expect(try ledger.samples(SampleQuery(type: Self.heartRate), as: Self.app).count == 10)
        #expect(try ledger.object(with: theirs[0].uuid, as: Self.app) != nil)

        for read in [{ _ = try ledger.samples(query, as: .operator) }, { _ = try ledger.object(with: mine[0].uuid, as: .operator) }] {
            let error = #expect(throws: HealthError.self) { try read() }
            #expect(error?.code == .authorizationDenied)
        }
    }

    @Test("per-object read: the app reads its own prescriptions and exactly the selected ones")
    func perObject() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "vision")
        try await ledger.authorize([Fixtures.appA], share: [.visionPrescription])
        let owned = (0..<3).map { VisionPrescriptionLedgerTests.glasses(issuedAt: Double($0) * 86_400) }
        try await ledger.save(owned.map { .visionPrescription($0) }, by: .owner)
        let own = VisionPrescriptionLedgerTests.contacts(issuedAt: 0)
        try await ledger.save([.visionPrescription(own)], by: Self.app)
        func visible() throws -> Set<UUID> { Set(try ledger.samples(SampleQuery(type: .visionPrescription), as: Self.app).map(\.uuid)) }
        #expect(try visible() == [own.uuid])

        let interval = DateInterval(start: Fixtures.base.addingTimeInterval(86_400), duration: 2 * 86_400)
        try await ledger.requestObjectReadAuthorization(for: .visionPrescription, overlapping: interval, by: Self.app)
        let request = try #require(try ledger.pendingAuthorizations(as: .owner).first)
        // Every prescription is valid for a year or more, so all overlap the two days asked for.
        #expect(request.direction == .objectRead && Set(request.matching) == Set(owned.map(\.uuid) + [own.uuid]))
        try await ledger.requestObjectReadAuthorization(
            for: .visionPrescription, overlapping: DateInterval(start: Fixtures.base.addingTimeInterval(-86_400), duration: 3_600), by: Self.app)
        #expect(try ledger.pendingAuthorizations(as: .owner).first?.matching == [], "none was issued before the base date")
        try await ledger.requestObjectReadAuthorization(for: .visionPrescription, overlapping: interval, by: Self.app)

        let app = Fixtures.appA.bundleIdentifier
        try await ledger.setObjectReadSelection(app: app, type: .visionPrescription, objects: [owned[1].uuid], by: .owner)
        #expect(try visible() == [own.uuid, owned[1].uuid])
        #expect(try ledger.object(with: owned[2].uuid, as: Self.app) == nil)
        try await ledger.setObjectReadSelection(app: app, type: .visionPrescription, objects: [owned[2].uuid, owned[0].uuid], by: .owner)
        #expect(try visible() == [own.uuid, owned[0].uuid, owned[2].uuid])
        try await ledger.setObjectReadSelection(app: app, type: .visionPrescription, objects: [], by: .owner)
        #expect(try visible() == [own.uuid])
        let missing = await #expect(throws: HealthError.self) {
            try await ledger.setObjectReadSelection(app: app, type: .visionPrescription, objects: [UUID()], by: .owner)
        }
        #expect(missing?.code == .noData)
        let history = try ledger.authorizationHistory(app: app, as: .owner).map(\.action)
        #expect(history.suffix(4) == [
            .requestedObjects(.visionPrescription, start: interval.start, end: interval.end),
            .selectedObjects(.visionPrescription, count: 1), .selectedObjects(.visionPrescription, count: 2),
            .selectedObjects(.visionPrescription, count: 0),
        ])
        #expect(try ledger.replay().identical)
    }

    @Test("source priority: first-save order by default, the owner's order when set")
    func sourcePriority() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "priority")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [Self.steps])
        try await ledger.save([Fixtures.steps(10, from: 0, to: 60)], by: .app(Fixtures.appB))
        try await ledger.save([Fixtures.steps(20, from: 0, to: 60)], by: Self.app)
        try await ledger.save([Fixtures.steps(30, from: 0, to: 60)], by: .owner)
        let owner = Source.owner.bundleIdentifier
        func order() throws -> [String] { try ledger.sourcePriority(for: Self.steps, as: .owner).map(\.bundleIdentifier) }
        #expect(try order() == [Fixtures.appB.bundleIdentifier, Fixtures.appA.bundleIdentifier, owner])
        try await ledger.setSourcePriority(for: Self.steps, bundleIdentifiers: [owner, Fixtures.appA.bundleIdentifier], by: .owner)
        #expect(try order() == [owner, Fixtures.appA.bundleIdentifier, Fixtures.appB.bundleIdentifier])
        let stranger = await #expect(throws: HealthError.self) {
            try await ledger.setSourcePriority(for: Self.steps, bundleIdentifiers: ["com.example.none"], by: .owner)
        }
        #expect(stranger?.code == .noData)
        await #expect(throws: HealthError.self) { try await ledger.setSourcePriority(for: Self.steps, bundleIdentifiers: [owner, owner], by: .owner) }
        #expect(throws: HealthError.self) { try ledger.sourcePriority(for: Self.steps, as: Self.app) }
        #expect(try ledger.replay().identical)
        try await ledger.setSourcePriority(for: Self.steps, bundleIdentifiers: [], by: .owner)
        #expect(try order().first == Fixtures.appB.bundleIdentifier)
    }

    @Test("watchers hear decisions and credential revocations once they are durable")
    func watchers() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "watch")
        let heard = Mutex<[AccessChange]>([])
        let token = ledger.accessWatchers.add { change in heard.withLock { $0.append(change) } }
        let credential = try await ledger.issueCredential(for: Self.app)
        try await ledger.requestAuthorization(toShare: [], read: [Self.heartRate], by: Self.app)
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .read, decision: .granted, by: .owner)
        let id = try #require(CredentialString(credential)?.id)
        try await ledger.revokeCredential(id: id)
        ledger.accessWatchers.remove(token)
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: Self.heartRate, direction: .read, decision: .revoked, by: .owner)
        #expect(heard.withLock { $0 } == [.authorization(app: Fixtures.appA.bundleIdentifier), .credentialRevoked(id: id)])
    }
}
