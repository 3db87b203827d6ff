import Crypto
import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

/// An anchored object query (HealthKit's `HKAnchoredObjectQueryDescriptor`): the changes to
/// objects of one or several types since an anchor. One anchor covers every type.
///
/// ```swift
/// var anchor: QueryAnchor?
/// repeat {
///     let page = try ledger.changes(ChangeQuery(type: heartRate, anchor: anchor, limit: 1000), as: principal)
///     apply(page.added, page.deleted)
///     anchor = page.anchor
/// } while page.hasMore
/// ```
public struct ChangeQuery: Sendable, Hashable {
    /// The types and the predicate each one's added objects must match: at least one, each
    /// type once (see ``QueryDescriptor/validate(_:)``).
    public var descriptors: [QueryDescriptor]
    /// Added objects must overlap this interval (as in ``SampleQuery``); nil matches all.
    /// Deleted objects are reported whatever their dates, as HealthKit does.
    public var interval: DateInterval?
    /// Where the previous page stopped; nil starts from the beginning of the ledger.
    public var anchor: QueryAnchor?
    /// At most this many changes (added plus deleted, all types together); 0 means no limit.
    public var limit: Int

    public init(type: ObjectType, interval: DateInterval? = nil, predicate: ObjectPredicate? = nil, anchor: QueryAnchor? = nil, limit: Int = 0) {
        self.init(descriptors: [QueryDescriptor(type: type, predicate: predicate)], interval: interval, anchor: anchor, limit: limit)
    }

    public init(descriptors: [QueryDescriptor], interval: DateInterval? = nil, anchor: QueryAnchor? = nil, limit: Int = 0) {
        self.descriptors = descriptors
        self.interval = interval
        self.anchor = anchor
        self.limit = limit
    }

    /// The query's types, in descriptor order.
    public var types: [ObjectType] { descriptors.map(\.type) }
}

/// One page of an anchored query's results.
public struct ChangePage: Sendable {
    /// Objects saved (or newly readable) since the anchor, in commit order.
    public var added: [HealthObject]
    /// Objects deleted (or no longer readable) since the anchor, in commit order.
    public var deleted: [DeletedObject]
    /// Resumes the query after this page.
    public var anchor: QueryAnchor
    /// More matching changes follow this page (it stopped at its limit).
    public var hasMore: Bool

    public var count: Int { added.count + deleted.count }
}

/// A page of an anchored query's results whose added objects were handed over serialized,
/// as they were read (``Ledger/encodedChanges(_:as:maximumBytes:onScope:added:)``).
public struct WrittenChangePage: Sendable {
    /// How many objects were handed over.
    public var addedCount: Int
    /// Objects deleted (or no longer readable) since the anchor, in commit order.
    public var deleted: [DeletedObject]
    /// Resumes the query after this page.
    public var anchor: QueryAnchor
    /// More matching changes follow this page (it stopped at its limit or its size).
    public var hasMore: Bool

    public var count: Int { addedCount + deleted.count }
}

/// A point in a type's change stream. Changes are ordered by the sequence of the event that
/// made them, then by UUID (one selection event can change several objects at once).
///
/// The UUID is held as two big-endian halves, which compare as its bytes do: a page reads a
/// position per change, and an array each would be an allocation each.
struct ChangePosition: Comparable, Sendable {
    var sequence: UInt64
    /// Nil: before every UUID of the sequence.
    private var halves: (high: UInt64, low: UInt64)?

    static let origin = ChangePosition(sequence: 0, uuid: [])

    /// - Parameter uuid: 16 bytes, or none for the point before every UUID of the sequence.
    init(sequence: UInt64, uuid: [UInt8]) {
        precondition(uuid.isEmpty || uuid.count == 16, "a change position's UUID has 16 bytes or none")
        self.sequence = sequence
        if !uuid.isEmpty { self = uuid.withUnsafeBytes { ChangePosition(sequence: sequence, uuidIn: $0, at: 0) } }
    }

    /// The position of the UUID in the 16 bytes of `bytes` from `offset`.
    init(sequence: UInt64, uuidIn bytes: UnsafeRawBufferPointer, at offset: Int) {
        self.sequence = sequence
        halves = (KeyEncoding.uint64(bytes, at: offset), KeyEncoding.uint64(bytes, at: offset + 8))
    }

