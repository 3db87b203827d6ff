import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import Synchronization

/// Which of a store's ledgers hand the access records of the reads they answer to a primary
/// (docs/LEDGER.md, "Access records"; docs/PROTOCOL.md §7.18, `ForwardAccessRecords`), and
/// which have records waiting to go.
///
/// A server that follows a primary (``Rule/everyLedger``), or a cluster member for the ledgers
/// of the placement groups it does not lead (``Rule/groupsNotLed``), writes the keys of each
/// ledger's access records into its `access_outbox` with the records, in the same
/// transaction; its follower sends what the outbox names to the primary, then deletes those
/// keys (``Ledger/forwardableAccessRecords(limit:)``, ``Ledger/forwarded(_:)``). The outbox is
/// in the ledger's file: a crash, a restart or a time without a primary loses nothing
/// written, and a record sent twice is kept once.
///
/// The other way, a follower copies the records its primary holds in the order they arrived
/// there (``Ledger/accessFeed(after:afterKey:limit:)``, ``Ledger/keepCopiedAccessRecords(_:)``).
public final class AccessForwarding: Sendable {
    /// Which ledgers' access records go to a primary.
    public enum Rule: Sendable {
        /// None: a server on its own, or a primary.
        case none
        /// Every ledger: a follower of a primary (`healthledgerd --follow`).
        case everyLedger
        /// The ledgers of the placement groups this server does not lead: a cluster member.
        case groupsNotLed
    }

    private struct State {
        var rule = Rule.none
        /// Ledgers whose outbox may hold keys.
        var pending = Set<String>()
    }

    private let state = Mutex(State())
    /// The groups this server leads (its store's).
    private let terms: PrimaryTerms

    init(terms: PrimaryTerms) { self.terms = terms }

    /// Sets the rule (set it before the server answers calls: records written before go nowhere).
    public func forward(_ rule: Rule) {
        state.withLock { $0.rule = rule }
    }

    /// Whether ledger `id`'s access records go to a primary.
    func forwards(_ id: String) -> Bool {
        switch state.withLock({ $0.rule }) {
        case .none: false
        case .everyLedger: true
        case .groupsNotLed: terms[Placement.group(of: id)] == nil
        }
    }

    /// Notes that ledger `id`'s outbox may hold keys (again, when sending them failed).
    public func note(_ id: String) {
        _ = state.withLock { $0.pending.insert(id) }
    }

    /// Takes the ledgers noted for which `chosen` is true off the list, and returns them: a
    /// write of their access records from now on notes them again.
    public func takePending(where chosen: (String) -> Bool) -> [String] {
        // `chosen` is asked outside the lock (a follower's answers take its own).
        let taken = state.withLock { $0.pending }.filter(chosen)
        state.withLock { $0.pending.subtract(taken) }
        return taken.sorted()
    }
}

extension Ledger {
    /// Most records one forwarding call carries, and one page of ``accessFeed(after:afterKey:limit:)``.
    public static let maximumForwardedAccessRecords = 10_000

    /// The `meta` key of where this copy's records stand in its primary's feed: the place (8
    /// bytes, big-endian) and the key there (16 bytes).
    static let copiedAccessKey: [UInt8] = Array("access_copied".utf8)

    /// Writes `records` in `txn`: each into `access_log` under its key, the key into
    /// `access_feed` after the last one there, and with `outbox` into `access_outbox`. A key
    /// `access_log` holds already is left as it is.
    /// - Returns: how many were new.
    func writeAccessRecords(_ records: [ForwardedAccessRecord], outbox: Bool, in txn: Transaction) throws -> Int {
        var arrival = try txn.withCursor(on: databases.accessFeed) { try $0.last().map { KeyEncoding.uint64($0.key, at: 0) } } ?? 0
        var written = 0
        for forwarded in records {
            guard try txn.get(forwarded.key, in: databases.accessLog) == nil else { continue }
            let value: [UInt8] = try Healthledger_V1_AccessRecord(forwarded.record).serializedBytes()
            try txn.put(databases.storable(accessRecord: value, key: forwarded.key), forKey: forwarded.key, in: databases.accessLog)
            arrival += 1
            try txn.put(forwarded.key, forKey: KeyEncoding.sequenceKey(arrival), in: databases.accessFeed, append: true)
            if outbox { try txn.put([UInt8](), forKey: forwarded.key, in: databases.accessOutbox) }
            written += 1
        }
        return written
    }

