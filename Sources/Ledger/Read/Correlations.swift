import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

extension CorrelationQuery {
    var sampleQuery: SampleQuery { SampleQuery(type: type.objectType, interval: interval, predicate: predicate, limit: limit, sort: sort) }

    /// The member predicates in a stable order, each checked to belong to the correlation type.
    func orderedMemberPredicates() throws -> [(ObjectType, ObjectPredicate)] {
        guard memberPredicates.count <= QueryDescriptor.maximumCount else {
            throw HealthError.invalidArgument("a correlation query takes at most \(QueryDescriptor.maximumCount) member predicates", field: "member_predicates")
        }
        return try memberPredicates.sorted { $0.key.identifier < $1.key.identifier }.map { type, predicate in
            guard self.type.memberTypes.contains(type.identifier) else {
                throw HealthError.invalidArgument("\(type) does not belong in a \(self.type) correlation", field: "member_predicates")
            }
            return (type.objectType, predicate)
        }
    }
}

extension Ledger {
    /// Runs a correlation query: each correlation with the members `principal` may read.
    public func correlations(_ query: CorrelationQuery, as principal: Principal) throws -> [Correlation] {
        try scan(query.sampleQuery, memberPredicates: try query.orderedMemberPredicates(), as: principal) { _, assembled in
            guard case .correlation(let correlation)? = assembled else { throw LedgerFailure.corrupted("a correlation read did not assemble") }
            return correlation
        }
    }
}

/// Fills in correlations as one reader sees them: the members of each type that reader may
/// read, found through the membership index (so a member replaced by a sync version shows
/// its replacement).
final class CorrelationAssembler {
    let principal: Principal
    let snapshot: LedgerSnapshot
    private var scopes: [UInt32: ReadScope] = [:]

    init(principal: Principal, snapshot: LedgerSnapshot) {
        self.principal = principal
        self.snapshot = snapshot
    }

    /// The member types' scopes the reads used, for a stream that must end when one of
    /// those grants goes.
    var memberScopes: [ReadScope] { Array(scopes.values) }

    /// The members of `correlation` the reader may read, each type through its scope.
    func visibleMembers(of correlation: UUID) throws -> [WorkoutMember] {
        try WorkoutIndex.visibleMembers(of: correlation.bytes, scope: { code in
            if let scope = scopes[code] { return scope }
            let scope = try ReadScope(principal, type: try Ledger.objectType(code: code), in: snapshot)
            scopes[code] = scope
            return scope
        }, in: snapshot)
    }

    /// Whether the reader, an app reading part of the correlation type (`app` its bundle), may
    /// be told that the correlation deleted by event `sequence` is gone: when it saved it, or
    /// when one of its members was of a type the reader may read. The members are deleted just
    /// before their correlation, in the same commit (reason `correlationDeleted`), so their
    /// delete events, right before `sequence`, name their types; an erased correlation's
    /// erasure event names them.
    func deletionVisible(_ uuid: [UInt8], at sequence: UInt64, app: String) throws -> Bool {
        // Still stored: not a deletion but one the reader saw and may no longer read (it
        // is told so when its scope narrows).
        guard let stored = try snapshot.get(uuid, in: snapshot.databases.tombstones) else { return true }
        let tombstone = try Tombstone(uuid: UUID(bytes: uuid)!, stored: stored, type: "", cipher: snapshot.databases.cipher)
        if tombstone.sourceBundle == app { return true }
        if tombstone.reason == .erased {
            // Its erasure event names its members' types.
            let event = try LedgerEvent(stored: try Ledger.storedEvent(tombstone.sequence, in: snapshot))
            guard case .objectsErased(_, let objects, _) = try event.decodedBody(), let erased = objects.first(where: { $0.uuid.bytes == uuid }) else {
                return false
            }
            for type in Set(erased.memberTypes) {
                let code = TypeCatalogue.code(of: type)
                let scope = try scopes[code] ?? ReadScope(principal, type: try Ledger.objectType(code: code), in: snapshot)
                scopes[code] = scope
                if scope.all { return true }
            }
            return false
        }
        var previous = sequence
        while previous > 1 {
            previous -= 1
            let event = try LedgerEvent(stored: try Ledger.storedEvent(previous, in: snapshot))
            guard event.kind == .objectDeleted, let type = event.objectType,
                (try? Healthledger_V1_ObjectDeleted(serializedBytes: event.body))?.reason == .correlationDeleted
            else { return false }
            let code = TypeCatalogue.code(of: type)
            let scope = try scopes[code] ?? ReadScope(principal, type: try Ledger.objectType(code: code), in: snapshot)
            scopes[code] = scope
            if scope.all { return true }
        }
        return false
    }

    /// The correlation with its readable members; nil when it shows none and is not the
    /// reader's own (`source` is the correlation's source code), or when a member predicate
    /// finds no match among them.
    func assemble(
        _ correlation: Correlation, source: UInt32, memberPredicates: [(ObjectType, ObjectPredicate)] = [], context: PredicateContext? = nil
    ) throws -> Correlation? {
        let members = try visibleMembers(of: correlation.uuid)
        let own = try ReadScope(principal, type: correlation.objectType, in: snapshot).ownSource
        if members.isEmpty, case .app = principal, own == 0 || own != source { return nil }
        for (type, predicate) in memberPredicates {
            let context = context ?? PredicateContext(principal: principal, snapshot: snapshot)
            let candidates = members.filter { $0.type == type.code }
            guard try candidates.contains(where: { try predicate.matches(EntrySubject($0.indexEntry, context), type: type) }) else { return nil }
        }
        var assembled = correlation
        assembled.objects = try members.map { member in
            guard case .quantitySample(let sample) = try Ledger.loadObject(sequence: member.sequence, in: snapshot) else {
                throw LedgerFailure.corrupted("a correlation member is not a quantity sample")
            }
            return sample
        }
        return assembled
    }
}
