import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

extension Ledger {
    /// The stored object with `uuid`, or nil when there is none (never saved, or deleted)
    /// or `principal` may not read it: the two answers are the same.
    public func object(with uuid: UUID, as principal: Principal) throws -> HealthObject? {
        try read { snapshot in
            guard let stored = try Self.readable(uuid, as: principal, in: snapshot) else { return nil }
            let object = try Self.loadObject(sequence: stored.sequence, in: snapshot)
            guard case .correlation(let correlation) = object else { return object }
            return try CorrelationAssembler(principal: principal, snapshot: snapshot).assemble(correlation, source: stored.source)
                .map(HealthObject.correlation)
        }
    }

    /// The entry of the stored object with `uuid` if `principal` may read it; nil when there
    /// is none or it may not, at the same cost.
    ///
    /// Decided on the entry, before the object is loaded: a hidden object costs what an
    /// unknown one does, whatever its size. For an unknown UUID a type is resolved and a scope
    /// taken anyway for the same reason.
    static func readable(_ uuid: UUID, as principal: Principal, in snapshot: LedgerSnapshot) throws -> StoredObject? {
        guard let stored = try StoredObject.load(uuid.bytes, in: snapshot) else {
            _ = try ReadScope(principal, type: try objectType(code: decoyTypeCode), in: snapshot)
            return nil
        }
        let type = try objectType(code: stored.type)
        let scope = try ReadScope(principal, type: type, in: snapshot)
        guard scope.allows(sourceCode: stored.source, uuid: uuid.bytes) else { return nil }
        // Another source's correlation is readable only while it shows a member the reader
        // may read (docs/SEMANTICS.md §6): the same rule as in queries.
        if type.family == .correlation, case .app = principal, stored.source != scope.ownSource {
            guard try !CorrelationAssembler(principal: principal, snapshot: snapshot).visibleMembers(of: uuid).isEmpty else { return nil }
        }
        return stored
    }

    /// The type an unknown UUID's lookup resolves, as a found object's would (heart rate: a
    /// type read by type, found early in the catalogue, as most stored objects' are).
    private static let decoyTypeCode = TypeCatalogue.code(of: "HKQuantityTypeIdentifierHeartRate")

    /// The tombstone of a deleted object, or nil.
    public func tombstone(for uuid: UUID) throws -> Tombstone? {
        try read { snapshot in
            guard let stored = try snapshot.get(uuid.bytes, in: snapshot.databases.tombstones), stored.count >= 12 else { return nil }
            let type = TypeCatalogue.identifiersByCode[KeyEncoding.uint32(stored, at: 8)] ?? "unknown"
            return try Tombstone(uuid: uuid, stored: stored, type: type, cipher: snapshot.databases.cipher)
        }
    }

    /// Runs a sample query against the time indexes, returning what `principal` may read:
    /// everything for the owner; for an app, everything of a type it may read, otherwise
    /// only its own objects (and, for per-object types, the ones the owner selected).
    public func samples(_ query: SampleQuery, as principal: Principal) throws -> [HealthObject] {
        try scan(query, as: principal) { stored, assembled in try assembled ?? LedgerEvent(stored: stored).savedObject() }
    }

    /// The sources that saved live objects of `type` (overlapping `interval`, matching
    /// `predicate`) that `principal` may read, in the order of their first save of the type
    /// (HealthKit's `HKSourceQuery`): every source for the owner and an app that may read the
    /// type; for another app only itself, if it saved any.
    /// - Throws: ``HealthError`` `invalidArgument` for a characteristic type (it has no sources)
    ///   or a bad predicate, as a sample query's.
    public func sources(
        of type: ObjectType, overlapping interval: DateInterval? = nil, matching predicate: ObjectPredicate? = nil, as principal: Principal
    ) throws -> [Source] {
        guard type.family != .characteristic else {
            throw HealthError.invalidArgument("\(type) is a characteristic: it has no sources", field: "type")
        }
        let candidates = try read { try SourceRegistry.sources(of: type.code, in: $0) }
        // One object of each source that matches is enough: the scan stops at it.
        return try candidates.filter { source in
            let only = ObjectPredicate.sources([source.bundleIdentifier])
            let query = SampleQuery(type: type, interval: interval, predicate: predicate.map { .and([$0, only]) } ?? only, limit: 1)
            return try !scan(query, as: principal) { _, _ in () }.isEmpty
        }
    }

