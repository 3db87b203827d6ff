/// The family an object type belongs to.
public enum ObjectTypeFamily: String, Sendable, Hashable, CaseIterable {
    case characteristic, quantity, category, correlation, workout, workoutRoute, visionPrescription, activitySummary, audiogram, clinicalRecord, electrocardiogram,
        heartbeatSeries, stateOfMind, userAnnotatedMedication, medicationDoseEvent
}

/// Any type of data a ledger knows, identified by HealthKit's identifier string.
///
/// ```swift
/// let heartRate = try ObjectType("HKQuantityTypeIdentifierHeartRate")   // .quantity family
/// let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
/// try QuantityType("HKCategoryTypeIdentifierSleepAnalysis")              // throws: wrong family
/// ```
public struct ObjectType: Sendable, Hashable, CustomStringConvertible {
    public let identifier: String
    public let family: ObjectTypeFamily

    /// Looks up `identifier` in the catalogue.
    /// - Throws: ``HealthError`` (`invalidArgument`) for an unknown identifier.
    public init(_ identifier: String) throws {
        guard let family = TypeCatalogue.family(of: identifier) else {
            throw HealthError.invalidArgument("Unknown object type '\(identifier)'", field: "type")
        }
        self.identifier = identifier
        self.family = family
    }

    init(identifier: String, family: ObjectTypeFamily) {
        self.identifier = identifier
        self.family = family
    }

    /// A stable 32-bit code for index keys (FNV-1a of the identifier); unique across the catalogue.
    public var code: UInt32 { TypeCatalogue.code(of: identifier) }

    public var description: String { identifier }

    public static let workout = ObjectType(identifier: "HKWorkoutTypeIdentifier", family: .workout)
    public static let workoutRoute = ObjectType(identifier: "HKWorkoutRouteTypeIdentifier", family: .workoutRoute)
    public static let visionPrescription = ObjectType(identifier: "HKVisionPrescriptionTypeIdentifier", family: .visionPrescription)
}

/// A quantity type: canonical unit and aggregation style.
public struct QuantityType: Sendable, Hashable, CustomStringConvertible {
    public let identifier: String
    public let canonicalUnit: HealthUnit
    public let aggregationStyle: AggregationStyle

    /// - Throws: ``HealthError`` (`invalidArgument`) when `identifier` is not a quantity type.
    public init(_ identifier: String) throws {
        guard let descriptor = TypeCatalogue.quantityTypes[identifier] else {
            throw HealthError.invalidArgument(TypeCatalogue.wrongFamilyMessage(identifier, expected: .quantity), field: "type")
        }
        self.identifier = identifier
        self.canonicalUnit = descriptor.unit
        self.aggregationStyle = descriptor.descriptor.aggregationStyle
    }

    public var objectType: ObjectType { ObjectType(identifier: identifier, family: .quantity) }
    public var description: String { identifier }
}

/// A category type: the enumeration of values it accepts.
public struct CategoryType: Sendable, Hashable, CustomStringConvertible {
    public let identifier: String
    public let values: CategoryValueSet

    /// - Throws: ``HealthError`` (`invalidArgument`) when `identifier` is not a category type.
    public init(_ identifier: String) throws {
        guard let descriptor = TypeCatalogue.categoryTypes[identifier] else {
            throw HealthError.invalidArgument(TypeCatalogue.wrongFamilyMessage(identifier, expected: .category), field: "type")
        }
        self.identifier = identifier
        self.values = descriptor.values
    }

    public var objectType: ObjectType { ObjectType(identifier: identifier, family: .category) }
    public var description: String { identifier }
}

/// Lookup tables over the catalogue.
public enum TypeCatalogue {
    struct QuantityEntry: Sendable {
        let descriptor: QuantityTypeDescriptor
        let unit: HealthUnit
    }

    static let quantityTypes: [String: QuantityEntry] = Dictionary(
        uniqueKeysWithValues: QuantityTypeDescriptor.catalogue.map {
            // The catalogue's units are fixed strings checked by tests.
            ($0.identifier, QuantityEntry(descriptor: $0, unit: try! HealthUnit($0.canonicalUnit)))
        })

