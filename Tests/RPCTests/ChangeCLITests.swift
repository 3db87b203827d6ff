import Foundation
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import TestSupport
import Testing

/// `healthledger changes` and `healthledger watch` against a real server.
@Suite("healthledger changes and watch", .timeLimit(.minutes(3)))
struct ChangeCLITests {
    @Test("changes pages by anchor and shows an app only what it may read; bad anchors fail clearly")
    func changes() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.client()
            let app = server.client(server.appCredential)
            let ownerSamples = (0..<3).map { Samples.heartRate(80, at: Double($0) * 60) }
            let appSamples = (0..<2).map { Samples.heartRate(70, at: Double($0) * 60 + 30) }
            try await owner.save(ownerSamples)
            try await app.save(appSamples)
            #expect(try await app.delete([appSamples[0].uuid]) == 1)

            let first = try #require(try await cli.json(server.ownerCredential, ["changes", "--type", "HeartRate", "--limit", "4"]) as? [String: Any])
            #expect((first["added"] as? [[String: Any]])?.compactMap { $0["uuid"] as? String } == (ownerSamples.map(\.uuid) + [appSamples[1].uuid]).map(\.uuidString))
            #expect((first["deleted"] as? [[String: Any]])?.isEmpty == true && first["hasMore"] as? Bool == true)
            let anchor = try #require(first["anchor"] as? String)
            let rest = try #require(try await cli.json(server.ownerCredential, ["changes", "--type", "HeartRate", "--anchor", anchor]) as? [String: Any])
            #expect((rest["deleted"] as? [[String: Any]])?.compactMap { $0["uuid"] as? String } == [appSamples[0].uuid.uuidString])
            #expect((rest["added"] as? [[String: Any]])?.isEmpty == true && rest["hasMore"] as? Bool == false)

            // The app may not read heart rate: its own changes only.
            let table = try await cli.run(server.appCredential, ["changes", "--type", "HeartRate", "--unit", "count/s"])
            #expect(table.status == 0, "\(table.error)")
            let lines = table.output.split(separator: "\n")
            #expect(lines.count == 4 && lines[1].contains(appSamples[1].uuid.uuidString) && lines[1].contains("1.16666666667\tcount/s"))
            #expect(lines[2] == "deleted\t\(appSamples[0].uuid.uuidString)" && lines[3].hasPrefix("anchor\t"))

            let bad = try await cli.run(server.ownerCredential, ["changes", "--type", "HeartRate", "--anchor", "bm90IGFuIGFuY2hvcg=="])
            #expect(bad.status != 0 && bad.error.contains("invalidArgument") && bad.error.contains("anchor"))
            let notBase64 = try await cli.run(server.ownerCredential, ["changes", "--type", "HeartRate", "--anchor", "***"])
            #expect(notBase64.status != 0 && notBase64.error.contains("base64"))
            for store in [owner, app] { await store.close() }
        }
    }

    @Test("watch prints the changes so far, then each commit's, one JSON line each")
    func watch() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, drainTimeout: .seconds(600))) { server in
            let owner = server.client()
            let early = Samples.heartRate(60, at: 0)
            try await owner.save(early)
            let watcher = try LineProcess(AuthCLITests.executable, ["watch", "--type", "HeartRate", "--port", "\(server.port)", "--credential", server.ownerCredential])
            defer { watcher.stop() }
            let initial = try #require(try await watcher.nextObject())
            #expect((initial["added"] as? [[String: Any]])?.first?["uuid"] as? String == early.uuid.uuidString)
            let later = Samples.heartRate(61, at: 60)
            try await owner.save(later)
            let update = try #require(try await watcher.nextObject())
            #expect((update["added"] as? [[String: Any]])?.map { $0["uuid"] as? String } == [later.uuid.uuidString])

            let observer = try LineProcess(
                AuthCLITests.executable, ["watch", "--observe", "--type", "HeartRate", "--port", "\(server.port)", "--credential", server.ownerCredential])
            defer { observer.stop() }
            #expect(await observer.nextLine()?.contains("observing") == true)
            try await owner.save(Samples.heartRate(62, at: 120))
            #expect(await observer.nextLine()?.contains("\"changed\"") == true)
            // Read before the shutdown: a change still on its way when the server stops is the
            // next run's to fetch from the anchor, not this stream's.
            #expect(try await watcher.nextObject()?["added"] != nil, "the observer's save, as the watcher saw it")
            await owner.close()
            // Shutting down ends the long-running calls at once, not after the drain timeout.
            let clock = ContinuousClock()
            let started = clock.now
            await server.stop()
            #expect(clock.now - started < .seconds(300), "long before the 600 s drain timeout")
            #expect(await watcher.nextLine() == nil)
            #expect(await observer.nextLine() == nil)
        }
    }
}

