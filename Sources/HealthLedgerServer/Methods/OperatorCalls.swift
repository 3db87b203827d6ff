import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// One call of the operator's methods: ledgers and credentials on the store. The operator
/// reads no health data: these are all the operator's credential opens.
struct OperatorCall {
    let store: LedgerStore
    let payload: [UInt8]

    func run(_ method: RPCMethod) async throws -> [UInt8] {
        switch method {
        case .createLedger:
            let request = try decode(Healthledger_V1_CreateLedgerRequest.self)
            let ledger = try store.createLedger(id: request.ledgerID.isEmpty ? nil : request.ledgerID, displayName: request.displayName)
            return try Healthledger_V1_LedgerList.with { $0.ledgerIds = [ledger.id] }.serializedBytes()
        case .listLedgers:
            _ = try decode(Healthledger_V1_Empty.self)
            return try Healthledger_V1_LedgerList.with { $0.ledgerIds = try store.ledgerIDs() }.serializedBytes()
        case .issueCredential:
            let request = try decode(Healthledger_V1_IssueCredentialRequest.self)
            let principal = Principal(request.principal)
            switch principal {
            case .owner, .app: break
            case .system, .operator:
                throw HealthError.invalidArgument("credentials are issued to the owner or to an app (principal kind OWNER or APP)", field: "principal")
            }
            let credential = try await store.ledger(request.ledgerID).issueCredential(for: principal, label: request.label, by: .operator)
            return try Healthledger_V1_IssuedCredential.with { $0.credential = credential }.serializedBytes()
        case .revokeCredential:
            let request = try decode(Healthledger_V1_LedgerCredentialRequest.self)
            try await store.ledger(request.ledgerID).revokeCredential(id: request.credentialID, by: .operator)
            return try Healthledger_V1_Empty().serializedBytes()
        case .listCredentials:
            let request = try decode(Healthledger_V1_LedgerCredentialRequest.self)
            let credentials = try store.ledger(request.ledgerID).credentials()
            return try Healthledger_V1_CredentialList.with {
                $0.credentials = credentials.map { info in
                    .with {
                        $0.id = info.id
                        $0.principal = info.principal.schema
                        $0.revoked = info.revoked
                    }
                }
            }.serializedBytes()
        default:
            throw RPCError(.internalError, "\(method.rawValue) is not an operator method")
        }
    }

    private func decode<M: SwiftProtobuf.Message>(_ type: M.Type) throws -> M {
        do { return try M(serializedBytes: payload) } catch {
            throw HealthError.invalidArgument("the request is not a valid \(M.protoMessageName)", field: "payload")
        }
    }
}
