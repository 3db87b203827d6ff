import Foundation
import HealthModel
import LMDB
import LedgerSchema
import Logging
import SwiftProtobuf
import Synchronization

/// The owner's access records (docs/LEDGER.md, "Access records"): one per call that returned
/// health data, or per kind of call and second for calls alike (``AccessRecord/calls``),
/// kept in memory as calls end and written in batches, at most
/// ``LedgerConfiguration/accessFlushInterval`` apart (a crash loses at most that much), into
/// the ledger's `access_log` database. Not part of the log or the projections: reads change
/// no history, and a replay keeps them.
///
/// Keys: the call's time (8 bytes, microseconds, sign bit flipped) ‖ 4 random bytes drawn once
/// per batch ‖ the record's place in its batch (4): processes writing the same ledger never collide. Values: a `healthledger.v1.AccessRecord`, sealed
/// (AES-256-GCM, domain 6 ‖ the key) in an encrypted ledger.
final class AccessLog: Sendable {
    /// What makes calls alike: they share a record within a second.
    private struct Alike: Hashable {
        var second: Int64
        var credentialID: String
        var method: String
        var types: [String]
        var asOfSequence: UInt64?

        init(_ record: AccessRecord) {
            second = Int64((record.time.timeIntervalSince1970).rounded(.down))
            credentialID = record.credentialID
            method = record.method
            types = record.types
            asOfSequence = record.asOfSequence
        }
    }

    private struct Pending {
        var records: [AccessRecord] = []
        /// Where each kind of call of the batch is in `records`.
        var places: [Alike: Int] = [:]
    }

    private let pending = Mutex(Pending())

    /// Notes a record: merged into the batch's record of calls alike answered in the same
    /// second (their calls and objects added up), or appended.
    func add(_ record: AccessRecord) {
        let alike = Alike(record)
        pending.withLock { pending in
            if let place = pending.places[alike] {
                pending.records[place].calls += record.calls
                pending.records[place].objects += record.objects
            } else {
                pending.places[alike] = pending.records.count
                pending.records.append(record)
            }
        }
    }

    /// The records not yet written, handed over once.
    func take() -> [AccessRecord] {
        pending.withLock { pending in
            defer { pending = Pending() }
            return pending.records
        }
    }

    /// Puts back records whose write failed, before any added since (not merged with them).
    func restore(_ records: [AccessRecord]) {
        pending.withLock { pending in
            pending.records.insert(contentsOf: records, at: 0)
            pending.places = pending.places.mapValues { $0 + records.count }
        }
    }

    var isEmpty: Bool { pending.withLock { $0.records.isEmpty } }

    static func key(time: Date, batch: UInt32, index: UInt32) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(16)
        KeyEncoding.appendTime(microseconds(time), to: &key)
        KeyEncoding.append(batch, to: &key)
        KeyEncoding.append(index, to: &key)
        return key
    }

    /// The first key at or after `time`.
    static func lowest(at time: Date) -> [UInt8] {
        var key: [UInt8] = []
        KeyEncoding.appendTime(microseconds(time), to: &key)
        return key + [UInt8](repeating: 0, count: 8)
    }

    /// Most records a page returns, and what a page returns when asked for 0.
    static let maximumPage = 10_000
    static let defaultPage = 1_000
    /// Most records one page reads, matching or not.
    static let scanBudget = 100_000
    /// Most expired records one flush deletes (the rest go with the next ones).
    static let prunedPerFlush = 10_000
}

/// Writes the access records every `interval` while the ledger is open, on the process's
/// access-record ticker (the writes wait for the disk: not on the threads that answer
/// calls); and, at its first turn and then hourly, deletes expired records even when no call
/// left new ones, so that a ledger nobody reads still forgets them.
final class AccessFlushLoop: TickerMember {
    /// How often a ledger with nothing to write looks for expired records.
    static let pruneInterval = Duration.seconds(3600)

    private struct State {
        weak var ledger: Ledger?
        var lastPruned: ContinuousClock.Instant?
        var stopped = false
    }

    private let state = Mutex(State())

    func start(_ ledger: Ledger, every interval: Duration) {
        state.withLock { $0.ledger = ledger }
        ProcessTicker.shared("access-records", every: interval).register(self)
    }

    func stop() { state.withLock { $0.stopped = true } }

    var isStopped: Bool { state.withLock { $0.stopped || $0.ledger == nil } }

    /// Writes what was noted, or prunes when an hour has passed.
    func turn() {
        let due: Ledger? = state.withLock { state in
            guard !state.stopped, let ledger = state.ledger else { return nil }
            let now = ContinuousClock.now
            if ledger.accessLog.isEmpty, let lastPruned = state.lastPruned, now - lastPruned < Self.pruneInterval { return nil }
            state.lastPruned = now
            return ledger
        }
        // Outside the lock: when this was the ledger's last reference, its deinit stops this loop.
        due?.flushAccessRecordsLogging()
    }
}

extension Ledger {
    /// Notes a call that returned health data; it is written with the next batch
    /// (``flushAccessRecords(now:)``), within ``LedgerConfiguration/accessFlushInterval``.
    public func recordAccess(_ record: AccessRecord) {
        accessLog.add(record)
    }

