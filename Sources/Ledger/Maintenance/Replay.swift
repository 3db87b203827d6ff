import Crypto
import Foundation
import LMDB

/// The outcome of rebuilding a ledger's projections from its log.
public struct ReplayReport: Sendable, Hashable {
    /// Events replayed.
    public var events: UInt64
    /// Objects present after the replay.
    public var objects: Int
    /// SHA-256 over the live projections, at the snapshot replayed.
    public var liveDigest: [UInt8]
    /// SHA-256 over the rebuilt projections.
    public var rebuiltDigest: [UInt8]
    /// Whether the rebuilt projections replaced the live ones.
    public var installed: Bool
    /// Time spent rebuilding the projections (without the digests and comparison).
    public var rebuildDuration: Duration
    /// Total time, digests and comparison included.
    public var duration: Duration

    /// Whether the rebuild is byte-identical to the live projections.
    public var identical: Bool { liveDigest == rebuiltDigest }
}

extension Ledger {
    /// Rebuilds every projection from the log into fresh databases and compares them,
    /// by digest, with the live projections.
    ///
    /// - Parameters:
    ///   - install: when the rebuild differs, replace the live projections with it.
    ///   - progress: called every 100,000 events with the count replayed so far.
    public func replay(install: Bool = false, progress: ((UInt64) -> Void)? = nil) throws -> ReplayReport {
        let clock = ContinuousClock()
        let started = clock.now
        let scratch = directory.deletingLastPathComponent()
            .appending(path: ".rebuild-\(id)-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }

        var report = try {
            let fresh = try Environment(
                path: scratch.path, options: .init(mapSize: max(environment.currentMapSize, 64 << 20), durable: false))
            let freshDatabases = try LedgerDatabases(environment: fresh, cipher: databases.cipher)
            let projector = Projector(databases: freshDatabases, units: SummaryCache())
            var report = try environment.read { live in
                let head = try LogHead.read(LedgerSnapshot(live, databases))
                let rebuildStarted = clock.now
                try rebuild(from: live, upTo: head.sequence, into: fresh, projector: projector, progress: progress)
                let rebuildDuration = clock.now - rebuildStarted
                return ReplayReport(
                    events: head.sequence, objects: try live.count(in: databases.objects),
                    liveDigest: try Self.digest(databases, in: live), rebuiltDigest: [],
                    installed: false, rebuildDuration: rebuildDuration, duration: .zero)
            }
            report.rebuiltDigest = try fresh.read { txn in try Self.digest(freshDatabases, in: txn) }
            if install, !report.identical {
                try self.install(from: fresh, freshDatabases, expectedHead: report.events)
                report.installed = true
                report.objects = try fresh.read { try $0.count(in: freshDatabases.objects) }
            }
            return report
        }()
        report.duration = clock.now - started
        return report
    }

    /// - Parameter copyingEventsTo: also copy each event replayed into this database of
    ///   `fresh` (a point-in-time view holds its log too).
    ///
    /// The log is read, decoded and hashed on a thread of its own (``DecodedEvents``), a few
    /// chunks ahead, while this thread applies the events to the projections: the two halves
    /// of the work cost about the same, and run side by side.
    func rebuild(
        from live: Transaction, upTo last: UInt64, into fresh: Environment, projector: Projector,
        copyingEventsTo events: Database? = nil, progress: ((UInt64) -> Void)?
    ) throws {
        let loadSaved: (UInt64) throws -> ObjectSummary = { sequence in
            let stored = try Ledger.storedEvent(sequence, in: LedgerSnapshot(live, self.databases))
            return try projector.savedSummary(stored: stored, sequence: sequence)
        }
        let decoded = DecodedEvents(capacity: 64)
        let reading = DispatchSemaphore(value: 0)
        let databases = self.databases
        let environment = self.environment
        let copying = events != nil
        let projections = projector.databases
        Thread.detachNewThread {
            defer { reading.signal() }
            // A projector of its own: the unit cache is not shared between threads.
            let decoder = Projector(databases: projections, units: SummaryCache())
            do {
                // Alongside the caller's snapshot, which is open until this thread is done.
                try environment.readAlongsideHeldSnapshot { txn in
                    try txn.withCursor(on: databases.events) { cursor in
                        // The changes own their bytes: one buffer serves every sealed event.
                        let scratch = EventScratch(databases)
                        var chunk: [DecodedEvents.Event] = []
                        chunk.reserveCapacity(DecodedEvents.chunkSize)
                        var entry = try cursor.seek(atLeast: KeyEncoding.sequenceKey(1))
                        while let current = entry {
                            let stored = try scratch.clear(current.value, key: current.key)
                            let (sequence, change) = try decoder.change(stored: stored)
                            chunk.append(DecodedEvents.Event(
                                sequence: sequence, change: change, hash: try EventCodec.inlineHash(stored),
                                copy: copying ? (Array(current.key), Array(current.value)) : nil))
                            if chunk.count == DecodedEvents.chunkSize || sequence >= last {
                                guard decoded.put(chunk) else { return }
                                chunk.removeAll(keepingCapacity: true)
                            }
                            if sequence >= last { break }
                            entry = try cursor.next()
                        }
                        if !chunk.isEmpty { _ = decoded.put(chunk) }
                    }
                }
                decoded.finish(nil)
            } catch {
                decoded.finish(error)
            }
        }
        defer {
            decoded.cancel()
            reading.wait()
        }
        var applied: UInt64 = 0
        var frontier = Frontier(size: 0)
        while applied < last {
            // One scratch transaction per 50,000 events or so keeps its dirty pages bounded.
            // The events are gathered first, so a retry after the map grows applies them again.
            // (Kept as the chunks handed over: joining them would copy every event.)
            var batch: [[DecodedEvents.Event]] = []
            var gathered = 0
            while gathered < 50_000, let chunk = try decoded.next() {
                batch.append(chunk)
                gathered += chunk.count
            }
            guard let reachedInBatch = batch.last?.last?.sequence else {
                throw LedgerFailure.corrupted("the log ends at event \(applied), before its head \(last)")
            }
            let chunkStart = applied
            let chunkFrontier = frontier
            applied = try fresh.write { txn in
                let merkle = MerkleAppender(frontier: chunkFrontier)
                var stats = DeferredProjections()
                for chunk in batch {
                    for index in chunk.indices {
                        try projector.apply(chunk[index].change, sequence: chunk[index].sequence, in: txn, stats: &stats, loadSaved: loadSaved)
                        merkle.append(eventHash: chunk[index].hash)
                        if let events, let (key, value) = chunk[index].copy { try txn.put(value, forKey: key, in: events, append: true) }
                    }
                }
                frontier = try merkle.finish(in: txn, projector.databases.merkle)
                try stats.flush(in: txn, projector.databases) { try SeriesValues.samples(sequence: $0, source: $1, in: LedgerSnapshot(live, databases)) }
                try Projector.writeCheckpoint(reachedInBatch, in: txn, projector.databases)
                return reachedInBatch
            }
            if applied / 100_000 != chunkStart / 100_000 { progress?(applied) }
        }
    }

    /// Replaces the live projections with the rebuilt ones, if the log has not moved on.
    private func install(from fresh: Environment, _ freshDatabases: LedgerDatabases, expectedHead: UInt64) throws {
        try fresh.read { source in
            try environment.write { txn in
                let head = try LogHead.read(LedgerSnapshot(txn, databases))
                guard head.sequence == expectedHead else {
                    throw LedgerFailure(.storage, "the ledger changed during the replay (head \(expectedHead) → \(head.sequence)); run it again")
                }
                try ProjectionLayout.recordCurrent(in: txn, databases)
                try Projector.writeCheckpoint(expectedHead, in: txn, databases)
                if let epoch = try source.get(PrimaryTerm.epochKey, in: freshDatabases.meta) {
                    try txn.put(epoch, forKey: PrimaryTerm.epochKey, in: databases.meta)
                } else {
                    _ = try txn.delete(PrimaryTerm.epochKey, in: databases.meta)
                }
                for (target, origin) in zip(databases.projections, freshDatabases.projections) {
                    try txn.removeAll(in: target)
                    try source.withCursor(on: origin) { cursor in
                        var entry = try cursor.first()
                        while let current = entry {
                            try txn.put(current.value, forKey: current.key, in: target, append: true)
                            entry = try cursor.next()
                        }
                    }
                }
            }
        }
    }

    /// SHA-256 over the live projections (names, keys and values, in order) and their checkpoint.
    public func projectionDigest() throws -> [UInt8] {
        try environment.read { txn in try Self.digest(databases, in: txn) }
    }

    static func digest(_ databases: LedgerDatabases, in txn: Transaction) throws -> [UInt8] {
        var digest = ProjectionDigest()
        // The checkpoint first: projections rebuilt identically but recorded as behind the log differ.
        if let checkpoint = try txn.get(Projector.checkpointKey, in: databases.meta) {
            Projector.checkpointKey.withUnsafeBytes { digest.feed($0) }
            digest.feed(checkpoint)
        }
        // The epoch of the last primaryChanged event, which the projector keeps in `meta`.
        if let epoch = try txn.get(PrimaryTerm.epochKey, in: databases.meta) {
            PrimaryTerm.epochKey.withUnsafeBytes { digest.feed($0) }
            digest.feed(epoch)
        }
        for database in databases.projections {
            Array(database.name.utf8).withUnsafeBytes { digest.feed($0) }
            try txn.withCursor(on: database) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    digest.feed(current.key)
                    digest.feed(current.value)
                    entry = try cursor.next()
                }
            }
        }
        return digest.finish()
    }
}

