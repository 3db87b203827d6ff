import Synchronization

/// A unit of measure in HealthKit's unit grammar (`HKUnit`).
///
/// Units are parsed from strings such as `kg`, `count/min`, `mmol<180.15588000005408>/L`
/// or `ml/(kg*min)`, compared by dimension, and used to convert values with HealthKit's
/// own factors.
///
/// ```swift
/// let pounds = try HealthUnit("lb")
/// let kilograms = try HealthUnit("kg")
/// try pounds.convert(150, to: kilograms)   // 68.0388
/// pounds.isCompatible(with: try HealthUnit("m"))   // false
/// ```
///
/// Grammar: factors joined by `.` or `*`, each an optionally SI-prefixed symbol with an
/// optional integer power (`s^-2`); at most one `/`, whose right side is all denominator
/// (`kg/m.s^2` is kg/(m·s²)); parentheses group a product (`ml/(kg*min)`). The affine
/// temperatures `degC` and `degF` stand only alone.
public struct HealthUnit: Sendable, Hashable, CustomStringConvertible {
    /// One factor of a unit: an optionally prefixed symbol raised to a power.
    struct Factor: Sendable {
        var prefix: String
        var symbol: String
        /// For `mol<M>`: grams per mole.
        var molarMass: Double?
        var exponent: Int

        var spelling: String {
            var text = prefix + symbol
            if let molarMass { text += "<\(molarMass)>" }
            return text
        }

        /// Key under which equal atoms combine (molar masses compared to 9 significant digits).
        var identity: String {
            var key = prefix + (UnitSymbols.table[symbol]?.canonical ?? symbol)
            if let molarMass { key += "<\(Self.rounded(molarMass))>" }
            return key
        }

        static func rounded(_ value: Double) -> Double {
            guard value != 0, value.isFinite else { return value }
            let magnitude = (value.magnitude).exponent
            let scale = Double(sign: .plus, exponent: 30 - magnitude, significand: 1)
            return (value * scale).rounded() / scale
        }
    }

    /// A unit's parts, shared: a unit (and every quantity in it) is one reference to copy.
    private final class Storage: Sendable {
        let factors: [Factor]
        let scale: Double
        let offset: Double
        let dimension: Dimension
        let signature: [String]
        let canonical: String

        init(factors: [Factor], scale: Double, offset: Double, dimension: Dimension, signature: [String], canonical: String) {
            self.factors = factors
            self.scale = scale
            self.offset = offset
            self.dimension = dimension
            self.signature = signature
            self.canonical = canonical
        }
    }

    private let storage: Storage

    var factors: [Factor] { storage.factors }
    /// Multiply a value in this unit by `scale` (and add `offset`) to get base units.
    var scale: Double { storage.scale }
    var offset: Double { storage.offset }
    var dimension: Dimension { storage.dimension }
    /// The factors in a canonical order, for equality and hashing.
    private var signature: [String] { storage.signature }
    /// The canonical string (see ``description``).
    private var canonical: String { storage.canonical }

    /// Parses a unit string.
    ///
    /// - Throws: ``HealthError`` with code ``HealthError/Code/invalidArgument`` naming the
    ///   string and what in it could not be understood.
    public init(_ string: String) throws {
        if let known = Self.parsed.withLock({ $0[string] }) {
            self = known
            return
        }
        var parser = UnitParser(text: string)
        let factors = try parser.parse()
        try self.init(factors: factors, source: string)
        let unit = self
        Self.parsed.withLock { parsed in
            if parsed.count < Self.parsedLimit, string.utf8.count <= 64 { parsed[string] = unit }
        }
    }

    /// Units already parsed, by their string: a ledger holds a handful of distinct units, and
    /// decoding a batch of samples would otherwise parse the same string once per sample.
    private static let parsed = Mutex<[String: HealthUnit]>([:])
    private static let parsedLimit = 4096

