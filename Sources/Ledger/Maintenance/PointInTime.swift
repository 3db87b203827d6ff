import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HealthModel
import LMDB
import LedgerSchema
import Logging
import Synchronization

extension Ledger {
    /// The last event at `point`: the sequence itself, or the last event committed at or
    /// before the time.
    /// - Throws: ``HealthError`` `invalidArgument` for a point before the ledger or past its head.
    /// `time` in ISO 8601 within the years 1 to 9999; outside them (which ISO 8601 as
    /// Foundation writes it cannot show), as seconds from 1970.
    static func describe(_ time: Date) -> String {
        let seconds = time.timeIntervalSince1970
        guard seconds >= -62_135_596_800, seconds < 253_402_300_800 else {
            return String(format: "%.0f seconds from 1970 (%@ the years 1 to 9999)", seconds, seconds < 0 ? "before" : "after")
        }
        return time.formatted(.iso8601)
    }

    public func sequence(at point: PointInTime) throws -> UInt64 {
        try read { snapshot in
            let head = try LogHead.read(snapshot)
            switch point {
            case .sequence(let sequence):
                guard sequence >= 1, sequence <= head.sequence else {
                    throw HealthError.invalidArgument("event \(sequence) is not in the ledger (its events run 1 to \(head.sequence))", field: "as_of_sequence")
                }
                return sequence
            case .time(let time):
                let after = try Self.firstSequence(committedAtOrAfter: time.addingTimeInterval(0.000_001), head: head.sequence, in: snapshot)
                guard after > 1 else {
                    throw HealthError.invalidArgument("the ledger did not exist yet at \(Self.describe(time))", field: "as_of_time_us")
                }
                return after - 1
            }
        }
    }

    /// Writes the ledger as it stood after event `sequence` into `directory` (which must not
    /// exist): its log up to that event and the projections rebuilt from it, a ledger
    /// directory of its own that ``LedgerStore`` and the tools open like any other.
    public func materialize(upTo sequence: UInt64, at directory: URL) throws {
        guard !FileManager.default.fileExists(atPath: directory.path) else {
            throw LedgerFailure(.alreadyExists, "\(directory.path) exists: choose a new directory")
        }
        let staging = directory.deletingLastPathComponent().appending(path: ".materializing-\(UUID().uuidString)", directoryHint: .isDirectory)
        do {
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: staging) }
            do {
                let fresh = try Environment(path: staging.path, options: .init(mapSize: max(environment.currentMapSize, 64 << 20), durable: false))
                let freshDatabases = try LedgerDatabases(environment: fresh, cipher: databases.cipher)
                try environment.read { live in
                    let head = try LogHead.read(LedgerSnapshot(live, databases))
                    guard sequence >= 1, sequence <= head.sequence else {
                        throw HealthError.invalidArgument("event \(sequence) is not in the ledger (its events run 1 to \(head.sequence))", field: "sequence")
                    }
                    let projector = Projector(databases: freshDatabases, units: SummaryCache())
                    try rebuild(from: live, upTo: sequence, into: fresh, projector: projector, copyingEventsTo: freshDatabases.events, progress: nil)
                    let last = try Ledger.storedEvent(sequence, in: LedgerSnapshot(live, databases))
                    let event = try LedgerEvent(stored: last)
                    try fresh.write { txn in
                        try LogHead(sequence: sequence, hash: try EventCodec.hash(last), commitTimeUs: microseconds(event.commitTime)).write(txn, freshDatabases)
                        try ProjectionLayout.recordCurrent(in: txn, freshDatabases)
                        // The same anchor key (anchors move between the ledger and its views), signing key and data key.
                        for metaKey in [AnchorSeal.metaKey, SigningKey.metaKey, Ledger.dataKeyKey] {
                            if let value = try live.get(metaKey, in: databases.meta) { try txn.put(value, forKey: metaKey, in: freshDatabases.meta) }
                        }
                    }
                }
                try fresh.sync()
            }
            try FileManager.default.moveItem(at: staging, to: directory)
        } catch let error as HealthError {
            throw error
        } catch let failure as LedgerFailure {
            throw failure
        } catch {
            throw LedgerFailure(.storage, "cannot write the view in \(directory.path): \(error)", cause: error)
        }
    }
}

