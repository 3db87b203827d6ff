import ArgumentParser
import Foundation
import HealthLedgerSDK
import Ledger

/// `healthledger audit`: who did what to a ledger, in sentences.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Who did what: a ledger's events, each told in a sentence.",
        discussion: """
            With a LEDGER id, reads the ledger on the data directory (the operator's view, on the \
            server's machine). Without one, asks the server as the owner (--credential); an app's \
            credential is refused. Every filter given must match. A table by default (a run of like \
            saves in one commit on one line); --json prints one JSON object per event.
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

    func validate() throws {
        if follow, to != nil || until != nil { throw ValidationError("--follow takes no --to or --until") }
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
}
