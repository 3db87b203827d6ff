import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Electrocardiograms over RPC", .timeLimit(.minutes(3)))
struct ElectrocardiogramRPCTests {
    static func recording(voltages: [Float] = (0..<2_048).map { Float($0 % 512) }, hertz: Double = 512) throws -> Electrocardiogram {
        Electrocardiogram(
            classification: .atrialFibrillation, symptomsStatus: .present, averageHeartRate: try Quantity(96, "count/min"),
            samplingFrequency: try Quantity(hertz, "Hz"), voltages: voltages, start: Samples.base, end: Samples.base.addingTimeInterval(4))
    }

    @Test("the owner's recording, its voltages in batches; apps read it under a read grant and never save one; one that breaks the rules is refused naming its field")
    func recordings() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let saved = try Self.recording()
            try await owner.save(.electrocardiogram(saved))
            let stored = try #require(try await owner.object(with: saved.uuid)?.electrocardiogram)
            #expect(stored.voltages == saved.voltages && stored.averageHeartRate == saved.averageHeartRate && stored.classification == .atrialFibrillation)
            var batches: [[ElectrocardiogramVoltage]] = []
            for try await batch in ElectrocardiogramQueryDescriptor(saved.uuid, batchSize: 1_000).results(for: owner) { batches.append(batch) }
            #expect(batches.map(\.count) == [1_000, 1_000, 48] && batches[1][24].timeSinceStart == 2 && batches[1][24].microvolts == 0)

            let (source, credential) = try await server.addApp("com.example.cardio", name: "Cardio", share: [])
            let app = server.client(credential)
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's save of a recording") {
                try await app.save(.electrocardiogram(try Self.recording()))
            }
            await #expect(throws: HealthError.self) { _ = try await ElectrocardiogramQueryDescriptor(saved.uuid).result(for: app) }
            #expect(try await app.requestAuthorization(toShare: [], read: [.electrocardiogram]) == 1)
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: .electrocardiogram, direction: .read, decision: .granted)
            #expect(try await ElectrocardiogramQueryDescriptor(saved.uuid).result(for: app).count == 2_048)
            // The command line gives the voltages too (with --json).
            let rows = try #require(try await AuthCLITests.Session(server: server).json(server.ownerCredential, ["query", "--type", "HKDataTypeIdentifierElectrocardiogram"]) as? [[String: Any]])
            #expect(rows.first?["value"] as? String == "atrialFibrillation" && rows.first?["sampling_frequency_hz"] as? Double == 512)
            #expect((rows.first?["voltages_uv"] as? [Double])?.count == 2_048 && (rows.first?["voltages_uv"] as? [Double])?[511] == 511)

            for (recording, field) in [
                (try Self.recording(voltages: []), "voltages"), (try Self.recording(voltages: [1, .nan]), "voltages"),
                (try Self.recording(hertz: 0), "samplingFrequency"),
            ] {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await owner.save(.electrocardiogram(recording)) }
                #expect(refusal?.message.contains(field) == true, "\(field): \(refusal?.message ?? "")")
            }
            var fast = try Self.recording()
            fast.averageHeartRate = try Quantity(400, "count/min")
            await expectRPCError(.invalidArgument, .invalidArgument, "averageHeartRate") { try await owner.save(.electrocardiogram(fast)) }
            #expect(try server.ledger.verify().isValid)
            await app.close()
            await owner.close()
        }
    }
}
