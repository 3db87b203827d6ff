import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import LedgerSchema

/// What an import did, counted.
public struct ImportSummary: Sendable, Codable {
    /// Objects stored, by kind (`samples`, `correlations`, `workouts`, `routes`,
    /// `visionPrescriptions`, `characteristics`), and `sourceOrders`: types whose sources
    /// were put in the export's order.
    public var imported: [String: Int] = [:]
    /// Objects the ledger already held (the same sync identifier and version), and source
    /// orders already in place: a re-import.
    public var alreadyPresent = 0
    /// Elements not imported because the ledger does not hold them, by reason.
    public var skipped: [String: Int] = [:]
    /// Records refused, by ``RejectionKind``.
    public var rejected: [String: Int] = [:]
    /// The first rejections, with their lines (at most ``ImportSummary/detailLimit``).
    public var rejections: [Rejection] = []
    /// Samples associated with their workouts (from the workouts' statistics types).
    public var associatedWithWorkouts = 0
    /// The elements read under `HealthData` (whatever became of each: imported, skipped or
    /// rejected; `Me` is one, however many characteristics it holds), and the electrocardiogram
    /// files beside `export.xml`.
    public var elements = 0
    public var seconds = 0.0
    /// Why the import stopped early (a truncated or malformed file), after committing
    /// everything complete before that point.
    public var error: String?

    public struct Rejection: Sendable, Codable, Hashable {
        public var line: Int
        public var element: String
        public var kind: String
        public var reason: String
    }

    public static let detailLimit = 1000
    /// The most distinct reasons ``skipped`` lists; the count of any further reason goes to
    /// ``otherReasons``, so that a file of endless distinct elements keeps the summary small.
    public static let reasonLimit = 1000
    public static let otherReasons = "other reasons (more than \(reasonLimit) distinct ones)"

    public init() {}

    /// Counts a source order the import applied (`changed`), or found in place.
    mutating func countSourceOrder(changed: Bool) {
        if changed { imported["sourceOrders", default: 0] += 1 } else { alreadyPresent += 1 }
    }

    /// Counts one element skipped for `reason`.
    public mutating func skip(_ reason: String) {
        if skipped[reason] == nil, skipped.count >= Self.reasonLimit {
            skipped[Self.otherReasons, default: 0] += 1
        } else {
            skipped[reason, default: 0] += 1
        }
    }

    public var importedTotal: Int { imported.values.reduce(0, +) }
    public var skippedTotal: Int { skipped.values.reduce(0, +) }
    public var rejectedTotal: Int { rejected.values.reduce(0, +) }
}

/// Progress of a running import, for a progress bar.
public struct ImportProgress: Sendable {
    public var elements: Int
    public var bytesRead: UInt64
    public var totalBytes: UInt64
    public var elapsed: Double

    public var fraction: Double { totalBytes == 0 ? 0 : min(1, Double(bytesRead) / Double(totalBytes)) }
    public var elementsPerSecond: Double { elapsed > 0 ? Double(elements) / elapsed : 0 }
}

/// Imports an Apple Health export into a ledger through a running server, as its owner.
///
/// The export is parsed on a thread of its own while batches are saved (several in
/// flight), so memory stays flat whatever the file's size: what is held at once is a few
/// batches, the keys of correlation members, and the workouts still to be linked to their
/// samples. Samples of the types a correlation holds are set aside in a temporary file until
/// the end, because the export lists a correlation's members twice (inside it and at top
/// level, usually before it); those that turn out to be members are not saved again.
///
/// ```swift
/// let summary = try await AppleHealthImporter(store: store, archive: try ExportArchive(url: url)).run()
/// ```
public final class AppleHealthImporter {
    public let store: HealthStore
    public let archive: ExportArchive
    public var batchSize = 5000
    public var batchesInFlight = 3
    public var progress: (@Sendable (ImportProgress) -> Void)?

