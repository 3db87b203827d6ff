import Foundation
import HealthModel
import LMDB
import LedgerSchema

/// What one read needs to check predicates on its snapshot: source names by code, the
/// reader's view of workouts and correlations, and the workout statistics it may see.
final class PredicateContext {
    let principal: Principal
    let snapshot: LedgerSnapshot
    private var bundles: [UInt32: String] = [:]
    private var parents: [UUID: ParentKind] = [:]
    private lazy var members = WorkoutMemberReader(principal: principal, snapshot: snapshot)

    init(principal: Principal, snapshot: LedgerSnapshot) {
        self.principal = principal
        self.snapshot = snapshot
    }

    func bundle(of code: UInt32) throws -> String {
        if let bundle = bundles[code] { return bundle }
        let bundle = try SourceRegistry.source(code: code, in: snapshot)?.bundleIdentifier ?? ""
        bundles[code] = bundle
        return bundle
    }

    /// Whether `member` belongs to `parent`, a workout (`correlation` false) or a correlation;
    /// never when `parent` is not of that kind or the reader may not read it (as if it did
    /// not exist).
    func isMember(_ member: [UInt8], of parent: UUID, correlation: Bool) throws -> Bool {
        let kind: ParentKind
        if let known = parents[parent] {
            kind = known
        } else {
            kind = try ParentKind(parent, as: principal, in: snapshot)
            parents[parent] = kind
        }
        guard kind == (correlation ? .correlation : .workout) else { return false }
        return try snapshot.contains(member + parent.bytes, in: snapshot.databases.memberWorkouts)
    }

    func workoutMatches(_ predicate: WorkoutPredicate, event: UnsafeRawBufferPointer) throws -> Bool {
        try members.matches(predicate, workoutEvent: event)
    }
}

/// What a predicate's parent UUID names, as one reader sees it.
enum ParentKind: Equatable {
    case workout, correlation
    /// Anything else: another kind of object, none, or one the reader may not read.
    case none

    init(_ uuid: UUID, as principal: Principal, in snapshot: LedgerSnapshot) throws {
        guard let stored = try Ledger.readable(uuid, as: principal, in: snapshot) else {
            self = .none
            return
        }
        let family = try Ledger.objectType(code: stored.type).family
        self = family == .workout ? .workout : family == .correlation ? .correlation : .none
    }
}

/// An index entry as a predicate subject: dates, UUID, source and value come from the entry;
/// the object is loaded from the log only when a leaf needs it, once.
final class EntrySubject: PredicateSubject {
    let entry: IndexEntry
    let context: PredicateContext
    private var loaded: HealthObject?

    init(_ entry: IndexEntry, _ context: PredicateContext) {
        self.entry = entry
        self.context = context
    }

    var uuid: UUID { UUID(bytes: entry.uuid)! }
    var startDate: Date { date(microseconds: entry.startUs) }
    var endDate: Date { date(microseconds: entry.endUs) }
    func sourceBundleIdentifier() throws -> String { try context.bundle(of: entry.source) }
    func value() throws -> Double? { entry.value.isNaN ? try object().canonicalValue : entry.value }

    func object() throws -> HealthObject {
        if let loaded { return loaded }
        let object = try LedgerEvent(stored: try event()).savedObject()
        loaded = object
        return object
    }

    func isMember(of parent: UUID, correlation: Bool) throws -> Bool { try context.isMember(entry.uuid, of: parent, correlation: correlation) }
    func matches(_ predicate: WorkoutPredicate) throws -> Bool { try context.workoutMatches(predicate, event: try event()) }

    private func event() throws -> UnsafeRawBufferPointer { try Ledger.storedEvent(entry.sequence, in: context.snapshot) }
}

/// What the indexes can answer of a predicate before any object is loaded, read from the
/// leaves that must all hold: a narrower time range, the UUIDs to look up directly, the
/// sources whose index to walk, the workout or correlation whose members to visit. The
/// whole predicate is still checked on every candidate, so the plan only prunes.
struct PredicatePlan {
    var range: TimeRange
    var uuids: Set<UUID>?
    var sources: Set<String>?
    /// A workout's (`correlation` false) or a correlation's members.
    var parent: (uuid: UUID, correlation: Bool)?

    init(_ predicate: ObjectPredicate?, range: TimeRange) {
        self.range = range
        guard let predicate else { return }
        // Bounds are widened by a microsecond: dates round to microseconds in the indexes.
        func narrow(start: Int64?, end: Int64?) {
            self.range = self.range.narrowed(to: TimeRange(start: start.map { $0 &- 1 }, end: end.map { $0 &+ 1 }))
        }
        for leaf in predicate.conjuncts {
            switch leaf {
            case .samples(let start, let end, _):
                // Strict options select a subset of the overlapping samples (an instant at the
                // end included, which the widened end keeps).
                narrow(start: start.map(microseconds), end: end.map(microseconds))
            case .date(.start, let comparison, let bound):
                let time = microseconds(bound)
                switch comparison {
                case .less, .lessOrEqual: narrow(start: nil, end: time)
                case .equal: narrow(start: time, end: time)
                case .greaterOrEqual, .greater: narrow(start: time, end: nil)
                case .notEqual: break
                }
            case .uuids(let set): uuids = uuids.map { $0.intersection(set) } ?? set
            case .sources(let set): sources = sources.map { $0.intersection(set) } ?? set
            case .associatedWithWorkout(let uuid): parent = parent ?? (uuid, false)
            case .memberOfCorrelation(let uuid): parent = parent ?? (uuid, true)
            default: break
            }
        }
    }
}

extension TimeRange {
    init(start: Int64?, end: Int64?) {
        self.start = start ?? Int64.min
        self.end = end ?? Int64.max
    }

    /// The intersection of two ranges (empty ranges have start ≥ end).
    func narrowed(to other: TimeRange) -> TimeRange {
        var range = self
        range.start = Swift.max(start, other.start)
        range.end = Swift.min(end, other.end)
        return range
    }
}
