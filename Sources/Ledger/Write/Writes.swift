import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

/// An object ready for the write transaction: validated and encoded outside it.
struct PreparedObject: Sendable {
    let summary: ObjectSummary
    let body: [UInt8]
    /// A correlation's members, saved just before it.
    var members: [PreparedObject] = []
}

extension Ledger {
    /// Saves objects atomically: all of them, or (on any error) none.
    ///
    /// Objects with a sync identifier follow docs/SEMANTICS.md §4: a higher version replaces the
    /// stored object (leaving a tombstone), an equal or lower one is ignored and reported.
    /// The call returns once the data is on disk.
    ///
    /// ```swift
    /// let results = try await ledger.save([.quantitySample(sample)], by: .app(source))
    /// ```
    ///
    /// - Parameter principal: for an app, the objects' source is set to the app's source.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming the object and field at fault,
    ///   including a UUID that already exists; ``LedgerFailure`` when storage fails.
    @discardableResult
    public func save(_ objects: [HealthObject], by principal: Principal) async throws -> [SaveResult] {
        try await save(received: objects.map { ReceivedObject(object: $0) }, by: principal)
    }

    /// ``save(_:by:)`` for objects as a client sent them: an object whose received bytes are
    /// canonical (``ReceivedObject/canonicalBytes``) is stored as those bytes, not encoded again.
    @discardableResult
    public func save(received: [ReceivedObject], by principal: Principal) async throws -> [SaveResult] {
        try await withCheckedThrowingContinuation { continuation in save(received: received, by: principal) { continuation.resume(with: $0) } }
    }

    /// ``save(received:by:)`` for a caller that is not a task (the server answering a small
    /// save from its event loop): the objects are validated and encoded on the calling
    /// thread, and `completion` is called once they are durable (or with the error), on the
    /// committing thread; it must be quick. With `committingOn`, a save that finds the
    /// committer idle is committed on the thread `committingOn` runs work on (the caller's
    /// event loop, after the caller returns), and `completion` is called there
    /// (``GroupCommitter/submit(_:committingOn:completion:)``).
    package func save(
        received: [ReceivedObject], by principal: Principal, committingOn executor: CallerExecutor? = nil,
        completion: @escaping @Sendable (Result<[SaveResult], any Error>) -> Void
    ) {
        let prepared: [PreparedObject]
        let types: [ObjectType]
        do {
            guard !received.isEmpty else { throw HealthError.invalidArgument("nothing to save: the list of objects is empty", field: "objects") }
            guard received.count <= Ledger.maximumBatchSize else {
                throw HealthError(.dataSizeExceeded, "a save holds at most \(Ledger.maximumBatchSize) objects, got \(received.count)", field: "objects")
            }
            prepared = try prepare(received, by: principal)
            types = Self.sharedTypes(of: received)
        } catch {
            return completion(.failure(error))
        }
        committer.submit({ context in
            for type in types { try Self.requireSharing(type, by: principal, in: context) }
            return try Self.apply(prepared, by: principal, in: context)
        }, committingOn: executor, completion: completion)
    }

    /// The types a save shares, in order: a correlation's through its members' types. (A
    /// batch mostly holds one type: the set is asked only when the type changes.)
    private static func sharedTypes(of received: [ReceivedObject]) -> [ObjectType] {
        var typeSet = Set<ObjectType>()
        var lastType: ObjectType?
        func note(_ type: ObjectType) {
            guard type != lastType else { return }
            typeSet.insert(type)
            lastType = type
        }
        for item in received {
            if let correlation = item.object.correlation {
                for member in correlation.objects { note(member.objectType) }
            } else {
                note(item.object.objectType)
            }
        }
        return typeSet.sorted { $0.identifier < $1.identifier }
    }

    /// Validates, stamps the source and encodes each object (in the caller's task, in parallel
    /// with other callers; only the ordered part runs in the write transaction).
    func prepare(_ objects: [ReceivedObject], by principal: Principal) throws -> [PreparedObject] {
        var seen = Set<UUID>()
        seen.reserveCapacity(objects.count)
        let units = SummaryCache()
        return try objects.enumerated().map { index, received in
            var object = received.object
            var canonicalBytes = received.canonicalBytes
            switch principal {
            case .app(let source):
                if object.sourceRevision.source != source || object.correlation != nil {
                    object.sourceRevision.source = source
                    canonicalBytes = nil
                }
            case .owner, .system: break
            case .operator:
                throw HealthError(.authorizationDenied, "the operator cannot save health data")
            }
            if case .workoutRoute = object {
                throw HealthError.invalidArgument(
                    "object \(index): a route is saved by finishing a route builder with its workout, not by a save", field: "objects")
            }
            do {
                try object.validate()
            } catch var error as HealthError {
                error.message = "object \(index) (\(object.uuid)): \(error.message)"
                throw error
            }
            guard seen.insert(object.uuid).inserted else {
                throw HealthError.invalidArgument("object \(index): UUID \(object.uuid) appears twice in the save", field: "uuid")
            }
            guard case .correlation(let correlation) = object else {
                return PreparedObject(summary: try ObjectSummary(object, units: units), body: canonicalBytes ?? object.encodedBytes())
            }
            let members = try correlation.objects.map { member in
                guard seen.insert(member.uuid).inserted else {
                    throw HealthError.invalidArgument("object \(index): UUID \(member.uuid) appears twice in the save", field: "uuid")
                }
                let sample = HealthObject.quantitySample(member)
                return PreparedObject(summary: try ObjectSummary(sample, units: units), body: sample.encodedBytes())
            }
            return PreparedObject(summary: try ObjectSummary(object, units: units), body: correlation.storedBytes(), members: members)
        }
    }

