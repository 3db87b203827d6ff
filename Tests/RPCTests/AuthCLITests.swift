import Foundation
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

/// A realistic authorization session through `healthledger auth …` against a real server:
/// an app asks, the owner decides, the app's view changes, the audit trail shows it all.
@Suite("healthledger auth", .timeLimit(.minutes(3)))
struct AuthCLITests {
    static let executable = URL(filePath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appending(path: "healthledger")

    struct Session {
        let server: TestServer

        func run(_ credential: String, _ arguments: [String]) async throws -> ProcessRun {
            try await runProcess(AuthCLITests.executable, arguments + ["--port", "\(server.port)", "--credential", credential])
        }

        func json(_ credential: String, _ arguments: [String]) async throws -> Any {
            let run = try await run(credential, arguments + ["--json"])
            #expect(run.status == 0, "\(arguments): \(run.error)")
            return try JSONSerialization.jsonObject(with: Data(run.output.utf8))
        }
    }

    @Test("an app asks, the owner decides, the app's view follows, and the trail shows every decision")
    func session() async throws {
        try await withTestServer { server in
            let cli = Session(server: server)
            let app = try await server.ledger.issueCredential(for: .app(Source(bundleIdentifier: "com.example.pedometer", name: "Pedometer")))
            let owner = server.ownerCredential
            let window = ["--start", "2026-11-22T08:00:00Z", "--end", "2026-11-22T08:20:00Z"]

            let asked = try await cli.run(app, ["auth", "request", "--share", "StepCount", "--read", "StepCount", "--read", "HeartRate"])
            #expect(asked.status == 0 && asked.output == "3 new request(s) for the owner\n", "\(asked.error)")
            #expect(try await cli.run(app, ["auth", "request", "--read", "HeartRate"]).output == "0 new request(s) for the owner\n")
            let early = try await cli.run(app, ["save", "--type", "StepCount", "--value", "120", "--unit", "count"] + window)
            #expect(early.status != 0 && early.error.contains("permissionDenied") && early.error.contains("request authorization first"))

            let pending = try #require(try await cli.json(owner, ["auth", "pending", "--app", "com.example.pedometer"]) as? [[String: Any]])
            #expect(pending.count == 3 && pending.allSatisfy { $0["state"] as? String == "pending" })

            #expect(try await cli.run(owner, ["auth", "grant", "--app", "com.example.pedometer", "--type", "StepCount"]).status == 0)
            #expect(try await cli.run(owner, ["auth", "deny", "--app", "com.example.pedometer", "--type", "HeartRate", "--direction", "read"]).status == 0)
            #expect(try await cli.run(owner, ["auth", "pending", "--app", "com.example.pedometer"]).output == "no pending requests\n")
            let status = try #require(
                try await cli.json(app, ["auth", "status", "--type", "StepCount", "--type", "HeartRate", "--type", "DateOfBirth", "--type", "VisionPrescription"])
                    as? [[String: String]])
            #expect(status.map { [$0["sharing"], $0["shareRequest"], $0["readRequest"]] } == [
                ["sharingAuthorized", "unnecessary", "unnecessary"],
                // Read of heart rate was asked (and denied: the app cannot tell); sharing never was.
                ["notDetermined", "shouldRequest", "unnecessary"],
                ["notDetermined", "readOnly", "shouldRequest"],
                ["notDetermined", "shouldRequest", "perObject"],
            ])
            let text = try await cli.run(app, ["auth", "status", "--type", "HeartRate"])
            #expect(text.output == "HKQuantityTypeIdentifierHeartRate\tsharing notDetermined\tshare request shouldRequest\tread request unnecessary\n")

            // Data from the app, the owner and another app.
            #expect(try await cli.run(app, ["save", "--type", "StepCount", "--value", "120", "--unit", "count"] + window).status == 0)
            #expect(try await cli.run(owner, ["save", "--type", "StepCount", "--value", "90", "--unit", "count"] + window).status == 0)
            #expect(try await cli.run(owner, ["save", "--type", "HeartRate", "--value", "71", "--unit", "count/min"]).status == 0)
            #expect(try await cli.run(server.appCredential, ["save", "--type", "HeartRate", "--value", "75", "--unit", "count/min"]).status == 0)

            func sources(_ type: String) async throws -> [String] {
                let rows = try #require(try await cli.json(app, ["query", "--type", type]) as? [[String: Any]])
                return rows.compactMap { $0["source"] as? String }.sorted()
            }
            // Read granted: everyone's steps. Read denied: no one's heart rate (the app saved none).
            #expect(try await sources("StepCount") == ["com.example.pedometer", "org.healthledger.owner"])
            #expect(try await sources("HeartRate") == [])

            #expect(try await cli.run(owner, ["auth", "revoke", "--app", "com.example.pedometer", "--type", "StepCount", "--direction", "read"]).status == 0)
            #expect(try await sources("StepCount") == ["com.example.pedometer"])
            let nothingToRevoke = try await cli.run(owner, ["auth", "revoke", "--app", "com.example.pedometer", "--type", "HeartRate", "--direction", "read"])
            #expect(nothingToRevoke.status != 0 && nothingToRevoke.error.contains("nothing to revoke"))

