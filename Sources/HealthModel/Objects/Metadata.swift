import Foundation

/// A metadata value: string, number, date or quantity.
public enum MetadataValue: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case number(Double)
    case date(Date)
    case quantity(Quantity)

    public var description: String {
        switch self {
        case .string(let value): return "\"\(value)\""
        case .number(let value): return "\(value)"
        case .date(let value): return value.formatted(.iso8601)
        case .quantity(let value): return value.description
        }
    }

    var kindName: String {
        switch self {
        case .string: "string"
        case .number: "number"
        case .date: "date"
        case .quantity: "quantity"
        }
    }
}

/// Metadata: string keys to values. HealthKit's predefined keys are in ``MetadataKey``.
public typealias Metadata = [String: MetadataValue]

/// HealthKit's predefined metadata keys.
public enum MetadataKey {
    public static let syncIdentifier = "HKMetadataKeySyncIdentifier"
    public static let syncVersion = "HKMetadataKeySyncVersion"
    public static let insulinDeliveryReason = "HKMetadataKeyInsulinDeliveryReason"
    public static let bloodGlucoseMealTime = "HKMetadataKeyBloodGlucoseMealTime"
    public static let swimmingStrokeStyle = "HKMetadataKeySwimmingStrokeStyle"
    public static let swimmingLocationType = "HKMetadataKeySwimmingLocationType"
    public static let lapLength = "HKMetadataKeyLapLength"
    public static let indoorWorkout = "HKMetadataKeyIndoorWorkout"
    public static let heartRateRecoveryTestType = "HKMetadataKeyHeartRateRecoveryTestType"
    public static let heartRateRecoveryActivityType = "HKMetadataKeyHeartRateRecoveryActivityType"
    public static let heartRateRecoveryActivityDuration = "HKMetadataKeyHeartRateRecoveryActivityDuration"
    public static let heartRateRecoveryMaxObservedRecoveryHeartRate = "HKMetadataKeyHeartRateRecoveryMaxObservedRecoveryHeartRate"
    public static let foodType = "HKMetadataKeyFoodType"
    public static let wasUserEntered = "HKMetadataKeyWasUserEntered"
    public static let timeZone = "HKMetadataKeyTimeZone"
    public static let heartRateMotionContext = "HKMetadataKeyHeartRateMotionContext"
    public static let deviceName = "HKMetadataKeyDeviceName"
    public static let externalUUID = "HKMetadataKeyExternalUUID"

    /// The keys above that the ledger checks (``MetadataRule``), by their symbol names.
    public static let predefined: Set<String> = Set(MetadataRule.rules.keys).union([timeZone, deviceName, externalUUID])

    /// The ledger's name of a key as HealthKit stores it: most predefined keys' values drop
    /// "MetadataKey" (`HKMetadataKeyIndoorWorkout` is the string `HKIndoorWorkout`, which is
    /// what an Apple Health export writes). Other keys are returned as they are.
    public static func named(storedAs key: String) -> String {
        guard key.hasPrefix("HK"), !key.hasPrefix("HKMetadataKey") else { return key }
        let name = "HKMetadataKey" + key.dropFirst(2)
        return predefined.contains(name) ? name : key
    }

    /// The inverse of ``named(storedAs:)``: the string HealthKit stores for a key.
    public static func storedName(of key: String) -> String {
        guard key.hasPrefix("HKMetadataKey"), predefined.contains(key), !keptWhole.contains(key) else { return key }
        return "HK" + key.dropFirst("HKMetadataKey".count)
    }

    /// Keys whose stored string is their symbol name.
    static let keptWhole: Set<String> = [syncIdentifier, syncVersion, heartRateMotionContext]
}

/// The rule a predefined key's value must follow.
enum MetadataRule {
    case string
    /// An integer number from the given set.
    case enumeration(Set<Int>)
    /// A boolean stored as a number (0 or 1).
    case boolean
    case nonNegativeNumber
    /// A quantity compatible with the unit.
    case quantity(HealthUnit)

    static let rules: [String: MetadataRule] = [
        MetadataKey.syncIdentifier: .string,
        MetadataKey.insulinDeliveryReason: .enumeration([1, 2]),
        MetadataKey.bloodGlucoseMealTime: .enumeration([1, 2]),
        // unknown 0, mixed 1, freestyle 2, backstroke 3, breaststroke 4, butterfly 5, kickboard 6
        MetadataKey.swimmingStrokeStyle: .enumeration(Set(0...6)),
        // unknown 0, pool 1, openWater 2
        MetadataKey.swimmingLocationType: .enumeration([0, 1, 2]),
        MetadataKey.lapLength: .quantity(try! HealthUnit("m")),
        MetadataKey.indoorWorkout: .boolean,
        // maxExercise 1, predictionSubMaxExercise 2, predictionNonExercise 3
        MetadataKey.heartRateRecoveryTestType: .enumeration([1, 2, 3]),
        MetadataKey.heartRateRecoveryActivityType: .enumeration(Set(WorkoutActivityType.allCases.map(\.rawValue))),
        MetadataKey.heartRateRecoveryActivityDuration: .quantity(try! HealthUnit("s")),
        MetadataKey.heartRateRecoveryMaxObservedRecoveryHeartRate: .quantity(try! HealthUnit("count/min")),
        MetadataKey.foodType: .string,
        MetadataKey.wasUserEntered: .boolean,
        MetadataKey.timeZone: .string,
        // notSet 0, sedentary 1, active 2
        MetadataKey.heartRateMotionContext: .enumeration([0, 1, 2]),
        MetadataKey.deviceName: .string,
        MetadataKey.externalUUID: .string,
    ]
}
