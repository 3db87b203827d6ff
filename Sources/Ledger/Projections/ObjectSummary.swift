import Foundation
import HealthModel
import LedgerSchema

/// What the projections need to know of an object, taken from its schema form.
struct ObjectSummary: Sendable {
    var uuid: [UInt8]
    var type: String
    var typeCode: UInt32
    var startUs: Int64
    var endUs: Int64
    var sourceBundle: String
    var sourceName: String
    var syncIdentifier: String?
    var syncVersion: Int64?
    /// Quantity in the type's canonical unit, the category value, or 0 (other objects).
    var value: Double
    /// A route's workout.
    var workout: [UInt8]?
    /// A correlation's members (as the log stores them), saved just before it.
    var members: [[UInt8]] = []
    /// A quantity series sample (one with values of its own).
    var isSeries = false

    init(_ object: Healthledger_V1_HealthObject, units: SummaryCache) throws {
        uuid = Array(object.uuid)
        type = object.type
        typeCode = units.typeCode(of: object.type)
        startUs = object.startUs
        endUs = object.endUs
        sourceBundle = object.sourceRevision.source.bundleIdentifier
        sourceName = object.sourceRevision.source.name
        for entry in object.metadata {
            switch (entry.key, entry.value) {
            case (MetadataKey.syncIdentifier, .stringValue(let identifier)): syncIdentifier = identifier
            case (MetadataKey.syncVersion, .numberValue(let number)): syncVersion = Int64(exactly: number)
            default: break
            }
        }
        switch object.body {
        case .quantity(let body):
            value = try units.canonicalValue(body.quantity.value, unit: body.quantity.unit, type: object.type)
            isSeries = !body.series.isEmpty
        case .category(let body): value = Double(body.value)
        case .workoutRoute(let body): value = 0; workout = body.workoutUuid.count == 16 ? Array(body.workoutUuid) : nil
        case .correlation(let body): value = 0; members = body.memberUuids.map { Array($0) }
        case .visionPrescription, .workout, .activitySummary, .audiogram, .clinicalRecord, .electrocardiogram, .heartbeatSeries, .stateOfMind, .userAnnotatedMedication,
            .medicationDoseEvent, nil:
            value = 0
        }
    }

    /// The same summary, taken from the model object before it is encoded (the live write
    /// path). Every field is derived exactly as from the schema form, so live projections
    /// and replayed ones agree byte for byte.
    init(_ object: HealthObject, units: SummaryCache) throws {
        switch object {
        case .quantitySample(let sample):
            // Through the unit's printed form, as replay sees it in the log.
            let value = try units.canonicalValue(sample.quantity.value, unit: sample.quantity.unit.description, type: sample.type.identifier)
            self.init(sample, value: value, units: units)
            isSeries = !sample.series.isEmpty
        case .categorySample(let sample):
            self.init(sample, value: Double(Int64(sample.value)), units: units)
        case .visionPrescription(let prescription):
            self.init(prescription, value: 0, units: units)
        case .workout(let workout):
            self.init(workout, value: 0, units: units)
        case .workoutRoute(let route):
            self.init(route, value: 0, units: units)
            workout = route.workoutUUID.bytes
        case .correlation(let correlation):
            self.init(correlation, value: 0, units: units)
            members = correlation.objects.map(\.uuid.bytes)
        case .activitySummary(let summary):
            self.init(summary, value: 0, units: units)
        case .audiogram(let audiogram):
            self.init(audiogram, value: 0, units: units)
        case .clinicalRecord(let record):
            self.init(record, value: 0, units: units)
        case .electrocardiogram(let recording):
            self.init(recording, value: 0, units: units)
        case .heartbeatSeries(let series):
            self.init(series, value: 0, units: units)
        case .stateOfMind(let state):
            self.init(state, value: 0, units: units)
        case .userAnnotatedMedication(let medication):
            self.init(medication, value: 0, units: units)
        case .medicationDoseEvent(let dose):
            self.init(dose, value: 0, units: units)
        }
    }

    private init(_ sample: some HealthSample, value: Double, units: SummaryCache) {
        uuid = withUnsafeBytes(of: sample.uuid.uuid) { Array($0) }
        type = sample.objectType.identifier
        typeCode = units.typeCode(of: type)
        startUs = microseconds(sample.startDate)
        endUs = microseconds(sample.endDate)
        sourceBundle = sample.sourceRevision.source.bundleIdentifier
        sourceName = sample.sourceRevision.source.name
        if case .string(let identifier)? = sample.metadata[MetadataKey.syncIdentifier] { syncIdentifier = identifier }
        if case .number(let number)? = sample.metadata[MetadataKey.syncVersion] { syncVersion = Int64(exactly: number) }
        self.value = value
    }

