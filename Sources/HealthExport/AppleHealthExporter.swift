import Foundation
import HealthLedgerSDK
import HealthModel
import LedgerSchema
import ZIPFoundation

/// Writes what the caller may read as the Health app's export: `export.zip` holding
/// `apple_health_export/export.xml` (with the app's DTD) and `workout-routes/*.gpx`.
///
/// As in the Health app's exports, a correlation's members appear inside it and again at top
/// level (the importer knows them apart). Dates are written to the second, in UTC; sources by
/// name. Use the JSON Lines export for an exact copy.
public struct AppleHealthExporter {
    public let store: HealthStore

    public init(store: HealthStore) { self.store = store }

    public func export(to destination: URL) async throws -> ExportSummary {
        let started = ContinuousClock.now
        var summary = ExportSummary()
        let work = FileManager.default.temporaryDirectory.appending(path: "healthledger-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let xmlURL = work.appending(path: "export.xml")
        guard FileManager.default.createFile(atPath: xmlURL.path, contents: nil) else { throw ExportArchiveError("cannot write in \(work.path)") }
        let xml = try XMLWriter(handle: FileHandle(forWritingTo: xmlURL))
        try xml.write(AppleHealthWriter.prologue(exportDate: Date()))

        let characteristicTypes = TypeCatalogue.characteristicTypes.compactMap { try? ObjectType($0) }
        let characteristics = try await store.characteristics(characteristicTypes)
        try xml.write(AppleHealthWriter.me(Dictionary(uniqueKeysWithValues: zip(characteristicTypes, characteristics).compactMap { type, value in
            value.map { (type, $0) }
        })))
        summary.characteristics = characteristics.compactMap { $0 }.filter { !$0.isNotSet }.count

        var routesByWorkout: [UUID: [WorkoutRoute]] = [:]
        for route in try await SampleQueryDescriptor(type: .workoutRoute).result(for: store).compactMap(\.workoutRoute) {
            routesByWorkout[route.workoutUUID, default: []].append(route)
        }
        // Heartbeat series go inside the records of heart rate variability they belong to, as
        // the Health app writes them; those of no record in records of their own.
        let heartbeatSeries = HeartbeatSeriesMerge(store: store)
        func writeOwnRecord(_ series: HeartbeatSeriesSample) throws {
            try xml.write(AppleHealthWriter.heartbeatSeriesRecord(series))
            summary.objects[ObjectType.heartbeatSeries.identifier, default: 0] += 1
        }
        var routeFiles: [(String, [RouteLocation])] = []
        var clinicalFiles: [(String, [UInt8])] = []
        var electrocardiogramFiles: [(String, String)] = []
        for type in LedgerLines.exportedTypes where type != .workoutRoute && type != .heartbeatSeries {
            for try await batch in try await store.results(for: SampleQueryDescriptor(type: type, batchSize: 1000)) {
                for object in batch {
                    switch object {
                    case .electrocardiogram(let recording):
                        // A file of its own, as the Health app writes it; nothing in export.xml.
                        // The whole UUID: time-ordered ones made within a minute share their first digits.
                        let name = "ecg_\(AppleHealthValues.string(recording.startDate).prefix(10))_\(recording.uuid.uuidString).csv"
                        electrocardiogramFiles.append((name, ElectrocardiogramCSV.write(recording)))
                    case .clinicalRecord(let record):
                        // The resource beside export.xml, as the Health app writes it.
                        let name = "\(record.fhirResource.resourceType)-\(record.uuid.uuidString).json"
                        clinicalFiles.append((name, record.fhirResource.data))
                        try xml.write(AppleHealthWriter.clinicalRecord(record, path: "/clinical-records/" + name))
                    case .quantitySample(let sample) where sample.type.identifier == AppleHealthWriter.heartRateVariability:
                        let series = try await heartbeatSeries.series(heldBy: sample, passing: writeOwnRecord)
                        try xml.write(AppleHealthWriter.element(object, heartbeatSeries: series))
                        if series != nil { summary.objects[ObjectType.heartbeatSeries.identifier, default: 0] += 1 }
                    case .quantitySample, .categorySample, .correlation, .visionPrescription, .activitySummary, .audiogram, .stateOfMind,
                        .userAnnotatedMedication, .medicationDoseEvent:
                        // A correlation's members come again at top level with their type, as
                        // the Health app lists them.
                        try xml.write(AppleHealthWriter.element(object))
                    case .workout(let workout):
                        let statistics = try await store.statistics(for: workout.uuid)
                        var routes: [(WorkoutRoute, String)] = []
                        for route in routesByWorkout[workout.uuid] ?? [] {
                            let name = "route_\(AppleHealthValues.string(route.startDate).prefix(10))_\(route.uuid.uuidString).gpx"
                            routes.append((route, "/workout-routes/" + name))
                            routeFiles.append((name, try await store.routeLocations(of: route.uuid).all()))
                            summary.objects[ObjectType.workoutRoute.identifier, default: 0] += 1
                        }
                        try xml.write(AppleHealthWriter.workout(workout, statistics: statistics, routes: routes))
                    case .workoutRoute, .heartbeatSeries:
                        continue
                    }
                    summary.objects[type.identifier, default: 0] += 1
                }
                try xml.flush()
            }
            // The series no record held, once the records that could hold them are written.
            if type.identifier == AppleHealthWriter.heartRateVariability { try await heartbeatSeries.rest(writeOwnRecord) }
        }
        try await heartbeatSeries.rest(writeOwnRecord)
        // Each type's sources in order of priority, by which statistics merge overlapping
        // samples: the Health app's format has no place for it, so an element of the file's
        // DTD holds it. Sources go by name: two of one name become one.
        for (type, sources) in try await store.sourceOrders() {
            var seen = Set<String>()
            let names = sources.map(\.name).filter { seen.insert($0).inserted }
            guard names.count > 1 else { continue }
            for name in names { try xml.write(AppleHealthWriter.sourcePriority(type, sourceName: name)) }
            summary.sourceOrders += 1
        }
        try xml.write("</HealthData>\n")
        try xml.close()

        let archive: Archive
        do { archive = try Archive(url: destination, accessMode: .create) } catch { throw ExportArchiveError("cannot create \(destination.path): \(error)") }
        try archive.addEntry(with: "apple_health_export/export.xml", fileURL: xmlURL, compressionMethod: .deflate)
        /// A file beside export.xml, at `path` under the export's folder.
        func add(_ path: String, _ data: Data) throws {
            try archive.addEntry(
                with: "apple_health_export/\(path)", type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate
            ) { position, size in data.subdata(in: Int(position)..<Int(position) + size) }
        }
        for (name, text) in electrocardiogramFiles { try add("electrocardiograms/\(name)", Data(text.utf8)) }
        for (name, bytes) in clinicalFiles { try add("clinical-records/\(name)", Data(bytes)) }
        for (name, locations) in routeFiles { try add("workout-routes/\(name)", Data(GPXRoute.document(locations, name: name).utf8)) }
        summary.seconds = seconds(since: started)
        return summary
    }
}

/// The ledger's heartbeat series in start order, met with its records of heart rate variability
/// as the export writes them (also in start order), so that each series a record holds goes
/// inside it and the rest in records of their own as the export passes their second: only a
/// few batches of series are held at a time, not the ledger's (a series holds up to 200,000
/// beats).
private final class HeartbeatSeriesMerge {
    private let store: HealthStore
    /// Opened with the first record of heart rate variability (a stream holds a snapshot of
    /// the ledger while it is open).
    private var opened: SampleBatches.AsyncIterator?
    /// Fetched and not yet written, in start order.
    private var pending: [HeartbeatSeriesSample] = []
    private var exhausted = false

