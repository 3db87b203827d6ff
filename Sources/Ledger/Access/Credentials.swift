import Crypto
import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import Synchronization

/// The stored form of a credential: the secret's hash, whom it authenticates, its lifetime
/// and revocation.
///
/// hash(32) kind(1) revoked(1) issuedUs(8) expiresUs(8) revokedUs(8), then bundle, name,
/// label and replacedBy, each as length(2) bytes. Times are signed big-endian microseconds
/// (expiresUs 0: never; revokedUs only when revoked, 0 for a revocation without a time).
struct CredentialRecord: Sendable {
    var hash: [UInt8]
    var principal: Principal
    var label: String
    var issuedUs: Int64
    var expiresUs: Int64
    var revokedUs: Int64?
    var replacedBy: String

    init(_ issue: EventBody.CredentialIssue) {
        hash = issue.secretHash
        principal = issue.principal
        label = issue.label
        issuedUs = issue.issuedUs
        expiresUs = issue.expiresUs
        revokedUs = nil
        replacedBy = ""
    }

    var encoded: [UInt8] {
        var value = hash
        value.append(UInt8(principal.schemaKind))
        value.append(revokedUs == nil ? 0 : 1)
        for time in [issuedUs, expiresUs, revokedUs ?? 0] { KeyEncoding.append(UInt64(bitPattern: time), to: &value) }
        var (bundle, name) = ("", "")
        if case .app(let source) = principal { (bundle, name) = (source.bundleIdentifier, source.name) }
        for text in [bundle, name, label, replacedBy] {
            let bytes = Array(text.utf8.prefix(Int(UInt16.max)))
            value.append(UInt8(bytes.count >> 8))
            value.append(UInt8(bytes.count & 0xFF))
            value += bytes
        }
        return value
    }

    static let fixedLength = 32 + 2 + 24

    init?(_ stored: UnsafeRawBufferPointer) {
        guard stored.count >= Self.fixedLength else { return nil }
        hash = Array(stored[0..<32])
        let kind = Healthledger_V1_Actor.Kind(rawValue: Int(stored[32])) ?? .unspecified
        let revoked = stored[33] == 1
        issuedUs = Int64(bitPattern: KeyEncoding.uint64(stored, at: 34))
        expiresUs = Int64(bitPattern: KeyEncoding.uint64(stored, at: 42))
        revokedUs = revoked ? Int64(bitPattern: KeyEncoding.uint64(stored, at: 50)) : nil
        var texts: [String] = []
        var offset = Self.fixedLength
        for _ in 0..<4 {
            guard offset + 2 <= stored.count else { return nil }
            let length = Int(stored[offset]) << 8 | Int(stored[offset + 1])
            guard offset + 2 + length <= stored.count else { return nil }
            texts.append(String(decoding: stored[(offset + 2)..<(offset + 2 + length)], as: UTF8.self))
            offset += 2 + length
        }
        var actor = Healthledger_V1_Actor()
        actor.kind = kind
        if kind == .app {
            actor.source.bundleIdentifier = texts[0]
            actor.source.name = texts[1]
        }
        principal = Principal(actor)
        label = texts[2]
        replacedBy = texts[3]
    }

    func info(id: String) -> CredentialInfo {
        CredentialInfo(
            id: id, principal: principal, label: label, issued: issuedUs == 0 ? nil : date(microseconds: issuedUs),
            expires: expiresUs == 0 ? nil : date(microseconds: expiresUs),
            revocation: revokedUs.map { $0 == 0 ? .distantPast : date(microseconds: $0) }, replacedBy: replacedBy)
    }

    static func load(_ id: String, in snapshot: LedgerSnapshot) throws -> CredentialRecord? {
        // No credential has an empty id or one longer than a key may be (LMDB would refuse the
        // look-up itself, as a storage failure).
        guard !id.isEmpty, id.utf8.count <= 256 else { return nil }
        return try snapshot.get(Array(id.utf8), in: snapshot.databases.credentials).flatMap(CredentialRecord.init)
    }
}

/// The parts of a credential string `hl1:<ledger>:<id>:<secret>`.
public struct CredentialString: Sendable, Hashable {
    public var ledgerID: String
    public var id: String
    var secret: String

    /// Parses a credential string; nil when it is not one.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard text.utf8.count <= 256, parts.count == 4, parts[0] == "hl1", parts[2].count == 16, !parts[3].isEmpty else { return nil }
        ledgerID = String(parts[1])
        id = String(parts[2])
        secret = String(parts[3])
    }

    init(ledgerID: String, id: String, secret: String) {
        self.ledgerID = ledgerID
        self.id = id
        self.secret = secret
    }

    public var text: String { "hl1:\(ledgerID):\(id):\(secret)" }

    /// A new credential for `ledgerID`: 8 random bytes of id (16 hex digits), 32 of secret
    /// (base64url).
    static func random(ledgerID: String) -> CredentialString {
        var random = SystemRandomNumberGenerator()
        let id = (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &random)) }.joined()
        let secretBytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
        let secret = Data(secretBytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return CredentialString(ledgerID: ledgerID, id: id, secret: secret)
    }
}

