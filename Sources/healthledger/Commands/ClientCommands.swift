import ArgumentParser
import Foundation
import HealthLedgerSDK

/// Options of the commands that talk to a server.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "Server address [HEALTHLEDGER_HOST] (default 127.0.0.1); unix:PATH for its Unix domain socket on this host (healthledgerd --unix-socket).") var host: String?
    @Option(help: "Server port [HEALTHLEDGER_PORT] (default 7411).") var port: Int?
    @Option(help: "The bearer credential [HEALTHLEDGER_CREDENTIAL].") var credential: String?
    @Option(name: .customLong("other-server"), help: "HOST:PORT of another server of the same ledgers (its primary or a follower), tried when the first cannot be reached; repeatable [HEALTHLEDGER_OTHER_SERVERS, comma-separated]. A write a follower refuses goes to the primary it names by itself.")
    var otherServers: [String] = []
    @Option(name: .customLong("tls-ca"), help: "Use TLS, trusting the roots in this PEM file; the certificate must name the host (or --tls-server-name).")
    var tlsRoots: String?
    @Option(name: .customLong("tls-server-name"), help: "The name the server's certificate must carry, when it is not --host.") var tlsServerName: String?
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Option(name: .customLong("as-of"), help: "Read the ledger as it stood after event SEQ, or at a time (ISO 8601 date or date and time).")
    var asOf: String?

    func store() throws -> HealthStore {
        let store = HealthStore(configuration: try configuration())
        return try asOf.map { store.asOf(try Self.pointInTime($0)) } ?? store
    }

    /// Where the server is and how to reach it, from the flags and the environment.
    func configuration() throws -> HealthStoreConfiguration {
        let environment = ProcessInfo.processInfo.environment
        guard let credential = credential ?? environment["HEALTHLEDGER_CREDENTIAL"], !credential.isEmpty else {
            throw ValidationErrorExit("a credential is needed: --credential or HEALTHLEDGER_CREDENTIAL (see `healthledger admin issue-app-credential`)")
        }
        let port = try port ?? environment["HEALTHLEDGER_PORT"].map { text in
            guard let port = Int(text) else { throw ValidationErrorExit("HEALTHLEDGER_PORT is '\(text.prefix(40))', not a port number") }
            return port
        } ?? 7411
        guard (1...65535).contains(port) else { throw ValidationErrorExit("port \(port) is not a TCP port: 1 to 65535") }
        guard tlsServerName == nil || tlsRoots != nil else { throw ValidationErrorExit("--tls-server-name goes with --tls-ca") }
        let others = otherServers.isEmpty
            ? (environment["HEALTHLEDGER_OTHER_SERVERS"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            : otherServers
        for server in others where HealthStoreConfiguration.address(server) == nil {
            throw ValidationErrorExit("--other-server takes HOST:PORT, got '\(server.prefix(100))'")
        }
        return HealthStoreConfiguration(
            host: host ?? environment["HEALTHLEDGER_HOST"] ?? "127.0.0.1",
            port: port,
            credential: credential, tls: tlsRoots.map { .init(trustRoots: $0, serverName: tlsServerName) }, connectAttempts: 2,
            otherServers: others)
    }

    /// SEQ (an event's sequence number) or an ISO 8601 date or date and time, given as `flag`.
    static func pointInTime(_ text: String, flag: String = "--as-of") throws -> PointInTime {
        if let sequence = UInt64(text) { return .sequence(sequence) }
        guard let time = try parseTime(text, flag) else { throw ValidationErrorExit("\(flag) needs a value") }
        return .time(time)
    }
}

extension ConnectionOptions {
    /// Runs `body` with a store, closing it afterwards and turning failures into clear exits.
    func withStore(_ body: (HealthStore) async throws -> Void) async throws {
        let store = try self.store()
        do {
            try await body(store)
        } catch {
            await store.close()
            throw clientFailure(error)
        }
        await store.close()
    }
}

func printJSON(_ value: Any) {
    print(String(decoding: jsonData(value, options: [.sortedKeys, .prettyPrinted]), as: UTF8.self))
}

/// `value` as JSON text. A number JSON cannot hold — infinite or not a number, as a huge value
/// converted to a smaller unit becomes — is written as the string the table form prints
/// (`"inf"`, `"-inf"`, `"nan"`) and named on standard error, so that no row is lost.
func jsonData(_ value: Any, options: JSONSerialization.WritingOptions) -> Data {
    var unrepresentable: [String] = []
    func representable(_ value: Any) -> Any {
        switch value {
        case let number as Double where !number.isFinite:
            unrepresentable.append("\(number)")
            return "\(number)"
        case let dictionary as [String: Any]: return dictionary.mapValues(representable)
        case let array as [Any]: return array.map(representable)
        default: return value
        }
    }
    let cleaned = representable(value)
    if !unrepresentable.isEmpty {
        FileHandle.standardError.write(Data(
            "healthledger: \(unrepresentable.joined(separator: ", ")) does not fit a JSON number: written as a string (try a larger --unit)\n".utf8))
    }
    do {
        return try JSONSerialization.data(withJSONObject: cleaned, options: options)
    } catch {
        FileHandle.standardError.write(Data("healthledger: the result does not convert to JSON: \(error)\n".utf8))
        return Data("null".utf8)
    }
}

func clientFailure(_ error: any Error) -> any Error {
    if let error = error as? RPCError { return ValidationErrorExit("\(error.code): \(error.message)") }
    return fail(error)
}

struct PingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ping", abstract: "Check the server and the credential.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await connection.withStore { store in
            let result = try await store.ping()
            let micros = result.roundTrip.components.attoseconds / 1_000_000_000_000 + result.roundTrip.components.seconds * 1_000_000
            if connection.json {
                printJSON(["ledger": result.ledgerID, "principal": result.principal, "roundTripMicroseconds": micros])
            } else {
                print("ledger \(result.ledgerID) as \(result.principal): \(micros) µs")
            }
        }
    }
}

