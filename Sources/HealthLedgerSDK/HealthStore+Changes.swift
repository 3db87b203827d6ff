import Foundation
import Synchronization
import LedgerSchema
import SwiftProtobuf

/// An anchored object query (HealthKit's `HKAnchoredObjectQueryDescriptor`): what changed
/// in objects of a type since an anchor.
///
/// ```swift
/// var anchor = savedAnchor                      // nil the first time
/// let changes = try await store.result(for: AnchoredObjectQueryDescriptor(type: heartRate, anchor: anchor))
/// apply(changes.addedObjects, changes.deletedObjects)
/// anchor = changes.newAnchor                    // keep its bytes for next time
/// ```
public struct AnchoredObjectQueryDescriptor: Sendable, Hashable {
    /// The types, each with the predicate its added objects must match (HealthKit's
    /// `predicates:`): one anchor covers them all.
    public var descriptors: [QueryDescriptor]
    /// Added objects must overlap this interval; deleted objects are reported whatever
    /// their dates. All when nil.
    public var interval: DateInterval?
    /// Where an earlier result stopped; nil starts from the beginning.
    public var anchor: QueryAnchor?
    /// At most this many changes (added plus deleted, all types together); 0 means no
    /// limit. Must be 0 for ``HealthStore/changes(for:)``.
    public var limit: Int
    /// The most changes per streamed batch. A call's batches grow to it: the first holds at
    /// most 128, each next at most twice as many, so a watched query's initial changes may
    /// come in several batches (the last has ``AnchoredObjectQueryResult/caughtUp`` set).
    public var batchSize: Int

    /// One type, with an optional predicate.
    public init(
        type: ObjectType, interval: DateInterval? = nil, predicate: ObjectPredicate? = nil, anchor: QueryAnchor? = nil, limit: Int = 0,
        batchSize: Int = 500
    ) {
        self.init(descriptors: [QueryDescriptor(type: type, predicate: predicate)], interval: interval, anchor: anchor, limit: limit, batchSize: batchSize)
    }

    /// Several types (HealthKit's `HKAnchoredObjectQueryDescriptor(predicates:anchor:limit:)`).
    public init(descriptors: [QueryDescriptor], interval: DateInterval? = nil, anchor: QueryAnchor? = nil, limit: Int = 0, batchSize: Int = 500) {
        self.descriptors = descriptors
        self.interval = interval
        self.anchor = anchor
        self.limit = limit
        self.batchSize = batchSize
    }

    /// The changes since the anchor, up to the limit (HealthKit's `result(for:)`).
    public func result(for store: HealthStore) async throws -> AnchoredObjectQueryResult { try await store.result(for: self) }

    /// The changes since the anchor, then each new batch as it commits (HealthKit's
    /// `results(for:)`); stopping the iteration cancels the call.
    public func results(for store: HealthStore) async throws -> AnchoredObjectQueryResults { try await store.changes(for: self) }
}

/// The changes an anchored query found.
public struct AnchoredObjectQueryResult: Sendable {
    /// Objects saved, or newly readable, since the anchor, in commit order.
    public var addedObjects: [HealthObject]
    /// Objects deleted, or no longer readable, since the anchor.
    public var deletedObjects: [DeletedObject]
    /// Resumes the query after these changes.
    public var newAnchor: QueryAnchor
    /// The query stopped at its limit and more changes follow.
    public var hasMore: Bool
    /// These changes reach the last one committed when they were read (in a watched query:
    /// the initial results are complete).
    public var caughtUp: Bool
}

extension HealthStore {
    /// Runs an anchored query once: the changes since the descriptor's anchor, up to its limit.
    public func result(for query: AnchoredObjectQueryDescriptor) async throws -> AnchoredObjectQueryResult {
        var result = AnchoredObjectQueryResult(addedObjects: [], deletedObjects: [], newAnchor: QueryAnchor(bytes: []), hasMore: false, caughtUp: false)
        for try await batch in try await openStream(.queryChanges, Self.changeRequest(query), decode: Self.changeResult) {
            // The first batch's arrays are taken as they are: appending them would copy every object.
            if result.addedObjects.isEmpty { result.addedObjects = batch.addedObjects } else { result.addedObjects += batch.addedObjects }
            if result.deletedObjects.isEmpty { result.deletedObjects = batch.deletedObjects } else { result.deletedObjects += batch.deletedObjects }
            result.newAnchor = batch.newAnchor
            result.hasMore = batch.hasMore
            result.caughtUp = batch.caughtUp
        }
        return result
    }

    /// Runs an anchored query that keeps going (HealthKit's long-running anchored query):
    /// the changes since the anchor, in batches, then each new batch of changes as it
    /// commits, until the iteration stops. Each element carries the anchor to resume after it.
    ///
    /// ```swift
    /// for try await changes in try await store.changes(for: AnchoredObjectQueryDescriptor(type: steps, anchor: anchor)) {
    ///     apply(changes.addedObjects, changes.deletedObjects)
    ///     anchor = changes.newAnchor
    /// }
    /// ```
    public func changes(for query: AnchoredObjectQueryDescriptor) async throws -> AnchoredObjectQueryResults {
        try await openStream(.watchChanges, Self.changeRequest(query), decode: Self.changeResult)
    }

