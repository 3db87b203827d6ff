import Foundation
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// The owner's view of the ledger's credentials: LedgerCredentials and RevokeLedgerCredential.
extension LedgerCall {
    /// Every credential of the ledger: the owner's and the apps', active or not.
    func ledgerCredentials(_: Healthledger_V1_Empty) throws -> [UInt8] {
        try Healthledger_V1_CredentialList(try ledger.credentials()).serializedBytes()
    }

    /// Revokes one of the ledger's credentials (`ledger_id` empty or this ledger's).
    func revokeLedgerCredential(_ request: Healthledger_V1_LedgerCredentialRequest) async throws -> [UInt8] {
        guard request.ledgerID.isEmpty || request.ledgerID == ledger.id else {
            throw HealthError.invalidArgument("the owner revokes credentials of their own ledger, '\(ledger.id)'", field: "ledger_id")
        }
        try await ledger.revokeCredential(id: request.credentialID, by: principal, effectiveAfter: .seconds(Int64(clamping: request.effectiveInSeconds)))
        return try Healthledger_V1_Empty().serializedBytes()
    }
}

extension Healthledger_V1_CredentialList {
    init(_ credentials: [CredentialInfo], at now: Date = Date()) {
        self.init()
        self.credentials = credentials.map { info in
            .with {
                $0.id = info.id
                $0.principal = info.principal.schema
                $0.label = info.label
                $0.issuedUs = info.issued.map(microseconds) ?? 0
                $0.expiresUs = info.expires.map(microseconds) ?? 0
                $0.revokedUs = info.revocation.map { $0 == .distantPast ? 0 : microseconds($0) } ?? 0
                $0.replacedBy = info.replacedBy
                switch info.refusal(at: now) {
                case .revoked?: $0.revoked = true
                case .expired?: $0.expired = true
                case .unknown?, nil: break
                }
            }
        }
    }
}