    static func apply(_ objects: [PreparedObject], by principal: Principal, in context: WriteContext) throws -> [SaveResult] {
        var results: [SaveResult] = []
        results.reserveCapacity(objects.count)
        for index in objects.indices {
            results.append(try apply(objects[index], index: index, by: principal, in: context))
        }
        return results
    }

    /// Saves one object (a correlation with its members) following the sync rules: an
    /// equal or higher stored version leaves everything as it is; a lower one is deleted
    /// (a correlation with its members) before the new object is saved.
    private static func apply(_ object: PreparedObject, index: Int, by principal: Principal, in context: WriteContext) throws -> SaveResult {
        let databases = context.databases
        let summary = object.summary
        let uuid = UUID(bytes: summary.uuid)!
        func requireNew(_ candidate: [UInt8]) throws {
            if try context.txn.contains(candidate, in: databases.objects) || context.txn.contains(candidate, in: databases.tombstones) {
                let existing = UUID(bytes: candidate)!
                throw HealthError(.invalidArgument, "object \(index): an object with UUID \(existing) already exists", field: "uuid", existingUUID: existing)
            }
        }
        try requireNew(summary.uuid)
        for member in object.members { try requireNew(member.summary.uuid) }
        var disposition = SaveResult.Disposition.saved
        if let existing = try SyncIdentifierIndex.holder(of: summary, in: context) {
            let existingUUID = UUID(bytes: existing.uuid)!
            if existing.version >= summary.syncVersion ?? 0 { return SaveResult(uuid: uuid, disposition: .ignored(existing: existingUUID)) }
            try deleteStored(existingUUID.bytes, reason: .replacedBySyncVersion, replacedBy: summary.uuid, by: principal, in: context)
            disposition = .replaced(previous: existingUUID)
        }
        // A correlation's members are samples of their own, saved first (each by the sync rules).
        for member in object.members { _ = try apply(member, index: index, by: principal, in: context) }
        try context.append(
            kind: .objectSaved, actor: principal, objectType: summary.type, objectUUID: summary.uuid,
            body: object.body, change: .saved(summary))
        return SaveResult(uuid: uuid, disposition: disposition)
    }

    /// Appends the delete event for a stored object.
    static func deleteStored(
        _ uuid: [UInt8], reason: DeletionReason, replacedBy: [UInt8]? = nil, by principal: Principal, in context: WriteContext
    ) throws {
        guard let stored = try StoredObject.load(uuid, in: context.reads) else {
            throw LedgerFailure.corrupted("object \(UUID(bytes: uuid)!) vanished during its delete")
        }
        let summary = try context.loadSaved(stored.sequence)
        if summary.typeCode == ObjectType.workout.code, reason == .deleted {
            // Deleting a workout deletes its routes (docs/SEMANTICS.md §5); associated samples stay.
            for route in try WorkoutIndex.members(of: uuid, type: ObjectType.workoutRoute.code, in: context.reads) {
                try deleteStored(route.uuid, reason: .workoutDeleted, by: principal, in: context)
            }
        }
        if TypeCatalogue.correlationTypes[summary.type] != nil {
            // A correlation goes with its members, deleted or replaced.
            for member in try WorkoutIndex.members(of: uuid, in: context.reads) {
                try deleteStored(member.uuid, reason: .correlationDeleted, by: principal, in: context)
            }
        }
        var body = Healthledger_V1_ObjectDeleted()
        body.reason = switch reason {
        case .deleted: .deleted
        case .replacedBySyncVersion: .replacedBySyncVersion
        case .workoutDeleted: .workoutDeleted
        case .correlationDeleted: .correlationDeleted
        case .erased: .erased
        }
        if let identifier = summary.syncIdentifier {
            body.syncIdentifier = identifier
            body.syncVersion = summary.syncVersion ?? 0
        }
        if let replacedBy { body.replacedBy = Data(replacedBy) }
        try context.append(
            kind: .objectDeleted, actor: principal, objectType: summary.type, objectUUID: uuid,
            body: try body.serializedBytes(), change: .deleted(uuid: uuid, reason: reason, replacedBy: replacedBy))
    }

