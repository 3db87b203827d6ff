import Foundation
import HealthLedgerSDK

/// The `--where` expression language: a small text form of ``ObjectPredicate`` for the
/// command line.
///
/// ```
/// expression := term ("or" term)*
/// term       := factor ("and" factor)*
/// factor     := "not" factor | "(" expression ")" | condition
/// condition  := FIELD OP VALUE | FIELD "in" "(" VALUE ("," VALUE)* ")" | FIELD "exists"
/// OP         := "=" | "!=" | "<" | "<=" | ">" | ">="
/// FIELD      := value | category | start | end | source | revision | uuid | workout | correlation
///             | device.(name|manufacturer|model|hardwareVersion|firmwareVersion|softwareVersion|localIdentifier|udiDeviceIdentifier)
///             | metadata.KEY | activity | duration | (sum|average|min|max).TYPE | valence | kind | label | association
///             | status | concept | archived | scheduled
/// VALUE      := NUMBER [UNIT] | "text" | 'text' | ISO-8601 date | word
/// ```
enum WhereExpression {
    /// The grammar and examples, for `--help`.
    static let help = """
        --where EXPR filters with HealthKit's predicates:
          fields   value (a quantity with its unit, or a category value by number or name), category,
                   start, end (ISO 8601 dates), source (bundle id), uuid, workout, correlation (UUIDs),
                   revision ('BUNDLE@VERSION@PRODUCT@OS', '*' or nothing for any: 'com.apple.health@*@Watch6,1'),
                   device.name|manufacturer|model|hardwareVersion|firmwareVersion|softwareVersion|
                   localIdentifier|udiDeviceIdentifier, metadata.KEY;
                   workouts: activity (running …), duration (seconds, pauses excluded),
                   sum.TYPE, average.TYPE, min.TYPE, max.TYPE (statistics of its samples);
                   states of mind: value or valence (-1 to 1), kind (momentaryEmotion, dailyMood),
                   label (calm, happy …), association (work, family …);
                   medication doses: status (taken, skipped …), concept (a medication's identifier);
                   medications: archived, scheduled (true or false)
          ops      = != < <= > >=   FIELD in (V, V, ...)   FIELD exists
          combine  and, or, not, ( )     values: 120 count/min, "text", 'text', 2026-11-23T08:00:00Z, word
          examples value > 120 count/min and device.model = Watch
                   category in (asleepCore, asleepDeep, asleepREM)      category = asleep (any sleep stage)
                   metadata.HKMetadataKeyInsulinDeliveryReason = 1 and start >= 2026-11-23T00:00:00Z
                   not metadata.HKMetadataKeyWasUserEntered exists or source in (com.apple.health, com.example.app)
                   activity = running and average.HeartRate > 150 count/min      (with --type Workout)
                   valence < 0 and label in (anxious, stressed)      (with --type HKDataTypeStateOfMind)
        """

    /// A syntax or meaning error, at a column (1-based) of the expression.
    struct Failure: Error, CustomStringConvertible {
        let column: Int
        let message: String
        let text: String

        var description: String {
            "--where: \(message) at column \(column)\n  \(text)\n  \(String(repeating: " ", count: max(0, column - 1)))^"
        }
    }

    /// Parses `text` into a predicate on objects of `type`.
    static func parse(_ text: String, for type: ObjectType) throws -> ObjectPredicate {
        var parser = Parser(text: text, type: type, tokens: try tokenize(text))
        let predicate = try parser.expression()
        if let extra = parser.peek { throw parser.failure("unexpected '\(extra.text)'", at: extra) }
        return predicate
    }

    struct Token: Equatable {
        enum Kind: Equatable { case word, string, symbol }
        var kind: Kind
        var text: String
        /// 1-based.
        var column: Int
    }

