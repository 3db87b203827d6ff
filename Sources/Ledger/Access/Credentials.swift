import Crypto
import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import Synchronization

/// A bearer credential's public part, as listed to the owner or operator.
public struct CredentialInfo: Sendable, Hashable {
    /// 16 hex digits; also inside the credential string.
    public var id: String
    public var principal: Principal
    public var revoked: Bool
}

/// The stored form of a credential: the secret's hash, whether it is revoked, its principal.
struct CredentialRecord {
    var hash: [UInt8]
    var revoked: Bool
    var principal: Principal

    /// hash(32) revoked(1) kind(1) bundleLength(2) bundle name
    var encoded: [UInt8] {
        var value = hash
        value.append(revoked ? 1 : 0)
        value.append(UInt8(principal.schemaKind))
        var bundle: [UInt8] = []
        var name: [UInt8] = []
        if case .app(let source) = principal {
            bundle = Array(source.bundleIdentifier.utf8)
            name = Array(source.name.utf8)
        }
        value.append(UInt8(bundle.count >> 8))
        value.append(UInt8(bundle.count & 0xFF))
        return value + bundle + name
    }

    init(hash: [UInt8], revoked: Bool, principal: Principal) {
        self.hash = hash
        self.revoked = revoked
        self.principal = principal
    }

    init?(_ stored: UnsafeRawBufferPointer) {
        guard stored.count >= 36 else { return nil }
        hash = Array(stored[0..<32])
        revoked = stored[32] == 1
        let length = Int(stored[34]) << 8 | Int(stored[35])
        guard stored.count >= 36 + length else { return nil }
        var actor = Healthledger_V1_Actor()
        actor.kind = Healthledger_V1_Actor.Kind(rawValue: Int(stored[33])) ?? .unspecified
        if actor.kind == .app {
            actor.source.bundleIdentifier = String(decoding: stored[36..<(36 + length)], as: UTF8.self)
            actor.source.name = String(decoding: stored[(36 + length)...], as: UTF8.self)
        }
        principal = Principal(actor)
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
    /// - Returns: the credential string, `hl1:<ledger>:<id>:<secret>`.
    public func issueCredential(for principal: Principal, label: String = "", by issuer: Principal = .operator) async throws -> String {
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
        let credential = CredentialString.random(ledgerID: self.id)
        var body = Healthledger_V1_CredentialIssued()
        body.credentialID = credential.id
        body.secretSha256 = Data(SHA256.hash(data: Array(credential.secret.utf8)))
        body.principal = principal.schema
        body.label = label
        let bytes: [UInt8] = try body.serializedBytes()
        try await committer.submit { context in
            try context.append(
                kind: .credentialIssued, actor: issuer, objectType: nil, objectUUID: nil, body: bytes,
                change: try Projector.change(kind: .credentialIssued, actor: issuer, body: bytes))
        }
        return credential.text
    }

    /// Revokes a credential by id; recorded as an event. Calls made with it fail from now on.
    public func revokeCredential(id: String, by issuer: Principal = .operator) async throws {
        var body = Healthledger_V1_CredentialRevoked()
        body.credentialID = id
        let bytes: [UInt8] = try body.serializedBytes()
        try await committer.submit { context in
            guard let stored = try context.txn.get(Array(id.utf8), in: context.databases.credentials),
                let record = CredentialRecord(stored)
            else { throw HealthError(.noData, "no credential '\(id)'", field: "id") }
            guard !record.revoked else { throw HealthError.invalidArgument("credential '\(id)' is already revoked", field: "id") }
            try context.append(
                kind: .credentialRevoked, actor: issuer, objectType: nil, objectUUID: nil, body: bytes,
                change: try Projector.change(kind: .credentialRevoked, actor: issuer, body: bytes))
        }
        accessWatchers.notify(.credentialRevoked(id: id))
    }

    /// The credentials issued for this ledger.
    public func credentials() throws -> [CredentialInfo] {
        try read { snapshot in
            var result: [CredentialInfo] = []
            try snapshot.withCursor(on: snapshot.databases.credentials) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    if let record = CredentialRecord(current.value) {
                        result.append(CredentialInfo(id: String(decoding: current.key, as: UTF8.self), principal: record.principal, revoked: record.revoked))
                    }
                    entry = try cursor.next()
                }
            }
            return result
        }
    }

    /// The principal a credential authenticates, or nil when it is unknown, wrong or revoked.
    /// The secret's hash is compared in constant time.
    public func authenticate(_ credential: CredentialString) throws -> Principal? {
        guard credential.ledgerID == id else { return nil }
        return try authenticate(id: credential.id, secretHash: Array(SHA256.hash(data: Array(credential.secret.utf8))))
    }

    /// The principal of credential `id` if `secretHash` is its secret's hash and it is not
    /// revoked: the record is read each time, so a revocation applies to the next call.
    func authenticate(id: String, secretHash presented: [UInt8]) throws -> Principal? {
        try read { snapshot in
            guard let stored = try snapshot.get(Array(id.utf8), in: snapshot.databases.credentials),
                let record = CredentialRecord(stored)
            else { return nil }
            var difference: UInt8 = 0
            for (a, b) in zip(record.hash, presented) { difference |= a ^ b }
            guard difference == 0, record.hash.count == presented.count, !record.revoked else { return nil }
            return record.principal
        }
    }
}

/// Credential strings that authenticated before, parsed and with their secrets hashed, so
/// a connection's next call with the same string skips the parse, the ledger lookup and the
/// hash. The record is still read on every call: a revoked credential fails at once.
final class PresentedCredentials: Sendable {
    struct Entry: Sendable {
        let ledger: Ledger
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
    /// The ledger and principal a credential string authenticates, or nil for any invalid,
    /// unknown or revoked credential (the reasons are not told apart).
    public func authenticate(_ text: String) -> (Ledger, Principal)? {
        authentication(of: text).map { ($0.ledger, $0.principal) }
    }

    /// ``authenticate(_:)``, with the credential's id.
    public func authentication(of text: String) -> (ledger: Ledger, principal: Principal, credentialID: String)? {
        if let entry = presented.entry(for: text) {
            guard let principal = try? entry.ledger.authenticate(id: entry.id, secretHash: entry.secretHash) else { return nil }
            return (entry.ledger, principal, entry.id)
        }
        guard let credential = CredentialString(text), let ledger = try? ledger(credential.ledgerID) else { return nil }
        let secretHash = Array(SHA256.hash(data: Array(credential.secret.utf8)))
        guard let principal = try? ledger.authenticate(id: credential.id, secretHash: secretHash) else { return nil }
        presented.remember(.init(ledger: ledger, id: credential.id, secretHash: secretHash), for: text)
        return (ledger, principal, credential.id)
    }
}