    /// The UUID's 16 bytes, or none.
    var uuid: [UInt8] {
        guard let halves else { return [] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        KeyEncoding.append(halves.high, to: &bytes)
        KeyEncoding.append(halves.low, to: &bytes)
        return bytes
    }

    static func == (a: ChangePosition, b: ChangePosition) -> Bool {
        a.sequence == b.sequence && a.halves?.high == b.halves?.high && a.halves?.low == b.halves?.low
    }

    static func < (a: ChangePosition, b: ChangePosition) -> Bool {
        guard a.sequence == b.sequence else { return a.sequence < b.sequence }
        guard let right = b.halves else { return false }
        guard let left = a.halves else { return true }
        return left.high != right.high ? left.high < right.high : left.low < right.low
    }
}

/// What an anchor records: where the reader stopped, and under which read scope. When the
/// scope changes (the owner grants or takes away read access to the type), the reader
/// catches up: objects that became readable are reported added, objects that no longer are
/// deleted, up to `boundary` (the furthest position it had seen), before going on as usual.
struct AnchorState: Sendable, Equatable {
    /// Issued to a reader of the whole type.
    var all: Bool
    var position: ChangePosition
    /// Set while catching up after a scope change.
    var boundary: ChangePosition?

    static let origin = AnchorState(all: false, position: .origin, boundary: nil)

    /// The state to resume from under `scope`.
    func resumed(under scope: ReadScope) -> AnchorState {
        // The same scope, or nothing seen yet: go on as recorded.
        if all == scope.all || (position == .origin && boundary == nil) {
            return AnchorState(all: scope.all, position: position, boundary: boundary)
        }
        // The scope changed: catch up from the beginning to the furthest position seen.
        return AnchorState(all: scope.all, position: .origin, boundary: Swift.max(boundary ?? .origin, position))
    }

    /// The state after a page that stopped at `last` with more to come.
    func paused(at last: ChangePosition) -> AnchorState {
        AnchorState(all: all, position: last, boundary: boundary.flatMap { last < $0 ? $0 : nil })
    }

    /// The state after a scan that read everything through the end: past the boundary too.
    func finished(at last: ChangePosition) -> AnchorState {
        AnchorState(all: all, position: Swift.max(last, boundary ?? .origin), boundary: nil)
    }
}

/// One change a reader may see.
struct ChangeEntry {
    var position: ChangePosition
    /// The event that saved the object, when it was added; nil when it is gone.
    var savedSequence: UInt64?
}

extension Ledger {
    /// The changes `principal` may see to objects of the query's type after its anchor
    /// (docs/SEMANTICS.md §7, §6).
    ///
    /// The owner, and an app allowed to read the type, see every change. Any other app sees
    /// the changes to its own objects and, for per-object types, selected objects as added
    /// and deselected ones as deleted at the moment of the selection. Anchors, counts and
    /// `hasMore` come from those changes alone, so they reveal nothing of other data; the
    /// anchor is sealed so its contents (the ledger's sequence numbers) stay hidden too.
    ///
    /// Pages chain by anchor without skipping or repeating a change, whatever commits
    /// between them.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` for a negative limit, an interval that ends
    ///   before it starts, or an anchor from another ledger or type.
    public func changes(_ query: ChangeQuery, as principal: Principal) throws -> ChangePage {
        var decoder = HealthObjectDecoder()
        var added: [HealthObject] = []
        let page = try page(query, as: principal) { object in
            added.append(try decoder.decode(object))
            return 0
        }
        return ChangePage(added: added, deleted: page.deleted, anchor: page.anchor, hasMore: page.hasMore)
    }

    /// The same page with each added object handed to `added` as the serialized
    /// `healthledger.v1.HealthObject` the log stores, in commit order, while the page is read
    /// (the bytes are valid only during the call).
    ///
    /// - Parameters:
    ///   - maximumBytes: the page stops once its objects reach this size.
    ///   - onScope: told the read scope of the page's snapshot.
    public func encodedChanges(
        _ query: ChangeQuery, as principal: Principal, maximumBytes: Int = .max, onScope: (ReadScope) -> Void = { _ in },
        added: (_ object: UnsafeRawBufferPointer) throws -> Void
    ) throws -> WrittenChangePage {
        try page(query, as: principal, maximumBytes: maximumBytes, onScope: onScope) { object in
            try added(object)
            return object.count
        }
    }

