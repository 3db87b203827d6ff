/// The physical dimension of a unit: an exponent per base quantity.
///
/// Two units convert into each other exactly when their dimensions are equal.
struct Dimension: Hashable, Sendable {
    /// Base quantities, in a fixed order.
    enum Base: Int, CaseIterable, Sendable {
        case mass, length, time, temperature, angle, internationalUnit
        case conductance, potential, illuminance, soundPressureLevel, hearingLevel
        case opticalPower, prismPower, effortScore
    }

    private(set) var exponents: [Int8]

    static let none = Dimension()

    init() { exponents = Array(repeating: 0, count: Base.allCases.count) }

    init(_ base: Base, _ exponent: Int8 = 1) {
        self.init()
        exponents[base.rawValue] = exponent
    }

    init(_ pairs: [(Base, Int8)]) {
        self.init()
        for (base, exponent) in pairs { exponents[base.rawValue] += exponent }
    }

    var isDimensionless: Bool { exponents.allSatisfy { $0 == 0 } }

    static func * (lhs: Dimension, rhs: Dimension) -> Dimension {
        var result = lhs
        for index in result.exponents.indices { result.exponents[index] += rhs.exponents[index] }
        return result
    }

    func raised(to power: Int) -> Dimension {
        var result = self
        for index in result.exponents.indices { result.exponents[index] = Int8(clamping: Int(exponents[index]) * power) }
        return result
    }
}