    static func tokenize(_ text: String) throws -> [Token] {
        let characters = Array(text)
        var tokens: [Token] = []
        var index = 0
        let separators: Set<Character> = ["(", ")", ","]
        while index < characters.count {
            let character = characters[index]
            let column = index + 1
            if character.isWhitespace {
                index += 1
            } else if separators.contains(character) {
                tokens.append(Token(kind: .symbol, text: String(character), column: column))
                index += 1
            } else if character == "\"" || character == "'" {
                var end = index + 1
                var value = ""
                while end < characters.count, characters[end] != character {
                    if characters[end] == "\\", end + 1 < characters.count { end += 1 }
                    value.append(characters[end])
                    end += 1
                }
                guard end < characters.count else { throw Failure(column: column, message: "the text starting here is not closed", text: text) }
                tokens.append(Token(kind: .string, text: value, column: column))
                index = end + 1
            } else if "=!<>".contains(character) {
                var symbol = String(character)
                if index + 1 < characters.count, characters[index + 1] == "=" { symbol.append("=") }
                guard symbol != "!" else { throw Failure(column: column, message: "'!' must be followed by '='", text: text) }
                tokens.append(Token(kind: .symbol, text: symbol, column: column))
                index += symbol.count
            } else {
                var end = index
                var word = ""
                while end < characters.count {
                    let next = characters[end]
                    if next.isWhitespace || separators.contains(next) || next == "\"" || next == "'" || next == "=" || next == "!" { break }
                    if next == "<" || next == ">" {
                        // mol<180.15588> is a unit; elsewhere '<' and '>' compare.
                        guard next == "<", word.hasSuffix("mol"), let close = characters[end...].firstIndex(of: ">") else { break }
                        word += String(characters[end...close])
                        end = close + 1
                        continue
                    }
                    word.append(next)
                    end += 1
                }
                tokens.append(Token(kind: .word, text: word, column: column))
                index = end
            }
        }
        return tokens
    }

    struct Parser {
        let text: String
        let type: ObjectType
        var tokens: [Token]
        var position = 0

        static let keywords: Set<String> = ["and", "or", "not", "in", "exists"]

        var peek: Token? { position < tokens.count ? tokens[position] : nil }

        func failure(_ message: String, at token: Token?) -> Failure {
            Failure(column: token?.column ?? text.count + 1, message: message, text: text)
        }

        mutating func take() -> Token? {
            defer { position += 1 }
            return peek
        }

        mutating func accept(_ word: String) -> Bool {
            guard let token = peek, token.kind != .string, token.text.lowercased() == word else { return false }
            position += 1
            return true
        }

        mutating func expect(_ symbol: String) throws {
            guard accept(symbol) else { throw failure("expected '\(symbol)'", at: peek) }
        }

        mutating func expression() throws -> ObjectPredicate {
            var terms = [try term()]
            while accept("or") { terms.append(try term()) }
            return terms.count == 1 ? terms[0] : .or(terms)
        }

        mutating func term() throws -> ObjectPredicate {
            var factors = [try factor()]
            while accept("and") { factors.append(try factor()) }
            return factors.count == 1 ? factors[0] : .and(factors)
        }

        /// How deep `not` and parentheses nest here; past the predicates' own limit the
        /// expression is refused before recursing further.
        var depth = 0

        mutating func factor() throws -> ObjectPredicate {
            depth += 1
            defer { depth -= 1 }
            guard depth <= ObjectPredicate.maximumDepth * 2 else {
                throw failure("the expression nests deeper than \(ObjectPredicate.maximumDepth) levels", at: peek)
            }
            if accept("not") { return .not(try factor()) }
            if accept("(") {
                let inner = try expression()
                try expect(")")
                return inner
            }
            return try condition()
        }

