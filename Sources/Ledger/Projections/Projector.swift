import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

/// Applies events to the projections. The live write path and replay both go through
/// here, which is what makes a rebuild byte-identical to the live state.
/// The range of a per-object read request (microseconds; unbounded when nil).
struct ObjectReadRange {
    var type: UInt32
    var startUs: Int64?
    var endUs: Int64?
}

struct Projector {
    /// A change an event makes to the projections.
    enum Change: Sendable {
        case saved(ObjectSummary)
        /// `replacedBy`: the object that replaces it (by sync version), saved next.
        case deleted(uuid: [UInt8], reason: DeletionReason, replacedBy: [UInt8]?)
        case samplesAssociated(workout: [UInt8], samples: [[UInt8]])
        case routeLocationsAdded(route: [UInt8], chunk: UInt32)
        case credentialIssued(id: String, record: [UInt8])
        /// `effectiveUs`: from when it is refused (0: at once, from before revocations had
        /// times); `replacedBy`: a rotation's new credential.
        case credentialRevoked(id: String, effectiveUs: Int64, replacedBy: String)
        /// An app asked for (type, direction) pairs, or for per-object read of a type.
        case authorizationRequested(app: String, pairs: [(AuthorizationDirection, UInt32)], objectRead: ObjectReadRange?)
        case authorizationDecided(app: String, direction: AuthorizationDirection, type: UInt32, decision: AuthorizationDecision)
        case objectReadSelectionChanged(app: String, type: UInt32, uuids: [[UInt8]])
        case sourcePriorityChanged(type: UInt32, bundles: [String])
        /// The owner set a characteristic (nil: cleared it).
        case characteristicSet(type: UInt32, value: [UInt8]?)
        case attachmentAdded(uuid: [UInt8], object: [UInt8])
        case attachmentRemoved(uuid: [UInt8], object: [UInt8])
        /// Objects erased: each is deleted if it is stored, and leaves an erased tombstone.
        case erased([EventBody.ErasedObject])
        /// A cluster member became the ledger's primary under `epoch` (``PrimaryTerm``).
        case primaryChanged(epoch: UInt64)
        /// Events that do not touch the projections, and events whose bodies were erased
        /// (an erased object never existed for the projections, but for its erasure).
        case none
    }

    static let checkpointKey: [UInt8] = Array("applied".utf8)

    let databases: LedgerDatabases
    let units: SummaryCache

    /// The sequence and change of an event, read in place from its stored bytes (replay's
    /// hot path; tests hold it equal to SwiftProtobuf's decoding).
    func change(stored: UnsafeRawBufferPointer) throws -> (sequence: UInt64, change: Change) {
        var reader = ProtoReader(stored)
        var sequence: UInt64 = 0
        var kind: UInt64 = 0
        var uuid = UnsafeRawBufferPointer(start: nil, count: 0)
        var actor = UnsafeRawBufferPointer(start: nil, count: 0)
        var body = UnsafeRawBufferPointer(start: nil, count: 0)
        var (format, salted, erasedHash) = (UInt64(0), false, false)
        do {
            while let (field, wireType) = try reader.next() {
                switch (LedgerEventField(rawValue: field), wireType) {
                case (.sequence, .varint): sequence = try reader.varint()
                case (.formatVersion, .varint): format = try reader.varint()
                case (.bodySalt, .lengthDelimited): (_, salted) = (try reader.bytes(), true)
                case (.erasedHash, .lengthDelimited): (_, erasedHash) = (try reader.bytes(), true)
                case (.actor, .lengthDelimited): actor = try reader.bytes()
                case (.kind, .varint): kind = try reader.varint()
                case (.objectUuid, .lengthDelimited): uuid = try reader.bytes()
                case (.body, .lengthDelimited): body = try reader.bytes()
                default: try reader.skip(wireType)
                }
            }
            guard let kind = EventKind(rawValue: Int(kind)) else {
                throw LedgerFailure.corrupted("event \(sequence) has kind \(kind), which this version does not know")
            }
            if format == UInt64(EventLayout.legacyFormat) ? erasedHash : !salted { return (sequence, .none) }
            // A saved object's summary is read in place from the object's bytes.
            if kind == .objectSaved { return (sequence, .saved(try ObjectSummary(encoded: body, units: units))) }
            // Only an authorization request needs its actor (the app that asked).
            let principal = kind == .authorizationRequested ? Principal(try Healthledger_V1_Actor(serializedBytes: Array(actor))) : .system
            return (sequence, try Self.change(kind: kind, actor: principal, objectUUID: Array(uuid), body: body))
        } catch is ProtoReader.Malformed {
            throw LedgerFailure.corrupted("event \(sequence) does not decode")
        } catch is SwiftProtobuf.BinaryDecodingError {
            throw LedgerFailure.corrupted("event \(sequence) does not decode")
        } catch let failure as LedgerFailure {
            throw LedgerFailure.corrupted("event \(sequence): \(failure.message)")
        }
    }

