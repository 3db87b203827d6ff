import Foundation
import LedgerSchema
import SwiftProtobuf

/// A batch of the audit trail, with the head the server read it at.
public struct AuditBatch: Sendable, Hashable {
    public var events: [AuditEvent]
    /// The last event's sequence and hash when the batch was read.
    public var headSequence: UInt64
    public var headHash: [UInt8]
    /// Every event up to the head has been read.
    public var caughtUp: Bool
}

extension HealthStore {
    /// The ledger's events that match `filter`, each told in a sentence: who did what, when
    /// (the owner's only; an app gets `permissionDenied`). Streams up to the head as the
    /// server found it; the last batch has ``AuditBatch/caughtUp`` set.
    ///
    /// ```swift
    /// for try await batch in try await store.audit(AuditFilter(actor: .app("com.example.walk"))) {
    ///     for event in batch.events { print(event.sequence, event.sentence) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - includeStored: also fetch each event's stored bytes (``AuditEvent/stored``), to
    ///     keep a copy of the log that can be verified elsewhere.
    ///   - batchSize: events per batch (at most 5,000).
    public func audit(_ filter: AuditFilter = AuditFilter(), includeStored: Bool = false, batchSize: Int = 500) async throws -> DecodedStream<AuditBatch> {
        try await openStream(.audit, Healthledger_V1_AuditRequest(filter, includeStored: includeStored, batchSize: batchSize), decode: Self.auditBatch)
    }

    /// ``audit(_:includeStored:batchSize:)``, then the events that match as they commit, until
    /// the iteration stops. The first batch that reaches the head has ``AuditBatch/caughtUp``
    /// set (it may be empty). The filter takes no upper bound (`toSequence`, `until`).
    public func watchAudit(_ filter: AuditFilter = AuditFilter(), includeStored: Bool = false, batchSize: Int = 500) async throws
        -> DecodedStream<AuditBatch>
    {
        try await openStream(.watchAudit, Healthledger_V1_AuditRequest(filter, includeStored: includeStored, batchSize: batchSize), decode: Self.auditBatch)
    }

    @Sendable static func auditBatch(_ bytes: [UInt8]) throws -> AuditBatch {
        let batch = try Healthledger_V1_AuditBatch(serializedBytes: bytes)
        return AuditBatch(
            events: try batch.events.map(AuditEvent.init), headSequence: batch.headSequence, headHash: Array(batch.headHash), caughtUp: batch.caughtUp)
    }
}