    static let categoryTypes: [String: CategoryTypeDescriptor] = Dictionary(
        uniqueKeysWithValues: CategoryTypeDescriptor.catalogue.map { ($0.identifier, $0) })

    /// Characteristic types (read-only facts about the owner).
    public static let characteristicTypes: [String] = [
        "HKCharacteristicTypeIdentifierDateOfBirth",
        "HKCharacteristicTypeIdentifierBiologicalSex",
        "HKCharacteristicTypeIdentifierBloodType",
        "HKCharacteristicTypeIdentifierFitzpatrickSkinType",
        "HKCharacteristicTypeIdentifierWheelchairUse",
        "HKCharacteristicTypeIdentifierActivityMoveMode",
        "HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse",
    ]

    /// Correlation types and the member types each accepts.
    public static let correlationTypes: [String: Set<String>] = [
        "HKCorrelationTypeIdentifierBloodPressure": [
            "HKQuantityTypeIdentifierBloodPressureSystolic", "HKQuantityTypeIdentifierBloodPressureDiastolic",
        ],
        "HKCorrelationTypeIdentifierFood": Set(
            QuantityTypeDescriptor.catalogue.map(\.identifier).filter { $0.hasPrefix("HKQuantityTypeIdentifierDietary") }),
    ]

    static let singletons: [String: ObjectTypeFamily] = [
        ObjectType.workout.identifier: .workout,
        ObjectType.workoutRoute.identifier: .workoutRoute,
        ObjectType.visionPrescription.identifier: .visionPrescription,
        ObjectType.activitySummary.identifier: .activitySummary,
        ObjectType.audiogram.identifier: .audiogram,
        ObjectType.electrocardiogram.identifier: .electrocardiogram,
        ObjectType.heartbeatSeries.identifier: .heartbeatSeries,
        ObjectType.stateOfMind.identifier: .stateOfMind,
        ObjectType.userAnnotatedMedication.identifier: .userAnnotatedMedication,
        ObjectType.medicationDoseEvent.identifier: .medicationDoseEvent,
    ]

    /// The family of `identifier`, or nil if the catalogue does not know it.
    /// Every type a correlation may hold as a member.
    public static let correlationMemberTypes: Set<String> = correlationTypes.values.reduce(into: []) { $0.formUnion($1) }

    public static func family(of identifier: String) -> ObjectTypeFamily? {
        if quantityTypes[identifier] != nil { return .quantity }
        if categoryTypes[identifier] != nil { return .category }
        if correlationTypes[identifier] != nil { return .correlation }
        if characteristicTypes.contains(identifier) { return .characteristic }
        if clinicalTypes.contains(identifier) { return .clinicalRecord }
        return singletons[identifier]
    }

    /// Every identifier the catalogue knows.
    public static var allIdentifiers: [String] {
        QuantityTypeDescriptor.catalogue.map(\.identifier) + CategoryTypeDescriptor.catalogue.map(\.identifier)
            + correlationTypes.keys.sorted() + characteristicTypes + clinicalTypes + singletons.keys.sorted()
    }

    /// FNV-1a, 32 bits, of the identifier's UTF-8 bytes.
    public static func code(of identifier: String) -> UInt32 {
        var hash: UInt32 = 0x811c_9dc5
        for byte in identifier.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }

    static func wrongFamilyMessage(_ identifier: String, expected: ObjectTypeFamily) -> String {
        if let family = family(of: identifier) {
            return "'\(identifier)' is a \(family.rawValue) type, not a \(expected.rawValue) type"
        }
        return "Unknown \(expected.rawValue) type '\(identifier)'"
    }
}

extension TypeCatalogue {
    /// Identifiers by their ``code(of:)``.
    public static let identifiersByCode: [UInt32: String] = Dictionary(
        allIdentifiers.map { (code(of: $0), $0) }, uniquingKeysWith: { first, _ in first })
}