        mutating func condition() throws -> ObjectPredicate {
            guard let field = take(), field.kind == .word, !Self.keywords.contains(field.text.lowercased()) else {
                throw failure("expected a field (value, start, end, source, uuid, device.…, metadata.…, category)", at: tokens[safe: position - 1])
            }
            if accept("exists") {
                guard field.text.hasPrefix("metadata."), field.text.count > 9 else { throw failure("only metadata.KEY can be tested with 'exists'", at: field) }
                return .metadata(String(field.text.dropFirst(9)), .exists)
            }
            if accept("in") {
                try expect("(")
                var values: [(Token, [Token])] = [try value()]
                while accept(",") { values.append(try value()) }
                try expect(")")
                return try oneOf(field, values)
            }
            guard let symbol = take(), symbol.kind == .symbol, let comparison = Self.comparisons[symbol.text] else {
                throw failure("expected an operator (= != < <= > >=), 'in' or 'exists' after '\(field.text)'", at: tokens[safe: position - 1])
            }
            return try compare(field, comparison, try value(), operatorToken: symbol)
        }

        static let statistics: [String: WorkoutStatistic] = ["sum": .sum, "average": .average, "min": .minimum, "max": .maximum]

        static let comparisons: [String: Comparison] = ["=": .equal, "!=": .notEqual, "<": .less, "<=": .lessOrEqual, ">": .greater, ">=": .greaterOrEqual]

        /// A value token and the unit words after a number.
        mutating func value() throws -> (Token, [Token]) {
            guard let token = take(), token.kind != .symbol, token.kind == .string || !Self.keywords.contains(token.text.lowercased()) else {
                throw failure("expected a value", at: tokens[safe: position - 1])
            }
            var unit: [Token] = []
            if token.kind == .word, Double(token.text) != nil, let next = peek, next.kind == .word,
                !Self.keywords.contains(next.text.lowercased()), (try? HealthUnit(next.text)) != nil
            {
                unit.append(next)
                position += 1
            }
            return (token, unit)
        }

        func compare(_ field: Token, _ comparison: Comparison, _ value: (Token, [Token]), operatorToken: Token) throws -> ObjectPredicate {
            let name = field.text
            if type == .stateOfMind, name == "value" || name == "valence" {
                guard value.0.kind == .word, value.1.isEmpty, let number = Double(value.0.text) else {
                    throw failure("a valence is a number from -1 to 1, with no unit", at: value.0)
                }
                return .stateOfMind(.valence(comparison, number))
            }
            switch name {
            case "value", "category":
                if type.family == .category || name == "category" {
                    let raw = try categoryValues(value)
                    if raw.count > 1 {
                        guard comparison == .equal || comparison == .notEqual else { throw failure("a named set compares with = or != only", at: operatorToken) }
                        return comparison == .equal ? .categoryValues(Set(raw)) : .not(.categoryValues(Set(raw)))
                    }
                    return .categoryValue(comparison, raw.first!)
                }
                return .quantity(comparison, try quantity(value))
            case "start", "end":
                return .date(name == "start" ? .start : .end, comparison, try date(value.0))
            case "source", "uuid", "workout", "correlation", "revision", "activity", "kind", "label", "association", "status", "concept", "archived",
                "scheduled":
                guard comparison == .equal || comparison == .notEqual else { throw failure("\(name) compares with = or != only", at: operatorToken) }
                let predicate = try oneOf(field, [value])
                return comparison == .equal ? predicate : .not(predicate)
            case "duration":
                guard value.0.kind == .word, let number = Double(value.0.text) else { throw failure("expected a number of seconds", at: value.0) }
                guard let unit = value.1.first else { return .workout(.duration(comparison, number)) }
                guard let seconds = try? Quantity(number, try HealthUnit(unit.text)).doubleValue(for: HealthUnit("s")) else {
                    throw failure("a duration is in seconds or another unit of time, not '\(unit.text)'", at: unit)
                }
                return .workout(.duration(comparison, seconds))
            default:
                if let statistic = Self.statistics[String(name.prefix { $0 != "." })], name.contains(".") {
                    let typeName = String(name.drop { $0 != "." }.dropFirst())
                    guard let quantityType = try? QuantityType(try resolveType(typeName).identifier) else {
                        throw failure("'\(typeName)' is not a quantity type", at: field)
                    }
                    let bound = try quantityOf(value, for: quantityType)
                    return .workout(.statistic(quantityType, statistic, comparison, bound))
                }
                if name.hasPrefix("device.") {
                    guard comparison == .equal || comparison == .notEqual else { throw failure("device properties compare with = or != only", at: operatorToken) }
                    let predicate = try oneOf(field, [value])
                    return comparison == .equal ? predicate : .not(predicate)
                }
                if name.hasPrefix("metadata."), name.count > 9 {
                    return .metadata(String(name.dropFirst(9)), .comparison(comparison, try metadataValue(value)))
                }
                throw failure("unknown field '\(name)'", at: field)
            }
        }