    /// Deletes up to ``AccessLog/prunedPerFlush`` keys from the outbox.
    func dropAccessOutbox(in txn: Transaction) throws {
        try txn.withCursor(on: databases.accessOutbox) { cursor in
            var dropped = 0
            while dropped < AccessLog.prunedPerFlush, try cursor.first() != nil {
                try cursor.deleteCurrent()
                dropped += 1
            }
        }
    }

    /// Deletes up to ``AccessLog/prunedPerFlush`` records older than `cutoff` (a key) from
    /// `access_log`, and as many places of `access_feed` naming such records.
    func pruneAccessRecords(before cutoff: [UInt8], in txn: Transaction) throws {
        for (database, byValue) in [(databases.accessLog, false), (databases.accessFeed, true)] {
            try txn.withCursor(on: database) { cursor in
                var pruned = 0
                while pruned < AccessLog.prunedPerFlush, let first = try cursor.first(),
                    (byValue ? first.value : first.key).lexicographicallyPrecedes(cutoff)
                {
                    try cursor.deleteCurrent()
                    pruned += 1
                }
            }
        }
    }

    /// The oldest access records waiting in the outbox to go to the primary, at most `limit`.
    /// A key whose record is gone (expired meanwhile) is returned with no record: pass it to
    /// ``forwarded(_:)`` all the same.
    public func forwardableAccessRecords(limit: Int = 1_000) throws -> (records: [ForwardedAccessRecord], keys: [[UInt8]]) {
        try read { snapshot in
            var records: [ForwardedAccessRecord] = []
            var keys: [[UInt8]] = []
            try snapshot.withCursor(on: snapshot.databases.accessOutbox) { cursor in
                var entry = try cursor.first()
                while let current = entry, keys.count < min(max(limit, 1), Self.maximumForwardedAccessRecords) {
                    let key = Array(current.key)
                    keys.append(key)
                    if let record = try storedAccessRecord(key, in: snapshot) { records.append(ForwardedAccessRecord(key: key, record: record)) }
                    entry = try cursor.next()
                }
            }
            return (records, keys)
        }
    }

    /// The record `access_log` holds under `key`, if any.
    private func storedAccessRecord(_ key: some ContiguousBytesKey, in snapshot: LedgerSnapshot) throws -> AccessRecord? {
        try key.withKeyBytes { key in
            guard let stored = try snapshot.get(key, in: snapshot.databases.accessLog) else { return nil }
            let value = try snapshot.databases.clear(accessRecord: stored, key: key, in: snapshot.txn)
            guard let message = try? Healthledger_V1_AccessRecord(serializedBytes: Array(value)) else {
                throw LedgerFailure.corrupted("an access record does not decode")
            }
            return AccessRecord(message)
        }
    }

    /// Removes `keys` from the outbox once the primary has their records.
    public func forwarded(_ keys: [[UInt8]]) throws {
        guard !keys.isEmpty else { return }
        try environment.write { txn in
            for key in keys { try txn.delete(key, in: databases.accessOutbox) }
        }
    }

    /// Whether the outbox is empty.
    public var accessOutboxIsEmpty: Bool {
        get throws { try read { snapshot in try snapshot.withCursor(on: snapshot.databases.accessOutbox) { try $0.first() == nil } } }
    }

    /// Keeps the access records a follower forwarded (the primary's side of
    /// `ForwardAccessRecords`), each under its key, beside this server's own: a key already
    /// kept, or a record past the retention period, is left out. A server that hands this
    /// ledger's records to a primary itself (a cluster member sent records for a group it no
    /// longer leads) names them in its outbox too, for that primary.
    /// - Returns: how many were new.
    /// - Throws: ``HealthError`` `invalidArgument` when a record is malformed
    ///   (``validateForwarded(_:)``); nothing is kept then.
    public func keepForwardedAccessRecords(_ records: [ForwardedAccessRecord], now: Date = Date()) throws -> Int {
        for (index, forwarded) in records.enumerated() {
            if let (problem, field) = Self.problem(of: forwarded, now: now) { throw HealthError.invalidArgument(problem, field: "records[\(index)].\(field)") }
        }
        let cutoff = AccessLog.lowest(at: now.addingTimeInterval(-configuration.accessRetention))
        // Sent here while this server hands the ledger's records on (it no longer leads it): on they go.
        let forwarding = accessForwarding?.forwards(id) == true
        let kept = try environment.write { txn in
            try writeAccessRecords(records.filter { !$0.key.lexicographicallyPrecedes(cutoff) }, outbox: forwarding, in: txn)
        }
        if kept > 0 {
            if forwarding { accessForwarding?.note(id) }
            // Followers copy them (their watch names the ledger).
            changeWatchers.noteAccessRecords()
        }
        return kept
    }

