import Foundation
import HealthModel
import LMDB
import LedgerSchema
import Logging
import Synchronization

/// Which objects an erasure takes (``Ledger/erase(_:reason:by:)``).
public enum ErasureSelection: Sendable, Hashable {
    /// These objects, live or deleted.
    case objects([UUID])
    /// The live objects of a type overlapping an interval and matching a predicate (an app's own);
    /// for a characteristic type (the owner only, no interval or predicate), every value it
    /// was ever set to.
    case matching(type: ObjectType, interval: DateInterval?, predicate: ObjectPredicate?)
    /// Every object a source saved, live or deleted, of every type.
    case source(String)
    /// All of the owner's data (the owner only): every object, live or deleted, of every type
    /// and source, and every characteristic ever set. The ledger stays, with its credentials,
    /// its grants and its history.
    case everything
}

/// Which characteristics an erasure empties the `characteristicSet` events of.
struct CharacteristicErasure {
    /// Their types; nil for every one.
    var types: Set<String>?
    /// Only the events before this one (an erasure's journal entry applied to an older copy).
    var before: UInt64
}

/// What an erasure did.
public struct ErasureReport: Sendable, Hashable {
    /// Objects erased, a correlation's members and a workout's routes included.
    public var objects: Int
    /// Events whose bodies were erased.
    public var events: Int
    /// Characteristics whose values were erased.
    public var characteristics = 0
    /// The last erasure event (one per object; 0 when nothing was left to erase).
    public var sequence: UInt64
    /// Free pages of the data file overwritten, and those still held by a read when the
    /// erasure returned (scrubbed by the next erasure or ``Ledger/scrubFreePages()``).
    public var scrubbedPages: Int
    public var heldPages: Int
    /// Live pages whose unused gap held stale bytes, overwritten with zeros.
    public var zeroedGaps = 0
    /// Every object erased, for the store's erasure journal.
    package var erasedObjects: [UUID] = []
    /// The types of the characteristics erased, for the journal.
    package var erasedCharacteristics: [String] = []
}

extension Ledger {
    /// The longest reason an erasure records, in UTF-8 bytes.
    public static let maximumErasureReasonLength = 1_000
    static let legalHoldKey: [UInt8] = Array("legal_hold".utf8)
    /// Set by an erasure's commit until the projections are rebuilt from the erased log; a
    /// ledger opened with it set rebuilds them first (a crash between the two loses nothing).
    static let erasureRebuildKey: [UInt8] = Array("erasure_rebuild".utf8)
    private static let scrubMarkKey: [UInt8] = Array("scrubbed_after".utf8)

