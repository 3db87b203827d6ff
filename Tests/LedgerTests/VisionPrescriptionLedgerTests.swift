import Foundation
import HealthModel
import Ledger
import LedgerSchema
import Testing

@Suite("Vision prescriptions in a ledger")
struct VisionPrescriptionLedgerTests {
    static func q(_ value: Double, _ unit: String) -> Quantity { try! Quantity(value, unit) }

    static func glasses(issuedAt offset: TimeInterval = 0, metadata: Metadata = [:]) -> VisionPrescription {
        let issued = Fixtures.base.addingTimeInterval(offset)
        return VisionPrescription(
            type: .glasses, dateIssued: issued, expirationDate: issued.addingTimeInterval(2 * 365 * 86_400), description: "Distance",
            rightEye: .glasses(
                sphere: q(-2.25, "D"), cylinder: q(-0.5, "D"), axis: q(90, "deg"), vertexDistance: q(12, "mm"),
                prism: Prism(amount: q(1.5, "pD"), angle: q(0, "deg"), base: .none, eye: .right), farPupillaryDistance: q(31.5, "mm")),
            leftEye: .glasses(sphere: q(0, "D"), addPower: q(1.25, "D"), nearPupillaryDistance: q(2.9, "cm")),
            device: Device(name: "Phoropter"), metadata: metadata)
    }

    static func contacts(issuedAt offset: TimeInterval = 0) -> VisionPrescription {
        let issued = Fixtures.base.addingTimeInterval(offset)
        return VisionPrescription(
            type: .contacts, dateIssued: issued, expirationDate: issued.addingTimeInterval(365 * 86_400), description: "Acuvue",
            leftEye: .contacts(sphere: q(-1.75, "D"), baseCurve: q(8.6, "mm"), diameter: q(14.2, "mm")))
    }

