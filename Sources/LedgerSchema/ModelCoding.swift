import Foundation
import HealthModel
import SwiftProtobuf

// Conversions between the HealthModel types and their language-neutral schema
// (healthledger.v1). Dates travel as microseconds since 1970; decoding validates
// everything an encoder outside this process could have got wrong.

/// Microseconds since 1970 for `date`, rounded to the nearest microsecond.
public func microseconds(_ date: Date) -> Int64 {
    let value = (date.timeIntervalSince1970 * 1_000_000).rounded()
    guard value.isFinite, value < 9.2e18, value > -9.2e18 else { return value < 0 ? Int64.min : Int64.max }
    return Int64(value)
}

/// The date `microseconds` after 1970.
public func date(microseconds: Int64) -> Date {
    Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)
}

extension UUID {
    /// The 16 raw bytes.
    public var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// A UUID from 16 raw bytes; nil for any other length.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let copied = withUnsafeMutableBytes(of: &value) { target in
            bytes.withContiguousStorageIfAvailable { source in
                target.copyMemory(from: UnsafeRawBufferPointer(source))
            } != nil
        }
        if !copied {
            withUnsafeMutableBytes(of: &value) { target in
                var index = 0
                for byte in bytes {
                    target[index] = byte
                    index += 1
                }
            }
        }
        self.init(uuid: value)
    }

    /// A UUID from 16 raw bytes of `data`.
    public init?(bytes data: Data) {
        guard data.count == 16 else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        _ = withUnsafeMutableBytes(of: &value) { target in data.copyBytes(to: target.bindMemory(to: UInt8.self)) }
        self.init(uuid: value)
    }
}

extension Healthledger_V1_Source {
    public init(_ source: Source) {
        self.init()
        bundleIdentifier = source.bundleIdentifier
        name = source.name
    }

    public var model: Source { Source(bundleIdentifier: bundleIdentifier, name: name) }
}

extension Healthledger_V1_SourceRevision {
    public init(_ revision: SourceRevision) {
        self.init()
        source = .init(revision.source)
        if let value = revision.version { version = value }
        if let value = revision.productType { productType = value }
        if let value = revision.operatingSystemVersion { operatingSystemVersion = value }
    }

    public var model: SourceRevision {
        SourceRevision(
            source: source.model,
            version: hasVersion ? version : nil,
            productType: hasProductType ? productType : nil,
            operatingSystemVersion: hasOperatingSystemVersion ? operatingSystemVersion : nil)
    }
}

extension Healthledger_V1_Device {
    public init(_ device: Device) {
        self.init()
        if let value = device.name { name = value }
        if let value = device.manufacturer { manufacturer = value }
        if let value = device.model { model = value }
        if let value = device.hardwareVersion { hardwareVersion = value }
        if let value = device.firmwareVersion { firmwareVersion = value }
        if let value = device.softwareVersion { softwareVersion = value }
        if let value = device.localIdentifier { localIdentifier = value }
        if let value = device.udiDeviceIdentifier { udiDeviceIdentifier = value }
    }

    public var modelValue: Device {
        Device(
            name: hasName ? name : nil, manufacturer: hasManufacturer ? manufacturer : nil,
            model: hasModel ? model : nil, hardwareVersion: hasHardwareVersion ? hardwareVersion : nil,
            firmwareVersion: hasFirmwareVersion ? firmwareVersion : nil,
            softwareVersion: hasSoftwareVersion ? softwareVersion : nil,
            localIdentifier: hasLocalIdentifier ? localIdentifier : nil,
            udiDeviceIdentifier: hasUdiDeviceIdentifier ? udiDeviceIdentifier : nil)
    }
}

extension Healthledger_V1_Quantity {
    public init(_ quantity: Quantity) {
        self.init()
        value = quantity.value
        unit = quantity.unit.description
    }

    /// - Throws: ``HealthError`` when the unit does not parse.
    public func model() throws -> Quantity {
        Quantity(value, try HealthUnit(unit))
    }

    /// The model quantity of the field named `field`; a bad unit's error names `field.unit`.
    func model(field: String) throws -> Quantity {
        do {
            return try model()
        } catch var error as HealthError {
            error.field = "\(field).unit"
            throw error
        }
    }
}

extension Array where Element == Healthledger_V1_MetadataEntry {
    /// Entries sorted by key, so the encoding is deterministic.
    public init(_ metadata: Metadata) {
        self = metadata.keys.sorted().map { key in
            var entry = Healthledger_V1_MetadataEntry()
            entry.key = key
            switch metadata[key]! {
            case .string(let value): entry.stringValue = value
            case .number(let value): entry.numberValue = value
            case .date(let value): entry.dateUs = microseconds(value)
            case .quantity(let value): entry.quantityValue = .init(value)
            }
            return entry
        }
    }

