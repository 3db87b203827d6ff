import Foundation
import HealthModel
import ZIPFoundation

/// Writes a realistic Apple Health `export.xml` of a given number of records, for benchmarks:
/// the mix of a person with an Apple Watch and a phone over the years (heart rate most of
/// all, then steps, energy, distance, sleep stages, some blood pressure and food
/// correlations and workouts), each record with its device and, for heart rate, metadata.
public struct SyntheticExport {
    public var records: Int
    public var seed: UInt64

    public init(records: Int, seed: UInt64 = 42) {
        self.records = records
        self.seed = seed
    }

    /// Writes the export to `url`: a zip holding `apple_health_export/export.xml`, as the
    /// Health app writes it, when the name ends in `.zip`; the XML itself otherwise.
    ///
    /// - Returns: the number of top-level elements written.
    @discardableResult
    public func write(to url: URL) throws -> Int {
        guard url.pathExtension.lowercased() == "zip" else { return try writeXML(to: url) }
        let xml = FileManager.default.temporaryDirectory.appending(path: "generated-export-\(UUID().uuidString).xml")
        defer { try? FileManager.default.removeItem(at: xml) }
        let count = try writeXML(to: xml)
        try? FileManager.default.removeItem(at: url)
        let archive: Archive
        do { archive = try Archive(url: url, accessMode: .create) } catch { throw ExportArchiveError("cannot create \(url.path): \(error)") }
        try archive.addEntry(with: "apple_health_export/export.xml", fileURL: xml, compressionMethod: .deflate)
        return count
    }