    private var summary = ImportSummary()
    private var pending = Batch()
    private var inFlight: [Task<BatchOutcome, any Error>] = []
    private var memberKeys = Set<String>()
    private var characteristics: [Characteristic] = []
    /// The source orders the export carries (HealthLedger's own exports), by type in the
    /// order of their first elements, each type's sources highest priority first.
    private var sourceOrders: [(type: ObjectType, sources: [String])] = []
    private var workouts: [WorkoutLink] = []
    /// Where each workout of ``workouts`` is, by the UUID it was sent with.
    private var workoutIndex: [UUID: Int] = [:]
    private var deferred: DeferredSamples?
    /// Set-aside records not saved because the file ended early (see ``saveDeferred(fileEndedEarly:)``).
    private var undecided = 0
    private let started = ContinuousClock.now

    public init(store: HealthStore, archive: ExportArchive) {
        self.store = store
        self.archive = archive
    }

    /// Runs the import to the end of the file.
    ///
    /// - Returns: the summary; its `error` is set when the file ended early or was not XML
    ///   (what came before was committed).
    /// - Throws: ``RPCError`` when the server fails (for example the connection is lost);
    ///   batches already answered stay committed, and a re-run adds nothing twice.
    public func run() async throws -> ImportSummary {
        // Recording other sources' data is the owner's: an app's saves are always its own.
        let principal = try await store.ping().principal
        guard principal == "owner" else {
            throw RPCError(.permissionDenied, "an import records other sources' data, which only the owner may do; this credential is \(principal)'s")
        }
        deferred = try DeferredSamples()
        defer { deferred?.remove() }
        let channel = ItemChannel(capacity: 8)
        let archive = self.archive
        let thread = Thread {
            var items: [AppleHealthItem] = []
            let reader = AppleHealthReader { items.append($0) }
            let parser = XMLStreamParser(handler: reader, documentName: "export.xml")
            var bytes: UInt64 = 0
            do {
                try archive.readXML { chunk in
                    try parser.feed(chunk)
                    bytes += UInt64(chunk.count)
                    if !items.isEmpty || bytes == archive.xmlSize {
                        // Handed over as the only reference: the importer then moves each item
                        // out of the list without copying the list first.
                        let chunk = items
                        items = []
                        items.reserveCapacity(chunk.count)
                        guard channel.put(chunk, read: (bytes, reader.elementsRead)) else { throw ArchiveReadStop() }
                    }
                }
                try parser.finish()
                _ = channel.put(items, read: (bytes, reader.elementsRead))
                channel.close(error: nil)
            } catch is ArchiveReadStop {
                channel.close(error: nil)
            } catch {
                _ = channel.put(items, read: (bytes, reader.elementsRead))
                channel.close(error: error)
            }
        }
        thread.stackSize = 8 << 20
        thread.start()
        do {
            while let (received, read) = await channel.next() {
                // Each item is moved out of the list (swapped with an empty one), not copied:
                // a copy retains every string of its object once more.
                var items = consume received
                for index in items.indices {
                    var item = AppleHealthItem.skipped(element: "", reason: "", line: 0)
                    swap(&item, &items[index])
                    try await handle(consume item)
                }
                summary.elements = read.elements
                progress?(ImportProgress(elements: summary.elements, bytesRead: read.bytes, totalBytes: archive.xmlSize, elapsed: elapsed))
            }
            try await importElectrocardiograms()
            try await flush()
            try await drain()
            try await saveDeferred(fileEndedEarly: channel.failure != nil)
            try await orderSources()
            try await linkWorkouts()
            try await saveCharacteristics()
        } catch {
            channel.cancel()
            for task in inFlight { _ = try? await task.value }
            throw error
        }
        if let error = channel.failure {
            let held = undecided == 0 ? "" : "; \(undecided) records of the types a correlation holds were not, since their correlations may be in the missing part"
            summary.error = switch error {
            case let error as XMLStreamError:
                switch error.kind {
                case .empty: "export.xml is empty: nothing was imported"
                case .notXML: "export.xml is not XML (\(error.message)): nothing was imported"
                case .endedEarly: "the export is not complete XML (\(error)); everything before that point was imported\(held)"
                case .malformed: "the export is not well-formed XML (\(error)); everything before that point was imported\(held)"
                }
            default: "\(error)\(held)"
            }
        }
        summary.seconds = elapsed
        return summary
    }

