import HealthModel
import Logging

/// One call's log line (``CallDispatcher``): what an operator's log shows of a call, never a
/// value nor a credential's secret. Through the server's `Logger` it is the message
/// ``message`` with ``fields`` as its metadata; a ``ServerConfiguration/callLineWriter``
/// writes the same line without the logger, from the parts as they are (``write(fieldsTo:)``:
/// no string is built for a field).
public struct CallLine: Sendable {
    public var level: Logger.Level
    /// The server logger's label.
    public var label: String
    /// From the call's start to its answer.
    public var microseconds: Int64
    /// The ledger (nil: an operator's call on the store, or one refused before).
    public var ledger: String?
    /// The caller (nil: refused before it was known).
    public var principal: Principal?
    /// `healthledger.v1.Ledger/Save`, or what the client sent.
    public var method: String
    public var status: String
    /// The module that logs it, as the logger's `source` would be.
    public static let source = "HealthLedgerServer"
    public static let message = "call"

    init(level: Logger.Level, label: String, method: String, ledger: String?, principal: Principal?, status: String, microseconds: Int64) {
        (self.level, self.label, self.method, self.ledger, self.principal, self.status, self.microseconds) =
            (level, label, method, ledger, principal, status, microseconds)
    }

    /// The line's fields in the order of their names, as a log handler sorts metadata:
    /// `duration_us`, `ledger.id` (or `-`), `principal` (`owner`, `app com.example.walk`,
    /// `operator`, or `-`), `rpc.method` and `rpc.status` (`ok`, `permissionDenied`, …); the
    /// principal's name and the client's text as ``printable(_:)``.
    public var fields: [(name: String, value: String)] {
        [
            ("duration_us", String(microseconds)), ("ledger.id", Self.printable(ledger ?? "-")), ("principal", principalText),
            ("rpc.method", Self.printable(method)), ("rpc.status", status),
        ]
    }

    private var principalText: String {
        switch principal {
        case .app(let source)?: "app " + Self.printable(source.bundleIdentifier)
        case let other?: other.description
        case nil: "-"
        }
    }

    /// `text` as a field's value: spaces and control characters (a client's method name or
    /// ledger id may hold any) become `_`, so that a value never ends a field or a line.
    static func printable(_ text: String) -> String {
        text.utf8.allSatisfy(isPrintable) ? text : String(decoding: text.utf8.map { isPrintable($0) ? $0 : UInt8(ascii: "_") }, as: UTF8.self)
    }

    private static func isPrintable(_ byte: UInt8) -> Bool { byte > 0x20 && byte != 0x7F }

    /// Appends `text`'s bytes at once (the text of a line per call), a byte not
    /// ``isPrintable(_:)`` as `_`.
    private static func append(_ text: String, to line: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            if bytes.allSatisfy(isPrintable) { return line.append(contentsOf: bytes) }
            for byte in bytes { line.append(isPrintable(byte) ? byte : UInt8(ascii: "_")) }
        }
    }

    /// Appends a literal's bytes at once.
    static func append(literal: StaticString, to line: inout [UInt8]) {
        line.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends ``fields`` to `line` as a log line has them: ` name=value` each.
    public func write(fieldsTo line: inout [UInt8]) {
        Self.append(literal: " duration_us=", to: &line)
        Self.appendDecimal(microseconds, to: &line)
        Self.append(literal: " ledger.id=", to: &line)
        Self.append(ledger ?? "-", to: &line)
        Self.append(literal: " principal=", to: &line)
        switch principal {
        case .app(let source)?:
            Self.append(literal: "app ", to: &line)
            Self.append(source.bundleIdentifier, to: &line)
        case let other?: Self.append(other.description, to: &line)
        case nil: line.append(UInt8(ascii: "-"))
        }
        Self.append(literal: " rpc.method=", to: &line)
        Self.append(method, to: &line)
        Self.append(literal: " rpc.status=", to: &line)
        Self.append(status, to: &line)
    }

    private static func appendDecimal(_ value: Int64, to line: inout [UInt8]) {
        if value < 0 { line.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        withUnsafeMutableBytes(of: &digits) { buffer in
            var index = buffer.count
            repeat {
                index -= 1
                buffer[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            line.append(contentsOf: buffer[index...])
        }
    }

    /// The fields as the logger's metadata.
    var metadata: Logger.Metadata {
        Logger.Metadata(uniqueKeysWithValues: fields.map { ($0.name, .string($0.value)) })
    }
}
