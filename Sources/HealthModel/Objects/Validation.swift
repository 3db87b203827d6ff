import Foundation

/// Limits on what one object may carry, so hostile input cannot bloat the ledger.
public enum ObjectLimits {
    public static let maximumMetadataEntries = 128
    public static let maximumKeyLength = 256
    public static let maximumStringLength = 4096
    /// Bundle identifiers, names and version strings.
    public static let maximumIdentifierLength = 255
    /// Events of one workout or activity.
    public static let maximumWorkoutEvents = 4096
    public static let maximumWorkoutActivities = 256
    /// Locations of one route (55 hours at one a second).
    public static let maximumRouteLocations = 200_000
    /// Samples one association with a workout may name.
    public static let maximumAssociatedSamples = 10_000
    /// Dates must fall within years 0001–9999.
    public static let dateRange: ClosedRange<Date> =
        Date(timeIntervalSince1970: -62_135_596_800)...Date(timeIntervalSince1970: 253_402_300_799)
}

extension HealthObject {
    /// Checks the object against docs/SEMANTICS.md §3–4 and §9.
    ///
    /// - Throws: ``HealthError`` (`invalidArgument`) whose message and ``HealthError/field``
    ///   name the field at fault.
    public func validate() throws {
        switch self {
        case .quantitySample(let sample):
            try Self.validateCommon(sample)
            try Self.validate(sample)
        case .categorySample(let sample):
            try Self.validateCommon(sample)
            try Self.validate(sample)
        case .visionPrescription(let prescription):
            try Self.validateCommon(prescription)
            try Self.validate(prescription)
        case .workout(let workout):
            try Self.validateCommon(workout)
            try Self.validate(workout)
        case .correlation(let correlation):
            try Self.validateCommon(correlation)
            try correlation.validateMembers()
        case .workoutRoute(let route):
            try Self.validateCommon(route)
            guard route.locationCount > 0 else {
                throw HealthError.invalidArgument("a route needs at least one location", field: "locations")
            }
        case .activitySummary(let summary):
            try Self.validateCommon(summary)
            try Self.validate(summary)
        case .audiogram(let audiogram):
            try Self.validateCommon(audiogram)
            try Self.validate(audiogram)
        case .clinicalRecord(let record):
            try Self.validateCommon(record)
            try Self.validate(record)
        case .electrocardiogram(let recording):
            try Self.validateCommon(recording)
            try Self.validate(recording)
        case .heartbeatSeries(let series):
            try Self.validateCommon(series)
            try Self.validate(series)
        case .stateOfMind(let state):
            try Self.validateCommon(state)
            try Self.validate(state)
        case .userAnnotatedMedication(let medication):
            try Self.validateCommon(medication)
            try Self.validate(medication)
        case .medicationDoseEvent(let dose):
            try Self.validateCommon(dose)
            try Self.validate(dose)
        }
    }

    /// A concept identifier of 1–255 bytes, a display text of 1–4096, a nickname (when given) of
    /// 1–4096, at most 64 codings, each with a system and a code of 1–255 bytes (a version of at
    /// most 255), none twice.
    private static func validate(_ medication: UserAnnotatedMedication) throws {
        let concept = medication.medication
        try checkText(concept.identifier, "medication.identifier", limit: ObjectLimits.maximumIdentifierLength)
        try checkText(concept.displayText, "medication.displayText", limit: ObjectLimits.maximumStringLength)
        if let nickname = medication.nickname { try checkText(nickname, "nickname", limit: ObjectLimits.maximumStringLength) }
        guard concept.relatedCodings.count <= MedicationConcept.maximumCodings else {
            throw HealthError.invalidArgument(
                "medication.relatedCodings holds at most \(MedicationConcept.maximumCodings) codings, got \(concept.relatedCodings.count)",
                field: "medication.relatedCodings")
        }
        for (index, coding) in concept.relatedCodings.enumerated() {
            let field = "medication.relatedCodings[\(index)]"
            try checkText(coding.system, "\(field).system", limit: ObjectLimits.maximumIdentifierLength)
            try checkText(coding.code, "\(field).code", limit: ObjectLimits.maximumIdentifierLength)
            if let version = coding.version { try checkText(version, "\(field).version", limit: ObjectLimits.maximumIdentifierLength) }
            guard !concept.relatedCodings[..<index].contains(coding) else {
                throw HealthError.invalidArgument("\(field) is given twice", field: field)
            }
        }
    }

