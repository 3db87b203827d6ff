import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import LedgerSchema
import SwiftProtobuf

/// HealthLedger's own export: JSON Lines, one self-describing line per item, in an order a
/// reader can replay (docs/EXPORT.md):
///
/// - `{"kind":"header","format":"healthledger-export","version":1,"ledger":…,"exportedAt":…}`
/// - `{"kind":"characteristic","type":…,"value":…}`
/// - `{"kind":"object","object":{…}}` — the `HealthObject` message of `objects.proto` in
///   protobuf's JSON mapping (UUIDs, sources, devices and metadata as stored); a route's
///   line adds `"locations":{…}` (the columnar `RouteLocations` message)
/// - `{"kind":"sourceOrder","type":…,"sources":[bundle identifier…]}` — a type's sources,
///   highest priority first, which merge overlapping samples in statistics (the owner's
///   export; for types with more than one source)
/// - `{"kind":"association","workout":UUID,"samples":[UUID…]}` — samples added to a workout
/// - `{"kind":"attachment","attachment":{…},"data":BASE64}`
/// - `{"kind":"end","objects":N}` — a file without it was cut short.
public enum LedgerLines {
    public static let format = "healthledger-export"
    public static let version = 1

    /// The object types an export walks, in replay order: samples, then correlations (with
    /// their members), workouts, routes, prescriptions, activity summaries, audiograms,
    /// clinical records, electrocardiograms, heartbeat series, states of mind, medications and
    /// their dose events.
    static var exportedTypes: [ObjectType] {
        let samples = (QuantityTypeDescriptor.catalogue.map(\.identifier) + CategoryTypeDescriptor.catalogue.map(\.identifier))
            .compactMap { try? ObjectType($0) }
        let correlations = TypeCatalogue.correlationTypes.keys.sorted().compactMap { try? ObjectType($0) }
        return correlations + samples + [.workout, .workoutRoute, .visionPrescription, .activitySummary, .audiogram] + ObjectType.clinicalTypes + [.electrocardiogram, .heartbeatSeries, .stateOfMind, .userAnnotatedMedication, .medicationDoseEvent]
    }
}

/// What an export wrote.
public struct ExportSummary: Sendable, Codable {
    public var objects: [String: Int] = [:]
    public var characteristics = 0
    public var associations = 0
    /// Types whose source order was written.
    public var sourceOrders = 0
    public var attachments = 0
    public var seconds = 0.0
    public init() {}
}

extension HealthStore {
    /// The sources of each type that has more than one, highest priority first (statistics
    /// merge overlapping samples of several sources by that order), for the types an export
    /// walks. Only the owner may read the order: empty for an app.
    func sourceOrders() async throws -> [(type: ObjectType, sources: [Source])] {
        var orders: [(type: ObjectType, sources: [Source])] = []
        for type in LedgerLines.exportedTypes {
            let sources: [Source]
            do {
                sources = try await sourcePriority(for: type)
            } catch let error as RPCError where error.code == .permissionDenied {
                return []
            }
            if sources.count > 1 { orders.append((type, sources)) }
        }
        return orders
    }
}

/// Writes every object the caller may read as ``LedgerLines``.
public struct LedgerLinesExporter {
    public let store: HealthStore

    public init(store: HealthStore) { self.store = store }

