import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// The owner's audit trail: Audit and WatchAudit.
extension LedgerCall {
    /// Audit (`follow` false): the matching events up to the head as the call found it, in
    /// batches; the last batch (maybe empty) has `caught_up` set.
    /// WatchAudit (`follow` true): the same, then the matching events as they commit.
    func audit(
        _ request: Healthledger_V1_AuditRequest, follow: Bool, _ emit: @escaping (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        var filter = try request.filter()
        if follow, filter.toSequence != nil || filter.until != nil {
            throw HealthError.invalidArgument("a watched audit follows new events: it takes no to_sequence or until_us", field: "to_sequence")
        }
        let batchSize = Int(min(request.batchSize == 0 ? 500 : request.batchSize, UInt32(Ledger.maximumAuditPage)))
        var next: UInt64 = 1
        func page() throws -> AuditPage {
            let page = try ledger.audit(filter, from: next, limit: batchSize, includeStored: request.includeStored, as: principal)
            next = page.next
            return page
        }
        guard follow else {
            // The head as the call found it bounds the stream.
            let head = try ledger.head().sequence
            filter.toSequence = min(filter.toSequence ?? head, head)
            while true {
                try Task.checkCancellation()
                let page = try page()
                if !page.events.isEmpty || page.caughtUp { try await emit(try Self.auditBatch(page)) }
                if page.caughtUp { return }
            }
        }
        try await following(nil) { first in
            var owesCaughtUp = first
            while true {
                let page = try page()
                if !page.events.isEmpty || (owesCaughtUp && page.caughtUp) {
                    try await emit(try Self.auditBatch(page))
                    if page.caughtUp { owesCaughtUp = false }
                }
                if page.caughtUp { return }
            }
        }
    }

    static func auditBatch(_ page: AuditPage) throws -> [UInt8] {
        try Healthledger_V1_AuditBatch.with {
            $0.events = page.events.map(Healthledger_V1_AuditEvent.init)
            $0.headSequence = page.headSequence
            $0.headHash = Data(page.headHash)
            $0.caughtUp = page.caughtUp
        }.serializedBytes()
    }
}

/// The Merkle tree over the log: the signed tree head and the proofs (the owner's).
extension LedgerCall {
    func treeHead(_: Healthledger_V1_Empty) throws -> [UInt8] {
        return try Healthledger_V1_SignedTreeHead(try ledger.signedTreeHead(as: principal, replicatedUpTo: try replicated())).serializedBytes()
    }

    /// How much of the log survives a failover, which is what a tree head may sign (nil: all).
    private func replicated() throws -> UInt64? {
        switch treeHeads {
        case .everything:
            return nil
        case .connectedFollowers(let window):
            // With a follower connected, only what it has durable.
            return ledger.followers.connected(within: window).first?.sequence
        case .cluster(let role):
            let group = Placement.group(of: ledger.id)
            switch role.standing(in: group) {
            case .leader:
                // What the standby has (it alone may take over); all of it with none.
                let awaited = role.awaitedFollowers(in: group)
                return awaited.isEmpty ? nil : awaited.map { ledger.followers.acknowledged(by: $0) ?? 0 }.min()
            case .follower(let node, let address, _):
                // A follower's tail may be one the next leader does not have.
                throw RPCError(.failedPrecondition, "this ledger's tree heads are signed by its primary '\(node)': ask \(address)", primary: address)
            case .electing:
                throw RPCError(.unavailable, "this ledger has no primary at the moment to sign a tree head: try again shortly")
            }
        }
    }

    func inclusionProof(_ request: Healthledger_V1_InclusionProofRequest) throws -> [UInt8] {
        let proof = try ledger.inclusionProof(sequence: request.sequence, treeSize: request.treeSize == 0 ? nil : request.treeSize, as: principal)
        return try Healthledger_V1_InclusionProof(proof).serializedBytes()
    }

    func consistencyProof(_ request: Healthledger_V1_ConsistencyProofRequest) throws -> [UInt8] {
        let proof = try ledger.consistencyProof(from: request.firstSize, to: request.secondSize == 0 ? nil : request.secondSize, as: principal)
        return try Healthledger_V1_ConsistencyProof(proof).serializedBytes()
    }
}

/// The owner's access records: AccessRecords.
extension LedgerCall {
    /// A page of the records that match the request's filters, oldest first (or in the order
    /// they arrived, for following them).
    func accessRecords(_ request: Healthledger_V1_AccessRecordsRequest) throws -> [UInt8] {
        let filter = AccessRecordFilter(
            since: request.hasSinceUs ? date(microseconds: request.sinceUs) : nil, until: request.hasUntilUs ? date(microseconds: request.untilUs) : nil,
            app: request.app.isEmpty ? nil : request.app, type: request.type.isEmpty ? nil : try ObjectType(request.type).identifier)
        let after = request.after.isEmpty ? nil : Array(request.after)
        let page =
            request.inArrivalOrder
            ? try ledger.accessRecordsInArrivalOrder(filter, after: after, limit: Int(request.limit), as: principal)
            : try ledger.accessRecords(filter, after: after, limit: Int(request.limit), as: principal)
        return try Healthledger_V1_AccessRecordsResponse.with { response in
            response.records = page.records.map(Healthledger_V1_AccessRecord.init)
            if let next = page.next { response.next = Data(next) }
            response.hasMore_p = page.hasMore
            response.restarted = page.restarted
        }.serializedBytes()
    }

    private func date(microseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(microseconds) / 1e6) }
}