    init(store: HealthStore) { self.store = store }

    /// The next batch of series, nil at the end.
    private func nextBatch() async throws -> [HeartbeatSeriesSample]? {
        if opened == nil {
            opened = try await SampleQueryDescriptor(type: .heartbeatSeries, batchSize: 16).results(for: store).makeAsyncIterator()
        }
        guard let batch = try await opened?.next() else {
            exhausted = true
            opened = nil
            return nil
        }
        return batch.compactMap(\.heartbeatSeries)
    }

    /// The second a date is written at.
    private static func second(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }

    /// The series `record` holds (``AppleHealthWriter/holds(_:_:)``), if any; series of earlier
    /// seconds, which no later record can hold, go to `passing` first.
    func series(heldBy record: QuantitySample, passing: (HeartbeatSeriesSample) throws -> Void) async throws -> HeartbeatSeriesSample? {
        let second = Self.second(record.startDate)
        while !exhausted, pending.last.map({ Self.second($0.startDate) <= second }) ?? true {
            guard let batch = try await nextBatch() else { break }
            pending += batch
        }
        let earlier = pending.prefix { Self.second($0.startDate) < second }
        for series in earlier { try passing(series) }
        pending.removeFirst(earlier.count)
        guard let held = pending.firstIndex(where: { Self.second($0.startDate) == second && AppleHealthWriter.holds(record, $0) }) else { return nil }
        return pending.remove(at: held)
    }

    /// Every series not yet written, to `passing`, in start order.
    func rest(_ passing: (HeartbeatSeriesSample) throws -> Void) async throws {
        for series in pending { try passing(series) }
        pending = []
        while !exhausted, let batch = try await nextBatch() {
            for series in batch { try passing(series) }
        }
    }
}

/// The elements of `export.xml`, as text.
public enum AppleHealthWriter {
    /// The XML declaration, the Health app's DTD (export version 14) and the opening of the
    /// document up to `ExportDate`.
    public static func prologue(exportDate: Date, locale: String = "en_US") -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + dtd + "<HealthData locale=\"\(locale)\">\n <ExportDate value=\"\(AppleHealthValues.string(exportDate))\"/>\n"
    }

    public static func me(_ characteristics: [ObjectType: Characteristic]) -> String {
        func name(_ prefix: String, _ value: Any?) -> String {
            guard let value else { return prefix + "NotSet" }
            let text = "\(value)"
            return prefix + text.prefix(1).uppercased() + text.dropFirst()
        }
        var birth = ""
        if case .dateOfBirth(let year, let month, let day)? = characteristics[.dateOfBirth] {
            birth = String(format: "%04d-%02d-%02d", year, month, day)
        }
        func value<T>(_ type: ObjectType, _ extract: (Characteristic) -> T?) -> T? { characteristics[type].flatMap(extract) }
        let sex = value(.biologicalSex) { if case .biologicalSex(let value) = $0 { value } else { nil } }
        let blood = value(.bloodType) { if case .bloodType(let value) = $0 { value } else { nil } }
        let skin = value(.fitzpatrickSkinType) { if case .fitzpatrickSkinType(let value) = $0 { value } else { nil } }
        let medications = value(.cardioFitnessMedicationsUse) { if case .cardioFitnessMedicationsUse(let value) = $0 { value } else { nil } }
        var text = " <Me HKCharacteristicTypeIdentifierDateOfBirth=\"\(birth)\" HKCharacteristicTypeIdentifierBiologicalSex=\"\(name("HKBiologicalSex", sex))\""
            + " HKCharacteristicTypeIdentifierBloodType=\"\(name("HKBloodType", blood))\""
            + " HKCharacteristicTypeIdentifierFitzpatrickSkinType=\"\(name("HKFitzpatrickSkinType", skin))\""
            + " \(ObjectType.cardioFitnessMedicationsUse.identifier)=\"\(AppleHealthValues.string(medications ?? .none))\""
        // Written only when set, as the Health app's exports carry neither.
        if let wheelchair = value(.wheelchairUse, { if case .wheelchairUse(let value) = $0, value != .notSet { value } else { nil } }) {
            text += " \(ObjectType.wheelchairUse.identifier)=\"\(name("HKWheelchairUse", wheelchair))\""
        }
        if let moveMode = value(.activityMoveMode, { if case .activityMoveMode(let value) = $0, value != .notSet { value } else { nil } }) {
            text += " \(ObjectType.activityMoveMode.identifier)=\"\(name("HKActivityMoveMode", moveMode))\""
        }
        return text + "/>\n"
    }