    /// Erases objects: every event about them loses its body (values, metadata, device,
    /// attachment bytes, route locations), live ones are deleted, and an `objectsErased` event
    /// records what stays (docs/SEMANTICS.md §5, "Erasure"): which objects of which types
    /// existed when, by whom, which events held them with their commitments, why, and who
    /// asked. The hash chain, the Merkle tree and every proof issued before still verify.
    ///
    /// A correlation's members and a workout's routes go with it. The projections are then
    /// rebuilt from the erased log (writes wait meanwhile), and the data file's free pages,
    /// which still hold the old bytes, are overwritten with zeros.
    ///
    /// - Parameter principal: an app erases only objects it saved, of types it may share; the
    ///   owner any; the operator none (it erases whole ledgers).
    /// - Throws: ``HealthError`` as ``delete(_:by:)`` does; ``LedgerFailure`` `failedPrecondition`
    ///   under a legal hold.
    public func erase(_ selection: ErasureSelection, reason: String, by principal: Principal) async throws -> ErasureReport {
        if case .operator = principal {
            throw HealthError(.authorizationDenied, "the operator erases whole ledgers (admin erase-ledger), not objects")
        }
        guard reason.utf8.count <= Self.maximumErasureReasonLength else {
            throw HealthError.invalidArgument("the reason is longer than \(Self.maximumErasureReasonLength) bytes", field: "reason")
        }
        switch selection {
        case .objects(let uuids):
            guard !uuids.isEmpty else { throw HealthError.invalidArgument("nothing to erase: the list of UUIDs is empty", field: "uuids") }
            guard uuids.count <= Ledger.maximumBatchSize else {
                throw HealthError(.dataSizeExceeded, "an erasure names at most \(Ledger.maximumBatchSize) UUIDs, got \(uuids.count)", field: "uuids")
            }
        case .matching(let type, let interval, let predicate) where type.family == .characteristic:
            if case .app = principal { throw HealthError(.authorizationDenied, "only the owner erases a characteristic", field: "type") }
            guard interval == nil, predicate == nil else {
                throw HealthError.invalidArgument("a characteristic is erased whole: no range or predicate", field: "type")
            }
        case .matching(let type, let interval, let predicate):
            guard TimeRange(interval).start <= TimeRange(interval).end else {
                throw HealthError.invalidArgument("the interval ends before it starts", field: "interval")
            }
            try predicate?.validate(for: type)
        case .source(let bundle):
            guard !bundle.isEmpty else { throw HealthError.invalidArgument("name the source to erase", field: "source") }
        case .everything:
            if case .app = principal {
                throw HealthError(.authorizationDenied, "an app erases only what it saved: name its own source, not everything", field: "everything")
            }
        }
        var report = try await committer.submit { context in
            try self.eraseInTransaction(selection, reason: reason, by: principal, in: context)
        }
        guard report.sequence > 0 else { return report }
        // Journaled (and the views built before dropped) as soon as it is durable: whatever
        // fails later, a restore of an older backup erases it again.
        try afterErasure.withLock { $0 }?.call((report, reason))
        try await committer.exclusive {
            try self.rebuildAfterErasure()
            // LMDB's reused page buffers still hold erased bytes: from now on, fresh ones.
            try self.environment.reopen()
        }
        do {
            let scrub = try await scrubFreePages()
            (report.scrubbedPages, report.heldPages, report.zeroedGaps) = (scrub.scrubbed, scrub.held, scrub.gaps)
        } catch {
            // The erasure stands: the next erasure or scrub overwrites what this one left.
            logger.error("the data file's free pages could not be scrubbed after an erasure", metadata: ["error": "\(error)"])
        }
        logger.notice(
            "erased objects", metadata: ["ledger.erasure.sequence": "\(report.sequence)", "ledger.erasure.objects": "\(report.objects)",
                "ledger.erasure.events": "\(report.events)", "ledger.erasure.held_pages": "\(report.heldPages)"])
        return report
    }

    /// Overwrites the data file's free pages and its live pages' unused gaps with zeros
    /// (``LMDB/Environment/scrubFreePages()``), between commits: two rounds of a commit and a
    /// scrub (a commit files under itself the free pages it took from older entries and left
    /// unused, which only the next round may touch), and more while reads still hold pages,
    /// for up to about three seconds.
    public func scrubFreePages() async throws -> ScrubReport {
        var total = ScrubReport(scrubbed: 0, held: 0)
        var clean = 0
        for round in 0..<30 {
            let report = try await committer.exclusive { try self.scrubRound(round, zeroingGaps: false) }
            total.scrubbed += report.scrubbed
            total.held = report.held
            // A round's commit may file pages a reader held until then under itself: only two
            // rounds in a row that find nothing held leave nothing behind.
            clean = report.held == 0 ? clean + 1 : 0
            if clean == 2 { break }
            if report.held > 0 { try await Task.sleep(for: .milliseconds(100)) }
        }
        // The live pages' gaps once, at the end (a pass over the whole file).
        total.gaps = try await committer.exclusive { try self.environment.scrubFreePages(zeroingGaps: true) }.gaps
        return total
    }

    /// A commit (so that the pages the last one freed may be scrubbed), then a scrub.
    private func scrubRound(_ round: Int, zeroingGaps: Bool) throws -> ScrubReport {
        try environment.write { txn in try txn.put(KeyEncoding.sequenceKey(UInt64(round)), forKey: Self.scrubMarkKey, in: databases.meta) }
        return try environment.scrubFreePages(zeroingGaps: zeroingGaps)
    }