    /// - Throws: ``HealthError`` for a duplicate key, an empty value or a bad unit.
    public func model() throws -> Metadata {
        var metadata: Metadata = [:]
        for entry in self {
            let value: MetadataValue
            switch entry.value {
            case .stringValue(let string): value = .string(string)
            case .numberValue(let number): value = .number(number)
            case .dateUs(let micros): value = .date(date(microseconds: micros))
            case .quantityValue(let quantity): value = .quantity(try quantity.model())
            case nil:
                throw HealthError.invalidArgument("metadata entry '\(entry.key)' has no value", field: "metadata.\(entry.key)")
            }
            guard metadata.updateValue(value, forKey: entry.key) == nil else {
                throw HealthError.invalidArgument("metadata key '\(entry.key)' appears twice", field: "metadata.\(entry.key)")
            }
        }
        return metadata
    }
}

extension Healthledger_V1_HealthObject {
    /// The schema form of `object`.
    public init(_ object: HealthObject) {
        self.init()
        switch object {
        case .quantitySample(let sample):
            setCommonFields(sample)
            var body = Healthledger_V1_QuantitySampleBody()
            body.quantity = .init(sample.quantity)
            body.series = sample.series.map { entry in
                .with {
                    $0.value = entry.value
                    $0.startUs = microseconds(entry.startDate)
                    $0.endUs = microseconds(entry.endDate)
                }
            }
            self.body = .quantity(body)
        case .categorySample(let sample):
            setCommonFields(sample)
            var body = Healthledger_V1_CategorySampleBody()
            body.value = Int64(sample.value)
            self.body = .category(body)
        case .visionPrescription(let prescription):
            setCommonFields(prescription)
            self.body = .visionPrescription(.init(prescription))
        case .workout(let workout):
            setCommonFields(workout)
            var body = Healthledger_V1_WorkoutBody()
            body.configuration = .init(workout.configuration)
            body.events = workout.events.map(Healthledger_V1_WorkoutEvent.init)
            body.activities = workout.activities.map(Healthledger_V1_WorkoutActivity.init)
            self.body = .workout(body)
        case .workoutRoute(let route):
            setCommonFields(route)
            var body = Healthledger_V1_WorkoutRouteBody()
            body.workoutUuid = Data(route.workoutUUID.bytes)
            body.locationCount = UInt64(route.locationCount)
            self.body = .workoutRoute(body)
        case .correlation(let correlation):
            setCommonFields(correlation)
            var body = Healthledger_V1_CorrelationBody()
            body.objects = correlation.objects.map { Healthledger_V1_HealthObject(.quantitySample($0)) }
            self.body = .correlation(body)
        case .activitySummary(let summary):
            setCommonFields(summary)
            self.body = .activitySummary(.init(summary))
        case .audiogram(let audiogram):
            setCommonFields(audiogram)
            self.body = .audiogram(.with { $0.points = audiogram.points.map(Healthledger_V1_AudiogramPoint.init) })
        case .clinicalRecord(let record):
            setCommonFields(record)
            self.body = .clinicalRecord(.with { body in
                body.displayName = record.displayName
                body.fhirResourceType = record.fhirResource.resourceType
                body.fhirIdentifier = record.fhirResource.identifier
                body.fhirVersion = record.fhirResource.fhirVersion
                body.sourceURL = record.fhirResource.sourceURL
                body.fhirJson = Data(record.fhirResource.data)
            })
        case .electrocardiogram(let recording):
            setCommonFields(recording)
            self.body = .electrocardiogram(.with { body in
                body.classification = Int32(recording.classification.rawValue)
                body.symptomsStatus = Int32(recording.symptomsStatus.rawValue)
                if let rate = recording.averageHeartRate { body.averageHeartRate = .init(rate) }
                body.samplingFrequency = .init(recording.samplingFrequency)
                body.voltagesUv = recording.voltages
            })
        case .heartbeatSeries(let series):
            setCommonFields(series)
            self.body = .heartbeatSeries(.with { body in
                body.beatTimesS = series.beats.map(\.timeSinceSeriesStart)
                body.gapBeats = series.beats.indices.filter { series.beats[$0].precededByGap }.map { UInt32($0) }
            })
        case .stateOfMind(let state):
            setCommonFields(state)
            self.body = .stateOfMind(.with { body in
                body.kind = Int32(state.kind.rawValue)
                body.valence = state.valence
                body.labels = state.labels.map(\.rawValue)
                body.associations = state.associations.map(\.rawValue)
            })
        case .userAnnotatedMedication(let medication):
            setCommonFields(medication)
            self.body = .userAnnotatedMedication(.with { body in
                body.medication = .with { concept in
                    concept.identifier = medication.medication.identifier
                    concept.displayText = medication.medication.displayText
                    concept.generalForm = medication.medication.generalForm.rawValue
                    concept.relatedCodings = medication.medication.relatedCodings.map { coding in
                        .with {
                            $0.system = coding.system
                            if let version = coding.version { $0.version = version }
                            $0.code = coding.code
                        }
                    }
                }
                if let nickname = medication.nickname { body.nickname = nickname }
                body.archived = medication.isArchived
                body.scheduled = medication.hasSchedule
            })
        case .medicationDoseEvent(let dose):
            setCommonFields(dose)
            self.body = .medicationDoseEvent(.with { body in
                body.medicationConceptIdentifier = dose.medicationConceptIdentifier
                body.logStatus = Int32(dose.logStatus.rawValue)
                body.scheduleType = Int32(dose.scheduleType.rawValue)
                if let quantity = dose.doseQuantity { body.doseQuantity = quantity }
                if let quantity = dose.scheduledDoseQuantity { body.scheduledDoseQuantity = quantity }
                if let date = dose.scheduledDate { body.scheduledDateUs = microseconds(date) }
                body.unit = dose.unit.description
            })
        }
    }