    /// A `SourcePriority` element: `sourceName` ranks next among `type`'s sources.
    public static func sourcePriority(_ type: ObjectType, sourceName: String) -> String {
        " <SourcePriority type=\"\(type.identifier)\" sourceName=\"\(AppleHealthValues.escape(sourceName))\"/>\n"
    }

    /// A `Record`, `Correlation`, `VisionPrescription`, `ActivitySummary`, `Audiogram`,
    /// `StateOfMind`, `Medication` or `MedicationDoseEvent` element; a record of heart rate variability with `heartbeatSeries` inside it (see
    /// ``holds(_:_:)``).
    public static func element(_ object: HealthObject, indent: String = " ", heartbeatSeries: HeartbeatSeriesSample? = nil) -> String {
        switch object {
        case .quantitySample(let sample):
            return record(
                sample, type: sample.type.identifier, unit: sample.quantity.unit.description, value: AppleHealthValues.number(sample.quantity.value),
                indent: indent, children: seriesEntries(sample, indent: indent + " ") + (heartbeatSeries.map { heartbeatList($0, indent: indent + " ") } ?? ""))
        case .categorySample(let sample):
            let value = sample.type.values.name == CategoryValueSet.notApplicable.name
                ? String(sample.value) : AppleHealthValues.categoryName(sample.value, of: sample.type)
            return record(sample, type: sample.type.identifier, unit: nil, value: value, indent: indent)
        case .correlation(let correlation):
            var text = "\(indent)<Correlation type=\"\(correlation.type.identifier)\"\(common(correlation))>\n"
            text += metadata(correlation.metadata, indent: indent + " ")
            for member in correlation.objects { text += element(.quantitySample(member), indent: indent + " ") }
            return text + "\(indent)</Correlation>\n"
        case .visionPrescription(let prescription):
            var text = "\(indent)<VisionPrescription type=\"\(prescription.prescriptionType == .glasses ? "glasses" : "contacts")\""
            text += " dateIssued=\"\(AppleHealthValues.string(prescription.dateIssued))\" expirationDate=\"\(AppleHealthValues.string(prescription.expirationDate))\""
            if !prescription.description.isEmpty { text += " brand=\"\(AppleHealthValues.escape(prescription.description))\"" }
            text += source(prescription) + ">\n"
            for (name, lens) in [("RightEye", prescription.rightEye), ("LeftEye", prescription.leftEye)] {
                guard let lens else { continue }
                text += "\(indent) <\(name)" + quantity("sphere", lens.sphere) + quantity("cylinder", lens.cylinder) + quantity("axis", lens.axis)
                    + quantity("add", lens.addPower) + quantity("vertex", lens.vertexDistance) + quantity("prismAmount", lens.prism?.amount)
                    + quantity("prismAngle", lens.prism?.angle) + quantity("farPD", lens.farPupillaryDistance)
                    + quantity("nearPD", lens.nearPupillaryDistance) + quantity("baseCurve", lens.baseCurve) + quantity("diameter", lens.diameter) + "/>\n"
            }
            return text + metadata(prescription.metadata, indent: indent + " ") + "\(indent)</VisionPrescription>\n"
        case .activitySummary(let summary):
            return activitySummary(summary, indent: indent)
        case .audiogram(let audiogram):
            var text = "\(indent)<Audiogram type=\"\(ObjectType.audiogram.identifier)\"\(common(audiogram))>\n"
            text += metadata(audiogram.metadata, indent: indent + " ")
            for point in audiogram.points {
                func level(_ quantity: Quantity) -> String {
                    AppleHealthValues.number((try? quantity.doubleValue(for: .hearingLevel)) ?? quantity.value)
                }
                text += "\(indent) <SensitivityPoint frequencyValue=\"\(AppleHealthValues.number((try? point.frequency.doubleValue(for: .hertz)) ?? point.frequency.value))\" frequencyUnit=\"Hz\""
                if let left = point.leftEar { text += " leftEarValue=\"\(level(left))\" leftEarUnit=\"dBHL\"" }
                if let right = point.rightEar { text += " rightEarValue=\"\(level(right))\" rightEarUnit=\"dBHL\"" }
                if point.leftEarMasked { text += " leftEarMasked=\"1\"" }
                if point.rightEarMasked { text += " rightEarMasked=\"1\"" }
                text += "/>\n"
            }
            return text + "\(indent)</Audiogram>\n"
        case .stateOfMind(let state):
            return stateOfMind(state, indent: indent)
        case .userAnnotatedMedication(let medication):
            return self.medication(medication, indent: indent)
        case .medicationDoseEvent(let dose):
            return medicationDose(dose, indent: indent)
        case .workout, .workoutRoute, .clinicalRecord, .electrocardiogram, .heartbeatSeries:
            return ""
        }
    }