@Suite("healthledger characteristics", .timeLimit(.minutes(3)))
struct CharacteristicsCLITests {
    @Test("the owner sets characteristics by name; an app sees only what it may read")
    func characteristics() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.ownerCredential
            let set = try await cli.run(owner, ["characteristics", "--set", "DateOfBirth=1984-03-02", "--set", "BloodType=oNegative", "--set", "FitzpatrickSkinType=3",
                "--set", "CardioFitnessMedicationsUse=betaBlocker+calciumChannelBlocker",
            ])
            #expect(set.status == 0, "\(set.error)")
            #expect(set.output.contains("DateOfBirth\t1984-03-02") && set.output.contains("BloodType\toNegative") && set.output.contains("FitzpatrickSkinType\tIII"))
            #expect(set.output.contains("CardioFitnessMedicationsUse\tcalciumChannelBlocker+betaBlocker"), "\(set.output)")
            let shown = try #require(try await cli.json(server.appCredential, ["characteristics"]) as? [String: String])
            #expect(shown.count == 7 && shown.values.allSatisfy { $0 == "notSet" })
            #expect(try await cli.run(server.appCredential, ["auth", "request", "--read", "DateOfBirth"]).status == 0)
            #expect(try await cli.run(owner, ["auth", "grant", "--app", TestServer.appSource.bundleIdentifier, "--type", "DateOfBirth", "--direction", "read"]).status == 0)
            let granted = try #require(try await cli.json(server.appCredential, ["characteristics", "--type", "DateOfBirth", "--type", "BloodType"]) as? [String: String])
            #expect(granted == ["DateOfBirth": "1984-03-02", "BloodType": "notSet"])

            for bad in ["DateOfBirth=1984-02-30", "BloodType=zPositive", "HeartRate=3", "BloodType", "CardioFitnessMedicationsUse=aspirin", "CardioFitnessMedicationsUse=4"] {
                let run = try await cli.run(owner, ["characteristics", "--set", bad])
                #expect(run.status != 0 && !run.error.isEmpty, "\(bad)")
            }
            let appSets = try await cli.run(server.appCredential, ["characteristics", "--set", "BloodType=aPositive"])
            #expect(appSets.status != 0 && appSets.error.contains("permissionDenied"))
            let cleared = try await cli.run(owner, ["characteristics", "--set", "BloodType=notSet", "--type", "BloodType"])
            #expect(cleared.output == "BloodType\tnotSet\n")
        }
    }
}