            // Apps do not decide; the owner cannot decide for an app that does not exist.
            let selfGrant = try await cli.run(app, ["auth", "grant", "--app", "com.example.pedometer", "--type", "HeartRate", "--direction", "read"])
            #expect(selfGrant.status != 0 && selfGrant.error.contains("permissionDenied"))
            let nobody = try await cli.run(owner, ["auth", "grant", "--app", "com.example.nobody", "--type", "HeartRate"])
            #expect(nobody.status != 0 && nobody.error.contains("notFound"))
            let correlation = try await cli.run(app, ["auth", "request", "--read", "BloodPressure"])
            #expect(correlation.status != 0 && correlation.error.contains("member types"))

            let shown = try #require(try await cli.json(owner, ["auth", "show", "--app", "com.example.pedometer", "--history"]) as? [String: Any])
            let history = try #require(shown["history"] as? [[String: Any]])
            #expect(history.map { $0["actor"] as? String ?? "" } == ["app com.example.pedometer", "owner", "owner", "owner", "owner"])
            #expect(history.map { ($0["action"] as? String ?? "").split(separator: " ").first.map(String.init) ?? "" } == [
                "requested", "granted", "granted", "denied", "revoked",
            ])
            let states = try #require(shown["authorizations"] as? [[String: Any]]).map { "\($0["direction"]!) \($0["type"]!) \($0["state"]!)" }
            #expect(Set(states) == [
                "share HKQuantityTypeIdentifierStepCount granted", "read HKQuantityTypeIdentifierStepCount revoked",
                "read HKQuantityTypeIdentifierHeartRate denied",
            ])
            // The operator's log names every decision too.
            let log = try await runProcess(AuthCLITests.executable, ["log", "alice", "--data-dir", server.directory.path, "--limit", "100"])
            #expect(log.output.contains("owner\tauthorizationDecided\tapp com.example.pedometer (Pedometer) had read of StepCount revoked by the owner\n"))
            #expect(log.output.contains("app com.example.pedometer\tauthorizationRequested\tapp com.example.pedometer (Pedometer) asked to share StepCount"))
        }
    }

    @Test("healthledger auth select and auth priority: the owner's selection decides what the app reads; the source order is shown, set and restored")
    func selectAndPriority() async throws {
        try await withTestServer { server in
            let cli = Session(server: server)
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await PerObjectReadTests.grantShare(app: app, owner: owner)
            let first = visionPrescription(issuedDay: 0, description: "first")
            let second = visionPrescription(issuedDay: 100, description: "second")
            try await owner.save([.visionPrescription(first), .visionPrescription(second)])
            try await app.requestPerObjectReadAuthorization(for: Types.vision)
            func sees() async throws -> [UUID] { try await app.result(for: SampleQueryDescriptor(type: Types.vision)).map(\.uuid) }

            let selected = try await cli.run(server.ownerCredential, ["auth", "select", "--app", "com.example.walk", "--uuid", first.uuid.uuidString])
            #expect(selected.status == 0 && selected.output.contains("com.example.walk may read 1 selected HKVisionPrescriptionTypeIdentifier object(s)"), "\(selected.output)\(selected.error)")
            #expect(try await sees() == [first.uuid])
            #expect(try await cli.run(server.ownerCredential, ["auth", "select", "--app", "com.example.walk"]).status == 0)
            #expect(try await sees().isEmpty, "no --uuid selects nothing")
            let refused = try await cli.run(server.appCredential, ["auth", "select", "--app", "com.example.walk", "--uuid", first.uuid.uuidString])
            #expect(refused.status == 1 && refused.error.contains("permissionDenied: only the owner manages authorization"), "\(refused.error)")

            // Heart rate from the app, then the owner: first-save order until the owner sets one.
            try await app.save(Samples.heartRate(70, at: 0))
            try await owner.save(Samples.heartRate(71, at: 60))
            func order() async throws -> [String] {
                try #require(try await cli.json(server.ownerCredential, ["auth", "priority", "--type", "HeartRate"]) as? [[String: String]]).compactMap { $0["bundleIdentifier"] }
            }
            let initial = try await order()
            #expect(initial.count == 2 && initial.first == "com.example.walk", "\(initial)")
            let reversed = Array(initial.reversed())
            #expect(try await cli.run(server.ownerCredential, ["auth", "priority", "--type", "HeartRate", "--set", reversed.joined(separator: ",")]).status == 0)
            #expect(try await order() == reversed)
            #expect(try await cli.run(server.ownerCredential, ["auth", "priority", "--type", "HeartRate", "--set", ""]).status == 0)
            #expect(try await order() == initial, "an empty order restores the default")
            let unknown = try await cli.run(server.ownerCredential, ["auth", "priority", "--type", "HeartRate", "--set", "com.example.nobody"])
            #expect(unknown.status == 1 && unknown.error.contains("notFound: 'com.example.nobody' has saved no HKQuantityTypeIdentifierHeartRate"), "\(unknown.error)")
            await owner.close()
            await app.close()
        }
    }
}