    private var elapsed: Double { seconds(since: started) }

    /// The reason counted for a record of a type a correlation holds, when the file ended
    /// before it could be told whether a correlation lists it.
    public static let undecidedMember = "Record: the file ended before its correlations, so whether one lists it is unknown (import the complete export)"

    // MARK: - Items

    private func handle(_ item: consuming AppleHealthItem) async throws {
        switch consume item {
        case .characteristic(let characteristic, _):
            characteristics.removeAll { $0.objectType == characteristic.objectType }
            characteristics.append(characteristic)
        case .sample(let object, let key, let mayBeMember, let line):
            if mayBeMember {
                try deferred?.append(object, key: key, line: line)
            } else {
                try await add(object, kind: "samples", line: line)
            }
        case .correlation(let correlation, let keys, let line):
            memberKeys.formUnion(keys)
            try await add(.correlation(correlation), kind: "correlations", line: line)
        case .workout(let workout, let routes, let types, let line):
            if !routes.isEmpty { pending.routes.append((workout.uuid, routes)) }
            if !types.isEmpty {
                workoutIndex[workout.uuid] = workouts.count
                workouts.append(WorkoutLink(workout: workout, types: types))
            }
            try await add(.workout(workout), kind: Batch.workoutKind, line: line)
        case .visionPrescription(let prescription, let line):
            try await add(.visionPrescription(prescription), kind: "visionPrescriptions", line: line)
        case .activitySummary(let activity, let line):
            try await add(.activitySummary(activity), kind: "activitySummaries", line: line)
        case .audiogram(let audiogram, let line):
            try await add(.audiogram(audiogram), kind: "audiograms", line: line)
        case .heartbeatSeries(let series, let line):
            try await add(.heartbeatSeries(series), kind: "heartbeatSeries", line: line)
        case .stateOfMind(let state, let line):
            try await add(.stateOfMind(state), kind: "statesOfMind", line: line)
        case .medication(let medication, let line):
            try await add(.userAnnotatedMedication(medication), kind: "medications", line: line)
        case .medicationDose(let dose, let line):
            try await add(.medicationDoseEvent(dose), kind: "medicationDoses", line: line)
        case .clinicalRecord(var record, let path, let line):
            // Its resource, the JSON file beside export.xml, kept byte for byte; its display
            // name, unless the element gives one, from the resource.
            let element = "ClinicalRecord"
            do {
                guard let data = try archive.file(at: path, limit: ClinicalRecord.maximumResourceBytes) else {
                    return reject(element: element, kind: .resourceFile, reason: "the export holds no file \(path)", line: line)
                }
                record.fhirResource = try FHIRResource(
                    json: Array(data), fhirVersion: record.fhirResource.fhirVersion, sourceURL: record.fhirResource.sourceURL)
                if record.displayName.isEmpty { record.displayName = record.fhirResource.suggestedDisplayName }
                try HealthObject.clinicalRecord(record).validate()
            } catch let error as HealthError {
                return reject(element: element, kind: .invalidObject, reason: "\(path): \(error.message)", line: line)
            } catch {
                return reject(element: element, kind: .resourceFile, reason: "\(path): \(error)", line: line)
            }
            try await add(.clinicalRecord(record), kind: "clinicalRecords", line: line)
        case .sourcePriority(let type, let source, _):
            if let index = sourceOrders.firstIndex(where: { $0.type == type }) {
                sourceOrders[index].sources.append(source.bundleIdentifier)
            } else {
                sourceOrders.append((type, [source.bundleIdentifier]))
            }
        case .skipped(let element, let reason, _):
            summary.skip("\(element): \(reason)")
        case .rejected(let element, let kind, let reason, let line):
            reject(element: element, kind: kind, reason: reason, line: line)
        }
    }

