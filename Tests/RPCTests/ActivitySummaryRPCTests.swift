import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import TestSupport
import Testing

@Suite("Activity summaries over RPC", .timeLimit(.minutes(3)))
struct ActivitySummaryRPCTests {
    static func day(_ text: String) -> CalendarDay { CalendarDay(text)! }

    /// A day's summary kept by sync identifier `day`, at `version`.
    static func summary(_ day: String, exercise: Double, version: Int = 1) throws -> ActivitySummary {
        ActivitySummary(
            day: Self.day(day), activeEnergyBurned: try Quantity(400, "kcal"), activeEnergyBurnedGoal: try Quantity(500, "kcal"),
            exerciseTime: try Quantity(exercise, "min"), exerciseTimeGoal: try Quantity(30, "min"), standHours: try Quantity(10, "count"),
            standHoursGoal: try Quantity(12, "count"),
            metadata: [MetadataKey.syncIdentifier: .string("rings-\(day)"), MetadataKey.syncVersion: .number(Double(version))])
    }

    @Test("the owner's summaries by days, first and last included; a later version of a day replaces it, live updates show it; as of before, the old one")
    func queries() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save(try ["2025-05-16", "2025-05-17", "2025-05-18", "2025-05-19"].map { .activitySummary(try Self.summary($0, exercise: 20)) })
            let middle = ActivitySummaryQueryDescriptor(from: Self.day("2025-05-17"), to: Self.day("2025-05-18"))
            #expect(try await middle.result(for: owner).map(\.day.description) == ["2025-05-17", "2025-05-18"])
            #expect(try await ActivitySummaryQueryDescriptor(from: Self.day("2025-05-19")).result(for: owner).map(\.day.description) == ["2025-05-19"])
            #expect(try await ActivitySummaryQueryDescriptor(to: Self.day("2025-05-16")).result(for: owner).map(\.day.description) == ["2025-05-16"])
            #expect(try await ActivitySummaryQueryDescriptor().result(for: owner).count == 4)
            await #expect(throws: HealthError.self) {
                _ = try await ActivitySummaryQueryDescriptor(from: Self.day("2025-05-18"), to: Self.day("2025-05-17")).result(for: owner)
            }
            let before = try server.ledger.head().sequence

            // Today's rings fill: the watched days see the new version replace the old.
            var updates = try await middle.updates(for: owner).makeAsyncIterator()
            let initial = try #require(try await updates.next())
            #expect(initial.summaries.map(\.day.description) == ["2025-05-17", "2025-05-18"] && initial.removed.isEmpty)
            let old = try #require(initial.summaries.last)
            let result = try await owner.save(.activitySummary(try Self.summary("2025-05-18", exercise: 45, version: 2)))
            #expect(result.disposition == .replaced(previous: old.uuid))
            var replaced: ActivitySummaryUpdate?
            while replaced?.summaries.isEmpty != false { replaced = try await updates.next() }
            #expect(replaced?.summaries.map(\.exerciseTime.value) == [45] && replaced?.removed == [old.uuid])
            #expect(try await middle.result(for: owner).last?.exerciseTime.value == 45)
            // An equal version is ignored, as for any synced object.
            #expect(try await owner.save(.activitySummary(try Self.summary("2025-05-18", exercise: 50, version: 2))).disposition != .saved)

            let then = owner.asOf(.sequence(before))
            #expect(try await middle.result(for: then).last?.exerciseTime.value == 20)
            #expect(try server.ledger.verify().isValid)
            await owner.close()
        }
    }

    @Test("apps read summaries only with a read grant and never save one; a summary that breaks the rules is refused naming its field")
    func authorizationAndValidation() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save(.activitySummary(try Self.summary("2025-05-18", exercise: 20)))
            let (source, credential) = try await server.addApp("com.example.rings", name: "Rings", share: [])
            let app = server.client(credential)
            let everyDay = ActivitySummaryQueryDescriptor()

            // Read-only for apps, as in HealthKit: no share request, no share grant, no save.
            await expectRPCError(.invalidArgument, .invalidArgument, "a request to share summaries") {
                _ = try await app.requestAuthorization(toShare: [.activitySummary], read: [])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "a share grant of summaries") {
                try await owner.decideAuthorization(app: source.bundleIdentifier, type: .activitySummary, direction: .share, decision: .granted)
            }
            await expectRPCError(.permissionDenied, .authorizationDenied, "an app's save of a summary") {
                try await app.save(.activitySummary(try Self.summary("2025-05-19", exercise: 5)))
            }
            // Reads: nothing before a grant, or after it is denied or revoked; everything with it.
            #expect(try await everyDay.result(for: app).isEmpty, "not determined")
            #expect(try await app.requestAuthorization(toShare: [], read: [.activitySummary]) == 1)
            #expect(try await everyDay.result(for: app).isEmpty, "pending")
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: .activitySummary, direction: .read, decision: .granted)
            #expect(try await everyDay.result(for: app).map(\.day.description) == ["2025-05-18"], "granted")
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: .activitySummary, direction: .read, decision: .revoked)
            #expect(try await everyDay.result(for: app).isEmpty, "revoked")
            var changes = try await everyDay.updates(for: app).makeAsyncIterator()
            #expect(try await changes.next()?.summaries.isEmpty == true, "revoked, the live query too")

            // Validation names the field.
            var badDay = try Self.summary("2025-02-28", exercise: 1)
            badDay.day.day = 30
            var negative = try Self.summary("2025-05-20", exercise: 1)
            negative.standHours = try Quantity(-1, "count")
            var wrongUnit = try Self.summary("2025-05-21", exercise: 1)
            wrongUnit.exerciseTime = try Quantity(10, "kcal")
            var noMode = try Self.summary("2025-05-22", exercise: 1)
            noMode.moveMode = .notSet
            for (summary, field) in [(badDay, "date"), (negative, "standHours"), (wrongUnit, "exerciseTime.unit"), (noMode, "moveMode")] {
                let refusal = await expectRPCError(.invalidArgument, .invalidArgument, field) { try await owner.save(.activitySummary(summary)) }
                #expect(refusal?.message.contains(field.components(separatedBy: ".")[0]) == true, "\(refusal?.message ?? "")")
            }
            #expect(try await everyDay.result(for: owner).count == 1, "nothing refused was kept")
            await app.close()
            await owner.close()
        }
    }

    @Test("the owner erases summaries by type and days; the erased day is gone from queries and the log's bytes")
    func erasure() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save(try ["2025-05-17", "2025-05-18"].map { .activitySummary(try Self.summary($0, exercise: 20)) })
            let day = Self.day("2025-05-18")
            let erased = try await owner.erase(
                .matching(.activitySummary, overlapping: DateInterval(start: day.start.addingTimeInterval(43_200), duration: 0)), reason: "asked")
            #expect(erased.objects == 1)
            #expect(try await ActivitySummaryQueryDescriptor().result(for: owner).map(\.day.description) == ["2025-05-17"])
            #expect(try server.ledger.verify().isValid)
            await owner.close()
        }
    }

    @Test("healthledger activity: the days' rings as a table and as JSON; a day that is not one is refused")
    func cli() async throws {
        try await withTestServer { server in
            let owner = server.client()
            var timeMode = try Self.summary("2025-05-18", exercise: 42)
            timeMode.moveMode = .appleMoveTime
            timeMode.moveTime = try Quantity(35, "min")
            timeMode.moveTimeGoal = try Quantity(30, "min")
            try await owner.save([.activitySummary(try Self.summary("2025-05-17", exercise: 20)), .activitySummary(timeMode)])
            let cli = AuthCLITests.Session(server: server)
            let table = try await cli.run(server.ownerCredential, ["activity", "--from", "2025-05-17", "--to", "2025-05-18"])
            #expect(table.status == 0, "\(table.error)")
            #expect(table.output == """
                DAY\tMOVE\tEXERCISE\tSTAND
                2025-05-17\t400/500 kcal\t20/30 min\t10/12 h
                2025-05-18\t35/30 min\t42/30 min\t10/12 h

                """, "\(table.output)")
            let rows = try #require(try await cli.json(server.ownerCredential, ["activity", "--from", "2025-05-18"]) as? [[String: Any]])
            #expect(rows.count == 1 && rows[0]["day"] as? String == "2025-05-18" && rows[0]["exercise"] as? Double == 42)
            let bad = try await cli.run(server.ownerCredential, ["activity", "--from", "2025-02-30"])
            #expect(bad.status != 0 && bad.error.contains("--from takes a day as yyyy-MM-dd, not '2025-02-30'"), "\(bad.error)")
            let backwards = try await cli.run(server.ownerCredential, ["activity", "--from", "2025-05-18", "--to", "2025-05-17"])
            #expect(backwards.status != 0 && backwards.error.contains("before the first"), "\(backwards.error)")
            await owner.close()
        }
    }
}
