/// A failure of the store or a ledger itself, as opposed to a caller's bad data
/// (which is a ``HealthModel/HealthError``).
public struct LedgerFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// No ledger with that id.
        case notFound
        /// A ledger with that id exists already.
        case alreadyExists
        /// An id or option is malformed.
        case invalidArgument
        /// Stored data is damaged (a bad event, a broken chain, a truncated file).
        case corrupted
        /// The storage failed (disk full, I/O error, map limit).
        case storage
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    static func corrupted(_ message: String) -> LedgerFailure { LedgerFailure(.corrupted, message) }

    public var description: String { "\(kind.rawValue): \(message)" }
}
