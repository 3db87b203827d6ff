import Crypto
import Foundation
import HealthModel
import LedgerSchema

/// What an Apple Health export holds, element by element, turned into the ledger's model.
public enum AppleHealthItem: Sendable {
    /// A characteristic from `Me`.
    case characteristic(Characteristic, line: Int)
    /// A top-level `Record`. `mayBeCorrelationMember` is true for the types a correlation
    /// holds (blood pressure, dietary), which the export also lists inside their correlation.
    case sample(HealthObject, key: String, mayBeCorrelationMember: Bool, line: Int)
    /// A `Correlation` with its members; `memberKeys` are the members' record keys.
    case correlation(Correlation, memberKeys: [String], line: Int)
    /// A `Workout`, its routes' files and the types its `WorkoutStatistics` summarise.
    case workout(Workout, routes: [RouteReference], statisticsTypes: [QuantityType], line: Int)
    case visionPrescription(VisionPrescription, line: Int)
    /// An `ActivitySummary`: a day's rings and goals.
    case activitySummary(ActivitySummary, line: Int)
    /// An `Audiogram` with its `SensitivityPoint`s.
    case audiogram(Audiogram, line: Int)
    /// A `HeartRateVariabilityMetadataList`'s heartbeat series.
    case heartbeatSeries(HeartbeatSeriesSample, line: Int)
    /// A `StateOfMind` (HealthLedger's exports).
    case stateOfMind(StateOfMind, line: Int)
    /// A `Medication` (HealthLedger's exports): one of the person's medications.
    case medication(UserAnnotatedMedication, line: Int)
    /// A `MedicationDoseEvent` (HealthLedger's exports).
    case medicationDose(MedicationDoseEvent, line: Int)
    /// A `ClinicalRecord` whose FHIR resource is the export's file at `path`: ``ClinicalRecord/fhirResource``'s
    /// data is empty until the importer reads it.
    case clinicalRecord(ClinicalRecord, path: String, line: Int)
    /// One `SourcePriority` element: `source` ranks next among `type`'s sources (the elements
    /// of a type come highest priority first). HealthLedger's own exports carry them.
    case sourcePriority(ObjectType, source: Source, line: Int)
    /// Something the ledger does not hold (yet); counted, never silently dropped.
    case skipped(element: String, reason: String, line: Int)
    /// A record the ledger would refuse; the rest of the import goes on.
    case rejected(element: String, kind: RejectionKind, reason: String, line: Int)
}

/// Why a record was rejected, for the import summary's counts.
public enum RejectionKind: String, Sendable, Codable, CaseIterable {
    case unknownType = "unknown type"
    case unparsableValue = "unparsable value"
    case incompatibleUnit = "unit incompatible with its type"
    case invalidDate = "invalid date"
    case datesOutOfOrder = "dates out of order"
    case invalidObject = "invalid object"
    case refusedByServer = "refused by the server"
    /// A workout's route file that is missing, unreadable, not GPX or too large.
    case routeFile = "route file missing or unreadable"
    /// A clinical record's FHIR resource file that is missing, unreadable or too large.
    case resourceFile = "resource file missing or unreadable"
}

/// A route a workout names: its GPX file and the metadata of its `WorkoutRoute` element.
public struct RouteReference: Sendable, Hashable {
    /// The path as the export gives it, e.g. `/workout-routes/route_2025-05-18_12.30pm.gpx`.
    public var path: String
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata
    public var line: Int
}

/// Reads `export.xml` as a stream of elements (an ``XMLStreamHandler``) and hands each
/// finished top-level element to `emit` as an ``AppleHealthItem``.
///
/// Each object gets a sync identifier (unless the export gives one) derived from its
/// content and source, so that importing the same export twice, or an overlapping later
/// one, adds nothing twice: see ``AppleHealthReader/recordKey(type:source:start:end:value:unit:)``.
public final class AppleHealthReader: XMLStreamHandler {
    /// The prefix of every sync identifier the importer derives.
    public static let syncIdentifierPrefix = "apple-health:"
    /// The bundle identifier prefix of the sources an import records (never an app's).
    public static let sourcePrefix = Source.importedPrefix

    private let emit: (consuming AppleHealthItem) -> Void
    private var units: [String: HealthUnit] = [:]
    private var sources: [String: Source] = [:]
    private var devices: [String: Device] = [:]
    /// Open elements, outermost first.
    private var path: [String] = []
    private var current: Builder?
    /// The top-level element being skipped, whose children are not reported again.
    private var skipping: String?
    /// When the export was made (`ExportDate`), if it says.
    public private(set) var exportDate: Date?
    /// The elements read under `HealthData` so far, whatever became of them (imported,
    /// skipped, rejected).
    public private(set) var elementsRead = 0

    public init(emit: @escaping (consuming AppleHealthItem) -> Void) {
        self.emit = emit
    }

    // MARK: - XMLStreamHandler

    public func startElement(_ name: String, attributes: [XMLAttribute], line: Int) {
        path.append(name)
        let depth = path.count
        if depth == 1 { return }  // HealthData
        if depth == 2 {
            elementsRead += 1
            skipping = nil
            startTopLevel(name, Attributes(attributes), line: line)
            return
        }
        // Mutated in place: a copy taken out and put back would copy its metadata and lists
        // on every child element.
        guard skipping == nil, current != nil else { return }
        current!.child(name, Attributes(attributes), depth: depth, line: line, reader: self)
    }

    public func endElement(_ name: String) {
        defer { path.removeLast() }
        if path.count == 2 {
            if let builder = current.take() { finish(builder) }
            return
        }
        if path.count > 2, current != nil {
            current!.end(name, depth: path.count, reader: self)
        }
    }

    // MARK: - Elements

    private func startTopLevel(_ name: String, _ attributes: Attributes, line: Int) {
        switch name {
        case "ExportDate":
            exportDate = attributes["value"].flatMap(AppleHealthValues.date)
        case "Me":
            characteristics(attributes, line: line)
        case "Record":
            current = .record(RecordBuilder(attributes, line: line))
        case "Correlation":
            current = .correlation(CorrelationBuilder(attributes: attributes, line: line))
        case "Workout":
            current = .workout(WorkoutBuilder(attributes: attributes, line: line))
        case "VisionPrescription":
            current = .prescription(PrescriptionBuilder(attributes: attributes, line: line))
        case "SourcePriority":
            guard let type = attributes["type"].flatMap({ try? ObjectType($0) }) else {
                return reject(name, Rejection(kind: .unknownType, reason: "unknown type '\(attributes["type"] ?? "")'"), line: line)
            }
            guard let sourceName = attributes["sourceName"], !sourceName.isEmpty else {
                return reject(name, Rejection(kind: .invalidObject, reason: "a source priority names its source (sourceName)"), line: line)
            }
            emit(.sourcePriority(type, source: Source.imported(named: sourceName), line: line))
        case "ActivitySummary":
            current = .activitySummary(attributes: attributes, metadata: [:], line: line)
        case "Audiogram":
            current = .audiogram(AudiogramBuilder(attributes: attributes, line: line))
        case "ClinicalRecord":
            current = .clinicalRecord(attributes: attributes, metadata: [:], line: line)
        case "StateOfMind":
            current = .stateOfMind(attributes: attributes, metadata: [:], line: line)
        case "Medication":
            current = .medication(MedicationBuilder(attributes: attributes, line: line))
        case "MedicationDoseEvent":
            current = .medicationDose(attributes: attributes, metadata: [:], line: line)
        default:
            skipping = name
            let reason = switch name {
            default: "the ledger does not hold \(name) elements"
            }
            emit(.skipped(element: name, reason: reason, line: line))
        }
    }

    private func finish(_ builder: consuming Builder) {
        switch consume builder {
        case .record(var record):
            let heartbeats = record.heartbeats.take()
            if record.attributes["type"] == ObjectType.heartbeatSeries.identifier {
                // HealthLedger's exports: a series no record of heart rate variability holds.
                var list = heartbeats ?? HeartbeatListBuilder(line: record.line)
                list.metadata.merge(record.metadata) { list, _ in list }
                return heartbeatSeries(list, of: record.attributes)
            }
            switch sample(record, topLevel: true) {
            case .success(let (object, key)):
                let member = mayBeCorrelationMember(object.objectType.identifier)
                emit(.sample(object, key: key, mayBeCorrelationMember: member, line: record.line))
            case .failure(let rejection):
                reject("Record", rejection, line: record.line)
            }
            if let heartbeats { heartbeatSeries(heartbeats, of: record.attributes) }
        case .correlation(let builder): correlation(builder)
        case .workout(let builder): workout(builder)
        case .prescription(let builder): prescription(builder)
        case .activitySummary(let attributes, let metadata, let line): activitySummary(attributes, metadata: metadata, line: line)
        case .audiogram(let builder): audiogram(builder)
        case .clinicalRecord(let attributes, let metadata, let line): clinicalRecord(attributes, metadata: metadata, line: line)
        case .stateOfMind(let attributes, let metadata, let line): stateOfMind(attributes, metadata: metadata, line: line)
        case .medication(let builder): medication(builder)
        case .medicationDose(let attributes, let metadata, let line): medicationDose(attributes, metadata: metadata, line: line)
        }
    }