    public func export(ledgerID: String, to output: LineWriter) async throws -> ExportSummary {
        let started = ContinuousClock.now
        var summary = ExportSummary()
        try output.json([
            "kind": "header", "format": LedgerLines.format, "version": LedgerLines.version, "ledger": ledgerID,
            "exportedAt": Date().formatted(.iso8601),
        ])
        let characteristicTypes = TypeCatalogue.characteristicTypes.compactMap { try? ObjectType($0) }
        for (type, value) in zip(characteristicTypes, try await store.characteristics(characteristicTypes)) {
            guard let value, !value.isNotSet else { continue }
            let text: Any = switch value {
            case .dateOfBirth(let year, let month, let day): String(format: "%04d-%02d-%02d", year, month, day)
            default: value.rawValue ?? 0
            }
            try output.json(["kind": "characteristic", "type": type.identifier, "value": text])
            summary.characteristics += 1
        }
        // Members are written inside their correlation, not again on their own.
        var members = Set<UUID>()
        // The sample types the ledger holds samples of: those a workout's members can be.
        var sampleTypes: [ObjectType] = []
        var workouts: [UUID] = []
        var prescriptions: [UUID] = []
        for type in LedgerLines.exportedTypes {
            for try await batch in try await store.results(for: SampleQueryDescriptor(type: type, batchSize: 1000)) {
                if !batch.isEmpty, [.quantity, .category].contains(type.family), sampleTypes.last != type { sampleTypes.append(type) }
                for object in batch {
                    if case .correlation(let correlation) = object { members.formUnion(correlation.objects.map(\.uuid)) }
                    if members.contains(object.uuid) { continue }
                    var line: [String: Any] = ["kind": "object", "object": try Self.json(Healthledger_V1_HealthObject(object))]
                    if case .workoutRoute(let route) = object {
                        let locations = try await store.routeLocations(of: route.uuid).all()
                        line["locations"] = try Self.json(Healthledger_V1_RouteLocations(locations))
                    }
                    if case .workout = object { workouts.append(object.uuid) }
                    if case .visionPrescription = object { prescriptions.append(object.uuid) }
                    try output.json(line)
                    summary.objects[type.identifier, default: 0] += 1
                }
            }
        }
        // Each type's sources by priority: a copy saves them in its own order (the owner's
        // first, then the order of their first saves), which would merge overlapping samples
        // differently.
        for (type, sources) in try await store.sourceOrders() {
            try output.json(["kind": "sourceOrder", "type": type.identifier, "sources": sources.map(\.bundleIdentifier)])
            summary.sourceOrders += 1
        }
        // A workout's associated samples may be of any sample type, whenever they were taken:
        // each type the ledger holds is asked for the workout's members.
        for workout in workouts {
            var samples: [String] = []
            for type in sampleTypes {
                let query = SampleQueryDescriptor(type: type, predicate: .predicateForObjects(from: workout))
                samples += try await query.result(for: store).map(\.uuid.uuidString)
            }
            guard !samples.isEmpty else { continue }
            try output.json(["kind": "association", "workout": workout.uuidString, "samples": samples])
            summary.associations += 1
        }
        for object in try await objectsWithAttachments(otherwise: prescriptions) {
            let attachments: [Attachment]
            do {
                attachments = try await store.attachments(of: object)
            } catch let error as RPCError where error.code == .notFound {
                continue  // deleted since its attachment was added
            }
            for attachment in attachments {
                let (info, data) = try await store.data(of: attachment.uuid)
                try output.json([
                    "kind": "attachment",
                    "attachment": [
                        "uuid": info.uuid.uuidString, "object": info.objectUUID.uuidString, "name": info.name, "contentType": info.contentType,
                        "metadata": info.metadata,
                    ],
                    "data": Data(data).base64EncodedString(),
                ])
                summary.attachments += 1
            }
        }
        try output.json(["kind": "end", "objects": summary.objects.values.reduce(0, +)])
        try output.flush()
        summary.seconds = seconds(since: started)
        return summary
    }

    /// The objects that hold attachments, in the order the attachments were first added:
    /// the owner reads them off the audit trail (any object may hold attachments); an app,
    /// which may not read the trail, gets those of `candidates`.
    private func objectsWithAttachments(otherwise candidates: [UUID]) async throws -> [UUID] {
        guard try await store.ping().principal == "owner" else { return candidates }
        var objects: [UUID] = []
        var seen = Set<UUID>()
        for try await batch in try await store.audit(AuditFilter(kinds: [.attachmentAdded]), batchSize: 5000) {
            for event in batch.events {
                if let object = event.objectUUID, seen.insert(object).inserted { objects.append(object) }
            }
        }
        return objects
    }

    static func json(_ message: some SwiftProtobuf.Message) throws -> [String: Any] {
        let data = try message.jsonUTF8Data()
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }
}

/// Reads ``LedgerLines`` into a ledger through the server, as its owner: the same UUIDs,
/// sources, devices and metadata, so queries and statistics answer as they did.
public struct LedgerLinesImporter {
    public let store: HealthStore
    public var batchSize = 1000

    public init(store: HealthStore) { self.store = store }