@Suite("healthledger stats", .timeLimit(.minutes(3)))
struct StatsCLITests {
    @Test("merged and per-source sums, per-day rows, and clear errors")
    func stats() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.client()
            let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
            let watch = SourceRevision(source: Source(bundleIdentifier: "com.example.watch", name: "Watch"))
            let phone = SourceRevision(source: Source(bundleIdentifier: "com.example.phone", name: "Phone"))
            // 2026-11-20 10:00 UTC: the watch 120 steps over 20 min, the phone 90 over [10:10, 10:25].
            let day = ISO8601DateFormatter().date(from: "2026-11-20T10:00:00Z")!
            try await owner.save([
                .quantitySample(QuantitySample(type: steps, quantity: Quantity(120, .count), start: day, end: day.addingTimeInterval(1200), sourceRevision: watch)),
                .quantitySample(QuantitySample(type: steps, quantity: Quantity(90, .count), start: day.addingTimeInterval(600), end: day.addingTimeInterval(1500), sourceRevision: phone)),
                .quantitySample(QuantitySample(type: steps, quantity: Quantity(10, .count), start: day.addingTimeInterval(86_400), end: day.addingTimeInterval(86_460), sourceRevision: phone)),
            ])
            let total = try #require(try await cli.json(server.ownerCredential, ["stats", "--type", "StepCount", "--by-source"]) as? [[String: Any]])
            #expect(total.count == 1)
            #expect((total[0]["values"] as? [String: Any])?["sum"] as? Double == 160)
            let sources = total[0]["sources"] as? [[String: Any]] ?? []
            #expect(sources.compactMap { $0["source"] as? String } == ["com.example.watch", "com.example.phone"])
            #expect(sources.compactMap { ($0["values"] as? [String: Any])?["sum"] as? Double } == [120, 100])

            let daily = try await cli.run(server.ownerCredential, [
                "stats", "--type", "StepCount", "--from", "2026-11-19", "--to", "2026-11-23T00:00:00Z", "--every", "1day", "--tz", "Europe/Paris",
            ])
            #expect(daily.status == 0, "\(daily.error)")
            #expect(daily.output.split(separator: "\n") == ["2026-11-19T23:00:00Z\t2026-11-20T23:00:00Z\tsum=150\tcount", "2026-11-20T23:00:00Z\t2026-11-21T23:00:00Z\tsum=10\tcount"])

            for (arguments, words) in [
                (["stats", "--type", "HeartRate", "--statistics", "sum"], ["invalidArgument", "cumulativeSum"]),
                (["stats", "--type", "StepCount", "--statistics", "median"], ["median"]),
                (["stats", "--type", "StepCount", "--every", "1fortnight", "--from", "2026-11-19T00:00:00Z", "--to", "2026-11-23T00:00:00Z"], ["--every"]),
                (["stats", "--type", "StepCount", "--every", "1day"], ["--from"]),
                (["stats", "--type", "SleepAnalysis"], ["not a quantity type"]),
                (["stats", "--type", "StepCount", "--tz", "Mars/Olympus"], ["'Mars/Olympus' is not an IANA time zone"]),
                (["stats", "--type", "StepCount", "--anchor", "2026-11-19T00:00:00Z"], ["give --every too"]),
                // The range lies in the supported years, its 10,000-year interval does not.
                (["stats", "--type", "StepCount", "--every", "10000year", "--anchor", "5000-01-01T00:00:00Z", "--from", "2026-11-19T00:00:00Z", "--to", "2026-11-23T00:00:00Z"],
                 ["invalidArgument", "beyond the years 1 to 9999"]),
                // A day or an hour that does not exist is not rolled over into the next.
                (["stats", "--type", "StepCount", "--from", "2026-02-30T00:00:00Z", "--to", "2026-03-05T00:00:00Z"], ["'2026-02-30T00:00:00Z' is not an ISO 8601 date"]),
                (["save", "--type", "StepCount", "--value", "5", "--start", "2026-01-01T25:00:00Z"], ["is not an ISO 8601 date"]),
            ] {
                let run = try await cli.run(server.ownerCredential, arguments)
                #expect(run.status != 0 && words.allSatisfy(run.error.contains), "\(arguments): \(run.error)")
            }
            await owner.close()
        }
    }
}

@Suite("healthledger attachment", .timeLimit(.minutes(3)))
struct AttachmentCLITests {
    @Test("add a scan to a prescription, list it, fetch it back byte for byte, remove it; refuse what is no image or PDF")
    func attachments() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.client()
            let prescription = visionPrescription(issuedDay: 0)
            try await owner.save(.visionPrescription(prescription))
            let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "attachments-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let scan = directory.appending(path: "scan.pdf")
            let pdf = Data("%PDF-1.5\n% a scan\n%%EOF\n".utf8)
            try pdf.write(to: scan)
            let object = prescription.uuid.uuidString

