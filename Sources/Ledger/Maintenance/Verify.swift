import Crypto
import Foundation
import HealthModel
import LMDB
import LedgerSchema
import Synchronization

/// The outcome of checking a ledger's hash chain.
public struct VerifyReport: Sendable, Hashable {
    /// The first problem found, or nil when the ledger is intact.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// The first bad event, when one can be named.
        public var sequence: UInt64?
        public var reason: String

        public var description: String {
            if let sequence { return "event \(sequence): \(reason)" }
            return reason
        }
    }

    /// Events whose chain link was checked.
    public var eventsChecked: UInt64
    /// The sequence the log head records.
    public var headSequence: UInt64
    /// The hash the log head records (SHA-256 of the last event's stored bytes).
    public var headHash: [UInt8] = []
    public var problem: Problem?
    public var duration: Duration

    public var isValid: Bool { problem == nil }
}

extension Ledger {
    /// Recomputes the hash chain from the first event and checks it against the log head
    /// and the projections' checkpoint.
    ///
    /// Any edited, reordered, inserted or removed event is reported as the first bad event.
    /// - Parameters:
    ///   - expectedHead: a head pinned earlier (sequence and hash): the ledger must still
    ///     hold that event with that hash, so today's history extends the pinned one. A
    ///     history rewritten up to it, even with a consistent chain, fails at that event.
    ///   - progress: called every 100,000 events with the count checked so far (one call at
    ///     a time, possibly from another thread: a long log is hashed on every processor).
    public func verify(expectedHead: (sequence: UInt64, hash: [UInt8])? = nil, progress: ((UInt64) -> Void)? = nil) throws -> VerifyReport {
        try verify(expectedHead: expectedHead, segments: nil, progress: progress)
    }

    /// ``verify(expectedHead:progress:)`` hashing the chain in `segments` parallel segments
    /// (nil: one per processor, up to 8, for a log of at least ``parallelVerifyThreshold``
    /// events; 1: on one thread). Every choice gives the same report.
    package func verify(
        expectedHead: (sequence: UInt64, hash: [UInt8])?, segments: Int?, progress: ((UInt64) -> Void)?
    ) throws -> VerifyReport {
        let clock = ContinuousClock()
        let started = clock.now
        return try read { snapshot in
            let head = try LogHead.read(snapshot)
            var report = VerifyReport(eventsChecked: 0, headSequence: head.sequence, headHash: head.hash, problem: nil, duration: .zero)
            func fail(_ sequence: UInt64?, _ reason: String) -> VerifyReport {
                report.problem = .init(sequence: sequence, reason: reason)
                report.duration = clock.now - started
                return report
            }
            var previousHash: InlineHash
            var account = ErasureAccount()
            if let (lastHash, segmentsAccount) = try chainHashInParallel(head: head, segments: segments, in: snapshot.txn, progress: progress) {
                previousHash = lastHash
                account = segmentsAccount
                report.eventsChecked = head.sequence
            } else {
                var expected: UInt64 = 1
                // The running hash lives in a fixed buffer: no allocation per event.
                previousHash = InlineHash()
                let scratch = EventScratch(snapshot.databases)
                let failure: VerifyReport? = try snapshot.withCursor(on: snapshot.databases.events) { cursor in
                    var entry = try cursor.first()
                    while let current = entry {
                        guard current.key.count == 8 else { return fail(nil, "the log holds a key of \(current.key.count) bytes") }
                        let key = KeyEncoding.uint64(current.key, at: 0)
                        guard key == expected else {
                            return fail(expected, key > expected ? "missing: the log jumps from \(expected - 1) to \(key)" : "out of order")
                        }
                        let value: UnsafeRawBufferPointer
                        do { value = try scratch.clear(current.value, key: current.key) } catch let failure as LedgerFailure { return fail(key, failure.message) }
                        guard let fields = EventCodec.chainFields(value) else {
                            return fail(key, "the stored bytes are not a well-formed event")
                        }
                        guard fields.sequence == key else {
                            return fail(key, "it records sequence \(fields.sequence) but is stored as \(key)")
                        }
                        guard previousHash.equals(fields.previousHash) else {
                            if key == 1 { return fail(1, "the first event's previous hash is not zero") }
                            // Either the predecessor's bytes changed, or this event's own link did.
                            // If this event no longer hashes to what its successor (or the head)
                            // recorded, the damage is here; otherwise it is in the predecessor.
                            let ownHash = try EventCodec.hash(value)
                            let recorded: [UInt8]
                            if let successor = try cursor.next(),
                                let link = EventCodec.chainFields(try snapshot.databases.event(successor.value, key: successor.key, in: snapshot.txn))
                            {
                                recorded = Array(link.previousHash)
                            } else {
                                recorded = head.hash
                            }
                            return ownHash == recorded
                                ? fail(key - 1, "its stored bytes do not match the hash recorded by event \(key)")
                                : fail(key, "its link to event \(key - 1) is damaged")
                        }
                        switch account.hash(value, sequence: key) {
                        case .hash(let hash): previousHash = hash
                        case .failure(let reason): return fail(key, reason)
                        }
                        report.eventsChecked = key
                        if key % 100_000 == 0 { progress?(key) }
                        expected += 1
                        entry = try cursor.next()
                    }
                    return nil
                }
                if let failure { return failure }
                let last = expected - 1
                guard last == head.sequence else {
                    return last < head.sequence
                        ? fail(last + 1, "the log is truncated: it ends at event \(last) but its head records \(head.sequence)")
                        : fail(head.sequence + 1, "the log holds events after its recorded head \(head.sequence)")
                }
            }
            guard head.hash.withUnsafeBytes({ previousHash.equals($0) }) else {
                return fail(head.sequence, "its stored bytes do not match the hash recorded in the log head")
            }
            if let (sequence, reason) = account.firstUnaccounted { return fail(sequence, reason) }
            if let expectedHead {
                guard expectedHead.sequence >= 1, expectedHead.sequence <= head.sequence else {
                    return fail(expectedHead.sequence, "the pinned head is event \(expectedHead.sequence), but the ledger ends at event \(head.sequence)")
                }
                let hash = try EventCodec.hash(try Ledger.storedEvent(expectedHead.sequence, in: snapshot))
                guard hash == expectedHead.hash else {
                    return fail(
                        expectedHead.sequence,
                        "its hash is \(hash.hexString), not the pinned \(expectedHead.hash.hexString): the history up to it was rewritten")
                }
            }
            let checkpoint = try snapshot.get(Projector.checkpointKey, in: snapshot.databases.meta).map { KeyEncoding.uint64($0, at: 0) } ?? 0
            guard checkpoint == head.sequence else {
                return fail(nil, "the projections were last applied at event \(checkpoint), but the log head is \(head.sequence): run replay")
            }
            report.duration = clock.now - started
            return report
        }
    }
}

