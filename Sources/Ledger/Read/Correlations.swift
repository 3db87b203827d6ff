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

    /// The same correlations as serialized `healthledger.v1.HealthObject` messages.
    public func encodedCorrelations(_ query: CorrelationQuery, as principal: Principal, onScope: (ReadScope) -> Void = { _ in }) throws -> [[UInt8]] {
        try scan(query.sampleQuery, memberPredicates: try query.orderedMemberPredicates(), as: principal, onScope: onScope) { _, assembled in
            try Healthledger_V1_HealthObject(assembled!).serializedBytes()
        }
    }
}

/// Fills in correlations as one reader sees them: the members of each type that reader may
/// read, found through the membership index (so a member replaced by a sync version shows
/// its replacement).
final class CorrelationAssembler {
    let principal: Principal
    let txn: Transaction
    let databases: LedgerDatabases
    private var scopes: [UInt32: ReadScope] = [:]

    init(principal: Principal, txn: Transaction, databases: LedgerDatabases) {
        self.principal = principal
        self.txn = txn
        self.databases = databases
    }

    /// The member types' scopes the reads used, for a stream that must end when one of
    /// those grants goes.
    var memberScopes: [ReadScope] { Array(scopes.values) }

    /// The members of `correlation` the reader may read, each type through its scope.
    func visibleMembers(of correlation: UUID) throws -> [WorkoutMember] {
        try WorkoutIndex.visibleMembers(of: correlation.bytes, scope: { code in
            if let scope = scopes[code] { return scope }
            let scope = try ReadScope(principal, type: try Ledger.objectType(code: code), in: txn, databases)
            scopes[code] = scope
            return scope
        }, in: txn, databases)
    }

    /// The correlation with its readable members; nil when it shows none and is not the
    /// reader's own (`source` is the correlation's source code), or when a member predicate
    /// finds no match among them.
    func assemble(
        _ correlation: Correlation, source: UInt32, memberPredicates: [(ObjectType, ObjectPredicate)] = [], context: PredicateContext? = nil
    ) throws -> Correlation? {
        let members = try visibleMembers(of: correlation.uuid)
        let own = try ReadScope(principal, type: correlation.objectType, in: txn, databases).ownSource
        if members.isEmpty, case .app = principal, own == 0 || own != source { return nil }
        for (type, predicate) in memberPredicates {
            let context = context ?? PredicateContext(principal: principal, txn: txn, databases: databases)
            let candidates = members.filter { $0.type == type.code }
            guard try candidates.contains(where: { try predicate.matches(EntrySubject($0.indexEntry, context), type: type) }) else { return nil }
        }
        var assembled = correlation
        assembled.objects = try members.map { member in
            guard case .quantitySample(let sample) = try Ledger.loadObject(sequence: member.sequence, in: txn, databases) else {
                throw LedgerFailure.corrupted("a correlation member is not a quantity sample")
            }
            return sample
        }
        return assembled
    }
}
