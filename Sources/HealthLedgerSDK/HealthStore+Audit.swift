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

/// A page of the owner's access records.
public struct AccessRecordsPage: Sendable, Hashable {
    public var records: [AccessRecord]
    /// The position after the last record the page read (pass to
    /// ``HealthStore/accessRecords(_:after:limit:)`` for the next page, or later for the
    /// records written since); nil when it read none.
    public var next: [UInt8]?
    /// The page stopped at its limit: more may follow now.
    public var hasMore: Bool
    /// In the order of arrival: the place asked for is not this server's (another copy's, or
    /// one restored since); ``next`` is its end, and what arrived before it was not read.
    public var restarted = false
}

extension HealthStore {
    /// The ledger's access records that match `filter`, oldest first: one per call that
    /// returned health data, with who made it, which types it read and how many objects
    /// (the owner's only; an app gets `permissionDenied`). A call is on the record within
    /// about a second of its end.
    ///
    /// ```swift
    /// let today = try await store.accessRecords(AccessRecordFilter(since: Calendar.current.startOfDay(for: .now)))
    /// for line in AccessSummary(today.records).lines { print(line.principal, line.objects, line.type) }
    /// ```
    ///
    /// - Parameters:
    ///   - after: the previous page's ``AccessRecordsPage/next``.
    ///   - limit: records per page (0: 1,000; at most 10,000).
    ///   - inArrivalOrder: the records in the order they arrived at the server rather than by
    ///     time, to follow them: a follower's records land in their time's place, behind newer
    ///     ones, but always after the place a follow has reached. Without `after`, the page is
    ///     the end (no records; its `next` is where to follow from).
    public func accessRecords(
        _ filter: AccessRecordFilter = AccessRecordFilter(), after: [UInt8]? = nil, limit: Int = 0, inArrivalOrder: Bool = false
    ) async throws -> AccessRecordsPage {
        var request = Healthledger_V1_AccessRecordsRequest()
        if let since = filter.since { request.sinceUs = LedgerSchema.microseconds(since) }
        if let until = filter.until { request.untilUs = LedgerSchema.microseconds(until) }
        request.app = filter.app ?? ""
        request.type = filter.type ?? ""
        request.after = Data(after ?? [])
        request.limit = UInt32(clamping: max(limit, 0))
        request.inArrivalOrder = inArrivalOrder
        let response = try Self.decode(Healthledger_V1_AccessRecordsResponse.self, try await unary(.accessRecords, request))
        return AccessRecordsPage(
            records: response.records.map(AccessRecord.init), next: response.next.isEmpty ? nil : Array(response.next), hasMore: response.hasMore_p,
            restarted: response.restarted)
    }

    /// Every access record that matches `filter`, summed by reader and type: "com.example.walk
    /// read 1,440 HeartRate samples" (``AccessSummary``).
    public func accessSummary(_ filter: AccessRecordFilter = AccessRecordFilter()) async throws -> AccessSummary {
        var records: [AccessRecord] = []
        var after: [UInt8]?
        while true {
            let page = try await accessRecords(filter, after: after, limit: 10_000)
            records += page.records
            after = page.next ?? after
            if !page.hasMore { break }
        }
        return AccessSummary(records)
    }

}
