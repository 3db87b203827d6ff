import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Medications and their doses over RPC, the CLI and import", .timeLimit(.minutes(3)))
struct MedicationRPCTests {
    static let ibuprofen = MedicationConcept(
        identifier: "rx-5640", displayText: "Ibuprofen 200 mg", generalForm: .tablet,
        relatedCodings: [ClinicalCoding(system: "http://www.nlm.nih.gov/research/umls/rxnorm", code: "5640")])
    static let insulin = MedicationConcept(identifier: "user-insulin", displayText: "Insulin glargine", generalForm: .injection)

    static func medication(_ concept: MedicationConcept, nickname: String? = nil, archived: Bool = false, scheduled: Bool = false, version: Double = 1, at offset: Double = 0)
        -> UserAnnotatedMedication
    {
        UserAnnotatedMedication(
            medication: concept, nickname: nickname, isArchived: archived, hasSchedule: scheduled, recorded: Samples.base.addingTimeInterval(offset),
            metadata: [MetadataKey.syncIdentifier: .string("medication-\(concept.identifier)"), MetadataKey.syncVersion: .number(version)])
    }

    static func dose(_ concept: String, _ status: MedicationDoseEvent.LogStatus, _ quantity: Double? = 1, at offset: Double) -> MedicationDoseEvent {
        let time = Samples.base.addingTimeInterval(offset)
        return MedicationDoseEvent(
            medicationConceptIdentifier: concept, logStatus: status, scheduleType: .schedule, doseQuantity: quantity, scheduledDoseQuantity: 1,
            scheduledDate: time, start: time, end: time)
    }

    @Test("the owner saves medications and doses; apps read them under a read grant and never save one; HealthKit's predicates select them; a later version of an entry replaces it; bad ones are refused naming their field")
    func medicationsAndDoses() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let ibuprofen = Self.medication(Self.ibuprofen, nickname: "for the knee", scheduled: true)
            let insulin = Self.medication(Self.insulin, archived: true, at: 60)
            let doses = [
                Self.dose("rx-5640", .taken, at: 3_600), Self.dose("rx-5640", .skipped, nil, at: 7_200), Self.dose("user-insulin", .taken, 12, at: 7_300),
            ]
            try await owner.save([.userAnnotatedMedication(ibuprofen), .userAnnotatedMedication(insulin)] + doses.map { .medicationDoseEvent($0) })
            let before = try server.ledger.head().sequence

            let list = try await UserAnnotatedMedicationQueryDescriptor().result(for: owner)
            #expect(list.map(\.medication) == [Self.ibuprofen, Self.insulin] && list.first?.nickname == "for the knee" && list.first?.hasSchedule == true)
            #expect(try await UserAnnotatedMedicationQueryDescriptor(predicate: .predicateForUserAnnotatedMedications(isArchived: false)).result(for: owner).map(\.uuid) == [ibuprofen.uuid])
            #expect(try await UserAnnotatedMedicationQueryDescriptor(predicate: .predicateForUserAnnotatedMedications(hasSchedule: false)).result(for: owner).map(\.uuid) == [insulin.uuid])
            func doseIDs(_ predicate: ObjectPredicate, for store: HealthStore) async throws -> [UUID] {
                try await SampleQueryDescriptor(type: .medicationDoseEvent, predicate: predicate).result(for: store).map(\.uuid)
            }
            #expect(try await doseIDs(.predicateForMedicationDoseEvent(status: .taken), for: owner) == [doses[0].uuid, doses[2].uuid])
            #expect(try await doseIDs(.predicateForMedicationDoseEvent(medicationConceptIdentifiers: ["rx-5640"]), for: owner) == [doses[0].uuid, doses[1].uuid])
            let stored = try #require(try await owner.object(with: doses[2].uuid)?.medicationDoseEvent)
            #expect(stored.doseQuantity == 12 && stored.scheduledDoseQuantity == 1 && stored.scheduledDate == doses[2].scheduledDate && stored.unit == .count)
            #expect(stored.scheduleType == .schedule && stored.logStatus == .taken)
            let wrongType = await expectRPCError(.invalidArgument, .invalidArgument, "a medication predicate on doses") {
                _ = try await doseIDs(.predicateForUserAnnotatedMedications(isArchived: true), for: owner)
            }
            #expect(wrongType?.message.contains("needs the type HKDataTypeIdentifierUserAnnotatedMedicationConcept") == true, "\(wrongType?.message ?? "")")

            // A later version of the entry (its nickname changed) replaces it.
            let renamed = Self.medication(Self.ibuprofen, nickname: "knee", scheduled: true, version: 2, at: 600)
            try await owner.save(.userAnnotatedMedication(renamed))
            #expect(try await UserAnnotatedMedicationQueryDescriptor().result(for: owner).map(\.nickname) == [nil, "knee"])

