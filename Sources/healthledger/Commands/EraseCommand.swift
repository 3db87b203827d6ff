import ArgumentParser
import Foundation
import HealthLedgerSDK

struct EraseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "erase",
        abstract: "Erase objects: their values leave the ledger, its history stays verifiable.",
        discussion: """
            healthledger erase UUID … --reason 'asked by the owner'   the objects, live or deleted
            healthledger erase --type HeartRate --where 'value > 200 count/min' --from … --to …
            healthledger erase --source com.example.walk              every object a source saved
            healthledger erase --type DateOfBirth                     every value a characteristic was set to
            healthledger erase --everything --reason 'starting over'  all of the owner's data
            Every event about an erased object loses its body (values, metadata, device, \
            attachments, route locations); a live one is deleted too. What stays: that an object \
            of that type existed at those times, by whom, and that it was erased, when and why. \
            --everything (the owner only) takes every object, live or deleted, and every \
            characteristic ever set; the ledger, its credentials and grants stay. An app erases \
            only what it saved; the owner any object. Refused under a legal hold.

            \(WhereExpression.help)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "UUIDs of the objects to erase.") var uuids: [String] = []
    @Option(help: "Erase live objects of this type (with --where, --from, --to).") var type: String?
    @Option(name: .customLong("where"), help: "Only objects matching this expression.") var condition: String?
    @Option(help: "Only objects overlapping from this date (ISO 8601).") var from: String?
    @Option(help: "…until this date (ISO 8601).") var to: String?
    @Option(help: "Erase every object this source (a bundle identifier) saved.") var source: String?
    @Flag(help: "Erase all of the owner's data: every object and every characteristic (the owner only).") var everything = false
    @Option(help: "Why (recorded in the erasure event).") var reason = ""

    func run() async throws {
        let target: HealthStore.ErasureTarget
        do {
            guard [!uuids.isEmpty, type != nil, source != nil, everything].filter({ $0 }).count == 1 else {
                throw ValidationErrorExit("give UUIDs, --type, --source or --everything (one of them)")
            }
            if let type {
                let objectType = try resolveType(type)
                target = .matching(objectType, overlapping: try dateInterval(from: from, to: to), predicate: try condition.map { try WhereExpression.parse($0, for: objectType) })
            } else {
                guard condition == nil, from == nil, to == nil else { throw ValidationErrorExit("--where, --from and --to need --type") }
                target = if everything { .everything } else if let source { .source(source) } else { .objects(try uuids.map { try parseUUID($0, "uuid") }) }
            }
        } catch { throw fail(error) }
        try await connection.withStore { store in
            let erasure = try await store.erase(target, reason: reason)
            if connection.json {
                printJSON(["erased": erasure.objects, "characteristics": erasure.characteristics, "events": erasure.events, "sequence": Int(erasure.sequence)])
            } else if erasure.sequence == 0 {
                print("nothing to erase")
            } else {
                let objects = erasure.objects == 1 ? "1 object" : "\(erasure.objects) objects"
                let characteristics = switch erasure.characteristics {
                case 0: ""
                case 1: " and 1 characteristic"
                default: " and \(erasure.characteristics) characteristics"
                }
                let events = erasure.events == 1 ? "1 event" : "\(erasure.events) events"
                print("erased \(objects)\(characteristics) (\(events) emptied); the last erasure event is \(erasure.sequence)")
            }
        }
    }
}
