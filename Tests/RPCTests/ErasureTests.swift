import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import Ledger
import LedgerSchema
import TestSupport
import Testing

@Suite("Erasure (docs/SEMANTICS.md §5): values gone from every copy, history still verifiable", .timeLimit(.minutes(5)))
struct ErasureTests {
    /// Whether `marker`'s bytes appear anywhere in the file.
    static func file(_ url: URL, contains marker: String) throws -> Bool {
        let data = try Data(contentsOf: url)
        return data.range(of: Data(marker.utf8)) != nil
    }

    @Test("an erased sample's value and metadata leave the log, the projections and data.mdb; pinned heads and proofs from before still verify")
    func erasedBytesAreGone() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let marker = "erase-me-\(UUID().uuidString)"
            let secret = Samples.heartRate(187.25, at: 0, metadata: ["marker": .string(marker)])
            let kept = Samples.heartRate(61, at: 60, metadata: ["marker": .string("kept")])
            try await owner.save([secret, kept])
            let data = server.directory.appending(path: "ledgers/alice/data.mdb")
            // Encrypted (tools/test.sh's second pass), it never was in the clear.
            #expect(try Self.file(data, contains: marker) == !server.ledger.isEncrypted)

            // Deleted first, as the issue's user did: the delete alone leaves the bytes.
            try await owner.delete([secret.uuid])
            let pinned = try server.ledger.head()
            let before = try await owner.treeHead()
            let inclusion = try await owner.inclusionProof(of: 2, in: before)

            let erasure = try await owner.erase(.objects([secret.uuid]), reason: "GDPR Art. 17 request")
            #expect(erasure.objects == 1 && erasure.events == 2 && erasure.sequence == pinned.sequence + 1)

            // Gone from the file's bytes (and the commit journal's, which held the save and the
            // delete), the log's bytes and the audit trail's sentences.
            #expect(try !Self.file(data, contains: marker))
            #expect(try !Self.file(data.deletingLastPathComponent().appending(path: "commits.journal"), contains: marker))
            var sentences: [String] = []
            for try await batch in try await owner.audit(includeStored: true) {
                for event in batch.events {
                    #expect(Data(event.stored ?? []).range(of: Data(marker.utf8)) == nil)
                    #expect(eventHash(event.stored!) == event.hash)
                    sentences.append(event.sentence)
                }
            }
            #expect(sentences.last == "1 HeartRate erased by the owner (GDPR Art. 17 request): 2 events emptied", "\(sentences)")
            #expect(sentences.contains { $0.contains("its contents since erased") })
            #expect(try await owner.object(with: kept.uuid) != nil)
            #expect(try await owner.object(with: secret.uuid) == nil)

            // The history still verifies, with the head pinned and the proofs issued before.
            let report = try server.ledger.verify(expectedHead: pinned)
            #expect(report.isValid, "\(String(describing: report.problem))")
            #expect(try server.ledger.replay().identical)
            let after = try await owner.treeHead()
            let consistency = try await owner.consistencyProof(from: before, to: after)
            try TreeProofs.verify(consistency, firstRoot: before.rootHash, secondRoot: after.rootHash)
            try TreeProofs.verify(inclusion, root: before.rootHash)
            #expect(try await owner.inclusionProof(of: 2, in: after).eventHash == inclusion.eventHash)