struct SaveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "save",
        abstract: "Save a sample, from flags or from JSON.",
        discussion: """
            From flags:  healthledger save --type HKQuantityTypeIdentifierHeartRate --value 72 --unit count/min
            From JSON:   healthledger save --input samples.json   (or - for standard input)
            JSON is one object or an array of objects: {"type": "...", "value": 72, "unit": "count/min",
            "start": "2026-11-22T08:00:00Z", "end": "...", "uuid": "...", "metadata": {"key": "text" | 1.5}}.
            Category samples give the raw value and no unit.
            A state of mind (HKDataTypeStateOfMind) gives its valence (-1 to 1) as the value, --kind
            (momentaryEmotion or dailyMood), and any --label and --association (HealthKit's case names,
            repeatable); in JSON "kind", "labels" and "associations" (arrays of names).
            """)

    @OptionGroup var connection: ConnectionOptions
    @Option(help: "HealthKit type identifier.") var type: String?
    @Option(parsing: .unconditional, help: "The quantity (negative for temperatures and sound levels: --value -1.5), or the category's raw value.") var value: Double?
    @Option(help: "The unit (quantity types).") var unit: String?
    @Option(help: "Start date, ISO 8601 (default now).") var start: String?
    @Option(help: "End date, ISO 8601 (default the start).") var end: String?
    @Option(name: .customLong("metadata"), help: "key=value metadata (numbers stay numbers); repeatable.") var metadata: [String] = []
    @Option(help: "A JSON file of samples, or - for standard input.") var input: String?
    @Option(help: "A state of mind's kind: momentaryEmotion or dailyMood.") var kind: String?
    @Option(name: .customLong("label"), help: "A state of mind's label (calm, happy, stressed …); repeatable.") var labels: [String] = []
    @Option(name: .customLong("association"), help: "A state of mind's association (work, family, health …); repeatable.")
    var associations: [String] = []

    func run() async throws {
        let objects: [HealthObject]
        do {
            if let input {
                let json = try jsonInput(input)
                let items = (json as? [[String: Any]]) ?? [(json as? [String: Any])].compactMap { $0 }
                guard !items.isEmpty else { throw ValidationErrorExit("the input must be a JSON object or an array of objects") }
                objects = try items.enumerated().map { index, item in
                    do { return try SampleInput(json: item).object() } catch let error as ValidationErrorExit {
                        throw ValidationErrorExit("sample \(index): \(error.message)")
                    }
                }
            } else {
                guard let type, let value else { throw ValidationErrorExit("give --type and --value, or --input") }
                var fields: [String: Any] = [:]
                for pair in metadata {
                    guard let equals = pair.firstIndex(of: "=") else { throw ValidationErrorExit("metadata '\(pair)' is not key=value") }
                    let text = String(pair[pair.index(after: equals)...])
                    fields[String(pair[..<equals])] = Double(text).map { $0 as Any } ?? text
                }
                var input = SampleInput(type: type, value: value, unit: unit, start: start, end: end, uuid: nil, metadata: fields)
                (input.kind, input.labels, input.associations) = (kind, labels, associations)
                objects = [try input.object()]
            }
        } catch { throw fail(error) }

        try await connection.withStore { store in
            let outcomes = try await store.save(objects)
            if connection.json {
                printJSON(outcomes.map { outcome -> [String: String] in
                    switch outcome.disposition {
                    case .saved: ["uuid": outcome.uuid.uuidString, "disposition": "saved"]
                    case .replaced(let previous): ["uuid": outcome.uuid.uuidString, "disposition": "replaced", "previous": previous.uuidString]
                    case .ignored(let existing): ["uuid": outcome.uuid.uuidString, "disposition": "ignored", "existing": existing.uuidString]
                    }
                })
            } else {
                for outcome in outcomes {
                    switch outcome.disposition {
                    case .saved: print("\(outcome.uuid)\tsaved")
                    case .replaced(let previous): print("\(outcome.uuid)\treplaced \(previous)")
                    case .ignored(let existing): print("\(outcome.uuid)\tignored (kept \(existing))")
                    }
                }
            }
        }
    }
}