        func oneOf(_ field: Token, _ values: [(Token, [Token])]) throws -> ObjectPredicate {
            let name = field.text
            switch name {
            case "value", "category":
                if type.family == .category || name == "category" { return .categoryValues(Set(try values.flatMap { try categoryValues($0) })) }
                return .or(try values.map { .quantity(.equal, try quantity($0)) })
            case "source": return .sources(Set(values.map(\.0.text)))
            case "revision": return .sourceRevisions(Set(try values.map { try revision($0.0) }))
            case "activity":
                return .workout(.any(try values.map { value in
                    guard let activity = WorkoutActivityType(name: value.0.text) ?? Int(value.0.text).flatMap(WorkoutActivityType.init(rawValue:)) else {
                        throw failure("'\(value.0.text)' is not a workout activity type", at: value.0)
                    }
                    return .activityType(activity)
                }))
            case "uuid": return .uuids(Set(try values.map { try uuid($0.0) }))
            case "kind", "label", "association":
                guard type == .stateOfMind else { throw failure("\(name) is a field of states of mind (--type HKDataTypeStateOfMind)", at: field) }
                let conditions = try values.map { value -> StateOfMindCondition in
                    let text = value.0.text
                    switch name {
                    case "kind":
                        guard let kind = StateOfMind.Kind(name: text) else { throw failure("'\(text)' is not momentaryEmotion or dailyMood", at: value.0) }
                        return .kind(kind)
                    case "label":
                        guard let label = StateOfMind.Label(rawValue: text) else {
                            throw failure("'\(text)' is not a label (\(StateOfMind.Label.allCases.map(\.rawValue).joined(separator: ", ")))", at: value.0)
                        }
                        return .label(label)
                    default:
                        guard let association = StateOfMind.Association(rawValue: text) else {
                            throw failure(
                                "'\(text)' is not an association (\(StateOfMind.Association.allCases.map(\.rawValue).joined(separator: ", ")))", at: value.0)
                        }
                        return .association(association)
                    }
                }
                return conditions.count == 1 ? .stateOfMind(conditions[0]) : .or(conditions.map { .stateOfMind($0) })
            case "status", "concept":
                guard type == .medicationDoseEvent else { throw failure("\(name) is a field of medication doses (--type \(ObjectType.medicationDoseEvent))", at: field) }
                if name == "concept" { return .medication(.doseConcepts(Set(values.map(\.0.text)))) }
                let statuses = try values.map { value -> ObjectPredicate in
                    guard let status = MedicationDoseEvent.LogStatus.allCases.first(where: { "\($0)" == value.0.text }) else {
                        throw failure(
                            "'\(value.0.text)' is not a log status (\(MedicationDoseEvent.LogStatus.allCases.map { "\($0)" }.joined(separator: ", ")))", at: value.0)
                    }
                    return .medication(.doseStatus(status))
                }
                return statuses.count == 1 ? statuses[0] : .or(statuses)
            case "archived", "scheduled":
                guard type == .userAnnotatedMedication else {
                    throw failure("\(name) is a field of medications (--type \(ObjectType.userAnnotatedMedication))", at: field)
                }
                guard values.count == 1, let flag = Bool(values[0].0.text) else { throw failure("\(name) is true or false", at: values[0].0) }
                return .medication(name == "archived" ? .archived(flag) : .hasSchedule(flag))
            case "workout", "correlation":
                guard values.count == 1 else { throw failure("\(name) takes one UUID", at: values[1].0) }
                let id = try uuid(values[0].0)
                return name == "workout" ? .associatedWithWorkout(id) : .memberOfCorrelation(id)
            case "start", "end":
                return .or(try values.map { .date(name == "start" ? .start : .end, .equal, try date($0.0)) })
            default:
                if name.hasPrefix("device.") {
                    guard let property = DeviceProperty(rawValue: String(name.dropFirst(7))) else { throw failure("unknown device property '\(name)'", at: field) }
                    return .deviceProperty(property, Set(values.map(\.0.text)))
                }
                if name.hasPrefix("metadata."), name.count > 9 { return .metadata(String(name.dropFirst(9)), .oneOf(try values.map(metadataValue))) }
                throw failure("unknown field '\(name)'", at: field)
            }
        }