    /// A series sample's values (HealthLedger's exports; the Health app writes none): a
    /// `QuantitySeriesEntry` each, with its `value` in the record's unit and its `start` and
    /// `end` in seconds after the record's start as written (to the second), to the microsecond.
    static func seriesEntries(_ sample: QuantitySample, indent: String) -> String {
        let origin = Int64(sample.startDate.timeIntervalSince1970.rounded(.down)) * 1_000_000
        return sample.series.map { entry in
            "\(indent)<QuantitySeriesEntry value=\"\(AppleHealthValues.number(entry.value))\""
                + " start=\"\(AppleHealthValues.seconds(microseconds: microseconds(entry.startDate) - origin))\""
                + " end=\"\(AppleHealthValues.seconds(microseconds: microseconds(entry.endDate) - origin))\"/>\n"
        }.joined()
    }

    /// Whether `record` holds `series` in the export: a record of heart rate variability
    /// (HKQuantityTypeIdentifierHeartRateVariabilitySDNN) whose source, device and dates, as
    /// written, are those the reader gives a series inside it — the record's, its end later
    /// when the last beat is — so that the series comes back the same from a re-import.
    public static func holds(_ record: QuantitySample, _ series: HeartbeatSeriesSample) -> Bool {
        guard record.type.identifier == heartRateVariability, source(record) == source(series),
            AppleHealthValues.string(record.startDate) == AppleHealthValues.string(series.startDate)
        else { return false }
        let start = series.startDate.timeIntervalSince1970.rounded(.down)
        let recordEnd = record.endDate.timeIntervalSince1970.rounded(.down)
        // The reader's rounding: the last beat to the microsecond, then up to the second.
        let last = ((series.beats.last?.timeSinceSeriesStart ?? 0) * 1_000_000).rounded() / 1_000_000
        let end = max(recordEnd, start + last.rounded(.up))
        return AppleHealthValues.string(Date(timeIntervalSince1970: end)) == AppleHealthValues.string(series.endDate)
    }

    /// A `StateOfMind` element (HealthLedger's exports; the Health app writes none): its `kind`,
    /// `valence`, `labels` and `associations` (HealthKit's case names, space-separated), its
    /// source, device and dates as a record's, and its metadata as `MetadataEntry` elements.
    static func stateOfMind(_ state: StateOfMind, indent: String) -> String {
        var text = "\(indent)<StateOfMind kind=\"\(state.kind.name)\" valence=\"\(AppleHealthValues.number(state.valence))\""
        if !state.labels.isEmpty { text += " labels=\"\(state.labels.map(\.rawValue).joined(separator: " "))\"" }
        if !state.associations.isEmpty { text += " associations=\"\(state.associations.map(\.rawValue).joined(separator: " "))\"" }
        text += common(state)
        guard !state.metadata.isEmpty else { return text + "/>\n" }
        return text + ">\n" + metadata(state.metadata, indent: indent + " ") + "\(indent)</StateOfMind>\n"
    }

    /// A `Medication` element (HealthLedger's exports): its concept's `conceptIdentifier`,
    /// `displayText` and `generalForm`, its `nickname`, `archived="1"` and `hasSchedule="1"` when
    /// so, its source, device and dates as a record's, its codings as `ClinicalCoding` elements
    /// and its metadata as `MetadataEntry` elements.
    static func medication(_ medication: UserAnnotatedMedication, indent: String) -> String {
        let concept = medication.medication
        var text = "\(indent)<Medication conceptIdentifier=\"\(AppleHealthValues.escape(concept.identifier))\""
        text += " displayText=\"\(AppleHealthValues.escape(concept.displayText))\" generalForm=\"\(concept.generalForm.rawValue)\""
        if let nickname = medication.nickname { text += " nickname=\"\(AppleHealthValues.escape(nickname))\"" }
        if medication.isArchived { text += " archived=\"1\"" }
        if medication.hasSchedule { text += " hasSchedule=\"1\"" }
        text += common(medication)
        guard !concept.relatedCodings.isEmpty || !medication.metadata.isEmpty else { return text + "/>\n" }
        text += ">\n"
        for coding in concept.relatedCodings {
            text += "\(indent) <ClinicalCoding system=\"\(AppleHealthValues.escape(coding.system))\""
            if let version = coding.version { text += " version=\"\(AppleHealthValues.escape(version))\"" }
            text += " code=\"\(AppleHealthValues.escape(coding.code))\"/>\n"
        }
        return text + metadata(medication.metadata, indent: indent + " ") + "\(indent)</Medication>\n"
    }

    /// A `MedicationDoseEvent` element (HealthLedger's exports): its medication's
    /// `conceptIdentifier`, `logStatus` and `scheduleType` by HealthKit's case names, its
    /// quantities and their `unit`, its `scheduledDate`, its source, device and dates as a
    /// record's, and its metadata as `MetadataEntry` elements.
    static func medicationDose(_ dose: MedicationDoseEvent, indent: String) -> String {
        var text = "\(indent)<MedicationDoseEvent conceptIdentifier=\"\(AppleHealthValues.escape(dose.medicationConceptIdentifier))\""
        text += " logStatus=\"\(dose.logStatus)\" scheduleType=\"\(dose.scheduleType)\""
        if let quantity = dose.doseQuantity { text += " doseQuantity=\"\(AppleHealthValues.number(quantity))\"" }
        if let quantity = dose.scheduledDoseQuantity { text += " scheduledDoseQuantity=\"\(AppleHealthValues.number(quantity))\"" }
        text += " unit=\"\(AppleHealthValues.escape(dose.unit.description))\""
        if let date = dose.scheduledDate { text += " scheduledDate=\"\(AppleHealthValues.string(date))\"" }
        text += common(dose)
        guard !dose.metadata.isEmpty else { return text + "/>\n" }
        return text + ">\n" + metadata(dose.metadata, indent: indent + " ") + "\(indent)</MedicationDoseEvent>\n"
    }