/// SHA-256 over length-prefixed names, keys and values, fed to the hasher in 64 KiB blocks.
/// (A value type passed `inout`: a nested function capturing the hasher and the block had
/// every feed checked for exclusive access at run time.)
private struct ProjectionDigest {
    private var hasher = SHA256()
    private var block: [UInt8] = []

    init() { block.reserveCapacity(1 << 16) }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        if block.count + bytes.count + 4 > 1 << 16 {
            hasher.update(data: block)
            block.removeAll(keepingCapacity: true)
        }
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { block.append(contentsOf: $0) }
        if bytes.count > 1 << 15 {
            hasher.update(data: block)
            block.removeAll(keepingCapacity: true)
            hasher.update(bufferPointer: bytes)
        } else {
            block.append(contentsOf: bytes)
        }
    }

    mutating func finish() -> [UInt8] {
        hasher.update(data: block)
        return Array(hasher.finalize())
    }
}

/// Events read, decoded and hashed by a thread of their own ahead of the replay that applies
/// them, handed over in chunks; the reader blocks while `capacity` chunks wait.
private final class DecodedEvents: @unchecked Sendable {
    struct Event: Sendable {
        var sequence: UInt64
        var change: Projector.Change
        /// SHA-256 of the event's stored bytes (its Merkle leaf's input), inline: an array
        /// would be an allocation per event.
        var hash: InlineHash
        /// The event's key and stored bytes, when the replay copies the log.
        var copy: ([UInt8], [UInt8])?
    }

