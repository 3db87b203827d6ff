import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel

/// `healthledger sources`: which sources saved a type (HealthKit's source query), as far as
/// the caller may read them.
struct SourcesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sources", abstract: "The sources that saved objects of a type (as far as the caller may read them).",
        discussion: """
            One line per source, bundle identifier and name, in the order of their first save of the type. \
            An app without read authorization of the type sees only itself.

            \(WhereExpression.help)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "HealthKit type identifier (or its short name).") var type: String
    @Option(name: .customLong("where"), help: "Only sources of objects matching this expression (see below).") var condition: String?
    @Option(help: "Only sources of objects overlapping from this date (ISO 8601).") var from: String?
    @Option(help: "…until this date (ISO 8601).") var to: String?

    func run() async throws {
        let query: SourceQueryDescriptor
        do {
            let objectType = try resolveType(type)
            query = SourceQueryDescriptor(
                type: objectType, interval: try dateInterval(from: from, to: to), predicate: try condition.map { try WhereExpression.parse($0, for: objectType) })
        } catch { throw fail(error) }
        try await connection.withStore { store in
            let sources = try await query.result(for: store)
            if connection.json { return printJSON(sources.map { ["bundleIdentifier": $0.bundleIdentifier, "name": $0.name] }) }
            for source in sources { print("\(source.bundleIdentifier)\t\(source.name)") }
        }
    }
}
