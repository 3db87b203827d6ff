import CLibXML2
import Foundation
import HealthExport
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing

/// `healthledger export` (JSON Lines and apple-health) read back by `healthledger import`
/// into other ledgers: the same queries and statistics.
@Suite("Export round trips", .timeLimit(.minutes(3)))
struct ExportRoundTripTests {
    /// What a ledger answers, reduced to comparable values: per type, the objects' values
    /// and dates, and statistics; the workouts' statistics.
    ///
    /// - Parameter members: also list each workout's associated samples of every type here
    ///   (JSON Lines carries them; an apple-health export has only its statistics types').
    static func portrait(_ store: HealthStore, sameSources: Bool, members: Bool = false) async throws -> [String] {
        var lines: [String] = []
        let quantityTypes = ["HeartRate", "ActiveEnergyBurned", "BloodGlucose", "BodyTemperature", "BloodPressureSystolic", "DietaryEnergyConsumed"]
            .map { try! QuantityType("HKQuantityTypeIdentifier" + $0) }
        for type in quantityTypes {
            let samples = try await SampleQueryDescriptor(type: type.objectType).result(for: store).compactMap(\.quantitySample)
            for sample in samples {
                let source = sameSources ? sample.sourceRevision.source.bundleIdentifier : sample.sourceRevision.source.name
                let metadata = sample.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                let series = sample.series.map { "\($0.value)@\($0.startDate.timeIntervalSince1970)-\($0.endDate.timeIntervalSince1970)" }
                lines.append(
                    "\(type) \(sample.startDate.timeIntervalSince1970) \(sample.endDate.timeIntervalSince1970) \(try sample.quantity.doubleValue(for: type.canonicalUnit)) \(source)"
                        + " \(sample.sourceRevision.version ?? "-") \(String(describing: sample.device)) \(metadata) \(series)")
            }
            let options: StatisticsOptions = type.aggregationStyle == .cumulative ? [.cumulativeSum] : [.discreteAverage, .discreteMin, .discreteMax]
            let statistics = try await store.statistics(for: StatisticsQueryDescriptor(type: type, options: options))
            lines.append("\(type) statistics \(String(describing: statistics?.values))")
        }
        let sleep = try await SampleQueryDescriptor(type: try ObjectType("HKCategoryTypeIdentifierSleepAnalysis")).result(for: store)
        lines += sleep.compactMap(\.categorySample).map { "sleep \($0.startDate.timeIntervalSince1970) \($0.value)" }
        for type in ["HKCorrelationTypeIdentifierBloodPressure", "HKCorrelationTypeIdentifierFood"] {
            let correlations = try await CorrelationQueryDescriptor(type: try CorrelationType(type)).result(for: store)
            lines += correlations.map {
                "\(type) \($0.startDate.timeIntervalSince1970) \($0.objects.map { "\($0.type) \($0.quantity.value)" }.sorted()) \($0.metadata.count)"
            }
        }
        for prescription in try await SampleQueryDescriptor(type: .visionPrescription).result(for: store).compactMap(\.visionPrescription) {
            lines.append(
                "prescription \(prescription.prescriptionType) \(prescription.dateIssued.timeIntervalSince1970) \(prescription.expirationDate.timeIntervalSince1970)"
                    + " \(prescription.description) \(String(describing: prescription.rightEye)) \(String(describing: prescription.leftEye))")
        }
        for audiogram in try await SampleQueryDescriptor(type: .audiogram).result(for: store).compactMap(\.audiogram) {
            let source = sameSources ? audiogram.sourceRevision.source.bundleIdentifier : audiogram.sourceRevision.source.name
            let points = try audiogram.points.map {
                "\(try $0.frequency.doubleValue(for: .hertz)) \(try $0.leftEar.map { try $0.doubleValue(for: .hearingLevel) } ?? -1) \(try $0.rightEar.map { try $0.doubleValue(for: .hearingLevel) } ?? -1) \($0.leftEarMasked) \($0.rightEarMasked)"
            }
            lines.append("audiogram \(audiogram.startDate.timeIntervalSince1970) \(audiogram.endDate.timeIntervalSince1970) \(points) \(source) \(audiogram.metadata.count)")
        }
        for type in ObjectType.clinicalTypes {
            for record in try await ClinicalRecordQueryDescriptor(type: type).result(for: store) {
                let source = sameSources ? record.sourceRevision.source.bundleIdentifier : record.sourceRevision.source.name
                let resource = record.fhirResource
                lines.append(
                    "clinical \(type.identifier) \(record.startDate.timeIntervalSince1970) \(record.displayName) \(resource.resourceType) \(resource.identifier)"
                        + " \(resource.fhirVersion) \(resource.sourceURL) \(resource.data.count) \(source) \(record.metadata.count)")
            }
        }
        for recording in try await SampleQueryDescriptor(type: .electrocardiogram).result(for: store).compactMap(\.electrocardiogram) {
            let source = sameSources ? recording.sourceRevision.source.bundleIdentifier : recording.sourceRevision.source.name
            let sum = recording.voltages.reduce(0) { $0 + Double($1) }
            lines.append(
                "ecg \(recording.startDate.timeIntervalSince1970) \(recording.endDate.timeIntervalSince1970) \(recording.classification) \(recording.symptomsStatus)"
                    + " \(recording.samplingFrequency) \(recording.voltages.count) \(String(format: "%.2f", sum)) \(source) \(recording.sourceRevision.version ?? "-")"
                    + " \(recording.metadata.sorted { $0.key < $1.key })")
        }
        for series in try await SampleQueryDescriptor(type: .heartbeatSeries).result(for: store).compactMap(\.heartbeatSeries) {
            let source = sameSources ? series.sourceRevision.source.bundleIdentifier : series.sourceRevision.source.name
            let beats = series.beats.map { "\($0.timeSinceSeriesStart)\($0.precededByGap ? " after a gap" : "")" }
            lines.append(
                "heartbeats \(series.startDate.timeIntervalSince1970) \(series.endDate.timeIntervalSince1970) \(beats) \(source)"
                    + " \(String(describing: series.device)) \(series.metadata.sorted { $0.key < $1.key })")
        }
        for state in try await SampleQueryDescriptor(type: .stateOfMind).result(for: store).compactMap(\.stateOfMind) {
            let source = sameSources ? state.sourceRevision.source.bundleIdentifier : state.sourceRevision.source.name
            lines.append(
                "mind \(state.startDate.timeIntervalSince1970) \(state.endDate.timeIntervalSince1970) \(state.kind) \(state.valence) \(state.labels)"
                    + " \(state.associations) \(source) \(state.sourceRevision.version ?? "-") \(state.metadata.sorted { $0.key < $1.key })")
        }
        for summary in try await ActivitySummaryQueryDescriptor().result(for: store) {
            let source = sameSources ? summary.sourceRevision.source.bundleIdentifier : summary.sourceRevision.source.name
            let rings = try summary.quantities.map { "\($0.field)=\(try $0.quantity.doubleValue(for: HealthUnit($0.unit)))" }
            lines.append("activity \(summary.day) \(summary.moveMode) \(summary.isPaused) \(rings) \(source) \(summary.metadata.count)")
        }
        for workout in try await SampleQueryDescriptor(type: .workout).result(for: store).compactMap(\.workout) {
            let statistics = try await store.statistics(for: workout.uuid)
            lines.append("workout \(workout.activityType) \(workout.duration) \(statistics.workout.mapValues(\.values).sorted { $0.key.identifier < $1.key.identifier })")
            for type in (members ? quantityTypes.map(\.objectType) + [try ObjectType("HKCategoryTypeIdentifierSleepAnalysis")] : []) {
                let associated = try await SampleQueryDescriptor(type: type, predicate: .predicateForObjects(from: workout.uuid)).result(for: store)
                if !associated.isEmpty { lines.append("workout member \(type) \(associated.map(\.startDate.timeIntervalSince1970).sorted())") }
            }
            let routes = try await SampleQueryDescriptor(type: .workoutRoute).result(for: store).compactMap(\.workoutRoute)
            for route in routes where route.workoutUUID == workout.uuid {
                let locations = try await store.routeLocations(of: route.uuid).all()
                lines.append("route \(route.syncIdentifier ?? "") \(locations.map { "\($0.latitude),\($0.longitude),\($0.timestamp.timeIntervalSince1970)" })")
            }
        }
        let (sex, blood) = (try await store.biologicalSex(), try await store.bloodType())
        lines.append("me \(sex) \(blood) \(try await store.cardioFitnessMedicationsUse()) \(String(describing: try await store.dateOfBirthComponents()))")
        return lines
    }