    /// The same summary, read straight from a serialized `HealthObject` (replay's hot path).
    init(encoded bytes: UnsafeRawBufferPointer, units: SummaryCache) throws {
        var reader = ProtoReader(bytes)
        uuid = []
        type = ""
        startUs = 0
        endUs = 0
        sourceBundle = ""
        sourceName = ""
        value = 0
        var quantity: (value: Double, unit: String)?
        while let (field, wireType) = try reader.next() {
            switch (HealthObjectField(rawValue: field), wireType) {
            case (.uuid, .lengthDelimited): uuid = Array(try reader.bytes())
            case (.type, .lengthDelimited): type = units.types.value(for: try reader.bytes(), Self.string)
            case (.sourceRevision, .lengthDelimited):
                var revision = ProtoReader(try reader.bytes())
                while let (field, wireType) = try revision.next() {
                    guard field == SourceRevisionField.source.rawValue, wireType == .lengthDelimited else { try revision.skip(wireType); continue }
                    var source = ProtoReader(try revision.bytes())
                    while let (field, wireType) = try source.next() {
                        switch (SourceField(rawValue: field), wireType) {
                        case (.bundleIdentifier, .lengthDelimited): sourceBundle = units.bundles.value(for: try source.bytes(), Self.string)
                        case (.name, .lengthDelimited): sourceName = units.names.value(for: try source.bytes(), Self.string)
                        default: try source.skip(wireType)
                        }
                    }
                }
            case (.metadata, .lengthDelimited):
                var entry = ProtoReader(try reader.bytes())
                var key = ""
                var string: String?
                var number: Double?
                while let (field, wireType) = try entry.next() {
                    switch (MetadataEntryField(rawValue: field), wireType) {
                    case (.key, .lengthDelimited): key = try entry.string()
                    case (.stringValue, .lengthDelimited): string = try entry.string(); number = nil
                    case (.numberValue, .fixed64): number = try entry.double(); string = nil
                    default: try entry.skip(wireType); string = nil; number = nil
                    }
                }
                if key == MetadataKey.syncIdentifier, let string { syncIdentifier = string }
                if key == MetadataKey.syncVersion, let number { syncVersion = Int64(exactly: number) }
            case (.startUs, .varint): startUs = try reader.signed()
            case (.endUs, .varint): endUs = try reader.signed()
            case (.quantity, .lengthDelimited):
                var body = ProtoReader(try reader.bytes())
                var current = quantity ?? (0, "")
                while let (field, wireType) = try body.next() {
                    if field == QuantitySampleBodyField.series.rawValue, wireType == .lengthDelimited { isSeries = true }
                    guard field == QuantitySampleBodyField.quantity.rawValue, wireType == .lengthDelimited else { try body.skip(wireType); continue }
                    var message = ProtoReader(try body.bytes())
                    while let (field, wireType) = try message.next() {
                        switch (QuantityField(rawValue: field), wireType) {
                        case (.value, .fixed64): current.value = try message.double()
                        case (.unit, .lengthDelimited): current.unit = try message.string()
                        default: try message.skip(wireType)
                        }
                    }
                }
                quantity = current
            case (.category, .lengthDelimited):
                var body = ProtoReader(try reader.bytes())
                var category: Int64 = 0
                while let (field, wireType) = try body.next() {
                    if field == CategorySampleBodyField.value.rawValue, wireType == .varint { category = try body.signed() } else { try body.skip(wireType) }
                }
                quantity = nil
                value = Double(category)
            case (.visionPrescription, .lengthDelimited), (.workout, .lengthDelimited), (.activitySummary, .lengthDelimited),
                (.audiogram, .lengthDelimited), (.clinicalRecord, .lengthDelimited), (.electrocardiogram, .lengthDelimited),
                (.heartbeatSeries, .lengthDelimited), (.stateOfMind, .lengthDelimited),
                (.userAnnotatedMedication, .lengthDelimited), (.medicationDoseEvent, .lengthDelimited):
                try reader.skip(wireType)
                quantity = nil
                value = 0
            case (.workoutRoute, .lengthDelimited):
                quantity = nil
                value = 0
                workout = try ProtoReader.field(WorkoutRouteBodyField.workoutUuid, in: try reader.bytes()).flatMap { $0.count == 16 ? Array($0) : nil }
            case (.correlation, .lengthDelimited):
                quantity = nil
                value = 0
                members = []
                var body = ProtoReader(try reader.bytes())
                while let (field, wireType) = try body.next() {
                    if field == CorrelationBodyField.memberUuids.rawValue, wireType == .lengthDelimited { members.append(Array(try body.bytes())) } else { try body.skip(wireType) }
                }
            default: try reader.skip(wireType)
            }
        }
        typeCode = units.typeCode(of: type)
        if let quantity { value = try units.canonicalValue(quantity.value, unit: quantity.unit, type: type) }
    }

    var duration: Int64 { endUs &- startUs }

    /// A string field's bytes as ``ProtoReader/string()`` reads them (invalid UTF-8 repaired).
    private static func string(_ raw: UnsafeRawBufferPointer) -> String {
        String(decoding: raw.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    }
}

/// What making summaries reuses: parsed units by (unit string, type), for converting values
/// to canonical units, and what the object before gave. Replay reads thousands of objects of
/// one type and source in a row, and making their strings, type codes and conversions again
/// for each would cost an allocation and a hash lookup apiece.
///
/// Not thread-safe: each writer or replay owns its own.
final class SummaryCache {
    private struct Key: Hashable {
        var unit: String
        var type: String
    }

    private var conversions: [Key: (HealthUnit, HealthUnit)] = [:]
    private var lastConversion: (key: Key, pair: (HealthUnit, HealthUnit))?
    private var lastTypeCode: (type: String, code: UInt32)?
    /// The strings last read for a summary's type, source bundle and source name.
    var types = Reuse<String>()
    var bundles = Reuse<String>()
    var names = Reuse<String>()

    func canonicalValue(_ value: Double, unit: String, type: String) throws -> Double {
        let key = Key(unit: unit, type: type)
        if let last = lastConversion, last.key == key { return try last.pair.0.convert(value, to: last.pair.1) }
        let pair: (HealthUnit, HealthUnit)
        if let known = conversions[key] {
            pair = known
        } else {
            pair = (try HealthUnit(unit), try QuantityType(type).canonicalUnit)
            conversions[key] = pair
        }
        lastConversion = (key, pair)
        return try pair.0.convert(value, to: pair.1)
    }

    /// ``TypeCatalogue/code(of:)``, remembered for the last type asked.
    func typeCode(of type: String) -> UInt32 {
        if let last = lastTypeCode, last.type == type { return last.code }
        let code = TypeCatalogue.code(of: type)
        lastTypeCode = (type, code)
        return code
    }
}