    /// The change an event makes to the projections, from its decoded body: the live write
    /// path and replay both come here (a saved object's change is its ``ObjectSummary``).
    static func change(kind: EventKind, actor: Principal, objectUUID: [UInt8]?, body: UnsafeRawBufferPointer) throws -> Change {
        switch try EventBody(kind: kind, body: body) {
        case .ledgerCreated, .objectSaved, .erased:
            return .none
        case .objectDeleted(let reason, _, _, let replacedBy):
            guard let objectUUID, objectUUID.count == 16 else { throw LedgerFailure.corrupted("a delete event names no object") }
            return .deleted(uuid: objectUUID, reason: reason, replacedBy: replacedBy?.bytes)
        case .authorizationRequested(let share, let read, let objectRead):
            guard case .app(let source) = actor else { throw LedgerFailure.corrupted("an authorization request not made by an app") }
            let pairs = share.map { (AuthorizationDirection.share, TypeCatalogue.code(of: $0)) } + read.map { (AuthorizationDirection.read, TypeCatalogue.code(of: $0)) }
            let range = objectRead.map { ObjectReadRange(type: TypeCatalogue.code(of: $0.type), startUs: $0.startUs, endUs: $0.endUs) }
            return .authorizationRequested(app: source.bundleIdentifier, pairs: pairs, objectRead: range)
        case .authorizationDecided(let app, let type, let direction, let decision):
            return .authorizationDecided(app: app, direction: direction, type: TypeCatalogue.code(of: type), decision: decision)
        case .objectReadSelectionChanged(let app, let type, let objects):
            return .objectReadSelectionChanged(app: app, type: TypeCatalogue.code(of: type), uuids: objects.map(\.bytes))
        case .sourcePriorityChanged(let type, let bundles):
            return .sourcePriorityChanged(type: TypeCatalogue.code(of: type), bundles: bundles)
        case .characteristicSet(let type, let value):
            // The stored form of a characteristic is its event's body.
            return .characteristicSet(type: TypeCatalogue.code(of: type), value: value == nil ? nil : Array(body))
        case .credentialIssued(let issue):
            return .credentialIssued(id: issue.id, record: CredentialRecord(issue).encoded)
        case .credentialRevoked(let id, let effectiveUs, let replacedBy):
            return .credentialRevoked(id: id, effectiveUs: effectiveUs, replacedBy: replacedBy)
        case .attachmentAdded(let attachment):
            return .attachmentAdded(uuid: attachment.uuid.bytes, object: attachment.object.bytes)
        case .attachmentRemoved(let uuid, let object):
            return .attachmentRemoved(uuid: uuid.bytes, object: object.bytes)
        case .workoutSamplesAssociated(let workout, let samples):
            return .samplesAssociated(workout: workout.bytes, samples: samples.map(\.bytes))
        case .routeLocationsAdded(let route, let chunk):
            return .routeLocationsAdded(route: route.bytes, chunk: chunk)
        case .objectsErased(_, let objects, _):
            return .erased(objects)
        case .primaryChanged(let epoch, _, _):
            return .primaryChanged(epoch: epoch)
        }
    }

    /// ``change(kind:actor:objectUUID:body:)`` for a body being written.
    static func change(kind: EventKind, actor: Principal, objectUUID: [UInt8]? = nil, body: [UInt8]) throws -> Change {
        try body.withUnsafeBytes { try change(kind: kind, actor: actor, objectUUID: objectUUID, body: $0) }
    }

    /// The summary of the object saved by the event stored as `stored`.
    func savedSummary(stored: UnsafeRawBufferPointer, sequence: UInt64) throws -> ObjectSummary {
        guard case .saved(let summary) = try change(stored: stored).change else {
            throw LedgerFailure.corrupted("event \(sequence) is not an objectSaved event")
        }
        return summary
    }

