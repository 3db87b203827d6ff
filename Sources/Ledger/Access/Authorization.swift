import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

extension Ledger {
    /// Most types one authorization request may name.
    public static let maximumRequestedTypes = 1_000
    /// Most objects one per-object read selection may hold.
    public static let maximumSelectedObjects = 10_000

    // MARK: Apps

    /// Asks the owner for authorization to share (save) and read types, all at once
    /// (HealthKit's `requestAuthorization(toShare:read:)`). Pairs never asked before become
    /// pending requests, recorded as one event; asking again for the same pairs changes nothing.
    ///
    /// - Returns: how many (type, direction) pairs were new.
    /// - Throws: ``HealthError`` `invalidArgument` for nothing requested, a correlation type
    ///   (ask for its member types), sharing a characteristic type, or reading a per-object type.
    @discardableResult
    public func requestAuthorization(toShare share: Set<ObjectType>, read: Set<ObjectType>, by principal: Principal) async throws -> Int {
        let source = try Self.requestingApp(principal)
        try Self.validateRequest(share: share, read: read)
        let app = source.bundleIdentifier
        let shareSorted = share.sorted { $0.identifier < $1.identifier }
        let readSorted = read.sorted { $0.identifier < $1.identifier }
        return try await committer.submit { context in
            var body = Healthledger_V1_AuthorizationRequested()
            for type in shareSorted where !(try Self.record(app, .share, type, context.reads).requested) {
                body.shareTypes.append(type.identifier)
            }
            for type in readSorted where !(try Self.record(app, .read, type, context.reads).requested) {
                body.readTypes.append(type.identifier)
            }
            let count = body.shareTypes.count + body.readTypes.count
            guard count > 0 else { return 0 }
            try Self.appendAccessEvent(.authorizationRequested, by: principal, body: try body.serializedBytes(), in: context)
            return count
        }
    }

    /// Asks the owner to let the app read some objects of a per-object type (vision
    /// prescriptions), optionally only those overlapping `interval`. Every call is a new
    /// request the owner answers by selecting objects; the current selection stays until then.
    public func requestObjectReadAuthorization(for type: ObjectType, overlapping interval: DateInterval? = nil, by principal: Principal) async throws {
        _ = try Self.requestingApp(principal)
        guard type.isReadPerObject else {
            throw HealthError.invalidArgument("\(type) is not read per object; request it with requestAuthorization", field: "type")
        }
        var body = Healthledger_V1_AuthorizationRequested()
        body.objectRead.type = type.identifier
        if let interval {
            body.objectRead.startUs = microseconds(interval.start)
            body.objectRead.endUs = microseconds(interval.end)
        }
        let bytes: [UInt8] = try body.serializedBytes()
        try await committer.submit { context in
            try Self.appendAccessEvent(.authorizationRequested, by: principal, body: bytes, in: context)
        }
    }

    /// Whether requesting these types would ask the owner anything new.
    public func requestStatus(toShare share: Set<ObjectType>, read: Set<ObjectType>, for principal: Principal) throws -> AuthorizationRequestStatus {
        let app = try Self.requestingApp(principal).bundleIdentifier
        try Self.validateRequest(share: share, read: read)
        return try self.read { snapshot in
            for type in share where !(try Self.record(app, .share, type, snapshot).requested) { return .shouldRequest }
            for type in read where !(try Self.record(app, .read, type, snapshot).requested) { return .shouldRequest }
            return .unnecessary
        }
    }

    /// The caller's share status for `type`. The owner may share everything. (There is
    /// deliberately no read counterpart: an app never learns whether it may read.)
    public func sharingStatus(for type: ObjectType, of principal: Principal) throws -> SharingStatus {
        switch principal {
        case .owner, .system: return .sharingAuthorized
        case .operator: return .sharingDenied
        case .app(let source):
            return try read { snapshot in
                Self.sharingStatus(try Self.record(source.bundleIdentifier, .share, type, snapshot))
            }
        }
    }

    // MARK: The owner

