import Foundation

/// A fact about the owner that does not change over time (HealthKit's characteristic
/// types). Only the owner sets them; apps read them with read authorization.
public enum Characteristic: Sendable, Hashable {
    /// A calendar date (HealthKit returns date-of-birth components, not an instant).
    case dateOfBirth(year: Int, month: Int, day: Int)
    case biologicalSex(BiologicalSex)
    case bloodType(BloodType)
    case fitzpatrickSkinType(FitzpatrickSkinType)
    case wheelchairUse(WheelchairUse)
    case activityMoveMode(ActivityMoveMode)
    case cardioFitnessMedicationsUse(CardioFitnessMedicationsUse)

    public var objectType: ObjectType {
        switch self {
        case .dateOfBirth: .dateOfBirth
        case .biologicalSex: .biologicalSex
        case .bloodType: .bloodType
        case .fitzpatrickSkinType: .fitzpatrickSkinType
        case .wheelchairUse: .wheelchairUse
        case .activityMoveMode: .activityMoveMode
        case .cardioFitnessMedicationsUse: .cardioFitnessMedicationsUse
        }
    }

    /// The raw value of an enumerated characteristic (HealthKit's); nil for the date of birth.
    public var rawValue: Int? {
        switch self {
        case .dateOfBirth: nil
        case .biologicalSex(let value): value.rawValue
        case .bloodType(let value): value.rawValue
        case .fitzpatrickSkinType(let value): value.rawValue
        case .wheelchairUse(let value): value.rawValue
        case .activityMoveMode(let value): value.rawValue
        case .cardioFitnessMedicationsUse(let value): value.rawValue
        }
    }

    /// The enumerated characteristic of `type` with HealthKit's raw value `rawValue`.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` for a value outside the enumeration, the
    ///   date of birth (use ``dateOfBirth(year:month:day:)``), or a type that is no characteristic.
    public init(_ type: ObjectType, rawValue: Int) throws {
        func value<E: RawRepresentable<Int> & CaseIterable>(_: E.Type) throws -> E { try enumerationCase(rawValue, field: "value") }
        switch type {
        case .biologicalSex: self = .biologicalSex(try value(BiologicalSex.self))
        case .bloodType: self = .bloodType(try value(BloodType.self))
        case .fitzpatrickSkinType: self = .fitzpatrickSkinType(try value(FitzpatrickSkinType.self))
        case .wheelchairUse: self = .wheelchairUse(try value(WheelchairUse.self))
        case .activityMoveMode: self = .activityMoveMode(try value(ActivityMoveMode.self))
        case .cardioFitnessMedicationsUse:
            guard let value = CardioFitnessMedicationsUse(validating: rawValue) else {
                throw HealthError.invalidArgument(
                    "\(rawValue) is not a set of cardio fitness medications (calcium channel blocker 1, beta blocker 2, both 3; none 0)", field: "value")
            }
            self = .cardioFitnessMedicationsUse(value)
        case .dateOfBirth: throw HealthError.invalidArgument("the date of birth is a date, not a raw value", field: "value")
        default: throw HealthError.invalidArgument("\(type.identifier) is not a characteristic type", field: "type")
        }
    }

    /// Whether this is the "not set" value of its type (the date of birth has none: it is
    /// absent instead; cardio fitness medications' is none taken, as in HealthKit).
    public var isNotSet: Bool { rawValue == 0 }

    /// Checks the date of birth: a real calendar date, from 1850 to today.
    public func validate(today: Date = Date()) throws {
        guard case .dateOfBirth(let year, let month, let day) = self else { return }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let components = DateComponents(year: year, month: month, day: day)
        guard (1850...9999).contains(year), let date = calendar.date(from: components),
            calendar.dateComponents([.year, .month, .day], from: date) == components
        else {
            throw HealthError.invalidArgument("\(year)-\(month)-\(day) is not a date of birth (a calendar date from 1850)", field: "date_of_birth")
        }
        guard date <= today else { throw HealthError.invalidArgument("the date of birth \(year)-\(month)-\(day) is in the future", field: "date_of_birth") }
    }
}

/// HealthKit's `HKBiologicalSex`.
public enum BiologicalSex: Int, Sendable, Hashable, CaseIterable {
    case notSet = 0, female, male, other
}

/// HealthKit's `HKBloodType`.
public enum BloodType: Int, Sendable, Hashable, CaseIterable {
    case notSet = 0, aPositive, aNegative, bPositive, bNegative, abPositive, abNegative, oPositive, oNegative
}

/// HealthKit's `HKFitzpatrickSkinType`.
public enum FitzpatrickSkinType: Int, Sendable, Hashable, CaseIterable {
    case notSet = 0, I, II, III, IV, V, VI
}

/// HealthKit's `HKWheelchairUse`.
public enum WheelchairUse: Int, Sendable, Hashable, CaseIterable {
    case notSet = 0, no, yes
}

/// HealthKit's `HKActivityMoveMode` (0 is not one of HealthKit's values; it stands for "not set").
public enum ActivityMoveMode: Int, Sendable, Hashable, CaseIterable {
    case notSet = 0, activeEnergy, appleMoveTime
}

/// HealthKit's `HKCardioFitnessMedicationsUse`: the medications the person takes that limit
/// their heart rate, which cardio fitness estimates take into account. The empty set is
/// HealthKit's `none`, and stands for "not set" as well.
public struct CardioFitnessMedicationsUse: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Calcium channel blockers (raw value 1).
    public static let calciumChannelBlocker = CardioFitnessMedicationsUse(rawValue: 1 << 0)
    /// Beta blockers (raw value 2).
    public static let betaBlocker = CardioFitnessMedicationsUse(rawValue: 1 << 1)
    /// None taken (or not set): raw value 0.
    public static let none: CardioFitnessMedicationsUse = []

    /// Each medication with its name, in raw value order.
    public static let named: [(name: String, value: CardioFitnessMedicationsUse)] = [
        ("calciumChannelBlocker", .calciumChannelBlocker), ("betaBlocker", .betaBlocker),
    ]

    /// The set whose raw value is `rawValue`; nil when it holds bits HealthKit does not define.
    public init?(validating rawValue: Int) {
        guard rawValue >= 0, rawValue & ~3 == 0 else { return nil }
        self.rawValue = rawValue
    }

    /// `none`, or the names joined by `+` (`calciumChannelBlocker+betaBlocker`).
    public var description: String {
        isEmpty ? "none" : Self.named.filter { contains($0.value) }.map(\.name).joined(separator: "+")
    }
}

extension ObjectType {
    public static let dateOfBirth = ObjectType(identifier: "HKCharacteristicTypeIdentifierDateOfBirth", family: .characteristic)
    public static let biologicalSex = ObjectType(identifier: "HKCharacteristicTypeIdentifierBiologicalSex", family: .characteristic)
    public static let bloodType = ObjectType(identifier: "HKCharacteristicTypeIdentifierBloodType", family: .characteristic)
    public static let fitzpatrickSkinType = ObjectType(identifier: "HKCharacteristicTypeIdentifierFitzpatrickSkinType", family: .characteristic)
    public static let wheelchairUse = ObjectType(identifier: "HKCharacteristicTypeIdentifierWheelchairUse", family: .characteristic)
    public static let activityMoveMode = ObjectType(identifier: "HKCharacteristicTypeIdentifierActivityMoveMode", family: .characteristic)
    public static let cardioFitnessMedicationsUse = ObjectType(
        identifier: "HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse", family: .characteristic)
}