    /// Erases the journal's objects still held by this ledger, which no one else has open (a
    /// restored backup before it is installed): the same steps as ``erase(_:reason:by:)``,
    /// without the committer. Objects the backup never had, or already erased, are skipped.
    /// - Returns: the objects erased.
    func applyErasureJournal(_ entries: [ErasureJournal.Entry]) throws -> Int {
        var erased = 0
        var scrub = false
        for entry in entries where entry.ledgerErased != true {
            let present = try read { snapshot in
                try entry.objects.filter { uuid in
                    if try StoredObject.load(uuid.bytes, in: snapshot) != nil { return true }
                    guard let stored = try snapshot.get(uuid.bytes, in: snapshot.databases.tombstones) else { return false }
                    return try Tombstone(uuid: uuid, stored: stored, type: "", cipher: snapshot.databases.cipher).reason != .erased
                }
            }
            let characteristics = entry.characteristics.map { CharacteristicErasure(types: Set($0), before: entry.sequence) }
            guard !present.isEmpty || characteristics != nil else { continue }
            let when = entry.time.formatted(.iso8601)
            let reason = String("\(entry.reason) (erased on \(when), applied again to a restored backup)".utf8.prefix(Self.maximumErasureReasonLength)) ?? entry.reason
            let report = try environment.write { txn in
                let context = try WriteContext(txn: txn, databases: databases, projector: Projector(databases: databases, units: SummaryCache()), now: Date())
                let report = try eraseInTransaction(.objects(present), characteristics: characteristics, reason: reason, by: .system, in: context)
                try context.finish()
                return report
            }
            guard report.sequence > 0 else { continue }
            erased += report.objects
            scrub = true
            try rebuildAfterErasure()
        }
        if scrub { try scrubUnshared() }
        return erased
    }

    /// Places or lifts a legal hold: while one is placed, erasure is refused with
    /// `failedPrecondition` (records that must be retained). Nil lifts it.
    public func setLegalHold(reason: String?) throws {
        try environment.write { txn in
            if let reason {
                try txn.put(Array(reason.utf8), forKey: Self.legalHoldKey, in: databases.meta)
            } else {
                try txn.delete(Self.legalHoldKey, in: databases.meta)
            }
        }
        // Not an event, but followers copy it: whoever waits on every commit hears of it.
        changeWatchers.notify([])
    }

    /// Tells whoever uses the ledger that it is being erased whole (``LedgerStore/eraseLedger(_:reason:waitingUpTo:ignoringHold:)``):
    /// its streams end (and those that begin later, at once), a wait for its next commit (a
    /// follower's fetch) returns, and the access records not yet written are dropped, since
    /// they would go with it (written as it closes, they could outlast it in freed disk blocks).
    /// `asReleasedCopy`: only this copy goes (``LedgerStore/releaseCopy(of:waitingUpTo:)``).
    func endUseForErasure(asReleasedCopy released: Bool = false) {
        if released { beingReleased.store(true, ordering: .releasing) }
        beingErased.store(true, ordering: .releasing)
        accessFlushing.stop()
        _ = accessLog.take()
        accessWatchers.notify(released ? .copyReleased : .ledgerErased)
        changeWatchers.notify([])
    }

    /// What an erasure of a held ledger (its objects, or the whole of it) is refused with.
    static func heldRefusal(ledger id: String, reason: String) -> LedgerFailure {
        LedgerFailure(.failedPrecondition, "ledger '\(id)' is under a legal hold (\(reason)): nothing is erased until the operator lifts it")
    }