    /// Whether `principal` may see changes matching the query after its anchor, and the
    /// anchor past all of them (an observer's check: nothing is loaded but what the
    /// interval and predicates need).
    public func hasChanges(_ query: ChangeQuery, as principal: Principal, onScope: (ReadScope) -> Void = { _ in }) throws -> (
        changed: Bool, anchor: QueryAnchor
    ) {
        let (anchors, range) = try position(of: query)
        return try read { snapshot in
            var changed = false
            var states: [AnchorState] = []
            try eachDescriptor(of: query, anchors, range: range, as: principal, in: snapshot, onScope: onScope) { state, filter, scan in
                var last = state.position
                try scan { entry in
                    if !changed, try filter.match(entry) != nil { changed = true }
                    last = entry.position
                    return true
                }
                states.append(state.finished(at: last))
            }
            return (changed, self.anchors.seal(types: query.types.map(\.code), states))
        }
    }

    /// An anchor after every change `principal` may see of `types` now: a query from it
    /// reports only what changes later.
    public func latestAnchor(for types: [ObjectType], as principal: Principal, onScope: (ReadScope) -> Void = { _ in }) throws -> QueryAnchor {
        try QueryDescriptor.validate(types.map { QueryDescriptor(type: $0) })
        return try read { snapshot in
            var states: [AnchorState] = []
            for type in types {
                let scope = try ReadScope(principal, type: type, in: snapshot)
                onScope(scope)
                var last = ChangePosition.origin
                if scope.all {
                    for source in try changeSources(of: type.code, in: snapshot) {
                        let prefix = ChangeIndexRow.prefix(type: type.code, source: source)
                        last = max(last, try lastChange(in: databases.sourceChanges, prefix: prefix, in: snapshot) ?? last)
                    }
                } else {
                    if scope.ownSource != 0 {
                        let prefix = ChangeIndexRow.prefix(type: type.code, source: scope.ownSource)
                        last = try lastChange(in: databases.sourceChanges, prefix: prefix, in: snapshot) ?? last
                    }
                    for entry in try selectionChanges(type, scope: scope, principal: principal, in: snapshot) { last = max(last, entry.position) }
                }
                states.append(AnchorState(all: scope.all, position: last, boundary: nil))
            }
            return anchors.seal(types: types.map(\.code), states)
        }
    }

    /// An anchor after every change `principal` may see of `type` now.
    public func latestAnchor(for type: ObjectType, as principal: Principal, onScope: (ReadScope) -> Void = { _ in }) throws -> QueryAnchor {
        try latestAnchor(for: [type], as: principal, onScope: onScope)
    }

    /// Calls `body` for each of the query's descriptors with its state (resumed under the
    /// reader's scope on this snapshot, which `onScope` is told), its filter, and a scan of
    /// the changes after that state the reader may see.
    private func eachDescriptor(
        of query: ChangeQuery, _ anchors: [AnchorState], range: TimeRange, as principal: Principal, in snapshot: LedgerSnapshot,
        onScope: (ReadScope) -> Void,
        _ body: (_ state: AnchorState, _ filter: ChangeFilter, _ scan: (_ visit: (ChangeEntry) throws -> Bool) throws -> Void) throws -> Void
    ) throws {
        for (descriptor, anchor) in zip(query.descriptors, anchors) {
            let scope = try ReadScope(principal, type: descriptor.type, in: snapshot)
            onScope(scope)
            let state = anchor.resumed(under: scope)
            try snapshot.withCursor(on: snapshot.databases.events) { events in
                let filter = ChangeFilter(descriptor, interval: query.interval, range: range, principal: principal, snapshot: snapshot, events: events)
                try body(state, filter) { visit in try scanChanges(descriptor.type, from: state, scope: scope, principal: principal, in: snapshot, visit) }
                filter.memberScopes.forEach(onScope)
            }
        }
    }