    /// The type of the records that hold heartbeat series.
    public static let heartRateVariability = "HKQuantityTypeIdentifierHeartRateVariabilitySDNN"

    /// A heartbeat series that no record of heart rate variability holds, as a `Record` of its
    /// own type (HealthLedger's exports; the Health app writes none) holding its list.
    public static func heartbeatSeriesRecord(_ series: HeartbeatSeriesSample) -> String {
        " <Record type=\"\(ObjectType.heartbeatSeries.identifier)\"\(common(series))>\n" + heartbeatList(series, indent: "  ") + " </Record>\n"
    }

    /// A `HeartRateVariabilityMetadataList`: each beat as an `InstantaneousBeatsPerMinute`
    /// with its time of day in UTC (the export's dates are), to the microsecond where it has
    /// them, its `bpm` from the interval since the beat before (none for the first beat or one
    /// after a gap), and HealthLedger's `precededByGap="1"`; the series' metadata as
    /// `MetadataEntry` elements before them.
    static func heartbeatList(_ series: HeartbeatSeriesSample, indent: String) -> String {
        var text = "\(indent)<HeartRateVariabilityMetadataList>\n" + metadata(series.metadata, indent: indent + " ")
        let start = Int64(series.startDate.timeIntervalSince1970.rounded(.down)) * 1_000_000
        var previous: TimeInterval?
        for beat in series.beats {
            let time = AppleHealthValues.timeOfDayString(microseconds: start + Int64((beat.timeSinceSeriesStart * 1_000_000).rounded()))
            text += "\(indent) <InstantaneousBeatsPerMinute"
            // Beats at least a millisecond apart (validation) give at most 60,000 a minute.
            if let previous, !beat.precededByGap, case let rate = (60 / (beat.timeSinceSeriesStart - previous)).rounded(), rate.isFinite, rate <= 60_000 {
                text += " bpm=\"\(Int(rate))\""
            }
            text += " time=\"\(time)\""
            text += beat.precededByGap ? " precededByGap=\"1\"/>\n" : "/>\n"
            previous = beat.timeSinceSeriesStart
        }
        return text + "\(indent)</HeartRateVariabilityMetadataList>\n"
    }

    /// A `ClinicalRecord` element as the Health app writes it, naming the file its FHIR resource
    /// is in (`path`), with what that format leaves out in this file's DTD: `displayName`, and
    /// its metadata as `MetadataEntry` elements inside.
    public static func clinicalRecord(_ record: ClinicalRecord, path: String) -> String {
        let resource = record.fhirResource
        var text = " <ClinicalRecord type=\"\(record.type.identifier)\" identifier=\"\(AppleHealthValues.escape(resource.identifier))\"" + source(record)
        text += " sourceURL=\"\(AppleHealthValues.escape(resource.sourceURL))\" fhirVersion=\"\(AppleHealthValues.escape(resource.fhirVersion))\""
        text += " receivedDate=\"\(AppleHealthValues.string(record.startDate))\" resourceFilePath=\"\(AppleHealthValues.escape(path))\""
        text += " displayName=\"\(AppleHealthValues.escape(record.displayName))\""
        guard !record.metadata.isEmpty else { return text + "/>\n" }
        return text + ">\n" + metadata(record.metadata, indent: "  ") + " </ClinicalRecord>\n"
    }

    /// The source an activity summary of an export that names none (the Health app's) is
    /// imported from: the Health app, which computes them.
    public static let activitySummarySource = "Health"

    /// An `ActivitySummary` element as the Health app writes it (energies in `kcal`, times in
    /// minutes, stand hours as a count), with what that format leaves out in attributes of this
    /// file's DTD, `activityMoveMode` (move time only), `paused` and the source's name, and its
    /// metadata (its sync identifier among it) as `MetadataEntry` elements inside.
    static func activitySummary(_ summary: ActivitySummary, indent: String) -> String {
        func number(_ quantity: Quantity, _ unit: String) -> String {
            AppleHealthValues.number((try? quantity.doubleValue(for: HealthUnit(unit))) ?? quantity.value)
        }
        var text = "\(indent)<ActivitySummary dateComponents=\"\(summary.day)\""
        text += " activeEnergyBurned=\"\(number(summary.activeEnergyBurned, "kcal"))\" activeEnergyBurnedGoal=\"\(number(summary.activeEnergyBurnedGoal, "kcal"))\""
        text += " activeEnergyBurnedUnit=\"kcal\""
        text += " appleMoveTime=\"\(number(summary.moveTime, "min"))\" appleMoveTimeGoal=\"\(number(summary.moveTimeGoal, "min"))\""
        text += " appleExerciseTime=\"\(number(summary.exerciseTime, "min"))\" appleExerciseTimeGoal=\"\(number(summary.exerciseTimeGoal, "min"))\""
        text += " appleStandHours=\"\(number(summary.standHours, "count"))\" appleStandHoursGoal=\"\(number(summary.standHoursGoal, "count"))\""
        if summary.moveMode == .appleMoveTime { text += " activityMoveMode=\"HKActivityMoveModeAppleMoveTime\"" }
        if summary.isPaused { text += " paused=\"1\"" }
        if summary.sourceRevision.source.name != activitySummarySource {
            text += " sourceName=\"\(AppleHealthValues.escape(summary.sourceRevision.source.name))\""
        }
        guard !summary.metadata.isEmpty else { return text + "/>\n" }
        return text + ">\n" + metadata(summary.metadata, indent: indent + " ") + "\(indent)</ActivitySummary>\n"
    }

