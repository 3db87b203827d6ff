import Foundation
import HealthLedgerSDK
import Ledger
import Testing

@Suite("Authorization: requests, decisions, statuses and history over the wire", .timeLimit(.minutes(3)))
struct AuthorizationFlowTests {
    static let app = TestServer.appSource.bundleIdentifier

    static func steps(_ count: Double, at offset: TimeInterval) -> HealthObject {
        let date = Samples.base.addingTimeInterval(offset)
        return .quantitySample(QuantitySample(type: try! QuantityType(Types.stepCount.identifier), quantity: try! Quantity(count, "count"), start: date, end: date.addingTimeInterval(60)))
    }

    static func energy(at offset: TimeInterval) -> HealthObject {
        let date = Samples.base.addingTimeInterval(offset)
        return .quantitySample(QuantitySample(type: try! QuantityType(Types.activeEnergy.identifier), quantity: try! Quantity(10, "kcal"), start: date, end: date.addingTimeInterval(60)))
    }

    @Test("an app asks, the owner decides, statuses and the audit trail follow")
    func requestDecisionFlow() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let start = try await owner.authorizationHistory(app: Self.app)
            // TestServer.init: one request (share BodyMass, HeartRate), then two grants.
            #expect(start.map(\.actor) == ["app com.example.walk", "owner", "owner"])
            #expect(start.map(\.action) == [
                .requested(share: [Types.bodyMass, Types.heartRate], read: []),
                .decided(Types.heartRate, .share, .granted), .decided(Types.bodyMass, .share, .granted),
            ])

            // Share statuses before asking.
            #expect(try await app.authorizationStatus(for: Types.heartRate) == .sharingAuthorized)
            #expect(try await app.authorizationStatus(for: Types.stepCount) == .notDetermined)
            #expect(try await owner.authorizationStatus(for: Types.stepCount) == .sharingAuthorized, "the owner shares everything")
            #expect(try await app.getRequestStatusForAuthorization(toShare: [Types.heartRate], read: []) == .unnecessary)
            #expect(try await app.getRequestStatusForAuthorization(toShare: [Types.heartRate], read: [Types.heartRate]) == .shouldRequest)

            // The app asks: three new pairs; asking again asks nothing; a partly new request counts only the new pair.
            #expect(try await app.requestAuthorization(toShare: [Types.stepCount, Types.heartRate], read: [Types.heartRate, Types.stepCount]) == 3)
            #expect(try await app.requestAuthorization(toShare: [Types.stepCount], read: [Types.heartRate, Types.stepCount]) == 0)
            #expect(try await app.getRequestStatusForAuthorization(toShare: [Types.stepCount], read: [Types.heartRate, Types.stepCount]) == .unnecessary)
            #expect(try await app.getRequestStatusForAuthorization(toShare: [], read: [Types.bodyMass]) == .shouldRequest)
            #expect(try await app.requestAuthorization(toShare: [], read: [Types.bodyMass, Types.heartRate, Types.dateOfBirth]) == 2)
            #expect(try await app.getRequestStatusForAuthorization(toShare: [], read: [Types.bodyMass, Types.dateOfBirth]) == .unnecessary)
            // A request is not a decision: still not determined.
            #expect(try await app.authorizationStatus(for: Types.stepCount) == .notDetermined)

            // Invalid requests are refused and record nothing.
            let before = try await owner.authorizationHistory(app: Self.app).count
            await expectRPCError(.invalidArgument, .invalidArgument, "correlation share") {
                _ = try await app.requestAuthorization(toShare: [Types.bloodPressure], read: [])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "correlation read") {
                _ = try await app.requestAuthorization(toShare: [], read: [Types.bloodPressure])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "correlation request status") {
                _ = try await app.getRequestStatusForAuthorization(toShare: [], read: [Types.bloodPressure])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "characteristic share") {
                _ = try await app.requestAuthorization(toShare: [Types.dateOfBirth], read: [])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "vision read by type") {
                _ = try await app.requestAuthorization(toShare: [], read: [Types.vision])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "nothing requested") {
                _ = try await app.requestAuthorization(toShare: [], read: [])
            }
            // A valid pair next to an invalid one is not recorded either.
            await expectRPCError(.invalidArgument, .invalidArgument, "mixed request") {
                _ = try await app.requestAuthorization(toShare: [Types.activeEnergy], read: [Types.bloodPressure])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "the owner does not request") {
                _ = try await owner.requestAuthorization(toShare: [Types.stepCount], read: [])
            }
            #expect(try await owner.authorizationHistory(app: Self.app).count == before)
            #expect(try await app.getRequestStatusForAuthorization(toShare: [Types.activeEnergy], read: []) == .shouldRequest)

            // The owner sees exactly the five pending pairs.
            let pending = try await owner.pendingAuthorizations(app: Self.app)
            #expect(Set(pending.map { "\($0.direction) \($0.type.identifier)" }) == [
                "share \(Types.stepCount.identifier)", "read \(Types.heartRate.identifier)", "read \(Types.stepCount.identifier)",
                "read \(Types.bodyMass.identifier)", "read \(Types.dateOfBirth.identifier)",
            ])
            #expect(pending.count == 5)
            #expect(pending.allSatisfy { $0.isPending && $0.decision == nil && $0.requestedAt != nil && $0.decidedAt == nil })
            #expect(pending.allSatisfy { $0.app == TestServer.appSource })
            #expect(try await owner.pendingAuthorizations(app: "com.example.other").isEmpty)

            // Apps may not use the owner's methods.
            await expectRPCError(.permissionDenied, .authorizationDenied, "pendingAuthorizations") { _ = try await app.pendingAuthorizations() }
            await expectRPCError(.permissionDenied, .authorizationDenied, "authorizations") { _ = try await app.authorizations(app: Self.app) }
            await expectRPCError(.permissionDenied, .authorizationDenied, "authorizationHistory") { _ = try await app.authorizationHistory() }
            await expectRPCError(.permissionDenied, .authorizationDenied, "decideAuthorization") {
                try await app.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .granted)
            }
            await expectRPCError(.permissionDenied, .authorizationDenied, "setObjectReadSelection") {
                try await app.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [])
            }
            await expectRPCError(.permissionDenied, .authorizationDenied, "sourcePriority") { _ = try await app.sourcePriority(for: Types.heartRate) }
            await expectRPCError(.permissionDenied, .authorizationDenied, "setSourcePriority") { try await app.setSourcePriority(for: Types.heartRate, order: []) }
            // The app's own read attempt at deciding did not grant anything.
            #expect(try await owner.pendingAuthorizations(app: Self.app).count == 5)

            // The owner decides.
            try await owner.decideAuthorization(app: Self.app, type: Types.stepCount, direction: .share, decision: .granted)
            try await owner.decideAuthorization(app: Self.app, type: Types.stepCount, direction: .read, decision: .denied)
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .granted)
            try await owner.decideAuthorization(app: Self.app, type: Types.bodyMass, direction: .read, decision: .denied)
            // Repeating the current decision records nothing.
            try await owner.decideAuthorization(app: Self.app, type: Types.heartRate, direction: .read, decision: .granted)
            #expect(try await app.authorizationStatus(for: Types.stepCount) == .sharingAuthorized)
            try await app.save(Self.steps(100, at: 0))
            let pendingNow = try await owner.pendingAuthorizations(app: Self.app)
            #expect(pendingNow.map { "\($0.direction) \($0.type.identifier)" } == ["read \(Types.dateOfBirth.identifier)"])

            // Decisions the ledger refuses.
            await expectRPCError(.invalidArgument, .invalidArgument, "revoke what was denied") {
                try await owner.decideAuthorization(app: Self.app, type: Types.bodyMass, direction: .read, decision: .revoked)
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "decide a correlation") {
                try await owner.decideAuthorization(app: Self.app, type: Types.bloodPressure, direction: .read, decision: .granted)
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "decide vision read by type") {
                try await owner.decideAuthorization(app: Self.app, type: Types.vision, direction: .read, decision: .granted)
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "decide sharing a characteristic") {
                try await owner.decideAuthorization(app: Self.app, type: Types.dateOfBirth, direction: .share, decision: .granted)
            }
            await expectRPCError(.notFound, .noData, "an app nobody knows") {
                try await owner.decideAuthorization(app: "com.example.typo", type: Types.heartRate, direction: .read, decision: .granted)
            }

            // Revoking the share grant: saving and deleting are denied, an undecided type is not determined.
            try await owner.decideAuthorization(app: Self.app, type: Types.stepCount, direction: .share, decision: .revoked)
            #expect(try await app.authorizationStatus(for: Types.stepCount) == .sharingDenied)
            await expectRPCError(.permissionDenied, .authorizationDenied, "save after revoke") { try await app.save(Self.steps(5, at: 120)) }
            await expectRPCError(.permissionDenied, .authorizationDenied, "deleteObjects after revoke") {
                _ = try await app.deleteObjects(of: Types.stepCount)
            }
            await expectRPCError(.permissionDenied, .authorizationNotDetermined, "save of a type never decided") {
                try await app.save(Self.energy(at: 0))
            }
            // Asked but undecided is still not determined.
            _ = try await app.requestAuthorization(toShare: [Types.activeEnergy], read: [])
            await expectRPCError(.permissionDenied, .authorizationNotDetermined, "save of a type asked, undecided") {
                try await app.save(Self.energy(at: 0))
            }
            try await owner.decideAuthorization(app: Self.app, type: Types.activeEnergy, direction: .share, decision: .denied)
            #expect(try await app.authorizationStatus(for: Types.activeEnergy) == .sharingDenied)
            await expectRPCError(.permissionDenied, .authorizationDenied, "save of a denied type") { try await app.save(Self.energy(at: 0)) }
            // One denied type fails the whole save.
            await expectRPCError(.permissionDenied, .authorizationDenied, "mixed save") {
                try await app.save([Samples.heartRate(70, at: 0), Self.energy(at: 0)])
            }
            #expect(try await owner.result(for: SampleQueryDescriptor(type: Types.heartRate)).isEmpty, "the mixed save wrote nothing")

            // The owner's view of every pair.
            let entries = try await owner.authorizations(app: Self.app)
            func decision(_ type: ObjectType, _ direction: AuthorizationDirection) -> AuthorizationDecision?? {
                entries.first { $0.type == type && $0.direction == direction }.map(\.decision)
            }
            #expect(decision(Types.heartRate, .share) == .some(.granted))
            #expect(decision(Types.bodyMass, .share) == .some(.granted))
            #expect(decision(Types.stepCount, .share) == .some(.revoked))
            #expect(decision(Types.stepCount, .read) == .some(.denied))
            #expect(decision(Types.heartRate, .read) == .some(.granted))
            #expect(decision(Types.bodyMass, .read) == .some(.denied))
            #expect(decision(Types.dateOfBirth, .read) == .some(nil))
            #expect(decision(Types.activeEnergy, .share) == .some(.denied))
            #expect(entries.count == 8)
            #expect(entries.filter { $0.decision != nil }.allSatisfy { $0.decidedAt != nil })

            // The audit trail: every request and decision, in order, with its actor.
            let history = try await owner.authorizationHistory(app: Self.app)
            let tail = Array(history.dropFirst(start.count))
            #expect(tail.map(\.actor) == ["app com.example.walk", "app com.example.walk"] + Array(repeating: "owner", count: 5) + ["app com.example.walk", "owner"])
            #expect(tail.map(\.action) == [
                .requested(share: [Types.stepCount], read: [Types.heartRate, Types.stepCount]),
                .requested(share: [], read: [Types.dateOfBirth, Types.bodyMass]),  // by identifier: HKCharacteristic… < HKQuantity…
                .decided(Types.stepCount, .share, .granted),
                .decided(Types.stepCount, .read, .denied),
                .decided(Types.heartRate, .read, .granted),
                .decided(Types.bodyMass, .read, .denied),
                .decided(Types.stepCount, .share, .revoked),
                .requested(share: [Types.activeEnergy], read: []),
                .decided(Types.activeEnergy, .share, .denied),
            ])
            #expect(history.allSatisfy { $0.app == Self.app })
            #expect(zip(history, history.dropFirst()).allSatisfy { $0.sequence < $1.sequence && $0.time <= $1.time })
            #expect(try await owner.authorizationHistory().count == history.count, "one app in the ledger: the whole trail is its")

            await owner.close()
            await app.close()
        }
    }

    @Test("source priority: default order of first save, the owner's order, refusals")
    func sourcePriority() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let (run, runCredential) = try await server.addApp("com.example.run", name: "Run")
            let runner = server.client(runCredential)
            #expect(try await owner.sourcePriority(for: Types.heartRate).isEmpty)
            try await app.save(Samples.heartRate(60, at: 0))
            try await owner.save(Samples.heartRate(61, at: 1))
            try await runner.save(Samples.heartRate(62, at: 2))
            #expect(try await owner.sourcePriority(for: Types.heartRate) == [TestServer.appSource, .owner, run])
            try await owner.setSourcePriority(for: Types.heartRate, order: [run.bundleIdentifier, Source.owner.bundleIdentifier])
            #expect(try await owner.sourcePriority(for: Types.heartRate) == [run, .owner, TestServer.appSource])
            await expectRPCError(.notFound, .noData, "a source that never saved the type") {
                try await owner.setSourcePriority(for: Types.heartRate, order: ["com.example.never"])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "a source twice") {
                try await owner.setSourcePriority(for: Types.heartRate, order: [run.bundleIdentifier, run.bundleIdentifier])
            }
            #expect(try await owner.sourcePriority(for: Types.heartRate) == [run, .owner, TestServer.appSource], "refusals changed nothing")
            try await owner.setSourcePriority(for: Types.heartRate, order: [])
            #expect(try await owner.sourcePriority(for: Types.heartRate) == [TestServer.appSource, .owner, run])
            await owner.close()
            await app.close()
            await runner.close()
        }
    }
}