            // Apps read, never save.
            let (source, credential) = try await server.addApp("com.example.pills", name: "Pills", share: [])
            let app = server.client(credential)
            await expectRPCError(.invalidArgument, .invalidArgument, "a request to share dose events") {
                _ = try await app.requestAuthorization(toShare: [.medicationDoseEvent], read: [])
            }
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's save of a dose") {
                try await app.save(.medicationDoseEvent(Self.dose("rx-5640", .taken, at: 9_000)))
            }
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's save of a medication") {
                try await app.save(.userAnnotatedMedication(Self.medication(Self.insulin)))
            }
            #expect(try await UserAnnotatedMedicationQueryDescriptor().result(for: app).isEmpty, "no read grant")
            #expect(try await doseIDs(.predicateForMedicationDoseEvent(status: .taken), for: app).isEmpty)
            #expect(try await app.requestAuthorization(toShare: [], read: [.userAnnotatedMedication, .medicationDoseEvent]) == 2)
            for type in [ObjectType.userAnnotatedMedication, .medicationDoseEvent] {
                try await owner.decideAuthorization(app: source.bundleIdentifier, type: type, direction: .read, decision: .granted)
            }
            #expect(try await UserAnnotatedMedicationQueryDescriptor().result(for: app).count == 2)
            #expect(try await doseIDs(.predicateForMedicationDoseEvent(status: .skipped), for: app) == [doses[1].uuid])

            var badConcept = Self.ibuprofen
            badConcept.relatedCodings.append(badConcept.relatedCodings[0])
            var noName = Self.insulin
            noName.displayText = ""
            let medicationCases: [(UserAnnotatedMedication, String)] = [
                (Self.medication(MedicationConcept(identifier: "", displayText: "x")), "medication.identifier"),
                (Self.medication(noName), "medication.displayText"), (Self.medication(badConcept), "medication.relatedCodings[1]"),
                (Self.medication(Self.insulin, nickname: ""), "nickname"), (Self.medication(Self.insulin, nickname: "a\u{1}b"), "nickname"),
            ]
            for (medication, field) in medicationCases {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await owner.save(.userAnnotatedMedication(medication)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            var farFuture = Self.dose("rx-5640", .taken, at: 0)
            farFuture.scheduledDate = Date(timeIntervalSince1970: 1e12)
            let doseCases: [(MedicationDoseEvent, String)] = [
                (Self.dose("", .taken, at: 0), "medicationConceptIdentifier"), (Self.dose("rx-5640", .taken, -1, at: 0), "doseQuantity"),
                (Self.dose("rx-5640", .taken, .infinity, at: 0), "doseQuantity"), (farFuture, "scheduledDate"),
            ]
            for (dose, field) in doseCases {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await owner.save(.medicationDoseEvent(dose)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            #expect(try await SampleQueryDescriptor(type: .medicationDoseEvent).result(for: owner).count == 3, "nothing refused was kept")

            // As of before the renaming, the first nickname.
            #expect(try await UserAnnotatedMedicationQueryDescriptor().result(for: owner.asOf(.sequence(before))).map(\.nickname) == ["for the knee", nil])
            #expect(try server.ledger.verify().isValid)
            await app.close()
            await owner.close()
        }
    }

    @Test("the command line lists medications and doses with --where; an apple-health export carries them and its re-import reproduces them; bad elements are rejected with their line")
    func commandLineAndExport() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save([
                .userAnnotatedMedication(Self.medication(Self.ibuprofen, nickname: "Knee & back\r\n<left>", scheduled: true)),
                .userAnnotatedMedication(Self.medication(Self.insulin, archived: true, at: 60)),
                .medicationDoseEvent(Self.dose("rx-5640", .taken, at: 3_600)), .medicationDoseEvent(Self.dose("rx-5640", .skipped, nil, at: 7_200)),
            ])
            let cli = AuthCLITests.Session(server: server)
            let credential = server.ownerCredential
            let medications = try #require(try await cli.json(credential, ["query", "--type", ObjectType.userAnnotatedMedication.identifier, "--where", "archived = false"]) as? [[String: Any]])
            #expect(medications.map { $0["value"] as? String } == ["Ibuprofen 200 mg"] && medications.first?["nickname"] as? String == "Knee & back\r\n<left>")
            #expect((medications.first?["codings"] as? [[String: String]])?.first?["code"] == "5640" && medications.first?["unit"] as? String == "tablet")
            let skipped = try #require(try await cli.json(credential, ["query", "--type", ObjectType.medicationDoseEvent.identifier, "--where", "status = skipped and concept = rx-5640"]) as? [[String: Any]])
            #expect(skipped.map { $0["value"] as? String } == ["skipped"] && skipped.first?["schedule"] as? String == "schedule")
            let wrongType = try await cli.run(credential, ["query", "--type", "HKQuantityTypeIdentifierHeartRate", "--where", "status = taken"])
            #expect(wrongType.status != 0 && wrongType.error.contains("status is a field of medication doses"), "\(wrongType.error)")

            let zip = server.directory.appending(path: "meds.zip")
            let exported = try await cli.run(credential, ["export", "alice", "--format", "apple-health", "--output", zip.path])
            #expect(exported.status == 0, "\(exported.error)")
            #expect(try ExportRoundTripTests.dtdViolation(ofExportIn: zip) == nil)
            let copy = try server.store.createLedger(id: "copy")
            let copyOwner = try await copy.issueCredential(for: .owner)
            let imported = try #require(try await cli.json(copyOwner, ["import", "apple-health", zip.path]) as? [String: Any])
            #expect(imported["imported"] as? [String: Int] == ["medications": 2, "medicationDoses": 2], "\(imported)")
            let copyStore = server.client(copyOwner)
            func portrait(_ store: HealthStore) async throws -> [String] {
                let list = try await UserAnnotatedMedicationQueryDescriptor().result(for: store).map {
                    "\($0.medication) \($0.nickname ?? "-") \($0.isArchived) \($0.hasSchedule) \($0.startDate) \($0.syncIdentifier ?? "")"
                }
                let doses = try await SampleQueryDescriptor(type: .medicationDoseEvent).result(for: store).compactMap(\.medicationDoseEvent).map {
                    "\($0.medicationConceptIdentifier) \($0.logStatus) \($0.scheduleType) \($0.doseQuantity ?? -1) \($0.scheduledDoseQuantity ?? -1) \(String(describing: $0.scheduledDate)) \($0.unit) \($0.startDate)"
                }
                return list + doses
            }
            #expect(try await portrait(copyStore) == (try await portrait(owner)))
            let again = try #require(try await cli.json(copyOwner, ["import", "apple-health", zip.path]) as? [String: Any])
            #expect((again["imported"] as? [String: Int])?.isEmpty == true, "a re-import adds nothing: \(again)")
            // The JSON Lines export too, to the microsecond.
            let lines = server.directory.appending(path: "meds.jsonl")
            #expect(try await cli.run(credential, ["export", "alice", "--output", lines.path]).status == 0)
            let third = try server.store.createLedger(id: "third")
            let thirdOwner = try await third.issueCredential(for: .owner)
            let fromLines = try #require(try await cli.json(thirdOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect(fromLines["error"] == nil, "\(fromLines)")
            let thirdStore = server.client(thirdOwner)
            #expect(try await portrait(thirdStore) == (try await portrait(owner)))
            await thirdStore.close()

            let xml = """
                <?xml version="1.0" encoding="UTF-8"?>
                <HealthData locale="en_US">
                 <Medication conceptIdentifier="rx-1" displayText="Aspirin" generalForm="tablet" sourceName="Health" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100">
                  <ClinicalCoding system="rxnorm" code="1191"/>
                 </Medication>
                 <Medication conceptIdentifier="rx-2" displayText="Pill" generalForm="lozenge" sourceName="Health" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100"/>
                 <Medication displayText="Nameless" sourceName="Health" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100"/>
                 <MedicationDoseEvent conceptIdentifier="rx-1" logStatus="taken" doseQuantity="2" unit="count" sourceName="Health" startDate="2025-05-18 09:00:00 +0100" endDate="2025-05-18 09:00:00 +0100"/>
                 <MedicationDoseEvent conceptIdentifier="rx-1" logStatus="forgotten" sourceName="Health" startDate="2025-05-18 09:00:00 +0100" endDate="2025-05-18 09:00:00 +0100"/>
                 <MedicationDoseEvent conceptIdentifier="rx-1" logStatus="taken" doseQuantity="lots" sourceName="Health" startDate="2025-05-18 09:00:00 +0100" endDate="2025-05-18 09:00:00 +0100"/>
                 <MedicationDoseEvent conceptIdentifier="rx-1" logStatus="taken" doseQuantity="-2" sourceName="Health" startDate="2025-05-18 09:00:00 +0100" endDate="2025-05-18 09:00:00 +0100"/>
                </HealthData>
                """
            let fresh = try server.store.createLedger(id: "fresh")
            let freshOwner = try await fresh.issueCredential(for: .owner)
            let bad = try AppleHealthImportTests.writeZip(in: server.directory.appending(path: "bad"), xml: xml)
            let summary = try #require(try await cli.json(freshOwner, ["import", "apple-health", bad.path]) as? [String: Any])
            let rejections = try #require(summary["rejections"] as? [[String: Any]])
            #expect(rejections.map { "\($0["line"] ?? "") \($0["element"] ?? "") \($0["kind"] ?? "")" } == [
                "6 Medication invalid object", "7 Medication invalid object", "9 MedicationDoseEvent unparsable value",
                "10 MedicationDoseEvent unparsable value", "11 MedicationDoseEvent invalid object",
            ], "\(rejections)")
            #expect(summary["imported"] as? [String: Int] == ["medications": 1, "medicationDoses": 1, "electrocardiograms": 1], "the fixture's ECG file too: \(summary)")
            for store in [owner, copyStore] { await store.close() }
        }
    }
}