    /// What `principal` may read of `type` now. Servers compare scopes to end streams whose
    /// access was taken away; the scope itself is never shown to an app.
    public func readScope(of type: ObjectType, for principal: Principal) throws -> ReadScope {
        try read { snapshot in try ReadScope(principal, type: type, in: snapshot) }
    }

    /// Runs `query` on the time indexes, turning each matching save event `principal` may
    /// read into a result. Objects it may not read are skipped before the predicate is
    /// checked and before the limit counts.
    /// A correlation comes assembled (with the members `principal` may read); it is left out
    /// when it shows none and is not the reader's own, or when `memberPredicates` name a type
    /// none of whose readable members match.
    func scan<Result>(
        _ query: SampleQuery, memberPredicates: [(ObjectType, ObjectPredicate)] = [], as principal: Principal,
        onScope: (ReadScope) -> Void = { _ in }, _ load: (_ stored: UnsafeRawBufferPointer, _ assembled: HealthObject?) throws -> Result
    ) throws -> [Result] {
        try Self.validate(query, memberPredicates: memberPredicates)
        return try read { snapshot in
            let scope = try ReadScope(principal, type: query.type, in: snapshot)
            onScope(scope)
            let context = PredicateContext(principal: principal, snapshot: snapshot)
            let candidates = try candidates(of: query.type, plan: PredicatePlan(query.predicate, range: TimeRange(query.interval)), sort: query.sort, scope: scope, context: context)
            var results: [Result] = []
            try visitResults(of: query, memberPredicates: memberPredicates, candidates: candidates, after: nil, context: context, onScope: onScope) { _, result in
                guard let (stored, assembled) = result else { return true }
                results.append(try load(stored, assembled))
                return query.limit == 0 || results.count < query.limit
            }
            return results
        }
    }

    /// Checks a query before it reads anything.
    static func validate(_ query: SampleQuery, memberPredicates: [(ObjectType, ObjectPredicate)]) throws {
        guard query.limit >= 0 else { throw HealthError.invalidArgument("limit must be 0 (no limit) or positive", field: "limit") }
        let range = TimeRange(query.interval)
        guard range.start <= range.end else { throw HealthError.invalidArgument("the interval ends before it starts", field: "interval") }
        try query.predicate?.validate(for: query.type)
        for (type, predicate) in memberPredicates { try predicate.validate(for: type) }
    }

    /// Visits the candidates after `position`, each with its result when it is one: a
    /// candidate that matches the predicate, with its stored event and, for a correlation,
    /// the correlation assembled with the members the reader may read (no result when it
    /// shows none). `visit` returns false to stop; the member types' scopes the read used go
    /// to `onScope`.
    func visitResults(
        of query: SampleQuery, memberPredicates: [(ObjectType, ObjectPredicate)], candidates: Candidates, after position: IndexEntry?,
        context: PredicateContext, onScope: (ReadScope) -> Void,
        _ visit: (_ entry: IndexEntry, _ result: (stored: UnsafeRawBufferPointer, assembled: HealthObject?)?) throws -> Bool
    ) throws {
        let snapshot = context.snapshot
        let correlations = query.type.family == .correlation ? CorrelationAssembler(principal: context.principal, snapshot: snapshot) : nil
        try candidates.visit(after: position, sort: query.sort, in: snapshot) { entry in
            if let predicate = query.predicate, try !predicate.matches(EntrySubject(entry, context), type: query.type) { return try visit(entry, nil) }
            let stored = try Ledger.storedEvent(entry.sequence, in: snapshot)
            var assembled: HealthObject?
            if let correlations {
                guard case .correlation(let correlation) = try LedgerEvent(stored: stored).savedObject(),
                    let visible = try correlations.assemble(correlation, source: entry.source, memberPredicates: memberPredicates, context: context)
                else { return try visit(entry, nil) }
                assembled = .correlation(visible)
            }
            return try visit(entry, (stored, assembled))
        }
        correlations?.memberScopes.forEach(onScope)
    }

