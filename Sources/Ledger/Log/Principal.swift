import HealthModel
import LedgerSchema

extension Principal {
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
