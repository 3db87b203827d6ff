import Foundation
import HealthModel
import Testing

@Suite("Object validation (docs/SEMANTICS.md §3–4)")
struct ValidationTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func quantity(_ type: String, _ value: Double, _ unit: String, start: Date? = nil, end: Date? = nil, metadata: Metadata = [:]) throws -> HealthObject {
        .quantitySample(QuantitySample(
            type: try QuantityType(type), quantity: try Quantity(value, unit), start: start ?? now, end: end ?? now, metadata: metadata))
    }

    func expectInvalid(_ object: HealthObject, field: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = #expect(throws: HealthError.self, sourceLocation: sourceLocation) { try object.validate() }
        #expect(error?.code == .invalidArgument, sourceLocation: sourceLocation)
        #expect(error?.field == field, "message: \(error?.message ?? "")", sourceLocation: sourceLocation)
    }

    @Test("a well-formed sample passes")
    func valid() throws {
        try quantity("HKQuantityTypeIdentifierHeartRate", 72, "count/min").validate()
        try quantity("HKQuantityTypeIdentifierOxygenSaturation", 0.97, "%").validate()
        try quantity("HKQuantityTypeIdentifierBloodGlucose", 5.5, "mmol<180.15588000005408>/L",
                     metadata: [MetadataKey.bloodGlucoseMealTime: .number(1)]).validate()
        try quantity("HKQuantityTypeIdentifierInsulinDelivery", 2, "IU", metadata: [MetadataKey.insulinDeliveryReason: .number(2)]).validate()
        try quantity("HKQuantityTypeIdentifierStepCount", 10, "count", end: now.addingTimeInterval(60),
                     metadata: [MetadataKey.syncIdentifier: .string("a"), MetadataKey.syncVersion: .number(3)]).validate()
        // End equal to start is allowed.
        try quantity("HKQuantityTypeIdentifierBodyMass", 70, "kg", start: now, end: now).validate()
    }

    @Test("end before start")
    func endBeforeStart() throws {
        expectInvalid(try quantity("HKQuantityTypeIdentifierHeartRate", 72, "count/min", start: now, end: now.addingTimeInterval(-1)), field: "endDate")
    }

    @Test("unit incompatible with the type")
    func incompatibleUnit() throws {
        expectInvalid(try quantity("HKQuantityTypeIdentifierHeartRate", 72, "kg"), field: "quantity.unit")
        expectInvalid(try quantity("HKQuantityTypeIdentifierStepCount", 72, "m"), field: "quantity.unit")
    }

    @Test("non-finite, negative (but for temperatures and sound levels), out-of-range percent values, and sizes no statistic could add")
    func badValues() throws {
        // At most 10¹² in the canonical unit (a sound level within ±300 dB), so that sums and
        // weighted averages stay finite.
        try quantity("HKQuantityTypeIdentifierStepCount", 1e12, "count").validate()
        expectInvalid(try quantity("HKQuantityTypeIdentifierStepCount", 1.000001e12, "count"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierHeartRate", 1e308, "count/min"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierDistanceWalkingRunning", 1e10, "km"), field: "quantity")
        try quantity("HKQuantityTypeIdentifierEnvironmentalAudioExposure", 300, "dBASPL").validate()
        expectInvalid(try quantity("HKQuantityTypeIdentifierEnvironmentalAudioExposure", 4000, "dBASPL"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierEnvironmentalAudioExposure", -4000, "dBASPL"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierHeartRate", .nan, "count/min"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierHeartRate", .infinity, "count/min"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierStepCount", -5, "count"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierBodyMass", -70, "kg"), field: "quantity")
        expectInvalid(try quantity("HKQuantityTypeIdentifierHeartRate", -1, "count/min"), field: "quantity")
        try quantity("HKQuantityTypeIdentifierAppleSleepingWristTemperature", -0.4, "degC").validate()
        try quantity("HKQuantityTypeIdentifierWaterTemperature", 28, "degF").validate()
        try quantity("HKQuantityTypeIdentifierEnvironmentalAudioExposure", -3, "dBASPL").validate()
        expectInvalid(try quantity("HKQuantityTypeIdentifierOxygenSaturation", 97, "%"), field: "quantity")
    }

    @Test("category value outside the enumeration")
    func categoryValue() throws {
        let sleep = try CategoryType("HKCategoryTypeIdentifierSleepAnalysis")
        try HealthObject.categorySample(CategorySample(type: sleep, value: 5, start: now, end: now)).validate()
        expectInvalid(.categorySample(CategorySample(type: sleep, value: 6, start: now, end: now)), field: "value")
        expectInvalid(.categorySample(CategorySample(type: sleep, value: -1, start: now, end: now)), field: "value")
    }

    @Test("insulin delivery needs its reason, basal 1 or bolus 2")
    func insulin() throws {
        let key = "metadata.\(MetadataKey.insulinDeliveryReason)"
        expectInvalid(try quantity("HKQuantityTypeIdentifierInsulinDelivery", 2, "IU"), field: key)
        expectInvalid(try quantity("HKQuantityTypeIdentifierInsulinDelivery", 2, "IU", metadata: [MetadataKey.insulinDeliveryReason: .number(3)]), field: key)
        expectInvalid(try quantity("HKQuantityTypeIdentifierInsulinDelivery", 2, "IU", metadata: [MetadataKey.insulinDeliveryReason: .string("bolus")]), field: key)
    }

    @Test("blood glucose meal time is preprandial 1 or postprandial 2")
    func mealTime() throws {
        let key = "metadata.\(MetadataKey.bloodGlucoseMealTime)"
        expectInvalid(try quantity("HKQuantityTypeIdentifierBloodGlucose", 90, "mg/dL", metadata: [MetadataKey.bloodGlucoseMealTime: .number(0)]), field: key)
        expectInvalid(try quantity("HKQuantityTypeIdentifierBloodGlucose", 90, "mg/dL", metadata: [MetadataKey.bloodGlucoseMealTime: .number(1.5)]), field: key)
    }

    @Test("sync identifier and version go together")
    func syncPair() throws {
        let type = "HKQuantityTypeIdentifierBodyMass"
        expectInvalid(try quantity(type, 70, "kg", metadata: [MetadataKey.syncIdentifier: .string("x")]), field: "metadata.\(MetadataKey.syncVersion)")
        expectInvalid(try quantity(type, 70, "kg", metadata: [MetadataKey.syncVersion: .number(1)]), field: "metadata.\(MetadataKey.syncIdentifier)")
        expectInvalid(try quantity(type, 70, "kg", metadata: [MetadataKey.syncIdentifier: .string("x"), MetadataKey.syncVersion: .number(1.5)]),
                      field: "metadata.\(MetadataKey.syncVersion)")
        expectInvalid(try quantity(type, 70, "kg", metadata: [MetadataKey.syncIdentifier: .number(1), MetadataKey.syncVersion: .number(1)]),
                      field: "metadata.\(MetadataKey.syncIdentifier)")
    }

    @Test("predefined keys check their value's kind")
    func predefinedKeys() throws {
        let type = "HKQuantityTypeIdentifierDistanceSwimming"
        expectInvalid(try quantity(type, 50, "m", metadata: [MetadataKey.lapLength: .quantity(try Quantity(25, "s"))]), field: "metadata.\(MetadataKey.lapLength)")
        expectInvalid(try quantity(type, 50, "m", metadata: [MetadataKey.wasUserEntered: .number(2)]), field: "metadata.\(MetadataKey.wasUserEntered)")
        expectInvalid(try quantity(type, 50, "m", metadata: [MetadataKey.timeZone: .number(2)]), field: "metadata.\(MetadataKey.timeZone)")
        try quantity(type, 50, "m", metadata: [MetadataKey.lapLength: .quantity(try Quantity(25, "yd")), "com.example.custom": .date(now)]).validate()
    }

    @Test("oversize metadata is refused")
    func oversize() throws {
        var metadata: Metadata = [:]
        for index in 0...ObjectLimits.maximumMetadataEntries { metadata["key\(index)"] = .number(Double(index)) }
        expectInvalid(try quantity("HKQuantityTypeIdentifierBodyMass", 70, "kg", metadata: metadata), field: "metadata")
        expectInvalid(try quantity("HKQuantityTypeIdentifierBodyMass", 70, "kg",
                                   metadata: ["note": .string(String(repeating: "x", count: ObjectLimits.maximumStringLength + 1))]),
                      field: "metadata.note")
    }

    @Test("every device and source revision string over 255 bytes is refused, naming its field; metadata values out of range name their key")
    func longIdentifiers() throws {
        let long = String(repeating: "x", count: ObjectLimits.maximumIdentifierLength + 1)
        let devicePaths: [(WritableKeyPath<Device, String?>, String)] = [
            (\.name, "name"), (\.manufacturer, "manufacturer"), (\.model, "model"), (\.hardwareVersion, "hardwareVersion"),
            (\.firmwareVersion, "firmwareVersion"), (\.softwareVersion, "softwareVersion"), (\.localIdentifier, "localIdentifier"),
            (\.udiDeviceIdentifier, "udiDeviceIdentifier"),
        ]
        for (path, name) in devicePaths {
            var device = Device(name: "Watch")
            device[keyPath: path] = long
            let sample = QuantitySample(type: try QuantityType("HKQuantityTypeIdentifierHeartRate"), quantity: try Quantity(60, "count/min"), start: now, end: now, device: device)
            expectInvalid(.quantitySample(sample), field: "device.\(name)")
        }
        let revisions: [(SourceRevision, String)] = [
            (SourceRevision(source: Source(bundleIdentifier: long, name: "a")), "sourceRevision.source.bundleIdentifier"),
            (SourceRevision(source: Source(bundleIdentifier: "a", name: long)), "sourceRevision.source.name"),
            (SourceRevision(source: Source(bundleIdentifier: "a", name: "a"), version: long), "sourceRevision.version"),
            (SourceRevision(source: Source(bundleIdentifier: "a", name: "a"), productType: long), "sourceRevision.productType"),
            (SourceRevision(source: Source(bundleIdentifier: "a", name: "a"), operatingSystemVersion: long), "sourceRevision.operatingSystemVersion"),
            (SourceRevision(source: Source(bundleIdentifier: "", name: "a")), "sourceRevision.source.bundleIdentifier"),
        ]
        for (revision, field) in revisions {
            let sample = QuantitySample(
                type: try QuantityType("HKQuantityTypeIdentifierHeartRate"), quantity: try Quantity(60, "count/min"), start: now, end: now,
                sourceRevision: revision)
            expectInvalid(.quantitySample(sample), field: field)
        }
        let type = "HKQuantityTypeIdentifierBodyMass"
        expectInvalid(try quantity(type, 70, "kg", metadata: ["n": .number(.nan)]), field: "metadata.n")
        expectInvalid(try quantity(type, 70, "kg", metadata: ["d": .date(Date(timeIntervalSince1970: 1e12))]), field: "metadata.d")
        expectInvalid(try quantity(type, 70, "kg", metadata: ["q": .quantity(try Quantity(.infinity, "kg"))]), field: "metadata.q")
    }
}