    /// Applies `change`, made by event `sequence`, inside `txn`.
    ///
    /// - Parameter loadSaved: the summary of the object saved by a given event (for deletes).
    func apply(
        _ change: Change, sequence: UInt64, in txn: Transaction, stats: inout DeferredProjections,
        loadSaved: (UInt64) throws -> ObjectSummary
    ) throws {
        switch change {
        case .none:
            break
        case .primaryChanged(let epoch):
            try txn.put(KeyEncoding.sequenceKey(epoch), forKey: PrimaryTerm.epochKey, in: databases.meta)
        case .credentialIssued(let id, let record):
            try txn.put(record, forKey: Array(id.utf8), in: databases.credentials)
        case .credentialRevoked(let id, let effectiveUs, let replacedBy):
            guard let stored = try txn.get(Array(id.utf8), in: databases.credentials),
                var record = CredentialRecord(stored)
            else { throw LedgerFailure.corrupted("event \(sequence) revokes an unknown credential") }
            // A revocation during a rotation's grace period brings its end forward.
            record.revokedUs = min(record.revokedUs ?? .max, effectiveUs)
            if !replacedBy.isEmpty { record.replacedBy = replacedBy }
            try txn.put(record.encoded, forKey: Array(id.utf8), in: databases.credentials)
        case .authorizationRequested(let app, let pairs, let objectRead):
            for (direction, type) in pairs {
                var record = try AuthorizationRecord.load(app: app, direction: direction, type: type, in: LedgerSnapshot(txn, databases))
                record.requested = true
                record.requestSequence = sequence
                try record.store(app: app, direction: direction, type: type, in: txn, databases)
            }
            if let objectRead {
                // Each per-object request asks the owner again (as HealthKit shows its sheet
                // each time); the current selection stays until the owner changes it.
                var record = try AuthorizationRecord.load(app: app, direction: .objectRead, type: objectRead.type, in: LedgerSnapshot(txn, databases))
                record.requested = true
                record.requestSequence = sequence
                record.decision = nil
                record.rangeStartUs = objectRead.startUs
                record.rangeEndUs = objectRead.endUs
                try record.store(app: app, direction: .objectRead, type: objectRead.type, in: txn, databases)
            }
            try logAuthorizationEvent(app: app, sequence: sequence, in: txn)
        case .authorizationDecided(let app, let direction, let type, let decision):
            var record = try AuthorizationRecord.load(app: app, direction: direction, type: type, in: LedgerSnapshot(txn, databases))
            record.decision = decision
            record.decisionSequence = sequence
            try record.store(app: app, direction: direction, type: type, in: txn, databases)
            try logAuthorizationEvent(app: app, sequence: sequence, in: txn)
        case .objectReadSelectionChanged(let app, let type, let uuids):
            let prefix = AuthorizationRecord.selectionPrefix(app: app, type: type)
            let chosen = Set(uuids)
            var selectedBefore = Set<[UInt8]>()
            for entry in try SelectionEntry.all(app: app, type: type, in: LedgerSnapshot(txn, databases)) where entry.selected {
                selectedBefore.insert(entry.uuid)
                guard !chosen.contains(entry.uuid) else { continue }
                // A deselected object that is gone was reported gone when it was deleted.
                let deletedAt = try txn.get(entry.uuid, in: databases.tombstones).map { KeyEncoding.uint64($0, at: 0) }
                try txn.put(SelectionEntry.value(selected: false, sequence: deletedAt ?? sequence), forKey: prefix + entry.uuid, in: databases.objectReads)
            }
            for uuid in uuids where !selectedBefore.contains(uuid) {
                try txn.put(SelectionEntry.value(selected: true, sequence: sequence), forKey: prefix + uuid, in: databases.objectReads)
            }
            var record = try AuthorizationRecord.load(app: app, direction: .objectRead, type: type, in: LedgerSnapshot(txn, databases))
            record.decision = .granted
            record.decisionSequence = sequence
            try record.store(app: app, direction: .objectRead, type: type, in: txn, databases)
            try logAuthorizationEvent(app: app, sequence: sequence, in: txn)
        case .characteristicSet(let type, let value):
            let key = KeyEncoding.typeKey(type)
            if let value {
                try txn.put(databases.storable(value, domain: .characteristic, key: key), forKey: key, in: databases.characteristics)
            } else {
                try txn.delete(key, in: databases.characteristics)
            }
        case .attachmentAdded(let uuid, let object):
            var value = object
            KeyEncoding.append(sequence, to: &value)
            try txn.put(value, forKey: uuid, in: databases.attachments)
            try txn.put([], forKey: object + uuid, in: databases.objectAttachments)
        case .attachmentRemoved(let uuid, let object):
            try txn.delete(uuid, in: databases.attachments)
            try txn.delete(object + uuid, in: databases.objectAttachments)
        case .sourcePriorityChanged(let type, let bundles):
            let key = KeyEncoding.typeKey(type)
            if bundles.isEmpty {
                try txn.delete(key, in: databases.sourcePriority)
            } else {
                let value = bundles.flatMap { AuthorizationRecord.appPrefix($0) }
                try txn.put(value, forKey: key, in: databases.sourcePriority)
            }
        case .saved(let object):
            let source = try stats.sourceCode(bundle: object.sourceBundle, name: object.sourceName, in: txn, databases)
            try stats.noteSave(type: object.typeCode, code: source, sequence: sequence, duration: object.duration, in: txn, databases)
            try txn.put(StoredObject(sequence: sequence, type: object.typeCode, source: source).encoded, forKey: object.uuid, in: databases.objects)
            let (type, uuid) = (object.typeCode, object.uuid)
            // The time and change indexes' rows are put later, in key order (``HeldIndexRows``).
            let valueBits = LedgerCipher.masked(object.value.bitPattern, sequence: sequence, by: databases.cipher)
            stats.indexRows.add(
                StartIndexRow.value(end: object.endUs, sequence: sequence, valueBits: valueBits, source: nil, series: object.isSeries),
                forKey: StartIndexRow.key(type: type, source: source, start: object.startUs, uuid: uuid), in: .bySource)
            stats.indexRows.add(
                StartIndexRow.value(end: object.endUs, sequence: sequence, valueBits: valueBits, source: source, series: object.isSeries),
                forKey: StartIndexRow.key(type: type, source: nil, start: object.startUs, uuid: uuid), in: .byStart)
            // An instant's end is its start: `by_start` already orders it by end.
            if object.endUs != object.startUs {
                stats.indexRows.add(
                    EndIndexRow.value(start: object.startUs, sequence: sequence, source: source, series: object.isSeries),
                    forKey: EndIndexRow.key(type: type, end: object.endUs, uuid: uuid), in: .byEnd)
            }
            stats.indexRows.add(
                ChangeIndexRow.value(ChangeIndexRow.added, uuid: uuid),
                forKey: ChangeIndexRow.key(type: type, source: source, sequence: sequence), in: .sourceChanges)
            if stats.indexRows.isFull { try stats.indexRows.put(in: txn, databases) }
            try SyncIdentifierIndex.record(object, source: source, in: txn, databases, bounds: &stats.syncKeyBounds)
            stats.changedTypes.insert(object.typeCode)
            stats.touch(type: object.typeCode, source: source, start: object.startUs)
            // Only a route, or an object that can replace a workout member, joins a workout here.
            if object.workout != nil || object.syncIdentifier != nil {
                let member = WorkoutMember(
                    type: object.typeCode, uuid: object.uuid, startUs: object.startUs, endUs: object.endUs, sequence: sequence,
                    value: object.value, source: source, isSeries: object.isSeries)
                try WorkoutIndex.objectSaved(member, routeOf: object.workout, in: txn, databases)
            }
            // A correlation's members were saved just before it.
            if !object.members.isEmpty { try addMembers(object.members, to: object.uuid, sequence: sequence, in: txn, loadSaved: loadSaved) }
        case .samplesAssociated(let workout, let samples):
            try addMembers(samples, to: workout, sequence: sequence, in: txn, loadSaved: loadSaved)
        case .routeLocationsAdded(let route, let chunk):
            var key = route
            KeyEncoding.append(chunk, to: &key)
            try txn.put(KeyEncoding.sequenceKey(sequence), forKey: key, in: databases.routeData)
        case .deleted(let uuid, let reason, let replacedBy):
            // The rows to delete may still be held.
            try stats.indexRows.put(in: txn, databases)
            guard let stored = try StoredObject.load(uuid, in: LedgerSnapshot(txn, databases)) else {
                throw LedgerFailure.corrupted("event \(sequence) deletes an object that is not stored")
            }
            let object = try loadSaved(stored.sequence)
            try remove(uuid, stored: stored, object: object, replacedBy: replacedBy, in: txn, stats: &stats)
            try txn.put(
                ChangeIndexRow.value(ChangeIndexRow.removed, uuid: uuid), forKey: ChangeIndexRow.key(type: object.typeCode, source: stored.source, sequence: sequence),
                in: databases.sourceChanges)
            try txn.put(Tombstone.encode(sequence: sequence, summary: object, reason: reason, cipher: databases.cipher), forKey: uuid, in: databases.tombstones)
        case .erased(let objects):
            try stats.indexRows.put(in: txn, databases)
            for erased in objects {
                let uuid = erased.uuid.bytes
                let type = TypeCatalogue.code(of: erased.type)
                let source = try stats.sourceCode(bundle: erased.sourceBundle, name: erased.sourceName, in: txn, databases)
                let reads = LedgerSnapshot(txn, databases)
                if let stored = try StoredObject.load(uuid, in: reads) {
                    // Live until now (erasing it deletes it).
                    try remove(uuid, stored: stored, object: try loadSaved(stored.sequence), replacedBy: nil, in: txn, stats: &stats)
                } else if let tombstone = try txn.get(uuid, in: databases.tombstones) {
                    // Deleted before: its delete's change row gives way to the erasure's.
                    let deletedAt = KeyEncoding.uint64(tombstone, at: 0)
                    let bundle = try Tombstone(uuid: erased.uuid, stored: tombstone, type: erased.type, cipher: databases.cipher).sourceBundle
                    if let code = try stats.existingSourceCode(bundle: bundle, in: reads) {
                        try txn.delete(ChangeIndexRow.key(type: type, source: code, sequence: deletedAt), in: databases.sourceChanges)
                    }
                }
                // An erased route's chunks (a route's key is its UUID and the chunk's number).
                var chunks: [[UInt8]] = []
                try txn.forEach(prefix: uuid, keyLength: 20, in: databases.routeData) { key, _ in
                    chunks.append(Array(key))
                    return true
                }
                for chunk in chunks { try txn.delete(chunk, in: databases.routeData) }
                try txn.put(
                    ChangeIndexRow.value(ChangeIndexRow.removed, uuid: uuid), forKey: ChangeIndexRow.key(type: type, source: source, sequence: sequence),
                    in: databases.sourceChanges)
                try txn.put(
                    Tombstone.encode(sequence: sequence, type: type, reason: .erased, syncIdentifier: nil, syncVersion: nil, sourceBundle: erased.sourceBundle, cipher: databases.cipher),
                    forKey: uuid, in: databases.tombstones)
                stats.changedTypes.insert(type)
            }
        }
    }