    /// Visits, in `sort` order, the objects of `type` in `scope` that the plan leaves (see
    /// ``candidates(of:plan:sort:scope:context:longest:)``).
    func visitCandidates(
        of type: ObjectType, plan: PredicatePlan, sort: SampleSort, scope: ReadScope, context: PredicateContext, longest: Int64? = nil,
        _ visit: (IndexEntry) throws -> Bool
    ) throws {
        try candidates(of: type, plan: plan, sort: sort, scope: scope, context: context, longest: longest)
            .visit(after: nil, sort: sort, in: context.snapshot, visit)
    }

    /// Where the objects of `type` in `scope` that the plan leaves come from, in `sort`
    /// order: looked up directly by UUID, through a workout's or correlation's members,
    /// through the sources' own indexes, or over the type's time index. A reader limited to
    /// its own objects walks only those, whatever the plan: the work never depends on
    /// others' data.
    ///
    /// - Parameter longest: the type's longest duration, when the caller knows better than the
    ///   committed statistics (a write transaction's own saves).
    func candidates(
        of type: ObjectType, plan: PredicatePlan, sort: SampleSort, scope: ReadScope, context: PredicateContext, longest: Int64? = nil
    ) throws -> Candidates {
        let snapshot = context.snapshot
        let range = plan.range
        guard range.start <= range.end else { return .none }
        if let uuids = plan.uuids {
            // Each UUID costs one lookup, whoever saved it (or whether it exists at all).
            let projector = Projector(databases: databases, units: SummaryCache())
            var entries: [IndexEntry] = []
            for uuid in uuids {
                guard let stored = try StoredObject.load(uuid.bytes, in: snapshot), stored.type == type.code,
                    scope.allows(sourceCode: stored.source, uuid: uuid.bytes)
                else { continue }
                let summary = try projector.savedSummary(stored: try Ledger.storedEvent(stored.sequence, in: snapshot), sequence: stored.sequence)
                guard range.overlaps(start: summary.startUs, end: summary.endUs) else { continue }
                entries.append(IndexEntry(
                    uuid: uuid.bytes, startUs: summary.startUs, endUs: summary.endUs, sequence: stored.sequence, source: stored.source, value: summary.value,
                    isSeries: summary.isSeries))
            }
            return .sorted(Self.sorted(entries, by: sort))
        }
        if let parent = plan.parent {
            // A workout's or correlation's members, none when the reader may not read it.
            guard try ParentKind(parent.uuid, as: context.principal, in: snapshot) == (parent.correlation ? .correlation : .workout) else { return .none }
            let entries = try WorkoutIndex.visibleMembers(of: parent.uuid.bytes, type: type.code, scope: { _ in scope }, in: snapshot)
                .filter { range.overlaps(start: $0.startUs, end: $0.endUs) }.map(\.indexEntry)
            return .sorted(Self.sorted(entries, by: sort))
        }
        guard scope.all else { return try scopedCandidates(type, sort: sort, range: range, scope: scope, in: snapshot) }
        if let sources = plan.sources {
            // Only the named sources' indexes are walked.
            let codes = try sources.compactMap { try SourceRegistry.code(of: $0, in: snapshot) }.sorted()
            let longest = try codes.map { try SourceRegistry.longestDuration(type: type.code, code: $0, in: snapshot) }
            if case .startDate(let ascending) = sort {
                return .bySources(type: type.code, sources: Array(zip(codes, longest)), range: range, descending: !ascending)
            }
            // No index holds one source's samples in end order: they are gathered and sorted.
            var entries: [IndexEntry] = []
            for (code, longest) in zip(codes, longest) {
                try Self.scanByStart(type: type.code, source: code, range: range, longest: longest, in: snapshot) { entry in
                    entries.append(entry)
                    return true
                }
            }
            return .sorted(Self.sorted(entries, by: sort))
        }
        let longest = try longest ?? SourceRegistry.longestDuration(type: type.code, in: snapshot)
        switch sort {
        case .startDate(let ascending): return .byStart(type: type.code, source: nil, range: range, longest: longest, descending: !ascending)
        case .endDate(let ascending): return .byEnd(type: type.code, range: range, longest: longest, descending: !ascending)
        }
    }

    /// Entries in the order of the type's indexes: by date, ties by UUID; descending reverses both.
    static func sorted(_ entries: [IndexEntry], by sort: SampleSort) -> [IndexEntry] {
        entries.sorted { sort.orders($0, before: $1) }
    }

