/// How values of a quantity type combine over time (HealthKit's `HKQuantityAggregationStyle`).
public enum AggregationStyle: Int, Sendable, Hashable, CaseIterable {
    /// Values add up (steps, distance, energy).
    case cumulative = 0
    /// A plain mean of the sample values (body mass).
    case discreteArithmetic = 1
    /// A mean weighted by the time each value holds (heart rate).
    case discreteTemporallyWeighted = 2
    /// An equivalent continuous level, as for sound exposure in dBASPL.
    case discreteEquivalentContinuousLevel = 3

    /// Whether the style is one of the discrete styles.
    public var isDiscrete: Bool { self != .cumulative }
}

/// One catalogue entry for a quantity type.
public struct QuantityTypeDescriptor: Sendable, Hashable {
    /// HealthKit's identifier, e.g. `HKQuantityTypeIdentifierHeartRate`.
    public let identifier: String
    /// The canonical unit string, parsed by ``HealthUnit`` (e.g. `count/min`).
    public let canonicalUnit: String
    /// How values combine.
    public let aggregationStyle: AggregationStyle

    public init(_ identifier: String, unit canonicalUnit: String, _ aggregationStyle: AggregationStyle) {
        self.identifier = identifier
        self.canonicalUnit = canonicalUnit
        self.aggregationStyle = aggregationStyle
    }
}

/// A named enumeration of the values a category type accepts.
public struct CategoryValueSet: Sendable, Hashable {
    /// The enumeration's name, e.g. `HKCategoryValueSleepAnalysis`.
    public let name: String
    /// The cases by name and raw value, in declaration order. Aliases share a raw value.
    public let cases: [Case]

    public struct Case: Sendable, Hashable {
        public let name: String
        public let value: Int
        public init(_ name: String, _ value: Int) {
            self.name = name
            self.value = value
        }
    }

    public init(_ name: String, _ cases: [Case]) {
        self.name = name
        self.cases = cases
    }

    /// Whether `value` is one of the enumeration's raw values.
    public func contains(_ value: Int) -> Bool { cases.contains { $0.value == value } }

    /// The raw value for a case name (`asleepREM` → 5).
    public func value(named name: String) -> Int? { cases.first { $0.name == name }?.value }

    /// The first case name for a raw value.
    public func name(of value: Int) -> String? { cases.first { $0.value == value }?.name }
}

/// One catalogue entry for a category type.
public struct CategoryTypeDescriptor: Sendable, Hashable {
    /// HealthKit's identifier, e.g. `HKCategoryTypeIdentifierSleepAnalysis`.
    public let identifier: String
    /// The values the type accepts.
    public let values: CategoryValueSet

    public init(_ identifier: String, _ values: CategoryValueSet) {
        self.identifier = identifier
        self.values = values
    }
}