extension Ledger {
    /// Logs shorter than this are walked on one thread.
    package static let parallelVerifyThreshold: UInt64 = 100_000

    /// The hash chain of events 1 through `head.sequence`, checked in as many segments as
    /// there are processors, each on a thread and a read transaction of its own, then joined
    /// (each segment's first link must be the previous segment's last hash).
    ///
    /// - Returns: the last event's hash when every event is present, in order, names its own
    ///   sequence and links to its predecessor, and nothing follows the head; nil when any
    ///   check fails, or when the log is too short to split. The caller then walks the log on
    ///   one thread, which names the first bad event.
    private func chainHashInParallel(
        head: LogHead, segments: Int?, in txn: Transaction, progress: ((UInt64) -> Void)?
    ) throws -> (InlineHash, ErasureAccount)? {
        let processors = min(ProcessInfo.processInfo.activeProcessorCount, 8)
        let parts = UInt64(max(1, segments ?? (head.sequence >= Self.parallelVerifyThreshold ? processors : 1)))
        guard parts > 1, head.sequence >= parts else { return nil }
        // Later events may exist in the segments' newer snapshots, never in this one.
        let last = try txn.withCursor(on: databases.events) { try $0.last() }
        guard let last, last.key.count == 8, KeyEncoding.uint64(last.key, at: 0) == head.sequence else { return nil }
        let tally = VerifyTally(progress: progress)
        let segments = Mutex<[ChainSegment?]>(Array(repeating: nil, count: Int(parts)))
        DispatchQueue.concurrentPerform(iterations: Int(parts)) { index in
            let first = 1 + head.sequence * UInt64(index) / parts
            let end = 1 + head.sequence * UInt64(index + 1) / parts
            // Beside `txn`, held open until every segment is done.
            let segment = try? environment.readAlongsideHeldSnapshot { txn in try self.chainSegment(first..<end, in: txn, tally: tally) }
            segments.withLock { $0[index] = segment }
        }
        var previous = InlineHash()
        var account = ErasureAccount()
        for segment in segments.withLock({ $0 }) {
            guard let segment, segment.firstLink == previous else { return nil }
            previous = segment.lastHash
            account.merge(segment.erasures)
        }
        return (previous, account)
    }