    /// Observes a type (HealthKit's `HKObserverQuery`): returns once the observer is in
    /// place; the sequence then yields each time objects of `type` that this app may read
    /// are saved (overlapping `interval`) or deleted. Updates that arrive while one is
    /// still unread fold into it. Run an anchored query to learn what changed.
    public func observe(_ type: ObjectType, overlapping interval: DateInterval? = nil, matching predicate: ObjectPredicate? = nil) async throws
        -> ObserverUpdates
    {
        try await observe([QueryDescriptor(type: type, predicate: predicate)], overlapping: interval)
    }

    /// Observes several types at once (HealthKit's `HKObserverQuery(queryDescriptors:)`): one
    /// update whenever a matching object of any of them is saved, or one is deleted.
    public func observe(_ descriptors: [QueryDescriptor], overlapping interval: DateInterval? = nil) async throws -> ObserverUpdates {
        let request = Healthledger_V1_ObserveRequest.with { request in
            let (type, predicate, list) = Self.wireDescriptors(descriptors)
            request.type = type
            if let predicate { request.predicate = predicate }
            request.descriptors = list
            if let interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
        }
        let (stream, consumed) = try await openStream(.observe, request)
        let updates = ObserverUpdates(iterator: StreamIterator(stream.makeAsyncIterator()), consumed: consumed)
        guard try await updates.iterator.next() != nil else {
            throw RPCError(.internalError, "the server ended the observer before registering it")
        }
        consumed()
        return updates
    }

    /// One descriptor goes as `type` and `predicate`, several as `descriptors`.
    static func wireDescriptors(_ descriptors: [QueryDescriptor]) -> (
        type: String, predicate: Healthledger_V1_Predicate?, list: [Healthledger_V1_QueryDescriptor]
    ) {
        if descriptors.count == 1 { return (descriptors[0].type.identifier, descriptors[0].predicate.map(Healthledger_V1_Predicate.init), []) }
        return ("", nil, descriptors.map { descriptor in
            .with {
                $0.type = descriptor.type.identifier
                if let predicate = descriptor.predicate { $0.predicate = .init(predicate) }
            }
        })
    }

    static func changeRequest(_ query: AnchoredObjectQueryDescriptor) -> Healthledger_V1_ChangeQueryRequest {
        .with { request in
            let (type, predicate, list) = wireDescriptors(query.descriptors)
            request.type = type
            if let predicate { request.predicate = predicate }
            request.descriptors = list
            if let interval = query.interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
            if let anchor = query.anchor { request.anchor = Data(anchor.bytes) }
            request.limit = UInt32(clamping: query.limit)
            request.batchSize = UInt32(clamping: query.batchSize)
        }
    }

    /// A ChangeBatch, read in place.
    static func changeResult(_ bytes: [UInt8]) throws -> AnchoredObjectQueryResult {
        var result = AnchoredObjectQueryResult(addedObjects: [], deletedObjects: [], newAnchor: QueryAnchor(bytes: []), hasMore: false, caughtUp: false)
        var decoder = HealthObjectDecoder()
        try readBatch(bytes, fields: ChangeBatchField.self) { field, value in
            switch (field, value) {
            case (.added, .bytes(let object)): result.addedObjects.append(try decoder.decode(object))
            case (.deleted, .bytes(let bytes)):
                result.deletedObjects.append(try Healthledger_V1_DeletedObject(serializedBytes: Array(bytes)).model())
            case (.anchor, .bytes(let anchor)): result.newAnchor = QueryAnchor(bytes: Array(anchor))
            case (.hasMore, .varint(let flag)): result.hasMore = flag != 0
            case (.caughtUp, .varint(let flag)): result.caughtUp = flag != 0
            default: break
            }
        }
        return result
    }
}

/// The batches of a watched anchored query, as they commit.
public typealias AnchoredObjectQueryResults = DecodedStream<AnchoredObjectQueryResult>

/// An observer's updates: one element each time what it observes changed. Iterate it once.
public struct ObserverUpdates: AsyncSequence, Sendable {
    public typealias Element = Void
    let iterator: StreamIterator
    let consumed: @Sendable () -> Void

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let iterator: StreamIterator
        let consumed: @Sendable () -> Void

        public mutating func next() async throws -> Void? {
            guard try await iterator.next() != nil else { return nil }
            consumed()
            return ()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(iterator: iterator, consumed: consumed) }
}

/// A stream's iterator shared by reference, so the registration message can be taken
/// before the sequence is handed out. One consumer at a time: a second task calling
/// ``next()`` while one waits gets an error instead of racing it.
final class StreamIterator: @unchecked Sendable {
    /// Only touched by the one caller that holds `busy`.
    private var base: CallStream.AsyncIterator
    private let busy = Mutex(false)

    init(_ base: CallStream.AsyncIterator) {
        self.base = base
    }

    func next() async throws -> [UInt8]? {
        let claimed = busy.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard claimed else { throw RPCError(.failedPrecondition, "the updates are already being waited for by another task") }
        defer { busy.withLock { $0 = false } }
        return try await base.next()
    }
}