    /// The recordings in `electrocardiograms/*.csv` beside `export.xml` (``ElectrocardiogramCSV``),
    /// each with a sync identifier derived from `Electrocardiogram`, its source name and
    /// start, version 1. A file that is not a recording is rejected, named, with line 0.
    private func importElectrocardiograms() async throws {
        for path in try archive.files(in: "electrocardiograms", suffix: ".csv") {
            summary.elements += 1
            var recording: Electrocardiogram
            do {
                guard let data = try archive.file(at: path, limit: 16 << 20) else { continue }
                recording = try ElectrocardiogramCSV.read(data)
                if recording.metadata[MetadataKey.syncIdentifier] == nil {
                    recording.metadata[MetadataKey.syncIdentifier] = .string(
                        AppleHealthReader.key(
                            ["Electrocardiogram", recording.sourceRevision.source.name, AppleHealthReader.seconds(recording.startDate)],
                            start: recording.startDate))
                    recording.metadata[MetadataKey.syncVersion] = .number(1)
                }
                try HealthObject.electrocardiogram(recording).validate()
            } catch let failure as ElectrocardiogramCSV.ReadFailure {
                reject(element: path, kind: .invalidObject, reason: failure.description, line: 0)
                continue
            } catch let error as HealthError {
                reject(element: path, kind: .invalidObject, reason: error.message, line: 0)
                continue
            } catch {
                reject(element: path, kind: .resourceFile, reason: "\(error)", line: 0)
                continue
            }
            try await add(.electrocardiogram(recording), kind: "electrocardiograms", line: 0)
        }
    }

    private func reject(element: String, kind: RejectionKind, reason: String, line: Int) {
        summary.rejected[kind.rawValue, default: 0] += 1
        if summary.rejections.count < ImportSummary.detailLimit {
            summary.rejections.append(.init(line: line, element: element, kind: kind.rawValue, reason: reason))
        }
    }

    private func add(_ object: consuming HealthObject, kind: String, line: Int) async throws {
        pending.objects.append(object)
        pending.lines.append(line)
        pending.kinds.append(kind)
        if pending.objects.count >= batchSize { try await flush() }
    }

    // MARK: - Batches

    /// Starts saving the pending batch; waits for the oldest when enough are in flight.
    private func flush() async throws {
        guard !pending.objects.isEmpty else { return }
        let batch = pending
        pending = Batch()
        let store = self.store
        let archive = self.archive
        inFlight.append(Task { [batch, store, archive] in try await BatchSaver.save(batch, store: store, archive: archive) })
        while inFlight.count >= batchesInFlight { try await absorb(inFlight.removeFirst()) }
    }

    private func drain() async throws {
        while !inFlight.isEmpty { try await absorb(inFlight.removeFirst()) }
    }

    private func absorb(_ task: Task<BatchOutcome, any Error>) async throws {
        let outcome = try await task.value
        for (kind, count) in outcome.imported { summary.imported[kind, default: 0] += count }
        summary.alreadyPresent += outcome.alreadyPresent
        for rejection in outcome.rejections { reject(element: rejection.element, kind: rejection.kind, reason: rejection.reason, line: rejection.line) }
        for (element, reason) in outcome.skipped { summary.skip("\(element): \(reason)") }
        for (local, stored) in outcome.storedWorkouts {
            if let index = workoutIndex[local] { workouts[index].storedUUID = stored }
        }
    }

    // MARK: - After the file

