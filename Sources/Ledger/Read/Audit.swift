import Foundation
import HealthModel
import LMDB
import LedgerSchema

/// A page of a ledger's audit trail.
public struct AuditPage: Sendable {
    /// The matching events of the page, in sequence order.
    public var events: [AuditEvent]
    /// The head (last event) when the page was read.
    public var headSequence: UInt64
    public var headHash: [UInt8]
    /// The sequence the next page starts at.
    public var next: UInt64
    /// Every event up to the filter's bound (its last sequence, its end time, or the head)
    /// has been read.
    public var caughtUp: Bool
}

extension Ledger {
    /// Most events one audit page holds.
    public static let maximumAuditPage = 5_000
    /// Events an audit page reads at most while looking for matches (a page may come back
    /// short, or empty, but not caught up: read on from ``AuditPage/next``).
    static let auditScanBudget: UInt64 = 50_000

    /// The events that match `filter`, from sequence `next` on, each told in a sentence.
    ///
    /// The audit trail is the owner's (and the operator's, on the data directory): an app
    /// is refused. Events are read in order; a page ends after `limit` matches, at the
    /// filter's bound or the head, or after ``auditScanBudget`` events.
    ///
    /// - Parameters:
    ///   - includeStored: give each event's stored bytes too.
    ///   - maximumBytes: the most bytes of events a page holds (stored bytes and sentences);
    ///     a page holds one event at least, whatever its size.
    /// - Throws: ``HealthError`` `authorizationDenied` for an app.
    public func audit(
        _ filter: AuditFilter, from next: UInt64 = 1, limit: Int = 500, includeStored: Bool = false, maximumBytes: Int = 1 << 20,
        as principal: Principal
    ) throws -> AuditPage {
        if case .app = principal {
            throw RoleRefusal.readingAudit
        }
        let limit = max(1, min(limit, Self.maximumAuditPage))
        return try read { snapshot in
            let head = try LogHead.read(snapshot)
            let bound = min(filter.toSequence ?? head.sequence, head.sequence)
            var sequence = max(next, filter.fromSequence ?? 1, 1)
            if let since = filter.since { sequence = max(sequence, try Self.firstSequence(committedAtOrAfter: since, head: head.sequence, in: snapshot)) }
            var narrator = AuditNarrator(snapshot: snapshot)
            var events: [AuditEvent] = []
            var scanned: UInt64 = 0
            var bytes = 0
            var finished = false
            while sequence <= bound, events.count < limit, scanned < Self.auditScanBudget, bytes < maximumBytes {
                let stored = try Ledger.storedEvent(sequence, in: snapshot)
                let event = try LedgerEvent(stored: stored)
                if let until = filter.until, event.commitTime >= until {
                    finished = true
                    break
                }
                sequence += 1
                scanned += 1
                if let actor = filter.actor, !actor.matches(event.actor) { continue }
                if !filter.kinds.isEmpty, !filter.kinds.contains(event.kind) { continue }
                let body = try event.decodedBody()
                if let type = filter.type, event.objectType != type.identifier, !body.types.contains(type.identifier) { continue }
                if let object = filter.object, event.objectUUID != object, !body.objects.contains(object) { continue }
                let sentence = try narrator.sentence(event, body)
                // What the event adds to the page's message: its stored bytes, its sentence and
                // at most 128 bytes of numbers, hash and names. An event that would take the page
                // past `maximumBytes` starts the next one (an attachment's event holds up to
                // 3 MiB: two in a page would not fit a frame).
                let size = (includeStored ? stored.count : 0) + sentence.utf8.count + 128
                if !events.isEmpty, bytes + size > maximumBytes {
                    sequence -= 1
                    break
                }
                events.append(
                    AuditEvent(
                        sequence: event.sequence, time: event.commitTime, actor: event.actor, kind: event.kind, objectType: event.objectType,
                        objectUUID: event.objectUUID, sentence: sentence, hash: try EventCodec.hash(stored),
                        stored: includeStored ? Array(stored) : nil))
                bytes += size
            }
            return AuditPage(
                events: events, headSequence: head.sequence, headHash: head.hash, next: sequence, caughtUp: finished || sequence > bound)
        }
    }