    /// The query's states, one per descriptor, and its range, after checking it.
    private func position(of query: ChangeQuery) throws -> ([AnchorState], TimeRange) {
        guard query.limit >= 0 else { throw HealthError.invalidArgument("limit must be 0 (no limit) or positive", field: "limit") }
        try QueryDescriptor.validate(query.descriptors)
        let range = TimeRange(query.interval)
        guard range.start <= range.end else { throw HealthError.invalidArgument("the interval ends before it starts", field: "interval") }
        let codes = query.types.map(\.code)
        let after = try query.anchor.map { try anchors.open($0, types: codes) } ?? Array(repeating: .origin, count: codes.count)
        return (after, range)
    }

    /// One page: each type's visible changes after its own position (at most `limit` of
    /// each), merged in commit order up to the limit. Each type's position then moves to
    /// the last of its changes the page took, so pages never skip or repeat a change. Each
    /// added object goes to `add` in that order, which tells the bytes it counts toward
    /// `maximumBytes`.
    private func page(
        _ query: ChangeQuery, as principal: Principal, maximumBytes: Int = .max, onScope: (ReadScope) -> Void = { _ in },
        _ add: (_ object: UnsafeRawBufferPointer) throws -> Int
    ) throws -> WrittenChangePage {
        let (anchors, range) = try position(of: query)
        return try read { snapshot in
            var streams: [ChangeStream] = []
            try eachDescriptor(of: query, anchors, range: range, as: principal, in: snapshot, onScope: onScope) { state, filter, scan in
                var stream = ChangeStream(state: state, scanned: state.position)
                try scan { entry in
                    guard let match = try filter.match(entry) else {
                        // A change the query excludes: the next page need not look at it again.
                        stream.scanned = entry.position
                        return true
                    }
                    if query.limit > 0, stream.items.count >= query.limit {
                        stream.stopped = true
                        return false
                    }
                    stream.items.append((entry.position, match))
                    stream.scanned = entry.position
                    return true
                }
                streams.append(stream)
            }
            var added = 0
            var deleted: [DeletedObject] = []
            var bytes = 0
            var hasMore = false
            while let next = streams.indices.filter({ streams[$0].taken < streams[$0].items.count })
                .min(by: { streams[$0].items[streams[$0].taken].position < streams[$1].items[streams[$1].taken].position })
            {
                if (query.limit > 0 && added + deleted.count >= query.limit) || bytes >= maximumBytes {
                    hasMore = true
                    break
                }
                let item = streams[next].items[streams[next].taken]
                switch item.match {
                case .added(let object):
                    bytes += try add(object)
                    added += 1
                case .assembled(let object):
                    bytes += try object.withUnsafeBytes { try add($0) }
                    added += 1
                case .deleted:
                    deleted.append(try deletedObject(item.position, in: snapshot))
                }
                streams[next].taken += 1
            }
            let states = streams.map { stream in
                if stream.taken == stream.items.count, !stream.stopped { return stream.state.finished(at: stream.scanned) }
                return stream.state.paused(at: stream.taken > 0 ? stream.items[stream.taken - 1].position : stream.state.position)
            }
            hasMore = hasMore || streams.contains(where: \.stopped)
            return WrittenChangePage(addedCount: added, deleted: deleted, anchor: self.anchors.seal(types: query.types.map(\.code), states), hasMore: hasMore)
        }
    }

    /// What a gone object's change reports: its tombstone's sync identifier and version when
    /// the change is the deletion itself; only the UUID when it is a deselection (the object
    /// may have been deleted since, which the reader must not learn).
    private func deletedObject(_ position: ChangePosition, in snapshot: LedgerSnapshot) throws -> DeletedObject {
        let id = UUID(bytes: position.uuid)!
        guard let stored = try snapshot.get(position.uuid, in: snapshot.databases.tombstones) else { return DeletedObject(uuid: id) }
        let tombstone = try Tombstone(uuid: id, stored: stored, type: "", cipher: snapshot.databases.cipher)
        guard tombstone.sequence == position.sequence else { return DeletedObject(uuid: id) }
        return DeletedObject(uuid: id, syncIdentifier: tombstone.syncIdentifier, syncVersion: tombstone.syncVersion)
    }