extension Ledger {
    /// Issues a bearer credential for `principal` (the owner or an app) and records the
    /// issue as an event. The returned string is shown once: only its hash is kept.
    ///
    /// - Parameter lifetime: how long it authenticates; after it, calls are refused with
    ///   ``CredentialRefusal/expired(at:)``.
    /// - Returns: the credential string, `hl1:<ledger>:<id>:<secret>`.
    public func issueCredential(
        for principal: Principal, label: String = "", lifetime: CredentialLifetime = .unlimited, by issuer: Principal = .operator
    ) async throws -> String {
        switch principal {
        case .owner: break
        case .app(let source):
            guard !source.bundleIdentifier.isEmpty, source.bundleIdentifier.utf8.count <= ObjectLimits.maximumIdentifierLength,
                source.name.utf8.count <= ObjectLimits.maximumIdentifierLength
            else { throw HealthError.invalidArgument("an app needs a bundle identifier (1–255 bytes) and a name of at most 255 bytes", field: "bundleIdentifier") }
            // The owner's source and imported sources are the ledger's: an app named like
            // one of them would change (and share) what the owner entered or imported.
            guard !source.bundleIdentifier.lowercased().hasPrefix(Source.reservedPrefix) else {
                throw HealthError.invalidArgument(
                    "bundle identifiers under '\(Source.reservedPrefix)' are reserved for the ledger's own sources", field: "bundleIdentifier")
            }
        case .system, .operator:
            throw HealthError.invalidArgument("credentials are issued to the owner or to an app", field: "principal")
        }
        guard label.utf8.count <= ObjectLimits.maximumIdentifierLength else {
            throw HealthError.invalidArgument("a credential's label has at most 255 bytes", field: "label")
        }
        let lifetimeUs = try lifetime.microseconds(field: "expires_in_seconds")
        let credential = CredentialString.random(ledgerID: self.id)
        try await committer.submit { context in
            try Self.appendIssue(
                of: credential, for: principal, label: label, lifetimeUs: lifetimeUs, replacing: "", by: issuer, in: context)
        }
        return credential.text
    }

    /// Rotates a credential: issues a new one for the same principal, with the same label,
    /// and revokes the old one from the end of `grace` (0: at once), in one commit. The old
    /// one's streams end when its grace period does.
    ///
    /// - Parameter lifetime: the new credential's; nil: the old one's (its expiry minus its
    ///   issue time), or unlimited if it had none.
    /// - Returns: the new credential string, shown once.
    public func rotateCredential(
        id: String, grace: Duration, lifetime: CredentialLifetime? = nil, by issuer: Principal = .operator
    ) async throws -> String {
        guard grace >= .zero, grace <= CredentialLifetime.maximumGrace else {
            throw HealthError.invalidArgument("a rotation's grace period is 0 s to 365 days, got \(grace)", field: "grace_seconds")
        }
        let graceUs = grace.microseconds
        let newLifetimeUs = try lifetime?.microseconds(field: "expires_in_seconds")
        let credential = CredentialString.random(ledgerID: self.id)
        try await committer.submit { context in
            let record = try Self.liveRecord(id, at: context.commitTimeUs, in: context)
            guard record.revokedUs == nil else {
                throw HealthError(
                    .invalidArgument, "credential '\(id)' was already rotated or revoked (refused from \(record.info(id: id).revocation!.formatted(.iso8601)))",
                    field: "id")
            }
            let lifetimeUs = newLifetimeUs ?? (record.expiresUs != 0 && record.issuedUs != 0 ? record.expiresUs - record.issuedUs : 0)
            try Self.appendIssue(of: credential, for: record.principal, label: record.label, lifetimeUs: lifetimeUs, replacing: id, by: issuer, in: context)
            try Self.appendRevocation(of: id, effectiveUs: context.commitTimeUs + graceUs, replacedBy: credential.id, by: issuer, in: context)
        }
        accessWatchers.notify(.credentialRevoked(id: id))
        return credential.text
    }