/// One sample as the CLI reads it.
struct SampleInput {
    var type: String
    var value: Double
    var unit: String?
    var start: String?
    var end: String?
    var uuid: String?
    var metadata: [String: Any]
    /// A state of mind's kind, labels and associations, by HealthKit's case names.
    var kind: String?
    var labels: [String] = []
    var associations: [String] = []

    init(type: String, value: Double, unit: String?, start: String?, end: String?, uuid: String?, metadata: [String: Any]) {
        self.type = type
        self.value = value
        self.unit = unit
        self.start = start
        self.end = end
        self.uuid = uuid
        self.metadata = metadata
    }

    init(json: [String: Any]) throws {
        guard let type = json["type"] as? String else { throw ValidationErrorExit("'type' is missing") }
        guard let value = (json["value"] as? NSNumber)?.doubleValue else { throw ValidationErrorExit("'value' must be a number") }
        self.init(
            type: type, value: value, unit: json["unit"] as? String, start: json["start"] as? String, end: json["end"] as? String,
            uuid: json["uuid"] as? String, metadata: json["metadata"] as? [String: Any] ?? [:])
        kind = json["kind"] as? String
        for (key, names) in [("labels", \SampleInput.labels), ("associations", \SampleInput.associations)] where json[key] != nil {
            guard let list = json[key] as? [String] else { throw ValidationErrorExit("'\(key)' must be an array of names") }
            self[keyPath: names] = list
        }
    }

    static func date(_ text: String?, _ name: String) throws -> Date? {
        guard let text else { return nil }
        guard let date = parseISO8601(text, dateOnly: true) else { throw ValidationErrorExit("\(name) '\(text)' is not an ISO 8601 date") }
        return date
    }

    /// The metadata as model values (strings and numbers).
    func metadataValues() throws -> Metadata {
        var fields: Metadata = [:]
        for (key, value) in metadata {
            switch value {
            case let number as NSNumber: fields[key] = .number(number.doubleValue)
            case let text as String: fields[key] = .string(text)
            default: throw ValidationErrorExit("metadata '\(key)' must be a string or a number")
            }
        }
        return fields
    }

