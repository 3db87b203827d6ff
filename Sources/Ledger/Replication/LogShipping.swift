import Foundation
import HealthModel
import LMDB
import LedgerSchema
import Logging
import Synchronization

/// Events read from a ledger's log for one of its followers (docs/LEDGER.md, "Replication").
public struct ShippedEvents: Sendable, Hashable {
    /// The events' stored bytes, in order, clear: each ledger seals its log under its own
    /// data key, and the hash chain is over the clear bytes.
    public var events: [[UInt8]]
    /// The ledger's head when they were read.
    public var headSequence: UInt64

    public init(events: [[UInt8]], headSequence: UInt64) {
        self.events = events
        self.headSequence = headSequence
    }
}

extension Ledger {
    /// The events after event `sequence`, for a follower whose log ends there with `hash`
    /// (the zero hash at 0): at most `limit` of them and about `maximumBytes` (always one,
    /// when there is one).
    ///
    /// An event erased since the follower last asked comes without its body; the erasure
    /// event that emptied it follows in the log and empties the follower's copy.
    ///
    /// - Throws: ``LedgerFailure`` `diverged` when the follower's log is not a prefix of this
    ///   one: its event `sequence` hashes differently, or it goes past the head.
    public func shippedEvents(after sequence: UInt64, hash: [UInt8], limit: Int, maximumBytes: Int) throws -> ShippedEvents {
        try read { snapshot in
            let head = try LogHead.read(snapshot)
            guard sequence <= head.sequence else {
                throw LedgerFailure(
                    .diverged,
                    "the follower holds events up to \(sequence), past ledger '\(id)''s head \(head.sequence): the histories diverged")
            }
            let own = sequence == 0 ? EventCodec.zeroHash : try EventCodec.hash(try Ledger.storedEvent(sequence, in: snapshot))
            guard own == hash else {
                throw LedgerFailure(
                    .diverged,
                    "the follower's event \(sequence) hashes to \(hash.hexString), ledger '\(id)''s to \(own.hexString): the histories diverged")
            }
            var events: [[UInt8]] = []
            var bytes = 0
            try snapshot.withCursor(on: snapshot.databases.events) { cursor in
                var entry = try cursor.seek(atLeast: KeyEncoding.sequenceKey(sequence + 1))
                while let current = entry, events.count < limit {
                    let stored = try snapshot.databases.withEvent(current.value, key: current.key) { Array($0) }
                    guard events.isEmpty || bytes + stored.count <= maximumBytes else { break }
                    bytes += stored.count
                    events.append(stored)
                    entry = try cursor.next()
                }
            }
            return ShippedEvents(events: events, headSequence: head.sequence)
        }
    }