    public func run(_ url: URL) async throws -> ImportSummary {
        let principal = try await store.ping().principal
        guard principal == "owner" else {
            throw RPCError(.permissionDenied, "an import records other sources' data, which only the owner may do; this credential is \(principal)'s")
        }
        let started = ContinuousClock.now
        var summary = ImportSummary()
        var batch: [(HealthObject, Int)] = []
        var sawHeader = false
        var sawEnd = false
        // Objects refused (by the server, or here as invalid): associations leave them out
        // (naming one would fail the whole association).
        var refused = Set<UUID>()
        func flush() async throws {
            guard !batch.isEmpty else { return }
            func count(_ result: SaveResult, of object: HealthObject) {
                if case .ignored = result.disposition { summary.alreadyPresent += 1 } else {
                    summary.imported[object.objectType.identifier, default: 0] += 1
                }
            }
            // The whole batch in one call first, as a fresh import's batches go in.
            var refusedWhole = false
            do {
                for (index, result) in try await store.save(batch.map(\.0)).enumerated() { count(result, of: batch[index].0) }
                batch.removeAll()
                return
            } catch let error as RPCError where error.code == .alreadyExists {
                // A re-import finds most objects stored already (the same UUID), which refuses
                // the whole batch: those found by asking for the batch's UUIDs are counted and
                // left out, so the batch is not split object by object to find them. The rest
                // is tried whole.
                let stored = try await storedUUIDs(of: batch.map(\.0))
                summary.alreadyPresent += batch.count { stored.contains($0.0.uuid) }
                batch.removeAll { stored.contains($0.0.uuid) }
            } catch let error as RPCError where error.isRefusalOfTheRequest {
                refusedWhole = true
            }
            try await store.saveIsolatingRefusals(batch.map(\.0), refusedWhole: refusedWhole) { index, result in
                count(result, of: batch[index].0)
            } refused: { index, error in
                // An object the ledger holds already (the same UUID) is a re-import, not a refusal.
                if error.code == .alreadyExists {
                    summary.alreadyPresent += 1
                } else {
                    refused.insert(batch[index].0.uuid)
                    if case .correlation(let correlation) = batch[index].0 { refused.formUnion(correlation.objects.map(\.uuid)) }
                    record(&summary, line: batch[index].1, kind: .refusedByServer, reason: error.message)
                }
            }
            batch.removeAll()
        }
        var lineNumber = 0
        for try await read in LineReader(url: url) {
            lineNumber += 1
            if read == .text("") { continue }
            summary.elements += 1
            guard case .text(let text) = read else {
                guard sawHeader else {
                    throw ExportArchiveError("\(url.path) is not a HealthLedger export (its first line is no \(LedgerLines.format) header)")
                }
                record(&summary, line: lineNumber, kind: .unparsableValue, reason: "the line is longer than \(LineReader.maximumLength >> 20) MiB")
                continue
            }
            let parsed: Any
            do { parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) } catch {
                guard sawHeader else {
                    throw ExportArchiveError("\(url.path) is not a HealthLedger export (its first line is no \(LedgerLines.format) header)")
                }
                record(&summary, line: lineNumber, kind: .unparsableValue, reason: "not valid JSON (\(Self.jsonProblem(error)))")
                continue
            }
            guard let line = parsed as? [String: Any], let kind = line["kind"] as? String else {
                guard sawHeader else {
                    throw ExportArchiveError("\(url.path) is not a HealthLedger export (its first line is no \(LedgerLines.format) header)")
                }
                record(&summary, line: lineNumber, kind: .unparsableValue, reason: "not a JSON object with a kind")
                continue
            }
            if !sawHeader {
                guard kind == "header", line["format"] as? String == LedgerLines.format else {
                    throw ExportArchiveError("\(url.path) is not a HealthLedger export (its first line is no \(LedgerLines.format) header)")
                }
                guard (line["version"] as? Int) == LedgerLines.version else {
                    throw ExportArchiveError("\(url.path) is export version \(line["version"] ?? "?"); this reader knows version \(LedgerLines.version)")
                }
                sawHeader = true
                continue
            }
            do {
                switch kind {
                case "object":
                    guard let object = line["object"] else { throw ExportArchiveError("the line has no object") }
                    // Checked first: on Linux, JSONSerialization stops the process on anything else.
                    guard object is [String: Any] else { throw ExportArchiveError("the line's object is not a JSON object (a HealthObject's fields)") }
                    let message = try Healthledger_V1_HealthObject(jsonUTF8Data: try JSONSerialization.data(withJSONObject: object))
                    let model: HealthObject
                    do {
                        model = try message.model()
                    } catch {
                        if let uuid = UUID(bytes: message.uuid) { refused.insert(uuid) }
                        throw error
                    }
                    if case .workoutRoute(let route) = model {
                        try await flush()
                        try await saveRoute(route, locations: line["locations"], summary: &summary)
                    } else {
                        batch.append((model, lineNumber))
                        if batch.count >= batchSize { try await flush() }
                    }
                case "characteristic":
                    try await flush()
                    guard let name = line["type"] as? String, let type = try? ObjectType(name) else { throw ExportArchiveError("unknown characteristic type") }
                    let characteristic: Characteristic
                    if let text = line["value"] as? String {
                        let parts = text.split(separator: "-").compactMap { Int($0) }
                        guard parts.count == 3 else { throw ExportArchiveError("'\(text)' is not a date") }
                        characteristic = .dateOfBirth(year: parts[0], month: parts[1], day: parts[2])
                    } else {
                        guard let raw = line["value"] as? Int else {
                            throw ExportArchiveError("the characteristic's value \(line["value"].map { "\($0)" } ?? "(none)") is not a whole number nor a date")
                        }
                        characteristic = try Characteristic(type, rawValue: raw)
                    }
                    try characteristic.validate()
                    let current = try await store.characteristics([type]).first ?? nil
                    if current == characteristic { summary.alreadyPresent += 1 } else {
                        try await store.setCharacteristic(of: type, to: characteristic)
                        summary.imported["characteristics", default: 0] += 1
                    }
                case "sourceOrder":
                    try await flush()
                    guard let name = line["type"] as? String, let type = try? ObjectType(name), let sources = line["sources"] as? [String] else {
                        throw ExportArchiveError("a source order needs a known type and its sources")
                    }
                    summary.countSourceOrder(changed: try await store.orderSources(of: type, as: sources))
                case "association":
                    try await flush()
                    guard let workout = (line["workout"] as? String).flatMap(UUID.init(uuidString:)),
                        let samples = (line["samples"] as? [String])?.compactMap(UUID.init(uuidString:)), !samples.isEmpty
                    else { throw ExportArchiveError("an association needs a workout and samples") }
                    let known = refused.isEmpty ? samples : samples.filter { !refused.contains($0) }
                    try await store.associate(known, with: workout)
                    summary.associatedWithWorkouts += known.count
                case "attachment":
                    try await flush()
                    guard let info = line["attachment"] as? [String: Any], let object = (info["object"] as? String).flatMap(UUID.init(uuidString:)),
                        let name = info["name"] as? String, let contentType = info["contentType"] as? String,
                        let data = (line["data"] as? String).flatMap({ Data(base64Encoded: $0) })
                    else { throw ExportArchiveError("an attachment needs object, name, contentType and data") }
                    // An attachment gets a new UUID when added: one of the same name and bytes is
                    // the same attachment.
                    var present = false
                    for existing in try await store.attachments(of: object) where existing.name == name && existing.size == data.count {
                        if try await store.data(of: existing.uuid).1 == [UInt8](data) {
                            present = true
                            break
                        }
                    }
                    if present { summary.alreadyPresent += 1 } else {
                        _ = try await store.addAttachment(
                            to: object, name: name, contentType: contentType, data: [UInt8](data), metadata: info["metadata"] as? [String: String] ?? [:])
                        summary.imported["attachments", default: 0] += 1
                    }
                case "end":
                    sawEnd = true
                default:
                    summary.skip("line kind '\(kind)'")
                }
            } catch let error as RPCError where !error.isRefusalOfTheRequest && error.code != .permissionDenied {
                throw error
            } catch let error as RPCError {
                record(&summary, line: lineNumber, kind: .refusedByServer, reason: error.message)
            } catch {
                record(&summary, line: lineNumber, kind: .invalidObject, reason: (error as? HealthError)?.message ?? "\(error)")
            }
        }
        try await flush()
        if !sawHeader { throw ExportArchiveError("\(url.path) is empty") }
        if !sawEnd { summary.error = "the export ends without its end line: it was cut short; everything before that point was imported" }
        summary.seconds = seconds(since: started)
        return summary
    }

    /// Which of `objects` the ledger holds already, asked type by type by UUID.
    private func storedUUIDs(of objects: [HealthObject]) async throws -> Set<UUID> {
        var stored = Set<UUID>()
        for (type, group) in Dictionary(grouping: objects, by: \.objectType) {
            let predicate = ObjectPredicate.predicateForObjects(with: Set(group.map(\.uuid)))
            stored.formUnion(try await SampleQueryDescriptor(type: type, predicate: predicate).result(for: store).map(\.uuid))
        }
        return stored
    }

    private func saveRoute(_ route: WorkoutRoute, locations: Any?, summary: inout ImportSummary) async throws {
        // Checked first: on Linux, JSONSerialization stops the process on anything but an object or array.
        guard locations == nil || locations is [String: Any] else { throw ExportArchiveError("the route's locations are not a JSON object") }
        let data = try JSONSerialization.data(withJSONObject: locations ?? [String: Any]())
        let points = try Healthledger_V1_RouteLocations(jsonUTF8Data: data).model()
        guard !points.isEmpty else { throw ExportArchiveError("the route has no locations") }
        guard points.count <= ObjectLimits.maximumRouteLocations else {
            throw ExportArchiveError("the route has \(points.count) locations; a route holds at most \(ObjectLimits.maximumRouteLocations)")
        }
        // A route builder names its route anew, so a route without a sync identifier is found
        // again by what it is: the workout's route of the same source, span and size.
        if route.metadata[MetadataKey.syncIdentifier] == nil {
            let query = SampleQueryDescriptor(type: .workoutRoute, predicate: .predicateForObjects(from: route.workoutUUID))
            let stored = try await query.result(for: store).compactMap(\.workoutRoute)
            if stored.contains(where: {
                $0.sourceRevision.source == route.sourceRevision.source && $0.startDate == route.startDate && $0.endDate == route.endDate
                    && $0.locationCount == points.count
            }) {
                summary.alreadyPresent += 1
                return
            }
        }
        let finished = try await store.saveRoute(
            points, of: route.workoutUUID, metadata: route.metadata, sourceRevision: route.sourceRevision, device: route.device)
        if case .ignored = finished.disposition { summary.alreadyPresent += 1 } else { summary.imported[ObjectType.workoutRoute.identifier, default: 0] += 1 }
    }

    /// What JSONSerialization found wrong with a line, in its own words when it has some.
    static func jsonProblem(_ error: any Error) -> String {
        let described = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
        return described.map { $0.replacingOccurrences(of: "\n", with: " ") } ?? "a syntax error, or a number out of range"
    }

    private func record(_ summary: inout ImportSummary, line: Int, kind: RejectionKind, reason: String) {
        summary.rejected[kind.rawValue, default: 0] += 1
        if summary.rejections.count < ImportSummary.detailLimit {
            summary.rejections.append(.init(line: line, element: "line", kind: kind.rawValue, reason: reason))
        }
    }
}

