import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The operator's key: it wraps each ledger's data key (``LedgerCipher``), and is kept
/// outside the data directory (docs/LEDGER.md, "Encryption at rest").
///
/// The file holds 32 random bytes as 64 hexadecimal digits (a final newline allowed), and must
/// be readable by its owner only. `healthledger admin new-master-key FILE` makes one.
public struct MasterKey: Sendable {
    let key: SymmetricKey
    /// Names the key without revealing it: the first 8 bytes of SHA-256 of a label and the
    /// key, in hexadecimal. The data directory records the id of the key its ledgers are under.
    public let id: String
    /// The file it was read from.
    public let path: String
    /// False for a key of few different bytes (all zeros, a byte repeated, a short pattern),
    /// which no random source makes: 32 random bytes hold about 30 different values.
    public let looksRandom: Bool

    init(raw: [UInt8], path: String) {
        key = SymmetricKey(data: raw)
        looksRandom = Set(raw).count >= 16
        var hasher = SHA256()
        hasher.update(data: Array("healthledger master key id".utf8))
        hasher.update(data: raw)
        id = hasher.finalize().prefix(8).map { String(format: "%02x", $0) }.joined()
        self.path = path
    }

    /// Why a key file of `mode`, owned by user `owner`, is not private enough for a server
    /// running as user `reader` (nil: it is) — PostgreSQL's rule for its key files: owned by
    /// that user or by root; no permission for others; for its group none but reading, and
    /// reading only when root owns it (a key the system provides, as Kubernetes mounts a Secret
    /// for a pod's `fsGroup`: mode 0440, owner root).
    static func permissionRefusal(mode: mode_t, owner: uid_t, reader: uid_t) -> String? {
        let permissions = String(mode & 0o777, radix: 8)
        let fix = "make it the server's user's and readable by it only (chmod 600)"
        if mode & 0o007 != 0 { return "is open to others (mode \(permissions)): \(fix)" }
        if owner != reader, owner != 0 { return "is owned by user \(owner), neither the server's user (\(reader)) nor root: \(fix)" }
        if mode & 0o030 != 0 { return "is open to its group beyond reading (mode \(permissions)): \(fix)" }
        if mode & 0o040 != 0, owner != 0 {
            return "is readable by its group (mode \(permissions)) and not root's: \(fix); only a key root owns may be readable by its group"
        }
        return nil
    }

    /// Reads the key file at `path` (its permissions checked on the file opened, then read).
    /// - Throws: ``LedgerFailure`` `invalidArgument` naming what is wrong: no such file, a
    ///   file others may read (``permissionRefusal(mode:owner:reader:)``), or not 64 hexadecimal digits.
    public static func load(from path: String) throws -> MasterKey {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw LedgerFailure(.invalidArgument, "the master key file \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw LedgerFailure(.invalidArgument, "the master key file \(path) cannot be read: \(String(cString: strerror(errno)))")
        }
        // A pipe or a FIFO may hand the key over (a secret manager's `<(…)`): only a directory is refused.
        guard status.st_mode & S_IFMT != S_IFDIR else { throw LedgerFailure(.invalidArgument, "the master key file \(path) is a directory, not a key file") }
        if let refusal = permissionRefusal(mode: status.st_mode, owner: status.st_uid, reader: geteuid()) {
            throw LedgerFailure(.invalidArgument, "the master key file \(path) \(refusal)")
        }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 256)
        while data.count <= 1_024 {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw LedgerFailure(.invalidArgument, "the master key file \(path) cannot be read: \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            data += chunk[..<count]
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.count == 64, let raw = hexBytes(text) else {
            throw LedgerFailure(.invalidArgument, "the master key file \(path) does not hold a key: it must be 64 hexadecimal digits (32 bytes)")
        }
        return MasterKey(raw: raw, path: path)
    }

    /// Makes a new key file at `path`, readable by its owner only; refuses to replace one.
    @discardableResult
    public static func create(at path: String) throws -> MasterKey {
        var generator = SystemRandomNumberGenerator()
        let raw = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw LedgerFailure(.invalidArgument, "cannot create the master key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(descriptor) }
        let text = Array((raw.map { String(format: "%02x", $0) }.joined() + "\n").utf8)
        guard Glibc.write(descriptor, text, text.count) == text.count, fsync(descriptor) == 0 else {
            throw LedgerFailure(.storage, "cannot write the master key file \(path): \(String(cString: strerror(errno)))")
        }
        return MasterKey(raw: raw, path: path)
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let h = hexValue(high), let l = hexValue(low) else { return nil }
            bytes.append(h << 4 | l)
        }
        return bytes
    }

    private static func hexValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The wrapped form of a data key, as `meta` keeps it: version(1) ‖ this key's id (8
    /// bytes) ‖ AES-256-GCM of the data key (nonce ‖ ciphertext ‖ tag).
    func wrap(_ dataKey: [UInt8]) -> [UInt8] {
        let box = try! AES.GCM.seal(dataKey, using: key, authenticating: Self.wrappingLabel)
        return [Self.wrappingVersion] + idBytes + Array(box.combined!)
    }

    /// The data key in `wrapped`.
    /// - Throws: ``LedgerFailure`` `failedPrecondition` when it was wrapped under another master key.
    func unwrap(_ wrapped: UnsafeRawBufferPointer, ledger: String) throws -> [UInt8] {
        guard wrapped.count == 1 + 8 + 12 + 32 + 16, wrapped[0] == Self.wrappingVersion else {
            throw LedgerFailure.corrupted("ledger '\(ledger)''s wrapped data key is damaged")
        }
        let wrappedID = wrapped[1..<9].map { String(format: "%02x", $0) }.joined()
        guard wrappedID == id else {
            throw LedgerFailure(
                .failedPrecondition,
                "ledger '\(ledger)' is encrypted under master key \(wrappedID), not under the key in \(path) (id \(id)): start with the right --master-key-file")
        }
        do {
            return Array(try AES.GCM.open(AES.GCM.SealedBox(combined: Data(wrapped[9...])), using: key, authenticating: Self.wrappingLabel))
        } catch {
            throw LedgerFailure.corrupted("ledger '\(ledger)''s data key does not open under master key \(id): the wrapped key is damaged")
        }
    }

    /// The id of the master key a wrapped data key was wrapped under.
    static func wrappingID(_ wrapped: UnsafeRawBufferPointer) -> String? {
        guard wrapped.count > 9 else { return nil }
        return wrapped[1..<9].map { String(format: "%02x", $0) }.joined()
    }

    private var idBytes: [UInt8] { Self.hexBytes(id)! }
    private static let wrappingVersion: UInt8 = 1
    private static let wrappingLabel = Array("healthledger data key".utf8)
}
