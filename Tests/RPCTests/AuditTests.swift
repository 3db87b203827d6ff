import Crypto
import Foundation
import HealthExport
import HealthLedgerSDK
import Ledger
import LedgerSchema
import SwiftProtobuf
import TestSupport
import Testing

@Suite("The owner's audit trail", .timeLimit(.minutes(3)))
struct AuditTests {
    static let app = TestServer.appSource.bundleIdentifier

    static func weight(_ kilograms: Double, version: Double) -> HealthObject {
        .quantitySample(QuantitySample(
            type: try! QuantityType(Types.bodyMass.identifier), quantity: try! Quantity(kilograms, "kg"), start: Samples.base, end: Samples.base,
            metadata: [MetadataKey.syncIdentifier: .string("scale-1"), MetadataKey.syncVersion: .number(version)]))
    }

    /// Every event, read through the SDK in small batches.
    static func everything(_ store: HealthStore, _ filter: AuditFilter = AuditFilter(), includeStored: Bool = false) async throws -> [AuditEvent] {
        var events: [AuditEvent] = []
        var caughtUp = false
        for try await batch in try await store.audit(filter, includeStored: includeStored, batchSize: 4) {
            #expect(!caughtUp, "nothing follows the caught-up batch")
            events += batch.events
            caughtUp = batch.caughtUp
        }
        #expect(caughtUp)
        return events
    }

    @Test("the owner reads who did what, in sentences, with every filter; apps are refused")
    func ownerAudit() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let heartRates = (0..<3).map { Samples.heartRate(Double(60 + $0), at: Double($0)) }
            try await app.save(heartRates)
            let first = Self.weight(70, version: 1)
            try await owner.save(first)
            let second = Self.weight(71, version: 3)
            try await owner.save(second)
            _ = try await app.requestAuthorization(toShare: [], read: [Types.stepCount])
            try await owner.decideAuthorization(app: Self.app, type: Types.stepCount, direction: .read, decision: .granted)
            let spare = try await server.ledger.issueCredential(for: .app(TestServer.appSource), label: "spare")
            try await server.ledger.revokeCredential(id: credentialID(spare))

            let all = try await Self.everything(owner, includeStored: true)
            #expect(all.map(\.sequence) == Array(1...UInt64(all.count)), "every event, in order, none twice")
            let sentences = all.map(\.sentence)
            let walk = "app com.example.walk (Walk)"
            let firstID = first.uuid.uuidString
            let secondID = second.uuid.uuidString
            for expected in [
                "\(walk) was granted share of HeartRate by the owner",
                "\(walk) asked to read StepCount",
                "\(walk) was granted read of StepCount by the owner",
                "BodyMass \(firstID) saved by the owner",
                "BodyMass \(firstID) deleted: replaced by sync version 3, \(secondID) (the owner)",
                "credential \(credentialID(spare)) was issued to \(walk) (spare) by the operator",
                "credential \(credentialID(spare)) of \(walk) was revoked by the operator",
            ] {
                #expect(sentences.contains(expected), "missing: \(expected)\nin: \(sentences)")
            }
            #expect(sentences[0].hasPrefix("ledger alice was created by the system, signing its tree heads with key "))
            // One save of three samples is one line.
            let lines = AuditLine.lines(all)
            let saved = try #require(lines.first { $0.sentence == "3 samples of HeartRate saved by \(walk)" })
            #expect(saved.sequences.count == 3 && saved.kind == .objectSaved && saved.actor == .app(TestServer.appSource))
            #expect(lines.count == all.count - 2)

            // The stored bytes chain: each hash is SHA-256 of the stored bytes, and the next event's previous hash.
            for (previous, event) in zip(all, all.dropFirst()) {
                let stored = try #require(event.stored)
                #expect(eventHash(stored) == event.hash)
                #expect(Array(try Healthledger_V1_LedgerEvent(serializedBytes: stored).previousHash) == previous.hash)
            }
            #expect(try await Self.everything(owner).allSatisfy { $0.stored == nil }, "stored bytes only when asked for")