/// Buffered output of lines to a file or standard output.
public final class LineWriter {
    private let handle: FileHandle
    private var buffer = Data()

    public init(handle: FileHandle) { self.handle = handle }

    public func json(_ value: [String: Any]) throws {
        buffer.append(try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes]))
        buffer.append(0x0A)
        if buffer.count >= 1 << 20 { try flush() }
    }

    public func flush() throws {
        try handle.write(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}

/// The lines of a file, read 1 MiB at a time, empty ones included (so that a reader can
/// count lines). A line longer than ``maximumLength`` is not held: it is read past and
/// given as ``Line/tooLong``, so a file without line breaks cannot fill memory.
package struct LineReader: AsyncSequence {
    package enum Line: Equatable {
        case text(String)
        case tooLong
    }
    package typealias Element = Line
    /// Longer than any line an export writes: a route of 200,000 locations takes about 35 MB,
    /// an attachment of 3 MiB about 4 MiB.
    package static let maximumLength = 64 << 20
    let url: URL

    package init(url: URL) { self.url = url }

    package struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle?
        /// Bytes read; those before `start` are consumed.
        var buffer: [UInt8] = []
        var start = 0
        /// Bytes after `start` already searched for a line break.
        var searched = 0
        var done = false
        /// Inside a line longer than the limit: its bytes are dropped as they come.
        var discarding = false

        /// The index of the first line break at or after `from`.
        static func lineBreak(in buffer: [UInt8], from: Int) -> Int? {
            buffer.withUnsafeBytes { bytes in
                guard from < bytes.count, let base = bytes.baseAddress,
                    let found = memchr(base + from, 0x0A, bytes.count - from)
                else { return nil }
                return base.distance(to: UnsafeRawPointer(found))
            }
        }

        package mutating func next() async throws -> Line? {
            guard let handle else { throw ExportArchiveError("cannot open the export") }
            while true {
                if let newline = Self.lineBreak(in: buffer, from: start + searched) {
                    let line = start..<newline
                    start = newline + 1
                    searched = 0
                    if discarding || line.count > LineReader.maximumLength {
                        discarding = false
                        return .tooLong
                    }
                    return .text(String(decoding: buffer[line], as: UTF8.self))
                }
                searched = buffer.count - start
                if searched > LineReader.maximumLength {
                    discarding = true
                    buffer.removeAll(keepingCapacity: true)
                    (start, searched) = (0, 0)
                }
                if done {
                    if discarding {
                        discarding = false
                        return .tooLong
                    }
                    guard start < buffer.count else { return nil }
                    defer { (buffer, start, searched) = ([], 0, 0) }
                    return .text(String(decoding: buffer[start...], as: UTF8.self))
                }
                if start > 0, start >= buffer.count / 2 {
                    buffer.removeFirst(start)
                    start = 0
                }
                let more = try handle.read(upToCount: 1 << 20) ?? Data()
                if more.isEmpty { done = true } else { buffer.append(contentsOf: more) }
            }
        }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: FileHandle(forReadingAtPath: url.path)) }
}
