import CLedgerAEAD
import Foundation
import SwiftProtobuf

/// Where an event's stored bytes keep what its hash covers, and what can be erased
/// (docs/LEDGER.md, "Events and the hash chain"): the one statement of the hash rule, used by
/// the ledger, by `verify --events` on an export, and by the tests.
///
/// - **Format 2.** The header is every field before `body_salt` (14) and `body` (15), which
///   the encoder writes last; it holds `body_commitment` = SHA-256(salt ‖ body). The event's
///   hash is SHA-256(header). Erasing the event removes its salt and body: the hash is
///   unchanged, and nothing left confirms a guess of the body.
/// - **Format 1** (events written before commitments). The hash is SHA-256 of all the stored
///   bytes. Once erased, the event keeps its header fields and `erased_hash`, the hash it had,
///   which the chain, the Merkle tree and the erasure event all still name.
public struct EventLayout {
    public static let currentFormat: UInt32 = 2
    public static let legacyFormat: UInt32 = 1
    public static let saltLength = 16

    public var formatVersion: UInt32 = 0
    public var sequence: UInt64 = 0
    /// When its transaction committed: microseconds since 1970.
    public var commitTimeUs: Int64 = 0
    /// The `EventKind` number.
    public var kind: UInt64 = 0
    /// The header's object type identifier and UUID, when it names an object.
    public var objectType: UnsafeRawBufferPointer?
    public var objectUUID: UnsafeRawBufferPointer?
    /// Format 2: the length of the hashed header (the whole event once erased).
    public var headerLength: Int
    /// Format 2: SHA-256(salt ‖ body).
    public var commitment: UnsafeRawBufferPointer?
    /// Format 1, erased: the hash the event had.
    public var erasedHash: UnsafeRawBufferPointer?
    /// Format 2: the body's salt; nil once erased.
    public var salt: UnsafeRawBufferPointer?
    /// The body; nil once erased (or when it was empty).
    public var body: UnsafeRawBufferPointer?

    /// Reads the layout of `stored`, an event's stored bytes (views into them).
    /// - Throws: ``ProtoReader/Malformed`` when they are not an event of a known format, or a
    ///   format-2 header field follows its salt or body.
    public init(stored: UnsafeRawBufferPointer) throws {
        headerLength = stored.count
        var reader = ProtoReader(stored)
        var headerEnded = false
        while true {
            let offset = reader.offset
            guard let (field, wireType) = try reader.next() else { break }
            switch (LedgerEventField(rawValue: field), wireType) {
            // The salt, then the body, each at most once, and nothing after them: one reading
            // of the bytes only (a second body would be one the hash does not cover).
            case (.bodySalt, .lengthDelimited):
                guard salt == nil, body == nil else { throw ProtoReader.Malformed() }
                if !headerEnded { (headerLength, headerEnded) = (offset, true) }
                salt = try reader.bytes()
                continue
            case (.body, .lengthDelimited):
                guard body == nil else { throw ProtoReader.Malformed() }
                if !headerEnded { (headerLength, headerEnded) = (offset, true) }
                body = try reader.bytes()
                continue
            case (.sequence, .varint): sequence = try reader.varint()
            case (.commitTimeUs, .varint): commitTimeUs = try reader.signed()
            case (.formatVersion, .varint): formatVersion = UInt32(truncatingIfNeeded: try reader.varint())
            case (.kind, .varint): kind = try reader.varint()
            case (.objectType, .lengthDelimited): objectType = try reader.bytes()
            case (.objectUuid, .lengthDelimited): objectUUID = try reader.bytes()
            case (.bodyCommitment, .lengthDelimited): commitment = try reader.bytes()
            case (.erasedHash, .lengthDelimited): erasedHash = try reader.bytes()
            default: try reader.skip(wireType)
            }
            // Only the salt and the body follow the header.
            if headerEnded { throw ProtoReader.Malformed() }
        }
        switch formatVersion {
        case Self.currentFormat:
            guard commitment?.count == 32, erasedHash == nil, salt == nil ? body == nil : salt!.count == Self.saltLength else {
                throw ProtoReader.Malformed()
            }
        case Self.legacyFormat:
            guard commitment == nil, salt == nil, erasedHash == nil || (erasedHash!.count == 32 && body == nil) else { throw ProtoReader.Malformed() }
        default:
            throw ProtoReader.Malformed()
        }
    }

    /// Whether the event's body was erased.
    public var isErased: Bool { formatVersion == Self.legacyFormat ? erasedHash != nil : salt == nil }

    /// The event's hash: what the next event's `previous_hash` and the Merkle leaf hold.
    public func hash(of stored: UnsafeRawBufferPointer) -> [UInt8] {
        if let erasedHash { return Array(erasedHash) }
        return Self.sha256(formatVersion == Self.legacyFormat ? stored : UnsafeRawBufferPointer(rebasing: stored[..<headerLength]))
    }