            // Each filter gives exactly the events it describes, in order.
            func check(_ filter: AuditFilter, _ expected: (AuditEvent) -> Bool, _ what: String) async throws {
                let got = try await Self.everything(owner, filter)
                #expect(got.map(\.sequence) == all.filter(expected).map(\.sequence), "\(what)")
                #expect(!got.isEmpty, "\(what) matches something")
            }
            try await check(AuditFilter(actor: .app(Self.app)), { $0.actor == .app(TestServer.appSource) }, "actor app")
            try await check(AuditFilter(actor: .anyApp), { if case .app = $0.actor { true } else { false } }, "any app")
            try await check(AuditFilter(actor: .operator), { $0.actor == .operator }, "operator")
            try await check(AuditFilter(kinds: [.objectDeleted, .credentialRevoked]), { [.objectDeleted, .credentialRevoked].contains($0.kind) }, "kinds")
            try await check(AuditFilter(fromSequence: 4, toSequence: 9), { (4...9).contains($0.sequence) }, "sequence range")
            let middle = all[all.count / 2].time
            try await check(AuditFilter(since: middle), { $0.time >= middle }, "since")
            try await check(AuditFilter(until: middle), { $0.time < middle }, "until")
            try await check(AuditFilter(type: Types.stepCount), { $0.sentence.contains("StepCount") }, "type named in decisions")
            try await check(
                AuditFilter(type: Types.bodyMass), { $0.objectType == Types.bodyMass.identifier || $0.sentence.contains("BodyMass") }, "type of objects")
            try await check(AuditFilter(object: first.uuid), { $0.objectUUID == first.uuid }, "object")
            // The replacing object is named by the delete of the object it replaced.
            try await check(AuditFilter(object: second.uuid), { $0.objectUUID == second.uuid || $0.sentence.contains("\(secondID)") }, "replacement")
            try await check(
                AuditFilter(actor: .owner, kinds: [.objectSaved], type: Types.bodyMass), { $0.actor == .owner && $0.kind == .objectSaved && $0.objectType == Types.bodyMass.identifier },
                "filters together")
            #expect(try await Self.everything(owner, AuditFilter(fromSequence: 10_000)).isEmpty)