    /// Decides one (app, type, direction) pair: grant, deny, or revoke a grant. Recorded as
    /// an event; takes effect for the app's next call, and ends its streams that relied on
    /// a revoked read grant. Repeating the current decision records nothing.
    public func decideAuthorization(
        app: String, type: ObjectType, direction: AuthorizationDirection, decision: AuthorizationDecision, by principal: Principal
    ) async throws {
        try Self.requireOwner(principal)
        try Self.validateDecisionTarget(type: type, direction: direction)
        var body = Healthledger_V1_AuthorizationDecided()
        body.app = app
        body.type = type.identifier
        body.direction = Healthledger_V1_AuthorizationDirection(rawValue: Int(direction.rawValue)) ?? .unspecified
        body.decision = Healthledger_V1_AuthorizationDecided.Decision(rawValue: Int(decision.rawValue)) ?? .unspecified
        let bytes: [UInt8] = try body.serializedBytes()
        let changed: Bool = try await committer.submit { context in
            try Self.requireKnownApp(app, in: context.reads)
            let record = try Self.record(app, direction, type, context.reads)
            if decision == .revoked, record.decision != .granted {
                throw HealthError.invalidArgument("\(app) was not granted \(direction) of \(type): nothing to revoke", field: "decision")
            }
            guard record.decision != decision else { return false }
            try Self.appendAccessEvent(.authorizationDecided, by: principal, body: bytes, in: context)
            return true
        }
        if changed { accessWatchers.notify(.authorization(app: app)) }
    }

    /// Sets which objects of a per-object type (vision prescriptions) the app may read,
    /// replacing the previous selection (empty: none). Every object must exist and be of
    /// the type. Recorded as an event; the app's streams that read a deselected object end.
    public func setObjectReadSelection(app: String, type: ObjectType, objects: [UUID], by principal: Principal) async throws {
        try Self.requireOwner(principal)
        guard type.isReadPerObject else { throw HealthError.invalidArgument("\(type) is not read per object", field: "type") }
        let uuids = Array(Set(objects.map(\.bytes))).sorted { $0.lexicographicallyPrecedes($1) }
        guard uuids.count <= Self.maximumSelectedObjects else {
            throw HealthError(.dataSizeExceeded, "a selection holds at most \(Self.maximumSelectedObjects) objects, got \(uuids.count)", field: "uuids")
        }
        var body = Healthledger_V1_ObjectReadSelectionChanged()
        body.app = app
        body.type = type.identifier
        body.uuids = uuids.map { Data($0) }
        let bytes: [UInt8] = try body.serializedBytes()
        try await committer.submit { context in
            try Self.requireKnownApp(app, in: context.reads)
            for uuid in uuids {
                guard let stored = try StoredObject.load(uuid, in: context.reads), stored.type == type.code else {
                    throw HealthError(.noData, "no \(type) with UUID \(UUID(bytes: uuid)!)", field: "uuids")
                }
            }
            try Self.appendAccessEvent(.objectReadSelectionChanged, by: principal, body: bytes, in: context)
        }
        accessWatchers.notify(.authorization(app: app))
    }

    /// Every (app, type, direction) pair the owner or an app has touched, or one app's.
    /// Pending per-object requests list the objects they match in `matching`.
    public func authorizations(app: String? = nil, as principal: Principal) throws -> [AuthorizationEntry] {
        try Self.requireOwner(principal)
        return try read { snapshot in
            var entries: [AuthorizationEntry] = []
            let prefix = app.map(AuthorizationRecord.appPrefix) ?? []
            try snapshot.withCursor(on: snapshot.databases.authorizations) { cursor in
                var entry = prefix.isEmpty ? try cursor.first() : try cursor.seek(atLeast: prefix)
                while let current = entry, current.key.starts(with: prefix) {
                    let key = Array(current.key)
                    let length = Int(key[0])
                    guard key.count == 1 + length + 5, let direction = AuthorizationDirection(rawValue: key[1 + length]),
                        let record = AuthorizationRecord(current.value)
                    else { throw LedgerFailure.corrupted("an authorization record is damaged") }
                    let bundle = String(decoding: key[1..<(1 + length)], as: UTF8.self)
                    let typeCode = KeyEncoding.uint32(current.key, at: 2 + length)
                    let type = try Self.objectType(code: typeCode)
                    entries.append(try self.entry(bundle, type, direction, record, in: snapshot))
                    entry = try cursor.next()
                }
            }
            return entries
        }
    }

    private func entry(_ app: String, _ type: ObjectType, _ direction: AuthorizationDirection, _ record: AuthorizationRecord, in snapshot: LedgerSnapshot) throws
        -> AuthorizationEntry
    {
        let source = try SourceRegistry.source(bundle: app, in: snapshot) ?? Self.requester(app, record, in: snapshot)
        let selected = direction == .objectRead
            ? try AuthorizationRecord.selection(app: app, type: type.code, in: snapshot).map { UUID(bytes: $0)! } : []
        return AuthorizationEntry(
            app: source, type: type, direction: direction, requested: record.requested, decision: record.decision,
            requestedAt: try Self.commitTime(record.requestSequence, in: snapshot),
            decidedAt: try Self.commitTime(record.decisionSequence, in: snapshot),
            rangeStart: record.rangeStartUs.map { date(microseconds: $0) }, rangeEnd: record.rangeEndUs.map { date(microseconds: $0) },
            selected: selected)
    }

