import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HealthModel

/// The operator's credentials: `hl1:_operator:<id>:<secret>`, for the operator RPCs
/// (ledgers and credentials, never health data). Kept as SHA-256 hashes in
/// `<data>/operators.json`, rewritten atomically under a lock so that the server and
/// `healthledger admin` on the same directory can both change it.
extension LedgerStore {
    /// The realm of operator credentials: where a ledger id would be (no ledger id starts with `_`).
    public static let operatorRealm = "_operator"

    private struct OperatorRecord: Codable {
        var id: String
        var secretSHA256: String
        var label: String
        var revoked: Bool
        /// Absent in records from before operator credentials could expire.
        var issued: Date?
        var expires: Date?
        var revokedAt: Date?

        var info: CredentialInfo {
            CredentialInfo(
                id: id, principal: .operator, label: label, issued: issued, expires: expires,
                revocation: revoked ? revokedAt ?? .distantPast : nil)
        }
    }

    private var operatorsFile: URL { directory.appending(path: "operators.json") }

    /// Issues an operator credential (printed once: only its hash is kept).
    ///
    /// - Parameter lifetime: how long it authenticates.
    public func issueOperatorCredential(label: String = "", lifetime: CredentialLifetime = .unlimited) throws -> String {
        let lifetimeUs = try lifetime.microseconds(field: "expires_in")
        let credential = CredentialString.random(ledgerID: Self.operatorRealm)
        let now = Date()
        try updateOperators { records in
            records.append(
                OperatorRecord(
                    id: credential.id, secretSHA256: Self.hash(credential.secret), label: label, revoked: false, issued: now,
                    expires: lifetimeUs == 0 ? nil : now.addingTimeInterval(Double(lifetimeUs) / 1e6)))
        }
        return credential.text
    }

    /// Makes `text`, an operator credential issued elsewhere (a cluster's, shared by its
    /// members), valid on this store too; nothing changes when it already is.
    ///
    /// - Throws: `HealthError` `invalidArgument` for text that is not an operator credential,
    ///   or whose id this store holds with another secret or revoked.
    public func trustOperatorCredential(_ text: String, label: String) throws {
        guard let credential = CredentialString(text), credential.ledgerID == Self.operatorRealm else {
            throw HealthError.invalidArgument("not an operator credential (hl1:_operator:…)", field: "credential")
        }
        let hash = Self.hash(credential.secret)
        try updateOperators { records in
            if let existing = records.first(where: { $0.id == credential.id }) {
                guard existing.secretSHA256 == hash else {
                    throw HealthError.invalidArgument("this store holds operator credential '\(credential.id)' with another secret", field: "credential")
                }
                guard !existing.revoked else {
                    throw HealthError.invalidArgument("operator credential '\(credential.id)' is revoked on this store", field: "credential")
                }
                return
            }
            records.append(OperatorRecord(id: credential.id, secretSHA256: hash, label: label, revoked: false, issued: Date(), expires: nil))
        }
    }

    /// Revokes an operator credential by id: its next call is refused.
    public func revokeOperatorCredential(id: String) throws {
        try updateOperators { records in
            guard let index = records.firstIndex(where: { $0.id == id }) else { throw HealthError(.noData, "no operator credential '\(id)'", field: "id") }
            guard !records[index].revoked else { throw HealthError.invalidArgument("operator credential '\(id)' is already revoked", field: "id") }
            records[index].revoked = true
            records[index].revokedAt = Date()
        }
    }

    /// The operator credentials issued for this data directory.
    public func operatorCredentials() throws -> [CredentialInfo] {
        try readOperators().map(\.info)
    }

    /// Checks an operator credential: valid, unexpired and unrevoked (the secret's hash
    /// compared in constant time).
    ///
    /// - Throws: ``CredentialRefusal`` when it does not authenticate.
    public func authenticateOperator(_ text: String) throws {
        guard let credential = CredentialString(text), credential.ledgerID == Self.operatorRealm,
            let record = (try? readOperators())?.first(where: { $0.id == credential.id })
        else { throw CredentialRefusal.unknown }
        let presented = Array(Self.hash(credential.secret).utf8)
        let stored = Array(record.secretSHA256.utf8)
        guard presented.count == stored.count, zip(presented, stored).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 else {
            throw CredentialRefusal.unknown
        }
        if let refusal = record.info.refusal() { throw refusal }
    }

    private static func hash(_ secret: String) -> String { Array(SHA256.hash(data: Array(secret.utf8))).hexString }

    private func readOperators() throws -> [OperatorRecord] {
        guard let data = FileManager.default.contents(atPath: operatorsFile.path) else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do { return try decoder.decode([OperatorRecord].self, from: data) } catch {
            throw LedgerFailure.corrupted("\(operatorsFile.path) is damaged: \(error)")
        }
    }

    /// Read, change and write the records under an exclusive lock; the new file replaces the
    /// old by a rename, made durable.
    private func updateOperators(_ change: (inout [OperatorRecord]) throws -> Void) throws {
        let lock = open(directory.appending(path: "operators.lock").path, O_CREAT | O_RDWR, 0o600)
        guard lock >= 0 else { throw LedgerFailure(.storage, "cannot open the operator credentials' lock in \(directory.path)") }
        defer { close(lock) }
        guard flock(lock, LOCK_EX) == 0 else { throw LedgerFailure(.storage, "cannot lock the operator credentials") }
        var records = try readOperators()
        try change(&records)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let staging = directory.appending(path: ".operators-\(UUID().uuidString).json")
        do {
            try encoder.encode(records).write(to: staging)
            let descriptor = open(staging.path, O_RDONLY)
            if descriptor >= 0 {
                fsync(descriptor)
                close(descriptor)
            }
            _ = rename(staging.path, operatorsFile.path)
            try Self.syncDirectory(directory)
        } catch {
            try? FileManager.default.removeItem(at: staging)
            throw LedgerFailure(.storage, "cannot write \(operatorsFile.path): \(error)", cause: error)
        }
    }
}
