import HealthModel
import LedgerSchema

/// Who performs an operation on a ledger; recorded as the actor of every event.
public enum Principal: Sendable, Hashable, CustomStringConvertible {
    /// The server or a tool acting on its own (e.g. creating a ledger).
    case system
    /// The server operator: manages ledgers, reads no health data.
    case `operator`
    /// The person whose ledger it is.
    case owner
    /// An app, identified by its source.
    case app(Source)

    public var description: String {
        switch self {
        case .system: "system"
        case .operator: "operator"
        case .owner: "owner"
        case .app(let source): "app \(source.bundleIdentifier)"
        }
    }

    /// `healthledger.v1.Actor.Kind`.
    var schemaKind: Int {
        switch self {
        case .system: Healthledger_V1_Actor.Kind.system.rawValue
        case .operator: Healthledger_V1_Actor.Kind.operator.rawValue
        case .owner: Healthledger_V1_Actor.Kind.owner.rawValue
        case .app: Healthledger_V1_Actor.Kind.app.rawValue
        }
    }

    var schema: Healthledger_V1_Actor {
        var actor = Healthledger_V1_Actor()
        switch self {
        case .system: actor.kind = .system
        case .operator: actor.kind = .operator
        case .owner: actor.kind = .owner
        case .app(let source):
            actor.kind = .app
            actor.source = .init(source)
        }
        return actor
    }

    init(_ actor: Healthledger_V1_Actor) {
        switch actor.kind {
        case .operator: self = .operator
        case .owner: self = .owner
        case .app: self = .app(actor.source.model)
        case .system, .unspecified, .UNRECOGNIZED: self = .system
        }
    }
}