    /// Returns once the log holds an event after `sequence`, or access records were written
    /// (a follower's fetch then answers with none, and the follower copies them), or after
    /// `timeout`, or when the task is cancelled.
    public func waitForEvents(after sequence: UInt64, timeout: Duration) async throws {
        let (signals, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // New access records end the wait too: the follower copies them (they are no event).
        let token = changeWatchers.addFetch { signal.yield() }
        defer { changeWatchers.remove(token) }
        guard !isBeingErased, try head().sequence <= sequence else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in signals { return }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
        signal.finish()
    }

    /// The sequence of the last event this process committed to the ledger (0 before its
    /// first commit here): a write answered has an event at or before it.
    package var committedSequence: UInt64 { committer.committedSequence }

    /// Appends events shipped from this ledger's primary (``shippedEvents(after:hash:limit:maximumBytes:)``)
    /// and applies them to the projections in one durable commit, as replay applies events:
    /// the projections come out as the primary's, byte for byte. An erasure event empties the
    /// events it names here too, then the projections are rebuilt and the free pages scrubbed,
    /// as on the primary; streams hear of revocations and changes as of their own commits.
    ///
    /// - Returns: the head after them.
    /// - Throws: ``LedgerFailure`` `failedPrecondition` when the first does not follow this
    ///   ledger's head or the chain breaks (nothing is applied then), `corrupted` for bytes
    ///   that are not events.
    @discardableResult
    public func applyShipped(_ events: [[UInt8]]) async throws -> UInt64 {
        guard !events.isEmpty else { return try head().sequence }
        let (start, end, erasures) = try await committer.submit { context in
            let start = context.head.sequence
            var erasures: [(event: LedgerEvent, report: ErasureReport, reason: String)] = []
            for stored in events {
                if let erasure = try context.appendShipped(stored) { erasures.append(try self.applyShippedErasure(erasure, in: context)) }
            }
            return (start, context.head.sequence, erasures)
        }
        // Revocations and authorization changes reach the streams open on this copy.
        if end > start, logFollower.hasWatchers { logFollower.announce((start + 1)...end) }
        guard !erasures.isEmpty else { return end }
        for erasure in erasures { try afterErasure.withLock { $0 }?.call((erasure.report, erasure.reason)) }
        try await committer.exclusive {
            try self.rebuildAfterErasure()
            try self.environment.reopen()
        }
        do {
            _ = try await scrubFreePages()
        } catch {
            logger.error("the data file's free pages could not be scrubbed after a shipped erasure", metadata: ["error": "\(error)"])
        }
        logger.notice("applied a shipped erasure", metadata: ["ledger.erasure.sequence": "\(erasures.last!.event.sequence)"])
        return end
    }

    /// Removes the events after `sequence` from the log — a tail its primary does not have
    /// (a former primary's unacknowledged writes, or events a follower fetched from it and
    /// the new primary never had) — and rebuilds the projections and the Merkle tree from
    /// what stays. Writes wait meanwhile; a crash before the rebuild ends rebuilds on opening.
    ///
    /// An erasure in the tail emptied events before it, which no event names once it is
    /// gone: the cut then goes back to before the earliest of them, so that they come again
    /// from the primary as it holds them.
    ///
    /// - Returns: the last event kept (`sequence`, or earlier for an erasure in the tail) and
    ///   the events removed (their headers and bodies), for the operator's log.
    /// - Throws: ``LedgerFailure`` `invalidArgument` for a sequence past the head.
    @discardableResult
    public func discardTail(after sequence: UInt64) async throws -> (kept: UInt64, removed: [LedgerEvent]) {
        let (kept, discarded) = try await committer.exclusive { () throws -> (UInt64, [LedgerEvent]) in
            let (kept, removed) = try self.environment.write { txn -> (UInt64, [LedgerEvent]) in
                let snapshot = LedgerSnapshot(txn, self.databases)
                let head = try LogHead.read(snapshot)
                guard sequence <= head.sequence else {
                    throw LedgerFailure(.invalidArgument, "ledger '\(self.id)' ends at event \(head.sequence): there is no tail after \(sequence)")
                }
                guard sequence < head.sequence else { return (sequence, []) }
                var sequence = sequence
                // Back to before every event an erasure in the (growing) tail emptied.
                while true {
                    var earliest = sequence
                    for number in (sequence + 1)...head.sequence {
                        let event = try LedgerEvent(stored: try Ledger.storedEvent(number, in: snapshot))
                        guard event.kind == .objectsErased,
                            case .objectsErased(_, _, let emptied) = try event.body.withUnsafeBytes({ try EventBody(kind: event.kind, body: $0) })
                        else { continue }
                        earliest = min(earliest, (emptied.map(\.sequence).min() ?? number) - 1)
                    }
                    guard earliest < sequence else { break }
                    sequence = earliest
                }
                var removed: [LedgerEvent] = []
                for number in (sequence + 1)...head.sequence {
                    removed.append(try LedgerEvent(stored: try Ledger.storedEvent(number, in: snapshot)))
                    _ = try txn.delete(KeyEncoding.sequenceKey(number), in: self.databases.events)
                }
                let kept = sequence == 0 ? LogHead.empty : try {
                    let stored = try Ledger.storedEvent(sequence, in: snapshot)
                    return LogHead(sequence: sequence, hash: try EventCodec.hash(stored), commitTimeUs: try EventCodec.layout(stored).commitTimeUs)
                }()
                try kept.write(txn, self.databases)
                // Until the rebuild below ends, the projections are ahead of the log: a crash
                // before then rebuilds them on opening.
                try txn.put(KeyEncoding.sequenceKey(sequence), forKey: Self.erasureRebuildKey, in: self.databases.meta)
                return (sequence, removed)
            }
            if !removed.isEmpty {
                self.committer.truncated(to: kept)
                try self.rebuildAfterErasure()
                try self.environment.reopen()
            }
            return (kept, removed)
        }
        if !discarded.isEmpty {
            // The removed events' bodies (values of writes no one acknowledged) are not left in free pages.
            _ = try? await scrubFreePages()
            logger.warning(
                "discarded a tail of the log that the primary does not have",
                metadata: [
                    "ledger.tail.after": "\(kept)", "ledger.tail.events": "\(discarded.count)",
                    "ledger.tail.kinds": "\(Dictionary(grouping: discarded, by: \.kind.description).mapValues(\.count))",
                ])
        }
        return (kept, discarded)
    }

    /// Empties the events a shipped erasure event names, and removes an erased
    /// characteristic's value, as the primary's erasure did in its own commit.
    private func applyShippedErasure(_ event: LedgerEvent, in context: WriteContext) throws -> (LedgerEvent, ErasureReport, String) {
        guard case .objectsErased(let reason, let objects, let erased) = try event.body.withUnsafeBytes({ try EventBody(kind: event.kind, body: $0) }) else {
            throw LedgerFailure.corrupted("shipped event \(event.sequence) is not an erasure")
        }
        for named in erased {
            guard named.sequence < event.sequence else {
                throw LedgerFailure.corrupted("shipped erasure \(event.sequence) names event \(named.sequence), which does not precede it")
            }
            let emptied = try EventLayout.erased(try Ledger.storedEvent(named.sequence, in: context.reads))
            let key = KeyEncoding.sequenceKey(named.sequence)
            try context.txn.put(databases.storable(event: emptied, key: key), forKey: key, in: databases.events)
        }
        var characteristics: [String] = []
        if objects.isEmpty, let type = event.objectType, let objectType = try? ObjectType(type), objectType.family == .characteristic {
            _ = try context.txn.delete(KeyEncoding.typeKey(objectType.code), in: databases.characteristics)
            characteristics.append(type)
        }
        try context.txn.put(KeyEncoding.sequenceKey(event.sequence), forKey: Self.erasureRebuildKey, in: databases.meta)
        let report = ErasureReport(
            objects: objects.count, events: erased.count, characteristics: characteristics.count, sequence: event.sequence, scrubbedPages: 0,
            heldPages: 0, erasedObjects: objects.map { $0.uuid }, erasedCharacteristics: characteristics)
        return (event, report, reason)
    }
}