    /// The reason of the legal hold placed on the ledger, nil when there is none.
    public func legalHold() throws -> String? {
        try read { snapshot in try snapshot.get(Self.legalHoldKey, in: snapshot.databases.meta).map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Rebuilds the projections from the log after an erasure (its commit applied the erasure
    /// to them, but history-dependent rows, such as the order sources were first seen in, are
    /// the erased log's only after a rebuild), and clears the mark the erasure left.
    func rebuildAfterErasure() throws {
        _ = try replay(install: true)
        _ = try environment.write { txn in try txn.delete(Self.erasureRebuildKey, in: databases.meta) }
    }

    /// Scrubs the data file of a ledger no one else writes (a restored copy, a ledger being
    /// opened): with fresh page buffers, two rounds, and the gaps in the last.
    func scrubUnshared() throws {
        try environment.reopen()
        _ = try scrubRound(0, zeroingGaps: false)
        _ = try scrubRound(1, zeroingGaps: true)
    }

    /// - Parameter characteristics: also erase these characteristics' values (a journal entry
    ///   applied again); ``ErasureSelection/everything`` and a characteristic type name their own.
    private func eraseInTransaction(
        _ selection: ErasureSelection, characteristics: CharacteristicErasure? = nil, reason: String, by principal: Principal, in context: WriteContext
    ) throws -> ErasureReport {
        if let hold = try context.txn.get(Self.legalHoldKey, in: databases.meta) {
            throw Self.heldRefusal(ledger: id, reason: String(decoding: hold, as: UTF8.self))
        }
        let nothing = ErasureReport(objects: 0, events: 0, sequence: 0, scrubbedPages: 0, heldPages: 0)
        let targets = try Self.erasureTargets(selection, by: principal, in: context, ledger: self)
        let characteristics: CharacteristicErasure? =
            switch selection {
            case .everything: CharacteristicErasure(types: nil, before: .max)
            case .matching(let type, _, _) where type.family == .characteristic: CharacteristicErasure(types: [type.identifier], before: .max)
            default: characteristics
            }
        guard !targets.isEmpty || characteristics != nil else { return nothing }
        let found = try Self.eventsToErase(of: targets, characteristics: characteristics, in: context)
        guard !found.objects.isEmpty || !found.characteristics.isEmpty else { return nothing }
        // One erasure event per object: each leaves its own change row (keyed by type, source
        // and sequence), so an anchored query reports every one of them deleted.
        var sequence: UInt64 = 0
        for erasure in found.objects {
            let objects = erasure.object.map { [$0] } ?? []
            let body = try EventBody.encodeErasure(reason: reason, objects: objects, events: erasure.events)
            sequence = try context.append(
                kind: .objectsErased, actor: principal, objectType: erasure.object?.type, objectUUID: erasure.object?.uuid.bytes, body: body,
                change: .erased(objects))
        }
        // One per characteristic, its header naming the characteristic's type; its value leaves
        // the projection now (the rebuild that follows replays its emptied events as nothing).
        for erasure in found.characteristics {
            let body = try EventBody.encodeErasure(reason: reason, objects: [], events: erasure.events)
            sequence = try context.append(kind: .objectsErased, actor: principal, objectType: erasure.type, objectUUID: nil, body: body, change: .erased([]))
            _ = try context.txn.delete(KeyEncoding.typeKey(try ObjectType(erasure.type).code), in: databases.characteristics)
        }
        // The bodies go once the erasures' changes (which read the live ones) are applied.
        let events = found.objects.flatMap(\.events) + found.characteristics.flatMap(\.events)
        for event in events {
            let erased = try EventLayout.erased(try Ledger.storedEvent(event.sequence, in: context.reads))
            let key = KeyEncoding.sequenceKey(event.sequence)
            try context.txn.put(databases.storable(event: erased, key: key), forKey: key, in: databases.events)
        }
        try context.txn.put(KeyEncoding.sequenceKey(sequence), forKey: Self.erasureRebuildKey, in: databases.meta)
        return ErasureReport(
            objects: found.objects.count { $0.object != nil }, events: events.count, characteristics: found.characteristics.count, sequence: sequence,
            scrubbedPages: 0, heldPages: 0, erasedObjects: found.objects.compactMap { $0.object?.uuid }, erasedCharacteristics: found.characteristics.map(\.type))
    }

    /// The UUIDs `selection` names that `principal` may erase.
    private static func erasureTargets(
        _ selection: ErasureSelection, by principal: Principal, in context: WriteContext, ledger: Ledger
    ) throws -> Set<[UInt8]> {
        let ownSource = try ownSource(of: principal, in: context)
        let appBundle: String? = if case .app(let app) = principal { app.bundleIdentifier } else { nil }
        var targets = Set<[UInt8]>()
        switch selection {
        case .matching(let type, _, _) where type.family == .characteristic:
            break  // No object: its events are found by their header's type.
        case .objects(let uuids):
            for uuid in uuids {
                if try StoredObject.load(uuid.bytes, in: context.reads) != nil {
                    _ = try requireChangeable(uuid, by: principal, ownSource: ownSource, field: "uuids", in: context)
                } else if let stored = try context.txn.get(uuid.bytes, in: context.databases.tombstones) {
                    let tombstone = try Tombstone(uuid: uuid, stored: stored, type: "", cipher: context.databases.cipher)
                    // Another source's deleted object is as unknown to an app as a hidden live one.
                    if let appBundle, tombstone.sourceBundle != appBundle { throw HealthError(.noData, "no object with UUID \(uuid)", field: "uuids") }
                    if appBundle != nil { try requireSharing(try objectType(code: KeyEncoding.uint32(stored, at: 8)), by: principal, in: context) }
                    if tombstone.reason == .erased { continue }
                } else {
                    throw HealthError(.noData, "no object with UUID \(uuid)", field: "uuids")
                }
                targets.insert(uuid.bytes)
            }
        case .matching(let type, let interval, let predicate):
            try requireSharing(type, by: principal, in: context)
            let scope: ReadScope
            if let ownSource { scope = .own(ownSource) } else { scope = .everything }
            if ownSource == 0 { return [] }
            let predicateContext = PredicateContext(principal: principal, snapshot: context.reads)
            try ledger.visitCandidates(
                of: type, plan: PredicatePlan(predicate, range: TimeRange(interval)), sort: .startDate(ascending: true), scope: scope,
                context: predicateContext, longest: try context.longestDuration(type: type.code)
            ) { entry in
                if try predicate?.matches(EntrySubject(entry, predicateContext), type: type) ?? true { targets.insert(entry.uuid) }
                return true
            }
        case .everything:
            try context.txn.withCursor(on: context.databases.objects) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    if current.value.count == 16 { targets.insert(Array(current.key)) }
                    entry = try cursor.next()
                }
            }
            try context.txn.withCursor(on: context.databases.tombstones) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    if let uuid = UUID(bytes: Array(current.key)),
                        try Tombstone(uuid: uuid, stored: current.value, type: "", cipher: context.databases.cipher).reason != .erased
                    {
                        targets.insert(Array(current.key))
                    }
                    entry = try cursor.next()
                }
            }
        case .source(let bundle):
            if let appBundle, appBundle != bundle {
                throw HealthError(.authorizationDenied, "an app erases only what it saved; \(bundle) is another source", field: "source")
            }
            if let code = try SourceRegistry.code(of: bundle, in: context.reads) {
                try context.txn.withCursor(on: context.databases.objects) { cursor in
                    var entry = try cursor.first()
                    while let current = entry {
                        if current.value.count == 16, KeyEncoding.uint32(current.value, at: 12) == code { targets.insert(Array(current.key)) }
                        entry = try cursor.next()
                    }
                }
            }
            var types = Set<UInt32>()
            try context.txn.withCursor(on: context.databases.tombstones) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    if let uuid = UUID(bytes: Array(current.key)) {
                        let tombstone = try Tombstone(uuid: uuid, stored: current.value, type: "", cipher: context.databases.cipher)
                        if tombstone.sourceBundle == bundle, tombstone.reason != .erased {
                            targets.insert(Array(current.key))
                            types.insert(KeyEncoding.uint32(current.value, at: 8))
                        }
                    }
                    entry = try cursor.next()
                }
            }
            // An app erases what it may share, as it deletes.
            if appBundle != nil {
                for uuid in targets { if let stored = try StoredObject.load(uuid, in: context.reads) { types.insert(stored.type) } }
                for code in types.sorted() { try requireSharing(try objectType(code: code), by: principal, in: context) }
            }
        }
        return targets
    }

    /// The events about `targets` (and about their correlations' members and workouts'
    /// routes) that still hold their bodies, by object in UUID order, with what stays of each
    /// object: two walks over the log's headers (a correlation's members are saved before it).
    /// With `characteristics`, also the events that set those characteristics, by type.
    private static func eventsToErase(
        of targets: Set<[UInt8]>, characteristics erasingCharacteristics: CharacteristicErasure?, in context: WriteContext
    ) throws -> (
        objects: [(object: EventBody.ErasedObject?, events: [EventBody.ErasedEvent])], characteristics: [(type: String, events: [EventBody.ErasedEvent])]
    ) {
        let units = SummaryCache()
        var erasing = targets
        let route = Array(ObjectType.workoutRoute.identifier.utf8)
        func walk(_ visit: (UInt64, EventLayout, UnsafeRawBufferPointer) throws -> Void) throws {
            try context.txn.withCursor(on: context.databases.events) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    try context.databases.withEvent(current.value, key: current.key) { stored in
                        let layout = try EventCodec.layout(stored)
                        if !layout.isErased { try visit(KeyEncoding.uint64(current.key, at: 0), layout, stored) }
                    }
                    entry = try cursor.next()
                }
            }
        }
        let saved = UInt64(EventKind.objectSaved.rawValue)
        let erasure = UInt64(EventKind.objectsErased.rawValue)
        let characteristicSet = UInt64(EventKind.characteristicSet.rawValue)
        if !targets.isEmpty {
            try walk { _, layout, _ in
                guard layout.kind == saved, let uuid = layout.objectUUID, let body = layout.body else { return }
                if erasing.contains(Array(uuid)), let type = layout.objectType, TypeCatalogue.correlationTypes[String(decoding: type, as: UTF8.self)] != nil {
                    erasing.formUnion(try ObjectSummary(encoded: body, units: units).members)
                } else if let type = layout.objectType, type.elementsEqual(route), let workout = try ObjectSummary(encoded: body, units: units).workout,
                    erasing.contains(workout)
                {
                    erasing.insert(Array(uuid))
                }
            }
        }
        var objects: [[UInt8]: EventBody.ErasedObject] = [:]
        var events: [[UInt8]: [EventBody.ErasedEvent]] = [:]
        var characteristics: [String: [EventBody.ErasedEvent]] = [:]
        try walk { sequence, layout, stored in
            func erased() throws -> EventBody.ErasedEvent {
                var event = EventBody.ErasedEvent(sequence: sequence, commitment: layout.erasureCommitment(of: stored))
                if layout.formatVersion == EventLayout.legacyFormat {
                    event.erasedStoredSHA256 = try EventLayout.erased(stored).withUnsafeBytes { ErasureAccount.sha256($0) }
                }
                return event
            }
            if layout.kind == characteristicSet, let erasing = erasingCharacteristics, sequence < erasing.before, let header = layout.objectType {
                let type = String(decoding: header, as: UTF8.self)
                if erasing.types?.contains(type) ?? true { characteristics[type, default: []].append(try erased()) }
                return
            }
            // An earlier erasure's own record stays: it holds no value, and the chain needs it.
            guard layout.kind != erasure, let uuid = layout.objectUUID.map(Array.init), erasing.contains(uuid) else { return }
            events[uuid, default: []].append(try erased())
            guard layout.kind == saved, let body = layout.body else { return }
            let summary = try ObjectSummary(encoded: body, units: units)
            objects[uuid] = EventBody.ErasedObject(
                uuid: UUID(bytes: summary.uuid)!, type: summary.type, sourceBundle: summary.sourceBundle, sourceName: summary.sourceName,
                startUs: summary.startUs, endUs: summary.endUs,
                // Saved before their correlation: their types are known by now.
                memberTypes: summary.members.compactMap { objects[$0]?.type })
        }
        return (
            events.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { (objects[$0], events[$0]!) },
            characteristics.keys.sorted().map { ($0, characteristics[$0]!) }
        )
    }
}