    /// The objects, in the query's order, of a scope narrower than the whole type: the
    /// reader's own, through its source's index, and the ones selected for it. Other
    /// sources' objects are never touched, so the work done (and the time it takes)
    /// depends only on what the reader may see.
    private func scopedCandidates(
        _ objectType: ObjectType, sort: SampleSort, range: TimeRange, scope: ReadScope, in snapshot: LedgerSnapshot
    ) throws -> Candidates {
        let type = objectType.code
        let own = scope.ownSource
        let longest = own == 0 ? 0 : try SourceRegistry.longestDuration(type: type, code: own, in: snapshot)
        // Without selected objects, the source's start index is already in start order.
        if scope.selected.isEmpty, case .startDate(let ascending) = sort {
            guard own != 0 else { return .none }
            return .byStart(type: type, source: own, range: range, longest: longest, descending: !ascending)
        }
        var entries: [IndexEntry] = []
        if own != 0 {
            try Self.scanByStart(type: type, source: own, range: range, longest: longest, in: snapshot) { entry in
                entries.append(entry)
                return true
            }
        }
        if !scope.selected.isEmpty {
            let projector = Projector(databases: databases, units: SummaryCache())
            for uuid in scope.selected {
                guard let stored = try StoredObject.load(uuid, in: snapshot), stored.type == type, own == 0 || stored.source != own else { continue }
                let event = try Ledger.storedEvent(stored.sequence, in: snapshot)
                let summary = try projector.savedSummary(stored: event, sequence: stored.sequence)
                guard range.overlaps(start: summary.startUs, end: summary.endUs) else { continue }
                entries.append(IndexEntry(
                    uuid: uuid, startUs: summary.startUs, endUs: summary.endUs, sequence: stored.sequence, source: stored.source, isSeries: summary.isSeries))
            }
        }
        return .sorted(Self.sorted(entries, by: sort))
    }

    /// The number of stored objects of `type`, all sources together (an operator's figure;
    /// not for apps). Counted from the type's time index: the time it takes grows with the count.
    public func count(of type: ObjectType) throws -> Int {
        try read { snapshot in
            let prefix = KeyEncoding.typeKey(type.code)
            var count = 0
            try snapshot.forEach(prefix: prefix, keyLength: StartIndexRow.keyLength(bySource: false), in: snapshot.databases.byStart) { _, _ in
                count += 1
                return true
            }
            return count
        }
    }

    /// The type with catalogue code `code` (as the projections store it).
    static func objectType(code: UInt32) throws -> ObjectType {
        guard let identifier = TypeCatalogue.identifiersByCode[code], let type = try? ObjectType(identifier) else {
            throw LedgerFailure.corrupted("a projection names type code \(code), which the catalogue does not know")
        }
        return type
    }

    /// The stored bytes of event `sequence`.
    static func storedEvent(_ sequence: UInt64, in snapshot: LedgerSnapshot) throws -> UnsafeRawBufferPointer {
        let key = KeyEncoding.sequenceKey(sequence)
        guard let stored = try snapshot.get(key, in: snapshot.databases.events) else { throw missingEvent(sequence) }
        return try key.withUnsafeBytes { try snapshot.databases.event(stored, key: $0, in: snapshot.txn) }
    }

    /// ``storedEvent(_:in:)`` through a cursor over `events`: lookups in log order mostly stay
    /// on the page the cursor is on.
    static func storedEvent(_ sequence: UInt64, through events: Cursor, in snapshot: LedgerSnapshot) throws -> UnsafeRawBufferPointer {
        guard let entry = try events.seek(exactly: KeyEncoding.sequenceKey(sequence)) else { throw missingEvent(sequence) }
        return try snapshot.databases.event(entry.value, key: entry.key, in: snapshot.txn)
    }

    private static func missingEvent(_ sequence: UInt64) -> LedgerFailure { .corrupted("event \(sequence) is missing from the log") }

    static func loadObject(sequence: UInt64, in snapshot: LedgerSnapshot) throws -> HealthObject {
        let stored = try Ledger.storedEvent(sequence, in: snapshot)
        return try LedgerEvent(stored: stored).savedObject()
    }

