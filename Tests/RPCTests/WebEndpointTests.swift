import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import HealthLedgerWeb
import Ledger
import HealthModel
import TestSupport
import Testing

/// The web app's edges, over plain HTTP (curl) and on its session store with a clock of the
/// test's own: throttled sign-in, refusals that change nothing, headers, expiry.
@Suite("The owner's web app: sessions, refusals and headers", .timeLimit(.minutes(3)))
struct WebEndpointTests {
    /// `curl` with `arguments`: the status code, then the headers and body.
    static func curl(_ arguments: [String]) async throws -> (status: Int, headers: String, body: String) {
        let run = try await runProcess(URL(filePath: "/usr/bin/env"), ["curl", "-s", "-i"] + arguments)
        let parts = run.output.components(separatedBy: "\r\n\r\n")
        let headers = parts.first ?? ""
        let status = Int(headers.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, headers, parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    @Test("failed sign-ins are throttled per address; unsigned and forged posts change nothing; pages forbid framing and outside sources")
    func edges() async throws {
        try await withTestServer(web: true) { server in
            let url = "http://127.0.0.1:\(server.webPort)"
            let app = server.client(server.appCredential)
            _ = try await app.requestAuthorization(toShare: [], read: [Samples.heartRate.objectType])

            // Not signed in: pages send to sign-in; a post does nothing.
            let page = try await Self.curl(["\(url)/apps"])
            #expect(page.status == 303 && page.headers.lowercased().contains("location: /sign-in"), "\(page.headers)")
            let post = try await Self.curl(["-X", "POST", "--data", "app=com.example.walk&type=HKQuantityTypeIdentifierHeartRate&direction=2&decision=1", "\(url)/apps/decide"])
            #expect(post.status == 303, "\(post.headers)")
            #expect(try await server.client().pendingAuthorizations().count == 1)

            // The sign-in page: no framing, nothing from elsewhere, nothing cached.
            let signIn = try await Self.curl(["\(url)/sign-in"])
            #expect(signIn.status == 200)
            #expect(signIn.headers.lowercased().contains("content-security-policy: default-src 'none'"))
            #expect(signIn.headers.contains("frame-ancestors 'none'") && signIn.headers.lowercased().contains("x-content-type-options: nosniff"))
            #expect(signIn.body.contains("<label for=\"credential\">"))

            // A sign-in posted by another site's page: refused, and not counted.
            let crossSite = try await Self.curl(["-H", "Sec-Fetch-Site: cross-site", "--data-urlencode", "credential=\(server.ownerCredential)", "\(url)/sign-in"])
            #expect(crossSite.status == 403 && crossSite.body.contains("from another site"))

            // Five wrong credentials from one address, then a wait, even for the right one.
            for attempt in 1...WebSessions.failuresAllowed {
                let wrong = try await Self.curl(["--data-urlencode", "credential=hl1:alice:nope:\(attempt)", "\(url)/sign-in"])
                #expect(wrong.status == 401 && wrong.body.contains("not accepted"), "\(attempt): \(wrong.status)")
            }
            let throttled = try await Self.curl(["--data-urlencode", "credential=\(server.ownerCredential)", "\(url)/sign-in"])
            #expect(throttled.status == 429 && throttled.body.contains("Too many failed sign-ins"), "\(throttled.status)")
            #expect(server.web?.openSessions == 0)
        }
    }

    @Test("a form past 16 KiB is refused as too large, saying so; a connection whose request stops coming is closed after the idle time")
    func oversizeAndStalled() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, idleTimeout: .seconds(1)), web: true) { server in
            let url = "http://127.0.0.1:\(server.webPort)"
            let large = try await Self.curl(["--data-urlencode", "credential=" + String(repeating: "x", count: 20_000), "\(url)/sign-in"])
            #expect(large.status == 413 && large.body.contains("larger than the 16 KiB a HealthLedger form may be"), "\(large.status) \(large.body)")
            // A sign-in whose body stops after its first bytes: closed once idle (here 1 s; the
            // suite's time limit is the only bound on the wait).
            let script = """
                import socket
                s = socket.create_connection(("127.0.0.1", \(server.webPort)))
                s.sendall(b"POST /sign-in HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Type: application/x-www-form-urlencoded\\r\\nContent-Length: 100\\r\\n\\r\\ncredential=")
                while s.recv(4096): pass
                print("closed")
                """
            let stalled = try await runProcess(URL(filePath: "/usr/bin/env"), ["python3", "-c", script])
            #expect(stalled.status == 0 && stalled.output.contains("closed"), "\(stalled.output) \(stalled.error)")
            #expect(server.web?.openSessions == 0)
            // A method a page does not take: 405 naming the ones it does, not "not found".
            let deleted = try await Self.curl(["-X", "DELETE", "\(url)/apps"])
            #expect(deleted.status == 405 && deleted.headers.lowercased().contains("allow: get"), "\(deleted.status) \(deleted.headers)")
            let got = try await Self.curl(["\(url)/apps/decide"])
            #expect(got.status == 405 && got.headers.lowercased().contains("allow: post") && got.body.contains("does not take GET"), "\(got.status)")
            #expect(try await Self.curl(["\(url)/no-such-page"]).status == 404)
        }
    }

    @Test("an owner's session: cookie attributes, a wrong CSRF token refused, a grant, sign-out; a revoked credential ends the session")
    func session() async throws {
        try await withTestServer(web: true) { server in
            let url = "http://127.0.0.1:\(server.webPort)"
            let app = server.client(server.appCredential)
            _ = try await app.requestAuthorization(toShare: [], read: [Samples.heartRate.objectType])
            let signedIn = try await Self.curl(["--data-urlencode", "credential=\(server.ownerCredential)", "\(url)/sign-in"])
            #expect(signedIn.status == 303)
            let cookieLine = try #require(signedIn.headers.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("set-cookie:") })
            #expect(cookieLine.contains("HttpOnly") && cookieLine.contains("SameSite=Strict") && cookieLine.contains("Max-Age=43200") && cookieLine.contains("Path=/"))
            #expect(!cookieLine.contains("Secure"), "no Secure attribute over plain HTTP")
            let session = try #require(cookieLine.firstMatch(of: /healthledger_session=([A-Za-z0-9_-]+)/).map { String($0.1) })
            let cookie = ["--cookie", "healthledger_session=\(session)"]

            let apps = try await Self.curl(cookie + ["\(url)/apps"])
            #expect(apps.status == 200 && apps.body.contains("Waiting for your decision"))
            let token = try #require(apps.body.firstMatch(of: /name="csrf" value="([A-Za-z0-9_-]+)"/).map { String($0.1) })
            let decision = "app=com.example.walk&type=HKQuantityTypeIdentifierHeartRate&direction=2&decision=1"
            let forged = try await Self.curl(cookie + ["--data", "csrf=\(String(token.reversed()))&\(decision)", "\(url)/apps/decide"])
            #expect(forged.status == 403 && forged.body.contains("nothing was changed"))
            #expect(try await server.client().pendingAuthorizations().count == 1)
            let unknown = try await Self.curl(cookie + ["--data", "csrf=\(token)&app=com.example.walk&type=NoSuchType&direction=2&decision=1", "\(url)/apps/decide"])
            #expect(unknown.status == 400 && unknown.body.contains("unknown type"))
            // A post another site's page made, token and all: refused.
            let crossSite = try await Self.curl(cookie + ["-H", "Origin: http://elsewhere.example", "--data", "csrf=\(token)&\(decision)", "\(url)/apps/decide"])
            #expect(crossSite.status == 403 && crossSite.body.contains("from another site"), "\(crossSite.status)")
            let fetchSite = try await Self.curl(cookie + ["-H", "Sec-Fetch-Site: cross-site", "--data", "csrf=\(token)&\(decision)", "\(url)/apps/decide"])
            #expect(fetchSite.status == 403)
            #expect(try await server.client().pendingAuthorizations().count == 1)
            let granted = try await Self.curl(
                cookie + ["-H", "Origin: http://127.0.0.1:\(server.webPort)", "-H", "Sec-Fetch-Site: same-origin", "--data", "csrf=\(token)&\(decision)", "\(url)/apps/decide"])
            #expect(granted.status == 303 && granted.headers.lowercased().contains("location: /apps\r\n"), "\(granted.headers)")
            // The outcome is said once, on the next page.
            #expect(try await Self.curl(cookie + ["\(url)/apps"]).body.contains("com.example.walk: Heart rate, read, granted."))
            #expect(!(try await Self.curl(cookie + ["\(url)/apps"]).body.contains("class=\"notice\"")))
            #expect(try await server.client().pendingAuthorizations().isEmpty)
            #expect(try await server.client().authorizations().contains { $0.type == Samples.heartRate.objectType && $0.direction == .read && $0.decision == .granted })

            // The owner's credential is revoked: the next page ends the session.
            try await server.ledger.revokeCredential(id: credentialID(server.ownerCredential))
            let revoked = try await Self.curl(cookie + ["\(url)/"])
            #expect(revoked.status == 401 && revoked.body.contains("Signed out"), "\(revoked.status)")
            #expect(server.web?.openSessions == 0)
            let after = try await Self.curl(cookie + ["\(url)/apps"])
            #expect(after.status == 303)

            // A live history stream open while the web app stops: the stop ends it, and does not wait for it.
            let owner = try await server.ledger.issueCredential(for: .owner)
            let again = try await Self.curl(["--data-urlencode", "credential=\(owner)", "\(url)/sign-in"])
            let second = try #require(again.headers.firstMatch(of: /healthledger_session=([A-Za-z0-9_-]+)/).map { String($0.1) })
            let live = try LineProcess(URL(filePath: "/usr/bin/env"), ["curl", "-s", "-N", "--cookie", "healthledger_session=\(second)", "\(url)/history/live?after=0"])
            defer { live.stop() }
            #expect(await live.nextLine()?.hasPrefix("event: line") == true, "the stream sends the events after 0")
            await server.web?.shutdown()
            while let line = await live.nextLine() { _ = line }
            #expect(server.web?.openSessions == 0)
        }
    }

    @Test("the owner orders a type's sources and chooses which prescriptions an app may read")
    func priorityAndSelections() async throws {
        try await withTestServer(web: true) { server in
            let url = "http://127.0.0.1:\(server.webPort)"
            let owner = server.client()
            let app = server.client(server.appCredential)
            // Two sources of heart rate: the owner's, then the app's.
            try await owner.save(Samples.heartRate(60, at: 0))
            try await app.save(Samples.heartRate(61, at: 60))
            // Prescriptions the app asks to read one by one.
            #expect(try await app.requestAuthorization(toShare: [Types.vision], read: []) == 1)
            try await owner.decideAuthorization(app: TestServer.appSource.bundleIdentifier, type: Types.vision, direction: .share, decision: .granted)
            let first = visionPrescription(issuedDay: 0, description: "first")
            let second = visionPrescription(issuedDay: 100, description: "second")
            try await owner.save([.visionPrescription(first), .visionPrescription(second)])
            try await app.requestPerObjectReadAuthorization(for: Types.vision)

            let signedIn = try await Self.curl(["--data-urlencode", "credential=\(server.ownerCredential)", "\(url)/sign-in"])
            let session = try #require(signedIn.headers.firstMatch(of: /healthledger_session=([A-Za-z0-9_-]+)/).map { String($0.1) })
            let cookie = ["--cookie", "healthledger_session=\(session)"]
            let apps = try await Self.curl(cookie + ["\(url)/apps"])
            let token = try #require(apps.body.firstMatch(of: /name="csrf" value="([A-Za-z0-9_-]+)"/).map { String($0.1) })
            #expect(apps.body.contains("Which source counts first") && apps.body.contains("data-type=\"HKQuantityTypeIdentifierHeartRate\""))
            #expect(apps.body.contains("Choose what Walk may read") && apps.body.contains(first.uuid.uuidString) && apps.body.contains(second.uuid.uuidString))

            // The app's heart rate moved up: it counts first.
            #expect(try await owner.sourcePriority(for: Samples.heartRate.objectType).first?.bundleIdentifier != TestServer.appSource.bundleIdentifier)
            let moved = try await Self.curl(
                cookie + ["--data", "csrf=\(token)&type=HKQuantityTypeIdentifierHeartRate&source=\(TestServer.appSource.bundleIdentifier)&move=up", "\(url)/apps/priority"])
            #expect(moved.status == 303)
            #expect(try await owner.sourcePriority(for: Samples.heartRate.objectType).first?.bundleIdentifier == TestServer.appSource.bundleIdentifier)

            // The second prescription chosen: the app reads it, and not the first.
            let chosen = try await Self.curl(
                cookie + ["--data", "csrf=\(token)&app=\(TestServer.appSource.bundleIdentifier)&type=\(Types.vision.identifier)&uuids[]=\(second.uuid.uuidString)", "\(url)/apps/select"])
            #expect(chosen.status == 303)
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.vision)).map(\.uuid) == [second.uuid])
            #expect(try await Self.curl(cookie + ["\(url)/apps"]).body.contains("may read 1 chosen"))
            // A form naming an item that is not a UUID changes nothing (it would otherwise take back the choice).
            let garbled = try await Self.curl(
                cookie + ["--data", "csrf=\(token)&app=\(TestServer.appSource.bundleIdentifier)&type=\(Types.vision.identifier)&uuids[]=not-a-uuid", "\(url)/apps/select"])
            #expect(garbled.status == 400 && garbled.body.contains("nothing was changed"), "\(garbled.status)")
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.vision)).map(\.uuid) == [second.uuid])

            // Imports: without the page's token, refused; a file that is no export, refused, saying so.
            let tokenless = try await Self.curl(cookie + ["--data-binary", "hello", "\(url)/data/import"])
            #expect(tokenless.status == 403 && tokenless.body.contains("nothing was imported"), "\(tokenless.status)")
            let notExport = try await Self.curl(cookie + ["-H", "X-CSRF-Token: \(token)", "--data-binary", "hello", "\(url)/data/import"])
            #expect(notExport.status == 400 && notExport.body.contains("not an Apple Health export"), "\(notExport.status) \(notExport.body)")
            let empty = try await Self.curl(cookie + ["-H", "X-CSRF-Token: \(token)", "-X", "POST", "\(url)/data/import"])
            #expect(empty.status == 400 && empty.body.contains("empty"), "\(empty.status) \(empty.body)")
        }
    }

    @Test("every kind of object can be browsed, each with its value as people read it")
    func browseEveryKind() async throws {
        try await withTestServer(web: true) { server in
            let url = "http://127.0.0.1:\(server.webPort)"
            let owner = server.client()
            let start = Date().addingTimeInterval(-3_600).timeIntervalSince1970.rounded(.down)
            func at(_ offset: TimeInterval) -> Date { Date(timeIntervalSince1970: start + offset) }
            try await owner.save([
                .electrocardiogram(Electrocardiogram(
                    classification: .atrialFibrillation, averageHeartRate: try Quantity(96, "count/min"), samplingFrequency: try Quantity(512, "Hz"),
                    voltages: Array(repeating: 1, count: 1_024), start: at(0), end: at(2))),
                .heartbeatSeries(HeartbeatSeriesSample(beats: [0, 1, 2, 3].map { HeartbeatSeriesBeat(timeSinceSeriesStart: $0) }, start: at(10), end: at(20))),
                .audiogram(Audiogram(points: [AudiogramPoint(frequency: try Quantity(1000, "Hz"), leftEar: try Quantity(5, "dBHL"))], start: at(30), end: at(40))),
                .quantitySample(QuantitySample(
                    type: Samples.heartRate, unit: try HealthUnit("count/min"),
                    series: [90, 100].enumerated().map { QuantitySeriesEntry(value: $1, start: at(50 + Double($0) * 5), end: at(55 + Double($0) * 5)) })),
                .stateOfMind(StateOfMind(date: at(70), kind: .dailyMood, valence: 0.3, labels: [.calm, .grateful], associations: [.family, .currentEvents])),
                .userAnnotatedMedication(UserAnnotatedMedication(
                    medication: MedicationConcept(identifier: "rx-5640", displayText: "Ibuprofen 200 mg", generalForm: .tablet), nickname: "knee",
                    hasSchedule: true, recorded: at(80))),
                .medicationDoseEvent(MedicationDoseEvent(
                    medicationConceptIdentifier: "rx-5640", logStatus: .taken, doseQuantity: 2, scheduledDoseQuantity: 1, start: at(90), end: at(90))),
            ])
            let signedIn = try await Self.curl(["--data-urlencode", "credential=\(server.ownerCredential)", "\(url)/sign-in"])
            let session = try #require(signedIn.headers.firstMatch(of: /healthledger_session=([A-Za-z0-9_-]+)/).map { String($0.1) })
            let cookie = ["--cookie", "healthledger_session=\(session)"]
            let picker = try await Self.curl(cookie + ["\(url)/browse"])
            for type in ["HKDataTypeIdentifierElectrocardiogram", "HKDataTypeIdentifierHeartbeatSeries", "HKDataTypeIdentifierAudiogram", "HKWorkoutTypeIdentifier", "HKActivitySummaryTypeIdentifier", "HKDataTypeStateOfMind"] {
                #expect(picker.body.contains("<option value=\"\(type)\""), "\(type) is offered")
            }
            #expect(!picker.body.contains("<option value=\"HKWorkoutRouteTypeIdentifier\""))
            let expected = [
                ("HKDataTypeIdentifierElectrocardiogram", "Atrial fibrillation, average 96 count/min; 1024 measurements at 512 Hz"),
                ("HKDataTypeIdentifierHeartbeatSeries", "4 beats, about 60 beats a minute"),
                ("HKDataTypeIdentifierAudiogram", "1000 Hz: left 5 dBHL"),
                ("HKQuantityTypeIdentifierHeartRate", "95 count/min (2 values)"),
                ("HKDataTypeStateOfMind", "Daily mood, slightly pleasant (0.3): calm, grateful; about family, current events"),
                ("HKDataTypeIdentifierUserAnnotatedMedicationConcept", "Ibuprofen 200 mg (tablet), “knee”, on a schedule"),
                ("HKMedicationDoseEventTypeIdentifierMedicationDoseEvent", "Taken: 2 count of 1 scheduled (rx-5640)"),
            ]
            // A page before a time no ledger holds is refused, and the server stays up.
            for before in ["-63200000000000000", "9223372036854775807", "soon"] {
                let beyond = try await Self.curl(cookie + ["\(url)/browse?type=HKQuantityTypeIdentifierHeartRate&before=\(before)"])
                #expect(beyond.status == 400 && beyond.body.contains("not one the ledger holds"), "\(before): \(beyond.status)")
            }
            #expect(try await Self.curl(cookie + ["\(url)/browse?type=HKQuantityTypeIdentifierHeartRate"]).status == 200)
            for (type, value) in expected {
                let page = try await Self.curl(cookie + ["\(url)/browse?type=\(type)"])
                #expect(page.status == 200 && page.body.contains("<td>\(value)</td>"), "\(type): \(page.body.firstMatch(of: /<tbody>.{0,400}/).map { String($0.0) } ?? page.body.suffix(400).description)")
            }
        }
    }

    @Test("a sign-in link signs its owner in once, and its credential is revoked when that session ends")
    func signInLink() async throws {
        try await withTestServer(web: true) { server in
            let url = "http://127.0.0.1:\(server.webPort)"
            let operatorCredential = try server.store.issueOperatorCredential(label: "test")
            let remote = ["--server", "--port", "\(server.port)", "--credential", operatorCredential]
            let made = try await runProcess(AuthCLITests.executable, ["admin", "sign-in-link", "alice", "--url", url + "/"] + remote)
            #expect(made.status == 0, "\(made.error)")
            let link = made.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(link.hasPrefix("\(url)/sign-in/link#hl1:alice:"), "\(link)")
            let credential = String(link.split(separator: "#", maxSplits: 1)[1])
            #expect(try await server.client().credentials().contains { $0.label == "web sign-in link" && credential.contains($0.id) })

            let page = try await Self.curl(["\(url)/sign-in/link"])
            #expect(page.status == 200 && page.body.contains("id=\"link-sign-in\"") && !page.body.contains("hl1:"))
            let signedIn = try await Self.curl(["--data-urlencode", "credential=\(credential)", "\(url)/sign-in"])
            #expect(signedIn.status == 303)
            let again = try await Self.curl(["--data-urlencode", "credential=\(credential)", "\(url)/sign-in"])
            #expect(again.status == 401 && again.body.contains("already used"), "\(again.status)")
            // Its first use recorded, in the ledger, its revocation at the session's latest end:
            // a restart, which forgets the sessions, does not make it usable again.
            let scheduled = try #require(try await server.client().credentials().first { credential.contains($0.id) }?.revocation)
            #expect(scheduled > Date().addingTimeInterval(3600), "\(scheduled)")
            let other = try await runProcess(AuthCLITests.executable, ["admin", "sign-in-link", "alice", "--url", url + "/"] + remote)
            let otherCredential = String(other.output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "#", maxSplits: 1)[1])
            try await server.client().revokeCredential(id: String(otherCredential.split(separator: ":")[2]), effectiveIn: .seconds(3600))
            let afterRestart = try await Self.curl(["--data-urlencode", "credential=\(otherCredential)", "\(url)/sign-in"])
            #expect(afterRestart.status == 401 && afterRestart.body.contains("already used"), "a link whose revocation is recorded: \(afterRestart.status)")

            // Signing out spends the link: its credential is revoked.
            let session = try #require(signedIn.headers.firstMatch(of: /healthledger_session=([A-Za-z0-9_-]+)/).map { String($0.1) })
            let cookie = ["--cookie", "healthledger_session=\(session)"]
            let apps = try await Self.curl(cookie + ["\(url)/apps"])
            let token = try #require(apps.body.firstMatch(of: /name="csrf" value="([A-Za-z0-9_-]+)"/).map { String($0.1) })
            #expect(try await Self.curl(cookie + ["--data", "csrf=\(token)", "\(url)/sign-out"]).status == 303)
            let linkStore = server.client(credential)
            // (The session's end revokes it in the background: wait for it, however long the
            // machine takes; the suite's time limit guards against it never happening.)
            var revoked = false
            while !revoked {
                do { _ = try await linkStore.ping() } catch let error as RPCError where error.code == .unauthenticated { revoked = true }
                if !revoked { try await Task.sleep(for: .milliseconds(20)) }
            }
            await linkStore.close()

            // A link never lasts forever, and needs the web app's address.
            let forever = try await runProcess(AuthCLITests.executable, ["admin", "sign-in-link", "alice", "--expires-in", "never"] + remote)
            #expect(forever.status != 0 && forever.error.contains("never lasts forever"), "\(forever.error)")
            let badURL = try await runProcess(AuthCLITests.executable, ["admin", "sign-in-link", "alice", "--url", "ftp://x"] + remote)
            #expect(badURL.status != 0 && badURL.error.contains("--url must be"), "\(badURL.error)")
        }
    }

    @Test("sessions end after their idle limit or their lifetime, on the session store's own clock")
    func expiry() async throws {
        let sessions = WebSessions(lifetime: 3600, idleLimit: 600)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let store = HealthStore(configuration: .init(port: 1, credential: "hl1:x:y:z"))
        let session = sessions.begin(ledger: "alice", store: store, at: start)
        #expect(sessions.session(session.id, at: start.addingTimeInterval(599))?.ledger == "alice")
        #expect(sessions.session(session.id, at: start.addingTimeInterval(1198)) != nil, "each request restarts the idle limit")
        #expect(sessions.session(session.id, at: start.addingTimeInterval(1798)) == nil, "idle for 600 s")
        let busy = sessions.begin(ledger: "alice", store: store, at: start)
        for minute in stride(from: 5, to: 60, by: 5) { #expect(sessions.session(busy.id, at: start.addingTimeInterval(Double(minute) * 60)) != nil) }
        #expect(sessions.session(busy.id, at: start.addingTimeInterval(3600)) == nil, "an hour, however busy")
        #expect(sessions.count == 0)
        // Attempts count as failures until they succeed, so that attempts made at once cannot
        // pass the limit together; the throttle forgets failures older than its window.
        for _ in 0..<WebSessions.failuresAllowed { #expect(sessions.beginSignIn(from: "10.0.0.1", at: start)) }
        #expect(!sessions.beginSignIn(from: "10.0.0.1", at: start.addingTimeInterval(59)))
        #expect(sessions.beginSignIn(from: "10.0.0.2", at: start.addingTimeInterval(59)))
        sessions.signedIn(from: "10.0.0.2")
        #expect(sessions.beginSignIn(from: "10.0.0.1", at: start.addingTimeInterval(WebSessions.throttleWindow)))
    }
}
