import Foundation
import LedgerSchema
import SwiftProtobuf

/// The operator's methods, for a store whose credential is an operator credential
/// (`hl1:_operator:<id>:<secret>`, from `healthledger admin issue-operator-credential`):
/// ledgers and their credentials, never health data.
extension HealthStore {
    /// Creates a ledger; a random id when `id` is nil. Returns its id.
    public func createLedger(id: String? = nil, displayName: String = "") async throws -> String {
        let request = Healthledger_V1_CreateLedgerRequest.with {
            $0.ledgerID = id ?? ""
            $0.displayName = displayName
        }
        return try Self.decode(Healthledger_V1_LedgerList.self, try await unary(.createLedger, request)).ledgerIds.first ?? ""
    }

    /// The ids of the server's ledgers, sorted.
    public func ledgers() async throws -> [String] {
        try Self.decode(Healthledger_V1_LedgerList.self, try await unary(.listLedgers, Healthledger_V1_Empty())).ledgerIds
    }

    /// Issues the owner (`.owner`) or an app (`.app(source)`) of `ledger` a credential,
    /// returned once: only its hash is kept.
    public func issueCredential(ledger: String, for principal: Principal, label: String = "") async throws -> String {
        let request = Healthledger_V1_IssueCredentialRequest.with {
            $0.ledgerID = ledger
            $0.principal = principal.schema
            $0.label = label
        }
        return try Self.decode(Healthledger_V1_IssuedCredential.self, try await unary(.issueCredential, request)).credential
    }

    /// Revokes a credential of `ledger` by id: its next call is refused and its streams end.
    public func revokeCredential(ledger: String, id: String) async throws {
        _ = try await unary(.revokeCredential, Healthledger_V1_LedgerCredentialRequest.with {
            $0.ledgerID = ledger
            $0.credentialID = id
        })
    }

    /// The credentials of `ledger`: id, principal, revoked or not.
    public func credentials(ledger: String) async throws -> [(id: String, principal: Principal, revoked: Bool)] {
        let list = try Self.decode(
            Healthledger_V1_CredentialList.self, try await unary(.listCredentials, Healthledger_V1_LedgerCredentialRequest.with { $0.ledgerID = ledger }))
        return list.credentials.map { ($0.id, Principal($0.principal), $0.revoked) }
    }
}