    /// Writes the access records noted since the last flush, durably, and deletes those
    /// older than the retention period (``LedgerConfiguration/accessRetention``). With no
    /// record to write and none expired, it writes nothing.
    /// - Returns: how many records it wrote.
    @discardableResult
    public func flushAccessRecords(now: Date = Date()) throws -> Int {
        let records = accessLog.take()
        let cutoff = AccessLog.lowest(at: now.addingTimeInterval(-configuration.accessRetention))
        if records.isEmpty {
            let expired = try read { snapshot in
                try snapshot.withCursor(on: snapshot.databases.accessLog) { cursor in try cursor.first()?.key.lexicographicallyPrecedes(cutoff) ?? false }
            }
            guard expired else { return 0 }
        }
        var generator = SystemRandomNumberGenerator()
        let batch = UInt32.random(in: .min ... .max, using: &generator)
        // A follower's copy keeps its records and names them in its outbox, for the primary.
        let forwarding = accessForwarding?.forwards(id) == true
        do {
            try environment.write { txn in
                let keyed = records.enumerated().map { index, record in
                    ForwardedAccessRecord(key: AccessLog.key(time: record.time, batch: batch, index: UInt32(truncatingIfNeeded: index)), record: record)
                }
                _ = try writeAccessRecords(keyed, outbox: forwarding, in: txn)
                try pruneAccessRecords(before: cutoff, in: txn)
                // Led here now (a cluster member that took over): what waited for the old
                // primary is this server's to keep, and kept already.
                if !forwarding { try dropAccessOutbox(in: txn) }
            }
        } catch {
            accessLog.restore(records)
            throw error
        }
        if !records.isEmpty {
            if forwarding { accessForwarding?.note(id) }
            // Followers copy them (their watch names the ledger).
            changeWatchers.noteAccessRecords()
        }
        return records.count
    }

    /// ``flushAccessRecords(now:)`` for the periodic loop: a failure is logged, and the
    /// records wait for the next flush.
    func flushAccessRecordsLogging() {
        do { try flushAccessRecords() } catch { logger.error("cannot write the access records", metadata: ["error": "\(error)"]) }
    }

    /// The access records that match `filter`, oldest first, from the one after `after` (a
    /// page's ``AccessRecordPage/next``), at most `limit` (0: 1,000; at most 10,000), reading
    /// at most 100,000 records.
    /// Records still in memory are not read: they are written within a second.
    /// - Throws: ``HealthError`` `authorizationDenied` for an app: the records are the owner's
    ///   (and the operator's, on the data directory).
    public func accessRecords(_ filter: AccessRecordFilter, after: [UInt8]? = nil, limit: Int = 0, as principal: Principal) throws -> AccessRecordPage {
        if case .app = principal { throw RoleRefusal.readingAccessRecords }
        if let since = filter.since, let until = filter.until, until < since {
            throw HealthError.invalidArgument("the range ends before it starts", field: "until_us")
        }
        if let after, after.count != 16 { throw HealthError.invalidArgument("not a position in the access records", field: "after") }
        let limit = limit == 0 ? AccessLog.defaultPage : min(max(limit, 1), AccessLog.maximumPage)
        let start = [after.map { $0 + [0] }, filter.since.map(AccessLog.lowest(at:))].compactMap { $0 }.max { $0.lexicographicallyPrecedes($1) }
        let end = filter.until.map(AccessLog.lowest(at:))
        return try read { snapshot in
            var page = AccessRecordPage(records: [], next: nil)
            try snapshot.withCursor(on: snapshot.databases.accessLog) { cursor in
                var entry = try start.map { try cursor.seek(atLeast: $0) } ?? cursor.first()
                var scanned = 0
                while let current = entry {
                    if let end, !current.key.lexicographicallyPrecedes(end) { return }
                    if page.records.count == limit || scanned == AccessLog.scanBudget {
                        page.hasMore = true
                        return
                    }
                    scanned += 1
                    let value = try snapshot.databases.clear(accessRecord: current.value, key: current.key, in: snapshot.txn)
                    let record: AccessRecord
                    do {
                        record = AccessRecord(try Healthledger_V1_AccessRecord(serializedBytes: Array(value)))
                    } catch {
                        throw LedgerFailure.corrupted("an access record does not decode")
                    }
                    page.next = Array(current.key)
                    if filter.matches(record) { page.records.append(record) }
                    entry = try cursor.next()
                }
            }
            return page
        }
    }
}

/// A page of access records.
public struct AccessRecordPage: Sendable {
    public var records: [AccessRecord]
    /// The position after the last record the page read, matching or not: the `after` of the
    /// next page, or of a later read of the records written since. Nil when it read none.
    public var next: [UInt8]?
    /// The page stopped at its limit (or its scan budget): more may follow now.
    public var hasMore = false
    /// In the order of arrival: the place asked for is not this server's; the page is its end.
    public var restarted = false

    init(records: [AccessRecord], next: [UInt8]?) {
        self.records = records
        self.next = next
    }
}

extension LedgerDatabases {
    /// An access record as `access_log` keeps it under `key`: sealed when the ledger is encrypted.
    func storable(accessRecord value: [UInt8], key: [UInt8]) -> [UInt8] {
        guard let cipher else { return value }
        return value.withUnsafeBytes { plain in key.withUnsafeBytes { cipher.seal(plain, domain: .accessRecord, context: $0) } }
    }

    /// An access record's clear bytes.
    func clear(accessRecord stored: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, in txn: Transaction) throws -> UnsafeRawBufferPointer {
        guard let cipher else { return stored }
        return txn.retain(try cipher.open(stored, domain: .accessRecord, context: key))
    }
}
