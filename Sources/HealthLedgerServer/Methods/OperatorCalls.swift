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
    /// This server's standing in its cluster, if it is a member of one.
    var cluster: ClusterRole?
    /// Returns once a write to `ledger` may be answered: when a follower has it, on a primary
    /// with semi-synchronous acknowledgement (``CallDispatcher/afterFollowers(of:)``).
    var replicated: @Sendable (Ledger) async throws -> Void = { _ in }
    /// Returns once the erasure of a ledger, noted at a position of the store's changes, may
    /// be answered: when a follower erased its copy too (``CallDispatcher/afterFollowers(ofErasureOf:at:)``).
    var erasureReplicated: @Sendable (String, LedgerChanges.Cursor) async throws -> Void = { _, _ in }

    func createLedger(_ request: Healthledger_V1_CreateLedgerRequest) async throws -> [UInt8] {
        let ledger = try store.createLedger(id: request.ledgerID.isEmpty ? nil : request.ledgerID, displayName: request.displayName)
        try await replicated(ledger)
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
        let ledger = try store.ledger(request.ledgerID)
        let credential = try await ledger.issueCredential(
            for: principal, label: request.label, lifetime: try Self.lifetime(seconds: request.expiresInSeconds), by: .operator)
        try await replicated(ledger)
        return try Healthledger_V1_IssuedCredential.with { $0.credential = credential }.serializedBytes()
    }

    func rotateCredential(_ request: Healthledger_V1_RotateCredentialRequest) async throws -> [UInt8] {
        guard request.graceSeconds <= UInt64(CredentialLifetime.maximumGrace.components.seconds) else {
            throw HealthError.invalidArgument("a rotation's grace period is 0 s to 365 days, got \(request.graceSeconds) s", field: "grace_seconds")
        }
        let ledger = try store.ledger(request.ledgerID)
        let credential = try await ledger.rotateCredential(
            id: request.credentialID, grace: .seconds(request.graceSeconds),
            lifetime: request.hasExpiresInSeconds ? try Self.lifetime(seconds: request.expiresInSeconds) : nil, by: .operator)
        try await replicated(ledger)
        return try Healthledger_V1_IssuedCredential.with { $0.credential = credential }.serializedBytes()
    }

    func revokeCredential(_ request: Healthledger_V1_LedgerCredentialRequest) async throws -> [UInt8] {
        let ledger = try store.ledger(request.ledgerID)
        try await ledger.revokeCredential(id: request.credentialID, by: .operator, effectiveAfter: .seconds(Int64(clamping: request.effectiveInSeconds)))
        try await replicated(ledger)
        return try Healthledger_V1_Empty().serializedBytes()
    }

    func eraseLedger(_ request: Healthledger_V1_EraseLedgerRequest) async throws -> [UInt8] {
        let noted = try await store.eraseLedger(request.ledgerID, reason: request.reason, waitingUpTo: LedgerStore.erasureDrain)
        try await erasureReplicated(request.ledgerID, noted)
        return try Healthledger_V1_Empty().serializedBytes()
    }

    func listCredentials(_ request: Healthledger_V1_LedgerCredentialRequest) throws -> [UInt8] {
        try Healthledger_V1_CredentialList(try store.ledger(request.ledgerID).credentials()).serializedBytes()
    }

    /// A lifetime in seconds from a request: 0 is unlimited.
    private static func lifetime(seconds: UInt64) throws -> CredentialLifetime {
        guard seconds != 0 else { return .unlimited }
        guard seconds <= UInt64(CredentialLifetime.maximum.components.seconds) else {
            throw HealthError.invalidArgument("a credential's lifetime is at most 3650 days, got \(seconds) s", field: "expires_in_seconds")
        }
        return .expiring(after: .seconds(seconds))
    }
}
