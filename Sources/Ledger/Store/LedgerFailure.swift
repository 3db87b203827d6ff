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
        /// The ledger is not in a state that allows the operation (a legal hold refuses erasure).
        case failedPrecondition
        /// A follower's log is not a prefix of its primary's: it holds events the primary does
        /// not (it discards them, docs/LEDGER.md "Replication").
        case diverged
    }

    public var kind: Kind
    public var message: String
    /// The error underneath, when there is one (an ``LMDB/LMDBError``, a file-system error),
    /// for the operator's log; not compared by `==`.
    public var cause: (any Error)?

    public init(_ kind: Kind, _ message: String, cause: (any Error)? = nil) {
        self.kind = kind
        self.message = message
        self.cause = cause
    }

    static func corrupted(_ message: String, cause: (any Error)? = nil) -> LedgerFailure { LedgerFailure(.corrupted, message, cause: cause) }

    public var description: String {
        guard let cause else { return "\(kind.rawValue): \(message)" }
        return "\(kind.rawValue): \(message) (cause: \(cause))"
    }

    public static func == (left: LedgerFailure, right: LedgerFailure) -> Bool { left.kind == right.kind && left.message == right.message }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(message)
    }
}