            // A backup made after holds none of it.
            let backup = server.directory.appending(path: "backup-after")
            _ = try server.ledger.backup(to: backup)
            #expect(try !Self.file(backup.appending(path: "data.mdb"), contains: marker))
        }
    }

    @Test("single saves, committed on their connection's event loop when the committer is idle, take turns with an erasure's scrubbing: every acknowledged save is kept, the erased sample is gone, the history verifies")
    func savesDuringErasure() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let marker = "erase-me-\(UUID().uuidString)"
            let secret = Samples.heartRate(187.25, at: 0, metadata: ["marker": .string(marker)])
            try await owner.save([secret])
            let savers = (0..<4).map { _ in server.client() }
            async let erasure = owner.erase(.objects([secret.uuid]), reason: "erased while others save")
            let saved = try await withThrowingTaskGroup(of: [UUID].self) { group in
                for (index, store) in savers.enumerated() {
                    group.addTask {
                        var uuids: [UUID] = []
                        for step in 0..<50 {
                            let sample = Samples.heartRate(Double(60 + step), at: TimeInterval(1 + index * 100 + step))
                            try await store.save([sample])
                            uuids.append(sample.uuid)
                        }
                        return uuids
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(try await erasure.objects == 1)
            #expect(saved.count == 200)
            for uuid in saved { #expect(try await owner.object(with: uuid) != nil) }
            #expect(try await owner.object(with: secret.uuid) == nil)
            #expect(try !Self.file(server.directory.appending(path: "ledgers/alice/data.mdb"), contains: marker))
            let report = try server.ledger.verify()
            #expect(report.isValid, "\(String(describing: report.problem))")
            #expect(try server.ledger.replay().identical)
        }
    }

    @Test("erasing a live sample deletes it (anchored queries report it) and its statistics are recomputed without it")
    func erasingLiveObjects() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let samples = (0..<4).map { Samples.heartRate(Double(60 + $0 * 10), at: Double($0) * 60) }
            // A later hour's sample closes the first hour: its statistics come from its rollup row.
            let later = Samples.heartRate(65, at: 7_200)
            try await owner.save(samples + [later])
            let type = Samples.heartRate.objectType
            let first = try await owner.result(for: AnchoredObjectQueryDescriptor(type: type))
            #expect(first.addedObjects.count == 5)
            let hour = DateInterval(start: Samples.base, duration: 3_600)
            func maximum() async throws -> Double? {
                try await owner.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, interval: hour, options: .discreteMax))?
                    .maximumQuantity()?.doubleValue(for: HealthUnit("count/min"))
            }
            #expect(try await maximum() == 90)

            let erasure = try await owner.erase(
                .matching(type, predicate: .predicateForQuantitySamples(with: .greater, quantity: try Quantity(75, "count/min"))), reason: "")
            #expect(erasure.objects == 2)
            let changes = try await owner.result(for: AnchoredObjectQueryDescriptor(type: type, anchor: first.newAnchor))
            #expect(Set(changes.deletedObjects.map(\.uuid)) == Set(samples[2...].map(\.uuid)))
            let remaining = try await SampleQueryDescriptor(type: type).result(for: owner)
            #expect(Set(remaining.map(\.uuid)) == Set(samples[..<2].map(\.uuid) + [later.uuid]))
            #expect(try await maximum() == 70, "the hour's statistics without the erased samples")
            #expect(try server.ledger.verify().isValid)
            #expect(try server.ledger.replay().identical)
        }
    }

    @Test("an app erases only what it saved; a legal hold refuses erasure until lifted")
    func authorizationAndHold() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let ownersSample = Samples.heartRate(70, at: 0)
            try await owner.save(ownersSample)
            let appsSample = Samples.heartRate(80, at: 60)
            try await app.save(appsSample)

            // Another source's object is as unknown to the app as a missing one.
            await #expect(throws: RPCError.self) { try await app.erase(.objects([ownersSample.uuid])) }
            do {
                try await app.erase(.source("org.healthledger.owner"))
                Issue.record("an app erased another source")
            } catch let error as RPCError {
                #expect(error.code == .permissionDenied)
            }

            try server.ledger.setLegalHold(reason: "litigation 2026-41")
            do {
                try await app.erase(.objects([appsSample.uuid]))
                Issue.record("erased under a legal hold")
            } catch let error as RPCError {
                #expect(error.code == .failedPrecondition && error.message.contains("litigation 2026-41"), "\(error)")
            }
            try server.ledger.setLegalHold(reason: nil)
            let erasure = try await app.erase(.source(TestServer.appSource.bundleIdentifier), reason: "app uninstalled")
            #expect(erasure.objects == 1)
            #expect(try await owner.object(with: appsSample.uuid) == nil)
            #expect(try await owner.object(with: ownersSample.uuid) != nil)
            #expect(try server.ledger.verify().isValid)
        }
    }

    @Test("healthledger erase, admin hold and release-hold; the event export still verifies offline and holds no erased byte")
    func commandLine() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.executable
            let owner = server.client()
            let marker = "cli-marker-\(UUID().uuidString)"
            let secret = Samples.heartRate(150, at: 0, metadata: ["marker": .string(marker)])
            try await owner.save([secret, Samples.heartRate(62, at: 30)])
            let connection = ["--port", "\(server.port)", "--credential", server.ownerCredential]
            let dataDir = server.directory.path

            let held = try await runProcess(cli, ["admin", "hold", "alice", "--reason", "audit 7", "--data-dir", dataDir])
            #expect(held.status == 0 && held.output.contains("held alice"), "\(held.error)")
            let refused = try await runProcess(cli, ["erase", secret.uuid.uuidString, "--reason", "asked"] + connection)
            #expect(refused.status != 0 && refused.error.contains("legal hold (audit 7)"), "\(refused.error)")
            let released = try await runProcess(cli, ["admin", "release-hold", "alice", "--data-dir", dataDir])
            #expect(released.status == 0 && released.output.contains("released alice (held: audit 7)"), "\(released.error)")
            let notHeld = try await runProcess(cli, ["admin", "release-hold", "alice", "--data-dir", dataDir])
            #expect(notHeld.status != 0 && notHeld.error.contains("under no legal hold"), "\(notHeld.output) \(notHeld.error)")

            let bad = try await runProcess(cli, ["erase", secret.uuid.uuidString, "--source", "com.example.walk"] + connection)
            #expect(bad.status != 0 && bad.error.contains("one of them"), "\(bad.error)")
            let erased = try await runProcess(cli, ["erase", secret.uuid.uuidString, "--reason", "asked", "--json"] + connection)
            #expect(erased.status == 0 && erased.output.contains("\"erased\"") && erased.output.contains("\"events\""), "\(erased.output) \(erased.error)")
            let again = try await runProcess(cli, ["erase", secret.uuid.uuidString] + connection)
            #expect(again.status == 0 && again.output.contains("nothing to erase"), "\(again.output) \(again.error)")

            let file = server.directory.appending(path: "events.jsonl")
            let exported = try await runProcess(cli, ["export", "alice", "--events", "-o", file.path] + connection)
            #expect(exported.status == 0, "\(exported.error)")
            #expect(try !Self.file(file, contains: marker))
            let offline = try await runProcess(cli, ["verify", "--events", file.path])
            #expect(offline.status == 0, "\(offline.output) \(offline.error)")
            let onDisk = try await runProcess(cli, ["verify", "alice", "--data-dir", dataDir])
            #expect(onDisk.status == 0 && onDisk.output.contains("projections equal a fresh replay"), "\(onDisk.output) \(onDisk.error)")

            // A body stripped with no erasure record (the hash is unchanged: only the rule sees it)
            // fails offline, at that event: the kept sample's save, event 3.
            var lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").map(String.init)
            var event = try #require(try JSONSerialization.jsonObject(with: Data(lines[3].utf8)) as? [String: Any])
            #expect(event["sequence"] as? Int == 3)
            let stripped = try Data(base64Encoded: event["stored"] as! String)!.withUnsafeBytes { try EventLayout.erased($0) }
            event["stored"] = Data(stripped).base64EncodedString()
            lines[3] = String(decoding: try JSONSerialization.data(withJSONObject: event, options: [.sortedKeys]), as: UTF8.self)
            try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: file)
            let cut = try await runProcess(cli, ["verify", "--events", file.path])
            #expect(cut.output.contains("event 3: its body is missing and no erasure event names it") || cut.error.contains("event 3: its body is missing"), "\(cut.output) \(cut.error)")
            #expect(cut.status != 0, "\(cut.output)")
        }
    }

    @Test("each kind of object goes with what belongs to it: a correlation's members, a workout's route, a prescription's attachments; as-of reads from before no longer show them")
    func objectKinds() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let marker = "kind-marker-\(UUID().uuidString)"
            let data = server.directory.appending(path: "ledgers/alice/data.mdb")

            // A blood pressure reading and its two members.
            let reading = CorrelationRPCTests.reading(171, 99, at: 1, metadata: ["marker": .string(marker)])
            try await owner.save(.correlation(reading))
            // A workout with its route and an associated heart rate, which stays.
            let workout = WorkoutRPCTests.run()
            try await owner.save(.workout(workout))
            let rate = Samples.heartRate(133, at: 120)
            try await owner.save(rate)
            try await owner.add([rate], to: workout)
            let builder = try await owner.makeRouteBuilder()
            try await builder.insertRouteData((0..<300).map(WorkoutRPCTests.location))
            let route = try await owner.finishRoute(builder, workout.uuid)
            // A prescription with a scan attached.
            let prescription = visionPrescription(issuedDay: 2)
            try await owner.save(.visionPrescription(prescription))
            let scan = Array("%PDF-1.4\n% \(marker)\n".utf8) + (0..<10_000).map { UInt8($0 % 251) }
            _ = try await owner.addAttachment(to: prescription.uuid, name: "scan.pdf", contentType: "application/pdf", data: scan)
            let before = try server.ledger.head().sequence
            // Encrypted (tools/test.sh's second pass), it never was in the clear.
            #expect(try Self.file(data, contains: marker) == !server.ledger.isEncrypted)
            // A point-in-time view built before the erasure goes with it.
            let then = owner.asOf(.sequence(before))
            #expect(try await then.object(with: reading.uuid) != nil)

            let correlation = try await owner.erase(.objects([reading.uuid]), reason: "reading taken by mistake")
            #expect(correlation.objects == 3)
            for member in reading.objects { #expect(try await owner.object(with: member.uuid) == nil) }
            let workoutErasure = try await owner.erase(.objects([workout.uuid]))
            #expect(workoutErasure.objects == 2, "the workout and its route")
            #expect(try await owner.object(with: route.uuid) == nil)
            #expect(try await owner.object(with: rate.uuid) != nil, "associated samples stay")
            let prescriptionErasure = try await owner.erase(.objects([prescription.uuid]))
            #expect(prescriptionErasure.objects == 1 && prescriptionErasure.events == 2, "the save and the attachment's event")
            #expect(try !Self.file(data, contains: marker))

            // As the ledger stood before: none of them is there any more.
            #expect(try await then.object(with: reading.uuid) == nil)
            #expect(try await then.object(with: workout.uuid) == nil)
            #expect(try await then.object(with: prescription.uuid) == nil)
            #expect(try await then.object(with: rate.uuid) != nil)

            let report = try server.ledger.verify()
            #expect(report.isValid, "\(String(describing: report.problem))")
            #expect(try server.ledger.replay().identical)
        }
    }

    @Test("the owner erases a characteristic, then everything: every object, live or deleted, of every source, and every characteristic; apps keep their grants, the history verifies, an older backup comes back without any of it")
    func everything() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.executable
            let owner = server.client()
            let app = server.client(server.appCredential)
            let marker = "everything-\(UUID().uuidString)"
            let deleted = Samples.heartRate(171, at: 0, metadata: ["marker": .string(marker)])
            let live = Samples.heartRate(72, at: 60, metadata: ["marker": .string(marker)])
            try await owner.save([deleted, live])
            try await owner.delete([deleted.uuid])
            try await app.save(Samples.heartRate(88, at: 120))
            try await owner.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: 1961, month: 7, day: 23))
            try await owner.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: 1962, month: 7, day: 23))
            try await owner.setCharacteristic(of: .bloodType, to: .bloodType(.oNegative))
            let dataDir = server.directory.path
            let backup = server.directory.appending(path: "backup-before")
            _ = try server.ledger.backup(to: backup)
            let before = try await owner.treeHead()

            do {
                try await app.erase(.everything)
                Issue.record("an app erased everything")
            } catch let error as RPCError {
                #expect(error.code == .permissionDenied && error.message.contains("only what it saved"), "\(error)")
            }
            // One characteristic alone, by its type: the owner's only, whole.
            await #expect(throws: RPCError.self) { try await app.erase(.matching(.bloodType)) }
            await #expect(throws: RPCError.self) { try await owner.erase(.matching(.bloodType, overlapping: DateInterval(start: .now, duration: 1))) }
            let bloodType = try await owner.erase(.matching(.bloodType), reason: "not needed")
            #expect(bloodType.characteristics == 1 && bloodType.objects == 0 && bloodType.events == 1)
            #expect(try await owner.characteristics([.dateOfBirth, .bloodType]) == [.dateOfBirth(year: 1962, month: 7, day: 23), nil])

            let connection = ["--port", "\(server.port)", "--credential", server.ownerCredential]
            let both = try await runProcess(cli, ["erase", "--everything", "--type", "HeartRate"] + connection)
            #expect(both.status != 0 && both.error.contains("one of them"), "\(both.error)")
            let erased = try await runProcess(cli, ["erase", "--everything", "--reason", "starting over"] + connection)
            #expect(erased.status == 0 && erased.output.contains("erased 3 objects and 1 characteristic (6 events emptied)"), "\(erased.output) \(erased.error)")

            // Nothing of it is left to read, in the file or in the history's sentences.
            #expect(try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).isEmpty)
            #expect(try await owner.characteristics([.dateOfBirth, .bloodType]) == [nil, nil])
            #expect(try !Self.file(server.directory.appending(path: "ledgers/alice/data.mdb"), contains: marker))
            var sentences: [String] = []
            for try await batch in try await owner.audit() { sentences += batch.events.map(\.sentence) }
            // As words: the signing key's hex, in the first sentence, may hold the digits 1961.
            #expect(!sentences.contains { $0.contains(/\b196[12]\b/) || $0.contains("oNegative") }, "\(sentences)")
            #expect(sentences.contains("DateOfBirth erased by the owner (starting over): 2 events emptied"), "\(sentences)")
            #expect(sentences.contains("BloodType erased by the owner (not needed): 1 event emptied"), "\(sentences)")
            // The ledger stays with its grants: the app saves again; the history verifies.
            try await app.save(Samples.heartRate(90, at: 180))
            let report = try server.ledger.verify()
            #expect(report.isValid, "\(String(describing: report.problem))")
            #expect(try server.ledger.replay().identical)
            let after = try await owner.treeHead()
            try TreeProofs.verify(try await owner.consistencyProof(from: before, to: after), firstRoot: before.rootHash, secondRoot: after.rootHash)

            // A backup from before, restored: the journal erases all of it again.
            let restored = try await runProcess(cli, ["restore", backup.path, "--as", "alice-restored", "--data-dir", dataDir])
            #expect(restored.status == 0, "\(restored.output) \(restored.error)")
            #expect(try !Self.file(server.directory.appending(path: "ledgers/alice-restored/data.mdb"), contains: marker))
            let copy = try LedgerStore(directory: server.directory, configuration: .forTests()).ledger("alice-restored")
            #expect(try copy.characteristics([.dateOfBirth, .bloodType], as: .owner) == [nil, nil])
            #expect(try copy.object(with: live.uuid, as: .owner) == nil)
            #expect(try copy.verify().isValid)
        }
    }

    @Test("a backup taken before an erasure and restored after it comes back without the erased values (the erasure journal); a ledger erased whole is never restored")
    func backupsCannotBringValuesBack() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.executable
            let owner = server.client()
            let dataDir = server.directory.path
            let marker = "backup-marker-\(UUID().uuidString)"
            let secret = Samples.heartRate(166, at: 0, metadata: ["marker": .string(marker)])
            let kept = Samples.heartRate(66, at: 60)
            try await owner.save([secret, kept])
            let before = server.directory.appending(path: "backup-before")
            let backedUp = try await runProcess(cli, ["backup", "alice", before.path, "--data-dir", dataDir])
            #expect(backedUp.status == 0, "\(backedUp.error)")
            #expect(try Self.file(before.appending(path: "data.mdb"), contains: marker) == !server.ledger.isEncrypted)

            try await owner.erase(.objects([secret.uuid]), reason: "asked")
            let journal = server.directory.appending(path: "erasures/alice.jsonl")
            #expect(try String(contentsOf: journal, encoding: .utf8).contains(secret.uuid.uuidString))

            let restored = try await runProcess(cli, ["restore", before.path, "--as", "alice-restored", "--data-dir", dataDir])
            #expect(restored.status == 0, "\(restored.output) \(restored.error)")
            let copy = server.directory.appending(path: "ledgers/alice-restored/data.mdb")
            #expect(try !Self.file(copy, contains: marker))
            let verified = try await runProcess(cli, ["verify", "alice-restored", "--data-dir", dataDir])
            #expect(verified.status == 0 && verified.output.contains("projections equal a fresh replay"), "\(verified.output) \(verified.error)")
            let store = try LedgerStore(directory: server.directory, configuration: .forTests())
            let restoredLedger = try store.ledger("alice-restored")
            #expect(try restoredLedger.object(with: secret.uuid, as: .owner) == nil)
            #expect(try restoredLedger.object(with: kept.uuid, as: .owner) != nil)

            // A whole ledger: erased on the data directory, its backups refused from then on.
            let created = try await runProcess(cli, ["admin", "create-ledger", "carol", "--data-dir", dataDir])
            #expect(created.status == 0, "\(created.error)")
            let carolBackup = server.directory.appending(path: "backup-carol")
            _ = try await runProcess(cli, ["backup", "carol", carolBackup.path, "--data-dir", dataDir])
            let erasedWhole = try await runProcess(cli, ["admin", "erase-ledger", "carol", "--reason", "left the service", "--data-dir", dataDir])
            #expect(erasedWhole.status == 0, "\(erasedWhole.error)")
            #expect(!FileManager.default.fileExists(atPath: server.directory.appending(path: "ledgers/carol").path))
            let refused = try await runProcess(cli, ["restore", carolBackup.path, "--data-dir", dataDir])
            #expect(refused.status != 0 && refused.error.contains("was erased on") && refused.error.contains("left the service"), "\(refused.error)")
            // The server has alice open: erasing it whole is refused with the reason.
            let inUse = try await runProcess(cli, ["admin", "erase-ledger", "alice", "--data-dir", dataDir])
            #expect(inUse.status != 0 && inUse.error.contains("open in another process") || inUse.error.contains("open in this process"), "\(inUse.error)")
        }
    }

    @Test("an erased correlation is reported gone to an app that may read one of its member types, and hidden from one that may not")
    func erasedCorrelationsForApps() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let energy = CorrelationRPCTests.energy
            let protein = try QuantityType("HKQuantityTypeIdentifierDietaryProtein")
            let (source, credential) = try await server.addApp("com.example.diet", name: "Diet", share: [energy.objectType])
            let app = server.client(credential)
            _ = try await app.requestAuthorization(toShare: [], read: [energy.objectType])
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: energy.objectType, direction: .read, decision: .granted)
            let anchor = try await app.result(for: AnchoredObjectQueryDescriptor(type: CorrelationType.food.objectType)).newAnchor
            func meal(_ type: QuantityType, _ quantity: Quantity) -> Correlation {
                Correlation(type: .food, start: Samples.base, end: Samples.base, objects: [QuantitySample(type: type, quantity: quantity, start: Samples.base, end: Samples.base)])
            }
            let hidden = meal(protein, try Quantity(30, "g"))
            let seen = meal(energy, try Quantity(90, "kcal"))
            try await owner.save([.correlation(hidden), .correlation(seen)])
            #expect(try await owner.erase(.objects([hidden.uuid, seen.uuid])).objects == 4)
            let gone = try await app.result(for: AnchoredObjectQueryDescriptor(type: CorrelationType.food.objectType, anchor: anchor))
            #expect(gone.addedObjects.isEmpty && gone.deletedObjects.map(\.uuid) == [seen.uuid], "the hidden meal's erasure stays hidden")
            #expect(try server.ledger.verify().isValid)
        }
    }
}