    /// A concept identifier of 1–255 bytes; quantities finite and not negative; a scheduled
    /// date within years 0001–9999.
    private static func validate(_ dose: MedicationDoseEvent) throws {
        try checkText(dose.medicationConceptIdentifier, "medicationConceptIdentifier", limit: ObjectLimits.maximumIdentifierLength)
        for (name, value) in [("doseQuantity", dose.doseQuantity), ("scheduledDoseQuantity", dose.scheduledDoseQuantity)] {
            guard let value else { continue }
            guard value.isFinite, value >= 0 else {
                throw HealthError.invalidArgument("\(name) must be finite and not negative, not \(value)", field: name)
            }
        }
        if let date = dose.scheduledDate, !ObjectLimits.dateRange.contains(date) {
            throw HealthError.invalidArgument("scheduledDate must fall within years 0001–9999", field: "scheduledDate")
        }
    }

    /// `text` is 1–`limit` bytes of UTF-8 with no control character but tab, line feed and
    /// carriage return (which no XML export could carry).
    private static func checkText(_ text: String, _ field: String, limit: Int) throws {
        guard !text.isEmpty, text.utf8.count <= limit else {
            throw HealthError.invalidArgument("\(field) must be 1–\(limit) bytes, got \(text.utf8.count)", field: field)
        }
        if let control = text.unicodeScalars.first(where: { ($0.value < 0x20 && !"\t\n\r".unicodeScalars.contains($0)) || $0.value == 0x7F }) {
            throw HealthError.invalidArgument("\(field) holds the control character U+\(String(format: "%04X", control.value))", field: field)
        }
    }

    /// A valence from -1 to 1; each label and association at most once.
    private static func validate(_ state: StateOfMind) throws {
        guard StateOfMind.valences.contains(state.valence) else {
            throw HealthError.invalidArgument("valence must be from -1 (very unpleasant) to 1 (very pleasant), not \(state.valence)", field: "valence")
        }
        if let index = state.labels.indices.first(where: { state.labels[..<$0].contains(state.labels[$0]) }) {
            throw HealthError.invalidArgument("labels[\(index)] '\(state.labels[index].rawValue)' is given twice", field: "labels[\(index)]")
        }
        if let index = state.associations.indices.first(where: { state.associations[..<$0].contains(state.associations[$0]) }) {
            throw HealthError.invalidArgument(
                "associations[\(index)] '\(state.associations[index].rawValue)' is given twice", field: "associations[\(index)]")
        }
    }

    /// 1–200,000 beats at finite times from 0 to the series' duration and within its first
    /// day, each at least a millisecond after the one before.
    private static func validate(_ series: HeartbeatSeriesSample) throws {
        guard (1...HeartbeatSeriesSample.maximumBeats).contains(series.beats.count) else {
            throw HealthError.invalidArgument(
                "beats: a series holds 1–\(HeartbeatSeriesSample.maximumBeats) beats, got \(series.beats.count)", field: "beats")
        }
        let duration = series.endDate.timeIntervalSince(series.startDate)
        var previous = -Double.infinity
        for (index, beat) in series.beats.enumerated() {
            let time = beat.timeSinceSeriesStart
            guard time.isFinite, time >= 0, time <= duration, time < HeartbeatSeriesSample.maximumSpan else {
                throw HealthError.invalidArgument(
                    "beats[\(index)].timeSinceSeriesStart must be within the series' \(duration) s and its first day, not \(time)", field: "beats[\(index)]")
            }
            guard time >= previous + HeartbeatSeriesSample.minimumInterval else {
                throw HealthError.invalidArgument(
                    "beats[\(index)] must come at least 1 ms after beats[\(index - 1)] (\(time) s is not after \(previous) s)", field: "beats[\(index)]")
            }
            previous = time
        }
    }

    /// A positive sampling frequency of at most 10 kHz, 1–200,000 finite voltages, and an
    /// average heart rate, if any, of 1–300 count/min.
    private static func validate(_ recording: Electrocardiogram) throws {
        guard recording.samplingFrequency.isCompatible(with: .hertz), let hertz = try? recording.samplingFrequency.doubleValue(for: .hertz),
            hertz > 0, hertz <= 10_000
        else {
            throw HealthError.invalidArgument(
                "samplingFrequency must be a frequency of 0–10,000 Hz, not \(recording.samplingFrequency)", field: "samplingFrequency")
        }
        guard (1...Electrocardiogram.maximumVoltages).contains(recording.voltages.count) else {
            throw HealthError.invalidArgument(
                "voltages: a recording holds 1–\(Electrocardiogram.maximumVoltages) measurements, got \(recording.voltages.count)", field: "voltages")
        }
        if let index = recording.voltages.firstIndex(where: { !$0.isFinite }) {
            throw HealthError.invalidArgument("voltages[\(index)] must be a finite number of µV", field: "voltages")
        }
        if let rate = recording.averageHeartRate {
            let perMinute = try? rate.doubleValue(for: HealthUnit("count/min"))
            guard let perMinute, (1...300).contains(perMinute) else {
                throw HealthError.invalidArgument("averageHeartRate must be 1–300 count/min, not \(rate)", field: "averageHeartRate")
            }
        }
    }