    /// Why the `export.xml` in `zip` is not valid against the DTD it carries (libxml2's
    /// validating parser, as `xmllint --valid` runs it); nil when it is valid.
    static func dtdViolation(ofExportIn zip: URL) throws -> String? {
        var bytes: [UInt8] = []
        try ExportArchive(url: zip).readXML { bytes += $0 }
        guard let context = xmlNewParserCtxt() else { return "libxml2 made no parser" }
        defer { xmlFreeParserCtxt(context) }
        let options = Int32(XML_PARSE_DTDVALID.rawValue | XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)
        let document = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { xmlCtxtReadMemory(context, $0.baseAddress, Int32($0.count), "export.xml", nil, options) }
        }
        defer { xmlFreeDoc(document) }
        guard document == nil || context.pointee.valid == 0 else { return nil }
        return xmlCtxtGetLastError(context).flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "not valid"
    }

    @Test("JSON Lines and apple-health exports import into new ledgers with identical queries and statistics")
    func roundTrips() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let zip = try AppleHealthImportTests.writeZip(in: server.directory.appending(path: "export"))
            _ = try await cli.json(server.ownerCredential, ["import", "apple-health", zip.path])
            let original = server.client()
            // A heartbeat series no record of heart rate variability holds, with gaps and
            // microseconds: the apple-health export gives it a record of its own.
            try await original.save(.heartbeatSeries(HeartbeatSeriesSample(
                beats: [HeartbeatSeriesBeat(timeSinceSeriesStart: 0.000001), HeartbeatSeriesBeat(timeSinceSeriesStart: 0.81), HeartbeatSeriesBeat(timeSinceSeriesStart: 7.5, precededByGap: true)],
                start: Date(timeIntervalSince1970: 1_747_580_000), end: Date(timeIntervalSince1970: 1_747_580_030), device: Device(name: "Strap"),
                metadata: ["HKMetadataKeySyncIdentifier": .string("strap-1"), "HKMetadataKeySyncVersion": .number(1), "posture": .string("seated")],
                sourceRevision: SourceRevision(source: Source.imported(named: "Strap"), version: "2.1"))))
            // A series sample, its values to the microsecond.
            try await original.save(.quantitySample(QuantitySample(
                type: try QuantityType("HKQuantityTypeIdentifierHeartRate"), unit: try HealthUnit("count/min"),
                series: [0, 5, 10.25].map { QuantitySeriesEntry(value: 90 + $0, start: Date(timeIntervalSince1970: 1_747_580_100 + $0), end: Date(timeIntervalSince1970: 1_747_580_104.500001 + $0)) },
                metadata: ["HKMetadataKeySyncIdentifier": .string("strap-hr-1"), "HKMetadataKeySyncVersion": .number(1)],
                sourceRevision: SourceRevision(source: Source.imported(named: "Strap"), version: "2.1"))))
            // An electrocardiogram the owner saved, its metadata with it (the Health app's files have none).
            try await original.save(.electrocardiogram(Electrocardiogram(
                classification: .atrialFibrillation, symptomsStatus: .present, averageHeartRate: try Quantity(97, "count/min"),
                samplingFrequency: try Quantity(512, "Hz"), voltages: [1.5, -2.25, 3], start: Date(timeIntervalSince1970: 1_747_585_000),
                end: Date(timeIntervalSince1970: 1_747_585_000 + 3.0 / 512),
                metadata: ["HKMetadataKeySyncIdentifier": .string("ecg-1"), "HKMetadataKeySyncVersion": .number(2), "note": .string("after stairs, \"out of breath\"\nline two")],
                sourceRevision: SourceRevision(source: Source.imported(named: "ECG"), version: "2.0"))))
            // States of mind, one with words and metadata, one with neither but its sync identifier.
            let mood = SourceRevision(source: Source.imported(named: "Mood Diary"), version: "1.0")
            try await original.save([
                .stateOfMind(StateOfMind(
                    date: Date(timeIntervalSince1970: 1_747_590_000), kind: .dailyMood, valence: -0.35, labels: [.stressed, .drained],
                    associations: [.work, .currentEvents],
                    metadata: ["HKMetadataKeySyncIdentifier": .string("mood-1"), "HKMetadataKeySyncVersion": .number(1), "note": .string("deadline <soon> & \"late\"")],
                    sourceRevision: mood)),
                .stateOfMind(StateOfMind(
                    date: Date(timeIntervalSince1970: 1_747_600_000), kind: .momentaryEmotion, valence: 1,
                    metadata: ["HKMetadataKeySyncIdentifier": .string("mood-2"), "HKMetadataKeySyncVersion": .number(1)], sourceRevision: mood)),
            ])
            let expected = try await Self.portrait(original, sameSources: true)
            #expect(expected.contains { $0.hasPrefix("route ROUTE-1") } && expected.count >= 15, "\(expected)")
            #expect(expected.contains { $0.hasPrefix("prescription glasses") } && expected.contains { $0.hasPrefix("HKCorrelationTypeIdentifierFood") })
            #expect(expected.contains { $0.hasPrefix("activity 2025-05-18 activeEnergy false [\"activeEnergyBurned=500.0\"") }, "\(expected)")
            #expect(expected.contains { $0.hasPrefix("audiogram ") && $0.contains("500.0 10.0 5.0 false true") }, "\(expected)")
            #expect(expected.contains { $0.hasPrefix("clinical HKClinicalTypeIdentifierLabResultRecord") && $0.contains("Hemoglobin A1c Observation x 4.0.1") })
            #expect(expected.contains { $0.hasPrefix("ecg ") && $0.contains("sinusRhythm notSet 512.0 Hz 1536") }, "\(expected)")
            #expect(expected.contains { $0.contains("[\"90.0@1747580100.0-1747580104.500001\", ") }, "\(expected)")
            #expect(expected.filter { $0.hasPrefix("heartbeats ") }.count == 2 && expected.contains { $0.contains("[\"1.25\", \"2.1\", \"60.9\"]") }, "\(expected)")
            #expect(expected.filter { $0.hasPrefix("mind ") }.count == 2 && expected.contains { $0.contains("dailyMood -0.35 [HealthModel.StateOfMind.Label.stressed") }, "\(expected)")
            #expect(expected.contains { $0.contains("Optional(HealthModel.Device(") && $0.contains("HKMetadataKey") }, "samples with devices and metadata")
            // Samples associated by hand travel with JSON Lines too: category samples, and a heart
            // rate outside the workout's span (neither found through the workout's statistics).
            let workout = try #require(try await SampleQueryDescriptor(type: .workout).result(for: original).first?.workout)
            let sleep = try await SampleQueryDescriptor(type: try ObjectType("HKCategoryTypeIdentifierSleepAnalysis")).result(for: original)
            let heartRates = try await SampleQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierHeartRate")).result(for: original)
            let late = try #require(heartRates.first { $0.startDate > workout.endDate })
            try await original.add(sleep.map(\.uuid) + [late.uuid], to: workout.uuid)
            let withMembers = try await Self.portrait(original, sameSources: true, members: true)
            #expect(withMembers.contains { $0.hasPrefix("workout member HKCategoryTypeIdentifierSleepAnalysis") }, "\(withMembers)")

            // JSON Lines into a second ledger: the same objects, sources included.
            let lines = server.directory.appending(path: "alice.jsonl")
            let exported = try await cli.run(server.ownerCredential, ["export", "alice", "--output", lines.path])
            #expect(exported.status == 0, "\(exported.error)")
            let copy = try server.store.createLedger(id: "copy")
            let copyOwner = try await copy.issueCredential(for: .owner)
            let imported = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect(imported["error"] == nil && (imported["rejected"] as? [String: Int])?.isEmpty != false, "\(imported)")
            let copyStore = server.client(copyOwner)
            #expect(try await Self.portrait(copyStore, sameSources: true, members: true) == withMembers)
            let again = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect((again["imported"] as? [String: Int])?.isEmpty == true, "a second import adds nothing: \(again)")

            // apple-health into a third: the same values and statistics (sources by name).
            let appleZip = server.directory.appending(path: "alice-apple.zip")
            let zipped = try await cli.run(server.ownerCredential, ["export", "alice", "--format", "apple-health", "--output", appleZip.path])
            #expect(zipped.status == 0, "\(zipped.error)")
            let violation = try Self.dtdViolation(ofExportIn: appleZip)
            #expect(violation == nil, "export.xml breaks its DTD: \(violation ?? "")")
            var xmlBytes: [UInt8] = []
            try ExportArchive(url: appleZip).readXML { xmlBytes += $0 }
            let xml = String(decoding: xmlBytes, as: UTF8.self)
            // The imported series inside its HRV record, as the Health app writes it; the other in a record of its own.
            #expect(xml.contains(/value="48\.5">\n(  <MetadataEntry[^\n]*\n)*  <HeartRateVariabilityMetadataList>\n/) && xml.contains(#"<InstantaneousBeatsPerMinute bpm="71" time="2:00:02.10 AM"/>"#))
            #expect(xml.components(separatedBy: #"<Record type="HKDataTypeIdentifierHeartbeatSeries""#).count == 2)
            #expect(xml.contains(#"<StateOfMind kind="dailyMood" valence="-0.35" labels="stressed drained" associations="work currentEvents" sourceName="Mood Diary""#), "\(xml.suffix(3000))")
            #expect(xml.contains(#"<InstantaneousBeatsPerMinute time="2:53:20.000001 PM"/>"#) && xml.contains(#"time="2:53:27.50 PM" precededByGap="1"/>"#), "\(xml.suffix(3000))")
            let apple = try server.store.createLedger(id: "apple")
            let appleOwner = try await apple.issueCredential(for: .owner)
            let fromApple = try #require(try await cli.json(appleOwner, ["import", "apple-health", appleZip.path]) as? [String: Any])
            #expect((fromApple["rejected"] as? [String: Int])?.isEmpty != false, "\(fromApple)")
            let appleStore = server.client(appleOwner)
            let (applePortrait, originalPortrait) = (try await Self.portrait(appleStore, sameSources: false), try await Self.portrait(original, sameSources: false))
            #expect(applePortrait == originalPortrait, "differing: \(Set(applePortrait).symmetricDifference(originalPortrait).sorted())")
            // Our own apple-health export re-imported over the original adds nothing: the sync
            // identifiers travel in the metadata.
            let over = try #require(try await cli.json(server.ownerCredential, ["import", "apple-health", appleZip.path]) as? [String: Any])
            #expect((over["imported"] as? [String: Int])?.isEmpty == true, "\(over)")

            let refused = try await cli.run(server.ownerCredential, ["export", "someone-else", "--output", server.directory.appending(path: "x.jsonl").path])
            #expect(refused.status != 0 && refused.error.contains("not 'someone-else'"))
            let notAnExport = try await cli.run(copyOwner, ["import", "healthledger", zip.path])
            #expect(notAnExport.status != 0 && notAnExport.error.contains("not a HealthLedger export"), "\(notAnExport.error)")
            // A damaged copy: a line that is not JSON, an object that breaks the rules, and no end line.
            let damaged = server.directory.appending(path: "damaged.jsonl")
            let header = try String(contentsOf: lines, encoding: .utf8).split(separator: "\n").first.map(String.init) ?? ""
            let object = #"{"kind":"object","object":{"uuid":"AaIKXfNycG2EMRj+IokEmQ==","type":"HKQuantityTypeIdentifierStepCount","startUs":"2","endUs":"1","quantity":{"quantity":{"unit":"count","value":5}}}}"#
            // Lines that once stopped the importer (JSONSerialization on Linux traps on a value that
            // is not an object or array), a number out of range, a characteristic's fraction and
            // an impossible date of birth: each refused with its line, the rest imported.
            let hostile = [
                #"{"kind":"object","object":5}"#, #"{"kind":"object","object":null}"#, #"{"kind":"object","object":[1,2]}"#,
                #"{"kind":"object","object":{"quantity":1e400}}"#,
                #"{"kind":"characteristic","type":"HKCharacteristicTypeIdentifierBloodType","value":1.5}"#,
                #"{"kind":"characteristic","type":"HKCharacteristicTypeIdentifierDateOfBirth","value":"0-0-0"}"#,
            ]
            try Data(([header, "{not json", object] + hostile).joined(separator: "\n").utf8).write(to: damaged)
            let fresh = try server.store.createLedger(id: "fresh")
            let freshOwner = try await fresh.issueCredential(for: .owner)
            let cut = try await cli.run(freshOwner, ["import", "healthledger", damaged.path, "--json"])
            #expect(cut.status == 1 && cut.error.contains("cut short"), "\(cut.error)")
            let cutSummary = try #require(try JSONSerialization.jsonObject(with: Data(cut.output.utf8)) as? [String: Any])
            let rejected = try #require(cutSummary["rejected"] as? [String: Int])
            #expect(rejected["unparsable value"] == 2 && rejected.values.reduce(0, +) == 8, "the bad lines and the object whose end precedes its start: \(cutSummary)")
            let reasons = (cutSummary["rejections"] as? [[String: Any]] ?? []).compactMap { $0["reason"] as? String }
            #expect(reasons.contains { $0.contains("not a JSON object (a HealthObject") }, "\(reasons)")
            #expect(reasons.contains { $0.hasPrefix("not valid JSON") }, "\(reasons)")
            #expect(reasons.contains { $0.contains("1.5 is not a whole number") }, "\(reasons)")
            #expect(reasons.contains { $0.contains("0-0-0 is not a date of birth") }, "\(reasons)")
            for store in [original, copyStore, appleStore] { await store.close() }
        }
    }

    @Test("apple-health: heartbeat series go inside the records of heart rate variability that hold them and the rest in records of their own, over several batches and two to a second, and come back the same")
    func heartbeatSeriesMeetTheirRecords() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let strap = SourceRevision(source: Source.imported(named: "Strap"), version: "1")
            let variability = try QuantityType(AppleHealthWriter.heartRateVariability)
            var objects: [HealthObject] = []
            for pair in 0..<20 {
                let start = Date(timeIntervalSince1970: 1_747_580_000 + Double(pair) * 600)
                func series(_ name: String, _ beats: [Double], seconds: Double) -> HealthObject {
                    .heartbeatSeries(HeartbeatSeriesSample(
                        beats: beats.map { HeartbeatSeriesBeat(timeSinceSeriesStart: $0) }, start: start, end: start.addingTimeInterval(seconds),
                        metadata: [MetadataKey.syncIdentifier: .string("\(name)-\(pair)"), MetadataKey.syncVersion: .number(1)], sourceRevision: strap))
                }
                // Two series of one second: one a record may hold (its end is the record's), one no record holds.
                objects += [series("held", [0, 0.8, 1.6], seconds: 60), series("own", [0, 1, 2, 3], seconds: 120)]
                if pair % 2 == 0 {
                    objects.append(.quantitySample(QuantitySample(
                        type: variability, quantity: try Quantity(40 + Double(pair), "ms"), start: start, end: start.addingTimeInterval(60),
                        metadata: [MetadataKey.syncIdentifier: .string("hrv-\(pair)"), MetadataKey.syncVersion: .number(1)], sourceRevision: strap)))
                }
            }
            try await owner.save(objects)
            let cli = AuthCLITests.Session(server: server)
            let zip = server.directory.appending(path: "beats.zip")
            let zipped = try await cli.run(server.ownerCredential, ["export", "alice", "--format", "apple-health", "--output", zip.path])
            #expect(zipped.status == 0, "\(zipped.error)")
            #expect(try Self.dtdViolation(ofExportIn: zip) == nil)
            var bytes: [UInt8] = []
            try ExportArchive(url: zip).readXML { bytes += $0 }
            let xml = String(decoding: bytes, as: UTF8.self)
            #expect(xml.components(separatedBy: "<HeartRateVariabilityMetadataList>").count - 1 == 40, "every series has its list")
            #expect(xml.components(separatedBy: #"<Record type="HKDataTypeIdentifierHeartbeatSeries""#).count - 1 == 30, "10 held by records, 30 of their own")
            let copy = try server.store.createLedger(id: "copy")
            let copyOwner = try await copy.issueCredential(for: .owner)
            let imported = try #require(try await cli.json(copyOwner, ["import", "apple-health", zip.path]) as? [String: Any])
            #expect((imported["rejected"] as? [String: Int])?.isEmpty != false, "\(imported)")
            let copyStore = server.client(copyOwner)
            func portrait(_ store: HealthStore) async throws -> [String] {
                try await SampleQueryDescriptor(type: .heartbeatSeries).result(for: store).compactMap(\.heartbeatSeries).map {
                    "\($0.startDate.timeIntervalSince1970) \($0.endDate.timeIntervalSince1970) \($0.beats.map(\.timeSinceSeriesStart)) \($0.syncIdentifier ?? "")"
                }.sorted()
            }
            let original = try await portrait(owner)
            let copied = try await portrait(copyStore)
            #expect(original.count == 40 && copied == original)
            for store in [owner, copyStore] { await store.close() }
        }
    }

    @Test("JSON Lines and apple-health: each type's source order travels (the first saver's, and the owner's), so overlapping sources merge as they did; a re-import changes no order")
    func sourceOrders() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let owner = server.client()
            let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
            let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
            let watch = SourceRevision(source: Source(bundleIdentifier: "com.example.watch", name: "Watch"))
            let phone = SourceRevision(source: Source(bundleIdentifier: "com.example.phone", name: "Phone"))
            let day = ISO8601DateFormatter().date(from: "2026-11-20T10:00:00Z")!
            func at(_ seconds: Double) -> Date { day.addingTimeInterval(seconds) }
            // The watch saves steps first, over samples later than the phone's first: the copy,
            // saving in the export's date order, would put the phone first.
            try await owner.save([.quantitySample(QuantitySample(type: steps, quantity: Quantity(120, .count), start: at(0), end: at(1200), sourceRevision: watch))])
            try await owner.save([
                .quantitySample(QuantitySample(type: steps, quantity: Quantity(90, .count), start: at(600), end: at(1500), sourceRevision: phone)),
                .quantitySample(QuantitySample(type: steps, quantity: Quantity(10, .count), start: at(-86_400), end: at(-86_340), sourceRevision: phone)),
            ])
            // Heart rate: the watch first by date and by save, the phone put first by the owner.
            let beats = try HealthUnit("count/min")
            try await owner.save([
                .quantitySample(QuantitySample(type: heartRate, quantity: Quantity(60, beats), start: at(0), end: at(600), sourceRevision: watch)),
                .quantitySample(QuantitySample(type: heartRate, quantity: Quantity(90, beats), start: at(300), end: at(900), sourceRevision: phone)),
            ])
            try await owner.setSourcePriority(for: heartRate.objectType, order: [phone.source.bundleIdentifier])
            func figures(_ store: HealthStore) async throws -> [String] {
                let sum = try await store.statistics(for: StatisticsQueryDescriptor(type: steps, options: .cumulativeSum))
                let average = try await store.statistics(for: StatisticsQueryDescriptor(type: heartRate, options: .discreteAverage))
                return [
                    "\(String(describing: sum?.values))", "\(String(describing: average?.values))",
                    "\(try await store.sourcePriority(for: steps.objectType).map(\.bundleIdentifier))",
                    "\(try await store.sourcePriority(for: heartRate.objectType).map(\.bundleIdentifier))",
                ]
            }
            let expected = try await figures(owner)
            #expect(expected[2] == "[\"com.example.watch\", \"com.example.phone\"]" && expected[3] == "[\"com.example.phone\", \"com.example.watch\"]")

            let lines = server.directory.appending(path: "orders.jsonl")
            let exported = try await cli.run(server.ownerCredential, ["export", "alice", "--output", lines.path])
            #expect(exported.status == 0, "\(exported.error)")
            let copy = try server.store.createLedger(id: "copy")
            let copyOwner = try await copy.issueCredential(for: .owner)
            let imported = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect((imported["imported"] as? [String: Int])?["sourceOrders"] == 2, "\(imported)")
            let copyStore = server.client(copyOwner)
            #expect(try await figures(copyStore) == expected)
            let again = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect((again["imported"] as? [String: Int])?.isEmpty == true && again["alreadyPresent"] as? Int == 7, "\(again)")

            // apple-health: the order travels as SourcePriority elements, by source name.
            let zip = server.directory.appending(path: "orders.zip")
            let zipped = try await cli.run(server.ownerCredential, ["export", "alice", "--format", "apple-health", "--output", zip.path])
            #expect(zipped.status == 0, "\(zipped.error)")
            let violation = try Self.dtdViolation(ofExportIn: zip)
            #expect(violation == nil, "export.xml breaks its DTD: \(violation ?? "")")
            let apple = try server.store.createLedger(id: "apple")
            let appleOwner = try await apple.issueCredential(for: .owner)
            let fromApple = try #require(try await cli.json(appleOwner, ["import", "apple-health", zip.path]) as? [String: Any])
            #expect((fromApple["imported"] as? [String: Int])?["sourceOrders"] == 2 && fromApple["rejected"] as? [String: Int] == [:], "\(fromApple)")
            let appleStore = server.client(appleOwner)
            let names = [Source.imported(named: "Watch").bundleIdentifier, Source.imported(named: "Phone").bundleIdentifier]
            #expect(try await figures(appleStore) == Array(expected[0...1]) + ["\(names)", "\(Array(names.reversed()))"])
            let appleAgain = try #require(try await cli.json(appleOwner, ["import", "apple-health", zip.path]) as? [String: Any])
            #expect((appleAgain["imported"] as? [String: Int])?.isEmpty == true, "\(appleAgain)")
            await owner.close()
            await copyStore.close()
            await appleStore.close()
        }
    }

    @Test("JSON Lines: a workout with more samples than one association call names travels whole; routes the server refuses are counted and hold no builder; a route without a sync identifier is not added twice")
    func largeAssociationsAndRefusedRoutes() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let workout = WorkoutRPCTests.run()
            try await owner.save(.workout(workout))
            // Four samples a second, 2,000 more than one association call may name.
            let count = 12_000
            let samples: [HealthObject] = (0..<count).map { (index: Int) -> HealthObject in
                let date = Samples.base.addingTimeInterval(Double(index) * 0.25)
                let quantity = Quantity(Double(60 + index % 90), WorkoutRPCTests.bpm)
                return .quantitySample(QuantitySample(type: Samples.heartRate, quantity: quantity, start: date, end: date))
            }
            for start in stride(from: 0, to: count, by: 5000) { try await owner.save(Array(samples[start..<min(start + 5000, count)])) }
            for start in stride(from: 0, to: count, by: 10_000) {
                try await owner.add(samples[start..<min(start + 10_000, count)].map(\.uuid), to: workout.uuid)
            }
            let builder = try await owner.makeRouteBuilder()
            try await builder.insertRouteData((0..<3).map(WorkoutRPCTests.location))
            _ = try await builder.finishRoute(with: workout.uuid)

            let cli = AuthCLITests.Session(server: server)
            let lines = server.directory.appending(path: "alice.jsonl")
            let exported = try await cli.run(server.ownerCredential, ["export", "alice", "--output", lines.path])
            #expect(exported.status == 0, "\(exported.error)")
            // Ten more route lines naming a workout the ledger does not hold: each is refused, and
            // the builder each needed is given back (the server keeps only a few open).
            var text = try String(contentsOf: lines, encoding: .utf8).split(separator: "\n").map(String.init)
            let routeLine = try #require(text.first { $0.contains("\"locations\"") })
            func base64(_ uuid: UUID) -> String { withUnsafeBytes(of: uuid.uuid) { Data($0) }.base64EncodedString() }
            let stray = routeLine.replacingOccurrences(of: base64(workout.uuid), with: base64(UUID()))
            #expect(stray != routeLine)
            text.insert(contentsOf: Array(repeating: stray, count: 10), at: text.count - 1)
            // One associated sample this side cannot read (a unit that does not parse): the
            // association goes in without it.
            let broken = try #require(text.firstIndex { $0.contains(base64(samples[5].uuid)) && $0.contains(#""kind":"object""#) })
            text[broken] = text[broken].replacingOccurrences(of: "count/min", with: "furlongs-per-gallon")
            try Data((text.joined(separator: "\n") + "\n").utf8).write(to: lines)

            let copy = try server.store.createLedger(id: "copy")
            let copyOwner = try await copy.issueCredential(for: .owner)
            let imported = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect(imported["error"] == nil, "\(imported)")
            #expect(imported["associatedWithWorkouts"] as? Int == count - 1, "\(imported)")
            #expect(imported["rejected"] as? [String: Int] == ["refused by the server": 10, "invalid object": 1], "\(imported)")
            #expect((imported["imported"] as? [String: Int])?[ObjectType.workoutRoute.identifier] == 1, "the route after the refused ones: \(imported)")
            let copyStore = server.client(copyOwner)
            let members = try await SampleQueryDescriptor(type: Samples.heartRate.objectType, predicate: .predicateForObjects(from: workout.uuid)).result(for: copyStore)
            #expect(members.count == count - 1)
            // The same file again adds nothing: the route, which has no sync identifier, is found
            // as the workout's route of the same source, span and size.
            let again = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect((again["imported"] as? [String: Int])?.isEmpty == true, "\(again)")
            #expect(try await SampleQueryDescriptor(type: .workoutRoute).result(for: copyStore).count == 1)
            await copyStore.close()
            await owner.close()
        }
    }

    @Test("apple-health: a triathlon's legs keep their types, a pool swim (or leg) its lane and lap, an activity's events their metadata, Me its wheelchair use and move mode; the Health app's untyped legs are left out, the workout kept")
    func multisportAndSwims() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let start = Date(timeIntervalSince1970: 1_747_560_000)
            func at(_ minutes: Double) -> Date { start.addingTimeInterval(minutes * 60) }
            let lap = WorkoutEvent(type: .lap, start: at(70), end: at(80), metadata: ["note": .string("last lap")])
            let triathlon = Workout(
                configuration: WorkoutConfiguration(activityType: .swimBikeRun, locationType: .outdoor), start: at(0), end: at(90),
                activities: [
                    WorkoutActivity(
                        configuration: WorkoutConfiguration(activityType: .swimming, swimmingLocationType: .pool, lapLength: Quantity(50, try HealthUnit("m"))),
                        start: at(0), end: at(20)),
                    WorkoutActivity(configuration: WorkoutConfiguration(activityType: .cycling), start: at(22), end: at(60)),
                    WorkoutActivity(configuration: WorkoutConfiguration(activityType: .running), start: at(62), end: at(90), events: [lap]),
                ])
            let swim = Workout(
                configuration: WorkoutConfiguration(activityType: .swimming, locationType: .indoor, swimmingLocationType: .pool, lapLength: Quantity(25, try HealthUnit("m"))),
                start: at(200), end: at(230))
            try await owner.save([.workout(triathlon), .workout(swim)])
            try await owner.setCharacteristic(of: .wheelchairUse, to: .wheelchairUse(.yes))
            try await owner.setCharacteristic(of: .activityMoveMode, to: .activityMoveMode(.appleMoveTime))

            let cli = AuthCLITests.Session(server: server)
            let zip = server.directory.appending(path: "apple.zip")
            let exported = try await cli.run(server.ownerCredential, ["export", "alice", "--format", "apple-health", "--output", zip.path])
            #expect(exported.status == 0, "\(exported.error)")
            let violation = try Self.dtdViolation(ofExportIn: zip)
            #expect(violation == nil, "export.xml breaks its DTD: \(violation ?? "")")
            let copy = try server.store.createLedger(id: "copy")
            let copyOwner = try await copy.issueCredential(for: .owner)
            let imported = try #require(try await cli.json(copyOwner, ["import", "apple-health", zip.path]) as? [String: Any])
            #expect(imported["imported"] as? [String: Int] == ["workouts": 2, "characteristics": 2] && imported["rejected"] as? [String: Int] == [:], "\(imported)")
            let copyStore = server.client(copyOwner)
            let characteristics = try await copyStore.characteristics([.wheelchairUse, .activityMoveMode])
            #expect(characteristics == [.wheelchairUse(.yes), .activityMoveMode(.appleMoveTime)])
            let workouts = try await SampleQueryDescriptor(type: .workout).result(for: copyStore).compactMap(\.workout).sorted { $0.startDate < $1.startDate }
            try #require(workouts.count == 2)
            #expect(workouts[0].activityType == .swimBikeRun && workouts[0].activities.map(\.configuration.activityType) == [.swimming, .cycling, .running])
            #expect(workouts[0].activities.last?.events.first?.metadata["note"] == .string("last lap"))
            let metres = try HealthUnit("m")
            #expect(workouts[1].configuration.swimmingLocationType == .pool && workouts[1].configuration.lapLength == Quantity(25, metres))
            let swimLeg = try #require(workouts[0].activities.first?.configuration)
            #expect(swimLeg.swimmingLocationType == .pool && swimLeg.lapLength == Quantity(50, metres), "the triathlon's swim leg: \(swimLeg)")
            #expect(workouts[0].activities.dropFirst().allSatisfy { $0.configuration.lapLength == nil })

            // The Health app's own export names no leg's type: the legs are left out, counted.
            let xml = """
                <?xml version="1.0" encoding="UTF-8"?>
                <HealthData locale="en_GB">
                 <Workout workoutActivityType="HKWorkoutActivityTypeSwimBikeRun" sourceName="Watch" startDate="2025-05-18 08:00:00 +0000" endDate="2025-05-18 09:30:00 +0000">
                  <WorkoutActivity uuid="0A1B2C3D-0000-4000-8000-000000000011" startDate="2025-05-18 08:00:00 +0000" endDate="2025-05-18 08:20:00 +0000"/>
                  <WorkoutActivity uuid="0A1B2C3D-0000-4000-8000-000000000012" startDate="2025-05-18 08:22:00 +0000" endDate="2025-05-18 09:00:00 +0000"/>
                 </Workout>
                </HealthData>
                """
            let file = server.directory.appending(path: "tri.xml")
            try Data(xml.utf8).write(to: file)
            let fromApple = try #require(try await cli.json(copyOwner, ["import", "apple-health", file.path]) as? [String: Any])
            #expect(fromApple["imported"] as? [String: Int] == ["workouts": 1], "\(fromApple)")
            #expect((fromApple["skipped"] as? [String: Int])?["WorkoutActivity: a multisport workout's activity names no activity type"] == 2, "\(fromApple)")
            await copyStore.close()
            await owner.close()
        }
    }

    @Test("JSON Lines: attachments of any object travel, two of the same name and size both; a re-import adds none again")
    func attachmentsOfAnyObject() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let workout = WorkoutRPCTests.run()
            let date = Samples.base.addingTimeInterval(600)
            let sample = QuantitySample(type: Samples.heartRate, quantity: Quantity(70, WorkoutRPCTests.bpm), start: date, end: date)
            try await owner.save([.workout(workout), .quantitySample(sample)])
            let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            let first = png + Array(repeating: 1, count: 32), second = png + Array(repeating: 2, count: 32)
            _ = try await owner.addAttachment(to: sample.uuid, name: "strip.png", contentType: "image/png", data: first)
            _ = try await owner.addAttachment(to: sample.uuid, name: "strip.png", contentType: "image/png", data: second)
            _ = try await owner.addAttachment(to: workout.uuid, name: "map.png", contentType: "image/png", data: first)

            let cli = AuthCLITests.Session(server: server)
            let lines = server.directory.appending(path: "alice.jsonl")
            let exported = try await cli.run(server.ownerCredential, ["export", "alice", "--output", lines.path])
            #expect(exported.status == 0, "\(exported.error)")
            let attachmentLines = try String(contentsOf: lines, encoding: .utf8).split(separator: "\n").filter { $0.contains(#""kind":"attachment""#) }
            #expect(attachmentLines.count == 3)
            let copy = try server.store.createLedger(id: "copy")
            let copyOwner = try await copy.issueCredential(for: .owner)
            let imported = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect((imported["imported"] as? [String: Int])?["attachments"] == 3, "\(imported)")
            let copyStore = server.client(copyOwner)
            func contents(_ object: UUID) async throws -> [[UInt8]] {
                var result: [[UInt8]] = []
                for attachment in try await copyStore.attachments(of: object) { result.append(try await copyStore.data(of: attachment.uuid).1) }
                return result
            }
            #expect(try await contents(sample.uuid) == [first, second])
            #expect(try await contents(workout.uuid) == [first])
            let again = try #require(try await cli.json(copyOwner, ["import", "healthledger", lines.path]) as? [String: Any])
            #expect((again["imported"] as? [String: Int])?.isEmpty == true && again["alreadyPresent"] as? Int == 5, "\(again)")
            await copyStore.close()
            await owner.close()
        }
    }

    @Test("a line longer than the reader's limit is read past, not held: given as too long, the lines around it as they are; the import rejects it and goes on")
    func overlongLines() async throws {
        try await withTestServer { server in
            let long = Data(repeating: UInt8(ascii: "x"), count: LineReader.maximumLength + 1)
            let file = server.directory.appending(path: "long.txt")
            try (Data("a\n".utf8) + long + Data("\nb\n\nc".utf8)).write(to: file)
            // Each line told in a few characters (a failure must not print 64 MiB).
            func lines() async throws -> [String] {
                var lines: [String] = []
                for try await line in LineReader(url: file) {
                    switch line {
                    case .text(let text): lines.append(text.count <= 16 ? text : "\(text.count) characters")
                    case .tooLong: lines.append("too long")
                    }
                }
                return lines
            }
            #expect(try await lines() == ["a", "too long", "b", "", "c"], "empty lines are given, so that lines can be counted")
            try (Data("a\n".utf8) + long).write(to: file)
            #expect(try await lines() == ["a", "too long"], "a file that ends inside the long line")
            try (Data("a\n".utf8) + long.dropLast() + Data("\nb".utf8)).write(to: file)
            #expect(try await lines() == ["a", "\(LineReader.maximumLength) characters", "b"], "a line of the limit's length is given whole")

            let header = #"{"exportedAt":"2026-11-27T10:00:00Z","format":"healthledger-export","kind":"header","ledger":"x","version":1}"#
            try (Data((header + "\n\n").utf8) + long + Data("\n{\"kind\":\"end\",\"objects\":0}\n".utf8)).write(to: file)
            let cli = AuthCLITests.Session(server: server)
            let summary = try #require(try await cli.json(server.ownerCredential, ["import", "healthledger", file.path]) as? [String: Any])
            #expect(summary["rejected"] as? [String: Int] == ["unparsable value": 1] && summary["error"] == nil, "\(summary)")
            let rejections = try #require(summary["rejections"] as? [[String: Any]])
            #expect(rejections.first?["line"] as? Int == 3, "the empty line counts")
            #expect((rejections.first?["reason"] as? String)?.contains("longer than 64 MiB") == true)
        }
    }
}