    /// Visits the samples of `type` overlapping `range` in start-date order (ties by UUID):
    /// every source's through `by_start`, or only `source`'s through `by_source`.
    /// A sample can start at most `longest` before the range and still overlap it.
    ///
    /// - Parameters:
    ///   - uuids: false leaves the entries' UUIDs empty (statistics, which never need them,
    ///     save an allocation per sample).
    ///   - position: an entry of this walk: the walk begins after it.
    static func scanByStart(
        type: UInt32, source: UInt32? = nil, range: TimeRange, longest: Int64, descending: Bool = false, uuids: Bool = true,
        after position: IndexEntry? = nil, in snapshot: LedgerSnapshot, _ visit: (IndexEntry) throws -> Bool
    ) throws {
        try snapshot.withCursor(on: source == nil ? snapshot.databases.byStart : snapshot.databases.bySource) { cursor in
            var walk = try StartWalk(
                cursor, type: type, source: source, range: range, longest: longest, descending: descending, uuids: uuids, after: position,
                cipher: snapshot.databases.cipher)
            while let entry = try walk.next() {
                if try !visit(entry) { return }
            }
        }
    }

    /// Visits the samples of `type` by the given sources overlapping `range`, in start-date
    /// order (ties by UUID; descending reverses both), from the one after `position` when
    /// given: each source's part of `by_source` walked at once and merged, so that nothing
    /// is gathered or sorted first (`longest` is each source's longest sample).
    static func scanByStart(
        type: UInt32, sources: [(code: UInt32, longest: Int64)], range: TimeRange, descending: Bool, after position: IndexEntry? = nil,
        in snapshot: LedgerSnapshot, _ visit: (IndexEntry) throws -> Bool
    ) throws {
        let order = SampleSort.startDate(ascending: !descending)
        try snapshot.txn.withCursors(on: snapshot.databases.bySource, count: sources.count) { cursors in
            var walks = try zip(cursors, sources).map { cursor, source in
                try StartWalk(
                    cursor, type: type, source: source.code, range: range, longest: source.longest, descending: descending, uuids: true,
                    after: position, cipher: snapshot.databases.cipher)
            }
            let heads = try walks.indices.map { try walks[$0].next() }
            try visitMerged(heads: heads, precedes: { order.orders($0, before: $1) }, next: { try walks[$0].next() }, visit)
        }
    }

    /// Visits the samples of `type` overlapping `range` in end-date order (ties by UUID): those
    /// that last from `by_end`, merged with the instants, which only `by_start` holds (an
    /// instant ends when it starts, so that index has them in end order too).
    ///
    /// The instants' walk passes over the type's lasting samples starting in the range
    /// without loading them; for a type of lasting samples only it reads about as many rows
    /// again as `by_end`.
    ///
    /// - Parameter position: an entry of this walk: the walk begins after it.
    static func scanByEnd(
        type: UInt32, range: TimeRange, longest: Int64, descending: Bool = false, after position: IndexEntry? = nil,
        in snapshot: LedgerSnapshot, _ visit: (IndexEntry) throws -> Bool
    ) throws {
        let (raised, overflow) = range.end.addingReportingOverflow(max(longest, 0))
        let highest = overflow ? Int64.max : raised
        let last = [UInt8](repeating: 0xFF, count: 16)
        try snapshot.withCursor(on: snapshot.databases.byEnd) { lastingCursor in
            try snapshot.withCursor(on: snapshot.databases.byStart) { instantCursor in
                /// Moves a walk's cursor on (from `resume` when given) or to its first row.
                func begin(_ cursor: Cursor, resume: InlineBytes?, first: InlineBytes) throws -> Cursor.Entry? {
                    guard let resume else { return descending ? try cursor.seek(atMost: first) : try cursor.seek(atLeast: first) }
                    let entry = descending ? try cursor.seek(atMost: resume) : try cursor.seek(atLeast: resume)
                    guard let current = entry, resume.equals(current.key) else { return entry }
                    return descending ? try cursor.previous() : try cursor.next()
                }
                func step(_ cursor: Cursor) throws -> Cursor.Entry? { descending ? try cursor.previous() : try cursor.next() }
                /// The lasting samples' walk from `entry`: its next row overlapping the range.
                func lasting(from entry: Cursor.Entry?) throws -> IndexEntry? {
                    var entry = entry
                    while let current = entry, let row = try EndIndexRow(current, type: type) {
                        let end = row.endUs
                        if descending ? end < range.start : end > highest { return nil }
                        if range.overlaps(start: row.startUs, end: end) { return row.entry }
                        entry = try step(lastingCursor)
                    }
                    return nil
                }
                /// The instants' walk from `entry`: its next instant in the range.
                func instant(from entry: Cursor.Entry?) throws -> IndexEntry? {
                    var entry = entry
                    while let current = entry, let row = try StartIndexRow(current, type: type, source: nil, cipher: snapshot.databases.cipher) {
                        let at = row.startUs
                        if descending ? at < range.start : at >= range.end { return nil }
                        if row.endUs == at, range.overlaps(start: at, end: at) { return row.entry(uuid: true) }
                        entry = try step(instantCursor)
                    }
                    return nil
                }
                var nextLasting = try lasting(from: begin(
                    lastingCursor, resume: position.map { EndIndexRow.key(type: type, end: $0.endUs, uuid: $0.uuid) },
                    first: descending ? EndIndexRow.key(type: type, end: highest, uuid: last) : EndIndexRow.key(type: type, end: range.start, uuid: [])))
                var nextInstant = try instant(from: begin(
                    instantCursor, resume: position.map { StartIndexRow.key(type: type, source: nil, start: $0.endUs, uuid: $0.uuid) },
                    first: StartIndexRow.key(type: type, source: nil, start: descending ? range.end : range.start, uuid: descending ? last : [])))
                let order = SampleSort.endDate(ascending: !descending)
                while nextLasting != nil || nextInstant != nil {
                    if let entry = nextLasting, nextInstant.map({ order.orders(entry, before: $0) }) ?? true {
                        guard try visit(entry) else { return }
                        nextLasting = try lasting(from: step(lastingCursor))
                    } else if let entry = nextInstant {
                        guard try visit(entry) else { return }
                        nextInstant = try instant(from: step(instantCursor))
                    }
                }
            }
        }
    }
}

