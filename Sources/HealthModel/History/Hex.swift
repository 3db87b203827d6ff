/// Hashes, keys and signatures as people read them: lowercase hexadecimal.
extension Sequence where Element == UInt8 {
    /// The bytes as lowercase hex digits, two per byte.
    public var hexString: String {
        var text: [UInt8] = []
        text.reserveCapacity(underestimatedCount * 2)
        appendHex(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends the bytes' lowercase hex digits (UTF-8) to `text`.
    func appendHex(to text: inout [UInt8]) {
        for byte in self {
            text.append(UInt8.lowercaseHexDigit(byte >> 4))
            text.append(UInt8.lowercaseHexDigit(byte & 0x0F))
        }
    }
}

extension UInt8 {
    /// The lowercase hex digit (UTF-8) of `nibble` (0–15), for a caller writing a string's
    /// bytes itself, as the importer does its sync identifiers.
    @inlinable
    public static func lowercaseHexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }
}

extension Array where Element == UInt8 {
    /// The bytes of an even number of hex digits (either case); nil for anything else.
    public init?(hexString: some StringProtocol) {
        let digits = Array(hexString.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self = bytes
    }
}