    /// The first sequence committed at or after `time` (head + 1 when none): commit times
    /// never go backwards along the log, so a binary search finds it.
    static func firstSequence(committedAtOrAfter time: Date, head: UInt64, in snapshot: LedgerSnapshot) throws -> UInt64 {
        var low: UInt64 = 1
        var high = head + 1
        while low < high {
            let middle = low + (high - low) / 2
            if try LedgerEvent(stored: try storedEvent(middle, in: snapshot)).commitTime < time { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// Tells events in sentences, looking up what a sentence names (an app's name, a revoked
/// credential's holder, a replacing object's sync version) in the read transaction.
struct AuditNarrator {
    let snapshot: LedgerSnapshot
    private var appNames: [String: String]?

    init(snapshot: LedgerSnapshot) {
        self.snapshot = snapshot
    }

    mutating func sentence(_ event: LedgerEvent, _ body: EventBody) throws -> String {
        let who = event.actor.narrated
        let object = [event.objectType.map(ObjectType.shortName), event.objectUUID.map(Self.uuid)].compactMap { $0 }.joined(separator: " ")
        switch body {
        case .ledgerCreated(let id, let name, let key):
            let signing = key.isEmpty ? "" : ", signing its tree heads with key \(key.hexString)"
            return "ledger \(id)\(name.isEmpty ? "" : " (\(name))") was created by \(who)\(signing)"
        case .objectSaved:
            return "\(object) saved by \(who)"
        case .objectDeleted(let reason, _, _, let replacedBy):
            switch reason {
            case .deleted: return "\(object) deleted by \(who)"
            case .replacedBySyncVersion:
                guard let replacedBy else { return "\(object) deleted: replaced by a later sync version (\(who))" }
                let version = try syncVersion(of: replacedBy).map { "sync version \($0)" } ?? "a later sync version"
                return "\(object) deleted: replaced by \(version), \(Self.uuid(replacedBy)) (\(who))"
            case .workoutDeleted: return "\(object) deleted with its workout (\(who))"
            case .correlationDeleted: return "\(object) deleted with its correlation (\(who))"
            case .erased: return "\(object) deleted by its erasure (\(who))"
            }
        case .erased:
            return "\(object): \(event.kind) by \(who), its contents since erased"
        case .objectsErased(let reason, let objects, let events):
            let counts = Dictionary(grouping: objects, by: { ObjectType.shortName($0.type) }).map { "\($0.value.count) \($0.key)" }.sorted()
            // An erasure of a characteristic names it in its header, with no object.
            let what = objects.isEmpty ? event.objectType.map(ObjectType.shortName) ?? "nothing" : Self.list(counts)
            let why = reason.isEmpty ? "" : " (\(reason))"
            return "\(what) erased by \(who)\(why): \(events.count) event\(events.count == 1 ? "" : "s") emptied"
        case .authorizationRequested(let share, let read, let objectRead):
            if let objectRead {
                let from = objectRead.startUs.map { " from \(Self.day(date(microseconds: $0)))" } ?? ""
                let to = objectRead.endUs.map { " until \(Self.day(date(microseconds: $0)))" } ?? ""
                return "\(who) asked to read chosen \(ObjectType.shortName(objectRead.type)) objects\(from)\(to)"
            }
            let parts = [
                share.isEmpty ? nil : "share \(Self.list(share.map(ObjectType.shortName)))",
                read.isEmpty ? nil : "read \(Self.list(read.map(ObjectType.shortName)))",
            ].compactMap { $0 }
            return "\(who) asked to \(parts.joined(separator: " and "))"
        case .authorizationDecided(let app, let type, let direction, let decision):
            let what = "\(direction) of \(ObjectType.shortName(type))"
            let subject = try narratedApp(app)
            switch decision {
            case .granted: return "\(subject) was granted \(what) by \(who)"
            case .denied: return "\(subject) was denied \(what) by \(who)"
            case .revoked: return "\(subject) had \(what) revoked by \(who)"
            }
        case .objectReadSelectionChanged(let app, let type, let objects):
            let subject = try narratedApp(app)
            let name = ObjectType.shortName(type)
            if objects.isEmpty { return "\(subject) may read none of the \(name) objects: selection cleared by \(who)" }
            return "\(subject) may read \(objects.count) chosen \(name) object\(objects.count == 1 ? "" : "s"), selected by \(who)"
        case .sourcePriorityChanged(let type, let bundles):
            let name = ObjectType.shortName(type)
            if bundles.isEmpty { return "the source order of \(name) was reset to the default by \(who)" }
            return "the source order of \(name) was set to \(bundles.joined(separator: " > ")) by \(who)"
        case .characteristicSet(let type, let value):
            let name = ObjectType.shortName(type)
            switch value {
            case nil: return "\(name) was cleared by \(who)"
            case .date(let year, let month, let day)?:
                return "\(name) was set to \(String(format: "%04d-%02d-%02d", year, month, day)) by \(who)"
            case .value(let raw)?:
                let described = (try? ObjectType(type)).flatMap { try? Characteristic($0, rawValue: Int(raw)) }.map(Self.caseName) ?? "\(raw)"
                return "\(name) was set to \(described) by \(who)"
            }
        case .credentialIssued(let issue):
            let label = issue.label.isEmpty ? "" : " (\(issue.label))"
            let expiry = issue.expiresUs == 0 ? "" : ", expiring \(Self.time(issue.expiresUs))"
            let replacing = issue.replaces.isEmpty ? "" : ", replacing credential \(issue.replaces)"
            return "credential \(issue.id) was issued to \(issue.principal.narrated)\(label) by \(who)\(expiry)\(replacing)"
        case .credentialRevoked(let id, let effectiveUs, let replacedBy):
            let holder = try CredentialRecord.load(id, in: snapshot).map { " of \($0.principal.narrated)" } ?? ""
            guard replacedBy.isEmpty else {
                return "credential \(id)\(holder) was rotated by \(who): replaced by \(replacedBy), refused from \(Self.time(effectiveUs))"
            }
            // A revocation recorded to take effect later says when.
            let later = effectiveUs > microseconds(event.commitTime) ? ", refused from \(Self.time(effectiveUs))" : ""
            return "credential \(id)\(holder) was revoked by \(who)\(later)"
        case .attachmentAdded(let attachment):
            return "attachment \(attachment.name) (\(attachment.contentType), \(attachment.size) bytes) was added to \(Self.uuid(attachment.object)) by \(who)"
        case .attachmentRemoved(let uuid, let owner):
            return "attachment \(Self.uuid(uuid)) was removed from \(Self.uuid(owner)) by \(who)"
        case .workoutSamplesAssociated(let workout, let samples):
            return "\(samples.count) sample\(samples.count == 1 ? " was" : "s were") associated with workout \(Self.uuid(workout)) by \(who)"
        case .routeLocationsAdded(let route, let chunk):
            return "locations (part \(chunk + 1)) were added to route \(Self.uuid(route)) by \(who)"
        case .primaryChanged(let epoch, let node, let cluster):
            return "server \(node) of cluster \(cluster) became this ledger's primary (epoch \(epoch))"
        }
    }

    /// "app com.example.walk (Walk)", with the name its credential or request gave.
    private mutating func narratedApp(_ bundle: String) throws -> String {
        if appNames == nil {
            var names: [String: String] = [:]
            try snapshot.withCursor(on: snapshot.databases.credentials) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    if let record = CredentialRecord(current.value), case .app(let source) = record.principal, !source.name.isEmpty {
                        names[source.bundleIdentifier] = source.name
                    }
                    entry = try cursor.next()
                }
            }
            appNames = names
        }
        return Principal.app(Source(bundleIdentifier: bundle, name: appNames?[bundle] ?? "")).narrated
    }

    /// The sync version of the object that replaced another: from its save, or from its
    /// tombstone when it is gone too.
    private func syncVersion(of uuid: UUID) throws -> Int64? {
        if let stored = try StoredObject.load(uuid.bytes, in: snapshot) {
            let projector = Projector(databases: snapshot.databases, units: SummaryCache())
            return try projector.savedSummary(stored: try Ledger.storedEvent(stored.sequence, in: snapshot), sequence: stored.sequence).syncVersion
        }
        if let value = try snapshot.get(uuid.bytes, in: snapshot.databases.tombstones) {
            return try Tombstone(uuid: uuid, stored: value, type: "", cipher: snapshot.databases.cipher).syncVersion
        }
        return nil
    }

    /// A UUID in full: time-ordered UUIDs share their first digits, so no prefix tells them apart.
    static func uuid(_ uuid: UUID) -> String { uuid.uuidString }

    static func list(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " and " + items.last!
    }

    static func day(_ date: Date) -> String { date.formatted(.iso8601.year().month().day()) }

    /// A time in microseconds since 1970, to the second (UTC).
    static func time(_ microseconds: Int64) -> String { date(microseconds: microseconds).formatted(.iso8601) }

    static func caseName(_ characteristic: Characteristic) -> String {
        switch characteristic {
        case .dateOfBirth(let year, let month, let day): String(format: "%04d-%02d-%02d", year, month, day)
        case .biologicalSex(let value): "\(value)"
        case .bloodType(let value): "\(value)"
        case .fitzpatrickSkinType(let value): "type \(value)"
        case .wheelchairUse(let value): "\(value)"
        case .activityMoveMode(let value): "\(value)"
        case .cardioFitnessMedicationsUse(let value): "\(value)"
        }
    }
}