    func object() throws -> HealthObject {
        let startDate = try Self.date(start, "start") ?? Date()
        let endDate = try Self.date(end, "end") ?? startDate
        let id = try uuid.map { try parseUUID($0, "uuid") } ?? .timeOrdered()
        let fields = try metadataValues()
        let resolved = try resolveType(type)
        let type = resolved.identifier
        if resolved.family != .stateOfMind, kind != nil || !labels.isEmpty || !associations.isEmpty {
            throw ValidationErrorExit("a kind, labels and associations belong to a state of mind (HKDataTypeStateOfMind), not to \(type)")
        }
        switch resolved.family {
        case .quantity:
            guard let unit else { throw ValidationErrorExit("a quantity sample needs a unit") }
            return .quantitySample(QuantitySample(
                type: try QuantityType(type), quantity: try Quantity(value, unit), start: startDate, end: endDate, metadata: fields, uuid: id))
        case .category:
            guard let raw = Int(exactly: value) else { throw ValidationErrorExit("a category value must be an integer") }
            return .categorySample(CategorySample(type: try CategoryType(type), value: raw, start: startDate, end: endDate, metadata: fields, uuid: id))
        case .stateOfMind:
            guard unit == nil else { throw ValidationErrorExit("a state of mind's value is its valence, with no unit") }
            guard let kind else { throw ValidationErrorExit("a state of mind needs its kind: momentaryEmotion or dailyMood") }
            guard let kindCase = StateOfMind.Kind(name: kind) else {
                throw ValidationErrorExit("kind '\(kind)' is not momentaryEmotion or dailyMood")
            }
            do {
                return .stateOfMind(StateOfMind(
                    kind: kindCase, valence: value,
                    labels: try labels.enumerated().map { try StateOfMind.Label(validating: $1, field: "label \($0 + 1)") },
                    associations: try associations.enumerated().map { try StateOfMind.Association(validating: $1, field: "association \($0 + 1)") },
                    start: startDate, end: endDate, metadata: fields, uuid: id))
            } catch let error as HealthError {
                throw ValidationErrorExit(error.message)
            }
        default:
            throw ValidationErrorExit("the CLI saves quantity and category samples and states of mind; '\(type)' is none of them")
        }
    }
}

struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query", abstract: "Query samples of a type.",
        discussion: """
            Values show in the unit people read for the type (heart rate in count/min) unless --unit says otherwise.

            \(WhereExpression.help)
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "HealthKit type identifier.") var type: String
    @Option(name: .customLong("where"), help: "Only objects matching this expression (see below).") var condition: String?
    @Option(help: "Only samples overlapping from this date (ISO 8601).") var from: String?
    @Option(help: "…until this date (ISO 8601).") var to: String?
    @Option(help: "At most this many (0: all).") var limit = 100
    @Option(help: "Sort by start or end.") var sort = "start"
    @Flag(help: "Newest first.") var descending = false
    @Option(help: "Show values in this unit (quantity types).") var unit: String?
    @Option(help: "Only objects associated with this workout (UUID).") var workout: String?

    func run() async throws {
        let query: SampleQueryDescriptor
        let displayUnit: HealthUnit?
        do {
            let interval = try dateInterval(from: from, to: to)
            guard sort == "start" || sort == "end" else { throw ValidationErrorExit("--sort is start or end") }
            let objectType = try resolveType(type)
            let associated = try workout.map { ObjectPredicate.associatedWithWorkout(try parseUUID($0, "--workout")) }
            let filter = try condition.map { try WhereExpression.parse($0, for: objectType) }
            query = SampleQueryDescriptor(
                type: objectType, interval: interval,
                predicate: [associated, filter].compactMap { $0 }.count == 2 ? .and([associated!, filter!]) : associated ?? filter, limit: limit,
                sort: sort == "start" ? .startDate(ascending: !descending) : .endDate(ascending: !descending))
            displayUnit = try unit.map { try HealthUnit($0) }
        } catch { throw fail(error) }
        try await connection.withStore { store in
            let samples = try await store.result(for: query)
            let rows = try samples.map { try sampleRow($0, unit: displayUnit) }
            if connection.json {
                printJSON(rows)
            } else {
                printSampleTable(rows)
            }
        }
    }
}

/// One object as a row of the query commands' output.
func sampleRow(_ sample: HealthObject, unit displayUnit: HealthUnit?) throws -> [String: Any] {
    var row: [String: Any] = [
        "uuid": sample.uuid.uuidString, "start": sample.startDate.formatted(.iso8601), "end": sample.endDate.formatted(.iso8601),
        "source": sample.sourceRevision.source.bundleIdentifier, "type": sample.objectType.identifier.replacingOccurrences(of: "HKQuantityTypeIdentifier", with: ""),
    ]
    switch sample {
    case .quantitySample(let quantity):
        let target = displayUnit ?? DisplayUnits.unit(for: quantity.type)
        // 12 significant digits: 68.0388, not 68.03880000000001.
        let value = try quantity.quantity.doubleValue(for: target)
        row["value"] = Double(String(format: "%.12g", value)) ?? value
        row["unit"] = target.description
        if !quantity.series.isEmpty {
            // A series sample's values, in the display unit, each with its interval.
            row["count"] = quantity.series.count
            row["series"] = try quantity.series.map { entry -> [String: Any] in
                let value = try Quantity(entry.value, quantity.quantity.unit).doubleValue(for: target)
                return ["value": Double(String(format: "%.12g", value)) ?? value, "start": entry.startDate.formatted(.iso8601), "end": entry.endDate.formatted(.iso8601)]
            }
        }
    case .categorySample(let category):
        row["value"] = category.value
    case .visionPrescription(let prescription):
        // start and end are the dates issued and of expiry.
        row["value"] = "\(prescription.prescriptionType)"
        if !prescription.description.isEmpty { row["description"] = prescription.description }
    case .workout(let workout):
        row["value"] = workout.activityType.name
        row["duration_s"] = workout.duration
        if !workout.activities.isEmpty { row["activities"] = workout.activities.count }
    case .correlation(let correlation):
        row["value"] = correlation.objects.count
        row["unit"] = "members"
        row["members"] = try correlation.objects.map { try sampleRow(.quantitySample($0), unit: nil) }
        if case .string(let food)? = correlation.metadata[MetadataKey.foodType] { row["food"] = food }
    case .workoutRoute(let route):
        row["value"] = route.locationCount
        row["unit"] = "locations"
        row["workout"] = route.workoutUUID.uuidString
    case .activitySummary(let summary):
        row.merge(activityRow(summary)) { _, new in new }
    case .electrocardiogram(let recording):
        row["value"] = "\(recording.classification)"
        row["unit"] = "\(recording.voltages.count) µV at \(recording.samplingFrequency)"
        if let rate = recording.averageHeartRate { row["average_heart_rate"] = rate.value }
        row["sampling_frequency_hz"] = (try? recording.samplingFrequency.doubleValue(for: .hertz)) ?? recording.samplingFrequency.value
        row["voltages_uv"] = recording.voltages.map(Double.init)
    case .heartbeatSeries(let series):
        row["value"] = series.beats.count
        row["unit"] = "beats"
        row["beats_s"] = series.beats.map(\.timeSinceSeriesStart)
        let gaps = series.beats.indices.filter { series.beats[$0].precededByGap }
        if !gaps.isEmpty { row["gap_beats"] = gaps }
    case .clinicalRecord(let record):
        row["value"] = record.displayName
        row["unit"] = record.fhirResource.resourceType
        row["fhir"] = ["resourceType": record.fhirResource.resourceType, "id": record.fhirResource.identifier, "version": record.fhirResource.fhirVersion]
    case .stateOfMind(let state):
        row["value"] = state.valence
        row["unit"] = state.valenceClassification.map { "\($0)" } ?? ""
        row["kind"] = state.kind.name
        row["labels"] = state.labels.map(\.rawValue)
        row["associations"] = state.associations.map(\.rawValue)
    case .userAnnotatedMedication(let medication):
        row["value"] = medication.medication.displayText
        row["unit"] = medication.medication.generalForm.rawValue
        row["concept"] = medication.medication.identifier
        if let nickname = medication.nickname { row["nickname"] = nickname }
        row["archived"] = medication.isArchived
        row["has_schedule"] = medication.hasSchedule
        if !medication.medication.relatedCodings.isEmpty {
            row["codings"] = medication.medication.relatedCodings.map { coding -> [String: String] in
                var entry = ["system": coding.system, "code": coding.code]
                if let version = coding.version { entry["version"] = version }
                return entry
            }
        }
    case .medicationDoseEvent(let dose):
        row["value"] = dose.doseQuantity.map { $0 as Any } ?? "\(dose.logStatus)"
        row["unit"] = dose.unit.description
        row["concept"] = dose.medicationConceptIdentifier
        row["status"] = "\(dose.logStatus)"
        row["schedule"] = "\(dose.scheduleType)"
        if let quantity = dose.scheduledDoseQuantity { row["scheduled_quantity"] = quantity }
        if let date = dose.scheduledDate { row["scheduled_date"] = date.formatted(.iso8601) }
    case .audiogram(let audiogram):
        row["value"] = audiogram.points.count
        row["unit"] = "frequencies"
        row["points"] = audiogram.points.map { point -> [String: Any] in
            var entry: [String: Any] = ["frequency_hz": (try? point.frequency.doubleValue(for: .hertz)) ?? point.frequency.value]
            if let level = point.leftEar { entry["left_dbhl"] = (try? level.doubleValue(for: .hearingLevel)) ?? level.value }
            if let level = point.rightEar { entry["right_dbhl"] = (try? level.doubleValue(for: .hearingLevel)) ?? level.value }
            if point.leftEarMasked { entry["left_masked"] = true }
            if point.rightEarMasked { entry["right_masked"] = true }
            return entry
        }
    }
    return row
}

/// An activity summary's day and rings, each with its goal (move in kcal, or in minutes for
/// the move mode appleMoveTime; exercise in minutes; stand in hours), and the three in one
/// line as `value`.
func activityRow(_ summary: ActivitySummary) -> [String: Any] {
    func number(_ quantity: Quantity, _ unit: String) -> Double {
        let value = (try? quantity.doubleValue(for: HealthUnit(unit))) ?? quantity.value
        return Double(String(format: "%.12g", value)) ?? value
    }
    let byTime = summary.moveMode == .appleMoveTime
    let move = byTime ? (number(summary.moveTime, "min"), number(summary.moveTimeGoal, "min"), "min") :
        (number(summary.activeEnergyBurned, "kcal"), number(summary.activeEnergyBurnedGoal, "kcal"), "kcal")
    let exercise = (number(summary.exerciseTime, "min"), number(summary.exerciseTimeGoal, "min"))
    let stand = (number(summary.standHours, "count"), number(summary.standHoursGoal, "count"))
    func text(_ value: Double) -> String { value == value.rounded() ? String(Int(value)) : String(value) }
    return [
        "day": summary.day.description, "move": move.0, "moveGoal": move.1, "moveUnit": move.2, "exercise": exercise.0,
        "exerciseGoal": exercise.1, "stand": stand.0, "standGoal": stand.1, "paused": summary.isPaused,
        "value": "move \(text(move.0))/\(text(move.1)) \(move.2), exercise \(text(exercise.0))/\(text(exercise.1)) min, stand \(text(stand.0))/\(text(stand.1)) h"
            + (summary.isPaused ? " (paused)" : ""),
    ]
}

func printSampleTable(_ rows: [[String: Any]]) {
    print(["START", "END", "VALUE", "UNIT", "SOURCE", "UUID"].joined(separator: "\t"))
    for row in rows {
        print(["start", "end", "value", "unit", "source", "uuid"].map { "\(row[$0] ?? "")" }.joined(separator: "\t"))
    }
}