    /// Revokes a credential by id; recorded as an event. Calls made with it fail from now
    /// on and its streams end; a credential in a rotation's grace period is refused at once.
    ///
    /// - Parameter effectiveAfter: how long after now the revocation takes effect (at most
    ///   ``CredentialLifetime/maximumGrace``; zero: at once). The credential works until then,
    ///   as in a rotation's grace period; an earlier revocation already recorded stands.
    public func revokeCredential(id: String, by issuer: Principal = .operator, effectiveAfter: Duration = .zero) async throws {
        guard effectiveAfter >= .zero, effectiveAfter <= CredentialLifetime.maximumGrace else {
            throw HealthError.invalidArgument("a revocation takes effect 0 s to 365 days after it is made, got \(effectiveAfter)", field: "effective_in_seconds")
        }
        let delayUs = effectiveAfter.microseconds
        try await committer.submit { context in
            let record = try Self.liveRecord(id, at: context.commitTimeUs, in: context)
            let effectiveUs = context.commitTimeUs + delayUs
            // An earlier revocation already recorded stands: a later one would change nothing.
            if let recorded = record.revokedUs, recorded <= effectiveUs {
                throw HealthError.invalidArgument(
                    "credential '\(id)' is already to be refused from \(date(microseconds: recorded).formatted(.iso8601)), before the time asked", field: "id")
            }
            try Self.appendRevocation(of: id, effectiveUs: effectiveUs, replacedBy: "", by: issuer, in: context)
        }
        accessWatchers.notify(.credentialRevoked(id: id))
    }

    /// The record of credential `id`, which must not be refused already at `nowUs`.
    private static func liveRecord(_ id: String, at nowUs: Int64, in context: WriteContext) throws -> CredentialRecord {
        guard let record = try CredentialRecord.load(id, in: LedgerSnapshot(context.txn, context.databases)) else {
            throw HealthError(.noData, "no credential '\(id)'", field: "id")
        }
        switch record.info(id: id).refusal(at: date(microseconds: nowUs)) {
        case nil: return record
        case .revoked?: throw HealthError.invalidArgument("credential '\(id)' is already revoked", field: "id")
        case .expired(let time)?: throw HealthError.invalidArgument("credential '\(id)' expired at \(time.formatted(.iso8601))", field: "id")
        case .unknown?: throw HealthError(.noData, "no credential '\(id)'", field: "id")
        }
    }

    private static func appendIssue(
        of credential: CredentialString, for principal: Principal, label: String, lifetimeUs: Int64, replacing: String, by issuer: Principal,
        in context: WriteContext
    ) throws {
        var body = Healthledger_V1_CredentialIssued()
        body.credentialID = credential.id
        body.secretSha256 = Data(SHA256.hash(data: Array(credential.secret.utf8)))
        body.principal = principal.schema
        body.label = label
        body.issuedUs = context.commitTimeUs
        body.expiresUs = lifetimeUs == 0 ? 0 : context.commitTimeUs + lifetimeUs
        body.replaces = replacing
        let bytes: [UInt8] = try body.serializedBytes()
        try context.append(
            kind: .credentialIssued, actor: issuer, objectType: nil, objectUUID: nil, body: bytes,
            change: try Projector.change(kind: .credentialIssued, actor: issuer, body: bytes))
    }

    private static func appendRevocation(of id: String, effectiveUs: Int64, replacedBy: String, by issuer: Principal, in context: WriteContext) throws {
        var body = Healthledger_V1_CredentialRevoked()
        body.credentialID = id
        body.effectiveUs = effectiveUs
        body.replacedBy = replacedBy
        let bytes: [UInt8] = try body.serializedBytes()
        try context.append(
            kind: .credentialRevoked, actor: issuer, objectType: nil, objectUUID: nil, body: bytes,
            change: try Projector.change(kind: .credentialRevoked, actor: issuer, body: bytes))
    }

    /// The credentials issued for this ledger.
    public func credentials() throws -> [CredentialInfo] {
        try read { snapshot in
            var result: [CredentialInfo] = []
            try snapshot.withCursor(on: snapshot.databases.credentials) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    if let record = CredentialRecord(current.value) { result.append(record.info(id: String(decoding: current.key, as: UTF8.self))) }
                    entry = try cursor.next()
                }
            }
            return result
        }
    }

    /// Credential `id`, or nil when this ledger has none by that id.
    public func credential(id: String) throws -> CredentialInfo? {
        try read { snapshot in try CredentialRecord.load(id, in: snapshot)?.info(id: id) }
    }

    /// The principal a credential authenticates, or nil when it is unknown, wrong, expired or revoked.
    /// The secret's hash is compared in constant time.
    public func authenticate(_ credential: CredentialString) throws -> Principal? {
        guard credential.ledgerID == id else { return nil }
        do { return try authenticate(id: credential.id, secretHash: Array(SHA256.hash(data: Array(credential.secret.utf8)))).principal } catch is CredentialRefusal {
            return nil
        }
    }

    /// The principal of credential `id` if `secretHash` is its secret's hash and it is
    /// neither expired nor revoked: the record is as current as a read now, so a revocation
    /// applies to the next call (``CredentialRecordCache``).
    ///
    /// - Throws: ``CredentialRefusal`` when it does not authenticate (why, only to the
    ///   holder of the secret).
    /// - Returns: the principal, and when the credential stops authenticating (nil: not
    ///   before a revocation).
    func authenticate(id: String, secretHash presented: [UInt8]) throws -> (principal: Principal, end: Date?) {
        let record = try credentialRecords.record(id, current: environment.lastCommittedTransaction) {
            try read { snapshot in (try CredentialRecord.load(id, in: snapshot), snapshot.txn.id) }
        }
        guard let record else { throw CredentialRefusal.unknown }
        var difference: UInt8 = 0
        for (a, b) in zip(record.hash, presented) { difference |= a ^ b }
        guard difference == 0, record.hash.count == presented.count else { throw CredentialRefusal.unknown }
        guard record.revokedUs != nil || record.expiresUs != 0 else { return (record.principal, nil) }
        let info = record.info(id: id)
        if let refusal = info.refusal() { throw refusal }
        return (record.principal, info.end)
    }
}

