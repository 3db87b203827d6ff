import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Clinical records over RPC and import", .timeLimit(.minutes(3)))
struct ClinicalRecordRPCTests {
    static let condition = try! ObjectType("HKClinicalTypeIdentifierConditionRecord")
    static let json = #"{"resourceType":"Condition","id":"c1","code":{"text":"Asthma"}}"#

    static func record(_ json: String = json, resourceType: String = "Condition") -> ClinicalRecord {
        ClinicalRecord(
            type: condition, displayName: "Asthma",
            fhirResource: FHIRResource(resourceType: resourceType, identifier: "c1", fhirVersion: "4.0.1", data: Array(json.utf8)),
            start: Samples.base, end: Samples.base)
    }

    @Test("the owner saves a clinical record; apps read it under a read grant and never save one; one that breaks the rules is refused naming its field")
    func records() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let saved = Self.record()
            try await owner.save(.clinicalRecord(saved))
            let (source, credential) = try await server.addApp("com.example.chart", name: "Chart", share: [])
            let app = server.client(credential)
            let query = ClinicalRecordQueryDescriptor(type: Self.condition, resourceType: "Condition")
            #expect(try await query.result(for: owner).map(\.fhirResource.data) == [Array(Self.json.utf8)])

            await expectRPCError(.invalidArgument, .invalidArgument, "a request to share clinical records") {
                _ = try await app.requestAuthorization(toShare: [Self.condition], read: [])
            }
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's save of a clinical record") {
                try await app.save(.clinicalRecord(Self.record()))
            }
            #expect(try await query.result(for: app).isEmpty, "no read grant")
            #expect(try await app.requestAuthorization(toShare: [], read: [Self.condition]) == 1)
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.condition, direction: .read, decision: .granted)
            #expect(try await query.result(for: app).map(\.uuid) == [saved.uuid])

            let tooLarge = #"{"resourceType":"Condition","note":""# + String(repeating: "x", count: 1 << 20) + #""}"#
            for (record, field) in [
                (Self.record("[1, 2]"), "fhirResource.data"), (Self.record(resourceType: "Observation"), "fhirResource.resourceType"),
                (Self.record(tooLarge), "fhirResource.data"),
            ] {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await owner.save(.clinicalRecord(record)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            await #expect(throws: HealthError.self) { _ = try await ClinicalRecordQueryDescriptor(type: .audiogram).result(for: owner) }
            #expect(try await query.result(for: owner).count == 1, "nothing refused was kept")
            await app.close()
            await owner.close()
        }
    }

    @Test("an export's clinical record whose file is missing, or not a FHIR resource, is rejected with its line; the others go in")
    func badResources() async throws {
        try await withTestServer { server in
            let xml = """
                <?xml version="1.0" encoding="UTF-8"?>
                <HealthData locale="en_US">
                 <ClinicalRecord type="HKClinicalTypeIdentifierConditionRecord" identifier="a" sourceName="Clinic" sourceURL="" fhirVersion="4.0.1" receivedDate="2025-05-18 08:00:00 +0100" resourceFilePath="/clinical-records/missing.json"/>
                 <ClinicalRecord type="HKClinicalTypeIdentifierConditionRecord" identifier="b" sourceName="Clinic" sourceURL="" fhirVersion="4.0.1" receivedDate="2025-05-18 08:00:00 +0100" resourceFilePath="/workout-routes/route_2025-05-18_12.00pm.gpx"/>
                 <ClinicalRecord type="HKClinicalTypeIdentifierLabResultRecord" identifier="x" sourceName="Clinic" sourceURL="" fhirVersion="4.0.1" receivedDate="2025-05-18 08:00:00 +0100" resourceFilePath="/clinical-records/x.json"/>
                 <ClinicalRecord type="HKClinicalTypeIdentifierMadeUp" identifier="c" sourceName="Clinic" sourceURL="" fhirVersion="4.0.1" receivedDate="2025-05-18 08:00:00 +0100" resourceFilePath="/clinical-records/x.json"/>
                </HealthData>
                """
            let zip = try AppleHealthImportTests.writeZip(in: server.directory.appending(path: "export"), xml: xml)
            let cli = AuthCLITests.Session(server: server)
            let summary = try #require(try await cli.json(server.ownerCredential, ["import", "apple-health", zip.path]) as? [String: Any])
            let rejections = try #require(summary["rejections"] as? [[String: Any]])
            #expect(rejections.map { "\($0["line"] ?? "") \($0["kind"] ?? "")" } == [
                "3 resource file missing or unreadable", "4 invalid object", "6 unknown type",
            ], "\(rejections)")
            #expect(summary["imported"] as? [String: Int] == ["clinicalRecords": 1, "electrocardiograms": 1], "\(summary)")
        }
    }
}