    /// What the erasure event names for this event: its commitment (format 2) or its hash (format 1).
    public func erasureCommitment(of stored: UnsafeRawBufferPointer) -> [UInt8] {
        formatVersion == Self.legacyFormat ? hash(of: stored) : Array(commitment!)
    }

    /// Whether the body, when present, is the one the header commits to (format 1 bodies are
    /// covered by the hash itself).
    public var bodyMatchesCommitment: Bool {
        guard formatVersion == Self.currentFormat, let salt, let commitment else { return true }
        guard commitment.count == 32 else { return false }
        // Hashed on the stack and compared in place: verify checks every event, and an
        // allocation each would cost more than the hash.
        var digest: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &digest) { digest in
            ledger_sha256(salt.baseAddress, salt.count, body?.baseAddress, body?.count ?? 0, digest.baseAddress)
            return memcmp(digest.baseAddress!, commitment.baseAddress!, 32) == 0
        }
    }

    /// SHA-256(`first` ‖ `second`), through BoringSSL with its state on the stack (`ledger_sha256`).
    public static func sha256(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
            ledger_sha256(first.baseAddress, first.count, second.baseAddress, second.count, digest.baseAddress)
            count = 32
        }
    }

    /// The stored bytes of the event once erased: its header alone (format 2), or its header
    /// fields and its hash as `erased_hash` (format 1), which the chain still needs.
    public static func erased(_ stored: UnsafeRawBufferPointer) throws -> [UInt8] {
        let layout = try EventLayout(stored: stored)
        guard !layout.isErased else { return Array(stored) }
        if layout.formatVersion == currentFormat { return Array(stored[..<layout.headerLength]) }
        let hash = layout.hash(of: stored)
        // A format-1 event's body is its last field: the header is the bytes before it.
        var tail = ProtoWriter(capacity: 34)
        tail.bytes(field: LedgerEventField.erasedHash.rawValue, hash)
        return Array(stored[..<layout.headerLength]) + tail.buffer
    }
}

/// What a verifier gathers of erasures along a log: the events found without their bodies,
/// and the events each erasure event names. Every erased event must be named, with its
/// commitment, by an erasure event later in the log (docs/LEDGER.md, "Events and the hash
/// chain"); the ledger's `verify` and `verify --events` on an export both apply it.
public struct ErasureAccount: Sendable {
    /// Erased events: sequence → commitment (format 2) or hash (format 1), and for format 1
    /// the SHA-256 of the stored bytes left.
    private var erased: [UInt64: (commitment: [UInt8], stored: [UInt8]?)] = [:]
    /// Events named by erasure events: sequence → (commitment, stored bytes' SHA-256, the erasure event).
    private var named: [UInt64: (commitment: [UInt8], stored: [UInt8], by: UInt64)] = [:]

    public init() {}

    /// Checks the event stored as `stored` (`layout` is its layout) and notes what it says of
    /// erasures: nil when it is sound, else what is wrong (a body that is not the one its
    /// header commits to, an erasure record that does not decode or names a later event).
    public mutating func note(_ layout: EventLayout, stored: UnsafeRawBufferPointer, sequence: UInt64) -> String? {
        guard layout.bodyMatchesCommitment else { return "its body does not match the commitment in its header" }
        if layout.isErased {
            let left = layout.formatVersion == EventLayout.legacyFormat ? Self.sha256(stored) : nil
            erased[sequence] = (layout.erasureCommitment(of: stored), left)
        }
        guard layout.kind == UInt64(Healthledger_V1_EventKind.objectsErased.rawValue), !layout.isErased else { return nil }
        guard let record = try? Healthledger_V1_ObjectsErased(serializedBytes: Array(layout.body ?? UnsafeRawBufferPointer(start: nil, count: 0))) else {
            return "its erasure record does not decode"
        }
        for event in record.events {
            guard event.sequence < sequence else { return "it names event \(event.sequence), which is not before it" }
            named[event.sequence] = (Array(event.commitment), Array(event.erasedStoredSha256), sequence)
        }
        return nil
    }

    public mutating func merge(_ other: ErasureAccount) {
        erased.merge(other.erased) { first, _ in first }
        named.merge(other.named) { first, _ in first }
    }

    /// The first erased event that no later erasure event names with its commitment.
    public var firstUnaccounted: (sequence: UInt64, reason: String)? {
        for (sequence, event) in erased.sorted(by: { $0.key < $1.key }) {
            guard let naming = named[sequence] else { return (sequence, "its body is missing and no erasure event names it") }
            guard naming.commitment == event.commitment else {
                return (sequence, "its body is missing, and erasure event \(naming.by) names it with another commitment")
            }
            // A format-1 event's hash is its erased_hash: the erasure event vouches for the rest.
            if let left = event.stored, left != naming.stored {
                return (sequence, "its header is not the one erasure event \(naming.by) left")
            }
        }
        return nil
    }

    /// SHA-256 of `bytes`.
    public static func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] { EventLayout.sha256(bytes) }
}