/// Credential records read for authentication, each with the commit it was read at: while
/// no transaction has committed since (``Environment/lastCommittedTransaction``, which
/// counts other processes' commits too), the record is what a read would find, so a
/// connection's next call skips the read transaction. Any commit — a revocation, a save, an
/// access record — makes the next call read again.
final class CredentialRecordCache: Sendable {
    /// Enough for every credential of a ledger in use; when full it starts again empty.
    static let capacity = 256
    private let entries = Mutex<[String: (record: CredentialRecord?, transaction: UInt64)]>([:])

    /// The record of credential `id` (nil: none) as of commit `current`: the one kept when it
    /// was read at that commit, else `read`'s (the record and the commit its snapshot saw).
    func record(_ id: String, current: UInt64, read: () throws -> (CredentialRecord?, UInt64)) throws -> CredentialRecord? {
        if let kept = entries.withLock({ $0[id] }), kept.transaction == current { return kept.record }
        let (record, transaction) = try read()
        entries.withLock { entries in
            if entries.count >= Self.capacity, entries[id] == nil { entries.removeAll(keepingCapacity: true) }
            entries[id] = (record, transaction)
        }
        return record
    }
}

/// Credential strings that authenticated before, parsed and with their secrets hashed, so
/// a connection's next call with the same string skips the parse, the ledger lookup and the
/// hash. The record is still as current as a read (``CredentialRecordCache``): a revoked
/// credential fails at once. (The ledger is named, not held: the store closes it when idle.)
final class PresentedCredentials: Sendable {
    struct Entry: Sendable {
        let ledgerID: String
        let id: String
        let secretHash: [UInt8]
    }

    /// Enough for every client of a busy server; when full it starts again empty.
    static let capacity = 4096
    private let entries = Mutex<[String: Entry]>([:])

    func entry(for text: String) -> Entry? { entries.withLock { $0[text] } }

    func remember(_ entry: Entry, for text: String) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[text] = entry
        }
    }
}

extension LedgerStore {
    /// The ledger a credential names: nil when the store has no such ledger (or the id is not
    /// one); a failure to open one it has is thrown as itself, so the caller reads the real
    /// cause (storage, a restore under way), not an unknown credential.
    private func credentialLedger(_ id: String) throws -> Ledger? {
        do {
            return try ledger(id)
        } catch let failure as LedgerFailure where failure.kind == .notFound || failure.kind == .invalidArgument {
            return nil
        }
    }

    /// The ledger and principal a credential string authenticates, or nil for any invalid,
    /// unknown, expired or revoked credential.
    public func authenticate(_ text: String) -> (Ledger, Principal)? {
        (try? authentication(of: text)).map { ($0.ledger, $0.principal) }
    }

    /// The ledger, principal and credential id a credential string authenticates, and when
    /// the credential stops authenticating (its expiry or a rotation's end; nil: neither is set).
    ///
    /// - Throws: ``CredentialRefusal`` when it does not authenticate; a storage failure as itself.
    public func authentication(of text: String) throws -> (ledger: Ledger, principal: Principal, credentialID: String, end: Date?) {
        if let entry = presented.entry(for: text), let ledger = try credentialLedger(entry.ledgerID) {
            let (principal, end) = try ledger.authenticate(id: entry.id, secretHash: entry.secretHash)
            return (ledger, principal, entry.id, end)
        }
        guard let credential = CredentialString(text), let ledger = try credentialLedger(credential.ledgerID) else { throw CredentialRefusal.unknown }
        let secretHash = Array(SHA256.hash(data: Array(credential.secret.utf8)))
        let (principal, end) = try ledger.authenticate(id: credential.id, secretHash: secretHash)
        presented.remember(.init(ledgerID: ledger.id, id: credential.id, secretHash: secretHash), for: text)
        return (ledger, principal, credential.id, end)
    }
}