    /// Visits, in order, the changes after the state's position that `scope` may see. While
    /// catching up after a scope change (up to the state's boundary): a reader that may now
    /// read the whole type gets the other sources' objects it had not been shown; a reader
    /// that no longer may gets those objects as deleted. Then it goes on as usual.
    private func scanChanges(
        _ type: ObjectType, from state: AnchorState, scope: ReadScope, principal: Principal, in snapshot: LedgerSnapshot,
        _ visit: (ChangeEntry) throws -> Bool
    ) throws {
        guard let boundary = state.boundary, state.position < boundary else {
            return try scanChanges(type, after: state.position, scope: scope, principal: principal, in: snapshot, visit)
        }
        let own = scope.ownSource
        /// Whether a change up to the boundary is another source's object, still stored.
        func othersPresent(_ entry: ChangeEntry) throws -> Bool {
            guard entry.savedSequence != nil, let stored = try StoredObject.load(entry.position.uuid, in: snapshot) else { return false }
            return own == 0 || stored.source != own
        }
        if scope.all {
            try scanTypeChanges(type.code, after: state.position, in: snapshot) { entry in
                if entry.position <= boundary, try !othersPresent(entry) { return true }
                return try visit(entry)
            }
            return
        }
        var going = true
        try scanTypeChanges(type.code, after: state.position, in: snapshot) { entry in
            guard entry.position <= boundary else { return false }
            guard try othersPresent(entry) else { return true }
            going = try visit(ChangeEntry(position: entry.position, savedSequence: nil))
            return going
        }
        if going { try scanChanges(type, after: boundary, scope: scope, principal: principal, in: snapshot, visit) }
    }

    /// Visits, in order, the changes after `after` that `scope` may see: the type's change
    /// index for a reader of everything; otherwise the reader's own source's index merged
    /// with its selection's changes. Other sources' changes are never touched.
    private func scanChanges(
        _ type: ObjectType, after: ChangePosition, scope: ReadScope, principal: Principal, in snapshot: LedgerSnapshot,
        _ visit: (ChangeEntry) throws -> Bool
    ) throws {
        if scope.all {
            return try scanTypeChanges(type.code, after: after, in: snapshot, visit)
        }
        let selected = try selectionChanges(type, scope: scope, principal: principal, in: snapshot).filter { $0.position > after }
        var next = 0
        var going = true
        if scope.ownSource != 0 {
            let prefix = ChangeIndexRow.prefix(type: type.code, source: scope.ownSource)
            try scanChangeIndex(databases.sourceChanges, prefix: prefix, after: after, in: snapshot) { entry in
                while next < selected.count, selected[next].position < entry.position {
                    going = try visit(selected[next])
                    next += 1
                    if !going { return false }
                }
                going = try visit(entry)
                return going
            }
        }
        while going, next < selected.count {
            going = try visit(selected[next])
            next += 1
        }
    }

    /// Visits the entries of a change index (`source_changes`) under `prefix` after `after`.
    private func scanChangeIndex(
        _ database: Database, prefix: [UInt8], after: ChangePosition, in snapshot: LedgerSnapshot, _ visit: (ChangeEntry) throws -> Bool
    ) throws {
        try snapshot.withCursor(on: database) { cursor in
            let walk = ChangeWalk(cursor, prefix: prefix)
            var entry = try walk.first(after: after)
            while let current = entry {
                if try !visit(current) { return }
                entry = try walk.next()
            }
        }
    }

    /// Visits every source's changes of `type` after `after`, in order. `source_changes` keeps
    /// each source's changes of a type in a range of its own: one walk per source, merged by
    /// position (a type has few sources, so the next change is the least of the walks' heads).
    private func scanTypeChanges(_ type: UInt32, after: ChangePosition, in snapshot: LedgerSnapshot, _ visit: (ChangeEntry) throws -> Bool) throws {
        let sources = try changeSources(of: type, in: snapshot)
        try snapshot.txn.withCursors(on: databases.sourceChanges, count: sources.count) { cursors in
            let walks = zip(cursors, sources).map { ChangeWalk($0, prefix: ChangeIndexRow.prefix(type: type, source: $1)) }
            try visitMerged(
                heads: try walks.map { try $0.first(after: after) }, precedes: { $0.position < $1.position }, next: { try walks[$0].next() }, visit)
        }
    }