    /// Saves the set-aside samples that are not members of a correlation.
    ///
    /// When the file ended early, the correlations that would have claimed some of them may
    /// be in the part that is missing: saving those records on their own would add them a
    /// second time beside their correlation once the complete export is imported (or when it
    /// already was). So only then, the records no correlation claimed are skipped, not saved.
    private func saveDeferred(fileEndedEarly: Bool) async throws {
        guard let deferred else { return }
        try deferred.finishWriting()
        try await deferred.forEach { object, key, line in
            if memberKeys.contains(key) {
                summary.skip("Record: listed again inside its correlation")
                return
            }
            if fileEndedEarly {
                summary.skip(Self.undecidedMember)
                undecided += 1
                return
            }
            pending.objects.append(object)
            pending.lines.append(line)
            pending.kinds.append("samples")
        } flushWhenFull: { [self] in
            if pending.objects.count >= batchSize { try await flush() }
        }
        try await flush()
        try await drain()
    }

    /// Puts each type's sources in the order the export gives (once every sample is saved,
    /// since a source is ordered among those that saved the type).
    private func orderSources() async throws {
        for (type, sources) in sourceOrders { summary.countSourceOrder(changed: try await store.orderSources(of: type, as: sources)) }
    }

    /// Associates each workout with the samples its statistics summarise: those of the
    /// workout's source, of those types, within its span (HealthKit's `add(_:to:)`).
    private func linkWorkouts() async throws {
        for link in workouts {
            guard let stored = link.storedUUID else { continue }
            var uuids: [UUID] = []
            for type in link.types {
                let predicate = ObjectPredicate.andPredicate(withSubpredicates: [
                    .predicateForObjects(from: [link.workout.sourceRevision.source]),
                    .predicateForSamples(withStart: link.workout.startDate, end: link.workout.endDate, options: [.strictStartDate, .strictEndDate]),
                ])
                let query = SampleQueryDescriptor(type: type.objectType, predicate: predicate)
                uuids += try await query.result(for: store).map(\.uuid)
            }
            try await store.associate(uuids, with: stored)
            summary.associatedWithWorkouts += uuids.count
        }
    }

    /// Sets the characteristics of `Me` that differ from the ledger's (a re-import writes nothing).
    private func saveCharacteristics() async throws {
        guard !characteristics.isEmpty else { return }
        let current = try await store.characteristics(characteristics.map(\.objectType))
        for (characteristic, stored) in zip(characteristics, current) {
            guard characteristic != stored else {
                summary.alreadyPresent += 1
                continue
            }
            try await store.setCharacteristic(of: characteristic.objectType, to: characteristic)
            summary.imported["characteristics", default: 0] += 1
        }
    }
}

/// Saves batches of an import (outside the importer, so a batch runs in a task of its own).
private enum BatchSaver {
    /// Saves a batch; a batch the server refuses is split until the refused objects are
    /// found, so one bad record never costs its neighbours. Then the batch's workouts get
    /// their routes.
    static func save(_ batch: Batch, store: HealthStore, archive: ExportArchive) async throws -> BatchOutcome {
        var outcome = BatchOutcome()
        var storedUUIDs: [UUID: UUID] = [:]
        try await store.saveIsolatingRefusals(batch.objects) { index, result in
            switch result.disposition {
            case .saved, .replaced:
                outcome.imported[batch.kinds[index], default: 0] += 1
                if batch.kinds[index] == Batch.workoutKind { storedUUIDs[batch.objects[index].uuid] = result.uuid }
            case .ignored(let existing):
                outcome.alreadyPresent += 1
                if batch.kinds[index] == Batch.workoutKind { storedUUIDs[batch.objects[index].uuid] = existing }
            }
        } refused: { index, error in
            outcome.rejections.append(.init(line: batch.lines[index], element: batch.kinds[index], kind: .refusedByServer, reason: error.message))
        }
        for (local, routes) in batch.routes {
            guard let workout = storedUUIDs[local] else {
                for _ in routes { outcome.skipped.append(("WorkoutRoute", "its workout was rejected")) }
                continue
            }
            outcome.storedWorkouts.append((local, workout))
            for route in routes { try await saveRoute(route, of: workout, store: store, archive: archive, outcome: &outcome) }
        }
        return outcome
    }

