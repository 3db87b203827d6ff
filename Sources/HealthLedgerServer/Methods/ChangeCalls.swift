import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// The change-following methods: anchored queries (one-shot and watched) and observers.
extension LedgerCall {
    /// A batch's objects stay under this many bytes (plus one object).
    static let batchBytes = 1 << 20

    /// The most changes the `index`th batch of a call holds (from 0), under the request's
    /// `batchSize`: 128, then twice as many each batch. A large page so goes out in pieces,
    /// and the client decodes the first while the server reads the next; a long stream soon
    /// reaches the batches it asked for.
    static func rampedBatchSize(_ batchSize: Int, index: Int) -> Int {
        min(batchSize, 128 << min(index, 7))
    }

    private func changeQuery(_ request: Healthledger_V1_ChangeQueryRequest) throws -> (query: ChangeQuery, batchSize: Int) {
        let query = ChangeQuery(
            descriptors: try Self.descriptors(type: request.type, predicate: request.hasPredicate ? request.predicate : nil, request.descriptors),
            interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
            anchor: request.anchor.isEmpty ? nil : QueryAnchor(bytes: Array(request.anchor)), limit: Int(request.limit))
        return (query, Self.batchSize(request.batchSize, default: 500))
    }

    /// A request's descriptors: `type` (and `predicate`) alone, or the `descriptors` list.
    static func descriptors(
        type: String, predicate: Healthledger_V1_Predicate?, _ list: [Healthledger_V1_QueryDescriptor]
    ) throws -> [QueryDescriptor] {
        if list.isEmpty { return [QueryDescriptor(type: try ObjectType(type), predicate: try predicate?.model())] }
        guard type.isEmpty, predicate == nil else {
            throw HealthError.invalidArgument("give either type (and predicate) or descriptors, not both", field: "descriptors")
        }
        guard list.count <= QueryDescriptor.maximumCount else {
            throw HealthError.invalidArgument("a query takes at most \(QueryDescriptor.maximumCount) descriptors", field: "descriptors")
        }
        return try list.map { QueryDescriptor(type: try ObjectType($0.type), predicate: $0.hasPredicate ? try $0.predicate.model() : nil) }
    }

    /// QueryChanges: the changes after the anchor, up to the limit, in batches.
    func queryChanges(
        _ request: Healthledger_V1_ChangeQueryRequest, onScope: (ReadScope) -> Void, _ emit: (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        var (query, batchSize) = try changeQuery(request)
        let limit = query.limit
        var remaining = limit
        for index in 0... {
            try Task.checkCancellation()
            let size = Self.rampedBatchSize(batchSize, index: index)
            query.limit = limit == 0 ? size : min(size, remaining)
            var batch = try changeBatch(query, onScope: onScope)
            let page = batch.page
            remaining -= page.count
            let limitReached = limit > 0 && remaining == 0
            try await emit(batch.finish(hasMore: limitReached && page.hasMore, caughtUp: !page.hasMore))
            if !page.hasMore || limitReached { return }
            query.anchor = page.anchor
        }
    }

    /// WatchChanges: the changes after the anchor, then more each time some commit, until
    /// the call is cancelled. Later batches go out only when they hold a change.
    func watchChanges(
        _ request: Healthledger_V1_ChangeQueryRequest, onScope: @escaping (ReadScope) -> Void, _ emit: @escaping (_ batch: [UInt8]) async throws -> Void
    ) async throws {
        var (query, batchSize) = try changeQuery(request)
        guard query.limit == 0 else {
            throw HealthError.invalidArgument("a watched query streams every change: page it with batch_size, not limit", field: "limit")
        }
        var index = 0
        try await following(query.types) { first in
            var owesCaughtUp = false
            while true {
                query.limit = Self.rampedBatchSize(batchSize, index: index)
                var batch = try changeBatch(query, onScope: onScope)
                let page = batch.page
                query.anchor = page.anchor
                if first || page.count > 0 || (owesCaughtUp && !page.hasMore) {
                    try await emit(batch.finish(hasMore: false, caughtUp: !page.hasMore))
                    owesCaughtUp = page.hasMore
                    index += 1
                }
                if !page.hasMore { return }
            }
        }
    }

    /// Observe: one message once the observer is registered, then one per commit (or run of
    /// commits the client has not yet taken) that changed what the caller may see.
    func observe(
        _ request: Healthledger_V1_ObserveRequest, onScope: @escaping (ReadScope) -> Void, _ emit: @escaping (_ update: [UInt8]) async throws -> Void
    ) async throws {
        var query = ChangeQuery(
            descriptors: try Self.descriptors(type: request.type, predicate: request.hasPredicate ? request.predicate : nil, request.descriptors),
            interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil))
        try QueryDescriptor.validate(query.descriptors)
        try await following(query.types) { first in
            if first {
                query.anchor = try ledger.latestAnchor(for: query.types, as: principal, onScope: onScope)
                return try await emit(try Healthledger_V1_ObserverUpdate.with { $0.registered = true }.serializedBytes())
            }
            let (changed, anchor) = try ledger.hasChanges(query, as: principal, onScope: onScope)
            query.anchor = anchor
            if changed { try await emit([]) }
        }
    }

    /// Runs `check(true)` once, then `check(false)` after each commit that touches one of
    /// `types` (every commit when nil; commits during a check fold into one more run),
    /// until the call is cancelled.
    func following(_ types: [ObjectType]?, _ check: (_ first: Bool) async throws -> Void) async throws {
        let (commits, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        // Registered before the first read, so no commit falls between the two.
        let token = types.map { ledger.changeWatchers.add(types: $0) { signal.yield() } } ?? ledger.changeWatchers.addForEveryCommit { signal.yield() }
        defer {
            ledger.changeWatchers.remove(token)
            signal.finish()
        }
        try await check(true)
        for await _ in commits {
            try Task.checkCancellation()
            try await check(false)
        }
        throw CancellationError()
    }

    /// One page of changes as a `ChangeBatch` under way: its added objects are written into
    /// it as the log stores them, while the page is read.
    private func changeBatch(_ query: ChangeQuery, onScope: (ReadScope) -> Void) throws -> ChangeBatchWriter {
        var writer = ProtoWriter(capacity: 64 << 10)
        let page = try ledger.encodedChanges(query, as: principal, maximumBytes: Self.batchBytes, onScope: onScope) { writer.message(field: ChangeBatchField.added, $0) }
        reads.add(objects: page.count)
        return ChangeBatchWriter(writer: writer, page: page)
    }
}

/// A `ChangeBatch` whose added objects are written; ``finish(hasMore:caughtUp:)`` adds the rest.
struct ChangeBatchWriter {
    fileprivate var writer: ProtoWriter
    let page: WrittenChangePage

    /// The batch, with the page's deleted objects, its anchor and the flags after its added objects.
    mutating func finish(hasMore: Bool, caughtUp: Bool) throws -> [UInt8] {
        for deleted in page.deleted {
            writer.message(field: ChangeBatchField.deleted, try Healthledger_V1_DeletedObject(deleted).serializedBytes())
        }
        writer.bytes(field: ChangeBatchField.anchor, page.anchor.bytes)
        if hasMore { writer.varint(field: ChangeBatchField.hasMore, 1) }
        if caughtUp { writer.varint(field: ChangeBatchField.caughtUp, 1) }
        return writer.buffer
    }
}