    /// The sources with changes of `type`, from `source_changes` itself: the first row of each
    /// source's range names the source, and the next range begins past it.
    private func changeSources(of type: UInt32, in snapshot: LedgerSnapshot) throws -> [UInt32] {
        try snapshot.withCursor(on: databases.sourceChanges) { cursor in
            var sources: [UInt32] = []
            var entry = try cursor.seek(atLeast: ChangeIndexRow.prefix(type: type))
            while let current = entry, current.key.count == ChangeIndexRow.sourceKeyLength, KeyEncoding.uint32(current.key, at: 0) == type {
                let source = KeyEncoding.uint32(current.key, at: 4)
                sources.append(source)
                guard source < .max else { break }
                entry = try cursor.seek(atLeast: ChangeIndexRow.prefix(type: type, source: source + 1))
            }
            return sources
        }
    }

    private func lastChange(in database: Database, prefix: [UInt8], in snapshot: LedgerSnapshot) throws -> ChangePosition? {
        try snapshot.withCursor(on: database) { cursor in
            guard let current = try cursor.seek(atMost: prefix + KeyEncoding.sequenceKey(.max)) else { return nil }
            return try ChangeIndexRow(current, prefix: prefix)?.position
        }
    }

    /// The changes an app's per-object selection makes to what it sees, in order: a selected
    /// object is added when selected (or saved, if later) and gone when deleted; a deselected
    /// one is gone when deselected. The app's own objects are left to its own index.
    private func selectionChanges(_ type: ObjectType, scope: ReadScope, principal: Principal, in snapshot: LedgerSnapshot) throws -> [ChangeEntry] {
        guard type.isReadPerObject, case .app(let source) = principal else { return [] }
        var changes: [ChangeEntry] = []
        for entry in try SelectionEntry.all(app: source.bundleIdentifier, type: type.code, in: snapshot) {
            if let stored = try StoredObject.load(entry.uuid, in: snapshot) {
                if scope.ownSource != 0, stored.source == scope.ownSource { continue }
                changes.append(
                    entry.selected
                        ? ChangeEntry(position: ChangePosition(sequence: max(stored.sequence, entry.sequence), uuid: entry.uuid), savedSequence: stored.sequence)
                        : ChangeEntry(position: ChangePosition(sequence: entry.sequence, uuid: entry.uuid), savedSequence: nil))
            } else if let stored = try snapshot.get(entry.uuid, in: snapshot.databases.tombstones) {
                let tombstone = try Tombstone(uuid: UUID(bytes: entry.uuid)!, stored: stored, type: "", cipher: snapshot.databases.cipher)
                if tombstone.sourceBundle == source.bundleIdentifier { continue }
                let gone = entry.selected ? tombstone.sequence : entry.sequence
                changes.append(ChangeEntry(position: ChangePosition(sequence: gone, uuid: entry.uuid), savedSequence: nil))
            }
        }
        return changes.sorted { $0.position < $1.position }
    }
}

/// One type's part of an anchored query's page: its changes after its position, and how
/// many of them the page took.
struct ChangeStream {
    var state: AnchorState
    var items: [(position: ChangePosition, match: ChangeFilter.Match)] = []
    var taken = 0
    /// The last change read, matching or not, while the scan ran to the end.
    var scanned: ChangePosition
    /// The scan stopped at the limit: more changes follow.
    var stopped = false
}

/// Decides how an anchored query reports each change it may see: a deletion always; an
/// added object when it overlaps the interval and matches the predicate, a correlation
/// assembled with the members the reader may read (left out when it shows none).
final class ChangeFilter {
    enum Match {
        /// The serialized `HealthObject` to report, as the log stores it.
        case added(UnsafeRawBufferPointer)
        /// A correlation, assembled for the reader.
        case assembled([UInt8])
        case deleted
    }

