import HealthModel
import TestSupport
import Testing

@Suite("Units (docs/SEMANTICS.md §1)")
struct UnitTests {
    static func convert(_ value: Double, _ from: String, _ to: String) throws -> Double {
        try HealthUnit(from).convert(value, to: HealthUnit(to))
    }

    static func close(_ a: Double, _ b: Double, tolerance: Double = 1e-9) -> Bool {
        abs(a - b) <= tolerance * max(1, abs(a), abs(b))
    }

    static let vectorCases: [(Double, String, String, Double)] = [
        (150.0, "lb", "kg", 68.0388),
        (10, "st", "kg", 63.5),
        (16, "oz", "lb", 1),
        (98.6, "degF", "degC", 37.0),
        (98.6, "degF", "K", 310.15),
        (37, "degC", "K", 310.15),
        (500, "kcal", "kJ", 2092),
        (8, "fl_oz_us", "cup_us", 1),
        (100, "mg/dL", "mmol<180.15588000005408>/L", 5.5507486),
        (72, "count/min", "count/s", 1.2),
        (1, "mi", "m", 1609.34),
        (1, "ft", "in", 12),
        (1, "mmHg", "Pa", 133.3224),
        (1, "atm", "mmHg", 101_325 / 133.3224),
        (1, "cal", "J", 4.184),
        (1, "Cal", "kcal", 1),
        // The Health app writes a product with a middle dot.
        (5.4321, "kcal/hr·kg", "kcal/(kg*hr)", 5.4321),
        (42, "mL/min·kg", "ml/(kg*min)", 42),
        (1, "d", "hr", 24),
        (1, "hr", "min", 60),
        (1, "mcg", "g", 1e-6),
        (1, "dL", "mL", 100),
        (1000, "mIU", "IU", 1),
        (1, "mcIU", "IU", 1e-6),
        (97, "%", "count", 97),
        (1, "kg/m.s^2", "Pa", 1),
        (1, "kg.m^2/s^2", "J", 1),
        (1, "W", "J/s", 1),
        (1, "Hz", "count/s", 1),
        (180, "deg", "rad", Double.pi),
        (1, "km/hr", "m/s", 1 / 3.6),
        (35, "ml/(kg*min)", "mL/kg.min", 35),
    ]

    @Test("HealthKit's conversion vectors", arguments: vectorCases)
    func vectors(_ value: Double, _ from: String, _ to: String, _ expected: Double) throws {
        let result = try Self.convert(value, from, to)
        #expect(Self.close(result, expected, tolerance: 1e-7), "\(value) \(from) → \(result) \(to), expected \(expected)")
    }

    @Test("multiplication binds before the single division")
    func precedence() throws {
        #expect(try HealthUnit("kg/m.s^2") == HealthUnit("kg/(m*s^2)"))
        #expect(try HealthUnit("kg/m.s^2") == HealthUnit("kg.m^-1.s^-2"))
        #expect(try HealthUnit("ml/(kg*min)").description == "mL/(kg.min)")
        #expect(try HealthUnit("count/min").description == "count/min")
    }

    @Test("molar masses compare with a tolerance")
    func molarMassTolerance() throws {
        let precise = try HealthUnit("mmol<180.15588000005408>/L")
        let exported = try HealthUnit("mmol<180.1558800000541>/L")
        #expect(precise == exported)
        #expect(precise.hashValue == exported.hashValue)
        #expect(try precise != HealthUnit("mmol<18.0>/L"))
        #expect(try Self.convert(1, "mmol<180.15588000005408>/L", "mmol<180.1558800000541>/L") == 1)
    }

    @Test("incompatible units", arguments: [
        ("kg", "m"), ("IU", "g"), ("mIU", "mg"), ("count", "s"), ("degC", "kg"), ("dBASPL", "dBHL"), ("D", "m"),
        ("count/min", "count"), ("L", "m^2"),
    ])
    func incompatible(_ a: String, _ b: String) throws {
        let first = try HealthUnit(a)
        let second = try HealthUnit(b)
        #expect(!first.isCompatible(with: second))
        let error = #expect(throws: HealthError.self) { try first.convert(1, to: second) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("'\(first)'") == true && error?.message.contains("'\(second)'") == true)
    }

    @Test("compatible families", arguments: [
        ("L", "m^3"), ("count", "%"), ("IU", "mIU"), ("mmol<180.156>/L", "mg/dL"), ("kcal", "kJ"), ("degF", "K"),
    ])
    func compatible(_ a: String, _ b: String) throws {
        #expect(try HealthUnit(a).isCompatible(with: HealthUnit(b)))
    }