    /// Removes a stored object from every projection that holds it (a delete, or an
    /// erasure of a live object), but for the change row and tombstone its event leaves.
    private func remove(
        _ uuid: [UInt8], stored: StoredObject, object: ObjectSummary, replacedBy: [UInt8]?, in txn: Transaction, stats: inout DeferredProjections
    ) throws {
        try txn.delete(uuid, in: databases.objects)
        let (type, source) = (object.typeCode, stored.source)
        try txn.delete(StartIndexRow.key(type: type, source: nil, start: object.startUs, uuid: uuid), in: databases.byStart)
        try txn.delete(StartIndexRow.key(type: type, source: source, start: object.startUs, uuid: uuid), in: databases.bySource)
        if object.endUs != object.startUs { try txn.delete(EndIndexRow.key(type: type, end: object.endUs, uuid: uuid), in: databases.byEnd) }
        // The save's change row goes.
        try txn.delete(ChangeIndexRow.key(type: type, source: source, sequence: stored.sequence), in: databases.sourceChanges)
        try SyncIdentifierIndex.remove(object, uuid: uuid, source: stored.source, in: txn, databases)
        stats.changedTypes.insert(object.typeCode)
        stats.touch(type: object.typeCode, source: stored.source, start: object.startUs)
        try WorkoutIndex.objectDeleted(uuid, type: object.typeCode, source: stored.source, replacedBy: replacedBy, in: txn, databases)
        // A deleted object's attachments go with it (their bytes stay in the log until erased).
        for attachment in try AttachmentIndex.attachments(of: uuid, in: LedgerSnapshot(txn, databases)) {
            try txn.delete(attachment, in: databases.attachments)
            try txn.delete(uuid + attachment, in: databases.objectAttachments)
        }
    }