    private let type: ObjectType
    private let principal: Principal
    private let predicate: ObjectPredicate?
    private let range: TimeRange?
    private let snapshot: LedgerSnapshot
    private let projector: Projector
    private let context: PredicateContext
    private let correlations: CorrelationAssembler?
    /// A cursor over the log, for the saved objects' events: a page's changes come in log
    /// order, so each lookup mostly lands on the page the previous one read (already in
    /// cache, the whole page having been fetched at once) instead of descending from the root.
    private let events: Cursor

    /// - Parameter events: a cursor over `snapshot`'s `events`, for as long as the filter is used.
    init(_ descriptor: QueryDescriptor, interval: DateInterval?, range: TimeRange, principal: Principal, snapshot: LedgerSnapshot, events: Cursor) {
        self.events = events
        type = descriptor.type
        self.principal = principal
        predicate = descriptor.predicate
        self.range = interval == nil ? nil : range
        self.snapshot = snapshot
        projector = Projector(databases: snapshot.databases, units: SummaryCache())
        context = PredicateContext(principal: principal, snapshot: snapshot)
        correlations = type.family == .correlation ? CorrelationAssembler(principal: principal, snapshot: snapshot) : nil
    }

    /// The member types' scopes a correlation query's reads used.
    var memberScopes: [ReadScope] { correlations?.memberScopes ?? [] }

    /// The change as the query reports it, or nil when it excludes it.
    func match(_ entry: ChangeEntry) throws -> Match? {
        guard let saved = entry.savedSequence else {
            // Another source's correlation the app never could see is not reported gone either.
            if let correlations, case .app(let source) = principal,
                try !correlations.deletionVisible(entry.position.uuid, at: entry.position.sequence, app: source.bundleIdentifier)
            {
                return nil
            }
            return .deleted
        }
        let stored = try Ledger.storedEvent(saved, through: events, in: snapshot)
        if range != nil || predicate != nil || correlations != nil {
            let summary = try projector.savedSummary(stored: stored, sequence: saved)
            if let range, !range.overlaps(start: summary.startUs, end: summary.endUs) { return nil }
            let source = try StoredObject.load(entry.position.uuid, in: snapshot)?.source ?? 0
            if let predicate {
                let subject = EntrySubject(
                    IndexEntry(
                        uuid: entry.position.uuid, startUs: summary.startUs, endUs: summary.endUs, sequence: saved, source: source, value: summary.value,
                        isSeries: summary.isSeries),
                    context)
                guard try predicate.matches(subject, type: type) else { return nil }
            }
            if let correlations {
                guard case .correlation(let correlation) = try LedgerEvent(stored: stored).savedObject(),
                    let visible = try correlations.assemble(correlation, source: source)
                else { return nil }
                return .assembled(try Healthledger_V1_HealthObject(.correlation(visible)).serializedBytes())
            }
        }
        return .added(try LedgerEvent.bodyView(stored: stored))
    }
}

/// Seals change positions into opaque ``QueryAnchor``s with the ledger's own key
/// (AES-GCM): an app cannot read the sequence numbers inside, which would tell it how much
/// else happened in the ledger, nor forge one, and an anchor from another ledger or for
/// another type is refused.
struct AnchorSeal: Sendable {
    private let key: SymmetricKey
    static let metaKey: [UInt8] = Array("anchor_key".utf8)
    private static let version: UInt8 = 3

    /// Loads the ledger's anchor key from `meta`, creating it on first use.
    init(environment: Environment, databases: LedgerDatabases) throws {
        if let stored = try environment.read(databases, { snapshot in
            try snapshot.get(Self.metaKey, in: snapshot.databases.meta).flatMap { try databases.secret($0, name: Self.metaKey) }
        }) {
            key = SymmetricKey(data: stored)
            return
        }
        key = try environment.write { txn in
            if let stored = try txn.get(Self.metaKey, in: databases.meta).flatMap({ try databases.secret($0, name: Self.metaKey) }) {
                return SymmetricKey(data: stored)
            }
            let fresh = SymmetricKey(size: .bits256)
            try txn.put(databases.storable(secret: fresh.withUnsafeBytes { Array($0) }, name: Self.metaKey), forKey: Self.metaKey, in: databases.meta)
            return fresh
        }
    }

