/// A value with a unit (HealthKit's `HKQuantity`).
///
/// ```swift
/// let weight = try Quantity(150, "lb")
/// try weight.doubleValue(for: HealthUnit("kg"))   // 68.0388
/// ```
public struct Quantity: Sendable, Hashable, CustomStringConvertible {
    public var value: Double
    public var unit: HealthUnit

    public init(_ value: Double, _ unit: HealthUnit) {
        self.value = value
        self.unit = unit
    }

    /// - Throws: ``HealthError`` when `unit` does not parse.
    public init(_ value: Double, _ unit: String) throws {
        self.init(value, try HealthUnit(unit))
    }

    /// The value expressed in `unit`.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming both units when incompatible.
    public func doubleValue(for unit: HealthUnit) throws -> Double {
        try self.unit.convert(value, to: unit)
    }

    public func isCompatible(with unit: HealthUnit) -> Bool { self.unit.isCompatible(with: unit) }

    /// Orders two quantities of compatible units; nil when incompatible.
    public func compare(_ other: Quantity) -> ComparisonResult? {
        guard let otherValue = try? other.doubleValue(for: unit) else { return nil }
        return value < otherValue ? .orderedAscending : value > otherValue ? .orderedDescending : .orderedSame
    }

    public var description: String { "\(value) \(unit)" }
}

/// The outcome of comparing two values.
public enum ComparisonResult: Sendable, Hashable {
    case orderedAscending, orderedSame, orderedDescending
}