    @Test("unparsable strings are invalidArgument errors naming the input", arguments: [
        "", "furlong", "kg//m", "kg/m/s", "kg^", "kg^x", "(kg", "kg)", "mol", "mmol/L", "mol<abc>", "mol<-1>", "kg<5>",
        "degF/s", "degC^2", "m.degC", "kmi", "k", "kg..m", "5kg", "kg^0", "m^999", "kg m",
    ])
    func unparsable(_ text: String) throws {
        let error = #expect(throws: HealthError.self) { try HealthUnit(text) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("'\(text)'") == true)
    }

    @Test("affine temperatures convert alone")
    func affine() throws {
        #expect(Self.close(try Self.convert(0, "degC", "degF"), 32))
        #expect(Self.close(try Self.convert(-40, "degF", "degC"), -40))
        #expect(Self.close(try Self.convert(0, "K", "degC"), -273.15))
    }

    static func randomUnit(_ rng: inout SplitMix) -> String {
        let prefixable = ["g", "m", "L", "s", "J", "Pa", "W", "Hz", "K", "IU", "S", "V", "rad", "lx"]
        let plain = ["lb", "oz", "st", "in", "ft", "mi", "min", "hr", "d", "kcal", "cal", "mmHg", "count", "%", "fl_oz_us", "cup_imp", "deg"]
        let prefixes = ["", "k", "m", "mc", "c", "d", "da", "h", "M", "n"]
        func atom() -> String {
            if Int.random(in: 0..<6, using: &rng) == 0 { return "\(["", "m", "mc"].randomElement(using: &rng)!)mol<\(Double(Int.random(in: 1...500_000, using: &rng)) / 1000)>" }
            if Bool.random(using: &rng) { return prefixes.randomElement(using: &rng)! + prefixable.randomElement(using: &rng)! }
            return plain.randomElement(using: &rng)!
        }
        func factor() -> String {
            let base = atom()
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: return "\(base)^\(Int.random(in: -3...3, using: &rng).nonZero)"
            default: return base
            }
        }
        func product() -> String {
            (0..<Int.random(in: 1...3, using: &rng)).map { _ in factor() }.joined(separator: Bool.random(using: &rng) ? "." : "*")
        }
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return product()
        case 1: return "\(product())/\(factor())"
        default: return "\(product())/(\(product()))"
        }
    }

    @Test("property: parse → print → parse round-trips")
    func printParseRoundTrip() throws {
        var rng = SplitMix(state: 42)
        for _ in 0..<2000 {
            let text = Self.randomUnit(&rng)
            let unit = try HealthUnit(text)
            let printed = unit.description
            let reparsed = try HealthUnit(printed)
            #expect(reparsed == unit, "\(text) printed as \(printed)")
            #expect(reparsed.description == printed)
            #expect(Self.close(try unit.convert(1, to: reparsed), 1))
        }
    }

    @Test("property: converting A → B → A returns the value")
    func conversionRoundTrip() throws {
        var rng = SplitMix(state: 7)
        // Random units grouped into compatibility classes; pairs are drawn within a class.
        var classes: [[HealthUnit]] = []
        for _ in 0..<3000 {
            let unit = try HealthUnit(Self.randomUnit(&rng))
            if let index = classes.firstIndex(where: { $0[0].isCompatible(with: unit) }) {
                classes[index].append(unit)
            } else {
                classes.append([unit])
            }
        }
        var pairs = 0
        for members in classes where members.count > 1 {
            for (a, b) in zip(members, members.dropFirst()) {
                pairs += 1
                let value = Double(Int.random(in: -1_000_000...1_000_000, using: &rng)) / 1000
                let there = try a.convert(value, to: b)
                let back = try b.convert(there, to: a)
                #expect(Self.close(back, value, tolerance: 1e-9), "\(value) \(a) → \(there) \(b) → \(back)")
            }
        }
        #expect(pairs >= 300)
        // Same-dimension pairs built on purpose, so the property sees many compatible units.
        for (a, b) in [("lb", "kg"), ("degF", "degC"), ("mg/dL", "mmol<180.15588000005408>/L"), ("kcal/hr", "W"), ("mi/hr", "km/min")] {
            for value in [-40.0, 0, 0.001, 1, 98.6, 12_345.678] {
                let back = try Self.convert(Self.convert(value, a, b), b, a)
                #expect(Self.close(back, value), "\(value) \(a) ↔ \(b)")
            }
        }
    }
}

extension Int {
    fileprivate var nonZero: Int { self == 0 ? 2 : self }
}