    /// A clinical type, a display name and identifiers of reasonable size, and a resource
    /// of at most 1 MiB that is a JSON object of its `resourceType`.
    private static func validate(_ record: ClinicalRecord) throws {
        guard record.type.family == .clinicalRecord else {
            throw HealthError.invalidArgument("\(record.type) is not a clinical type", field: "type")
        }
        let resource = record.fhirResource
        for (field, value, limit) in [
            ("displayName", record.displayName, ObjectLimits.maximumStringLength), ("fhirResource.resourceType", resource.resourceType, 64),
            ("fhirResource.identifier", resource.identifier, ObjectLimits.maximumIdentifierLength), ("fhirResource.fhirVersion", resource.fhirVersion, 32),
            ("fhirResource.sourceURL", resource.sourceURL, ObjectLimits.maximumStringLength),
        ] where value.utf8.count > limit {
            throw HealthError.invalidArgument("\(field) is longer than \(limit) bytes", field: field)
        }
        guard !resource.data.isEmpty, resource.data.count <= ClinicalRecord.maximumResourceBytes else {
            throw HealthError.invalidArgument(
                "fhirResource.data: a FHIR resource is 1 byte to \(ClinicalRecord.maximumResourceBytes >> 20) MiB of JSON, got \(resource.data.count) bytes", field: "fhirResource.data")
        }
        // FHIR's own rule for a resource type's name (it also names the resource's file in an export).
        guard let first = resource.resourceType.unicodeScalars.first, ("A"..."Z").contains(first),
            resource.resourceType.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) || ("a"..."z").contains($0) })
        else {
            throw HealthError.invalidArgument(
                "fhirResource.resourceType '\(resource.resourceType.prefix(64))' is not a FHIR resource type (letters, the first a capital)",
                field: "fhirResource.resourceType")
        }
        let parsed = try FHIRResource(json: resource.data, fhirVersion: resource.fhirVersion)
        guard parsed.resourceType == resource.resourceType else {
            throw HealthError.invalidArgument(
                "fhirResource.resourceType '\(resource.resourceType)' is not the JSON's ('\(parsed.resourceType)')", field: "fhirResource.resourceType")
        }
    }

    /// 1–64 points in increasing frequency, each a finite positive frequency with at least
    /// one ear's threshold, a hearing level of -20–140 dBHL.
    private static func validate(_ audiogram: Audiogram) throws {
        guard (1...Audiogram.maximumPoints).contains(audiogram.points.count) else {
            throw HealthError.invalidArgument(
                "an audiogram holds 1–\(Audiogram.maximumPoints) points, got \(audiogram.points.count)", field: "points")
        }
        let (hertz, hearingLevel) = (HealthUnit.hertz, HealthUnit.hearingLevel)
        var previous = -Double.infinity
        for (index, point) in audiogram.points.enumerated() {
            let field = "points[\(index)]"
            guard point.frequency.isCompatible(with: hertz), let frequency = try? point.frequency.doubleValue(for: hertz), frequency.isFinite, frequency > 0 else {
                throw HealthError.invalidArgument("\(field).frequency must be a positive frequency (Hz), not \(point.frequency)", field: "\(field).frequency")
            }
            guard frequency > previous else {
                throw HealthError.invalidArgument("\(field).frequency must be above the point before's: frequencies rise, each once", field: "\(field).frequency")
            }
            previous = frequency
            guard point.leftEar != nil || point.rightEar != nil else {
                throw HealthError.invalidArgument("\(field) has neither ear's threshold", field: field)
            }
            for (ear, level) in [("leftEar", point.leftEar), ("rightEar", point.rightEar)] {
                guard let level else { continue }
                guard level.isCompatible(with: hearingLevel), let value = try? level.doubleValue(for: hearingLevel),
                    Audiogram.hearingLevels.contains(value)
                else {
                    throw HealthError.invalidArgument(
                        "\(field).\(ear) must be a hearing level of -20–140 dBHL, not \(level)", field: "\(field).\(ear)")
                }
            }
        }
    }

    /// A real day, a move mode, and every ring and goal a finite, non-negative quantity of its kind.
    private static func validate(_ summary: ActivitySummary) throws {
        _ = try CalendarDay(year: summary.day.year, month: summary.day.month, day: summary.day.day)
        guard summary.moveMode != .notSet else {
            throw HealthError.invalidArgument("an activity summary's moveMode is activeEnergy (1) or appleMoveTime (2), not notSet (0)", field: "moveMode")
        }
        for (field, quantity, unit) in summary.quantities {
            guard quantity.value.isFinite, quantity.value >= 0 else {
                throw HealthError.invalidArgument("\(field) must be a finite number, not negative: got \(quantity.value)", field: field)
            }
            guard quantity.isCompatible(with: try HealthUnit(unit)) else {
                throw HealthError.invalidArgument("\(field): unit '\(quantity.unit)' is not compatible with '\(unit)'", field: "\(field).unit")
            }
        }
    }

    private static func validateCommon(_ sample: some HealthSample) throws {
        try validateDates(start: sample.startDate, end: sample.endDate)
        try validate(sample.sourceRevision)
        if let device = sample.device { try validate(device) }
        if !sample.metadata.isEmpty { try validate(sample.metadata) }
    }

    private static func validate(_ sample: QuantitySample) throws {
        let type = sample.type
        guard sample.quantity.value.isFinite else {
            throw HealthError.invalidArgument("quantity must be a finite number, not \(sample.quantity.value)", field: "quantity")
        }
        guard sample.quantity.isCompatible(with: type.canonicalUnit) else {
            throw HealthError.invalidArgument(
                "unit '\(sample.quantity.unit)' is not compatible with \(type.identifier), whose unit is '\(type.canonicalUnit)'",
                field: "quantity.unit")
        }
        let canonical = try sample.quantity.doubleValue(for: type.canonicalUnit)
        // Bounds that keep every statistic finite: sums over millions of values, values
        // weighted by microseconds, and a level's sound energy 10^(L/10).
        if type.aggregationStyle == .discreteEquivalentContinuousLevel {
            guard abs(canonical) <= Self.largestLevel else {
                throw HealthError.invalidArgument(
                    "a sound level of \(type.identifier) lies within ±\(Int(Self.largestLevel)) \(type.canonicalUnit), got \(sample.quantity)", field: "quantity")
            }
        } else if !(abs(canonical) <= Self.largestQuantity) {
            throw HealthError.invalidArgument(
                "quantity of \(type.identifier) must be at most 10¹² \(type.canonicalUnit) in size, got \(sample.quantity)", field: "quantity")
        }
        if type.aggregationStyle == .cumulative, canonical < 0 {
            throw HealthError.invalidArgument(
                "quantity of the cumulative type \(type.identifier) must not be negative (\(sample.quantity))", field: "quantity")
        }
        if canonical < 0, !signedUnits.contains(type.canonicalUnit) {
            throw HealthError.invalidArgument(
                "quantity of \(type.identifier) must not be negative (\(sample.quantity)); only temperatures and sound levels may be", field: "quantity")
        }
        if type.canonicalUnit == .percent, !(0...1).contains(canonical) {
            throw HealthError.invalidArgument(
                "\(type.identifier) is a fraction in 0…1 (97 % is 0.97), got \(sample.quantity)", field: "quantity")
        }
        if type.identifier == "HKQuantityTypeIdentifierInsulinDelivery",
            sample.metadata[MetadataKey.insulinDeliveryReason] == nil
        {
            throw HealthError.invalidArgument(
                "InsulinDelivery requires \(MetadataKey.insulinDeliveryReason) (basal 1, bolus 2)",
                field: "metadata.\(MetadataKey.insulinDeliveryReason)")
        }
        if !sample.series.isEmpty { try validateSeries(of: sample) }
    }

    /// 1–50,000 finite values, each valid as the sample's own quantity would be, over
    /// intervals within the sample's, in time order without overlap; the sample's quantity
    /// their sum or mean (to a relative 1e-9).
    private static func validateSeries(of sample: QuantitySample) throws {
        let series = sample.series
        guard series.count <= QuantitySample.maximumSeriesEntries else {
            throw HealthError.invalidArgument("series: a sample holds at most \(QuantitySample.maximumSeriesEntries) values, got \(series.count)", field: "series")
        }
        var previousEnd = sample.startDate
        for (index, entry) in series.enumerated() {
            let field = "series[\(index)]"
            guard entry.value.isFinite else { throw HealthError.invalidArgument("\(field).value must be a finite number, not \(entry.value)", field: field) }
            var single = sample
            single.quantity = Quantity(entry.value, sample.quantity.unit)
            single.series = []
            do { try validate(single) } catch let error as HealthError {
                throw HealthError.invalidArgument("\(field): \(error.message)", field: field)
            }
            guard entry.startDate <= entry.endDate else {
                throw HealthError.invalidArgument("\(field) ends before it starts", field: field)
            }
            guard entry.startDate >= previousEnd, entry.endDate <= sample.endDate else {
                throw HealthError.invalidArgument(
                    index == 0 || entry.endDate > sample.endDate
                        ? "\(field) lies outside the sample's interval" : "\(field) starts before series[\(index - 1)] ends (values in time order, without overlap)",
                    field: field)
            }
            previousEnd = entry.endDate
        }
        let expected = QuantitySample.aggregate(series, of: sample.type) ?? 0
        guard expected.isFinite else {
            throw HealthError.invalidArgument("series: the values' aggregate is not a finite number", field: "series")
        }
        guard abs(sample.quantity.value - expected) <= 1e-9 * max(1, abs(expected)) else {
            let what = switch sample.type.aggregationStyle {
            case .cumulative: "sum"
            case .discreteEquivalentContinuousLevel: "equivalent continuous level"
            case .discreteArithmetic, .discreteTemporallyWeighted: "mean"
            }
            throw HealthError.invalidArgument(
                "quantity must be the \(what) of the series' values, \(expected) \(sample.quantity.unit), not \(sample.quantity.value)", field: "quantity")
        }
    }

    private static func validate(_ sample: CategorySample) throws {
        guard sample.type.values.contains(sample.value) else {
            let allowed = sample.type.values.cases.map { "\($0.name) \($0.value)" }.joined(separator: ", ")
            throw HealthError.invalidArgument(
                "value \(sample.value) is not in \(sample.type.values.name) (\(allowed))", field: "value")
        }
    }

    /// The canonical units of the discrete types whose values may be negative: temperatures
    /// (water below freezing, the sleeping wrist temperature's deviation) and sound levels in
    /// decibels. Every other quantity is a size, count, rate or fraction.
    private static let signedUnits: Set<HealthUnit> = [try! HealthUnit("degC"), try! HealthUnit("dBASPL")]

    /// The largest size of a quantity in its type's canonical unit (a trillion steps, metres,
    /// joules, …): far above any measurement, and small enough that no statistic overflows.
    static let largestQuantity = 1e12
    /// The largest size of a sound level, in decibels: its sound energy 10^(L/10) stays
    /// within what averages over millions of values can add.
    static let largestLevel = 300.0

    private static let diopter = try! HealthUnit("D")
    private static let prismDiopter = try! HealthUnit("pD")
    private static let degree = try! HealthUnit("deg")
    private static let meter = try! HealthUnit("m")

    private static func validate(_ prescription: VisionPrescription) throws {
        guard prescription.description.utf8.count <= ObjectLimits.maximumStringLength else {
            throw HealthError.invalidArgument(
                "description is longer than \(ObjectLimits.maximumStringLength) bytes", field: "description")
        }
        guard prescription.rightEye != nil || prescription.leftEye != nil else {
            throw HealthError.invalidArgument(
                "a vision prescription needs a lens specification for at least one eye (rightEye or leftEye)", field: "rightEye")
        }
        if let lens = prescription.rightEye { try validate(lens, of: prescription.prescriptionType, field: "rightEye") }
        if let lens = prescription.leftEye { try validate(lens, of: prescription.prescriptionType, field: "leftEye") }
    }

    private static func validate(_ lens: LensSpecification, of type: VisionPrescriptionType, field eye: String) throws {
        let glassesOnly: [(String, Bool)] = [
            ("vertexDistance", lens.vertexDistance != nil), ("prism", lens.prism != nil),
            ("farPupillaryDistance", lens.farPupillaryDistance != nil), ("nearPupillaryDistance", lens.nearPupillaryDistance != nil),
        ]
        let contactsOnly: [(String, Bool)] = [("baseCurve", lens.baseCurve != nil), ("diameter", lens.diameter != nil)]
        let (foreign, kind) = type == .glasses ? (contactsOnly, "contact lenses") : (glassesOnly, "glasses")
        if let (name, _) = foreign.first(where: \.1) {
            throw HealthError.invalidArgument(
                "\(eye).\(name) applies only to \(kind), not to a \(type) prescription", field: "\(eye).\(name)")
        }
        let quantities: [(String, Quantity?, HealthUnit, String)] = [
            ("sphere", lens.sphere, diopter, "an optical power"), ("cylinder", lens.cylinder, diopter, "an optical power"),
            ("axis", lens.axis, degree, "an angle"), ("addPower", lens.addPower, diopter, "an optical power"),
            ("vertexDistance", lens.vertexDistance, meter, "a length"),
            ("prism.amount", lens.prism?.amount, prismDiopter, "a prism power"), ("prism.angle", lens.prism?.angle, degree, "an angle"),
            ("farPupillaryDistance", lens.farPupillaryDistance, meter, "a length"),
            ("nearPupillaryDistance", lens.nearPupillaryDistance, meter, "a length"),
            ("baseCurve", lens.baseCurve, meter, "a length"), ("diameter", lens.diameter, meter, "a length"),
        ]
        for case let (name, quantity?, unit, kind) in quantities {
            let field = "\(eye).\(name)"
            guard quantity.value.isFinite else {
                throw HealthError.invalidArgument("\(field) must be a finite number, not \(quantity.value)", field: field)
            }
            guard quantity.isCompatible(with: unit) else {
                throw HealthError.invalidArgument(
                    "\(field) is \(kind) (e.g. '\(unit)'); unit '\(quantity.unit)' is not compatible", field: "\(field).unit")
            }
        }
    }

    private static func validate(_ workout: Workout) throws {
        try validate(workout.configuration, field: "configuration")
        try validate(workout.events, start: workout.startDate, end: workout.endDate, field: "events")
        guard workout.activities.count <= ObjectLimits.maximumWorkoutActivities else {
            throw HealthError(.dataSizeExceeded, "a workout holds at most \(ObjectLimits.maximumWorkoutActivities) activities", field: "activities")
        }
        var previousEnd = workout.startDate
        var seen = Set<UUID>()
        for (index, activity) in workout.activities.enumerated() {
            let field = "activities[\(index)]"
            guard seen.insert(activity.uuid).inserted else {
                throw HealthError.invalidArgument("\(field): UUID \(activity.uuid) appears twice", field: "\(field).uuid")
            }
            try validateDates(start: activity.startDate, end: activity.endDate)
            guard activity.startDate >= previousEnd, activity.endDate <= workout.endDate else {
                throw HealthError.invalidArgument(
                    "\(field) must lie within the workout, after the activity before it (activities are ordered and never overlap)",
                    field: "\(field).startDate")
            }
            previousEnd = activity.endDate
            let type = activity.configuration.activityType
            if workout.activityType == .swimBikeRun {
                guard [.swimming, .cycling, .running, .transition].contains(type) else {
                    throw HealthError(
                        .workoutActivityNotAllowed, "a swimBikeRun workout's activities are swimming, cycling, running or transition, not \(type.name)",
                        field: "\(field).configuration.activityType")
                }
            } else if type != workout.activityType {
                throw HealthError(
                    .workoutActivityNotAllowed, "\(field) is \(type.name); an interval workout's activities share its type (\(workout.activityType.name))",
                    field: "\(field).configuration.activityType")
            }
            try validate(activity.configuration, field: "\(field).configuration")
            try validate(activity.events, start: activity.startDate, end: activity.endDate, field: "\(field).events")
            if !activity.metadata.isEmpty { try validate(activity.metadata) }
        }
    }

    private static func validate(_ configuration: WorkoutConfiguration, field: String) throws {
        guard let lapLength = configuration.lapLength else { return }
        guard configuration.activityType == .swimming, configuration.swimmingLocationType == .pool else {
            throw HealthError.invalidArgument("\(field).lapLength applies only to pool swims", field: "\(field).lapLength")
        }
        guard lapLength.isCompatible(with: meter), lapLength.value.isFinite, lapLength.value > 0 else {
            throw HealthError.invalidArgument("\(field).lapLength must be a positive length, got \(lapLength)", field: "\(field).lapLength")
        }
    }

    /// Events lie within [start, end]; only laps and segments last; pauses and resumes alternate,
    /// a pause first.
    private static func validate(_ events: [WorkoutEvent], start: Date, end: Date, field: String) throws {
        guard events.count <= ObjectLimits.maximumWorkoutEvents else {
            throw HealthError(.dataSizeExceeded, "\(field) holds at most \(ObjectLimits.maximumWorkoutEvents) events", field: field)
        }
        var paused = false
        for (index, event) in events.enumerated().sorted(by: { $0.element.startDate < $1.element.startDate }) {
            let name = "\(field)[\(index)]"
            guard event.startDate >= start, event.endDate <= end, event.endDate >= event.startDate else {
                throw HealthError.invalidArgument("\(name) (\(event.type)) must lie within the workout or activity", field: "\(name).startDate")
            }
            if !event.type.hasDuration, event.endDate != event.startDate {
                throw HealthError.invalidArgument("\(name): a \(event.type) event is an instant; only laps and segments last", field: "\(name).endDate")
            }
            switch event.type {
            case .pause:
                guard !paused else { throw HealthError.invalidArgument("\(name): a pause while already paused", field: "\(name).type") }
                paused = true
            case .resume:
                guard paused else {
                    throw HealthError.invalidArgument("\(name): a resume without a pause before it (the first pause/resume event is a pause)", field: "\(name).type")
                }
                paused = false
            default: break
            }
            if !event.metadata.isEmpty { try validate(event.metadata) }
        }
    }

    static func validateDates(start: Date, end: Date) throws {
        for (name, date) in [("startDate", start), ("endDate", end)] {
            guard date.timeIntervalSince1970.isFinite, ObjectLimits.dateRange.contains(date) else {
                throw HealthError.invalidArgument("\(name) must fall within years 0001–9999", field: name)
            }
        }
        guard end >= start else {
            throw HealthError.invalidArgument(
                "endDate (\(end.formatted(.iso8601))) is before startDate (\(start.formatted(.iso8601)))", field: "endDate")
        }
    }

    private static func validate(_ revision: SourceRevision) throws {
        guard !revision.source.bundleIdentifier.isEmpty else {
            throw HealthError.invalidArgument("the source's bundle identifier is empty", field: "sourceRevision.source.bundleIdentifier")
        }
        func check(_ value: String?, _ field: String) throws {
            if let value, value.utf8.count > ObjectLimits.maximumIdentifierLength {
                throw HealthError.invalidArgument("\(field) is longer than \(ObjectLimits.maximumIdentifierLength) bytes", field: field)
            }
        }
        try check(revision.source.bundleIdentifier, "sourceRevision.source.bundleIdentifier")
        try check(revision.source.name, "sourceRevision.source.name")
        try check(revision.version, "sourceRevision.version")
        try check(revision.productType, "sourceRevision.productType")
        try check(revision.operatingSystemVersion, "sourceRevision.operatingSystemVersion")
    }

    private static func validate(_ device: Device) throws {
        try device.forEachField { name, value in
            if let value, value.utf8.count > ObjectLimits.maximumIdentifierLength {
                throw HealthError.invalidArgument("device.\(name) is longer than \(ObjectLimits.maximumIdentifierLength) bytes", field: "device.\(name)")
            }
        }
    }

    static func validate(_ metadata: Metadata) throws {
        guard metadata.count <= ObjectLimits.maximumMetadataEntries else {
            throw HealthError.invalidArgument(
                "metadata has \(metadata.count) entries; at most \(ObjectLimits.maximumMetadataEntries) are allowed", field: "metadata")
        }
        for (key, value) in metadata {
            guard !key.isEmpty, key.utf8.count <= ObjectLimits.maximumKeyLength else {
                throw HealthError.invalidArgument("metadata keys must be 1–\(ObjectLimits.maximumKeyLength) bytes", field: "metadata")
            }
            // The field's name is only spelled out for an error.
            switch value {
            case .string(let string) where string.utf8.count > ObjectLimits.maximumStringLength:
                throw HealthError.invalidArgument("metadata.\(key) is longer than \(ObjectLimits.maximumStringLength) bytes", field: "metadata.\(key)")
            case .number(let number) where !number.isFinite:
                throw HealthError.invalidArgument("metadata.\(key) must be a finite number", field: "metadata.\(key)")
            case .date(let date) where !ObjectLimits.dateRange.contains(date):
                throw HealthError.invalidArgument("metadata.\(key) must fall within years 0001–9999", field: "metadata.\(key)")
            case .quantity(let quantity) where !quantity.value.isFinite:
                throw HealthError.invalidArgument("metadata.\(key) must be a finite quantity", field: "metadata.\(key)")
            default: break
            }
            if let rule = MetadataRule.rules[key] { try check(value, against: rule, key: key) }
        }
        try validateSyncPair(metadata)
    }

    private static func validateSyncPair(_ metadata: Metadata) throws {
        let identifier = metadata[MetadataKey.syncIdentifier]
        let version = metadata[MetadataKey.syncVersion]
        switch (identifier, version) {
        case (nil, nil): return
        case (.some, nil):
            throw HealthError.invalidArgument(
                "\(MetadataKey.syncIdentifier) requires \(MetadataKey.syncVersion)", field: "metadata.\(MetadataKey.syncVersion)")
        case (nil, .some):
            throw HealthError.invalidArgument(
                "\(MetadataKey.syncVersion) requires \(MetadataKey.syncIdentifier)", field: "metadata.\(MetadataKey.syncIdentifier)")
        case (.some(let identifier), .some(let version)):
            guard case .string(let string) = identifier, !string.isEmpty else {
                throw HealthError.invalidArgument(
                    "\(MetadataKey.syncIdentifier) must be a non-empty string", field: "metadata.\(MetadataKey.syncIdentifier)")
            }
            guard case .number(let number) = version, Int64(exactly: number) != nil else {
                throw HealthError.invalidArgument(
                    "\(MetadataKey.syncVersion) must be an integer, got \(version)", field: "metadata.\(MetadataKey.syncVersion)")
            }
        }
    }

    private static func check(_ value: MetadataValue, against rule: MetadataRule, key: String) throws {
        var field: String { "metadata.\(key)" }
        switch (rule, value) {
        case (.string, .string): return
        case (.enumeration(let allowed), .number(let number)):
            guard let integer = Int(exactly: number), allowed.contains(integer) else {
                throw HealthError.invalidArgument(
                    "\(field) must be one of \(allowed.sorted().map(String.init).joined(separator: ", ")), got \(value)",
                    field: field)
            }
        case (.boolean, .number(let number)):
            guard number == 0 || number == 1 else {
                throw HealthError.invalidArgument("\(field) must be a boolean (0 or 1), got \(value)", field: field)
            }
        case (.nonNegativeNumber, .number(let number)):
            guard number >= 0 else { throw HealthError.invalidArgument("\(field) must not be negative", field: field) }
        case (.quantity(let unit), .quantity(let quantity)):
            guard quantity.isCompatible(with: unit) else {
                throw HealthError.invalidArgument(
                    "\(field) must be a quantity compatible with '\(unit)', got '\(quantity.unit)'", field: field)
            }
        default:
            throw HealthError.invalidArgument("\(field) must be a \(rule.kindName), not a \(value.kindName)", field: field)
        }
    }
}