    /// One segment's chain: its first event's link and its last event's hash; nil when an
    /// event is missing, misplaced, malformed or not linked to its predecessor.
    private func chainSegment(_ range: Range<UInt64>, in txn: Transaction, tally: VerifyTally) throws -> ChainSegment? {
        try txn.withCursor(on: databases.events) { cursor -> ChainSegment? in
            var entry = try cursor.seek(atLeast: KeyEncoding.sequenceKey(range.lowerBound))
            var expected = range.lowerBound
            var firstLink = InlineHash()
            var previousHash = InlineHash()
            var erasures = ErasureAccount()
            let scratch = EventScratch(databases)
            while expected < range.upperBound {
                guard let current = entry, current.key.count == 8, KeyEncoding.uint64(current.key, at: 0) == expected,
                    let value = try? scratch.clear(current.value, key: current.key),
                    let fields = EventCodec.chainFields(value), fields.sequence == expected
                else { return nil }
                if expected == range.lowerBound {
                    firstLink = InlineHash(fields.previousHash)
                } else if !previousHash.equals(fields.previousHash) {
                    return nil
                }
                guard case .hash(let hash) = erasures.hash(value, sequence: expected) else { return nil }
                previousHash = hash
                expected += 1
                if expected % 10_000 == 0 { tally.add(10_000) }
                entry = try cursor.next()
            }
            return ChainSegment(firstLink: firstLink, lastHash: previousHash, erasures: erasures)
        }
    }
}

private struct ChainSegment: Sendable {
    var firstLink: InlineHash
    var lastHash: InlineHash
    var erasures: ErasureAccount
}

/// Events hashed so far across segments, reported every 100,000, one call at a time.
private final class VerifyTally: @unchecked Sendable {
    private let lock = NSLock()
    private var count: UInt64 = 0
    private let progress: ((UInt64) -> Void)?

    init(progress: ((UInt64) -> Void)?) { self.progress = progress }

    func add(_ events: UInt64) {
        guard let progress else { return }
        lock.lock()
        defer { lock.unlock() }
        let before = count / 100_000
        count += events
        if count / 100_000 > before { progress(count / 100_000 * 100_000) }
    }
}

/// The outcome of checking a ledger's attachments.
public struct AttachmentCheck: Sendable, Hashable {
    public var checked: Int
    public var problem: VerifyReport.Problem?
}

extension Ledger {
    /// Checks every attachment against the event that added it: the event is an
    /// attachment's, names it and its object, and holds as many bytes as the description
    /// says, of the content type it says. The bytes are inside the event, so the hash chain
    /// (``verify(expectedHead:progress:)``) is what proves them unchanged.
    public func verifyAttachments() throws -> AttachmentCheck {
        try read { snapshot in
            var check = AttachmentCheck(checked: 0, problem: nil)
            try snapshot.withCursor(on: snapshot.databases.attachments) { cursor in
                var entry = try cursor.first()
                while let current = entry, check.problem == nil {
                    let uuid = UUID(bytes: Array(current.key))
                    guard let uuid, let (object, sequence) = try AttachmentIndex.entry(Array(current.key), in: snapshot) else {
                        check.problem = .init(sequence: nil, reason: "the attachments projection holds a malformed entry: replay the ledger")
                        return
                    }
                    do {
                        let (attachment, data) = try AttachmentIndex.load(sequence: sequence, in: snapshot)
                        if attachment.uuid != uuid || attachment.objectUUID.bytes != object {
                            check.problem = .init(sequence: sequence, reason: "it does not add attachment \(uuid) to object \(UUID(bytes: object).map(\.uuidString) ?? "?")")
                        } else if data.count != attachment.size {
                            check.problem = .init(sequence: sequence, reason: "attachment \(uuid) holds \(data.count) bytes, its description says \(attachment.size)")
                        } else if (try? Attachment.validate(name: attachment.name, contentType: attachment.contentType, data: data, metadata: attachment.metadata)) == nil {
                            check.problem = .init(sequence: sequence, reason: "attachment \(uuid)'s bytes are not the \(attachment.contentType) its description says")
                        }
                    } catch let failure as LedgerFailure {
                        check.problem = .init(sequence: sequence, reason: failure.message)
                    }
                    check.checked += 1
                    entry = try cursor.next()
                }
            }
            return check
        }
    }
}

