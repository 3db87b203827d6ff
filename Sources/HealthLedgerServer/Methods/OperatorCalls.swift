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

    func createLedger(_ request: Healthledger_V1_CreateLedgerRequest) throws -> [UInt8] {
        let ledger = try store.createLedger(id: request.ledgerID.isEmpty ? nil : request.ledgerID, displayName: request.displayName)
        return try Healthledger_V1_LedgerList.with { $0.ledgerIds = [ledger.id] }.serializedBytes()
    }

    func listLedgers(_: Healthledger_V1_Empty) throws -> [UInt8] {
        try Healthledger_V1_LedgerList.with { $0.ledgerIds = try store.ledgerIDs() }.serializedBytes()
    }

    func issueCredential(_ request: Healthledger_V1_IssueCredentialRequest) async throws -> [UInt8] {
        let principal = Principal(request.principal)
        switch principal {
        case .owner, .app: break
        case .system, .operator:
            throw HealthError.invalidArgument("credentials are issued to the owner or to an app (principal kind OWNER or APP)", field: "principal")
        }
        let credential = try await store.ledger(request.ledgerID).issueCredential(for: principal, label: request.label, by: .operator)
        return try Healthledger_V1_IssuedCredential.with { $0.credential = credential }.serializedBytes()
    }

    func revokeCredential(_ request: Healthledger_V1_LedgerCredentialRequest) async throws -> [UInt8] {
        try await store.ledger(request.ledgerID).revokeCredential(id: request.credentialID, by: .operator)
        return try Healthledger_V1_Empty().serializedBytes()
    }

    func listCredentials(_ request: Healthledger_V1_LedgerCredentialRequest) throws -> [UInt8] {
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
    }
}