    /// Makes stored objects members of a workout (associated samples) or a correlation.
    private func addMembers(
        _ uuids: [[UInt8]], to parent: [UInt8], sequence: UInt64, in txn: Transaction, loadSaved: (UInt64) throws -> ObjectSummary
    ) throws {
        for uuid in uuids {
            // A member erased since is not stored for the projections (its save was erased).
            guard let stored = try StoredObject.load(uuid, in: LedgerSnapshot(txn, databases)) else { continue }
            let sample = try loadSaved(stored.sequence)
            let member = WorkoutMember(
                type: stored.type, uuid: uuid, startUs: sample.startUs, endUs: sample.endUs, sequence: stored.sequence, value: sample.value,
                source: stored.source, isSeries: sample.isSeries)
            try WorkoutIndex.add(member, to: parent, in: txn, databases)
        }
    }

    private func logAuthorizationEvent(app: String, sequence: UInt64, in txn: Transaction) throws {
        try txn.put([], forKey: AuthorizationRecord.appPrefix(app) + KeyEncoding.sequenceKey(sequence), in: databases.authorizationLog)
    }

    /// Records that the projections hold every event up to `sequence`, in `meta` next to the
    /// log head (both are written by every commit: one page instead of two).
    static func writeCheckpoint(_ sequence: UInt64, in txn: Transaction, _ databases: LedgerDatabases) throws {
        try txn.put(KeyEncoding.sequenceKey(sequence), forKey: checkpointKey, in: databases.meta)
    }

}

