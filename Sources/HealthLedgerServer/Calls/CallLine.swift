import Logging

/// One call's log line (``CallDispatcher``): what an operator's log shows of a call, never a
/// value nor a credential's secret. Through the server's `Logger` it is the message `call`
/// with these as its metadata; a ``ServerConfiguration/callLineWriter`` writes the same line
/// without the logger.
public struct CallLine: Sendable {
    public var level: Logger.Level
    /// The server logger's label.
    public var label: String
    /// The method's full name (`healthledger.v1.Ledger/Save`), or what the client sent.
    public var method: String
    /// The ledger's id, or `-` (an operator's call on the store, or one refused before).
    public var ledger: String
    /// Who called (`owner`, `app com.example.walk`, `operator`), or `-`.
    public var principal: String
    /// The status's name (`ok`, `permissionDenied`, …).
    public var status: String
    /// From the call's start to its answer.
    public var microseconds: Int64
    /// The module that logs it, as the logger's `source` would be.
    public var source: String { "HealthLedgerServer" }
    /// The message.
    public var message: String { "call" }

    /// The line's fields as the logger's metadata, by name.
    public var metadata: Logger.Metadata {
        [
            "rpc.method": .string(method), "ledger.id": .string(ledger), "principal": .string(principal),
            "rpc.status": .string(status), "duration_us": .string(String(microseconds)),
        ]
    }
}
