import HealthLedgerRPC
import HealthModel
import Ledger

/// The status a failure of the store or a ledger ends a call with.
extension LedgerFailure: RPCErrorConvertible {
    public var rpcError: RPCError {
        switch kind {
        case .notFound: RPCError(.notFound, message, cause: self)
        case .alreadyExists: RPCError(.alreadyExists, message, cause: self)
        case .invalidArgument: RPCError(.invalidArgument, message, healthErrorCode: .invalidArgument, cause: self)
        case .corrupted: RPCError(.dataLoss, message, healthErrorCode: .databaseInaccessible, cause: self)
        case .storage: RPCError(.unavailable, message, healthErrorCode: .databaseInaccessible, cause: self)
        case .failedPrecondition: RPCError(.failedPrecondition, message, cause: self)
        case .diverged: RPCError(.outOfRange, message, cause: self)
        }
    }
}