extension MetadataRule {
    var kindName: String {
        switch self {
        case .string: "string"
        case .enumeration, .boolean, .nonNegativeNumber: "number"
        case .quantity: "quantity"
        }
    }
}

extension WorkoutActivityType {
    /// The type with HealthKit's `rawValue`, for decoders.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field` for an unknown value.
    public init(validating rawValue: Int, field: String) throws {
        guard let type = WorkoutActivityType(rawValue: rawValue) else {
            throw HealthError.invalidArgument("\(field) \(rawValue) is not a workout activity type", field: field)
        }
        self = type
    }
}

extension WorkoutLocationType {
    /// unknown 1, indoor 2, outdoor 3 (0 reads as unknown), for decoders.
    public init(validating rawValue: Int, field: String) throws { self = rawValue == 0 ? .unknown : try enumerationCase(rawValue, field: field) }
}

extension SwimmingLocationType {
    /// unknown 0, pool 1, openWater 2, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension WorkoutEventType {
    /// pause 1 … pauseOrResumeRequest 8, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension Comparison {
    /// less 1 … notEqual 6, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension WorkoutStatistic {
    /// sum 1, average 2, minimum 3, maximum 4, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension StateOfMind.Kind {
    /// momentaryEmotion 1, dailyMood 2, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension StateOfMind.Label {
    /// The label of HealthKit's case name `name`, for decoders.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field` for an unknown name.
    public init(validating name: String, field: String) throws { self = try namedCase(name, field: field, kind: "a state of mind label") }
}