    /// version(1) count(1), then per type: type(4) flags(1: 1 all, 2 boundary) position
    /// [boundary], each position sequence(8) uuid length(1) uuid(0 or 16); sealed. Version 2
    /// (one type, no count) is still opened.
    func seal(types: [UInt32], _ states: [AnchorState]) -> QueryAnchor {
        var plain: [UInt8] = [Self.version, UInt8(types.count)]
        func append(_ position: ChangePosition) {
            KeyEncoding.append(position.sequence, to: &plain)
            plain.append(UInt8(position.uuid.count))
            plain.append(contentsOf: position.uuid)
        }
        for (type, state) in zip(types, states) {
            KeyEncoding.append(type, to: &plain)
            plain.append((state.all ? 1 : 0) | (state.boundary == nil ? 0 : 2))
            append(state.position)
            if let boundary = state.boundary { append(boundary) }
        }
        // Sealing with a fresh random nonce cannot fail.
        let box = try! AES.GCM.seal(plain, using: key)
        return QueryAnchor(bytes: Array(box.combined!))
    }

    /// The states an anchor holds for `types` (any order of the same types).
    func open(_ anchor: QueryAnchor, types: [UInt32]) throws -> [AnchorState] {
        let invalid = HealthError.invalidArgument("the anchor was not issued by this ledger, or is damaged", field: "anchor")
        guard anchor.bytes.count <= Self.maximumSize, let box = try? AES.GCM.SealedBox(combined: anchor.bytes),
            let plain = try? Array(AES.GCM.open(box, using: key))
        else { throw invalid }
        guard plain.count >= 2, plain[0] == Self.version || plain[0] == 2 else { throw invalid }
        var offset = plain[0] == 2 ? 1 : 2
        let count = plain[0] == 2 ? 1 : Int(plain[1])
        func position() throws -> ChangePosition {
            guard plain.count >= offset + 9 else { throw invalid }
            let sequence = plain.withUnsafeBytes { KeyEncoding.uint64($0, at: offset) }
            let length = Int(plain[offset + 8])
            guard length == 0 || length == 16, plain.count >= offset + 9 + length else { throw invalid }
            defer { offset += 9 + length }
            return ChangePosition(sequence: sequence, uuid: Array(plain[(offset + 9)..<(offset + 9 + length)]))
        }
        var states: [UInt32: AnchorState] = [:]
        for _ in 0..<count {
            guard plain.count >= offset + 5 else { throw invalid }
            let type = plain.withUnsafeBytes { KeyEncoding.uint32($0, at: offset) }
            let flags = plain[offset + 4]
            offset += 5
            guard flags & ~3 == 0 else { throw invalid }
            states[type] = AnchorState(all: flags & 1 != 0, position: try position(), boundary: flags & 2 != 0 ? try position() : nil)
        }
        guard offset == plain.count else { throw invalid }
        guard states.count == types.count, let ordered = Optional(types.compactMap({ states[$0] })), ordered.count == types.count else {
            throw HealthError.invalidArgument(
                types.count == 1 ? "the anchor was issued for another type" : "the anchor was issued for other types", field: "anchor")
        }
        return ordered
    }

    /// The largest anchor: every descriptor of a query with both positions.
    static let maximumSize = 64 + QueryDescriptor.maximumCount * 55
}

/// One source's changes of a type read in order from `source_changes`, after a position.
private struct ChangeWalk {
    let cursor: Cursor
    let prefix: [UInt8]

    init(_ cursor: Cursor, prefix: [UInt8]) { (self.cursor, self.prefix) = (cursor, prefix) }

    /// The first change after `after`.
    func first(after: ChangePosition) throws -> ChangeEntry? {
        var entry = try read(cursor.seek(atLeast: prefix + KeyEncoding.sequenceKey(after.sequence)))
        while let current = entry, current.position <= after { entry = try next() }
        return entry
    }

    /// The change after the one read last.
    func next() throws -> ChangeEntry? { try read(cursor.next()) }

    private func read(_ entry: Cursor.Entry?) throws -> ChangeEntry? {
        guard let entry, let row = try ChangeIndexRow(entry, prefix: prefix) else { return nil }
        return ChangeEntry(position: row.position, savedSequence: row.wasAdded ? row.sequence : nil)
    }
}
