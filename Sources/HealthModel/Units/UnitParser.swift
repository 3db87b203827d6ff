/// A recursive-descent parser for the HKUnit grammar (see ``HealthUnit``).
struct UnitParser {
    private let text: String
    private let characters: [Character]
    private var position = 0

    init(text: String) {
        self.text = text
        self.characters = Array(text)
    }

    /// unit := product [ '/' product ]
    mutating func parse() throws -> [HealthUnit.Factor] {
        guard !characters.isEmpty else { throw failure("the unit string is empty") }
        guard characters.count <= 256 else { throw failure("the unit string is longer than 256 characters") }
        var factors = try parseProduct()
        if peek() == "/" {
            position += 1
            let denominator = try parseProduct()
            factors += denominator.map { factor in
                var inverted = factor
                inverted.exponent = -factor.exponent
                return inverted
            }
        }
        if let extra = peek() {
            throw failure(extra == "/" ? "only one '/' is allowed" : "unexpected '\(extra)' at position \(position + 1)")
        }
        return factors
    }

    /// product := factor ( ('.' | '*' | '·') factor )*
    ///
    /// `·` is how the Health app writes a product, as in `kcal/hr·kg` and `mL/min·kg`.
    private mutating func parseProduct() throws -> [HealthUnit.Factor] {
        var factors = try parseFactor()
        while let next = peek(), next == "." || next == "*" || next == "·" {
            position += 1
            factors += try parseFactor()
        }
        return factors
    }

    /// factor := '(' product ')' [ '^' int ] | atom [ '^' int ]
    private mutating func parseFactor() throws -> [HealthUnit.Factor] {
        if peek() == "(" {
            position += 1
            var group = try parseProduct()
            guard peek() == ")" else { throw failure("missing ')'") }
            position += 1
            let exponent = try parseExponent()
            for index in group.indices { group[index].exponent *= exponent }
            return group
        }
        var atom = try parseAtom()
        atom.exponent = try parseExponent()
        return [atom]
    }

    private mutating func parseExponent() throws -> Int {
        guard peek() == "^" else { return 1 }
        position += 1
        var digits = ""
        if peek() == "-" || peek() == "+" { digits.append(characters[position]); position += 1 }
        while let next = peek(), next.isASCII, next.isNumber { digits.append(next); position += 1 }
        guard let exponent = Int(digits), (-64...64).contains(exponent) else {
            throw failure("'^' must be followed by an integer power between -64 and 64")
        }
        guard exponent != 0 else { throw failure("a power of 0 is not allowed") }
        return exponent
    }

    private mutating func parseAtom() throws -> HealthUnit.Factor {
        var name = ""
        while let next = peek(), !"./*·^()<>".contains(next) {
            guard next.isLetter || next == "_" || next == "%" else {
                throw failure("unexpected '\(next)' at position \(position + 1)")
            }
            name.append(next)
            position += 1
        }
        guard !name.isEmpty else {
            if let next = peek() { throw failure("expected a unit at position \(position + 1), found '\(next)'") }
            throw failure("expected a unit at the end")
        }
        var molarMass: Double?
        if peek() == "<" {
            position += 1
            var digits = ""
            while let next = peek(), next != ">" { digits.append(next); position += 1 }
            guard peek() == ">" else { throw failure("missing '>' after the molar mass") }
            position += 1
            guard let mass = Double(digits), mass.isFinite, mass > 0 else {
                throw failure("the molar mass '\(digits)' is not a positive number")
            }
            molarMass = mass
        }
        return try resolve(name, molarMass: molarMass)
    }

    /// Splits a spelling into prefix and symbol: an exact symbol wins; otherwise a known
    /// prefix followed by a symbol that takes prefixes (or `mol`).
    private func resolve(_ name: String, molarMass: Double?) throws -> HealthUnit.Factor {
        if name == "mol" || (name.hasSuffix("mol") && UnitSymbols.prefixFactor(String(name.dropLast(3))) != nil) {
            guard molarMass != nil else { throw failure("'\(name)' needs a molar mass, as in \(name)<180.156>") }
            return .init(prefix: String(name.dropLast(3)), symbol: "mol", molarMass: molarMass, exponent: 1)
        }
        guard molarMass == nil else { throw failure("only 'mol' takes a molar mass, not '\(name)'") }
        if UnitSymbols.table[name] != nil {
            return .init(prefix: "", symbol: name, molarMass: nil, exponent: 1)
        }
        for (prefix, _) in UnitSymbols.prefixes where name.hasPrefix(prefix) {
            let rest = String(name.dropFirst(prefix.count))
            if let symbol = UnitSymbols.table[rest], symbol.takesPrefix {
                return .init(prefix: prefix, symbol: rest, molarMass: nil, exponent: 1)
            }
        }
        throw failure("unknown unit '\(name)'")
    }

    private func peek() -> Character? {
        position < characters.count ? characters[position] : nil
    }

    private func failure(_ reason: String) -> HealthError {
        // A unit is a few characters: a long text is shown by its start only.
        let shown = text.count > 80 ? "\(text.prefix(80))… (\(text.utf8.count) bytes)" : text
        let why = reason.count > 120 ? "\(reason.prefix(120))…" : reason
        return HealthError.invalidArgument("Invalid unit '\(shown)': \(why)", field: "unit")
    }
}
