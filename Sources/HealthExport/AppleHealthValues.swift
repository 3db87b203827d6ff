import Foundation
import HealthModel

/// The value spellings of an Apple Health export: dates, devices, metadata values, names.
public enum AppleHealthValues {
    /// Parses `2025-05-18 12:30:00 +0100` (the export's only date form: local time and its
    /// offset, no colon in the offset).
    ///
    /// - Returns: nil for anything else, including an impossible date such as February 30.
    public static func date(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes -> Date? in
            guard bytes.count == 25, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x20, bytes[13] == 0x3A, bytes[16] == 0x3A,
                bytes[19] == 0x20, bytes[20] == 0x2B || bytes[20] == 0x2D
            else { return nil }
            func number(_ range: Range<Int>) -> Int? {
                var value = 0
                for index in range {
                    let digit = Int(bytes[index]) - 0x30
                    guard (0...9).contains(digit) else { return nil }
                    value = value * 10 + digit
                }
                return value
            }
            guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
                let minute = number(14..<16), let second = number(17..<19), let offsetHours = number(21..<23),
                let offsetMinutes = number(23..<25), (1...12).contains(month), (1...daysIn(month, of: year)).contains(day), hour < 24,
                minute < 60, second < 61, offsetHours < 24, offsetMinutes < 60
            else { return nil }
            let offset = (offsetHours * 3600 + offsetMinutes * 60) * (bytes[20] == 0x2D ? -1 : 1)
            let seconds = daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
    }

