import ArgumentParser
import Foundation
import HealthLedgerSDK

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete objects by UUID, or those of a type matching a range and an expression.",
        discussion: """
            healthledger delete UUID …                         the objects themselves, all or none
            healthledger delete --type HeartRate --where 'value > 200 count/min' --from … --to …
            An app deletes only what it saved; the owner deletes any object. Deleting a workout \
            deletes its routes; deleting a correlation deletes its members.

            \(WhereExpression.help)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "UUIDs of the objects to delete.") var uuids: [String] = []
    @Option(help: "Delete objects of this type (with --where, --from, --to).") var type: String?
    @Option(name: .customLong("where"), help: "Only objects matching this expression.") var condition: String?
    @Option(help: "Only objects overlapping from this date (ISO 8601).") var from: String?
    @Option(help: "…until this date (ISO 8601).") var to: String?

    func run() async throws {
        enum Target {
            case objects([UUID])
            case matching(ObjectType, DateInterval?, ObjectPredicate?)
        }
        let target: Target
        do {
            if let type {
                guard uuids.isEmpty else { throw ValidationErrorExit("give UUIDs or --type, not both") }
                let objectType = try resolveType(type)
                target = .matching(objectType, try dateInterval(from: from, to: to), try condition.map { try WhereExpression.parse($0, for: objectType) })
            } else {
                guard !uuids.isEmpty else { throw ValidationErrorExit("give the UUIDs to delete, or --type (with --where, --from, --to)") }
                guard condition == nil, from == nil, to == nil else { throw ValidationErrorExit("--where, --from and --to need --type") }
                target = .objects(try uuids.map { try parseUUID($0, "uuid") })
            }
        } catch { throw fail(error) }
        try await connection.withStore { store in
            let deleted: Int
            switch target {
            case .objects(let uuids): deleted = try await store.delete(uuids)
            case .matching(let type, let interval, let predicate): deleted = try await store.deleteObjects(of: type, overlapping: interval, matching: predicate)
            }
            if connection.json { printJSON(["deleted": deleted]) } else { print("deleted \(deleted)") }
        }
    }
}
