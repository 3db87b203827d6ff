import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

/// The results of a sample or correlation query as serialized `healthledger.v1.HealthObject`
/// messages, read a batch at a time from one snapshot: for a server that streams them as
/// its client takes them, holding one batch in memory rather than the whole result.
///
/// Every batch reads the snapshot the first one took, so the results are those of one
/// moment whatever commits in between. While the cursor waits between batches it holds
/// nothing the ledger must wait for: when the ledger needs its snapshot gone (its file
/// grows, or too many paused readers hold reader slots), the next batch reads a newer
/// snapshot, taking the reader's access again, and goes on after the last object it visited
/// in the query's order.
///
/// Read it from one task at a time (a stream's own).
///
/// ```swift
/// let cursor = try ledger.sampleCursor(query, as: principal)
/// defer { cursor.close() }
/// while case let batch = try cursor.next(maxCount: 500, maxBytes: 1 << 20), !batch.isEmpty {
///     try await send(batch)
/// }
/// ```
public final class QueryCursor: @unchecked Sendable {
    private let ledger: Ledger
    private let query: SampleQuery
    private let memberPredicates: [(ObjectType, ObjectPredicate)]
    private let principal: Principal
    private let snapshot: Snapshot
    /// The candidates in the current snapshot (set by every batch that starts one).
    private var candidates: Candidates?
    /// The last candidate visited, matching or not: the next batch begins after it.
    private var position: IndexEntry?
    private var delivered = 0
    private var finished = false

    init(_ ledger: Ledger, query: SampleQuery, memberPredicates: [(ObjectType, ObjectPredicate)], principal: Principal) throws {
        try Ledger.validate(query, memberPredicates: memberPredicates)
        self.ledger = ledger
        self.query = query
        self.memberPredicates = memberPredicates
        self.principal = principal
        snapshot = ledger.environment.snapshot()
    }

    deinit { snapshot.close() }

    /// The next results: at most `maxCount` objects, and no more once their encoding as a
    /// `SampleBatch`'s `objects` reaches `maxBytes` (a batch holds at least one object);
    /// empty when there are no more.
    ///
    /// - Parameter onScope: told each read scope a batch took (the query's type when the
    ///   batch starts a snapshot, and a correlation's member types), for a server that must
    ///   end the stream if that access is taken away.
    public func next(maxCount: Int, maxBytes: Int, onScope: (ReadScope) -> Void = { _ in }) throws -> [[UInt8]] {
        guard !finished else { return [] }
        let wanted = query.limit == 0 ? maxCount : min(maxCount, query.limit - delivered)
        let batch = try snapshot.read { txn, fresh in
            let view = LedgerSnapshot(txn, ledger.databases)
            let context = PredicateContext(principal: principal, snapshot: view)
            // The first batch starts the snapshot, as does the first after the ledger ended it.
            if fresh {
                let scope = try ReadScope(principal, type: query.type, in: view)
                onScope(scope)
                candidates = try ledger.candidates(
                    of: query.type, plan: PredicatePlan(query.predicate, range: TimeRange(query.interval)), sort: query.sort, scope: scope,
                    context: context)
            }
            var batch: [[UInt8]] = []
            var bytes = 0
            var stopped = false
            try ledger.visitResults(
                of: query, memberPredicates: memberPredicates, candidates: candidates!, after: position, context: context, onScope: onScope
            ) { entry, result in
                position = entry
                guard let (stored, assembled) = result else { return true }
                let object = try assembled.map { try Healthledger_V1_HealthObject($0).serializedBytes() } ?? LedgerEvent.body(stored: stored)
                batch.append(object)
                bytes += ProtoWriter.messageSize(field: SaveRequestField.objects, length: object.count)
                stopped = batch.count >= wanted || bytes >= maxBytes
                return !stopped
            }
            delivered += batch.count
            finished = !stopped || (query.limit > 0 && delivered >= query.limit)
            return batch
        }
        if finished { snapshot.close() }
        return batch
    }

    /// Ends the cursor's snapshot; later batches are empty.
    public func close() {
        finished = true
        snapshot.close()
    }
}

extension Ledger {
    /// A cursor over a sample query's results as `principal` may read them (what
    /// ``samples(_:as:)`` returns), serialized straight from the log.
    ///
    /// - Throws: `invalidArgument` for a query that cannot run, before anything is read.
    public func sampleCursor(_ query: SampleQuery, as principal: Principal) throws -> QueryCursor {
        try QueryCursor(self, query: query, memberPredicates: [], principal: principal)
    }

    /// A cursor over a correlation query's results, each correlation with the members
    /// `principal` may read (what ``correlations(_:as:)`` returns).
    public func correlationCursor(_ query: CorrelationQuery, as principal: Principal) throws -> QueryCursor {
        try QueryCursor(self, query: query.sampleQuery, memberPredicates: try query.orderedMemberPredicates(), principal: principal)
    }
}