    /// How far past this server's clock a record from another server may be dated.
    static let forwardedClockSkew: TimeInterval = 300

    /// What makes a record another server sent unfit to keep, and the field at fault: a key
    /// not of 16 bytes or not beginning with the record's time, a time more than
    /// ``forwardedClockSkew`` past `now` (it would never expire in time, and hide records
    /// behind it), no method or credential or either over 200 bytes, an app's bundle
    /// identifier or name over 200 bytes, more than 100 types or one over 200 bytes. Nil when fit.
    static func problem(of forwarded: ForwardedAccessRecord, now: Date) -> (String, String)? {
        let record = forwarded.record
        guard forwarded.key.count == 16 else { return ("an access record's key is 16 bytes, got \(forwarded.key.count)", "key") }
        guard forwarded.key.prefix(8).elementsEqual(AccessLog.lowest(at: record.time).prefix(8)) else {
            return ("an access record's key does not begin with its time", "key")
        }
        guard record.time.timeIntervalSince(now) <= forwardedClockSkew else {
            return ("an access record is dated \(record.time.formatted(.iso8601)), more than \(Int(forwardedClockSkew)) s past this server's clock", "record.time_us")
        }
        guard !record.method.isEmpty, record.method.utf8.count <= 200 else { return ("an access record names its method (at most 200 bytes)", "record.method") }
        guard !record.credentialID.isEmpty, record.credentialID.utf8.count <= 200 else {
            return ("an access record names its credential (at most 200 bytes)", "record.credential_id")
        }
        if case .app(let source) = record.principal, source.bundleIdentifier.utf8.count > 200 || source.name.utf8.count > 200 {
            return ("an access record's app has a bundle identifier and a name of at most 200 bytes each", "record.actor")
        }
        guard record.types.count <= 100, record.types.allSatisfy({ $0.utf8.count <= 200 }) else {
            return ("an access record names at most 100 types of at most 200 bytes each", "record.types")
        }
        return nil
    }

    /// About the most bytes of records one page of ``accessFeed(after:afterKey:limit:)``
    /// holds (always one record), well inside a frame.
    static let maximumFeedPageBytes = 1 << 20

    /// The access records this server holds of the ledger in the order they arrived here
    /// (its own as it wrote them, and those forwarded or copied to it), after place `after`,
    /// which must hold `afterKey` (else from the first, ``AccessFeedPage/restarted``); at most
    /// `limit` (0: 1,000; at most 10,000) and about 1 MiB. A place whose record expired is
    /// passed over (a page may then hold none while its end moves on).
    public func accessFeed(after: UInt64, afterKey: [UInt8], limit: Int = 0) throws -> AccessFeedPage {
        let limit = limit == 0 ? 1_000 : min(max(limit, 1), Self.maximumForwardedAccessRecords)
        return try read { snapshot in
            var page = AccessFeedPage()
            var start = after
            if after > 0 {
                let held = try snapshot.get(KeyEncoding.sequenceKey(after), in: snapshot.databases.accessFeed)
                if held.map({ !$0.elementsEqual(afterKey) }) ?? true { (start, page.restarted) = (0, true) }
            }
            try snapshot.withCursor(on: snapshot.databases.accessFeed) { cursor in
                var entry = try cursor.seek(atLeast: KeyEncoding.sequenceKey(start + 1))
                var (read, bytes) = (0, 0)
                while let current = entry {
                    if read == limit || bytes >= Self.maximumFeedPageBytes {
                        page.hasMore = true
                        return
                    }
                    read += 1
                    (page.next, page.nextKey) = (KeyEncoding.uint64(current.key, at: 0), Array(current.value))
                    if let record = try storedAccessRecord(current.value, in: snapshot) {
                        page.records.append(ForwardedAccessRecord(key: Array(current.value), record: record))
                        bytes += 64 + record.method.utf8.count + record.credentialID.utf8.count + record.types.reduce(0) { $0 + $1.utf8.count + 2 }
                    }
                    entry = try cursor.next()
                }
            }
            return page
        }
    }