    /// Writes a date in the export's form, in UTC (`2025-05-18 11:30:00 +0000`).
    /// Fractions of a second are dropped, as the Health app does.
    public static func string(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        var days = total / 86_400
        var seconds = total % 86_400
        if seconds < 0 { seconds += 86_400; days -= 1 }
        let (year, month, day) = civilFromDays(days)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(yearText)-\(two(month))-\(two(day)) \(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60)) +0000"
    }

    /// Parses the `Me` element's cardio fitness medications: `None` (as the Health app writes
    /// it), or the medications (`CalciumChannelBlocker`, `BetaBlocker`, with or without the
    /// `HKCardioFitnessMedicationsUse` prefix, spaces and case ignored) separated by `,`, `|`
    /// or `+`.
    ///
    /// - Returns: nil when a part names no medication.
    public static func cardioFitnessMedicationsUse(_ text: String) -> CardioFitnessMedicationsUse? {
        var set = CardioFitnessMedicationsUse.none
        for part in text.split(whereSeparator: { $0 == "," || $0 == "|" || $0 == "+" }) {
            var name = part.filter { !$0.isWhitespace }.lowercased()
            if name.hasPrefix("hkcardiofitnessmedicationsuse") { name.removeFirst("hkcardiofitnessmedicationsuse".count) }
            if name == "none" { continue }
            guard let medication = CardioFitnessMedicationsUse.named.first(where: { $0.name.lowercased() == name }) else { return nil }
            set.insert(medication.value)
        }
        return set
    }

    /// The `Me` element's form of `medications`: `None`, or their names, capitalised, joined
    /// by `, ` (`CalciumChannelBlocker, BetaBlocker`).
    public static func string(_ medications: CardioFitnessMedicationsUse) -> String {
        medications.isEmpty
            ? "None" : CardioFitnessMedicationsUse.named.filter { medications.contains($0.value) }.map { $0.name.prefix(1).uppercased() + $0.name.dropFirst() }.joined(separator: ", ")
    }

    /// Parses a non-negative number of seconds with at most six digits of fraction (`12`,
    /// `0.5`, `86400.000001`), exactly.
    ///
    /// - Returns: microseconds; nil for anything else.
    public static func microseconds(seconds text: String) -> Int64? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), (1...12).contains(parts[0].count), parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let whole = Int64(parts[0])
        else { return nil }
        var fraction: Int64 = 0
        if parts.count == 2 {
            guard (1...6).contains(parts[1].count), let digits = Int64(parts[1]) else { return nil }
            fraction = digits
            for _ in parts[1].count..<6 { fraction *= 10 }
        }
        return whole * 1_000_000 + fraction
    }

    /// `microseconds` (not negative) as seconds, with as many digits of fraction as it needs
    /// (`12`, `0.5`, `86400.000001`).
    public static func seconds(microseconds: Int64) -> String {
        let (whole, fraction) = (microseconds / 1_000_000, microseconds % 1_000_000)
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 6 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }

    /// Microseconds in a day.
    public static let microsecondsPerDay: Int64 = 86_400_000_000

    /// Parses a heartbeat's time of day as the Health app writes it in an
    /// `InstantaneousBeatsPerMinute` element, in the phone's locale: `4:17:18.57 PM` (`am`/`pm` in
    /// either case, with or without dots, spaces or a narrow no-break space before it) or, in a
    /// 24-hour locale, `16:17:18.57`; the fraction after a dot or a comma, at most six digits.
    ///
    /// - Returns: microseconds since midnight; nil for anything else.
    public static func timeOfDay(_ text: String) -> Int64? {
        var rest = Substring(text.lowercased().filter { !$0.isWhitespace })
        var meridiem: Int64?
        for (suffix, offset) in [("a.m.", 0), ("p.m.", 12), ("am", 0), ("pm", 12)] where rest.hasSuffix(suffix) {
            meridiem = Int64(offset)
            rest = rest.dropLast(suffix.count)
            break
        }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, (1...2).contains(parts[0].count), parts[1].count == 2 else { return nil }
        let secondParts = parts[2].split(omittingEmptySubsequences: false) { $0 == "." || $0 == "," }
        guard (1...2).contains(secondParts.count), secondParts[0].count == 2, secondParts.count == 1 || (1...6).contains(secondParts[1].count),
            let hour = Int64(parts[0]), let minute = Int64(parts[1]), let second = Int64(secondParts[0]), minute < 60, second < 60,
            [parts[0], parts[1]].allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            secondParts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } })
        else { return nil }
        var fraction: Int64 = 0
        if secondParts.count == 2 {
            guard let digits = Int64(secondParts[1]) else { return nil }
            fraction = digits
            for _ in secondParts[1].count..<6 { fraction *= 10 }
        }
        let hours: Int64
        if let meridiem {
            guard (1...12).contains(hour) else { return nil }
            hours = hour % 12 + meridiem
        } else {
            guard hour < 24 else { return nil }
            hours = hour
        }
        return ((hours * 60 + minute) * 60 + second) * 1_000_000 + fraction
    }

    /// A time of day, `microseconds` since midnight (taken modulo a day), as the Health app
    /// writes it in the `en_US` locale: `4:17:18.57 PM`, the fraction to two digits or to as
    /// many (up to six) as it has.
    public static func timeOfDayString(microseconds: Int64) -> String {
        var value = microseconds % microsecondsPerDay
        if value < 0 { value += microsecondsPerDay }
        var fraction = value % 1_000_000
        let seconds = value / 1_000_000
        let (hour, minute, second) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
        var digits = 6
        while digits > 2, fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        var fractionText = String(fraction)
        fractionText = String(repeating: "0", count: digits - fractionText.count) + fractionText
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(hour % 12 == 0 ? 12 : hour % 12):\(two(minute)):\(two(second)).\(fractionText) \(hour < 12 ? "AM" : "PM")"
    }

    /// Parses the export's device description,
    /// `<<HKDevice: 0x…>, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:9.4>`.
    ///
    /// Values may hold commas (`Watch6,2`), so a field ends only where `, KEY:` starts the next.
    /// - Returns: nil when no field is recognised.
    public static func device(_ text: String) -> Device? {
        let fields: [(key: String, path: WritableKeyPath<Device, String?>)] = [
            ("name", \.name), ("manufacturer", \.manufacturer), ("model", \.model), ("hardware", \.hardwareVersion),
            ("firmware", \.firmwareVersion), ("software", \.softwareVersion), ("localIdentifier", \.localIdentifier),
            ("UDIDeviceIdentifier", \.udiDeviceIdentifier),
        ]
        var body = Substring(text)
        if body.hasPrefix("<<HKDevice"), let close = body.firstIndex(of: ">") {
            body = body[body.index(after: close)...]
        } else if body.hasPrefix("<") {
            body = body.dropFirst()
        }
        if body.hasSuffix(">") { body = body.dropLast() }
        // Every ", key:" marks a field start; the value runs to the next marker.
        var markers: [(range: Range<Substring.Index>, key: String)] = []
        var search = body.startIndex
        while let comma = body[search...].firstIndex(of: ",") {
            let afterComma = body.index(after: comma)
            let rest = body[afterComma...].drop { $0 == " " }
            if let colon = rest.firstIndex(of: ":") {
                let key = String(rest[rest.startIndex..<colon])
                if !key.isEmpty, key.allSatisfy({ $0.isLetter || $0 == " " }) {
                    markers.append((comma..<body.index(after: colon), key))
                }
            }
            search = afterComma
        }
        var device = Device()
        var found = false
        for (index, marker) in markers.enumerated() {
            guard let field = fields.first(where: { $0.key == marker.key }) else { continue }
            let end = index + 1 < markers.count ? markers[index + 1].range.lowerBound : body.endIndex
            let value = body[marker.range.upperBound..<end].trimmingCharacters(in: .whitespaces)
            if !value.isEmpty {
                device[keyPath: field.path] = value
                found = true
            }
        }
        return found ? device : nil
    }

    /// The export's spelling of a device (the form ``device(_:)`` reads).
    public static func string(_ device: Device) -> String {
        let fields: [(String, String?)] = [
            ("name", device.name), ("manufacturer", device.manufacturer), ("model", device.model), ("hardware", device.hardwareVersion),
            ("firmware", device.firmwareVersion), ("software", device.softwareVersion), ("localIdentifier", device.localIdentifier),
            ("UDIDeviceIdentifier", device.udiDeviceIdentifier),
        ]
        let parts = fields.compactMap { key, value in value.map { "\(key):\($0)" } }
        return "<<HKDevice: 0x0>, " + parts.joined(separator: ", ") + ">"
    }

    /// A finite number written in decimal, as exports write them (`72`, `-0.5`, `1.5e3`); nil
    /// for anything else, hexadecimal (`0x1p6`), `nan` and `inf` included, which Swift's
    /// `Double(_:)` would take.
    public static func decimal(_ text: some StringProtocol) -> Double? {
        guard !text.utf8.contains(where: { $0 == UInt8(ascii: "x") || $0 == UInt8(ascii: "X") }), let number = Double(text), number.isFinite else {
            return nil
        }
        return number
    }

    /// A `MetadataEntry` value: a date in the export's form, a number, a quantity
    /// (`5.4321 kcal/hr·kg`, `1.5 m`) or, failing those, a string.
    public static func metadataValue(_ text: String, units: inout [String: HealthUnit]) -> MetadataValue {
        if text.count == 25, let date = date(text) { return .date(date) }
        // A string such as "0x1F" stays a string: exports write numbers in decimal.
        if let number = decimal(text), text.first.map({ $0.isNumber || $0 == "-" || $0 == "." }) == true {
            return .number(number)
        }
        if let space = text.firstIndex(of: " "), let number = decimal(text[..<space]) {
            let unitText = String(text[text.index(after: space)...])
            if let unit = unit(unitText, cache: &units) { return .quantity(Quantity(number, unit)) }
        }
        return .string(text)
    }

    /// The export's spelling of a metadata value.
    public static func string(_ value: MetadataValue) -> String {
        switch value {
        case .string(let text): text
        case .number(let number): number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        case .date(let date): string(date)
        case .quantity(let quantity): "\(number(quantity.value)) \(quantity.unit)"
        }
    }

    /// A number as the export writes it: integral values without a fraction.
    public static func number(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// A unit by its exported spelling, parsed once per spelling.
    public static func unit(_ text: String, cache: inout [String: HealthUnit]) -> HealthUnit? {
        if let unit = cache[text] { return unit }
        guard let unit = try? HealthUnit(text) else { return nil }
        AppleHealthReader.makeRoom(in: &cache)
        cache[text] = unit
        return unit
    }

    /// A category value given by name (`HKCategoryValueSleepAnalysisAsleepREM`, or the bare
    /// case `asleepREM`) or by raw number; none, for a type whose only value is
    /// `HKCategoryValueNotApplicable`, is that value.
    public static func categoryValue(_ text: String, of type: CategoryType) -> Int? {
        // A record without a value (Apple writes mindful sessions so) of a type whose only
        // value is HKCategoryValueNotApplicable: HealthKit reads it as that value.
        if text.isEmpty, type.values == CategoryValueSet.notApplicable { return CategoryValueSet.notApplicable.cases[0].value }
        if let number = Int(text) { return type.values.contains(number) ? number : nil }
        var name = Substring(text)
        if name.hasPrefix(type.values.name) { name = name.dropFirst(type.values.name.count) }
        guard let first = name.first else { return nil }
        return type.values.value(named: first.lowercased() + name.dropFirst()) ?? type.values.value(named: String(name))
    }

    /// The export's spelling of a category value: the enumeration's name and the case's,
    /// capitalised (`HKCategoryValueSleepAnalysisAsleepREM`).
    public static func categoryName(_ value: Int, of type: CategoryType) -> String {
        guard let name = type.values.name(of: value) else { return String(value) }
        return type.values.name + name.prefix(1).uppercased() + name.dropFirst()
    }

    /// Text escaped for an XML attribute value or element content, scalar by scalar (a
    /// `\r\n` is one `Character`, and must still come back as both). The characters XML 1.0
    /// cannot hold at all (the other control characters, U+FFFE and U+FFFF) are written as
    /// U+FFFD: a file that held one would not parse past it. The JSON Lines export keeps them.
    public static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { "&<>\"'\n\r\t".unicodeScalars.contains($0) || !isXMLCharacter($0) }) else { return text }
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count + 16)
        for character in text.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case "\n": escaped += "&#10;"
            case "\r": escaped += "&#13;"
            case "\t": escaped += "&#9;"
            case let other where !isXMLCharacter(other): escaped += "\u{FFFD}"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// Whether XML 1.0 allows `scalar` in a document (its `Char` production).
    static func isXMLCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value >= 0x20 ? scalar.value != 0xFFFE && scalar.value != 0xFFFF : scalar == "\t" || scalar == "\n" || scalar == "\r"
    }

    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func daysIn(_ month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