    /// The requests waiting for the owner's decision. A per-object request lists the
    /// objects it matches (every source's), for the owner to select from.
    public func pendingAuthorizations(app: String? = nil, as principal: Principal) throws -> [AuthorizationEntry] {
        var pending = try authorizations(app: app, as: principal).filter(\.isPending)
        for index in pending.indices where pending[index].direction == .objectRead {
            let entry = pending[index]
            let interval = DateInterval(start: entry.rangeStart ?? .distantPast, end: max(entry.rangeEnd ?? .distantFuture, entry.rangeStart ?? .distantPast))
            pending[index].matching = try samples(SampleQuery(type: entry.type, interval: interval), as: .owner).map(\.uuid)
        }
        return pending
    }

    /// The audit trail of authorization: requests, decisions and selections, oldest first.
    public func authorizationHistory(app: String? = nil, as principal: Principal) throws -> [AuthorizationEvent] {
        try Self.requireOwner(principal)
        return try read { snapshot in
            var sequences: [UInt64] = []
            let prefix = app.map(AuthorizationRecord.appPrefix) ?? []
            try snapshot.withCursor(on: snapshot.databases.authorizationLog) { cursor in
                var entry = prefix.isEmpty ? try cursor.first() : try cursor.seek(atLeast: prefix)
                while let current = entry, current.key.starts(with: prefix), current.key.count >= 9 {
                    sequences.append(KeyEncoding.uint64(current.key, at: current.key.count - 8))
                    entry = try cursor.next()
                }
            }
            return try sequences.sorted().map { sequence in
                let stored = try Ledger.storedEvent(sequence, in: snapshot)
                return try AuthorizationEvent(try LedgerEvent(stored: stored))
            }
        }
    }

    /// The sources of `type` by priority, highest first: the owner's order, then the
    /// other sources in the order in which they first saved the type.
    public func sourcePriority(for type: ObjectType, as principal: Principal) throws -> [Source] {
        try Self.requireOwner(principal)
        return try read { snapshot in try Self.sourceOrder(type.code, in: snapshot) }
    }