    /// The owner's access records that match `filter`, in the order they arrived at this server
    /// (``accessFeed(after:afterKey:limit:)``: what following them needs, since a follower's
    /// records land in their time's place, behind newer ones), from place `after` (24 bytes:
    /// the number, big-endian, and the key of the record there; a page's ``AccessRecordPage/next``).
    /// Without `after`, no records: the page's `next` is the end, to follow from. A place that
    /// is not this server's (another copy's, or before a restore) gives the end too, with
    /// ``AccessRecordPage/restarted``.
    /// - Throws: ``HealthError`` `authorizationDenied` for an app; `invalidArgument` for a
    ///   place not of 24 bytes or a range that ends before it starts.
    public func accessRecordsInArrivalOrder(_ filter: AccessRecordFilter, after: [UInt8]?, limit: Int = 0, as principal: Principal) throws -> AccessRecordPage {
        if case .app = principal { throw RoleRefusal.readingAccessRecords }
        if let since = filter.since, let until = filter.until, until < since {
            throw HealthError.invalidArgument("the range ends before it starts", field: "until_us")
        }
        if let after, after.count != 24 { throw HealthError.invalidArgument("not a place in the order the access records arrived in", field: "after") }
        let end = try read { snapshot in
            try snapshot.withCursor(on: snapshot.databases.accessFeed) { cursor in
                try cursor.last().map { KeyEncoding.sequenceKey(KeyEncoding.uint64($0.key, at: 0)) + Array($0.value) }
            }
        } ?? [UInt8](repeating: 0, count: 24)
        guard let after else { return AccessRecordPage(records: [], next: end) }
        let number = after.withUnsafeBytes { KeyEncoding.uint64($0, at: 0) }
        let feed = try accessFeed(after: number, afterKey: Array(after[8...]), limit: limit == 0 ? AccessLog.defaultPage : limit)
        guard !feed.restarted || number == 0 else {
            var page = AccessRecordPage(records: [], next: end)
            page.restarted = true
            return page
        }
        let records = feed.records.map { $0.record }.filter { record in
            filter.matches(record) && filter.since.map { record.time >= $0 } ?? true && filter.until.map { record.time < $0 } ?? true
        }
        var page = AccessRecordPage(records: records, next: feed.next == 0 ? after : KeyEncoding.sequenceKey(feed.next) + feed.nextKey)
        page.hasMore = feed.hasMore
        return page
    }

    /// Where this copy's access records stand in its primary's order of arrival (the last
    /// page kept with ``keepCopiedAccessRecords(_:now:)``): 0 and empty before the first.
    public func copiedAccessPosition() throws -> (after: UInt64, key: [UInt8]) {
        try read { snapshot in
            guard let held = try snapshot.get(Self.copiedAccessKey, in: snapshot.databases.meta), held.count == 24 else { return (0, []) }
            return (KeyEncoding.uint64(held, at: 0), Array(held[8...]))
        }
    }

    /// Keeps a page of the primary's access records (a follower's copy): each new key under
    /// itself, and the page's end as this copy's place in the primary's order. A record unfit
    /// to keep (``problem(of:now:)``) is passed over, so that one cannot hold up the rest.
    /// - Returns: how many were new, and how many were passed over.
    /// - Throws: ``HealthError`` `invalidArgument` when the page's end names a key not of 16 bytes; nothing is kept then.
    public func keepCopiedAccessRecords(_ page: AccessFeedPage, now: Date = Date()) throws -> (kept: Int, refused: Int) {
        guard page.nextKey.count == 16 || page.next == 0 else {
            throw HealthError.invalidArgument("a place in the primary's access records names a key of 16 bytes, got \(page.nextKey.count)", field: "next_key")
        }
        let fit = page.records.filter { Self.problem(of: $0, now: now) == nil }
        let kept = try environment.write { txn in
            let written = try writeAccessRecords(fit, outbox: false, in: txn)
            if page.next > 0 { try txn.put(KeyEncoding.sequenceKey(page.next) + page.nextKey, forKey: Self.copiedAccessKey, in: databases.meta) }
            return written
        }
        // This copy's own followers copy them in turn.
        if kept > 0 { changeWatchers.noteAccessRecords() }
        return (kept, page.records.count - fit.count)
    }
}
