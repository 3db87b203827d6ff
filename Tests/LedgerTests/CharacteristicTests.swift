import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf
import Testing

@testable import Ledger

@Suite("Characteristics")
struct CharacteristicTests {
    static let app = Principal.app(Fixtures.appA)
    static let all: [ObjectType] = [.dateOfBirth, .biologicalSex, .bloodType, .fitzpatrickSkinType, .wheelchairUse, .activityMoveMode]

    @Test("the owner sets and clears them, each change an event; apps read them only with read authorization")
    func setAndRead() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "facts")
        try await ledger.authorize([Fixtures.appA], share: [Fixtures.heartRate.objectType])
        #expect(try ledger.characteristics(Self.all, as: .owner) == Array(repeating: nil, count: 6))

        let head = try ledger.head().sequence
        try await ledger.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: 1984, month: 2, day: 29), by: .owner)
        try await ledger.setCharacteristic(of: .bloodType, to: .bloodType(.oNegative), by: .owner)
        try await ledger.setCharacteristic(of: .bloodType, to: .bloodType(.oNegative), by: .owner)
        try await ledger.setCharacteristic(of: .wheelchairUse, to: .wheelchairUse(.no), by: .owner)
        try await ledger.setCharacteristic(of: .wheelchairUse, to: nil, by: .owner)
        try await ledger.setCharacteristic(of: .biologicalSex, to: .biologicalSex(.notSet), by: .owner)
        #expect(try ledger.head().sequence == head + 4, "repeating the current value records nothing")
        let events = try ledger.events(from: head + 1)
        #expect(events.map(\.kind) == Array(repeating: .characteristicSet, count: 4))
        let sentences = try ledger.audit(AuditFilter(fromSequence: head + 1), as: .owner).events.map(\.sentence)
        #expect(sentences == [
            "DateOfBirth was set to 1984-02-29 by the owner", "BloodType was set to oNegative by the owner", "WheelchairUse was set to no by the owner",
            "WheelchairUse was cleared by the owner",
        ])

        let expected: [Characteristic?] = [.dateOfBirth(year: 1984, month: 2, day: 29), nil, .bloodType(.oNegative), nil, nil, nil]
        #expect(try ledger.characteristics(Self.all, as: .owner) == expected)
        // An app without read authorization: exactly as if nothing were set.
        #expect(try ledger.characteristics(Self.all, as: Self.app) == Array(repeating: nil, count: 6))
        try await ledger.requestAuthorization(toShare: [], read: [.dateOfBirth, .bloodType], by: Self.app)
        #expect(try ledger.characteristics(Self.all, as: Self.app) == Array(repeating: nil, count: 6), "requested is not granted")
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: .bloodType, direction: .read, decision: .granted, by: .owner)
        #expect(try ledger.characteristics(Self.all, as: Self.app) == [nil, nil, .bloodType(.oNegative), nil, nil, nil])
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: .bloodType, direction: .read, decision: .revoked, by: .owner)
        #expect(try ledger.characteristics([.bloodType], as: Self.app) == [nil])

        #expect(try ledger.replay().identical)
        temporary.close()
        let reopened = try temporary.reopen().ledger("facts")
        #expect(try reopened.characteristics(Self.all, as: .owner) == expected)
    }

    @Test("bad values, other principals and other types are refused, writing nothing")
    func refusals() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "refusals")
        let head = try ledger.head()
        func refused(_ code: HealthError.Code, _ body: () async throws -> Void) async {
            await #expect { try await body() } throws: { ($0 as? HealthError)?.code == code }
        }
        for (year, month, day) in [(1984, 2, 30), (1983, 2, 29), (1800, 1, 1), (2100, 1, 1), (1984, 13, 1), (1984, 0, 10)] {
            await refused(.invalidArgument) { try await ledger.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: year, month: month, day: day), by: .owner) }
        }
        await refused(.invalidArgument) { try await ledger.setCharacteristic(of: .bloodType, to: .biologicalSex(.male), by: .owner) }
        await refused(.invalidArgument) { try await ledger.setCharacteristic(of: Fixtures.heartRate.objectType, to: nil, by: .owner) }
        await refused(.authorizationDenied) { try await ledger.setCharacteristic(of: .bloodType, to: .bloodType(.aPositive), by: Self.app) }
        await refused(.authorizationDenied) { try await ledger.setCharacteristic(of: .bloodType, to: .bloodType(.aPositive), by: .operator) }
        await refused(.authorizationDenied) { _ = try ledger.characteristics([.bloodType], as: .operator) }
        await refused(.invalidArgument) { _ = try ledger.characteristics([Fixtures.heartRate.objectType], as: .owner) }
        #expect(throws: HealthError.self) { try Characteristic(.bloodType, rawValue: 9) }
        #expect(throws: HealthError.self) { try Characteristic(.dateOfBirth, rawValue: 1) }
        #expect(throws: HealthError.self) { try Healthledger_V1_Characteristic.with { $0.type = ObjectType.bloodType.identifier; $0.year = 1990 }.model() }
        #expect(try ledger.head() == head)
    }
}