    @Test("a prescription saves, fetches and queries as it was given")
    func roundTrip() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "eyes")
        let glasses = Self.glasses(issuedAt: 86_400)
        let contacts = Self.contacts()
        let results = try await ledger.save([.visionPrescription(glasses), .visionPrescription(contacts)], by: .owner)
        #expect(results.map(\.disposition) == [.saved, .saved])

        #expect(try ledger.object(with: glasses.uuid, as: .owner) == .visionPrescription(glasses))
        let fetched = try #require(try ledger.object(with: contacts.uuid, as: .owner)?.visionPrescription)
        #expect(fetched == contacts)
        #expect(fetched.rightEye == nil && fetched.leftEye?.baseCurve == Self.q(8.6, "mm"))

        let all = try ledger.samples(SampleQuery(type: .visionPrescription), as: .owner)
        #expect(all.map(\.uuid) == [contacts.uuid, glasses.uuid])
        #expect(all.map(\.startDate) == [contacts.dateIssued, glasses.dateIssued])
        #expect(all.map(\.endDate) == [contacts.expirationDate, glasses.expirationDate])
        // Expiring first: the contacts (one year) before the glasses (two years).
        let byExpiry = try ledger.samples(SampleQuery(type: .visionPrescription, sort: .endDate(ascending: false)), as: .owner)
        #expect(byExpiry.map(\.uuid) == [glasses.uuid, contacts.uuid])
        // Valid on a day in the second year: only the glasses.
        let later = DateInterval(start: Fixtures.base.addingTimeInterval(400 * 86_400), duration: 86_400)
        #expect(try ledger.samples(SampleQuery(type: .visionPrescription, interval: later), as: .owner).map(\.uuid) == [glasses.uuid])
        #expect(try ledger.samples(SampleQuery(type: Fixtures.heartRate.objectType), as: .owner).isEmpty)
    }

    @Test("an app's prescription takes the app's source; an invalid one is refused")
    func appAndInvalid() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "app")
        try await ledger.authorize([Fixtures.appA], share: [.visionPrescription])
        let prescription = Self.glasses()
        _ = try await ledger.save([.visionPrescription(prescription)], by: .app(Fixtures.appA))
        #expect(try ledger.object(with: prescription.uuid, as: .owner)?.sourceRevision.source == Fixtures.appA)

        var wrong = Self.contacts()
        wrong.leftEye?.vertexDistance = Self.q(12, "mm")
        let error = await #expect(throws: HealthError.self) { try await ledger.save([.visionPrescription(wrong)], by: .owner) }
        #expect(error?.code == .invalidArgument && error?.field == "leftEye.vertexDistance")
        #expect(try ledger.object(with: wrong.uuid, as: .owner) == nil)
    }

    @Test("sync identifiers replace prescriptions, and replay equals the live projections")
    func syncAndReplay() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "replay")
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: [.visionPrescription, Fixtures.heartRate.objectType])
        var saved: [UUID] = []
        for round in 0..<6 {
            let sync: Metadata = [MetadataKey.syncIdentifier: .string("rx-\(round % 2)"), MetadataKey.syncVersion: .number(Double(round))]
            let batch: [HealthObject] = [
                .visionPrescription(Self.glasses(issuedAt: Double(round) * 3600, metadata: sync)),
                .visionPrescription(Self.contacts(issuedAt: Double(round) * 3600)),
                Fixtures.heartRate(60 + Double(round), at: Double(round)),
            ]
            _ = try await ledger.save(batch, by: round % 2 == 0 ? .owner : .app(Fixtures.appB))
            saved.append(batch[1].uuid)
        }
        try await ledger.delete([saved[0], saved[3]], by: .owner)
        let stored = try ledger.samples(SampleQuery(type: .visionPrescription), as: .owner)
        // Two live synced glasses (rx-0 version 4, rx-1 version 5) and four contacts.
        #expect(stored.count == 6)
        #expect(stored.compactMap(\.visionPrescription).filter { $0.prescriptionType == .glasses }.compactMap(\.syncVersion).sorted() == [4, 5])

        let report = try ledger.replay()
        #expect(report.identical)
        #expect(report.liveDigest == (try ledger.projectionDigest()))
        #expect(try ledger.verify().isValid)
    }

    @Test("decoding refuses a schema object that breaks the prescription's structure")
    func decoding() throws {
        let prescription = Self.glasses()
        let good = Healthledger_V1_HealthObject(.visionPrescription(prescription))
        #expect(try good.model() == .visionPrescription(prescription))

        func expectRefused(field: String, _ change: (inout Healthledger_V1_HealthObject) -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
            var message = good
            change(&message)
            let error = #expect(throws: HealthError.self, sourceLocation: sourceLocation) { try message.model() }
            #expect(error?.code == .invalidArgument, sourceLocation: sourceLocation)
            #expect(error?.field == field, "message: \(error?.message ?? "")", sourceLocation: sourceLocation)
        }
        expectRefused(field: "type") { $0.type = Fixtures.heartRate.identifier }
        expectRefused(field: "prescriptionType") { $0.visionPrescription.prescriptionType = .unspecified }
        expectRefused(field: "prescriptionType") { $0.visionPrescription.prescriptionType = .UNRECOGNIZED(7) }
        expectRefused(field: "leftEye.sphere") { $0.visionPrescription.leftEye.clearSphere() }
        expectRefused(field: "rightEye.cylinder.unit") { $0.visionPrescription.rightEye.cylinder.unit = "furlong" }
        expectRefused(field: "rightEye.prism.amount") { $0.visionPrescription.rightEye.prism.clearAmount() }
        expectRefused(field: "rightEye.prism.angle") { $0.visionPrescription.rightEye.prism.clearAngle() }
        expectRefused(field: "rightEye.prism.base") { $0.visionPrescription.rightEye.prism.baseDirection = .UNRECOGNIZED(5) }
        expectRefused(field: "rightEye.prism.eye") { $0.visionPrescription.rightEye.prism.eye = .unspecified }
        expectRefused(field: "rightEye.prism.eye") { $0.visionPrescription.rightEye.prism.eye = .UNRECOGNIZED(3) }
    }
}