extension StateOfMind.Association {
    /// The association of HealthKit's case name `name`, for decoders.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field` for an unknown name.
    public init(validating name: String, field: String) throws { self = try namedCase(name, field: field, kind: "a state of mind association") }
}

extension MedicationDoseEvent.LogStatus {
    /// notInteracted 1 … notLogged 6, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension MedicationDoseEvent.ScheduleType {
    /// asNeeded 1, schedule 2, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension MedicationConcept.GeneralForm {
    /// The form of HealthKit's name `name`, for decoders.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field` for an unknown name.
    public init(validating name: String, field: String) throws { self = try namedCase(name, field: field, kind: "a medication form") }
}

extension ActivityMoveMode {
    /// activeEnergy 1, appleMoveTime 2 (notSet 0 is refused by validation), for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension ElectrocardiogramClassification {
    /// HealthKit's raw values (sinusRhythm 1 … inconclusiveOther 6, unrecognized 100), for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension ElectrocardiogramSymptomsStatus {
    /// notSet 0, none 1, present 2, for decoders.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension VisionPrescriptionType {
    /// The type with `rawValue` (glasses 1, contacts 2), for decoders.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field` for any other value.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension VisionEye {
    /// The eye with `rawValue` (left 1, right 2), for decoders.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field` for any other value.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

extension PrismBase {
    /// The base with `rawValue` (none 0, up 1, down 2, in 3, out 4), for decoders.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field` for any other value.
    public init(validating rawValue: Int, field: String) throws { self = try enumerationCase(rawValue, field: field) }
}

/// The case named `name` (HealthKit's case name), or ``HealthError`` `invalidArgument` naming
/// `field`, the name (its first 64 characters) as not `kind`, and every name there is.
func namedCase<Value: RawRepresentable & CaseIterable>(_ name: String, field: String, kind: String) throws -> Value where Value.RawValue == String {
    guard let value = Value(rawValue: name) else {
        let names = Value.allCases.map(\.rawValue).joined(separator: ", ")
        throw HealthError.invalidArgument("\(field) '\(name.prefix(64))' is not \(kind) (\(names))", field: field)
    }
    return value
}

func enumerationCase<Value: RawRepresentable & CaseIterable>(_ rawValue: Int, field: String) throws -> Value
where Value.RawValue == Int {
    guard let value = Value(rawValue: rawValue) else {
        let allowed = Value.allCases.map { "\($0) \($0.rawValue)" }.joined(separator: ", ")
        throw HealthError.invalidArgument("\(field) must be one of \(allowed), got \(rawValue)", field: field)
    }
    return value
}