    static func saveRoute(
        _ route: RouteReference, of workout: UUID, store: HealthStore, archive: ExportArchive, outcome: inout BatchOutcome
    ) async throws {
        func reject(_ kind: RejectionKind, _ reason: String) {
            outcome.rejections.append(.init(line: route.line, element: "WorkoutRoute", kind: kind, reason: reason))
        }
        let locations: [RouteLocation]
        do {
            guard let data = try archive.file(at: route.path) else { return reject(.routeFile, "the export holds no file \(route.path)") }
            locations = try GPXRoute.locations(data)
        } catch {
            let reason = "\(error)"
            return reject(.routeFile, reason.contains(route.path) ? reason : "\(route.path): \(reason)")
        }
        guard !locations.isEmpty else {
            outcome.skipped.append(("WorkoutRoute", "the route file has no points"))
            return
        }
        // Refused here rather than by the server after the upload.
        guard locations.count <= ObjectLimits.maximumRouteLocations else {
            return reject(.routeFile, "\(route.path) has \(locations.count) points; a route holds at most \(ObjectLimits.maximumRouteLocations)")
        }
        var metadata = route.metadata
        if metadata[MetadataKey.syncIdentifier] == nil {
            metadata[MetadataKey.syncIdentifier] = .string(AppleHealthReader.key(["WorkoutRoute", workout.uuidString, route.path], start: nil))
            metadata[MetadataKey.syncVersion] = .number(1)
        }
        do {
            let finished = try await store.saveRoute(locations, of: workout, metadata: metadata, sourceRevision: route.sourceRevision, device: route.device)
            if case .ignored = finished.disposition { outcome.alreadyPresent += 1 } else { outcome.imported["routes", default: 0] += 1 }
        } catch let error as RPCError where error.isRefusalOfTheRequest {
            reject(.refusedByServer, error.message)
        }
    }
}

private struct Batch: Sendable {
    /// The kind of a workout, the one object whose stored UUID the import needs later (to
    /// attach its routes and its samples).
    static let workoutKind = "workouts"

    var objects: [HealthObject] = []
    var lines: [Int] = []
    var kinds: [String] = []
    /// Routes of the batch's workouts, with the workout's UUID in the batch, in file order.
    var routes: [(workout: UUID, routes: [RouteReference])] = []
}

private struct BatchOutcome: Sendable {
    struct Refusal: Sendable {
        var line: Int
        var element: String
        var kind: RejectionKind
        var reason: String
    }
    var imported: [String: Int] = [:]
    var alreadyPresent = 0
    var rejections: [Refusal] = []
    var skipped: [(String, String)] = []
    /// Workouts of the batch: the UUID sent and the UUID stored (the existing one on a re-import).
    var storedWorkouts: [(UUID, UUID)] = []
}

private struct WorkoutLink {
    var workout: Workout
    var types: [QuantityType]
    var storedUUID: UUID?
}

/// Samples set aside until the end of the file, in a temporary file: a length-prefixed
/// protobuf object, its key and its line, one after another.
private final class DeferredSamples {
    let url: URL
    private var handle: FileHandle?
    private var buffer: [UInt8] = []