    /// `metadata` with a swim's settings, which travel as HealthKit's metadata keys (the
    /// reader takes them back), for a workout or one of its activities.
    static func withSwimSettings(_ metadata: Metadata, _ configuration: WorkoutConfiguration) -> Metadata {
        var metadata = metadata
        if configuration.swimmingLocationType != .unknown {
            metadata[MetadataKey.swimmingLocationType] = .number(Double(configuration.swimmingLocationType.rawValue))
        }
        if let lapLength = configuration.lapLength { metadata[MetadataKey.lapLength] = .quantity(lapLength) }
        return metadata
    }

    public static func workout(_ workout: Workout, statistics: WorkoutStatistics, routes: [(WorkoutRoute, String)]) -> String {
        var text = " <Workout workoutActivityType=\"\(workout.activityType.exportName)\" duration=\"\(AppleHealthValues.number(workout.duration / 60))\" durationUnit=\"min\""
        text += common(workout) + ">\n"
        var entries = workout.metadata
        switch workout.configuration.locationType {
        case .indoor: entries[MetadataKey.indoorWorkout] = .number(1)
        case .outdoor: entries[MetadataKey.indoorWorkout] = .number(0)
        case .unknown: break
        }
        text += metadata(Self.withSwimSettings(entries, workout.configuration), indent: "  ")
        for event in workout.events { text += self.event(event, indent: "  ") }
        for activity in workout.activities {
            text += "  <WorkoutActivity uuid=\"\(activity.uuid.uuidString)\""
            // The Health app's exports name no activity type; a multisport workout's legs need one.
            if activity.configuration.activityType != workout.activityType {
                text += " workoutActivityType=\"\(activity.configuration.activityType.exportName)\""
            }
            text += " startDate=\"\(AppleHealthValues.string(activity.startDate))\""
            text += " endDate=\"\(AppleHealthValues.string(activity.endDate))\" duration=\"\(AppleHealthValues.number(activity.duration / 60))\" durationUnit=\"min\">\n"
            text += metadata(Self.withSwimSettings(activity.metadata, activity.configuration), indent: "   ")
            for event in activity.events { text += self.event(event, indent: "   ") }
            text += "  </WorkoutActivity>\n"
        }
        for (type, values) in statistics.workout.sorted(by: { $0.key.identifier < $1.key.identifier }) {
            let unit = DisplayUnits.unit(for: type)
            func number(_ quantity: Quantity?) -> String? { quantity.flatMap { try? $0.doubleValue(for: unit) }.map(AppleHealthValues.number) }
            text += "  <WorkoutStatistics type=\"\(type.identifier)\" startDate=\"\(AppleHealthValues.string(workout.startDate))\" endDate=\"\(AppleHealthValues.string(workout.endDate))\""
            for (name, value) in [
                ("average", number(values.averageQuantity())), ("minimum", number(values.minimumQuantity())),
                ("maximum", number(values.maximumQuantity())), ("sum", number(values.sumQuantity())),
            ] {
                if let value { text += " \(name)=\"\(value)\"" }
            }
            text += " unit=\"\(unit)\"/>\n"
        }
        for (route, path) in routes {
            text += "  <WorkoutRoute\(common(route))>\n" + metadata(route.metadata, indent: "   ")
            text += "   <FileReference path=\"\(AppleHealthValues.escape(path))\"/>\n  </WorkoutRoute>\n"
        }
        return text + " </Workout>\n"
    }

    private static func event(_ event: WorkoutEvent, indent: String) -> String {
        let name = "\(event.type)"
        var text = "\(indent)<WorkoutEvent type=\"HKWorkoutEventType\(name.prefix(1).uppercased() + name.dropFirst())\" date=\"\(AppleHealthValues.string(event.startDate))\""
        if event.endDate > event.startDate {
            text += " duration=\"\(AppleHealthValues.number(event.endDate.timeIntervalSince(event.startDate) / 60))\" durationUnit=\"min\""
        }
        if event.metadata.isEmpty { return text + "/>\n" }
        return text + ">\n" + metadata(event.metadata, indent: indent + " ") + "\(indent)</WorkoutEvent>\n"
    }

    private static func record(_ sample: some HealthSample, type: String, unit: String?, value: String, indent: String, children: String = "") -> String {
        var text = "\(indent)<Record type=\"\(type)\""
        text += source(sample)
        if let unit { text += " unit=\"\(AppleHealthValues.escape(unit))\"" }
        text += " startDate=\"\(AppleHealthValues.string(sample.startDate))\" endDate=\"\(AppleHealthValues.string(sample.endDate))\""
        text += " value=\"\(AppleHealthValues.escape(value))\""
        guard !sample.metadata.isEmpty || !children.isEmpty else { return text + "/>\n" }
        return text + ">\n" + metadata(sample.metadata, indent: indent + " ") + children + "\(indent)</Record>\n"
    }

    private static func common(_ sample: some HealthSample) -> String {
        source(sample) + " startDate=\"\(AppleHealthValues.string(sample.startDate))\" endDate=\"\(AppleHealthValues.string(sample.endDate))\""
    }

    private static func source(_ sample: some HealthSample) -> String {
        var text = " sourceName=\"\(AppleHealthValues.escape(sample.sourceRevision.source.name))\""
        if let version = sample.sourceRevision.version { text += " sourceVersion=\"\(AppleHealthValues.escape(version))\"" }
        if let device = sample.device { text += " device=\"\(AppleHealthValues.escape(AppleHealthValues.string(device)))\"" }
        return text
    }