    /// The sources of a type, highest priority first: the owner's order, then the others in
    /// the order of their first save.
    static func sourceOrder(_ type: UInt32, in snapshot: LedgerSnapshot) throws -> [Source] {
        let sources = try SourceRegistry.sources(of: type, in: snapshot)
        let ordered = try Self.ownerOrder(type, in: snapshot)
        let rank = Dictionary(ordered.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let sorted = sources.enumerated().sorted { a, b in
            (rank[a.element.bundleIdentifier] ?? ordered.count + a.offset, a.offset)
                < (rank[b.element.bundleIdentifier] ?? ordered.count + b.offset, b.offset)
        }
        return sorted.map(\.element)
    }

    /// Sets the owner's order of sources for `type` (highest priority first). Every listed
    /// source must have saved objects of the type; an empty list restores the default order.
    public func setSourcePriority(for type: ObjectType, bundleIdentifiers: [String], by principal: Principal) async throws {
        try Self.requireOwner(principal)
        guard Set(bundleIdentifiers).count == bundleIdentifiers.count else {
            throw HealthError.invalidArgument("a source appears twice in the order", field: "bundle_identifiers")
        }
        var body = Healthledger_V1_SourcePriorityChanged()
        body.type = type.identifier
        body.bundleIdentifiers = bundleIdentifiers
        let bytes: [UInt8] = try body.serializedBytes()
        try await committer.submit { context in
            let known = Set(try SourceRegistry.sources(of: type.code, in: context.reads).map(\.bundleIdentifier))
            for bundle in bundleIdentifiers where !known.contains(bundle) {
                throw HealthError(.noData, "'\(bundle)' has saved no \(type)", field: "bundle_identifiers")
            }
            try Self.appendAccessEvent(.sourcePriorityChanged, by: principal, body: bytes, in: context)
        }
    }

    // MARK: Helpers

    static func ownerOrder(_ type: UInt32, in snapshot: LedgerSnapshot) throws -> [String] {
        let key = KeyEncoding.typeKey(type)
        guard let stored = try snapshot.get(key, in: snapshot.databases.sourcePriority) else { return [] }
        var bundles: [String] = []
        var index = 0
        while index < stored.count {
            let length = Int(stored[index])
            guard index + 1 + length <= stored.count else { throw LedgerFailure.corrupted("a source priority record is damaged") }
            bundles.append(String(decoding: stored[(index + 1)..<(index + 1 + length)], as: UTF8.self))
            index += 1 + length
        }
        return bundles
    }

    static func record(_ app: String, _ direction: AuthorizationDirection, _ type: ObjectType, _ snapshot: LedgerSnapshot) throws
        -> AuthorizationRecord
    {
        try AuthorizationRecord.load(app: app, direction: direction, type: type.code, in: snapshot)
    }

    static func sharingStatus(_ record: AuthorizationRecord) -> SharingStatus {
        switch record.decision {
        case .granted: .sharingAuthorized
        case .denied, .revoked: .sharingDenied
        case nil: .notDetermined
        }
    }

    /// Refuses a save or delete of `type` by an app without share authorization.
    static func requireSharing(_ type: ObjectType, by principal: Principal, in context: WriteContext) throws {
        guard case .app(let source) = principal else { return }
        if type.family == .correlation {
            // A correlation is shared through its member types: changing one (deleting it,
            // attaching to it) needs sharing of one of them, as saving it did.
            let members = (TypeCatalogue.correlationTypes[type.identifier] ?? []).sorted()
            for member in members {
                let record = try record(source.bundleIdentifier, .share, try ObjectType(member), context.reads)
                if sharingStatus(record) == .sharingAuthorized { return }
            }
            throw HealthError(.authorizationDenied, "\(source.bundleIdentifier) is not authorized to share any member type of \(type)", field: "type")
        }
        if type.isReadOnlyForApps {
            throw HealthError(.authorizationDenied, "\(readOnlyName(type)) is read-only: apps never save or delete one", field: "type")
        }
        try requireSharingAuthorized(sharingStatus(try record(source.bundleIdentifier, .share, type, context.reads)), of: type, by: source)
    }

    /// Refuses an app whose share status for `type` is not authorized, saying why.
    static func requireSharingAuthorized(_ status: SharingStatus, of type: ObjectType, by source: Source) throws {
        switch status {
        case .sharingAuthorized: return
        case .sharingDenied:
            throw HealthError(.authorizationDenied, "\(source.bundleIdentifier) is not authorized to share \(type)", field: "type")
        case .notDetermined:
            throw HealthError(
                .authorizationNotDetermined, "\(source.bundleIdentifier) has no decision to share \(type): request authorization first", field: "type")
        }
    }

    static func appendAccessEvent(_ kind: EventKind, by principal: Principal, body: [UInt8], in context: WriteContext) throws {
        try context.append(
            kind: kind, actor: principal, objectType: nil, objectUUID: nil, body: body,
            change: try Projector.change(kind: kind, actor: principal, body: body))
    }

    static func requestingApp(_ principal: Principal) throws -> Source {
        switch principal {
        case .app(let source): return source
        case .owner, .system: throw RoleRefusal.ownerRequesting
        case .operator: throw ReadScope.operatorDenied
        }
    }

    static func requireOwner(_ principal: Principal) throws {
        switch principal {
        case .owner, .system: return
        case .app: throw RoleRefusal.managingAuthorization
        case .operator: throw ReadScope.operatorDenied
        }
    }

    static func validateRequest(share: Set<ObjectType>, read: Set<ObjectType>) throws {
        guard !share.isEmpty || !read.isEmpty else {
            throw HealthError.invalidArgument("nothing requested: both the share and the read sets are empty", field: "types")
        }
        guard share.count + read.count <= maximumRequestedTypes else {
            throw HealthError(.dataSizeExceeded, "a request names at most \(maximumRequestedTypes) types", field: "types")
        }
        for type in share.union(read) where type.family == .correlation {
            throw HealthError.invalidArgument("correlation type \(type) cannot be requested: request its member types", field: "types")
        }
        for type in share where type.isReadOnlyForApps {
            throw HealthError.invalidArgument("\(readOnlyName(type)) is read-only: it cannot be shared", field: "share_types")
        }
        for type in read where type.isReadPerObject {
            throw HealthError.invalidArgument("\(type) is read per object: use requestObjectReadAuthorization", field: "read_types")
        }
    }

    /// How a refusal names a type apps may only read.
    private static func readOnlyName(_ type: ObjectType) -> String {
        type.family == .characteristic ? "characteristic type \(type)" : "\(type) (the system's, as in HealthKit)"
    }

    static func validateDecisionTarget(type: ObjectType, direction: AuthorizationDirection) throws {
        if type.family == .correlation {
            throw HealthError.invalidArgument("correlation type \(type) is authorized through its member types", field: "type")
        }
        if direction == .share, type.isReadOnlyForApps {
            throw HealthError.invalidArgument("\(readOnlyName(type)) is read-only", field: "type")
        }
        if direction == .read, type.isReadPerObject {
            throw HealthError.invalidArgument("\(type) is read per object: select objects instead", field: "type")
        }
        if direction == .objectRead {
            throw HealthError.invalidArgument("per-object read is decided by selecting objects", field: "direction")
        }
    }

    /// The owner decides only for apps the ledger knows: one holding a credential or
    /// having asked for authorization (a typo must not create a grant for nobody).
    static func requireKnownApp(_ app: String, in snapshot: LedgerSnapshot) throws {
        guard !app.isEmpty, app.utf8.count <= ObjectLimits.maximumIdentifierLength else {
            throw HealthError.invalidArgument("an app is named by its bundle identifier (1–255 bytes)", field: "app")
        }
        let prefix = AuthorizationRecord.appPrefix(app)
        var known = false
        try snapshot.withCursor(on: snapshot.databases.authorizations) { cursor in
            if let entry = try cursor.seek(atLeast: prefix), entry.key.starts(with: prefix) { known = true }
        }
        if !known {
            try snapshot.withCursor(on: snapshot.databases.credentials) { cursor in
                var entry = try cursor.first()
                while let current = entry, !known {
                    if let record = CredentialRecord(current.value), case .app(let source) = record.principal, source.bundleIdentifier == app { known = true }
                    entry = try cursor.next()
                }
            }
        }
        guard known else { throw HealthError(.noData, "no app '\(app)' holds a credential or has asked for authorization", field: "app") }
    }

    /// The app's source as it asked (when it never saved anything), from its request event.
    static func requester(_ app: String, _ record: AuthorizationRecord, in snapshot: LedgerSnapshot) throws -> Source {
        if record.requestSequence > 0, let stored = try? Ledger.storedEvent(record.requestSequence, in: snapshot),
            case .app(let source) = try LedgerEvent(stored: stored).actor
        {
            return source
        }
        return Source(bundleIdentifier: app, name: "")
    }

    static func commitTime(_ sequence: UInt64, in snapshot: LedgerSnapshot) throws -> Date? {
        guard sequence > 0, try snapshot.contains(KeyEncoding.sequenceKey(sequence), in: snapshot.databases.events) else { return nil }
        return try LedgerEvent(stored: try Ledger.storedEvent(sequence, in: snapshot)).commitTime
    }
}

extension AuthorizationEvent {
    init(_ event: LedgerEvent) throws {
        let app: String
        let action: Action
        switch try event.decodedBody() {
        case .authorizationRequested(let share, let read, let objectRead):
            if case .app(let source) = event.actor { app = source.bundleIdentifier } else { app = "" }
            if let objectRead {
                action = .requestedObjects(
                    try ObjectType(objectRead.type), start: objectRead.startUs.map { date(microseconds: $0) },
                    end: objectRead.endUs.map { date(microseconds: $0) })
            } else {
                action = .requested(share: try share.map(ObjectType.init), read: try read.map(ObjectType.init))
            }
        case .authorizationDecided(let decidedApp, let type, let direction, let decision):
            app = decidedApp
            action = .decided(try ObjectType(type), direction, decision)
        case .objectReadSelectionChanged(let selectingApp, let type, let objects):
            app = selectingApp
            action = .selectedObjects(try ObjectType(type), count: objects.count)
        default:
            throw LedgerFailure.corrupted("event \(event.sequence) is not an authorization event")
        }
        self.init(sequence: event.sequence, time: event.commitTime, actor: "\(event.actor)", app: app, action: action)
    }
}

/// The refusals of what only the owner (or only an app) may do: the ledger's own checks and
/// the server's method table, which checks the caller before a request's fields, give the same.
package enum RoleRefusal {
    package static let managingAuthorization = HealthError(.authorizationDenied, "only the owner manages authorization")
    package static let settingCharacteristics = HealthError(.authorizationDenied, "only the owner sets characteristics")
    package static let readingAudit = HealthError(.authorizationDenied, "the audit trail is the owner's: an app may not read it")
    package static let readingAccessRecords = HealthError(.authorizationDenied, "the access records are the owner's: an app may not read them")
    package static let managingCredentials = HealthError(.authorizationDenied, "only the owner lists and revokes the ledger's credentials")
    package static let readingTreeHeads = HealthError(.authorizationDenied, "tree heads and proofs are the owner's: an app may not read them")
    package static let ownerRequesting = HealthError.invalidArgument("only apps request authorization; the owner has it all", field: "principal")
}