    init(factors raw: [Factor], source: String) throws {
        // Combine repeated atoms (`m.m` → `m^2`), keep first-appearance order, drop zero powers.
        var combined: [Factor] = []
        for factor in raw {
            if let index = combined.firstIndex(where: { $0.identity == factor.identity }) {
                combined[index].exponent += factor.exponent
            } else {
                var normalized = factor
                normalized.symbol = UnitSymbols.table[factor.symbol]?.canonical ?? factor.symbol
                combined.append(normalized)
            }
        }
        combined.removeAll { $0.exponent == 0 }
        if combined.isEmpty {
            // Everything cancelled (`m/m`): a plain count.
            combined = [Factor(prefix: "", symbol: "count", molarMass: nil, exponent: 1)]
        }

        var scale = 1.0
        var offset = 0.0
        var dimension = Dimension.none
        for factor in combined {
            let (atomScale, atomDimension, atomOffset) = try Self.resolve(factor, in: source)
            if let atomOffset {
                guard combined.count == 1, factor.exponent == 1 else {
                    throw HealthError.invalidArgument(
                        "Invalid unit '\(source)': the affine unit '\(factor.symbol)' converts only alone, never inside a compound unit",
                        field: "unit")
                }
                offset = atomOffset
            }
            scale *= Self.power(atomScale, factor.exponent)
            dimension = dimension * atomDimension.raised(to: factor.exponent)
        }
        storage = Storage(
            factors: combined, scale: scale, offset: offset, dimension: dimension,
            signature: combined.map { "\($0.identity)^\($0.exponent)" }.sorted(), canonical: Self.render(combined))
    }

    private static func resolve(_ factor: Factor, in source: String) throws -> (Double, Dimension, Double?) {
        let prefixScale = factor.prefix.isEmpty ? 1 : UnitSymbols.prefixFactor(factor.prefix) ?? 1
        if factor.symbol == "mol" {
            guard let molarMass = factor.molarMass else {
                throw HealthError.invalidArgument("Invalid unit '\(source)': 'mol' needs a molar mass, as in mol<180.156>", field: "unit")
            }
            return (prefixScale * molarMass, Dimension(.mass), nil)
        }
        guard let symbol = UnitSymbols.table[factor.symbol] else {
            throw HealthError.invalidArgument("Invalid unit '\(source)': unknown unit '\(factor.spelling)'", field: "unit")
        }
        return (prefixScale * symbol.factor, symbol.dimension, symbol.offset)
    }

    private static func power(_ value: Double, _ exponent: Int) -> Double {
        var result = 1.0
        for _ in 0..<exponent.magnitude { result *= value }
        return exponent < 0 ? 1 / result : result
    }

    /// Whether values in this unit can be expressed in `other` (same dimension). Never throws.
    public func isCompatible(with other: HealthUnit) -> Bool {
        dimension == other.dimension
    }

    /// Converts `value` from this unit to `other`.
    ///
    /// - Throws: ``HealthError`` (`invalidArgument`) naming both units when they are incompatible.
    public func convert(_ value: Double, to other: HealthUnit) throws -> Double {
        guard isCompatible(with: other) else {
            throw HealthError.invalidArgument(
                "Cannot convert from '\(self)' to '\(other)': the units are incompatible", field: "unit")
        }
        if storage === other.storage || signature == other.signature { return value }
        let base = value * scale + offset
        return (base - other.offset) / other.scale
    }

    /// The canonical string: factors in first-appearance order, positive powers joined by
    /// `.`, then `/` and the negative powers (parenthesized when more than one).
    public var description: String { canonical }

    private static func render(_ factors: [Factor]) -> String {
        let numerator = factors.filter { $0.exponent > 0 }
        let denominator = factors.filter { $0.exponent < 0 }
        func render(_ factor: Factor, _ exponent: Int) -> String {
            exponent == 1 ? factor.spelling : "\(factor.spelling)^\(exponent)"
        }
        // A denominator-only unit prints its powers negative, which the grammar reads back.
        if numerator.isEmpty {
            return denominator.map { render($0, $0.exponent) }.joined(separator: ".")
        }
        var text = numerator.map { render($0, $0.exponent) }.joined(separator: ".")
        if !denominator.isEmpty {
            let bottom = denominator.map { render($0, -$0.exponent) }.joined(separator: ".")
            text += denominator.count == 1 ? "/\(bottom)" : "/(\(bottom))"
        }
        return text
    }

    /// Units are equal when they have the same factors with the same powers, in any order.
    public static func == (lhs: HealthUnit, rhs: HealthUnit) -> Bool {
        lhs.storage === rhs.storage || lhs.signature == rhs.signature
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(signature)
    }
}

extension HealthUnit {
    /// `count`, the dimensionless unit.
    public static let count = try! HealthUnit("count")
    /// `s`.
    public static let second = try! HealthUnit("s")
    /// `%` (values are fractions: 0.97 is 97 %).
    public static let percent = try! HealthUnit("%")
    /// `Hz`: an audiogram's frequencies.
    public static let hertz = try! HealthUnit("Hz")
    /// `dBHL`: hearing level, an audiogram's thresholds.
    public static let hearingLevel = try! HealthUnit("dBHL")
}
