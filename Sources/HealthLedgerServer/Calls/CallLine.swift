import Logging

/// One call's log line (``CallDispatcher``): what an operator's log shows of a call, never a
/// value nor a credential's secret. Through the server's `Logger` it is the message
/// ``message`` with ``fields`` as its metadata; a ``ServerConfiguration/callLineWriter``
/// writes the same line without the logger.
public struct CallLine: Sendable {
    public var level: Logger.Level
    /// The server logger's label.
    public var label: String
    /// The line's fields in the order of their names, as a log handler sorts metadata:
    /// `duration_us` (from the call's start to its answer), `ledger.id` (or `-`: an operator's
    /// call on the store, or one refused before), `principal` (`owner`, `app com.example.walk`,
    /// `operator`, or `-`), `rpc.method` (`healthledger.v1.Ledger/Save`, or what the client
    /// sent) and `rpc.status` (`ok`, `permissionDenied`, …).
    public var fields: [(name: String, value: String)]
    /// The module that logs it, as the logger's `source` would be.
    public static let source = "HealthLedgerServer"
    public static let message = "call"

    init(level: Logger.Level, label: String, method: String, ledger: String, principal: String, status: String, microseconds: Int64) {
        self.level = level
        self.label = label
        fields = [
            ("duration_us", String(microseconds)), ("ledger.id", ledger), ("principal", principal), ("rpc.method", method), ("rpc.status", status),
        ]
    }

    /// The fields as the logger's metadata.
    var metadata: Logger.Metadata {
        Logger.Metadata(uniqueKeysWithValues: fields.map { ($0.name, .string($0.value)) })
    }
}
