/// The atoms of the HKUnit grammar: base symbols with HealthKit's factors, and SI prefixes.
enum UnitSymbols {
    /// A base symbol: its factor relative to the dimension's base (g, m, s, K, rad, …).
    struct Symbol: Sendable {
        /// The spelling printed in canonical strings (`L` for both `L` and `l`).
        let canonical: String
        let factor: Double
        let dimension: Dimension
        /// Whether SI prefixes apply (`kg`, `mL`, `mIU`, but never `kmi`).
        let takesPrefix: Bool
        /// An affine unit (degC, degF): offset such that base = value·factor + offset.
        let offset: Double?
    }

    private static func symbol(
        _ canonical: String, _ factor: Double, _ dimension: Dimension,
        prefixable: Bool = false, offset: Double? = nil
    ) -> Symbol {
        Symbol(canonical: canonical, factor: factor, dimension: dimension, takesPrefix: prefixable, offset: offset)
    }

    private static let mass = Dimension(.mass)
    private static let length = Dimension(.length)
    private static let time = Dimension(.time)
    private static let volume = Dimension(.length, 3)
    /// kg·m⁻¹·s⁻² expressed in grams.
    private static let pressure = Dimension([(.mass, 1), (.length, -1), (.time, -2)])
    private static let energy = Dimension([(.mass, 1), (.length, 2), (.time, -2)])
    private static let power = Dimension([(.mass, 1), (.length, 2), (.time, -3)])

    /// Every base symbol by spelling. Factors are HealthKit's (docs/SEMANTICS.md §1).
    static let table: [String: Symbol] = {
        var t: [String: Symbol] = [:]
        // SI units (take prefixes).
        t["g"] = symbol("g", 1, mass, prefixable: true)
        t["m"] = symbol("m", 1, length, prefixable: true)
        t["L"] = symbol("L", 0.001, volume, prefixable: true)
        t["l"] = t["L"]
        t["Pa"] = symbol("Pa", 1000, pressure, prefixable: true)
        t["s"] = symbol("s", 1, time, prefixable: true)
        t["J"] = symbol("J", 1000, energy, prefixable: true)
        t["K"] = symbol("K", 1, Dimension(.temperature), prefixable: true)
        t["S"] = symbol("S", 1, Dimension(.conductance), prefixable: true)
        t["Hz"] = symbol("Hz", 1, Dimension(.time, -1), prefixable: true)
        t["V"] = symbol("V", 1, Dimension(.potential), prefixable: true)
        t["W"] = symbol("W", 1000, power, prefixable: true)
        t["rad"] = symbol("rad", 1, Dimension(.angle), prefixable: true)
        t["lx"] = symbol("lx", 1, Dimension(.illuminance), prefixable: true)
        t["IU"] = symbol("IU", 1, Dimension(.internationalUnit), prefixable: true)
        // mol<M> is handled by the parser: M grams per mole, prefixable.
        // Mass.
        t["oz"] = symbol("oz", 28.3495, mass)
        t["lb"] = symbol("lb", 453.592, mass)
        t["st"] = symbol("st", 6350.0, mass)
        // Length.
        t["in"] = symbol("in", 0.0254, length)
        t["ft"] = symbol("ft", 0.3048, length)
        t["yd"] = symbol("yd", 0.9144, length)
        t["mi"] = symbol("mi", 1609.34, length)
        // Pressure.
        t["mmHg"] = symbol("mmHg", 133.3224 * 1000, pressure)
        t["cmAq"] = symbol("cmAq", 98.0665 * 1000, pressure)
        t["atm"] = symbol("atm", 101_325 * 1000, pressure)
        t["inHg"] = symbol("inHg", 3386.38864034 * 1000, pressure)
        // Hearing.
        t["dBASPL"] = symbol("dBASPL", 1, Dimension(.soundPressureLevel))
        t["dBHL"] = symbol("dBHL", 1, Dimension(.hearingLevel))
        // Volume.
        t["fl_oz_us"] = symbol("fl_oz_us", 0.0295735295625 * 0.001, volume)
        t["fl_oz_imp"] = symbol("fl_oz_imp", 0.0284130625 * 0.001, volume)
        t["pt_us"] = symbol("pt_us", 0.473176473 * 0.001, volume)
        t["pt_imp"] = symbol("pt_imp", 0.56826125 * 0.001, volume)
        t["cup_us"] = symbol("cup_us", 0.2365882365 * 0.001, volume)
        t["cup_imp"] = symbol("cup_imp", 0.284130625 * 0.001, volume)
        // Time.
        t["min"] = symbol("min", 60, time)
        t["hr"] = symbol("hr", 3600, time)
        t["d"] = symbol("d", 86_400, time)
        // Energy.
        t["cal"] = symbol("cal", 4.184 * 1000, energy)
        t["kcal"] = symbol("kcal", 4184 * 1000, energy)
        t["Cal"] = symbol("Cal", 4184 * 1000, energy)
        // Temperature (affine: base kelvin = value·factor + offset).
        t["degC"] = symbol("degC", 1, Dimension(.temperature), offset: 273.15)
        t["degF"] = symbol("degF", 1 / 1.8, Dimension(.temperature), offset: 459.67 / 1.8)
        // Scalars.
        t["count"] = symbol("count", 1, .none)
        t["%"] = symbol("%", 1, .none)
        // Optics, angle, effort.
        t["D"] = symbol("D", 1, Dimension(.opticalPower))
        t["pD"] = symbol("pD", 1, Dimension(.prismPower))
        t["deg"] = symbol("deg", Double.pi / 180, Dimension(.angle))
        t["appleEffortScore"] = symbol("appleEffortScore", 1, Dimension(.effortScore))
        return t
    }()

    /// SI prefixes, longest spelling first so `da` and `mc` win over `d` and `m`.
    static let prefixes: [(String, Double)] = [
        ("da", 1e1), ("mc", 1e-6),
        ("h", 1e2), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12),
        ("d", 1e-1), ("c", 1e-2), ("m", 1e-3), ("n", 1e-9), ("p", 1e-12), ("f", 1e-15),
    ]

    static func prefixFactor(_ prefix: String) -> Double? {
        prefixes.first { $0.0 == prefix }?.1
    }
}