    private static func quantity(_ name: String, _ quantity: Quantity?) -> String {
        guard let quantity else { return "" }
        return " \(name)=\"\(AppleHealthValues.number(quantity.value))\" \(name)Unit=\"\(AppleHealthValues.escape(quantity.unit.description))\""
    }

    private static func metadata(_ metadata: Metadata, indent: String) -> String {
        metadata.sorted { $0.key < $1.key }.map { key, value in
            "\(indent)<MetadataEntry key=\"\(AppleHealthValues.escape(MetadataKey.storedName(of: key)))\" value=\"\(AppleHealthValues.escape(AppleHealthValues.string(value)))\"/>\n"
        }.joined()
    }

    /// The attributes of a `RightEye` or `LeftEye` element: each measure and its unit.
    private static let lensAttributes = ["sphere", "cylinder", "axis", "add", "vertex", "prismAmount", "prismAngle", "farPD", "nearPD", "baseCurve", "diameter"]
        .flatMap { [$0, $0 + "Unit"] }
        .map { "\n  " + $0.padding(toLength: 16, withPad: " ", startingAt: 0) + " CDATA #IMPLIED" }
        .joined() + "\n"

    /// The internal DTD the Health app writes at the top of `export.xml` (export version 14).
    public static let dtd = """
        <!DOCTYPE HealthData [
        <!-- HealthKit Export Version: 14 -->
        <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription|StateOfMind|Medication|MedicationDoseEvent)*,SourcePriority*)>
        <!ATTLIST HealthData
          locale CDATA #REQUIRED
        >
        <!ELEMENT ExportDate EMPTY>
        <!ATTLIST ExportDate
          value CDATA #REQUIRED
        >
        <!ELEMENT Me EMPTY>
        <!ATTLIST Me
          HKCharacteristicTypeIdentifierDateOfBirth                   CDATA #REQUIRED
          HKCharacteristicTypeIdentifierBiologicalSex                 CDATA #REQUIRED
          HKCharacteristicTypeIdentifierBloodType                     CDATA #REQUIRED
          HKCharacteristicTypeIdentifierFitzpatrickSkinType           CDATA #REQUIRED
          HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse   CDATA #REQUIRED
          HKCharacteristicTypeIdentifierWheelchairUse                 CDATA #IMPLIED
          HKCharacteristicTypeIdentifierActivityMoveMode              CDATA #IMPLIED
        >
        <!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList|QuantitySeriesEntry)*)>
        <!ATTLIST Record
          type          CDATA #REQUIRED
          unit          CDATA #IMPLIED
          value         CDATA #IMPLIED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!-- HealthLedger: a series sample's values, each with its start and end in seconds after the record's start. -->
        <!ELEMENT QuantitySeriesEntry EMPTY>
        <!ATTLIST QuantitySeriesEntry
          value CDATA #REQUIRED
          start CDATA #REQUIRED
          end   CDATA #REQUIRED
        >
        <!-- HealthLedger: a heartbeat series' metadata entries, and precededByGap="1" on a beat after a gap in the recording; bpm only where the beat before gives it. -->
        <!ELEMENT HeartRateVariabilityMetadataList ((MetadataEntry|InstantaneousBeatsPerMinute)*)>
        <!ELEMENT InstantaneousBeatsPerMinute EMPTY>
        <!ATTLIST InstantaneousBeatsPerMinute
          bpm           CDATA #IMPLIED
          time          CDATA #REQUIRED
          precededByGap CDATA #IMPLIED
        >
        <!-- Note: Any Records that appear as children of a correlation also appear as top-level records in this document. -->
        <!ELEMENT Correlation ((MetadataEntry|Record)*)>
        <!ATTLIST Correlation
          type          CDATA #REQUIRED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT Workout ((MetadataEntry|WorkoutEvent|WorkoutRoute|WorkoutStatistics|WorkoutActivity)*)>
        <!ATTLIST Workout
          workoutActivityType   CDATA #REQUIRED
          duration              CDATA #IMPLIED
          durationUnit          CDATA #IMPLIED
          totalDistance         CDATA #IMPLIED
          totalDistanceUnit     CDATA #IMPLIED
          totalEnergyBurned     CDATA #IMPLIED
          totalEnergyBurnedUnit CDATA #IMPLIED
          sourceName            CDATA #REQUIRED
          sourceVersion         CDATA #IMPLIED
          device                CDATA #IMPLIED
          creationDate          CDATA #IMPLIED
          startDate             CDATA #REQUIRED
          endDate               CDATA #REQUIRED
        >
        <!ELEMENT WorkoutActivity ((WorkoutEvent|WorkoutStatistics|MetadataEntry)*)>
        <!ATTLIST WorkoutActivity
          uuid                  CDATA #REQUIRED
          workoutActivityType   CDATA #IMPLIED
          startDate             CDATA #REQUIRED
          endDate               CDATA #IMPLIED
          duration              CDATA #IMPLIED
          durationUnit          CDATA #IMPLIED
        >
        <!ELEMENT WorkoutEvent (MetadataEntry*)>
        <!ATTLIST WorkoutEvent
          type                  CDATA #REQUIRED
          date                  CDATA #REQUIRED
          duration              CDATA #IMPLIED
          durationUnit          CDATA #IMPLIED
        >
        <!ELEMENT WorkoutStatistics EMPTY>
        <!ATTLIST WorkoutStatistics
          type                  CDATA #REQUIRED
          startDate             CDATA #REQUIRED
          endDate               CDATA #REQUIRED
          average               CDATA #IMPLIED
          minimum               CDATA #IMPLIED
          maximum               CDATA #IMPLIED
          sum                   CDATA #IMPLIED
          unit                  CDATA #IMPLIED
        >
        <!ELEMENT WorkoutRoute ((MetadataEntry|FileReference)*)>
        <!ATTLIST WorkoutRoute
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT FileReference EMPTY>
        <!ATTLIST FileReference
          path CDATA #REQUIRED
        >
        <!ELEMENT ActivitySummary (MetadataEntry*)>
        <!ATTLIST ActivitySummary
          dateComponents           CDATA #IMPLIED
          activeEnergyBurned       CDATA #IMPLIED
          activeEnergyBurnedGoal   CDATA #IMPLIED
          activeEnergyBurnedUnit   CDATA #IMPLIED
          appleMoveTime            CDATA #IMPLIED
          appleMoveTimeGoal        CDATA #IMPLIED
          appleExerciseTime        CDATA #IMPLIED
          appleExerciseTimeGoal    CDATA #IMPLIED
          appleStandHours          CDATA #IMPLIED
          appleStandHoursGoal      CDATA #IMPLIED
          activityMoveMode         CDATA #IMPLIED
          paused                   CDATA #IMPLIED
          sourceName               CDATA #IMPLIED
        >
        <!ELEMENT ClinicalRecord (MetadataEntry*)>
        <!ATTLIST ClinicalRecord
          type              CDATA #REQUIRED
          identifier        CDATA #REQUIRED
          sourceName        CDATA #REQUIRED
          sourceURL         CDATA #REQUIRED
          fhirVersion       CDATA #REQUIRED
          receivedDate      CDATA #REQUIRED
          resourceFilePath  CDATA #REQUIRED
          sourceVersion     CDATA #IMPLIED
          device            CDATA #IMPLIED
          displayName       CDATA #IMPLIED
        >
        <!ELEMENT Audiogram ((MetadataEntry|SensitivityPoint)*)>
        <!ATTLIST Audiogram
          type          CDATA #REQUIRED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT StateOfMind (MetadataEntry*)>
        <!ATTLIST StateOfMind
          kind          (momentaryEmotion|dailyMood) #REQUIRED
          valence       CDATA #REQUIRED
          labels        NMTOKENS #IMPLIED
          associations  NMTOKENS #IMPLIED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT Medication ((ClinicalCoding|MetadataEntry)*)>
        <!ATTLIST Medication
          conceptIdentifier CDATA #REQUIRED
          displayText       CDATA #REQUIRED
          generalForm       CDATA #IMPLIED
          nickname          CDATA #IMPLIED
          archived          CDATA #IMPLIED
          hasSchedule       CDATA #IMPLIED
          sourceName        CDATA #REQUIRED
          sourceVersion     CDATA #IMPLIED
          device            CDATA #IMPLIED
          startDate         CDATA #REQUIRED
          endDate           CDATA #REQUIRED
        >
        <!ELEMENT ClinicalCoding EMPTY>
        <!ATTLIST ClinicalCoding
          system  CDATA #REQUIRED
          version CDATA #IMPLIED
          code    CDATA #REQUIRED
        >
        <!ELEMENT MedicationDoseEvent (MetadataEntry*)>
        <!ATTLIST MedicationDoseEvent
          conceptIdentifier     CDATA #REQUIRED
          logStatus             (notInteracted|notificationNotSent|snoozed|taken|skipped|notLogged) #REQUIRED
          scheduleType          (asNeeded|schedule) #IMPLIED
          doseQuantity          CDATA #IMPLIED
          scheduledDoseQuantity CDATA #IMPLIED
          unit                  CDATA #IMPLIED
          scheduledDate         CDATA #IMPLIED
          sourceName            CDATA #REQUIRED
          sourceVersion         CDATA #IMPLIED
          device                CDATA #IMPLIED
          startDate             CDATA #REQUIRED
          endDate               CDATA #REQUIRED
        >
        <!ELEMENT SensitivityPoint EMPTY>
        <!ATTLIST SensitivityPoint
          frequencyValue CDATA #REQUIRED
          frequencyUnit  CDATA #REQUIRED
          leftEarValue   CDATA #IMPLIED
          leftEarUnit    CDATA #IMPLIED
          rightEarValue  CDATA #IMPLIED
          rightEarUnit   CDATA #IMPLIED
          leftEarMasked  CDATA #IMPLIED
          rightEarMasked CDATA #IMPLIED
        >
        <!ELEMENT VisionPrescription ((RightEye|LeftEye|Attachment|MetadataEntry)*)>
        <!ATTLIST VisionPrescription
          type             CDATA #REQUIRED
          dateIssued       CDATA #REQUIRED
          expirationDate   CDATA #IMPLIED
          brand            CDATA #IMPLIED
          sourceName       CDATA #IMPLIED
          sourceVersion    CDATA #IMPLIED
          device           CDATA #IMPLIED
        >
        <!ELEMENT RightEye EMPTY>
        <!ATTLIST RightEye\(lensAttributes)>
        <!ELEMENT LeftEye EMPTY>
        <!ATTLIST LeftEye\(lensAttributes)>
        <!ELEMENT Attachment EMPTY>
        <!ATTLIST Attachment
          identifier       CDATA #IMPLIED
        >
        <!ELEMENT MetadataEntry EMPTY>
        <!ATTLIST MetadataEntry
          key   CDATA #REQUIRED
          value CDATA #REQUIRED
        >
        <!ELEMENT SourcePriority EMPTY>
        <!ATTLIST SourcePriority
          type       CDATA #REQUIRED
          sourceName CDATA #REQUIRED
        >
        ]>

        """
}

/// Buffered text output to a file.
final class XMLWriter {
    private let handle: FileHandle
    private var buffer = Data()

    init(handle: FileHandle) { self.handle = handle }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 20 { try flush() }
    }

    func flush() throws {
        try handle.write(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    func close() throws {
        try flush()
        try handle.close()
    }
}