    private func characteristics(_ attributes: Attributes, line: Int) {
        for (name, value) in attributes.pairs where !value.isEmpty {
            let result: Characteristic?
            switch name {
            case ObjectType.dateOfBirth.identifier:
                let parts = value.split(separator: "-").compactMap { Int($0) }
                result = parts.count == 3 ? .dateOfBirth(year: parts[0], month: parts[1], day: parts[2]) : nil
                if result == nil {
                    reject("Me", Rejection(kind: .invalidDate, reason: "\(name): '\(value)' is not a date (yyyy-MM-dd)"), line: line)
                    continue
                }
            case ObjectType.biologicalSex.identifier:
                result = BiologicalSex.allCases.first { "HKBiologicalSex" + capitalized("\($0)") == value }.map { .biologicalSex($0) }
            case ObjectType.bloodType.identifier:
                result = BloodType.allCases.first { "HKBloodType" + capitalized("\($0)") == value }.map { .bloodType($0) }
            case ObjectType.fitzpatrickSkinType.identifier:
                result = FitzpatrickSkinType.allCases.first { "HKFitzpatrickSkinType" + capitalized("\($0)") == value }.map {
                    .fitzpatrickSkinType($0)
                }
            case ObjectType.wheelchairUse.identifier:
                result = WheelchairUse.allCases.first { "HKWheelchairUse" + capitalized("\($0)") == value }.map { .wheelchairUse($0) }
            case ObjectType.activityMoveMode.identifier:
                result = ActivityMoveMode.allCases.first { "HKActivityMoveMode" + capitalized("\($0)") == value }.map { .activityMoveMode($0) }
            case ObjectType.cardioFitnessMedicationsUse.identifier:
                result = AppleHealthValues.cardioFitnessMedicationsUse(value).map { .cardioFitnessMedicationsUse($0) }
            default:
                emit(.skipped(element: "Me", reason: "the characteristic \(name) is not held by the ledger", line: line))
                continue
            }
            guard let result else {
                reject("Me", Rejection(kind: .unparsableValue, reason: "\(name): unknown value '\(value)'"), line: line)
                continue
            }
            guard !result.isNotSet else { continue }
            do {
                try result.validate()
                emit(.characteristic(result, line: line))
            } catch {
                reject("Me", Rejection(kind: .invalidObject, reason: "\(name): \(Self.message(error))"), line: line)
            }
        }
    }

    struct Rejection: Error {
        var kind: RejectionKind
        var reason: String
    }