            let added = try #require(try await cli.json(server.ownerCredential, ["attachment", "add", "--object", object, "--file", scan.path, "--metadata", "page=1"]) as? [[String: Any]])
            #expect(added.first?["contentType"] as? String == "application/pdf" && added.first?["name"] as? String == "scan.pdf")
            let uuid = try #require(added.first?["uuid"] as? String)
            let listed = try await cli.run(server.ownerCredential, ["attachment", "list", "--object", object])
            #expect(listed.output == "\(uuid)\tapplication/pdf\t\(pdf.count)\tscan.pdf\n", "\(listed.error)")
            let copy = directory.appending(path: "copy.pdf")
            #expect(try await cli.run(server.ownerCredential, ["attachment", "get", "--uuid", uuid, "--output", copy.path]).status == 0)
            #expect(try Data(contentsOf: copy) == pdf)
            // The app may not read the prescription: the attachment is unknown to it.
            let hidden = try await cli.run(server.appCredential, ["attachment", "list", "--object", object])
            #expect(hidden.status != 0 && hidden.error.contains("notFound"))

            let script = directory.appending(path: "run.sh")
            try Data("#!/bin/sh\necho hi\n".utf8).write(to: script)
            let refused = try await cli.run(server.ownerCredential, ["attachment", "add", "--object", object, "--file", script.path])
            #expect(refused.status != 0 && refused.error.contains("invalidArgument") && refused.error.contains("not accepted"))
            let lying = try await cli.run(server.ownerCredential, ["attachment", "add", "--object", object, "--file", script.path, "--content-type", "image/png"])
            #expect(lying.status != 0 && lying.error.contains("not image/png"))
            #expect(try await cli.run(server.ownerCredential, ["attachment", "remove", "--uuid", uuid]).output == "removed \(uuid)\n")
            #expect(try await cli.run(server.ownerCredential, ["attachment", "list", "--object", object]).output == "")
            #expect(try await cli.run(server.ownerCredential, ["attachment", "list", "--object", "nope"]).error.contains("not a UUID"))
            await owner.close()
        }
    }
}

/// A child process whose standard output is read line by line as it comes.
final class LineProcess: Sendable {
    private let process: ChildProcess
    private let lines: AsyncStream<String>

    /// - Parameter readingStandardError: read the process's standard error (its log)
    ///   instead of its standard output.
    /// - Parameter environment: variables set for the process on top of this one's.
    init(_ executable: URL, _ arguments: [String], readingStandardError: Bool = false, environment: [String: String] = [:]) throws {
        let process = try ChildProcess(
            executable, arguments, captureOutput: !readingStandardError, captureError: readingStandardError, environment: environment)
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        self.process = process
        self.lines = lines
        let fd = readingStandardError ? process.error : process.output
        Thread.detachNewThread {
            // The thread holds the process, whose descriptors close when both are done.
            var pending = Data()
            while true {
                let chunk = ChildProcess.readSome(process.output == fd ? process.output : process.error)
                if chunk.isEmpty { break }
                pending += chunk
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    continuation.yield(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending = Data(pending[(newline + 1)...])
                }
            }
            continuation.finish()
        }
    }

    /// The next line, or nil once the process closed its output.
    func nextLine() async -> String? {
        var iterator = lines.makeAsyncIterator()
        return await iterator.next()
    }

    /// The next line as a JSON object.
    func nextObject() async throws -> [String: Any]? {
        guard let line = await nextLine() else { return nil }
        return try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    }

    func stop() {
        process.terminate()
        process.wait()
    }

    /// Ends the process with SIGKILL: no shutdown of its own.
    func kill() {
        process.terminate(SIGKILL)
        process.wait()
    }

    /// Sends the process `signal` (SIGSTOP, SIGCONT, …) without waiting for it.
    func signal(_ signal: Int32) {
        process.terminate(signal)
    }
}
