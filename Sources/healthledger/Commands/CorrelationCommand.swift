import ArgumentParser
import Foundation
import HealthLedgerSDK

struct CorrelationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "correlation",
        abstract: "Save and query correlations: blood pressure and food.",
        subcommands: [Save.self, Query.self])

    struct Save: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "save",
            abstract: "Save a blood-pressure reading (from flags) or a food (from JSON), members included.",
            discussion: """
                healthledger correlation save --systolic 120 --diastolic 80 --unit mmHg [--start DATE]
                healthledger correlation save --input food.json    (or - for standard input)
                JSON: {"type": "Food", "start": "...", "end": "...", "food": "Apple", "metadata": {...},
                       "members": [{"type": "DietaryEnergyConsumed", "value": 95, "unit": "kcal"}, ...]}
                Members take the correlation's dates unless they give their own.
                """)
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "Systolic pressure.") var systolic: Double?
        @Option(help: "Diastolic pressure.") var diastolic: Double?
        @Option(help: "The pressures' unit.") var unit = "mmHg"
        @Option(help: "When it was measured (ISO 8601, default now).") var start: String?
        @Option(help: "A JSON correlation, or - for standard input.") var input: String?

        func run() async throws {
            let correlation: Correlation
            do {
                if let input {
                    guard let json = try jsonInput(input) as? [String: Any] else {
                        throw ValidationErrorExit("the input must be one JSON object")
                    }
                    correlation = try Self.correlation(json)
                } else {
                    guard let systolic, let diastolic else { throw ValidationErrorExit("give --systolic and --diastolic, or --input") }
                    let date = try SampleInput.date(start, "--start") ?? Date()
                    correlation = Correlation(
                        type: .bloodPressure, start: date, end: date,
                        objects: [
                            QuantitySample(
                                type: try QuantityType("HKQuantityTypeIdentifierBloodPressureSystolic"), quantity: try Quantity(systolic, unit), start: date,
                                end: date),
                            QuantitySample(
                                type: try QuantityType("HKQuantityTypeIdentifierBloodPressureDiastolic"), quantity: try Quantity(diastolic, unit),
                                start: date, end: date),
                        ])
                }
            } catch { throw fail(error) }
            try await connection.withStore { store in
                let outcome = try await store.save(.correlation(correlation))
                if connection.json {
                    printJSON(["uuid": outcome.uuid.uuidString, "members": correlation.objects.map(\.uuid.uuidString)])
                } else {
                    print("\(outcome.uuid)\tsaved with \(correlation.objects.count) members")
                }
            }
        }

        static func correlation(_ json: [String: Any]) throws -> Correlation {
            guard let name = json["type"] as? String else { throw ValidationErrorExit("'type' is missing (BloodPressure or Food)") }
            let type = try CorrelationType(try resolveType(name).identifier)
            let start = try SampleInput.date(json["start"] as? String, "start") ?? Date()
            let end = try SampleInput.date(json["end"] as? String, "end") ?? start
            var metadata = try SampleInput(type: "", value: 0, unit: nil, start: nil, end: nil, uuid: nil, metadata: json["metadata"] as? [String: Any] ?? [:])
                .metadataValues()
            if let food = json["food"] as? String { metadata[MetadataKey.foodType] = .string(food) }
            guard let members = json["members"] as? [[String: Any]], !members.isEmpty else { throw ValidationErrorExit("'members' must list the samples") }
            let objects = try members.enumerated().map { index, member -> QuantitySample in
                var fields = member
                if fields["start"] == nil { fields["start"] = json["start"] ?? start.formatted(.iso8601) }
                if fields["end"] == nil { fields["end"] = fields["start"] }
                do {
                    guard case .quantitySample(let sample) = try SampleInput(json: fields).object() else {
                        throw ValidationErrorExit("members are quantity samples")
                    }
                    return sample
                } catch let error as ValidationErrorExit {
                    throw ValidationErrorExit("members[\(index)]: \(error.message)")
                }
            }
            return Correlation(type: type, start: start, end: end, objects: objects, metadata: metadata)
        }
    }

    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "query",
            abstract: "Correlations of a type, with the members the credential may read.",
            discussion: """
                healthledger correlation query --type BloodPressure --member 'BloodPressureSystolic: value >= 140 mmHg'
                --where filters the correlations themselves (dates, source, metadata); each --member \
                keeps the correlations with a member of that type matching its expression.

                \(WhereExpression.help)
                """)
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "BloodPressure or Food.") var type: String
        @Option(name: .customLong("where"), help: "Only correlations matching this expression.") var condition: String?
        @Option(name: .customLong("member"), help: "TYPE: EXPR — a member of TYPE matches EXPR; repeatable.") var members: [String] = []
        @Option(help: "Only correlations overlapping from this date (ISO 8601).") var from: String?
        @Option(help: "…until this date (ISO 8601).") var to: String?
        @Option(help: "At most this many (0: all).") var limit = 100

        func run() async throws {
            let query: CorrelationQueryDescriptor
            do {
                let type = try CorrelationType(try resolveType(self.type).identifier)
                var memberPredicates: [QuantityType: ObjectPredicate] = [:]
                for member in members {
                    guard let colon = member.firstIndex(of: ":") else { throw ValidationErrorExit("--member is TYPE: EXPR, not '\(member)'") }
                    let memberType = try QuantityType(try resolveType(member[..<colon].trimmingCharacters(in: .whitespaces)).identifier)
                    memberPredicates[memberType] = try WhereExpression.parse(String(member[member.index(after: colon)...]), for: memberType.objectType)
                }
                query = CorrelationQueryDescriptor(
                    type: type, interval: try dateInterval(from: from, to: to),
                    predicate: try condition.map { try WhereExpression.parse($0, for: type.objectType) }, memberPredicates: memberPredicates, limit: limit)
            } catch { throw fail(error) }
            try await connection.withStore { store in
                let rows = try await query.result(for: store).map { try sampleRow(.correlation($0), unit: nil) }
                if connection.json {
                    printJSON(rows)
                } else {
                    print(["START", "UUID", "SOURCE", "MEMBERS"].joined(separator: "\t"))
                    for row in rows {
                        let members = (row["members"] as? [[String: Any]] ?? []).map { member in
                            "\(member["type"] ?? "")=\(member["value"] ?? "") \(member["unit"] ?? "")"
                        }
                        print(["\(row["start"]!)", "\(row["uuid"]!)", "\(row["source"]!)", members.joined(separator: ", ")].joined(separator: "\t"))
                    }
                }
            }
        }
    }
}