/// A walk over a start index (`by_start`, or one source's range of `by_source`) in start
/// order, ties by UUID, either way: the rows whose samples overlap a range, one at a time.
/// A sample can start at most `longest` before the range and still overlap it.
struct StartWalk {
    private let cursor: Cursor
    private let type: UInt32
    private let source: UInt32?
    private let range: TimeRange
    /// The earliest start a sample overlapping the range can have.
    private let lowest: Int64
    private let descending: Bool
    private let uuids: Bool
    private let cipher: LedgerCipher?
    /// The row the walk reads next.
    private var entry: Cursor.Entry?

    /// Places the walk on its first row, or on the row after `position` (an entry of a walk
    /// in the same order, of any source).
    init(
        _ cursor: Cursor, type: UInt32, source: UInt32?, range: TimeRange, longest: Int64, descending: Bool, uuids: Bool,
        after position: IndexEntry?, cipher: LedgerCipher?
    ) throws {
        self.cursor = cursor
        self.cipher = cipher
        self.type = type
        self.source = source
        self.range = range
        self.descending = descending
        self.uuids = uuids
        let (lowered, overflow) = range.start.subtractingReportingOverflow(max(longest, 0))
        lowest = overflow ? Int64.min : lowered
        func key(_ at: Int64, _ uuid: [UInt8]) -> InlineBytes { StartIndexRow.key(type: type, source: source, start: at, uuid: uuid) }
        if let position {
            let resume = key(position.startUs, position.uuid)
            entry = descending ? try cursor.seek(atMost: resume) : try cursor.seek(atLeast: resume)
            if let current = entry, resume.equals(current.key) { entry = descending ? try cursor.previous() : try cursor.next() }
        } else {
            // atMost lands on the key equal to (end, 0…0) at worst, which starts at `end`: skipped in next().
            entry = descending
                ? try cursor.seek(atMost: key(range.end, [UInt8](repeating: 0, count: 16)))
                : try cursor.seek(atLeast: key(lowest, []))
        }
    }

    /// The next row overlapping the range, or nil once the walk has passed it.
    mutating func next() throws -> IndexEntry? {
        while let current = entry, let row = try StartIndexRow(current, type: type, source: source, cipher: cipher) {
            let start = row.startUs
            if descending ? start < lowest : start >= range.end { break }
            let overlapping = range.overlaps(start: start, end: row.endUs) ? row.entry(uuid: uuids) : nil
            entry = descending ? try cursor.previous() : try cursor.next()
            if let overlapping { return overlapping }
        }
        entry = nil
        return nil
    }
}
