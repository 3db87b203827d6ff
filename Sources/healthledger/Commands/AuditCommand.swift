import ArgumentParser
import Foundation
import HealthLedgerSDK
import Ledger

/// `healthledger audit`: who did what to a ledger, in sentences.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Who did what: a ledger's events, each told in a sentence; with --reads, who read what.",
        discussion: """
            With a LEDGER id, reads the ledger on the data directory (the operator's view, on the \
            server's machine). Without one, asks the server as the owner (--credential); an app's \
            credential is refused. Every filter given must match. A table by default (a run of like \
            saves in one commit on one line); --json prints one JSON object per event.

            --reads shows the access records instead: one per call that returned health data (which \
            credential, app or owner, method, types, how many objects, as of which event), filtered \
            by --app, --type, --since and --until; --summary sums them by reader and type (since \
            the start of today unless --since says otherwise). A call is on the record within about \
            a second.
            """)

    @Argument(help: "A ledger id: read it on the data directory. Omit it to ask the server.") var ledger: String?
    @OptionGroup var store: StoreOptions
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "First sequence number.") var from: UInt64?
    @Option(help: "Last sequence number.") var to: UInt64?
    @Option(help: "Committed at or after this time (ISO 8601 date or date and time).") var since: String?
    @Option(help: "Committed before this time.") var until: String?
    @Option(help: "Who acted: owner, operator, system, app (any app) or an app's bundle identifier.") var actor: String?
    @Option(name: .customLong("kind"), help: "Event kinds, comma-separated (objectSaved, authorizationDecided, credentialRevoked, …).")
    var kinds: [String] = []
    @Option(help: "Events about this type (HeartRate or its HealthKit identifier).") var type: String?
    @Option(help: "Events about this object (a UUID).") var object: String?
    @Flag(help: "Keep printing new events as they commit, until interrupted.") var follow = false
    @Flag(help: "Show the access records: who read what, when.") var reads = false
    @Option(help: "With --reads: the reads of this app (a bundle identifier), or 'owner'.") var app: String?
    @Flag(help: "With --reads: sum the reads by reader and type.") var summary = false

    func validate() throws {
        if follow, to != nil || until != nil { throw ValidationError("--follow takes no --to or --until") }
        if reads, from != nil || to != nil || actor != nil || !kinds.isEmpty || object != nil {
            throw ValidationError("--reads filters by --app, --type, --since and --until (not --from, --to, --actor, --kind or --object)")
        }
        if !reads, app != nil || summary { throw ValidationError("--app and --summary go with --reads") }
        if summary, follow { throw ValidationError("--summary sums what was read: not with --follow") }
    }

    func filter() throws -> AuditFilter {
        var filter = AuditFilter(fromSequence: from, toSequence: to, since: try parseTime(since, "--since"), until: try parseTime(until, "--until"))
        if let actor {
            guard let parsed = AuditFilter.Actor(parsing: actor) else { throw ValidationErrorExit("--actor '\(actor)' is not owner, operator, system, app or a bundle identifier") }
            filter.actor = parsed
        }
        for name in kinds.flatMap({ $0.split(separator: ",") }).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            guard let kind = EventKind.allCases.first(where: { "\($0)".lowercased() == name.lowercased() }) else {
                throw ValidationErrorExit("--kind '\(name)' is none of \(EventKind.allCases.map { "\($0)" }.joined(separator: ", "))")
            }
            filter.kinds.insert(kind)
        }
        filter.type = try type.map(resolveType)
        if let object {
            guard let uuid = UUID(uuidString: object) else { throw ValidationErrorExit("--object '\(object)' is not a UUID") }
            filter.object = uuid
        }
        return filter
    }

    func run() async throws {
        if reads { return try await runReads() }
        let filter: AuditFilter
        do { filter = try self.filter() } catch { throw fail(error) }
        if let ledger {
            do {
                try await Self.onDisk(try store.openStore().ledger(ledger), filter, follow: follow, print: emit)
            } catch { throw fail(error) }
            return
        }
        try await connection.withStore { store in
            let batches = follow ? try await store.watchAudit(filter) : try await store.audit(filter)
            for try await batch in batches { emit(batch.events) }
        }
    }

    /// Reads the ledger directly: page after page, then (following) after each commit,
    /// whichever process makes it.
    static func onDisk(_ ledger: Ledger, _ filter: AuditFilter, follow: Bool, print: ([AuditEvent]) -> Void) async throws {
        let (commits, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let token = ledger.changeWatchers.addForEveryCommit { signal.yield() }
        defer { ledger.changeWatchers.remove(token) }
        var next: UInt64 = 1
        var bounded = filter
        if !follow { bounded.toSequence = min(filter.toSequence ?? UInt64.max, try ledger.head().sequence) }
        func drain() throws {
            while true {
                let page = try ledger.audit(bounded, from: next, as: .operator)
                next = page.next
                if !page.events.isEmpty { print(page.events) }
                if page.caughtUp { return }
            }
        }
        try drain()
        guard follow else { return }
        for await _ in commits { try drain() }
    }

    private func emit(_ events: [AuditEvent]) {
        if connection.json {
            for event in events {
                var object: [String: Any] = [
                    "sequence": event.sequence, "time": event.time.formatted(.iso8601), "actor": "\(event.actor)", "kind": "\(event.kind)",
                    "sentence": event.sentence, "hash": hex(event.hash),
                ]
                if let type = event.objectType { object["objectType"] = type }
                if let uuid = event.objectUUID { object["objectUUID"] = uuid.uuidString }
                WatchCommand.line(object)
            }
            return
        }
        for line in AuditLine.lines(events) {
            let sequences = line.sequences.count == 1 ? "\(line.sequences.lowerBound)" : "\(line.sequences.lowerBound)–\(line.sequences.upperBound)"
            FileHandle.standardOutput.write(Data("\(sequences)\t\(line.time.formatted(.iso8601))\t\(line.sentence)\n".utf8))
        }
    }

    // MARK: Access records

    func readFilter() throws -> AccessRecordFilter {
        var filter = AccessRecordFilter(
            since: try parseTime(since, "--since"), until: try parseTime(until, "--until"), app: app, type: try type.map(resolveType)?.identifier)
        if summary, filter.since == nil { filter.since = Calendar.current.startOfDay(for: Date()) }
        return filter
    }

    /// The access records, page after page (following: then every second, the newest again).
    func runReads() async throws {
        let filter: AccessRecordFilter
        do { filter = try readFilter() } catch { throw fail(error) }
        var collected: [AccessRecord] = []
        func take(_ records: [AccessRecord]) {
            if summary { collected += records } else { emit(records) }
        }
        if let ledger {
            do {
                let ledger = try store.openStore().ledger(ledger)
                try await Self.pages(follow: follow, since: filter.since, take) { since, after, arriving in
                    var filter = filter
                    filter.since = since
                    let page =
                        arriving
                        ? try ledger.accessRecordsInArrivalOrder(filter, after: after, limit: 10_000, as: .operator)
                        : try ledger.accessRecords(filter, after: after, limit: 10_000, as: .operator)
                    return (page.records, page.next, page.hasMore, page.restarted)
                }
            } catch { throw fail(error) }
        } else {
            try await connection.withStore { store in
                try await Self.pages(follow: follow, since: filter.since, take) { since, after, arriving in
                    var filter = filter
                    filter.since = since
                    let page = try await store.accessRecords(filter, after: after, limit: 10_000, inArrivalOrder: arriving)
                    return (page.records, page.next, page.hasMore, page.restarted)
                }
            }
        }
        if summary { printSummary(AccessSummary(collected), since: filter.since) }
    }

    /// How far back a follow remembers what it took: the records it read by time, and those it
    /// read again after moving to another server.
    static let followOverlap: TimeInterval = 600

    /// Reads pages (of the records made at or after `since`) until the last. Following, it
    /// then reads every second the records in the order they arrive at the server, from where
    /// that order stood before its first page (so a follower's record that lands late, in its
    /// time's place behind newer ones, is still taken), leaving out those the first pages
    /// took (kept for ``followOverlap``). When the server is another one (a failover), it
    /// follows from that one's end, after reading by time again the last ``followOverlap``.
    static func pages(
        follow: Bool, since: Date?, _ take: ([AccessRecord]) -> Void,
        _ page: (_ since: Date?, _ after: [UInt8]?, _ inArrivalOrder: Bool) async throws -> (
            records: [AccessRecord], next: [UInt8]?, hasMore: Bool, restarted: Bool
        )
    ) async throws {
        var taken = Set<AccessRecord>()
        /// Reads by time from `from`, page after page, taking what was not taken.
        func read(from: Date?) async throws {
            var after: [UInt8]?
            while true {
                let (records, next, hasMore, _) = try await page(from, after, false)
                let new = records.filter { !taken.contains($0) }
                take(new)
                if follow { remember(new) }
                after = next ?? after
                if !hasMore { return }
            }
        }
        func remember(_ records: [AccessRecord]) {
            let kept = Date().addingTimeInterval(-Self.followOverlap)
            taken = taken.union(records.lazy.filter { $0.time >= kept }).filter { $0.time >= kept }
        }
        var place = follow ? try await page(since, nil, true).next : nil
        try await read(from: since)
        guard follow else { return }
        while true {
            let (records, next, hasMore, restarted) = try await page(since, place, true)
            place = next ?? place
            if restarted {
                let overlap = Date().addingTimeInterval(-Self.followOverlap)
                try await read(from: max(since ?? overlap, overlap))
                continue
            }
            let new = records.filter { !taken.contains($0) }
            take(new)
            remember(new)
            if hasMore { continue }
            try await Task.sleep(for: .seconds(1))
        }
    }

    private func emit(_ records: [AccessRecord]) {
        for record in records {
            if connection.json {
                var object: [String: Any] = [
                    "time": record.time.formatted(.iso8601), "credential": record.credentialID, "principal": "\(record.principal)",
                    "method": record.methodName, "types": record.types, "objects": record.objects, "calls": record.calls,
                ]
                if let point = record.asOfSequence { object["asOfSequence"] = point }
                WatchCommand.line(object)
            } else {
                let types = record.types.map(ObjectType.shortName).joined(separator: ",")
                let point = record.asOfSequence.map { "\tas of event \($0)" } ?? ""
                let calls = record.calls == 1 ? "" : "\t(\(record.calls) calls)"
                let line = "\(record.time.formatted(.iso8601))\t\(record.principal)\t\(record.methodName)\t\(record.objects)\t\(types)\(point)\(calls)\n"
                FileHandle.standardOutput.write(Data(line.utf8))
            }
        }
    }

    private func printSummary(_ summary: AccessSummary, since: Date?) {
        let when = since.map { Calendar.current.isDateInToday($0) && $0 == Calendar.current.startOfDay(for: $0) ? "today" : "since \($0.formatted(.iso8601))" } ?? ""
        for line in summary.lines {
            let sample = line.type.hasPrefix("HKQuantityTypeIdentifier") || line.type.hasPrefix("HKCategoryTypeIdentifier")
            let noun = (sample ? "sample" : "object") + (line.objects == 1 ? "" : "s")
            let calls = line.calls == 1 ? "1 call" : "\(line.calls.formatted()) calls"
            if connection.json {
                WatchCommand.line(["principal": "\(line.principal)", "type": line.type, "objects": line.objects, "calls": line.calls])
            } else {
                let text = "\(line.principal) read \(line.objects.formatted()) \(ObjectType.shortName(line.type)) \(noun) \(when) (\(calls))\n"
                FileHandle.standardOutput.write(Data(text.utf8))
            }
        }
    }
}