    private func writeXML(to url: URL) throws -> Int {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else { throw ExportArchiveError("cannot create \(url.path)") }
        let handle = try FileHandle(forWritingTo: url)
        let writer = XMLWriter(handle: handle)
        var random = SplitMix(seed: seed)
        try writer.write(AppleHealthWriter.prologue(exportDate: Date(timeIntervalSince1970: 1_750_000_000), locale: "en_GB"))
        try writer.write(AppleHealthWriter.me([.biologicalSex: .biologicalSex(.female), .dateOfBirth: .dateOfBirth(year: 1984, month: 3, day: 9)]))
        let watch = SourceRevision(source: Source.imported(named: "Alice’s Apple Watch"), version: "10.4")
        let phone = SourceRevision(source: Source.imported(named: "Alice’s iPhone"), version: "17.5")
        let watchDevice = Device(name: "Apple Watch", manufacturer: "Apple Inc.", model: "Watch", hardwareVersion: "Watch6,2", softwareVersion: "10.4")
        let phoneDevice = Device(name: "iPhone", manufacturer: "Apple Inc.", model: "iPhone", hardwareVersion: "iPhone15,2", softwareVersion: "17.5")
        let types = try [
            "HeartRate", "StepCount", "ActiveEnergyBurned", "BasalEnergyBurned", "DistanceWalkingRunning", "OxygenSaturation",
            "HeartRateVariabilitySDNN", "BodyMass", "RespiratoryRate", "BloodPressureSystolic", "BloodPressureDiastolic", "DietaryEnergyConsumed",
            "DietaryProtein",
        ].reduce(into: [String: QuantityType]()) { $0[$1] = try QuantityType("HKQuantityTypeIdentifier" + $1) }
        let units = try ["count/min", "count", "Cal", "km", "%", "ms", "kg", "mmHg", "g"].reduce(into: [String: HealthUnit]()) { $0[$1] = try HealthUnit($1) }
        let sleep = try CategoryType("HKCategoryTypeIdentifierSleepAnalysis")
        var time = Date(timeIntervalSince1970: 1_600_000_000)
        var written = 0
        while written < records {
            time += Double(20 + random.next() % 100)
            let roll = random.next() % 1000
            let object: HealthObject
            func quantity(_ type: String, _ value: Double, _ unit: String, span: Double, phone usePhone: Bool = false, metadata: Metadata = [:]) -> HealthObject {
                .quantitySample(QuantitySample(
                    type: types[type]!, quantity: Quantity(value, units[unit]!), start: time, end: time + span,
                    device: usePhone ? phoneDevice : watchDevice, metadata: metadata, sourceRevision: usePhone ? phone : watch))
            }
            switch roll {
            case 0..<450:
                object = quantity("HeartRate", Double(55 + random.next() % 90), "count/min", span: 0, metadata: ["HKMetadataKeyHeartRateMotionContext": .number(Double(random.next() % 3))])
            case 450..<600: object = quantity("StepCount", Double(10 + random.next() % 900), "count", span: 300, phone: roll % 2 == 0)
            case 600..<750: object = quantity("ActiveEnergyBurned", Double(random.next() % 5000) / 100, "Cal", span: 60)
            case 750..<850: object = quantity("BasalEnergyBurned", Double(random.next() % 3000) / 100, "Cal", span: 600)
            case 850..<930: object = quantity("DistanceWalkingRunning", Double(random.next() % 900) / 1000, "km", span: 300, phone: roll % 2 == 0)
            case 930..<950: object = quantity("OxygenSaturation", Double(93 + random.next() % 7) / 100, "%", span: 0)
            case 950..<965: object = quantity("HeartRateVariabilitySDNN", Double(20 + random.next() % 80), "ms", span: 60)
            case 965..<975: object = quantity("RespiratoryRate", Double(12 + random.next() % 8), "count/min", span: 0)
            case 975..<978: object = quantity("BodyMass", 60 + Double(random.next() % 200) / 10, "kg", span: 0, phone: true)
            case 978..<990:
                let stages = [0, 3, 4, 5, 2]
                object = .categorySample(CategorySample(
                    type: sleep, value: stages[Int(random.next() % 5)], start: time, end: time + 900, device: watchDevice, sourceRevision: watch))
            case 990..<995:
                let members = [
                    QuantitySample(type: types["BloodPressureSystolic"]!, quantity: Quantity(Double(105 + random.next() % 40), units["mmHg"]!), start: time, end: time, sourceRevision: phone),
                    QuantitySample(type: types["BloodPressureDiastolic"]!, quantity: Quantity(Double(65 + random.next() % 25), units["mmHg"]!), start: time, end: time, sourceRevision: phone),
                ]
                for member in members { try writer.write(AppleHealthWriter.element(.quantitySample(member))) }
                object = .correlation(Correlation(type: try CorrelationType("HKCorrelationTypeIdentifierBloodPressure"), start: time, end: time, objects: members, sourceRevision: phone))
                written += 2
            case 995..<998:
                let members = [
                    QuantitySample(type: types["DietaryEnergyConsumed"]!, quantity: Quantity(Double(50 + random.next() % 700), units["Cal"]!), start: time, end: time, sourceRevision: phone),
                    QuantitySample(type: types["DietaryProtein"]!, quantity: Quantity(Double(random.next() % 40), units["g"]!), start: time, end: time, sourceRevision: phone),
                ]
                for member in members { try writer.write(AppleHealthWriter.element(.quantitySample(member))) }
                object = .correlation(Correlation(
                    type: try CorrelationType("HKCorrelationTypeIdentifierFood"), start: time, end: time, objects: members,
                    metadata: [MetadataKey.foodType: .string("Meal \(random.next() % 50)")], sourceRevision: phone))
                written += 2
            default:
                let workout = Workout(
                    configuration: WorkoutConfiguration(activityType: [.running, .walking, .cycling][Int(random.next() % 3)], locationType: .outdoor),
                    start: time, end: time + 1800, device: watchDevice, sourceRevision: watch)
                try writer.write(AppleHealthWriter.workout(workout, statistics: WorkoutStatistics(workout: [:], activities: []), routes: []))
                written += 1
                continue
            }
            try writer.write(AppleHealthWriter.element(object))
            written += 1
        }
        try writer.write("</HealthData>\n")
        try writer.close()
        return written
    }
}

/// A small deterministic generator (SplitMix64), so a benchmark file is the same every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
