import Foundation
import HealthExport
import HealthLedgerSDK
import HealthLedgerWeb
import HealthModel
import Ledger
import TestSupport
import Testing

/// The owner's web app in a real browser: headless Chromium with Selenium
/// (Tests/WebClients/owner_web.py; tools/test.sh installs Debian's chromium and
/// chromium-driver and PyPI's selenium), against a real server and its web endpoint.
@Suite("The owner's web app in a browser", .timeLimit(.minutes(5)))
struct WebAppTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// Where the screenshots of each page go (kept after the run, outside git).
    static let screenshots = root.appending(path: ".build/test-output/web-app")

    @Test("sign in, summary charts, grant a request, live history, CSRF and app credentials refused, sign out")
    func browser() async throws {
        let check = try await runProcess(URL(filePath: "/usr/bin/env"), ["python3", "-c", "import selenium"])
        try #require(check.status == 0, "selenium is missing (tools/test.sh installs it): \(check.error)")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"), "chromium-driver is missing (tools/test.sh installs it)")
        try await withTestServer(web: true) { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await Self.seed(owner, days: 7)
            try await owner.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: 1970, month: 1, day: 2))
            // The app asks to read heart rate: a pending request, and until then it reads only its own.
            _ = try await app.requestAuthorization(toShare: [], read: [Samples.heartRate.objectType])
            #expect(try await app.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).isEmpty)

            let signals = server.directory.appending(path: "signals")
            try FileManager.default.createDirectory(at: signals, withIntermediateDirectories: true)
            let link = try await server.ledger.issueCredential(for: .owner, label: CredentialInfo.webSignInLinkLabel, lifetime: .expiring(after: .seconds(3600)))
            let export = signals.appending(path: "export.zip")
            let records = try SyntheticExport(records: 400).write(to: export)
            let browser = try LineProcess(
                URL(filePath: "/usr/bin/env"),
                [
                    "python3", Self.root.appending(path: "Tests/WebClients/owner_web.py").path, "--url", "http://127.0.0.1:\(server.webPort)",
                    "--owner", server.ownerCredential, "--app", server.appCredential, "--signals", signals.path, "--screenshots", Self.screenshots.path,
                    "--import-file", export.path, "--link", "http://127.0.0.1:\(server.webPort)/sign-in/link#\(link)",
                ])
            defer { browser.stop() }

            // Granted in the browser: the app's next read succeeds.
            let granted = try #require(try await browser.nextObject(), "the browser script ended early")
            try #require(granted["step"] as? String == "granted", "\(granted)")
            let readable = try await app.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
            #expect(readable.count == 7 * 24, "the app now reads the owner's heart rate")
            server.store.flushAccessRecords()
            _ = FileManager.default.createFile(atPath: signals.appending(path: "read").path, contents: Data())

            // History is open: a sample the app saves appears there without a reload.
            let open = try #require(try await browser.nextObject())
            try #require(open["step"] as? String == "history-open", "\(open)")
            try await app.save(.quantitySample(QuantitySample(
                type: try QuantityType("HKQuantityTypeIdentifierBodyMass"), quantity: try Quantity(71.5, "kg"), start: Date(), end: Date())))
            _ = FileManager.default.createFile(atPath: signals.appending(path: "saved").path, contents: Data())

            // Before everything is erased: the app still reads the owner's heart rate (a forged
            // revocation changed nothing, below), and the steps erased alone are gone.
            let erasing = try #require(try await browser.nextObject(), "the browser script ended early")
            try #require(erasing["step"] as? String == "before-erasing-everything", "\(erasing)")
            // (The import added heart rate of other sources.)
            let stillRead = try await app.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType))
            let steps = try await owner.result(for: SampleQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierStepCount")))
            _ = FileManager.default.createFile(atPath: signals.appending(path: "erase-everything").path, contents: Data())

            let done = try #require(try await browser.nextObject(), "the browser script ended early")
            let seen = try #require(done["seen"] as? [String: Any], "\(done)")
            #expect(seen["signed_out_lands_on"] as? String == "/sign-in")
            #expect((seen["app_refused"] as? String)?.contains("app's credential") == true, "\(seen)")
            #expect(seen["summary_title"] as? String == "Summary · HealthLedger")
            #expect(seen["steps_week_bars"] as? Int == 7)
            #expect(seen["steps_month_bars"] as? Int == 30)
            // Day d of the seven (oldest first) holds 1,000 × (d + 1) steps.
            #expect((seen["steps_week_label"] as? String)?.contains(": 7000 steps") == true, "\(seen["steps_week_label"] ?? "")")
            #expect(seen["heart_ranges"] as? Int == 7)
            #expect(seen["sleep_bars"] as? Int == 7)
            #expect(seen["headings"] as? [String] == ["Steps", "Heart rate", "Sleep", "Body mass"])
            #expect(seen["browse_bars"] as? Int == 30)
            #expect(seen["browse_rows"] as? Int == 7)
            #expect(seen["browse_first_value"] as? String == "7000 count", "newest first: \(seen["browse_first_value"] ?? "")")
            #expect(seen["browse_deleted_notice"] as? String == "The sample was deleted.")
            #expect(seen["browse_rows_after_delete"] as? Int == 6)
            #expect((seen["pending_rows"] as? [String])?.contains { $0.contains("Walk") && $0.contains("Heart rate") && $0.contains("read") } == true, "\(seen)")
            #expect((seen["granted_notice"] as? String)?.contains("granted") == true)
            #expect((seen["decided_rows"] as? [String])?.contains { $0.contains("Heart rate") && $0.contains("granted") } == true)
            let cookie = seen["cookie"] as? [String: Any]
            #expect(cookie?["httpOnly"] as? Bool == true && cookie?["sameSite"] as? String == "Strict" && cookie?["path"] as? String == "/")
            #expect(seen["forged_status"] as? Int == 403)
            #expect((seen["forged_page"] as? String)?.contains("nothing was changed") == true)
            // The forged revocation changed nothing: the app still read.
            #expect(stillRead.filter { $0.object.sourceRevision.source == .owner }.count == 7 * 24)
            // Who read what: the app's read after the grant is on the record.
            #expect((seen["readers"] as? [String])?.contains { $0.contains("Walk (com.example.walk)") && $0.contains("Heart rate") && $0.contains("168") } == true, "\(seen["readers"] ?? "")")
            #expect((seen["history_newest"] as? String)?.contains("Walk") == true, "\(seen["history_newest"] ?? "")")
            #expect(seen["history_url_unchanged"] as? String == "/history")
            #expect((seen["tree_head"] as? String)?.contains("events, signed at") == true)
            #expect((seen["verified"] as? String)?.hasPrefix("Verified: the ledger's head of") == true, "\(seen["verified"] ?? "")")
            #expect((seen["export_disposition"] as? String)?.hasPrefix("attachment; filename=\"alice-") == true)
            #expect(seen["export_step_lines"] as? Int == 6, "the steps left after the delete")
            #expect(seen["erase_unconfirmed"] as? String == "Nothing was erased: type the word erase to confirm.")
            #expect((seen["erased"] as? String)?.hasPrefix("Erased 6 step count objects") == true, "\(seen["erased"] ?? "")")
            // The erased steps are gone (those the import brought after it are another source's).
            #expect(steps.filter { $0.object.sourceRevision.source == .owner }.isEmpty)
            let imported = try #require(seen["imported"] as? String)
            #expect(imported.hasPrefix("Imported ") && imported.contains(" 0 rejected"), "\(imported) (\(records) records written)")
            #expect(seen["import_progress"] as? String == "1")
            let zip = seen["export_zip"] as? [String: Any]
            #expect(zip?["type"] as? String == "application/zip" && zip?["zip"] as? Bool == true, "\(zip ?? [:])")
            // Then everything: no object of any kind is left, nor the characteristics (the date of birth
            // set here, and those the import brought); the history verifies.
            #expect((seen["erased_everything"] as? String)?.contains(" characteristics: every value you kept here is gone") == true, "\(seen["erased_everything"] ?? "")")
            for type in ["HKQuantityTypeIdentifierHeartRate", "HKQuantityTypeIdentifierStepCount", "HKQuantityTypeIdentifierBodyMass", "HKCategoryTypeIdentifierSleepAnalysis"] {
                #expect(try await owner.result(for: SampleQueryDescriptor(type: try ObjectType(type))).isEmpty, "\(type)")
            }
            #expect(try await owner.characteristics([.dateOfBirth]) == [nil])
            #expect(try server.ledger.verify().isValid, "the history still verifies after erasing everything")
            #expect(seen["after_sign_out_lands_on"] as? String == "/sign-in")
            #expect(seen["link_lands_on"] as? String == "/" && seen["link_url_keeps_credential"] as? Bool == false)
            for page in ["sign-in-refused", "summary", "browse", "apps-pending", "apps-granted", "history-live", "data", "signed-out"] {
                #expect(FileManager.default.fileExists(atPath: Self.screenshots.appending(path: "\(page).png").path), "screenshot \(page)")
            }
            #expect(server.web?.openSessions == 0)
            await owner.close()
            await app.close()
        }
    }

    /// The last `days` days, today included: steps (1,000 × the day's number, oldest first),
    /// heart rate every hour (60–83), a night's sleep ending each morning, and body mass.
    static func seed(_ store: HealthStore, days: Int) async throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .current
        let today = calendar.startOfDay(for: Date())
        let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
        let mass = try QuantityType("HKQuantityTypeIdentifierBodyMass")
        let sleep = try CategoryType("HKCategoryTypeIdentifierSleepAnalysis")
        var objects: [HealthObject] = []
        for day in 0..<days {
            let start = calendar.date(byAdding: .day, value: day - (days - 1), to: today)!
            objects.append(.quantitySample(QuantitySample(type: steps, quantity: try Quantity(Double(1000 * (day + 1)), "count"), start: start.addingTimeInterval(3600), end: start.addingTimeInterval(7200))))
            for hour in 0..<24 {
                let time = start.addingTimeInterval(Double(hour) * 3600 + 60)
                objects.append(.quantitySample(QuantitySample(type: Samples.heartRate, quantity: try Quantity(Double(60 + hour), "count/min"), start: time, end: time)))
            }
            // Asleep (core) from 01:00 to 06:00 this morning.
            objects.append(.categorySample(CategorySample(type: sleep, value: 3, start: start.addingTimeInterval(3600), end: start.addingTimeInterval(6 * 3600))))
            objects.append(.quantitySample(QuantitySample(type: mass, quantity: try Quantity(70 + Double(day) / 10, "kg"), start: start.addingTimeInterval(8 * 3600), end: start.addingTimeInterval(8 * 3600))))
        }
        _ = try await store.save(objects)
    }
}