    private mutating func setCommonFields(_ sample: some HealthSample) {
        uuid = withUnsafeBytes(of: sample.uuid.uuid) { Data($0) }
        type = sample.objectType.identifier
        sourceRevision = .init(sample.sourceRevision)
        if let device = sample.device { self.device = .init(device) }
        if !sample.metadata.isEmpty { metadata = .init(sample.metadata) }
        startUs = microseconds(sample.startDate)
        endUs = microseconds(sample.endDate)
    }

    /// The model object. Structural problems (a bad UUID, an unknown type, a payload that
    /// does not match the type's family) throw; call ``HealthObject/validate()`` for the
    /// semantic rules.
    public func model() throws -> HealthObject {
        guard let uuid = UUID(bytes: uuid) else {
            throw HealthError.invalidArgument("uuid must be 16 bytes, got \(self.uuid.count)", field: "uuid")
        }
        guard hasSourceRevision else {
            throw HealthError.invalidArgument("sourceRevision is missing", field: "sourceRevision")
        }
        let start = date(microseconds: startUs)
        let end = date(microseconds: endUs)
        let device = hasDevice ? self.device.modelValue : nil
        let metadata = try self.metadata.model()
        switch body {
        case .quantity(let body):
            guard body.hasQuantity else { throw HealthError.invalidArgument("quantity is missing", field: "quantity") }
            return .quantitySample(QuantitySample(
                type: try QuantityType(type), quantity: try body.quantity.model(), start: start, end: end,
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model,
                series: body.series.map { QuantitySeriesEntry(value: $0.value, start: date(microseconds: $0.startUs), end: date(microseconds: $0.endUs)) }))
        case .category(let body):
            guard let value = Int(exactly: body.value) else { throw HealthError.invalidArgument("value is out of range", field: "value") }
            return .categorySample(CategorySample(
                type: try CategoryType(type), value: value, start: start, end: end,
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .visionPrescription(let body):
            guard type == ObjectType.visionPrescription.identifier else {
                throw HealthError.invalidArgument(
                    "a vision prescription's type is \(ObjectType.visionPrescription.identifier), not '\(type)'", field: "type")
            }
            return .visionPrescription(VisionPrescription(
                type: try VisionPrescriptionType(validating: body.prescriptionType.rawValue, field: "prescriptionType"),
                dateIssued: start, expirationDate: end, description: body.description_p,
                rightEye: body.hasRightEye ? try body.rightEye.model(field: "rightEye") : nil,
                leftEye: body.hasLeftEye ? try body.leftEye.model(field: "leftEye") : nil,
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .workout(let body):
            guard type == ObjectType.workout.identifier else {
                throw HealthError.invalidArgument("a workout's type is \(ObjectType.workout.identifier), not '\(type)'", field: "type")
            }
            return .workout(Workout(
                configuration: try body.configuration.model(field: "configuration"), start: start, end: end,
                events: try body.events.enumerated().map { try $1.model(field: "events[\($0)]") },
                activities: try body.activities.enumerated().map { try $1.model(field: "activities[\($0)]") },
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .workoutRoute(let body):
            guard type == ObjectType.workoutRoute.identifier else {
                throw HealthError.invalidArgument("a route's type is \(ObjectType.workoutRoute.identifier), not '\(type)'", field: "type")
            }
            guard let workout = UUID(bytes: body.workoutUuid) else {
                throw HealthError.invalidArgument("workoutUUID must be 16 bytes", field: "workoutUUID")
            }
            guard let count = Int(exactly: body.locationCount) else { throw HealthError.invalidArgument("locationCount is out of range", field: "locationCount") }
            return .workoutRoute(WorkoutRoute(
                workoutUUID: workout, locationCount: count, start: start, end: end, device: device, metadata: metadata, uuid: uuid,
                sourceRevision: sourceRevision.model))
        case .correlation(let body):
            let members = try body.objects.enumerated().map { index, member in
                guard case .quantitySample(let sample) = try member.model() else {
                    throw HealthError.invalidArgument("a correlation's members are quantity samples", field: "objects[\(index)]")
                }
                return sample
            }
            return .correlation(Correlation(
                type: try CorrelationType(type), start: start, end: end, objects: members, device: device, metadata: metadata, uuid: uuid,
                sourceRevision: sourceRevision.model))
        case .activitySummary(let body):
            guard type == ObjectType.activitySummary.identifier else {
                throw HealthError.invalidArgument(
                    "an activity summary's type is \(ObjectType.activitySummary.identifier), not '\(type)'", field: "type")
            }
            let day = try CalendarDay(year: Int(body.year), month: Int(body.month), day: Int(body.day))
            guard start == day.start, end == day.start.addingTimeInterval(86_400) else {
                throw HealthError.invalidArgument(
                    "an activity summary spans its date in UTC: start 00:00 UTC of \(day), end 24 hours later", field: "startDate")
            }
            func quantity(_ present: Bool, _ value: Healthledger_V1_Quantity, _ field: String, _ unit: String) throws -> Quantity {
                present ? try value.model(field: field) : .zero(unit)
            }
            return .activitySummary(ActivitySummary(
                day: day, moveMode: try ActivityMoveMode(validating: Int(body.moveMode), field: "moveMode"),
                activeEnergyBurned: try quantity(body.hasActiveEnergyBurned, body.activeEnergyBurned, "activeEnergyBurned", "kcal"),
                activeEnergyBurnedGoal: try quantity(body.hasActiveEnergyBurnedGoal, body.activeEnergyBurnedGoal, "activeEnergyBurnedGoal", "kcal"),
                moveTime: try quantity(body.hasMoveTime, body.moveTime, "moveTime", "min"),
                moveTimeGoal: try quantity(body.hasMoveTimeGoal, body.moveTimeGoal, "moveTimeGoal", "min"),
                exerciseTime: try quantity(body.hasExerciseTime, body.exerciseTime, "exerciseTime", "min"),
                exerciseTimeGoal: try quantity(body.hasExerciseTimeGoal, body.exerciseTimeGoal, "exerciseTimeGoal", "min"),
                standHours: try quantity(body.hasStandHours, body.standHours, "standHours", "count"),
                standHoursGoal: try quantity(body.hasStandHoursGoal, body.standHoursGoal, "standHoursGoal", "count"),
                isPaused: body.paused, device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .audiogram(let body):
            guard type == ObjectType.audiogram.identifier else {
                throw HealthError.invalidArgument("an audiogram's type is \(ObjectType.audiogram.identifier), not '\(type)'", field: "type")
            }
            let points = try body.points.enumerated().map { index, point in
                let field = "points[\(index)]"
                return AudiogramPoint(
                    frequency: try point.frequency.model(field: "\(field).frequency"),
                    leftEar: point.hasLeftEar ? try point.leftEar.model(field: "\(field).leftEar") : nil,
                    rightEar: point.hasRightEar ? try point.rightEar.model(field: "\(field).rightEar") : nil,
                    leftEarMasked: point.leftEarMasked, rightEarMasked: point.rightEarMasked)
            }
            return .audiogram(Audiogram(points: points, start: start, end: end, device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .clinicalRecord(let body):
            let type = try ObjectType(type)
            guard type.family == .clinicalRecord else {
                throw HealthError.invalidArgument("a clinical record's type is a clinical type (HKClinicalTypeIdentifier…), not '\(type)'", field: "type")
            }
            let resource = FHIRResource(
                resourceType: body.fhirResourceType, identifier: body.fhirIdentifier, fhirVersion: body.fhirVersion, sourceURL: body.sourceURL,
                data: Array(body.fhirJson))
            return .clinicalRecord(ClinicalRecord(
                type: type, displayName: body.displayName, fhirResource: resource, start: start, end: end, device: device, metadata: metadata,
                uuid: uuid, sourceRevision: sourceRevision.model))
        case .electrocardiogram(let body):
            guard type == ObjectType.electrocardiogram.identifier else {
                throw HealthError.invalidArgument("an electrocardiogram's type is \(ObjectType.electrocardiogram.identifier), not '\(type)'", field: "type")
            }
            guard body.hasSamplingFrequency else { throw HealthError.invalidArgument("samplingFrequency is missing", field: "samplingFrequency") }
            return .electrocardiogram(Electrocardiogram(
                classification: try ElectrocardiogramClassification(validating: Int(body.classification), field: "classification"),
                symptomsStatus: try ElectrocardiogramSymptomsStatus(validating: Int(body.symptomsStatus), field: "symptomsStatus"),
                averageHeartRate: body.hasAverageHeartRate ? try body.averageHeartRate.model(field: "averageHeartRate") : nil,
                samplingFrequency: try body.samplingFrequency.model(field: "samplingFrequency"), voltages: body.voltagesUv, start: start, end: end,
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .heartbeatSeries(let body):
            guard type == ObjectType.heartbeatSeries.identifier else {
                throw HealthError.invalidArgument("a heartbeat series' type is \(ObjectType.heartbeatSeries.identifier), not '\(type)'", field: "type")
            }
            var beats = body.beatTimesS.map { HeartbeatSeriesBeat(timeSinceSeriesStart: $0) }
            var previous: Int?
            for gap in body.gapBeats.map(Int.init) {
                guard gap > (previous ?? -1), beats.indices.contains(gap) else {
                    throw HealthError.invalidArgument(
                        "gapBeats must be indexes of beats (0–\(beats.count - 1)) in increasing order, not \(body.gapBeats.prefix(20))", field: "gapBeats")
                }
                beats[gap].precededByGap = true
                previous = gap
            }
            return .heartbeatSeries(HeartbeatSeriesSample(
                beats: beats, start: start, end: end, device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .stateOfMind(let body):
            guard type == ObjectType.stateOfMind.identifier else {
                throw HealthError.invalidArgument("a state of mind's type is \(ObjectType.stateOfMind.identifier), not '\(type)'", field: "type")
            }
            // Each at most once: a longer list is refused before its names are read.
            guard body.labels.count <= StateOfMind.Label.allCases.count else {
                throw HealthError.invalidArgument("labels holds each of the \(StateOfMind.Label.allCases.count) labels at most once, got \(body.labels.count)", field: "labels")
            }
            guard body.associations.count <= StateOfMind.Association.allCases.count else {
                throw HealthError.invalidArgument(
                    "associations holds each of the \(StateOfMind.Association.allCases.count) associations at most once, got \(body.associations.count)",
                    field: "associations")
            }
            return .stateOfMind(StateOfMind(
                kind: try StateOfMind.Kind(validating: Int(body.kind), field: "kind"), valence: body.valence,
                labels: try body.labels.enumerated().map { try StateOfMind.Label(validating: $1, field: "labels[\($0)]") },
                associations: try body.associations.enumerated().map { try StateOfMind.Association(validating: $1, field: "associations[\($0)]") },
                start: start, end: end, device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case .userAnnotatedMedication(let body):
            guard type == ObjectType.userAnnotatedMedication.identifier else {
                throw HealthError.invalidArgument(
                    "a medication's type is \(ObjectType.userAnnotatedMedication.identifier), not '\(type)'", field: "type")
            }
            let concept = MedicationConcept(
                identifier: body.medication.identifier, displayText: body.medication.displayText,
                generalForm: body.medication.generalForm.isEmpty
                    ? .unknown : try MedicationConcept.GeneralForm(validating: body.medication.generalForm, field: "medication.generalForm"),
                relatedCodings: body.medication.relatedCodings.map {
                    ClinicalCoding(system: $0.system, version: $0.hasVersion ? $0.version : nil, code: $0.code)
                })
            var medication = UserAnnotatedMedication(
                medication: concept, nickname: body.hasNickname ? body.nickname : nil, isArchived: body.archived, hasSchedule: body.scheduled,
                recorded: start, device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model)
            medication.endDate = end
            return .userAnnotatedMedication(medication)
        case .medicationDoseEvent(let body):
            guard type == ObjectType.medicationDoseEvent.identifier else {
                throw HealthError.invalidArgument("a medication dose's type is \(ObjectType.medicationDoseEvent.identifier), not '\(type)'", field: "type")
            }
            let unit: HealthUnit
            do { unit = body.unit.isEmpty ? .count : try HealthUnit(body.unit) } catch {
                throw HealthError.invalidArgument("unit '\(body.unit.prefix(64))' is not a unit", field: "unit")
            }
            return .medicationDoseEvent(MedicationDoseEvent(
                medicationConceptIdentifier: body.medicationConceptIdentifier,
                logStatus: try MedicationDoseEvent.LogStatus(validating: Int(body.logStatus), field: "logStatus"),
                scheduleType: try MedicationDoseEvent.ScheduleType(validating: Int(body.scheduleType), field: "scheduleType"),
                doseQuantity: body.hasDoseQuantity ? body.doseQuantity : nil,
                scheduledDoseQuantity: body.hasScheduledDoseQuantity ? body.scheduledDoseQuantity : nil,
                scheduledDate: body.hasScheduledDateUs ? LedgerSchema.date(microseconds: body.scheduledDateUs) : nil, unit: unit, start: start, end: end,
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision.model))
        case nil:
            throw HealthError.invalidArgument(
                "the object has no payload (quantity, category, vision prescription, workout, route, correlation, activity summary, audiogram, clinical record, electrocardiogram, heartbeat series, state of mind, medication or medication dose)",
                field: "body")
        }
    }
}

extension Correlation {
    /// The serialized `healthledger.v1.HealthObject` the log stores for the correlation: its
    /// members by UUID, since each member is stored as an object of its own.
    public func storedBytes() -> [UInt8] {
        var message = Healthledger_V1_HealthObject(.correlation(self))
        message.correlation.objects = []
        message.correlation.memberUuids = objects.map { Data($0.uuid.bytes) }
        // A proto3 message without `Any` fields cannot fail to serialize.
        return try! message.serializedBytes()
    }
}

extension Healthledger_V1_WorkoutConfiguration {
    public init(_ configuration: WorkoutConfiguration) {
        self.init()
        activityType = UInt32(configuration.activityType.rawValue)
        locationType = UInt32(configuration.locationType.rawValue)
        swimmingLocationType = UInt32(configuration.swimmingLocationType.rawValue)
        if let lapLength = configuration.lapLength { self.lapLength = .init(lapLength) }
    }

    /// - Throws: ``HealthError`` naming `field` for an unknown activity, location or swimming
    ///   location type, or a bad lap-length unit.
    public func model(field: String) throws -> WorkoutConfiguration {
        WorkoutConfiguration(
            activityType: try WorkoutActivityType(validating: Int(activityType), field: "\(field).activityType"),
            locationType: try WorkoutLocationType(validating: Int(locationType), field: "\(field).locationType"),
            swimmingLocationType: try SwimmingLocationType(validating: Int(swimmingLocationType), field: "\(field).swimmingLocationType"),
            lapLength: hasLapLength ? try lapLength.model(field: "\(field).lapLength") : nil)
    }
}

extension Healthledger_V1_WorkoutEvent {
    public init(_ event: WorkoutEvent) {
        self.init()
        type = UInt32(event.type.rawValue)
        startUs = microseconds(event.startDate)
        endUs = microseconds(event.endDate)
        if !event.metadata.isEmpty { metadata = .init(event.metadata) }
    }

    public func model(field: String) throws -> WorkoutEvent {
        WorkoutEvent(
            type: try WorkoutEventType(validating: Int(type), field: "\(field).type"), start: date(microseconds: startUs),
            end: date(microseconds: endUs), metadata: try metadata.model())
    }
}

extension Healthledger_V1_WorkoutActivity {
    public init(_ activity: WorkoutActivity) {
        self.init()
        uuid = Data(activity.uuid.bytes)
        configuration = .init(activity.configuration)
        startUs = microseconds(activity.startDate)
        endUs = microseconds(activity.endDate)
        events = activity.events.map(Healthledger_V1_WorkoutEvent.init)
        if !activity.metadata.isEmpty { metadata = .init(activity.metadata) }
    }

    public func model(field: String) throws -> WorkoutActivity {
        guard let uuid = UUID(bytes: uuid) else { throw HealthError.invalidArgument("\(field).uuid must be 16 bytes", field: "\(field).uuid") }
        return WorkoutActivity(
            configuration: try configuration.model(field: "\(field).configuration"), start: date(microseconds: startUs),
            end: date(microseconds: endUs), events: try events.enumerated().map { try $1.model(field: "\(field).events[\($0)]") },
            metadata: try metadata.model(), uuid: uuid)
    }
}

extension Healthledger_V1_RouteLocations {
    public init(_ locations: some Collection<RouteLocation>) {
        self.init()
        timestampUs.reserveCapacity(locations.count)
        for location in locations {
            timestampUs.append(microseconds(location.timestamp))
            latitude.append(location.latitude)
            longitude.append(location.longitude)
            altitude.append(location.altitude)
            horizontalAccuracy.append(location.horizontalAccuracy)
            verticalAccuracy.append(location.verticalAccuracy)
            course.append(location.course)
            speed.append(location.speed)
        }
    }

    /// The locations, one per index of the columns.
    /// - Throws: ``HealthError`` (`invalidArgument`) when the columns differ in length.
    public func model() throws -> [RouteLocation] {
        let count = timestampUs.count
        for (name, column) in [
            ("latitude", latitude), ("longitude", longitude), ("altitude", altitude), ("horizontalAccuracy", horizontalAccuracy),
            ("verticalAccuracy", verticalAccuracy), ("course", course), ("speed", speed),
        ] where column.count != count {
            throw HealthError.invalidArgument("locations.\(name) has \(column.count) values for \(count) timestamps", field: "locations.\(name)")
        }
        return (0..<count).map { index in
            RouteLocation(
                timestamp: date(microseconds: timestampUs[index]), latitude: latitude[index], longitude: longitude[index],
                altitude: altitude[index], horizontalAccuracy: horizontalAccuracy[index], verticalAccuracy: verticalAccuracy[index],
                course: course[index], speed: speed[index])
        }
    }
}

extension Healthledger_V1_ActivitySummaryBody {
    public init(_ summary: ActivitySummary) {
        self.init()
        (year, month, day) = (Int32(summary.day.year), Int32(summary.day.month), Int32(summary.day.day))
        moveMode = Int32(summary.moveMode.rawValue)
        activeEnergyBurned = .init(summary.activeEnergyBurned)
        activeEnergyBurnedGoal = .init(summary.activeEnergyBurnedGoal)
        moveTime = .init(summary.moveTime)
        moveTimeGoal = .init(summary.moveTimeGoal)
        exerciseTime = .init(summary.exerciseTime)
        exerciseTimeGoal = .init(summary.exerciseTimeGoal)
        standHours = .init(summary.standHours)
        standHoursGoal = .init(summary.standHoursGoal)
        paused = summary.isPaused
    }
}

extension Healthledger_V1_AudiogramPoint {
    public init(_ point: AudiogramPoint) {
        self.init()
        frequency = .init(point.frequency)
        if let level = point.leftEar { leftEar = .init(level) }
        if let level = point.rightEar { rightEar = .init(level) }
        leftEarMasked = point.leftEarMasked
        rightEarMasked = point.rightEarMasked
    }
}

extension Healthledger_V1_VisionPrescriptionBody {
    public init(_ prescription: VisionPrescription) {
        self.init()
        prescriptionType = switch prescription.prescriptionType {
        case .glasses: .glasses
        case .contacts: .contacts
        }
        description_p = prescription.description
        if let lens = prescription.rightEye { rightEye = .init(lens) }
        if let lens = prescription.leftEye { leftEye = .init(lens) }
    }
}

extension Healthledger_V1_LensSpecification {
    public init(_ lens: LensSpecification) {
        self.init()
        sphere = .init(lens.sphere)
        if let value = lens.cylinder { cylinder = .init(value) }
        if let value = lens.axis { axis = .init(value) }
        if let value = lens.addPower { addPower = .init(value) }
        if let value = lens.vertexDistance { vertexDistance = .init(value) }
        if let value = lens.prism { prism = .init(value) }
        if let value = lens.farPupillaryDistance { farPupillaryDistance = .init(value) }
        if let value = lens.nearPupillaryDistance { nearPupillaryDistance = .init(value) }
        if let value = lens.baseCurve { baseCurve = .init(value) }
        if let value = lens.diameter { diameter = .init(value) }
    }

    /// The model lens; `field` (`rightEye`, `leftEye`) prefixes the field named by errors.
    /// - Throws: ``HealthError`` for a missing sphere, an incomplete prism or a bad unit.
    public func model(field: String) throws -> LensSpecification {
        func quantity(_ present: Bool, _ value: Healthledger_V1_Quantity, _ name: String) throws -> Quantity? {
            present ? try value.model(field: "\(field).\(name)") : nil
        }
        guard hasSphere else { throw HealthError.invalidArgument("\(field).sphere is missing", field: "\(field).sphere") }
        return LensSpecification(
            sphere: try sphere.model(field: "\(field).sphere"), cylinder: try quantity(hasCylinder, cylinder, "cylinder"),
            axis: try quantity(hasAxis, axis, "axis"), addPower: try quantity(hasAddPower, addPower, "addPower"),
            vertexDistance: try quantity(hasVertexDistance, vertexDistance, "vertexDistance"),
            prism: hasPrism ? try prism.model(field: "\(field).prism") : nil,
            farPupillaryDistance: try quantity(hasFarPupillaryDistance, farPupillaryDistance, "farPupillaryDistance"),
            nearPupillaryDistance: try quantity(hasNearPupillaryDistance, nearPupillaryDistance, "nearPupillaryDistance"),
            baseCurve: try quantity(hasBaseCurve, baseCurve, "baseCurve"), diameter: try quantity(hasDiameter, diameter, "diameter"))
    }
}

extension Healthledger_V1_Prism {
    public init(_ prism: Prism) {
        self.init()
        amount = .init(prism.amount)
        angle = .init(prism.angle)
        baseDirection = .init(rawValue: prism.base.rawValue) ?? .none
        eye = .init(rawValue: prism.eye.rawValue) ?? .unspecified
    }

    /// - Throws: ``HealthError`` naming `field` (e.g. `rightEye.prism`) for a missing amount
    ///   or angle, a bad unit, or a base or eye out of range.
    public func model(field: String) throws -> Prism {
        for (name, present) in [("amount", hasAmount), ("angle", hasAngle)] where !present {
            throw HealthError.invalidArgument("\(field).\(name) is missing", field: "\(field).\(name)")
        }
        return Prism(
            amount: try amount.model(field: "\(field).amount"), angle: try angle.model(field: "\(field).angle"),
            base: try PrismBase(validating: baseDirection.rawValue, field: "\(field).base"),
            eye: try VisionEye(validating: eye.rawValue, field: "\(field).eye"))
    }
}

extension Healthledger_V1_SaveOutcome {
    public init(_ result: SaveResult) {
        self.init()
        uuid = Data(result.uuid.bytes)
        switch result.disposition {
        case .saved: disposition = .saved
        case .replaced(let previous):
            disposition = .replaced
            otherUuid = Data(previous.bytes)
        case .ignored(let existing):
            disposition = .ignored
            otherUuid = Data(existing.bytes)
        }
    }

    /// - Throws: ``HealthError`` for a UUID that is not 16 bytes.
    public func model() throws -> SaveResult {
        guard let uuid = UUID(bytes: uuid) else { throw HealthError.invalidArgument("uuid must be 16 bytes", field: "uuid") }
        switch (disposition, UUID(bytes: otherUuid)) {
        case (.replaced, let previous?): return SaveResult(uuid: uuid, disposition: .replaced(previous: previous))
        case (.ignored, let existing?): return SaveResult(uuid: uuid, disposition: .ignored(existing: existing))
        default: return SaveResult(uuid: uuid, disposition: .saved)
        }
    }
}

extension Healthledger_V1_SampleQueryRequest.Sort {
    public init(_ sort: SampleSort) {
        self = switch sort {
        case .startDate(true): .startAscending
        case .startDate(false): .startDescending
        case .endDate(true): .endAscending
        case .endDate(false): .endDescending
        }
    }

    public var model: SampleSort {
        switch self {
        case .startDescending: .startDate(ascending: false)
        case .endAscending: .endDate(ascending: true)
        case .endDescending: .endDate(ascending: false)
        default: .startDate(ascending: true)
        }
    }
}

extension Healthledger_V1_DeletedObject {
    public init(_ deleted: DeletedObject) {
        self.init()
        uuid = Data(deleted.uuid.bytes)
        if let identifier = deleted.syncIdentifier { syncIdentifier = identifier }
        if let version = deleted.syncVersion { syncVersion = version }
    }

    /// - Throws: ``HealthError`` `invalidArgument` for a UUID that is not 16 bytes.
    public func model() throws -> DeletedObject {
        guard let uuid = UUID(bytes: uuid) else { throw HealthError.invalidArgument("uuid must be 16 bytes", field: "uuid") }
        return DeletedObject(uuid: uuid, syncIdentifier: hasSyncIdentifier ? syncIdentifier : nil, syncVersion: hasSyncVersion ? syncVersion : nil)
    }
}
