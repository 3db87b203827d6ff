import ArgumentParser
import Foundation
import HealthLedgerSDK

/// What the change commands share: the type, an optional interval and anchor.
struct ChangeOptions: ParsableArguments {
    @Option(help: "HealthKit type identifier.") var type: String
    @Option(help: "Only added samples overlapping from this date (ISO 8601).") var from: String?
    @Option(help: "…until this date (ISO 8601).") var to: String?
    @Option(help: "Resume after this anchor (base64, as printed by an earlier run).") var anchor: String?
    @Option(help: "Show values in this unit (quantity types).") var unit: String?
    @Option(name: .customLong("where"), help: "Only added objects matching this expression (`healthledger query --help` shows the grammar).")
    var condition: String?

    func descriptor(limit: Int = 0) throws -> (AnchoredObjectQueryDescriptor, HealthUnit?) {
        let interval = try dateInterval(from: from, to: to)
        let resume = try anchor.map { text in
            guard let bytes = Data(base64Encoded: text), !bytes.isEmpty else { throw ValidationErrorExit("--anchor is not base64") }
            return QueryAnchor(bytes: Array(bytes))
        }
        guard limit >= 0 else { throw ValidationErrorExit("--limit is 0 (all) or positive") }
        return (
            AnchoredObjectQueryDescriptor(
                type: try resolveType(type), interval: interval, predicate: try condition.map { try WhereExpression.parse($0, for: try resolveType(type)) },
                anchor: resume, limit: limit),
            try unit.map { try HealthUnit($0) }
        )
    }
}

/// One batch of changes as JSON.
func changeRecord(_ changes: AnchoredObjectQueryResult, unit: HealthUnit?) throws -> [String: Any] {
    [
        "added": try changes.addedObjects.map { try sampleRow($0, unit: unit) },
        "deleted": changes.deletedObjects.map { deleted -> [String: Any] in
            var row: [String: Any] = ["uuid": deleted.uuid.uuidString]
            if let identifier = deleted.syncIdentifier { row["syncIdentifier"] = identifier }
            if let version = deleted.syncVersion { row["syncVersion"] = version }
            return row
        },
        "anchor": Data(changes.newAnchor.bytes).base64EncodedString(),
        "hasMore": changes.hasMore,
    ]
}

struct ChangesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "changes",
        abstract: "What changed in a type since an anchor (an anchored object query).",
        discussion: """
            Prints the samples added and the UUIDs deleted since --anchor (from the beginning without \
            one), and the anchor to pass next time. Only what the credential may read is shown.
            """)
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var options: ChangeOptions
    @Option(help: "At most this many changes (0: all); `hasMore` says whether more follow.") var limit = 0

    func run() async throws {
        let (query, unit): (AnchoredObjectQueryDescriptor, HealthUnit?)
        do { (query, unit) = try options.descriptor(limit: limit) } catch { throw fail(error) }
        try await connection.withStore { store in
            let changes = try await store.result(for: query)
            let record = try changeRecord(changes, unit: unit)
            if connection.json {
                printJSON(record)
            } else {
                printSampleTable(record["added"] as! [[String: Any]])
                for deleted in changes.deletedObjects { print("deleted\t\(deleted.uuid.uuidString)") }
                print("anchor\t\(record["anchor"]!)\(changes.hasMore ? "\t(more follow)" : "")")
            }
        }
    }
}

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Follow a type's changes as they commit, until interrupted.",
        discussion: """
            Prints the changes since --anchor, then each new batch as it commits, one JSON object per \
            line (added, deleted, anchor). With --observe, prints one line per update instead (an \
            observer query) and starts from now.
            """)
    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var options: ChangeOptions
    @Flag(help: "Only say that something changed (an observer query).") var observe = false

    func run() async throws {
        let (query, unit): (AnchoredObjectQueryDescriptor, HealthUnit?)
        do { (query, unit) = try options.descriptor() } catch { throw fail(error) }
        try await connection.withStore { store in
            if observe {
                let updates = try await store.observe(query.descriptors, overlapping: query.interval)
                let types = query.descriptors.map(\.type.identifier).joined(separator: ",")
                Self.line(["observing": types])
                for try await _ in updates { Self.line(["changed": types, "at": Date().formatted(.iso8601)]) }
            } else {
                for try await changes in try await store.changes(for: query) { Self.line(try changeRecord(changes, unit: unit)) }
            }
        }
    }

    /// One compact JSON object on a line of its own, flushed at once.
    static func line(_ value: [String: Any]) {
        FileHandle.standardOutput.write(jsonData(value, options: [.sortedKeys]) + Data("\n".utf8))
    }
}