    init() throws {
        url = FileManager.default.temporaryDirectory.appending(path: "healthledger-import-\(UUID().uuidString).bin")
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw ExportArchiveError("cannot create a temporary file in \(FileManager.default.temporaryDirectory.path)")
        }
        handle = try FileHandle(forWritingTo: url)
    }

    func append(_ object: HealthObject, key: String, line: Int) throws {
        let bytes = object.encodedBytes()
        let record = [UInt8](key.utf8)
        for value in [UInt64(bytes.count), UInt64(record.count), UInt64(line)] {
            withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
        }
        buffer += bytes
        buffer += record
        if buffer.count >= 1 << 20 { try write() }
    }

    private func write() throws {
        try handle?.write(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    func finishWriting() throws {
        try write()
        try handle?.close()
        handle = nil
    }

    /// Reads the samples back in order.
    func forEach(
        _ body: (HealthObject, String, Int) throws -> Void, flushWhenFull: () async throws -> Void
    ) async throws {
        let reader = try FileHandle(forReadingFrom: url)
        defer { try? reader.close() }
        var data = Data()
        var offset = 0
        func need(_ count: Int) throws -> Bool {
            while data.count - offset < count {
                guard let more = try reader.read(upToCount: max(1 << 20, count)), !more.isEmpty else { return false }
                data = data.subdata(in: offset..<data.count) + more
                offset = 0
            }
            return true
        }
        func number(at position: Int) -> Int {
            var value: UInt64 = 0
            for index in 0..<8 { value |= UInt64(data[data.startIndex + position + index]) << (8 * index) }
            return Int(value)
        }
        while try need(24) {
            let (objectLength, keyLength, line) = (number(at: offset), number(at: offset + 8), number(at: offset + 16))
            offset += 24
            guard try need(objectLength + keyLength) else { throw ExportArchiveError("the temporary file \(url.path) is damaged") }
            let objectBytes = data.subdata(in: (data.startIndex + offset)..<(data.startIndex + offset + objectLength))
            let key = String(decoding: data.subdata(in: (data.startIndex + offset + objectLength)..<(data.startIndex + offset + objectLength + keyLength)), as: UTF8.self)
            offset += objectLength + keyLength
            let object = try objectBytes.withUnsafeBytes { try HealthObject(serialized: $0) }
            try body(object, key, line)
            try await flushWhenFull()
        }
    }

    func remove() {
        try? handle?.close()
        try? FileManager.default.removeItem(at: url)
    }
}

/// Hands parsed items from the parsing thread to the importer, holding at most `capacity`
/// chunks: the parser blocks when the importer falls behind.
private final class ItemChannel: @unchecked Sendable {
    private let condition = NSCondition()
    /// How far the reader is when it hands a chunk over: bytes of `export.xml`, elements read.
    typealias Read = (bytes: UInt64, elements: Int)

    private var chunks: [([AppleHealthItem], Read)] = []
    private var waiter: CheckedContinuation<([AppleHealthItem], Read)?, Never>?
    private var closed = false
    private var cancelled = false
    private(set) var failure: (any Error)?
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Blocks while the channel is full. - Returns: false once the importer has cancelled.
    func put(_ items: consuming [AppleHealthItem], read: Read) -> Bool {
        condition.lock()
        while chunks.count >= capacity && !cancelled { condition.wait() }
        guard !cancelled else {
            condition.unlock()
            return false
        }
        if let waiter {
            self.waiter = nil
            condition.unlock()
            waiter.resume(returning: (items, read))
            return true
        }
        chunks.append((items, read))
        condition.unlock()
        return true
    }

    func close(error: (any Error)?) {
        condition.lock()
        closed = true
        failure = error
        let waiter = self.waiter
        self.waiter = nil
        condition.unlock()
        waiter?.resume(returning: nil)
    }

    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    func next() async -> ([AppleHealthItem], Read)? {
        await withCheckedContinuation { continuation in
            condition.lock()
            if !chunks.isEmpty {
                let chunk = chunks.removeFirst()
                condition.signal()
                condition.unlock()
                continuation.resume(returning: chunk)
            } else if closed {
                condition.unlock()
                continuation.resume(returning: nil)
            } else {
                waiter = continuation
                condition.unlock()
            }
        }
    }
}