/// Point-in-time views of a store's ledgers: each a read-only ledger materialized at one
/// event, kept on disk and reused by later reads at the same point: at most `capacity` of
/// them and `diskLimit` bytes together (the least recently used goes first, though the
/// newest always stays), none unused for longer than `idleLifetime`.
final class PointInTimeViews: Sendable {
    private struct Entry {
        var ledger: Ledger
        var location: URL
        var bytes: Int
        var lastUsed: ContinuousClock.Instant
    }

    private let directory: URL
    private let capacity: Int
    private let diskLimit: Int
    private let idleLifetime: Duration
    private let logger: Logger
    private let entries = Mutex<[String: Entry]>([:])
    /// Held while a view is built: two reads of one new point build it once.
    private let building = Mutex<Void>(())

    /// - Parameter root: the store's views directory; this process's views go in a
    ///   directory of their own inside it (`<pid>-<random>`), and those of processes that
    ///   are gone are removed: views do not outlive the process that built them.
    init(root: URL, capacity: Int, diskLimit: Int, idleLifetime: Duration, logger: Logger) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? [] {
            guard let pid = name.split(separator: "-").first.flatMap({ Int32($0) }), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(at: root.appending(path: name, directoryHint: .isDirectory))
        }
        directory = root.appending(path: "\(getpid())-\(UUID().uuidString.prefix(8))", directoryHint: .isDirectory)
        self.capacity = capacity
        self.diskLimit = diskLimit
        self.idleLifetime = idleLifetime
        self.logger = logger
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// The view of `ledger` after event `sequence`, built on first use.
    func view(of ledger: Ledger, at sequence: UInt64) throws -> Ledger {
        let key = "\(ledger.id)/\(sequence)"
        if let view = touch(key) { return view }
        return try building.withLock { _ in
            if let view = touch(key) { return view }
            // A directory of its own each time: a view evicted while a read still uses it is
            // never reopened in place.
            let location = directory.appending(path: ledger.id, directoryHint: .isDirectory).appending(path: "\(sequence)-\(UUID().uuidString)", directoryHint: .isDirectory)
            try FileManager.default.createDirectory(at: location.deletingLastPathComponent(), withIntermediateDirectories: true)
            try ledger.materialize(upTo: sequence, at: location)
            let view = try Ledger(
                id: ledger.id, directory: location, configuration: ledger.configuration.maintenance, logger: logger, viewOf: sequence)
            let evicted = entries.withLock { entries -> [URL] in
                let bytes = ((try? FileManager.default.attributesOfItem(atPath: location.appending(path: "data.mdb").path))?[.size] as? NSNumber)?.intValue ?? 0
                entries[key] = Entry(ledger: view, location: location, bytes: bytes, lastUsed: .now)
                return evict(&entries)
            }
            for stale in evicted { remove(stale) }
            return view
        }
    }

    private func touch(_ key: String) -> Ledger? {
        let (view, evicted) = entries.withLock { entries -> (Ledger?, [URL]) in
            entries[key]?.lastUsed = .now
            let view = entries[key]?.ledger
            return (view, evict(&entries))
        }
        for stale in evicted { remove(stale) }
        return view
    }

    /// Drops views unused for too long, then the least recently used beyond capacity.
    private func evict(_ entries: inout [String: Entry]) -> [URL] {
        let now = ContinuousClock.now
        var evicted: [URL] = []
        for (key, entry) in entries where now - entry.lastUsed > idleLifetime {
            entries.removeValue(forKey: key)
            evicted.append(entry.location)
        }
        while entries.count > 1, entries.count > capacity || entries.values.reduce(0, { $0 + $1.bytes }) > diskLimit,
            let oldest = entries.min(by: { $0.value.lastUsed < $1.value.lastUsed })
        {
            entries.removeValue(forKey: oldest.key)
            evicted.append(oldest.value.location)
        }
        return evicted
    }

    /// Drops every view of ledger `ledgerID` and removes its files (after an erasure).
    func discard(ledgerID: String) {
        // Holding `building`: a view being built from a snapshot before the erasure is in the
        // entries by now, and goes too.
        let removed = building.withLock { _ in
            entries.withLock { entries -> [URL] in
                let keys = entries.keys.filter { $0.hasPrefix("\(ledgerID)/") }
                return keys.compactMap { entries.removeValue(forKey: $0)?.location }
            }
        }
        for location in removed { remove(location) }
    }

    /// Removes a view's files; reads still running on it keep their open map until they end.
    private func remove(_ location: URL) {
        try? FileManager.default.removeItem(at: location)
    }
}