        func quantity(_ value: (Token, [Token])) throws -> Quantity {
            guard let quantityType = try? QuantityType(type.identifier) else {
                throw failure("\(type) has no quantities to compare", at: value.0)
            }
            return try quantityOf(value, for: quantityType)
        }

        /// A number with its unit; a bare number only for a type counted in `count`.
        func quantityOf(_ value: (Token, [Token]), for quantityType: QuantityType) throws -> Quantity {
            guard value.0.kind == .word, let number = Double(value.0.text) else { throw failure("expected a number", at: value.0) }
            if let unit = value.1.first { return Quantity(number, try HealthUnit(unit.text)) }
            guard quantityType.canonicalUnit.description == "count" else {
                throw failure("give the value's unit, e.g. \(value.0.text) \(DisplayUnits.unit(for: quantityType))", at: value.0)
            }
            return Quantity(number, .count)
        }

        /// `BUNDLE@VERSION@PRODUCT@OS`; a missing or `*` part matches any.
        func revision(_ token: Token) throws -> SourceRevisionPattern {
            let parts = token.text.split(separator: "@", omittingEmptySubsequences: false).map(String.init)
            guard let bundle = parts.first, !bundle.isEmpty, parts.count <= 4 else {
                throw failure("a revision is BUNDLE@VERSION@PRODUCT@OS (later parts optional, * for any)", at: token)
            }
            func part(_ index: Int) -> String? { index < parts.count && parts[index] != "*" && !parts[index].isEmpty ? parts[index] : nil }
            return SourceRevisionPattern(bundleIdentifier: bundle, version: part(1), productType: part(2), operatingSystemVersion: part(3))
        }

        /// A category value by raw number or case name; `asleep` is every sleep stage.
        func categoryValues(_ value: (Token, [Token])) throws -> [Int] {
            guard let category = try? CategoryType(type.identifier) else { throw failure("\(type) has no category values", at: value.0) }
            if let raw = Int(value.0.text) { return [raw] }
            if category.values == CategoryValueSet.sleepAnalysis, value.0.text == "asleep" { return ObjectPredicate.allAsleepValues.sorted() }
            guard let raw = category.values.value(named: value.0.text) else {
                throw failure("'\(value.0.text)' is not a value of \(category.values.name) (\(category.values.cases.map(\.name).joined(separator: ", ")))", at: value.0)
            }
            return [raw]
        }

        func date(_ token: Token) throws -> Date {
            guard let date = parseISO8601(token.text) else { throw failure("expected an ISO 8601 date", at: token) }
            return date
        }

        func uuid(_ token: Token) throws -> UUID {
            guard let uuid = UUID(uuidString: token.text) else { throw failure("expected a UUID", at: token) }
            return uuid
        }

        /// A quoted text is a string; a number (with a unit: a quantity), a date or a word otherwise.
        func metadataValue(_ value: (Token, [Token])) throws -> MetadataValue {
            if value.0.kind == .string { return .string(value.0.text) }
            if let number = Double(value.0.text) {
                if let unit = value.1.first { return .quantity(Quantity(number, try HealthUnit(unit.text))) }
                return .number(number)
            }
            if value.0.text.contains("T"), let date = parseISO8601(value.0.text) { return .date(date) }
            return .string(value.0.text)
        }
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