    /// A `Record` as a quantity or category sample, with its record key.
    private func sample(_ record: consuming RecordBuilder, topLevel: Bool) -> Result<(HealthObject, String), Rejection> {
        let attributes = record.attributes
        guard let type = attributes["type"], !type.isEmpty else { return .failure(Rejection(kind: .unknownType, reason: "the record has no type")) }
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate") else {
            return .failure(dateProblem(attributes, start: "startDate", end: "endDate"))
        }
        let value = attributes["value"] ?? ""
        let unitText = attributes["unit"] ?? ""
        let source = sourceRevision(attributes)
        let key = Self.recordKey(type: type, source: source.source.name, start: start, end: end, value: value, unit: unitText)
        // Moved out of the record, so that adding the sync identifier does not copy it.
        var metadata = record.metadata
        record.metadata = [:]
        if topLevel, metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(key)
            metadata[MetadataKey.syncVersion] = .number(1)
        } else if !topLevel {
            // A correlation's members are replaced with it, never on their own.
            metadata[MetadataKey.syncIdentifier] = nil
            metadata[MetadataKey.syncVersion] = nil
        }
        let object: HealthObject
        switch recordType(type) {
        case .quantity(let quantityType):
            guard let number = AppleHealthValues.decimal(value) else {
                return .failure(Rejection(kind: .unparsableValue, reason: "\(type): '\(value)' is not a number"))
            }
            guard let unit = AppleHealthValues.unit(unitText, cache: &units) else {
                return .failure(Rejection(kind: .unparsableValue, reason: "\(type): '\(unitText)' is not a unit"))
            }
            guard unit.isCompatible(with: quantityType.canonicalUnit) else {
                return .failure(Rejection(kind: .incompatibleUnit, reason: "\(type): the unit '\(unitText)' is not compatible with \(quantityType.canonicalUnit)"))
            }
            var sample = QuantitySample(
                type: quantityType, quantity: Quantity(number, unit), start: start, end: end, device: device(attributes),
                metadata: metadata, sourceRevision: source)
            if !record.series.isEmpty {
                guard record.series.count <= QuantitySample.maximumSeriesEntries else {
                    return .failure(Rejection(kind: .invalidObject, reason: "\(type): a series sample holds at most \(QuantitySample.maximumSeriesEntries) values"))
                }
                // Offsets from the start as written, to the microsecond.
                let origin = Int64(start.timeIntervalSince1970) * 1_000_000
                for entry in record.series {
                    guard let value = AppleHealthValues.decimal(entry.value), let from = AppleHealthValues.microseconds(seconds: entry.start),
                        let to = AppleHealthValues.microseconds(seconds: entry.end)
                    else {
                        return .failure(Rejection(
                            kind: .unparsableValue,
                            reason: "\(type): the series value at line \(entry.line) needs a number and its start and end in seconds, not '\(entry.value.prefix(40))', '\(entry.start.prefix(40))', '\(entry.end.prefix(40))'"))
                    }
                    sample.series.append(QuantitySeriesEntry(value: value, start: date(microseconds: origin + from), end: date(microseconds: origin + to)))
                }
                // The record's end is written to the second; its last value may end in the second after.
                if let last = sample.series.last?.endDate, last > end, last.timeIntervalSince(end) < 1 { sample.endDate = last }
            }
            object = .quantitySample(sample)
        case .category(let categoryType):
            if let entry = record.series.first {
                emit(.skipped(element: "QuantitySeriesEntry", reason: "a category record holds no series values", line: entry.line))
            }
            guard let raw = AppleHealthValues.categoryValue(value, of: categoryType) else {
                return .failure(Rejection(kind: .unparsableValue, reason: "\(type): '\(value)' is not one of its values (\(categoryType.values.name))"))
            }
            object = .categorySample(CategorySample(
                type: categoryType, value: raw, start: start, end: end, device: device(attributes), metadata: metadata,
                sourceRevision: source))
        case .unknown:
            return .failure(Rejection(kind: .unknownType, reason: "unknown type '\(type)'"))
        case .other:
            return .failure(Rejection(kind: .unknownType, reason: "\(type) is not a quantity or category type"))
        }
        do {
            try object.validate()
        } catch {
            return .failure(Rejection(kind: .invalidObject, reason: "\(type): \(Self.message(error))"))
        }
        return .success((object, key))
    }

    private func correlation(_ builder: CorrelationBuilder) {
        let attributes = builder.attributes
        let line = builder.line
        guard let typeName = attributes["type"], let type = try? CorrelationType(typeName) else {
            reject("Correlation", Rejection(kind: .unknownType, reason: "unknown correlation type '\(attributes["type"] ?? "")'"), line: line)
            return
        }
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate") else {
            reject("Correlation", dateProblem(attributes, start: "startDate", end: "endDate"), line: line)
            return
        }
        var members: [QuantitySample] = []
        var keys: [String] = []
        for record in builder.records {
            switch sample(record, topLevel: false) {
            case .success(let (.quantitySample(member), key)):
                members.append(member)
                keys.append(key)
            case .success:
                reject("Correlation", Rejection(kind: .invalidObject, reason: "\(typeName): a member is not a quantity sample (line \(record.line))"), line: line)
                return
            case .failure(let rejection):
                reject("Correlation", Rejection(kind: rejection.kind, reason: "member at line \(record.line): \(rejection.reason)"), line: line)
                return
            }
        }
        let source = sourceRevision(attributes)
        var metadata = builder.metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            let key = Self.key(["Correlation", typeName, source.source.name, Self.seconds(start), Self.seconds(end)] + keys.sorted(), start: start)
            metadata[MetadataKey.syncIdentifier] = .string(key)
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        let correlation = Correlation(
            type: type, start: start, end: end, objects: members, device: device(attributes), metadata: metadata, sourceRevision: source)
        do {
            try HealthObject.correlation(correlation).validate()
            emit(.correlation(correlation, memberKeys: keys, line: line))
        } catch {
            reject("Correlation", Rejection(kind: .invalidObject, reason: "\(typeName): \(Self.message(error))"), line: line)
        }
    }

    /// A swim's settings as HealthKit keeps them in metadata.
    static func swimSettings(_ metadata: Metadata) -> (location: SwimmingLocationType?, lapLength: Quantity?) {
        var location: SwimmingLocationType?
        if case .number(let raw)? = metadata[MetadataKey.swimmingLocationType], raw.isFinite, let type = SwimmingLocationType(rawValue: Int(raw)) {
            location = type
        }
        guard case .quantity(let length)? = metadata[MetadataKey.lapLength] else { return (location, nil) }
        return (location, length)
    }

    /// `event`, ending at `end` when it ends less than a second after it. The export gives a
    /// workout's end in whole seconds and an event's duration with its fraction, so the last
    /// lap or segment may seem to outlast its workout by a fraction of a second.
    static func withinSecond(_ event: WorkoutEvent, end: Date) -> WorkoutEvent {
        guard event.endDate > end, event.endDate.timeIntervalSince(end) < 1, event.startDate <= end else { return event }
        var event = event
        event.endDate = end
        return event
    }

    private func workout(_ builder: WorkoutBuilder) {
        let attributes = builder.attributes
        let line = builder.line
        guard let name = attributes["workoutActivityType"], let activity = WorkoutActivityType(name: name) else {
            reject("Workout", Rejection(kind: .unknownType, reason: "unknown workout activity type '\(attributes["workoutActivityType"] ?? "")'"), line: line)
            return
        }
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate") else {
            reject("Workout", dateProblem(attributes, start: "startDate", end: "endDate"), line: line)
            return
        }
        for problem in builder.problems { reject("Workout", problem, line: line) }
        guard builder.problems.isEmpty else { return }
        var configuration = WorkoutConfiguration(activityType: activity)
        switch builder.metadata[MetadataKey.indoorWorkout] {
        case .number(1)?: configuration.locationType = .indoor
        case .number(0)?: configuration.locationType = .outdoor
        default: break
        }
        let swim = Self.swimSettings(builder.metadata)
        if let location = swim.location { configuration.swimmingLocationType = location }
        configuration.lapLength = swim.lapLength
        let source = sourceRevision(attributes)
        var metadata = builder.metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(Self.key(["Workout", name, source.source.name, Self.seconds(start), Self.seconds(end)], start: start))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        // An activity shares the workout's type unless it names its own; a multisport
        // workout's activities must, and the Health app's export does not say which leg each
        // is: they are then left out (counted), and the workout kept.
        var activities: [WorkoutActivity] = []
        for (activity, type) in zip(builder.activities, builder.activityTypes) {
            let type = type ?? configuration.activityType
            if type == .swimBikeRun {
                emit(.skipped(element: "WorkoutActivity", reason: "a multisport workout's activity names no activity type", line: line))
                continue
            }
            var activity = activity
            activity.events = activity.events.map { Self.withinSecond($0, end: activity.endDate) }
            // A swim's settings: the activity's own entries, else the workout's when the
            // activity shares its type.
            let sharesType = type == configuration.activityType
            var swim = Self.swimSettings(activity.metadata)
            if swim.location == nil, sharesType { swim.location = configuration.swimmingLocationType }
            if swim.lapLength == nil, sharesType { swim.lapLength = configuration.lapLength }
            activity.configuration = WorkoutConfiguration(
                activityType: type, locationType: configuration.locationType, swimmingLocationType: swim.location ?? .unknown,
                lapLength: swim.lapLength)
            activities.append(activity)
        }
        let workout = Workout(
            configuration: configuration, start: start, end: end,
            events: builder.events.map { Self.withinSecond($0, end: end) }.sorted { $0.startDate < $1.startDate },
            activities: activities, device: device(attributes), metadata: metadata, sourceRevision: source)
        do {
            try HealthObject.workout(workout).validate()
        } catch {
            reject("Workout", Rejection(kind: .invalidObject, reason: "\(name): \(Self.message(error))"), line: line)
            return
        }
        var routes: [RouteReference] = []
        for route in builder.routes {
            guard let path = route.path else {
                emit(.skipped(element: "WorkoutRoute", reason: "the route names no file", line: route.line))
                continue
            }
            routes.append(RouteReference(
                path: path, sourceRevision: sourceRevision(route.attributes), device: device(route.attributes), metadata: route.metadata,
                line: route.line))
        }
        var statisticsTypes: [QuantityType] = []
        for type in builder.statisticsTypes {
            guard let quantityType = try? QuantityType(type) else {
                emit(.skipped(element: "WorkoutStatistics", reason: "unknown statistics type '\(type)'", line: line))
                continue
            }
            if !statisticsTypes.contains(quantityType) { statisticsTypes.append(quantityType) }
        }
        emit(.workout(workout, routes: routes, statisticsTypes: statisticsTypes, line: line))
    }

    /// An `ActivitySummary` element: its day (`dateComponents`, yyyy-MM-dd), rings and goals,
    /// each absent one read as 0, as HealthKit reads a summary without it; energy in
    /// `activeEnergyBurnedUnit` (`Cal`, the Health app's, when absent), times in minutes, stand
    /// hours as a count. It comes from the Health app (``AppleHealthWriter/activitySummarySource``)
    /// unless it names a source. Unless its metadata (this file's exports) gives one, its sync
    /// identifier is derived from the source and the day, its version from the export's date:
    /// a later export's summary of a day replaces an earlier one's, and the same export
    /// imported again adds nothing.
    private func activitySummary(_ attributes: Attributes, metadata: Metadata, line: Int) {
        let element = "ActivitySummary"
        guard let dayText = attributes["dateComponents"], let day = CalendarDay(dayText) else {
            return reject(element, Rejection(kind: .invalidDate, reason: "dateComponents '\(attributes["dateComponents"] ?? "")' is not a date (yyyy-MM-dd)"), line: line)
        }
        let energyUnit: HealthUnit
        do { energyUnit = try HealthUnit(attributes["activeEnergyBurnedUnit"] ?? "Cal") } catch {
            return reject(element, Rejection(kind: .incompatibleUnit, reason: "activeEnergyBurnedUnit: \(Self.message(error))"), line: line)
        }
        var problem: Rejection?
        func quantity(_ name: String, _ unit: HealthUnit) -> Quantity {
            guard let text = attributes[name], !text.isEmpty else { return Quantity(0, unit) }
            guard let value = AppleHealthValues.decimal(text) else {
                problem = problem ?? Rejection(kind: .unparsableValue, reason: "\(name): '\(text.prefix(100))' is not a number")
                return Quantity(0, unit)
            }
            return Quantity(value, unit)
        }
        let (minutes, count) = (try! HealthUnit("min"), try! HealthUnit("count"))
        let moveMode: ActivityMoveMode = switch attributes["activityMoveMode"] {
        case "HKActivityMoveModeAppleMoveTime", "2": .appleMoveTime
        default: .activeEnergy
        }
        let source = attributes["sourceName"].map { _ in sourceRevision(attributes) }
            ?? SourceRevision(source: Source.imported(named: AppleHealthWriter.activitySummarySource))
        var summary = ActivitySummary(
            day: day, moveMode: moveMode, activeEnergyBurned: quantity("activeEnergyBurned", energyUnit),
            activeEnergyBurnedGoal: quantity("activeEnergyBurnedGoal", energyUnit), moveTime: quantity("appleMoveTime", minutes),
            moveTimeGoal: quantity("appleMoveTimeGoal", minutes), exerciseTime: quantity("appleExerciseTime", minutes),
            exerciseTimeGoal: quantity("appleExerciseTimeGoal", minutes), standHours: quantity("appleStandHours", count),
            standHoursGoal: quantity("appleStandHoursGoal", count), isPaused: attributes["paused"] == "1", metadata: metadata,
            sourceRevision: source)
        if let problem { return reject(element, problem, line: line) }
        if summary.metadata[MetadataKey.syncIdentifier] == nil {
            summary.metadata[MetadataKey.syncIdentifier] = .string(Self.key([element, source.source.name, day.description], start: day.start))
            summary.metadata[MetadataKey.syncVersion] = .number(exportDate.map { max(1, $0.timeIntervalSince1970.rounded(.down)) } ?? 1)
        }
        do {
            try HealthObject.activitySummary(summary).validate()
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        emit(.activitySummary(summary, line: line))
    }

    /// A `HeartRateVariabilityMetadataList` inside a record (or a record of type
    /// `HKDataTypeIdentifierHeartbeatSeries`, HealthLedger's exports) as a heartbeat series with
    /// the record's source, device and start. Each `InstantaneousBeatsPerMinute`'s `time` is a
    /// time of day in the start's local time (``AppleHealthValues/timeOfDay(_:)``), its `bpm`
    /// not read (the beat times give it): a beat's time since the start is its time of day less
    /// the start's, on the start's day (the next day when it would come over a second before the
    /// start), and on the day after the beat before's when its time of day is before that one's; within a second before the start, it is at the start. The series ends
    /// at the record's end, or at the last beat when later (rounded up to the second). Its
    /// metadata are the entries inside the list; unless they give one, its sync identifier is
    /// derived from `HeartbeatSeries`, the source name, start and end, version 1. Beats that run
    /// over a minute past the record's end (another time zone's times) reject the list.
    private func heartbeatSeries(_ list: HeartbeatListBuilder, of attributes: Attributes) {
        let (element, line) = ("HeartRateVariabilityMetadataList", list.line)
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate"), let startText = attributes["startDate"] else {
            return reject(element, dateProblem(attributes, start: "startDate", end: "endDate"), line: line)
        }
        guard (1...HeartbeatSeriesSample.maximumBeats).contains(list.beats.count) else {
            return reject(
                element, Rejection(kind: .invalidObject, reason: "a heartbeat series holds 1–\(HeartbeatSeriesSample.maximumBeats) InstantaneousBeatsPerMinute"),
                line: line)
        }
        // The start's local time of day: the date's hh:mm:ss, before its offset.
        let clock = startText.utf8.dropFirst(11).prefix(8).split(separator: UInt8(ascii: ":")).compactMap { Int64(String(decoding: $0, as: UTF8.self)) }
        let startOfDay = (clock[0] * 3600 + clock[1] * 60 + clock[2]) * 1_000_000
        let day = AppleHealthValues.microsecondsPerDay
        var beats: [HeartbeatSeriesBeat] = []
        beats.reserveCapacity(list.beats.count)
        var (dayOffset, previous): (Int64, Int64?) = (0, nil)
        for beat in list.beats {
            guard let time = AppleHealthValues.timeOfDay(beat.time) else {
                return reject(element, Rejection(kind: .unparsableValue, reason: "line \(beat.line): the beat's time '\(beat.time.prefix(40))' is not a time of day"), line: line)
            }
            var since = time + dayOffset - startOfDay
            if let previous {
                // Beats come in time order: a time of day before the last one's is the next day.
                if since < previous { dayOffset += day; since += day }
            } else if since < -1_000_000 {
                dayOffset += day
                since += day
            }
            previous = since
            beats.append(HeartbeatSeriesBeat(timeSinceSeriesStart: Double(max(0, since)) / 1_000_000, precededByGap: beat.precededByGap))
        }
        let last = beats.last?.timeSinceSeriesStart ?? 0
        guard last <= end.timeIntervalSince(start) + 60 else {
            // Beats in another time zone than the start's, or a list of another record.
            return reject(element, Rejection(kind: .invalidDate, reason: "the beats run \(Int(last - end.timeIntervalSince(start))) s past the record's end"), line: line)
        }
        let seriesEnd = max(end, start.addingTimeInterval(last.rounded(.up)))
        let source = sourceRevision(attributes)
        var metadata = list.metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(Self.key(["HeartbeatSeries", source.source.name, Self.seconds(start), Self.seconds(seriesEnd)], start: start))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        let series = HeartbeatSeriesSample(beats: beats, start: start, end: seriesEnd, device: device(attributes), metadata: metadata, sourceRevision: source)
        do {
            try HealthObject.heartbeatSeries(series).validate()
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        emit(.heartbeatSeries(series, line: line))
    }

    /// An `Audiogram`: its dates and source as a record's, its `SensitivityPoint`s in rising
    /// frequency (`frequencyValue` in `frequencyUnit`, `Hz` when absent; each ear's
    /// `…EarValue` in `…EarUnit`, `dBHL` when absent; `…EarMasked` true or 1), its metadata.
    /// Its sync identifier, unless its metadata gives one, is derived from `Audiogram`, the
    /// source name, start and end, version 1.
    private func audiogram(_ builder: AudiogramBuilder) {
        let (attributes, line, element) = (builder.attributes, builder.line, "Audiogram")
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate") else {
            return reject(element, dateProblem(attributes, start: "startDate", end: "endDate"), line: line)
        }
        if let problem = builder.problems.first { return reject(element, problem, line: line) }
        let source = sourceRevision(attributes)
        var metadata = builder.metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(Self.key([element, source.source.name, Self.seconds(start), Self.seconds(end)], start: start))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        let audiogram = Audiogram(
            points: builder.points.sorted { ((try? $0.frequency.doubleValue(for: .hertz)) ?? 0) < ((try? $1.frequency.doubleValue(for: .hertz)) ?? 0) },
            start: start, end: end, device: device(attributes), metadata: metadata, sourceRevision: source)
        do {
            try HealthObject.audiogram(audiogram).validate()
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        emit(.audiogram(audiogram, line: line))
    }

    /// A `StateOfMind`: its `kind` (`momentaryEmotion` or `dailyMood`), `valence`, `labels` and
    /// `associations` (HealthKit's case names, separated by spaces), its dates and source as a
    /// record's, its metadata. Its sync identifier, unless its metadata gives one, is derived
    /// from `StateOfMind`, the source name, start and end, version 1.
    private func stateOfMind(_ attributes: Attributes, metadata: Metadata, line: Int) {
        let element = "StateOfMind"
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate") else {
            return reject(element, dateProblem(attributes, start: "startDate", end: "endDate"), line: line)
        }
        guard let kind = attributes["kind"].flatMap(StateOfMind.Kind.init(name:)) else {
            return reject(
                element, Rejection(kind: .unparsableValue, reason: "kind '\((attributes["kind"] ?? "").prefix(40))' is not momentaryEmotion or dailyMood"), line: line)
        }
        guard let text = attributes["valence"], let valence = AppleHealthValues.decimal(text) else {
            return reject(element, Rejection(kind: .unparsableValue, reason: "valence '\((attributes["valence"] ?? "").prefix(40))' is not a number"), line: line)
        }
        let labels: [StateOfMind.Label]
        let associations: [StateOfMind.Association]
        do {
            // Each at most once: a longer list is refused before its names are read.
            func names(_ attribute: String, most: Int) throws -> [String] {
                let names = (attributes[attribute] ?? "").split(separator: " ", maxSplits: most)
                guard names.count <= most else { throw HealthError.invalidArgument("\(attribute) names more than \(most)", field: attribute) }
                return names.map(String.init)
            }
            labels = try names("labels", most: StateOfMind.Label.allCases.count).map { try StateOfMind.Label(validating: $0, field: "labels") }
            associations = try names("associations", most: StateOfMind.Association.allCases.count).map {
                try StateOfMind.Association(validating: $0, field: "associations")
            }
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        let source = sourceRevision(attributes)
        var metadata = metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            // What it says too: two of one source in the same second (a moment's emotion and the
            // day's mood) are two.
            let fields = [
                element, source.source.name, Self.seconds(start), Self.seconds(end), kind.name, AppleHealthValues.number(valence),
                labels.map(\.rawValue).joined(separator: " "), associations.map(\.rawValue).joined(separator: " "),
            ]
            metadata[MetadataKey.syncIdentifier] = .string(Self.key(fields, start: start))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        let state = StateOfMind(
            kind: kind, valence: valence, labels: labels, associations: associations, start: start, end: end, device: device(attributes),
            metadata: metadata, sourceRevision: source)
        do {
            try HealthObject.stateOfMind(state).validate()
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        emit(.stateOfMind(state, line: line))
    }

    /// A `Medication`: its concept (`conceptIdentifier`, `displayText`, `generalForm`, `unknown`
    /// when absent, and its `ClinicalCoding` elements), `nickname`, `archived` and `hasSchedule`
    /// (`1` or `true`), its dates and source as a record's, its metadata. Its sync identifier,
    /// unless its metadata gives one, is derived from `Medication`, the source name and the
    /// concept identifier, its version the start in seconds: the entry recorded last replaces
    /// those before.
    private func medication(_ builder: MedicationBuilder) {
        let (attributes, line, element) = (builder.attributes, builder.line, "Medication")
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate") else {
            return reject(element, dateProblem(attributes, start: "startDate", end: "endDate"), line: line)
        }
        let form: MedicationConcept.GeneralForm
        do {
            form = try attributes["generalForm"].map { try MedicationConcept.GeneralForm(validating: $0, field: "generalForm") } ?? .unknown
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        let source = sourceRevision(attributes)
        let identifier = attributes["conceptIdentifier"] ?? ""
        var metadata = builder.metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(Self.key([element, source.source.name, identifier], start: nil))
            metadata[MetadataKey.syncVersion] = .number(Double(Int64(start.timeIntervalSince1970.rounded())))
        }
        func flag(_ name: String) -> Bool { ["1", "true", "YES"].contains(attributes[name] ?? "") }
        var medication = UserAnnotatedMedication(
            medication: MedicationConcept(
                identifier: identifier, displayText: attributes["displayText"] ?? "", generalForm: form, relatedCodings: builder.codings),
            nickname: attributes["nickname"], isArchived: flag("archived"), hasSchedule: flag("hasSchedule"), recorded: start,
            device: device(attributes), metadata: metadata, sourceRevision: source)
        medication.endDate = end
        do {
            try HealthObject.userAnnotatedMedication(medication).validate()
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        emit(.medication(medication, line: line))
    }

    /// A `MedicationDoseEvent`: its medication's `conceptIdentifier`, `logStatus` and
    /// `scheduleType` by HealthKit's case names (`asNeeded` when absent), `doseQuantity` and
    /// `scheduledDoseQuantity` in `unit` (`count` when absent), `scheduledDate`, its dates and
    /// source as a record's, its metadata. Its sync identifier, unless its metadata gives one,
    /// is derived from `MedicationDoseEvent`, the source name, concept identifier, start and
    /// end, version 1.
    private func medicationDose(_ attributes: Attributes, metadata: Metadata, line: Int) {
        let element = "MedicationDoseEvent"
        guard let (start, end) = dates(attributes, start: "startDate", end: "endDate") else {
            return reject(element, dateProblem(attributes, start: "startDate", end: "endDate"), line: line)
        }
        guard let status = MedicationDoseEvent.LogStatus.allCases.first(where: { "\($0)" == attributes["logStatus"] }) else {
            let names = MedicationDoseEvent.LogStatus.allCases.map { "\($0)" }.joined(separator: ", ")
            return reject(
                element, Rejection(kind: .unparsableValue, reason: "logStatus '\((attributes["logStatus"] ?? "").prefix(40))' is not one of \(names)"), line: line)
        }
        let scheduleName = attributes["scheduleType"] ?? "asNeeded"
        guard let schedule = MedicationDoseEvent.ScheduleType.allCases.first(where: { "\($0)" == scheduleName }) else {
            return reject(element, Rejection(kind: .unparsableValue, reason: "scheduleType '\(scheduleName.prefix(40))' is not asNeeded or schedule"), line: line)
        }
        var quantities: [Double?] = []
        for name in ["doseQuantity", "scheduledDoseQuantity"] {
            guard let text = attributes[name], !text.isEmpty else { quantities.append(nil); continue }
            guard let value = AppleHealthValues.decimal(text) else {
                return reject(element, Rejection(kind: .unparsableValue, reason: "\(name) '\(text.prefix(40))' is not a number"), line: line)
            }
            quantities.append(value)
        }
        var scheduledDate: Date?
        if let text = attributes["scheduledDate"], !text.isEmpty {
            guard let date = AppleHealthValues.date(text) else {
                return reject(element, Rejection(kind: .invalidDate, reason: "scheduledDate '\(text.prefix(40))' is not a date"), line: line)
            }
            scheduledDate = date
        }
        guard let unit = try? HealthUnit(attributes["unit"] ?? "count") else {
            return reject(element, Rejection(kind: .unparsableValue, reason: "unit '\((attributes["unit"] ?? "").prefix(40))' is not a unit"), line: line)
        }
        let source = sourceRevision(attributes)
        let identifier = attributes["conceptIdentifier"] ?? ""
        var metadata = metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            let fields = [
                element, source.source.name, identifier, Self.seconds(start), Self.seconds(end), "\(status)", "\(schedule)",
                quantities[0].map(AppleHealthValues.number) ?? "", quantities[1].map(AppleHealthValues.number) ?? "", unit.description,
            ]
            metadata[MetadataKey.syncIdentifier] = .string(Self.key(fields, start: start))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        let dose = MedicationDoseEvent(
            medicationConceptIdentifier: identifier, logStatus: status, scheduleType: schedule, doseQuantity: quantities[0],
            scheduledDoseQuantity: quantities[1], scheduledDate: scheduledDate, unit: unit, start: start, end: end, device: device(attributes),
            metadata: metadata, sourceRevision: source)
        do {
            try HealthObject.medicationDoseEvent(dose).validate()
        } catch {
            return reject(element, Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
        }
        emit(.medicationDose(dose, line: line))
    }

    /// A `ClinicalRecord`: its clinical `type`, `receivedDate` (its start and end), source,
    /// `fhirVersion`, `sourceURL`, `identifier` (the resource's id) and `resourceFilePath`,
    /// the file the importer reads the resource from. Its sync identifier, unless its metadata
    /// gives one, is derived from `ClinicalRecord`, the type, source name and identifier (the
    /// file's path when it has none), version 1.
    private func clinicalRecord(_ attributes: Attributes, metadata: Metadata, line: Int) {
        let element = "ClinicalRecord"
        guard let type = attributes["type"].flatMap({ try? ObjectType($0) }), type.family == .clinicalRecord else {
            return reject(element, Rejection(kind: .unknownType, reason: "unknown clinical type '\(attributes["type"] ?? "")'"), line: line)
        }
        guard let received = attributes["receivedDate"].flatMap(AppleHealthValues.date) else {
            return reject(element, Rejection(kind: .invalidDate, reason: "receivedDate is missing or not a date"), line: line)
        }
        guard let path = attributes["resourceFilePath"], !path.isEmpty else {
            return reject(element, Rejection(kind: .invalidObject, reason: "a clinical record names its resource's file (resourceFilePath)"), line: line)
        }
        let source = sourceRevision(attributes)
        let identifier = attributes["identifier"] ?? ""
        var metadata = metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(
                Self.key([element, type.identifier, source.source.name, identifier.isEmpty ? path : identifier], start: received))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        let resource = FHIRResource(
            resourceType: "", identifier: identifier, fhirVersion: attributes["fhirVersion"] ?? "", sourceURL: attributes["sourceURL"] ?? "", data: [])
        let record = ClinicalRecord(
            type: type, displayName: attributes["displayName"] ?? "", fhirResource: resource, start: received, end: received,
            device: device(attributes), metadata: metadata, sourceRevision: source)
        emit(.clinicalRecord(record, path: path, line: line))
    }

    private func prescription(_ builder: PrescriptionBuilder) {
        let attributes = builder.attributes
        let line = builder.line
        let typeText = attributes["type"] ?? ""
        let type: VisionPrescriptionType? = switch typeText.lowercased() {
        case "glasses", "hkvisionprescriptiontypeglasses", "1": .glasses
        case "contacts", "hkvisionprescriptiontypecontacts", "2": .contacts
        default: nil
        }
        guard let type else {
            reject("VisionPrescription", Rejection(kind: .unknownType, reason: "unknown prescription type '\(typeText)'"), line: line)
            return
        }
        guard let issued = attributes["dateIssued"].flatMap(AppleHealthValues.date) else {
            reject("VisionPrescription", Rejection(kind: .invalidDate, reason: "dateIssued is missing or not a date"), line: line)
            return
        }
        var expiration = issued.addingTimeInterval(365.25 * 86_400 * 2)
        if let text = attributes["expirationDate"] {
            guard let date = AppleHealthValues.date(text), date >= issued else {
                reject("VisionPrescription", Rejection(kind: .invalidDate, reason: "expirationDate '\(text)' is not a date on or after dateIssued"), line: line)
                return
            }
            expiration = date
        }
        for problem in builder.problems { reject("VisionPrescription", problem, line: line) }
        guard builder.problems.isEmpty else { return }
        let source = sourceRevision(attributes)
        var metadata = builder.metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(Self.key(["VisionPrescription", typeText, source.source.name, Self.seconds(issued)], start: issued))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        let prescription = VisionPrescription(
            type: type, dateIssued: issued, expirationDate: expiration, description: attributes["brand"] ?? "", rightEye: builder.rightEye,
            leftEye: builder.leftEye, device: device(attributes), metadata: metadata, sourceRevision: source)
        do {
            try HealthObject.visionPrescription(prescription).validate()
        } catch {
            reject("VisionPrescription", Rejection(kind: .invalidObject, reason: Self.message(error)), line: line)
            return
        }
        for attachment in builder.attachments {
            emit(.skipped(element: "Attachment", reason: "attachment \(attachment): its bytes are not part of the export", line: line))
        }
        emit(.visionPrescription(prescription, line: line))
    }

    // MARK: - Values

    private func dates(_ attributes: Attributes, start: String, end: String) -> (Date, Date)? {
        guard let startDate = attributes[start].flatMap(AppleHealthValues.date), let endDate = attributes[end].flatMap(AppleHealthValues.date),
            startDate <= endDate
        else { return nil }
        return (startDate, endDate)
    }

    private func dateProblem(_ attributes: Attributes, start: String, end: String) -> Rejection {
        for name in [start, end] {
            guard let text = attributes[name] else { return Rejection(kind: .invalidDate, reason: "\(name) is missing") }
            if AppleHealthValues.date(text) == nil {
                return Rejection(kind: .invalidDate, reason: "\(name) '\(text)' is not a date (yyyy-MM-dd HH:mm:ss ±hhmm)")
            }
        }
        return Rejection(kind: .datesOutOfOrder, reason: "\(start) \(attributes[start]!) is after \(end) \(attributes[end]!)")
    }

    private func reject(_ element: String, _ rejection: Rejection, line: Int) {
        emit(.rejected(element: element, kind: rejection.kind, reason: rejection.reason, line: line))
    }

    /// What a record's type is, and whether it may be a correlation's member.
    private enum RecordType {
        case quantity(QuantityType)
        case category(CategoryType)
        /// A type the catalogue knows that is neither.
        case other
        case unknown
    }

    /// The types, sources and devices of the latest records, by their bytes: an export
    /// interleaves a few of each (heart rate between steps, a watch's records between a
    /// phone's), and comparing bytes with a handful costs less than hashing a string for a
    /// dictionary (a name such as "Alice’s Apple Watch" is not ASCII, so hashing normalises it
    /// first).
    /// Each type flagged with whether it may be a correlation's member.
    private var recentTypes = Reuse<RecordType>()
    private var recentSources = Reuse<Source>()
    private var recentDevices = Reuse<Device?>()

    /// `recent`'s value for the bytes of `key`, made by `make` when it has none.
    private static func value<Value>(_ recent: inout Reuse<Value>, for key: String, _ make: (String) -> Value) -> Value {
        var bytes = key
        return bytes.withUTF8 { recent.value(for: UnsafeRawBufferPointer($0)) { _ in make(key) } }
    }

    private func recordType(_ name: String) -> RecordType {
        classified(name).type
    }

    private func mayBeCorrelationMember(_ name: String) -> Bool {
        classified(name).mayBeCorrelationMember
    }

    private func classified(_ name: String) -> (type: RecordType, mayBeCorrelationMember: Bool) {
        var bytes = name
        let (type, member) = bytes.withUTF8 { recentTypes.valueAndFlag(for: UnsafeRawBufferPointer($0)) { _ in Self.classify(name) } }
        return (type, member)
    }

    private static func classify(_ name: String) -> (type: RecordType, mayBeCorrelationMember: Bool) {
        let type: RecordType = switch TypeCatalogue.family(of: name) {
        case .quantity: .quantity(try! QuantityType(name))
        case .category: .category(try! CategoryType(name))
        case nil: .unknown
        default: .other
        }
        return (type, TypeCatalogue.correlationMemberTypes.contains(name))
    }

    /// The source revision of an element: the source by its name, under the import prefix.
    private func sourceRevision(_ attributes: Attributes) -> SourceRevision {
        let source = Self.value(&recentSources, for: attributes["sourceName"] ?? "Unknown") { name in
            if let known = sources[name] { return known }
            let source = Source.imported(named: name)
            Self.makeRoom(in: &sources)
            sources[name] = source
            return source
        }
        return SourceRevision(source: source, version: attributes["sourceVersion"])
    }

    private func device(_ attributes: Attributes) -> Device? {
        guard let text = attributes["device"], !text.isEmpty else { return nil }
        return Self.value(&recentDevices, for: text) { text in
            let device = devices[text] ?? AppleHealthValues.device(text)
            if let device {
                Self.makeRoom(in: &devices)
                devices[text] = device
            }
            return device
        }
    }

    /// The most entries each cache of made values holds. A device's text names the object's
    /// address (`<<HKDevice: 0x283c74a50>, …`), which may differ from record to record: a
    /// cache kept forever would grow with the file. Past the limit a cache starts again
    /// (what it holds is made again from the text, the same).
    package static let cacheLimit = 4096

    /// How many entries the caches of sources, devices and units hold now.
    package var cacheCounts: [Int] { [sources.count, devices.count, units.count] }

    static func makeRoom<Value>(in cache: inout [String: Value]) {
        if cache.count >= cacheLimit { cache.removeAll(keepingCapacity: true) }
    }

    fileprivate func metadataValue(key: String, _ text: String) -> MetadataValue {
        if Self.stringKeys.contains(key) { return .string(text) }
        return AppleHealthValues.metadataValue(text, units: &units)
    }

    fileprivate func quantity(_ value: String?, unit: String?, default defaultUnit: String) -> Quantity? {
        guard let value, let number = AppleHealthValues.decimal(value) else { return nil }
        guard let healthUnit = AppleHealthValues.unit(unit ?? defaultUnit, cache: &units) else { return nil }
        return Quantity(number, healthUnit)
    }

    /// Keys HealthKit defines as strings, whose values must not be read as numbers or dates.
    static let stringKeys: Set<String> = [
        MetadataKey.syncIdentifier, MetadataKey.timeZone, MetadataKey.foodType, MetadataKey.deviceName, MetadataKey.externalUUID,
        "HKMetadataKeyDeviceSerialNumber", "HKMetadataKeyUDIDeviceIdentifier", "HKMetadataKeyUDIProductionIdentifier",
        "HKMetadataKeyDigitalSignature", "HKMetadataKeyDeviceManufacturerName", "HKMetadataKeyWorkoutBrandName",
    ]

    // MARK: - Keys

    /// The key of a record: ``key(_:start:)`` over `Record`, its type, source name, start
    /// and end (seconds since 1970), value and unit as exported. It is the sync identifier of
    /// an imported record (version 1) and tells a correlation's member from the same record
    /// listed at top level.
    public static func recordKey(type: String, source: String, start: Date, end: Date, value: String, unit: String) -> String {
        // The fields written straight into the hashed bytes: a record is most of an export.
        key(start: start) { input in
            for field in ["Record", type, source] { input.append(field: field) }
            input.append(field: start)
            input.append(field: end)
            input.append(field: value)
            input.append(field: unit)
        }
    }

    /// ``syncIdentifierPrefix``; then, when the object has a start, that start in whole
    /// seconds since 1970 as eleven digits (0 before 1970) and `-`; then the first 128 bits of
    /// SHA-256 over the fields, each followed by a 0x1F separator, in hex. The start comes
    /// first so that a source's identifiers grow with time, which keeps the server's sync
    /// index writes together.
    static func key(_ fields: [String], start: Date?) -> String {
        key(start: start) { input in
            for field in fields { input.append(field: field) }
        }
    }

    /// ``key(_:start:)`` over the fields `write` appends with `append(field:)`.
    private static func key(start: Date?, _ write: (inout [UInt8]) -> Void) -> String {
        // The fields' UTF-8, each followed by 0x1F, hashed in one piece.
        var input: [UInt8] = []
        input.reserveCapacity(256)
        write(&input)
        var hasher = SHA256()
        input.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        let digest = hasher.finalize()
        // Written straight into the string's storage (one allocation): the prefix, the start's
        // digits and `-`, then the first 16 bytes of the digest in hex.
        let seconds = start.map { UInt64(max(0, Int64($0.timeIntervalSince1970.rounded()))) }
        var prefix = syncIdentifierPrefix
        return prefix.withUTF8 { prefix in
            String(unsafeUninitializedCapacity: prefix.count + 21 + 32) { text in
                var count = prefix.count
                _ = text.initialize(fromContentsOf: prefix)
                if var seconds {
                    // At least eleven digits, most significant first (a UInt64 has at most 20).
                    var width = 1
                    var rest = seconds / 10
                    while rest > 0 { width += 1; rest /= 10 }
                    width = max(width, 11)
                    for position in (count..<(count + width)).reversed() {
                        text[position] = UInt8(ascii: "0") + UInt8(seconds % 10)
                        seconds /= 10
                    }
                    count += width
                    text[count] = UInt8(ascii: "-")
                    count += 1
                }
                digest.withUnsafeBytes { digest in
                    for byte in digest.prefix(16) {
                        text[count] = .lowercaseHexDigit(byte >> 4)
                        text[count + 1] = .lowercaseHexDigit(byte & 0x0F)
                        count += 2
                    }
                }
                return count
            }
        }
    }

    static func seconds(_ date: Date) -> String { String(Int64(date.timeIntervalSince1970.rounded())) }

    static func message(_ error: any Error) -> String {
        (error as? HealthError)?.message ?? "\(error)"
    }
}

extension [UInt8] {
    /// A field of a key: its UTF-8, then the separator 0x1F.
    fileprivate mutating func append(field: String) {
        var field = field
        field.withUTF8 { append(contentsOf: $0) }
        append(0x1F)
    }

    /// A date field of a key: ``AppleHealthReader/seconds(_:)`` (a string that small is
    /// made without an allocation), then 0x1F.
    fileprivate mutating func append(field date: Date) {
        append(field: AppleHealthReader.seconds(date))
    }
}

private func capitalized(_ text: String) -> String { text.prefix(1).uppercased() + text.dropFirst() }

/// An element's attributes, looked up by name.
struct Attributes: Sendable {
    /// The parser's list, kept as it came (not copied into another).
    let list: [XMLAttribute]

    init(_ attributes: [XMLAttribute]) { list = attributes }

    var pairs: some Sequence<(String, String)> { list.lazy.map { ($0.name, $0.value) } }

    subscript(name: String) -> String? {
        for attribute in list where attribute.name == name { return attribute.value }
        return nil
    }
}

// MARK: - Builders of the top-level elements

private enum Builder {
    case record(RecordBuilder)
    case correlation(CorrelationBuilder)
    case workout(WorkoutBuilder)
    case prescription(PrescriptionBuilder)
    /// An `ActivitySummary`, and the metadata entries this file's exports put inside it.
    case activitySummary(attributes: Attributes, metadata: Metadata, line: Int)
    case audiogram(AudiogramBuilder)
    case clinicalRecord(attributes: Attributes, metadata: Metadata, line: Int)
    /// A `StateOfMind` and its metadata entries.
    case stateOfMind(attributes: Attributes, metadata: Metadata, line: Int)
    case medication(MedicationBuilder)
    /// A `MedicationDoseEvent` and its metadata entries.
    case medicationDose(attributes: Attributes, metadata: Metadata, line: Int)

    /// Each case's builder is moved out of `self` while it changes, not copied, so that its
    /// metadata and lists are changed in place.
    /// The element's name and whether it holds children named `name` (the direct children
    /// the importer reads; any other is counted as skipped).
    private func holds(_ name: String) -> (element: String, holds: Bool) {
        switch self {
        case .record: ("Record", name == "MetadataEntry" || name == "HeartRateVariabilityMetadataList" || name == "QuantitySeriesEntry")
        case .correlation: ("Correlation", name == "MetadataEntry" || name == "Record")
        case .workout:
            ("Workout", ["MetadataEntry", "WorkoutEvent", "WorkoutActivity", "WorkoutStatistics", "WorkoutRoute"].contains(name))
        case .prescription: ("VisionPrescription", ["MetadataEntry", "RightEye", "LeftEye", "Attachment"].contains(name))
        case .activitySummary: ("ActivitySummary", name == "MetadataEntry")
        case .audiogram: ("Audiogram", name == "MetadataEntry" || name == "SensitivityPoint")
        case .clinicalRecord: ("ClinicalRecord", name == "MetadataEntry")
        case .stateOfMind: ("StateOfMind", name == "MetadataEntry")
        case .medication: ("Medication", name == "MetadataEntry" || name == "ClinicalCoding")
        case .medicationDose: ("MedicationDoseEvent", name == "MetadataEntry")
        }
    }

    mutating func child(_ name: String, _ attributes: Attributes, depth: Int, line: Int, reader: AppleHealthReader) {
        if depth == 3 {
            let (element, holds) = holds(name)
            if !holds { reader.note(.skipped(element: name, reason: "the ledger does not hold \(name) elements inside a \(element)", line: line)) }
        }
        switch consume self {
        case .record(var record):
            // Only the record's own entries and its heartbeat list's: not those inside a child
            // it does not read.
            if depth == 3 {
                record.child(name, attributes, line: line, reader: reader)
            } else if depth == 4 {
                record.grandchild(name, attributes, line: line, reader: reader)
            }
            self = .record(record)
        case .correlation(var correlation):
            if depth == 3 { correlation.inMember = name == "Record" }
            if name == "Record", depth == 3 {
                correlation.records.append(RecordBuilder(attributes, line: line))
            } else if depth == 4, correlation.inMember, !correlation.records.isEmpty {
                correlation.records[correlation.records.count - 1].child(name, attributes, line: line, reader: reader)
            } else if name == "MetadataEntry", depth == 3 {
                correlation.metadata.add(attributes, reader: reader)
            }
            self = .correlation(correlation)
        case .workout(var workout):
            workout.child(name, attributes, depth: depth, line: line, reader: reader)
            self = .workout(workout)
        case .prescription(var prescription):
            if depth == 3 { prescription.child(name, attributes, line: line, reader: reader) }
            self = .prescription(prescription)
        case .activitySummary(let summary, var metadata, let start):
            if depth == 3, name == "MetadataEntry" { metadata.add(attributes, reader: reader) }
            self = .activitySummary(attributes: summary, metadata: metadata, line: start)
        case .audiogram(var audiogram):
            if depth == 3 { audiogram.child(name, attributes, line: line, reader: reader) }
            self = .audiogram(audiogram)
        case .clinicalRecord(let record, var metadata, let start):
            if depth == 3, name == "MetadataEntry" { metadata.add(attributes, reader: reader) }
            self = .clinicalRecord(attributes: record, metadata: metadata, line: start)
        case .stateOfMind(let state, var metadata, let start):
            if depth == 3, name == "MetadataEntry" { metadata.add(attributes, reader: reader) }
            self = .stateOfMind(attributes: state, metadata: metadata, line: start)
        case .medication(var medication):
            if depth == 3 { medication.child(name, attributes, reader: reader) }
            self = .medication(medication)
        case .medicationDose(let dose, var metadata, let start):
            if depth == 3, name == "MetadataEntry" { metadata.add(attributes, reader: reader) }
            self = .medicationDose(attributes: dose, metadata: metadata, line: start)
        }
    }

    mutating func end(_ name: String, depth: Int, reader: AppleHealthReader) {
        switch consume self {
        case .workout(var workout):
            workout.end(name, depth: depth)
            self = .workout(workout)
        case let other:
            self = other
        }
    }
}

private struct RecordBuilder {
    let attributes: Attributes
    let line: Int
    /// Made at the size most records reach (a few entries, then the sync identifier and
    /// version), so that it is not grown, and every key hashed again, entry by entry.
    var metadata = Metadata(minimumCapacity: 6)

    init(_ attributes: Attributes, line: Int) {
        self.attributes = attributes
        self.line = line
    }

    /// The record's `HeartRateVariabilityMetadataList`, a heartbeat series.
    var heartbeats: HeartbeatListBuilder?
    /// The values of a series sample (HealthLedger's exports), as written: each value, and its
    /// start and end in seconds after the record's start.
    var series: [(value: String, start: String, end: String, line: Int)] = []
    /// Whether the open child is that list (the elements inside go to it).
    private var inHeartbeats = false

    mutating func child(_ name: String, _ attributes: Attributes, line: Int, reader: AppleHealthReader) {
        inHeartbeats = name == "HeartRateVariabilityMetadataList"
        switch name {
        case "MetadataEntry": metadata.add(attributes, reader: reader)
        case "QuantitySeriesEntry":
            // Past the most a sample holds, one more marks the record as too long (rejected).
            if series.count <= QuantitySample.maximumSeriesEntries {
                series.append((attributes["value"] ?? "", attributes["start"] ?? "", attributes["end"] ?? "", line))
            }
        case "HeartRateVariabilityMetadataList":
            if heartbeats != nil {
                reader.note(.skipped(element: name, reason: "a record holds one heartbeat series; this second list is left out", line: line))
                inHeartbeats = false
            } else {
                heartbeats = HeartbeatListBuilder(line: line)
            }
        default: break
        }
    }

    /// An element inside the record's child: a beat or metadata entry of its heartbeat list.
    mutating func grandchild(_ name: String, _ attributes: Attributes, line: Int, reader: AppleHealthReader) {
        guard inHeartbeats else { return }
        switch name {
        case "InstantaneousBeatsPerMinute":
            // Past the most a series holds, one more marks the list as too long (rejected).
            if let count = heartbeats?.beats.count, count <= HeartbeatSeriesSample.maximumBeats {
                heartbeats?.beats.append((attributes["time"] ?? "", ["1", "true"].contains(attributes["precededByGap"] ?? ""), line))
            }
        case "MetadataEntry":
            heartbeats?.metadata.add(attributes, reader: reader)
        default:
            reader.note(.skipped(element: name, reason: "the ledger does not hold \(name) elements inside a HeartRateVariabilityMetadataList", line: line))
        }
    }
}

/// A `HeartRateVariabilityMetadataList`: its beats' times of day as written, their gap flags
/// (HealthLedger's exports), and its metadata entries (HealthLedger's exports).
private struct HeartbeatListBuilder {
    let line: Int
    var beats: [(time: String, precededByGap: Bool, line: Int)] = []
    var metadata: Metadata = [:]
}

extension AppleHealthReader {
    fileprivate func note(_ item: AppleHealthItem) { emit(item) }
}

private struct CorrelationBuilder {
    let attributes: Attributes
    let line: Int
    var metadata: Metadata = [:]
    var records: [RecordBuilder] = []
    /// Whether the open child at depth 3 is a member `Record` (the entries inside go to it).
    var inMember = false
}

private struct RouteBuilder {
    let attributes: Attributes
    let line: Int
    var metadata: Metadata = [:]
    var path: String?
}

private struct WorkoutBuilder {
    let attributes: Attributes
    let line: Int
    var metadata: Metadata = [:]
    var events: [WorkoutEvent] = []
    var activities: [WorkoutActivity] = []
    /// Each activity's `workoutActivityType`, when the element names one (HealthLedger's
    /// exports do for a multisport workout; the Health app's do not).
    var activityTypes: [WorkoutActivityType?] = []
    var routes: [RouteBuilder] = []
    var statisticsTypes: [String] = []
    var problems: [AppleHealthReader.Rejection] = []
    /// What the open child at depth 3 is: its metadata entries go to it.
    private var openChild: String?
    /// What the open grandchild at depth 4 is (an activity's event takes the entries inside it).
    private var openGrandchild: String?

    init(attributes: Attributes, line: Int) {
        self.attributes = attributes
        self.line = line
    }

    mutating func child(_ name: String, _ attributes: Attributes, depth: Int, line: Int, reader: AppleHealthReader) {
        if depth == 3 { openChild = name }
        if depth == 4 { openGrandchild = name }
        switch (name, depth) {
        case ("MetadataEntry", 3): metadata.add(attributes, reader: reader)
        case ("WorkoutEvent", 3): if let event = event(attributes, line: line) { events.append(event) }
        case ("WorkoutEvent", 4) where openChild == "WorkoutActivity" && !activities.isEmpty:
            if let event = event(attributes, line: line) { activities[activities.count - 1].events.append(event) }
        case ("MetadataEntry", 4):
            switch openChild {
            case "WorkoutEvent" where !events.isEmpty: events[events.count - 1].metadata.add(attributes, reader: reader)
            case "WorkoutActivity" where !activities.isEmpty: activities[activities.count - 1].metadata.add(attributes, reader: reader)
            case "WorkoutRoute" where !routes.isEmpty: routes[routes.count - 1].metadata.add(attributes, reader: reader)
            default: break
            }
        case ("MetadataEntry", 5) where openChild == "WorkoutActivity" && openGrandchild == "WorkoutEvent":
            if let activity = activities.indices.last, let event = activities[activity].events.indices.last {
                activities[activity].events[event].metadata.add(attributes, reader: reader)
            }
        case ("WorkoutActivity", 3):
            guard let start = attributes["startDate"].flatMap(AppleHealthValues.date) else {
                problems.append(.init(kind: .invalidDate, reason: "line \(line): WorkoutActivity has no valid startDate"))
                return
            }
            let end = attributes["endDate"].flatMap(AppleHealthValues.date) ?? start
            guard end >= start else {
                problems.append(.init(kind: .datesOutOfOrder, reason: "line \(line): WorkoutActivity ends before it starts"))
                return
            }
            let uuid = attributes["uuid"].flatMap(UUID.init(uuidString:)) ?? .timeOrdered()
            activities.append(WorkoutActivity(configuration: WorkoutConfiguration(activityType: .other), start: start, end: end, uuid: uuid))
            activityTypes.append(attributes["workoutActivityType"].flatMap(WorkoutActivityType.init(name:)))
        case ("WorkoutStatistics", _):
            if let type = attributes["type"] { statisticsTypes.append(type) }
        case ("WorkoutRoute", 3):
            routes.append(RouteBuilder(attributes: attributes, line: line))
        case ("FileReference", 4) where openChild == "WorkoutRoute" && !routes.isEmpty:
            routes[routes.count - 1].path = attributes["path"]
        default: break
        }
    }

    mutating func end(_ name: String, depth: Int) {
        if depth == 3 { openChild = nil }
        if depth == 4 { openGrandchild = nil }
    }

    private mutating func event(_ attributes: Attributes, line: Int) -> WorkoutEvent? {
        let typeName = attributes["type"] ?? ""
        guard let type = WorkoutEventType.allCases.first(where: { "HKWorkoutEventType" + capitalized("\($0)") == typeName }) else {
            problems.append(.init(kind: .unknownType, reason: "line \(line): unknown workout event type '\(typeName)'"))
            return nil
        }
        guard let date = attributes["date"].flatMap(AppleHealthValues.date) else {
            problems.append(.init(kind: .invalidDate, reason: "line \(line): the workout event has no valid date"))
            return nil
        }
        var end = date
        if let duration = attributes["duration"].flatMap(Double.init), duration > 0 {
            let unit = (try? HealthUnit(attributes["durationUnit"] ?? "min")) ?? HealthUnit.second
            let seconds = (try? unit.convert(duration, to: .second)) ?? duration
            end = date.addingTimeInterval(seconds)
        }
        return WorkoutEvent(type: type, start: date, end: type.hasDuration ? end : nil)
    }
}

private struct MedicationBuilder {
    let attributes: Attributes
    let line: Int
    var metadata: Metadata = [:]
    var codings: [ClinicalCoding] = []

    init(attributes: Attributes, line: Int) {
        self.attributes = attributes
        self.line = line
    }

    mutating func child(_ name: String, _ attributes: Attributes, reader: AppleHealthReader) {
        switch name {
        case "MetadataEntry": metadata.add(attributes, reader: reader)
        case "ClinicalCoding":
            // Past the most a concept holds, validation refuses the element: no more are kept.
            guard codings.count <= MedicationConcept.maximumCodings else { return }
            codings.append(ClinicalCoding(system: attributes["system"] ?? "", version: attributes["version"], code: attributes["code"] ?? ""))
        default: break
        }
    }
}

private struct AudiogramBuilder {
    let attributes: Attributes
    let line: Int
    var metadata: Metadata = [:]
    var points: [AudiogramPoint] = []
    var problems: [AppleHealthReader.Rejection] = []

    init(attributes: Attributes, line: Int) {
        self.attributes = attributes
        self.line = line
    }

    mutating func child(_ name: String, _ attributes: Attributes, line: Int, reader: AppleHealthReader) {
        switch name {
        case "MetadataEntry": metadata.add(attributes, reader: reader)
        case "SensitivityPoint":
            guard let frequency = reader.quantity(attributes["frequencyValue"], unit: attributes["frequencyUnit"], default: "Hz") else {
                return problems.append(.init(kind: .unparsableValue, reason: "line \(line): a SensitivityPoint's frequencyValue is missing or not a number"))
            }
            func ear(_ side: String) -> Quantity? {
                let text = attributes[side + "EarValue"]
                guard let text, !text.isEmpty else { return nil }
                guard let level = reader.quantity(text, unit: attributes[side + "EarUnit"], default: "dBHL") else {
                    problems.append(.init(kind: .unparsableValue, reason: "line \(line): \(side)EarValue '\(text.prefix(40))' is not a number in a known unit"))
                    return nil
                }
                return level
            }
            func masked(_ side: String) -> Bool { ["1", "true", "YES"].contains(attributes[side + "EarMasked"] ?? "") }
            points.append(AudiogramPoint(frequency: frequency, leftEar: ear("left"), rightEar: ear("right"), leftEarMasked: masked("left"), rightEarMasked: masked("right")))
        default: break
        }
    }
}

private struct PrescriptionBuilder {
    let attributes: Attributes
    let line: Int
    var metadata: Metadata = [:]
    var rightEye: LensSpecification?
    var leftEye: LensSpecification?
    var attachments: [String] = []
    var problems: [AppleHealthReader.Rejection] = []

    init(attributes: Attributes, line: Int) {
        self.attributes = attributes
        self.line = line
    }

    mutating func child(_ name: String, _ attributes: Attributes, line: Int, reader: AppleHealthReader) {
        switch name {
        case "MetadataEntry": metadata.add(attributes, reader: reader)
        case "RightEye", "LeftEye":
            func quantity(_ key: String, _ unit: String) -> Quantity? {
                reader.quantity(attributes[key], unit: attributes[key + "Unit"], default: unit)
            }
            guard let sphere = quantity("sphere", "D") else {
                problems.append(.init(kind: .unparsableValue, reason: "line \(line): \(name) has no sphere"))
                return
            }
            var prism: Prism?
            if let amount = quantity("prismAmount", "pD"), let angle = quantity("prismAngle", "deg") {
                prism = Prism(amount: amount, angle: angle, base: .none, eye: name == "RightEye" ? .right : .left)
            }
            let lens = LensSpecification(
                sphere: sphere, cylinder: quantity("cylinder", "D"), axis: quantity("axis", "deg"), addPower: quantity("add", "D"),
                vertexDistance: quantity("vertex", "mm"), prism: prism, farPupillaryDistance: quantity("farPD", "mm"),
                nearPupillaryDistance: quantity("nearPD", "mm"), baseCurve: quantity("baseCurve", "mm"), diameter: quantity("diameter", "mm"))
            if name == "RightEye" { rightEye = lens } else { leftEye = lens }
        case "Attachment":
            attachments.append(attributes["identifier"] ?? "(unnamed)")
        default: break
        }
    }
}

extension Metadata {
    fileprivate mutating func add(_ attributes: Attributes, reader: AppleHealthReader) {
        guard let stored = attributes["key"], let value = attributes["value"] else { return }
        let key = MetadataKey.named(storedAs: stored)
        self[key] = reader.metadataValue(key: key, value)
    }
}