    static let chunkSize = 1024

    private let condition = NSCondition()
    private var chunks: [[Event]] = []
    private var first = 0
    private var finished = false
    private var cancelled = false
    private var failure: (any Error)?
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Hands a chunk over, waiting while `capacity` chunks are queued.
    /// - Returns: false once the replay stopped taking them.
    func put(_ chunk: [Event]) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while chunks.count - first >= capacity, !cancelled { condition.wait() }
        guard !cancelled else { return false }
        chunks.append(chunk)
        condition.broadcast()
        return true
    }

    /// The reader is done: at the end of the log, or with `error`.
    func finish(_ error: (any Error)?) {
        condition.lock()
        finished = true
        failure = error
        condition.broadcast()
        condition.unlock()
    }

    /// The replay takes no more chunks: a waiting reader returns.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    /// The next chunk, waiting for it; nil after the last one.
    /// - Throws: the reader's error, once the chunks before it are taken.
    func next() throws -> [Event]? {
        condition.lock()
        defer { condition.unlock() }
        while first == chunks.count, !finished { condition.wait() }
        guard first < chunks.count else {
            if let failure { throw failure }
            return nil
        }
        let chunk = chunks[first]
        chunks[first] = []
        first += 1
        if first > 64, first * 2 > chunks.count {
            chunks.removeFirst(first)
            first = 0
        }
        condition.broadcast()
        return chunk
    }
}