    /// Deletes objects by UUID, atomically: all of them or none.
    ///
    /// An app may delete only objects it saved, of types it may share; the owner may delete any.
    ///
    /// - Returns: the number of objects deleted.
    /// - Throws: ``HealthError``: `invalidArgument` for an empty list, `noData` for an
    ///   unknown UUID or an object the app may not read (the two are not told apart),
    ///   `authorizationDenied` for another source's object the app may read or a type it
    ///   may not share.
    @discardableResult
    public func delete(_ uuids: [UUID], by principal: Principal) async throws -> Int {
        guard !uuids.isEmpty else { throw HealthError.invalidArgument("nothing to delete: the list of UUIDs is empty", field: "uuids") }
        guard uuids.count <= Ledger.maximumBatchSize else {
            throw HealthError(.dataSizeExceeded, "a delete holds at most \(Ledger.maximumBatchSize) UUIDs, got \(uuids.count)", field: "uuids")
        }
        if case .operator = principal { throw HealthError(.authorizationDenied, "the operator cannot delete health data") }
        var seen = Set<UUID>()
        let unique = uuids.filter { seen.insert($0).inserted }
        return try await committer.submit { context in
            let ownSource = try Self.ownSource(of: principal, in: context)
            // Every object is checked before any goes: a correlation named with its own
            // member deletes that member with it.
            for uuid in unique { _ = try Self.requireChangeable(uuid, by: principal, ownSource: ownSource, field: "uuids", in: context) }
            for uuid in unique where try StoredObject.load(uuid.bytes, in: context.reads) != nil {
                try Self.deleteStored(uuid.bytes, reason: .deleted, by: principal, in: context)
            }
            return unique.count
        }
    }

    /// An app's source code (0 if it never saved), whose objects are the ones it may change;
    /// nil for the owner, who may change any.
    /// - Throws: ``HealthError`` `authorizationDenied` for the operator, who changes no health data.
    static func ownSource(of principal: Principal, in context: WriteContext) throws -> UInt32? {
        switch principal {
        case .app(let app): return try SourceRegistry.code(of: app.bundleIdentifier, in: context.reads) ?? 0
        case .owner, .system: return nil
        case .operator: throw HealthError(.authorizationDenied, "the operator cannot change health data")
        }
    }

    /// Checks that `principal` may change (delete, attach to) the object with `uuid`: one it
    /// saved (any, for the owner), of a type it may share. Another source's object it may not
    /// read is answered as an unknown one (`noData`); one it may read, `authorizationDenied`.
    /// Decided on the entry, before the object is loaded (as a fetch is). Returns its type.
    static func requireChangeable(
        _ uuid: UUID, by principal: Principal, ownSource: UInt32?, field: String, in context: WriteContext
    ) throws -> ObjectType {
        guard let stored = try StoredObject.load(uuid.bytes, in: context.reads) else {
            throw HealthError(.noData, "no object with UUID \(uuid)", field: field)
        }
        let type = try objectType(code: stored.type)
        if let ownSource, stored.source != ownSource {
            guard try readable(uuid, as: principal, in: context.reads) != nil else {
                throw HealthError(.noData, "no object with UUID \(uuid)", field: field)
            }
            throw HealthError(.authorizationDenied, "object \(uuid) was saved by another source", field: field)
        }
        try requireSharing(type, by: principal, in: context)
        return type
    }

    /// Deletes the objects of `type` whose time span overlaps `interval` (all of the type
    /// when nil) and that match `predicate`. Apps delete only their own matching objects; the
    /// owner deletes all. A correlation goes with its members.
    ///
    /// - Returns: the number of objects deleted (0 when none match), members not counted.
    /// - Throws: ``HealthError`` `invalidArgument` for a predicate that does not fit the type.
    @discardableResult
    public func deleteObjects(
        of type: ObjectType, overlapping interval: DateInterval? = nil, matching predicate: ObjectPredicate? = nil, by principal: Principal
    ) async throws -> Int {
        if case .operator = principal { throw HealthError(.authorizationDenied, "the operator cannot delete health data") }
        let range = TimeRange(interval)
        guard range.start <= range.end else { throw HealthError.invalidArgument("the interval ends before it starts", field: "interval") }
        try predicate?.validate(for: type)
        return try await committer.submit { context in
            try Self.requireSharing(type, by: principal, in: context)
            // An app's own objects, through its source's index: others' are never visited.
            let scope: ReadScope
            if case .app(let app) = principal {
                guard let code = try SourceRegistry.code(of: app.bundleIdentifier, in: context.reads) else { return 0 }
                scope = .own(code)
            } else {
                scope = .everything
            }
            let predicateContext = PredicateContext(principal: principal, snapshot: context.reads)
            var matches: [[UInt8]] = []
            try self.visitCandidates(
                of: type, plan: PredicatePlan(predicate, range: range), sort: .startDate(ascending: true), scope: scope, context: predicateContext,
                longest: try context.longestDuration(type: type.code)
            ) { entry in
                if try predicate?.matches(EntrySubject(entry, predicateContext), type: type) ?? true { matches.append(entry.uuid) }
                return true
            }
            for uuid in matches {
                try Self.deleteStored(uuid, reason: .deleted, by: principal, in: context)
            }
            return matches.count
        }
    }
}