/// What a transaction's events change in the projections kept per type, gathered while they
/// are applied and written once at its end: the held index rows and the hours whose rollups
/// must be recomputed, written once per transaction instead of once per object; and the
/// types whose objects changed, for the change watchers.
struct DeferredProjections {
    /// The types whose objects this transaction saved or deleted.
    var changedTypes = Set<UInt32>()
    private var hours = Set<Rollups.Block>()
    /// Source codes this transaction looked up or assigned, by bundle identifier.
    private var sourceCodes: [String: UInt32] = [:]
    /// The longest duration `type_sources` holds per type and source code (type in the high
    /// half) as this transaction has left it.
    private var notedSaves: [UInt64: Int64] = [:]
    /// Saved objects' rows of the time and change indexes, not yet put.
    var indexRows = HeldIndexRows()
    /// Upper bounds of the `sync_ids` ranges looked at, so that most new identifiers need no look-up.
    var syncKeyBounds = SyncKeyBounds()

    /// The code of the source `bundle` (``SourceRegistry/assign(bundle:name:in:_:)``), read
    /// from `sources` once per transaction. Held here so that a request rolled back inside a
    /// group commit, which restores this value, forgets the codes it assigned.
    mutating func sourceCode(bundle: String, name: String, in txn: Transaction, _ databases: LedgerDatabases) throws -> UInt32 {
        if let code = sourceCodes[bundle] { return code }
        let code = try SourceRegistry.assign(bundle: bundle, name: name, in: txn, databases)
        sourceCodes[bundle] = code
        return code
    }

    /// The code of the source `bundle`, nil when it has none yet (it never saved).
    mutating func existingSourceCode(bundle: String, in snapshot: LedgerSnapshot) throws -> UInt32? {
        if let code = sourceCodes[bundle] { return code }
        guard let code = try SourceRegistry.code(of: bundle, in: snapshot) else { return nil }
        sourceCodes[bundle] = code
        return code
    }

    /// ``SourceRegistry/noteSave(type:code:sequence:duration:in:_:)``, skipped when this
    /// transaction already noted a save of the type by the source at least as long.
    mutating func noteSave(type: UInt32, code: UInt32, sequence: UInt64, duration: Int64, in txn: Transaction, _ databases: LedgerDatabases) throws {
        let key = UInt64(type) << 32 | UInt64(code)
        if let longest = notedSaves[key], longest >= duration { return }
        notedSaves[key] = try SourceRegistry.noteSave(type: type, code: code, sequence: sequence, duration: duration, in: txn, databases)
    }

    /// Notes that a sample of `type` from `source` starting at `start` was saved or deleted
    /// (only quantity types have rollups).
    mutating func touch(type: UInt32, source: UInt32, start: Int64) {
        guard Rollups.levels[type] != nil else { return }
        hours.insert(Rollups.Block(type: type, source: source, hour: Rollups.hourStart(start)))
    }

    /// Puts the held index rows, recomputes the touched hours' rollups, and clears them.
    /// - Parameter seriesValues: reads a series sample's values from the log (which a replay
    ///   reads from another environment than the one it writes).
    mutating func flush(in txn: Transaction, _ databases: LedgerDatabases, seriesValues: SeriesValues.Loader) throws {
        try indexRows.put(in: txn, databases)
        try Rollups.update(hours.sorted(), in: txn, databases, seriesValues: seriesValues)
        hours = []
    }
}