            // Apps never read it, whatever they are granted.
            await expectRPCError(.permissionDenied, .authorizationDenied, "app audit") { _ = try await Self.everything(app) }
            await expectRPCError(.invalidArgument, .invalidArgument, "a watch with an end") {
                for try await _ in try await owner.watchAudit(AuditFilter(toSequence: 3)) {}
            }
            await owner.close()
            await app.close()
        }
    }

    @Test("audit batches: 500 by default, a batch_size above 5,000 taken as 5,000, and at most 1 MiB of events each")
    func batches() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save((0..<6_000).map { Samples.heartRate(70, at: Double($0)) })
            let heartRates = AuditFilter(kinds: [.objectSaved], type: Types.heartRate)
            func sizes(batchSize: Int, includeStored: Bool = false) async throws -> [Int] {
                var sizes: [Int] = []
                var caughtUp = false
                var bytes: [Int] = []
                for try await batch in try await owner.audit(heartRates, includeStored: includeStored, batchSize: batchSize) {
                    #expect(!caughtUp, "nothing follows the caught-up batch")
                    sizes.append(batch.events.count)
                    bytes.append(batch.events.reduce(0) { $0 + ($1.stored?.count ?? 0) + $1.sentence.utf8.count + 128 })
                    caughtUp = batch.caughtUp
                }
                #expect(caughtUp)
                #expect(bytes.allSatisfy { $0 <= 1 << 20 }, "\(bytes)")
                return sizes
            }
            #expect(try await sizes(batchSize: 0) == Array(repeating: 500, count: 12))
            #expect(try await sizes(batchSize: 5_000) == [5_000, 1_000])
            #expect(try await sizes(batchSize: 6_000) == [5_000, 1_000], "more than 5,000 is taken as 5,000, not refused")
            // With each event's stored bytes the megabyte fills first.
            let stored = try await sizes(batchSize: 5_000, includeStored: true)
            #expect(stored.reduce(0, +) == 6_000 && stored.count > 2 && stored.dropLast().allSatisfy { $0 < 5_000 }, "\(stored)")
            await owner.close()
        }
    }

    @Test("a watched audit streams events as they commit, and ends when the owner's credential is revoked")
    func watchedAudit() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let watcherCredential = try await server.ledger.issueCredential(for: .owner)
            let watcher = server.client(watcherCredential)
            var batches = try await watcher.watchAudit(AuditFilter(actor: .app(Self.app))).makeAsyncIterator()
            let initial = try #require(try await batches.next())
            #expect(initial.caughtUp && initial.events.map(\.kind) == [.authorizationRequested], "the app has only asked to share")

            // The owner's save does not match the filter; the app's does, and arrives alone.
            try await owner.save(Samples.heartRate(80, at: 10))
            let sample = Samples.heartRate(81, at: 11)
            try await app.save(sample)
            let next = try #require(try await batches.next())
            #expect(next.events.map(\.objectUUID) == [sample.uuid])
            #expect(next.events.first?.sentence == "HeartRate \(sample.uuid.uuidString) saved by app com.example.walk (Walk)")
            #expect(next.headSequence >= next.events[0].sequence)

            try await server.ledger.revokeCredential(id: credentialID(watcherCredential))
            await expectRPCError(.permissionDenied, nil, "watch of a revoked credential") { while try await batches.next() != nil {} }
            await watcher.close()
            await owner.close()
            await app.close()
        }
    }

    @Test("healthledger audit: on the data directory and through the server, a table or JSON lines, and --follow")
    func cli() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await app.save((0..<3).map { Samples.heartRate(Double(60 + $0), at: Double($0)) })
            let cli = AuthCLITests.executable
            let dataDir = server.directory.path

            let table = try await runProcess(cli, ["audit", "alice", "--data-dir", dataDir])
            #expect(table.status == 0, "\(table.error)")
            #expect(table.output.contains("\t3 samples of HeartRate saved by app com.example.walk (Walk)\n"), "\(table.output)")
            #expect(table.output.hasPrefix("1\t"))

            let json = try await runProcess(
                cli, ["audit", "--port", "\(server.port)", "--credential", server.ownerCredential, "--json", "--kind", "objectSaved", "--actor", Self.app])
            #expect(json.status == 0, "\(json.error)")
            let objects = json.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(objects.count == 3 && objects.allSatisfy { $0["kind"] as? String == "objectSaved" && $0["actor"] as? String == "app \(Self.app)" })
            #expect(objects.allSatisfy { ($0["hash"] as? String)?.count == 64 })

            let refused = try await runProcess(cli, ["audit", "--port", "\(server.port)", "--credential", server.appCredential])
            #expect(refused.status != 0 && refused.error.contains("permissionDenied"), "\(refused.error)")
            let bad = try await runProcess(cli, ["audit", "alice", "--data-dir", dataDir, "--kind", "objectEaten"])
            #expect(bad.status != 0 && bad.error.contains("objectEaten"))
            let badTime = try await runProcess(cli, ["audit", "alice", "--data-dir", dataDir, "--since", "yesterday"])
            #expect(badTime.status != 0 && badTime.error.contains("ISO 8601"))

            // --follow on the data directory sees the server's commits (another process) as they land.
            let onDisk = try LineProcess(cli, ["audit", "alice", "--data-dir", dataDir, "--follow", "--kind", "objectDeleted", "--json"])
            defer { onDisk.stop() }
            let doomed = Samples.heartRate(50, at: 500)
            try await owner.save(doomed)
            #expect(try await owner.delete([doomed.uuid]) == 1)
            let deleted = try #require(try await onDisk.nextObject())
            #expect(deleted["objectUUID"] as? String == doomed.uuid.uuidString && deleted["kind"] as? String == "objectDeleted")

            // --follow through the server: the lines so far, then each new commit's.
            let follower = try LineProcess(cli, ["audit", "--port", "\(server.port)", "--credential", server.ownerCredential, "--follow", "--type", "BodyMass"])
            defer { follower.stop() }
            try await owner.save(AuditTests.weight(72, version: 1))
            // First the events so far that name BodyMass (the app's share request and grant), then the save.
            var lines: [String] = []
            while let line = await follower.nextLine() {
                lines.append(line)
                if line.hasSuffix("saved by the owner") { break }
            }
            #expect(lines.count == 3 && lines[0].contains("asked to share") && lines[1].contains("granted share of BodyMass"), "\(lines)")
            #expect(lines.last?.contains("BodyMass") == true)
            await owner.close()
            await app.close()
        }
    }

    @Test("export --events writes the hash-chained log with its head; verify --events checks it anywhere and names the line of a tampered copy")
    func eventLogExport() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await app.save((0..<5).map { Samples.heartRate(Double(60 + $0), at: Double($0)) })
            try await owner.save(Self.weight(70, version: 1))
            let cli = AuthCLITests.executable
            let directory = server.directory.appending(path: "exports")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appending(path: "events.jsonl")

            let exported = try await runProcess(cli, ["export", "alice", "--events", "-o", file.path, "--port", "\(server.port)", "--credential", server.ownerCredential])
            #expect(exported.status == 0, "\(exported.error)")
            let head = try server.ledger.head()
            let headText = "\(head.sequence):\(head.hash.map { String(format: "%02x", $0) }.joined())"
            #expect(exported.error.contains("head \(headText)"))
            let verified = try await runProcess(cli, ["verify", "--events", file.path])
            #expect(verified.status == 0 && verified.output.contains("OK: \(head.sequence) events of ledger alice") && verified.output.contains(headText), "\(verified.output)")

            // An app may not export the log.
            let refused = try await runProcess(cli, ["export", "alice", "--events", "--port", "\(server.port)", "--credential", server.appCredential])
            #expect(refused.status != 0 && refused.error.contains("permissionDenied"))

            // Tampered copies: a changed event re-hashed (the chain breaks at the next one), a line gone, the end cut off.
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map(String.init)
            func write(_ lines: [String]) throws -> URL {
                let copy = directory.appending(path: "copy-\(UUID().uuidString).jsonl")
                try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: copy)
                return copy
            }
            var event = try #require(try JSONSerialization.jsonObject(with: Data(lines[4].utf8)) as? [String: Any])
            var stored = try Healthledger_V1_LedgerEvent(serializedBytes: Data(base64Encoded: event["stored"] as! String)!)
            stored.commitTimeUs += 1
            let rewritten: [UInt8] = try stored.serializedBytes()
            event["stored"] = Data(rewritten).base64EncodedString()
            event["hash"] = eventHash(rewritten).map { String(format: "%02x", $0) }.joined()
            var changed = lines
            changed[4] = String(decoding: try JSONSerialization.data(withJSONObject: event, options: [.sortedKeys]), as: UTF8.self)
            let cases: [([String], String)] = [
                (changed, "line 6: event 5: its previous hash is not event 4's hash"),
                (lines.enumerated().filter { $0.offset != 3 }.map(\.element), "line 4: event 4 follows event 2"),
                (Array(lines.dropLast()), "the end line is missing"),
            ]
            for (copy, expected) in cases {
                let result = try await runProcess(cli, ["verify", "--events", try write(copy).path])
                #expect(result.status == 2 && result.output.contains(expected), "\(result.output)")
            }

            // verify on the data directory: the head, the projections, the attachments; a pinned
            // head and an earlier export that the ledger extends.
            let dataDir = server.directory.path
            let plain = try await runProcess(cli, ["verify", "alice", "--data-dir", dataDir])
            #expect(plain.status == 0 && plain.output.hasPrefix("head \(headText)\n"), "\(plain.output)")
            #expect(plain.output.contains("projections equal a fresh replay") && plain.output.contains("0 attachments match their events"))
            try await owner.save(Samples.heartRate(90, at: 100))
            let extended = try await runProcess(cli, ["verify", "alice", "--data-dir", dataDir, "--expect-head", headText, "--against", file.path, "--quick"])
            #expect(extended.status == 0 && extended.output.contains("extends the pinned head \(head.sequence)") && extended.output.contains("extends the history"), "\(extended.output)")
            var wrongHead = headText
            wrongHead.replaceSubrange(wrongHead.index(before: wrongHead.endIndex)..., with: headText.hasSuffix("0") ? "1" : "0")
            let pinnedWrong = try await runProcess(cli, ["verify", "alice", "--data-dir", dataDir, "--expect-head", wrongHead, "--quick"])
            #expect(pinnedWrong.status == 2 && pinnedWrong.output.contains("FAILED: event \(head.sequence): its hash is"), "\(pinnedWrong.output)")
            let badHead = try await runProcess(cli, ["verify", "alice", "--data-dir", dataDir, "--expect-head", "12:zz"])
            #expect(badHead.status != 0 && badHead.error.contains("SEQ:HASH"))
            // A history that differs from event 4 on (here the export's, re-chained): named at event 4.
            var chain = Array(lines[0...3])
            var previous = try #require([UInt8](hexString: (try JSONSerialization.jsonObject(with: Data(lines[3].utf8)) as! [String: Any])["hash"] as! String))
            for line in lines[4...].dropLast() {
                var event = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
                var stored = try Healthledger_V1_LedgerEvent(serializedBytes: Data(base64Encoded: event["stored"] as! String)!)
                if stored.sequence == 4 { stored.commitTimeUs += 1 } else { stored.previousHash = Data(previous) }
                let bytes: [UInt8] = try stored.serializedBytes()
                previous = eventHash(bytes)
                event["stored"] = Data(bytes).base64EncodedString()
                event["hash"] = previous.map { String(format: "%02x", $0) }.joined()
                chain.append(String(decoding: try JSONSerialization.data(withJSONObject: event, options: [.sortedKeys]), as: UTF8.self))
            }
            let last = try JSONSerialization.jsonObject(with: Data(chain.last!.utf8)) as! [String: Any]
            chain.append(#"{"end":true,"events":\#(last["sequence"]!),"headHash":"\#(last["hash"]!)","headSequence":\#(last["sequence"]!)}"#)
            let other = try write(chain)
            #expect(try await runProcess(cli, ["verify", "--events", other.path]).status == 0, "the forged export is consistent on its own")
            let diverged = try await runProcess(cli, ["verify", "alice", "--data-dir", dataDir, "--against", other.path, "--quick"])
            #expect(diverged.status == 2 && diverged.output.contains("FAILED: event 4: its hash is"), "\(diverged.output)")
            await owner.close()
            await app.close()
        }
    }
}
