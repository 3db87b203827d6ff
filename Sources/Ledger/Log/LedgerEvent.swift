import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf

/// One event of a ledger's log, decoded: the header plus the body bytes.
public struct LedgerEvent: Sendable, Hashable {
    /// 1, 2, 3, … without gaps: the ledger's clock.
    public var sequence: UInt64
    public var commitTime: Date
    public var actor: Principal
    public var kind: EventKind
    /// HealthKit identifier of the object concerned, if any.
    public var objectType: String?
    public var objectUUID: UUID?
    /// The kind-specific schema message, serialized.
    public var body: [UInt8]
    /// The previous event's hash.
    public var previousHash: [UInt8]
    /// Whether the body was erased (``body`` is then empty).
    public var isErased: Bool

    /// Decodes an event from its stored bytes.
    /// - Throws: ``LedgerFailure`` (`corrupted`) when the bytes are not a valid event.
    init(stored bytes: UnsafeRawBufferPointer) throws {
        let message: Healthledger_V1_LedgerEvent
        do {
            message = try Healthledger_V1_LedgerEvent(serializedBytes: Array(bytes))
        } catch {
            throw LedgerFailure.corrupted("an event does not decode: \(error)")
        }
        guard message.formatVersion == EventLayout.currentFormat || message.formatVersion == EventLayout.legacyFormat,
            let kind = EventKind(rawValue: message.kind.rawValue)
        else {
            throw LedgerFailure.corrupted(
                "event \(message.sequence) has format \(message.formatVersion) / kind \(message.kind.rawValue), which this version does not know")
        }
        sequence = message.sequence
        commitTime = date(microseconds: message.commitTimeUs)
        actor = Principal(message.actor)
        self.kind = kind
        objectType = message.objectType.isEmpty ? nil : message.objectType
        objectUUID = UUID(bytes: message.objectUuid)
        body = Array(message.body)
        previousHash = Array(message.previousHash)
        isErased = message.formatVersion == EventLayout.legacyFormat ? !message.erasedHash.isEmpty : message.bodySalt.isEmpty
    }

    /// The body of an event's stored bytes, read in place without decoding the
    /// rest: what reads send over the wire for a saved object.
    static func body(stored bytes: UnsafeRawBufferPointer) throws -> [UInt8] {
        Array(try bodyView(stored: bytes))
    }

    /// The same body as a view into the stored bytes (valid while they are).
    static func bodyView(stored bytes: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer {
        let body: UnsafeRawBufferPointer?
        do { body = try ProtoReader.field(LedgerEventField.body, in: bytes) } catch is ProtoReader.Malformed { throw LedgerFailure.corrupted("an event does not decode") }
        guard let body else {
            let erased = (try? EventLayout(stored: bytes))?.isErased ?? false
            throw LedgerFailure.corrupted(erased ? "an event's body was erased" : "an event has no body")
        }
        return body
    }

    /// The object an ``EventKind/objectSaved`` event saved.
    public func savedObject() throws -> HealthObject {
        guard kind == .objectSaved else { throw LedgerFailure.corrupted("event \(sequence) is not an objectSaved event") }
        return try Healthledger_V1_HealthObject(serializedBytes: body).model()
    }
}

/// Encoding of events and the hash chain.
enum EventCodec {
    static let zeroHash = [UInt8](repeating: 0, count: 32)

    /// The stored bytes of an event and its hash: the protobuf encoding of
    /// `healthledger.v1.LedgerEvent` in format 2, written directly (this is the hot path of
    /// every write). The header comes first, with the body's commitment, then the salt and the
    /// body (``EventLayout``). The bytes are exactly what SwiftProtobuf would produce for the
    /// same message; a test holds the two together.
    static func encode(
        sequence: UInt64, previousHash: [UInt8], commitTimeUs: Int64, actor: Principal,
        kind: EventKind, objectType: String?, objectUUID: [UInt8]?, body: [UInt8], salt: InlineHash
    ) -> (stored: [UInt8], hash: [UInt8]) {
        var writer = ProtoWriter(capacity: body.count + 192)
        writer.bytes(field: LedgerEventField.previousHash, previousHash)
        writer.varint(field: LedgerEventField.sequence, sequence)
        writer.varint(field: LedgerEventField.formatVersion, UInt64(EventLayout.currentFormat))
        writer.signed(field: LedgerEventField.commitTimeUs, commitTimeUs)
        writer.message(field: LedgerEventField.actor) { message in
            message.varint(field: ActorField.kind, UInt64(actor.schemaKind))
            if case .app(let source) = actor {
                message.message(field: ActorField.source) { message in
                    message.string(field: SourceField.bundleIdentifier, source.bundleIdentifier)
                    message.string(field: SourceField.name, source.name)
                }
            }
        }
        writer.varint(field: LedgerEventField.kind, UInt64(kind.rawValue))
        if let objectType { writer.string(field: LedgerEventField.objectType, objectType) }
        if let objectUUID { writer.bytes(field: LedgerEventField.objectUuid, objectUUID) }
        // The salt is the digest's first 16 bytes; the commitment SHA-256(salt ‖ body). Nothing
        // here allocates but the event itself.
        salt.withKeyBytes { digest in
            let salt = UnsafeRawBufferPointer(rebasing: digest[..<EventLayout.saltLength])
            body.withUnsafeBytes { body in
                InlineHash.sha256(salt, body).withKeyBytes { writer.bytes(field: LedgerEventField.bodyCommitment, $0) }
            }
        }
        let hash = writer.buffer.withUnsafeBytes { InlineHash.sha256($0).bytes }
        salt.withKeyBytes { writer.bytes(field: LedgerEventField.bodySalt, UnsafeRawBufferPointer(rebasing: $0[..<EventLayout.saltLength])) }
        writer.bytes(field: LedgerEventField.body, body)
        return (writer.buffer, hash)
    }

    /// The tags (field number and wire type in one byte) ``chainFields(_:)`` expects.
    private static let previousHashTag = UInt8(LedgerEventField.previousHash.rawValue << 3 | ProtoReader.WireType.lengthDelimited.rawValue)
    private static let sequenceTag = UInt8(LedgerEventField.sequence.rawValue << 3 | ProtoReader.WireType.varint.rawValue)

    /// An event's hash, by its format (``EventLayout``).
    /// - Throws: ``LedgerFailure`` `corrupted` when the bytes are not an event of a known format.
    static func hash(_ stored: UnsafeRawBufferPointer) throws -> [UInt8] {
        try layout(stored).hash(of: stored)
    }

    /// ``hash(_:)`` held inline (replay hashes every event).
    static func inlineHash(_ stored: UnsafeRawBufferPointer) throws -> InlineHash {
        let layout = try layout(stored)
        if let erasedHash = layout.erasedHash { return InlineHash(erasedHash) }
        return InlineHash.sha256(layout.formatVersion == EventLayout.legacyFormat ? stored : UnsafeRawBufferPointer(rebasing: stored[..<layout.headerLength]))
    }

    static func hash(_ stored: [UInt8]) throws -> [UInt8] {
        try stored.withUnsafeBytes { try hash($0) }
    }

    /// The layout of an event's stored bytes.
    /// - Throws: ``LedgerFailure`` `corrupted` when they are not an event of a known format.
    static func layout(_ stored: UnsafeRawBufferPointer) throws -> EventLayout {
        do { return try EventLayout(stored: stored) } catch { throw LedgerFailure.corrupted("an event's bytes are not an event of a known format") }
    }

    /// The salt of event `sequence`'s body, from a seed made once per transaction: 16 bytes no
    /// one can guess without the seed, which is never stored (one call to the system's random
    /// source per commit instead of one per event).
    /// (The digest whose first 16 bytes are the salt: held inline, no array.)
    static func salt(seed: [UInt8], sequence: UInt64) -> InlineHash {
        seed.withUnsafeBytes { seed in withUnsafeBytes(of: sequence.bigEndian) { InlineHash.sha256(seed, $0) } }
    }

    /// Reads `previous_hash` and `sequence` straight from the stored bytes, which the encoder
    /// always writes first: the tag of a 32-byte `previous_hash`, its length and bytes, then
    /// the tag of the `sequence` varint. Nil when the prefix is not as expected.
    static func chainFields(_ stored: UnsafeRawBufferPointer) -> (previousHash: UnsafeRawBufferPointer, sequence: UInt64)? {
        guard stored.count >= 35, stored[0] == previousHashTag, stored[1] == 32, stored[34] == sequenceTag else { return nil }
        var sequence: UInt64 = 0
        var shift: UInt64 = 0
        var index = 35
        while index < stored.count, shift < 64 {
            let byte = stored[index]
            sequence |= UInt64(byte & 0x7F) << shift
            index += 1
            if byte & 0x80 == 0 { return (UnsafeRawBufferPointer(rebasing: stored[2..<34]), sequence) }
            shift += 7
        }
        return nil
    }
}

extension ErasureAccount {
    enum Outcome {
        case hash(InlineHash)
        case failure(String)
    }

    /// The hash of the event stored as `stored` (sequence `sequence`), held inline, after
    /// ``note(_:stored:sequence:)`` checked it.
    mutating func hash(_ stored: UnsafeRawBufferPointer, sequence: UInt64) -> Outcome {
        guard let layout = try? EventLayout(stored: stored) else { return .failure("the stored bytes are not a well-formed event") }
        if let problem = note(layout, stored: stored, sequence: sequence) { return .failure(problem) }
        if let erasedHash = layout.erasedHash { return .hash(InlineHash(erasedHash)) }
        let hashed = layout.formatVersion == EventLayout.legacyFormat ? stored : UnsafeRawBufferPointer(rebasing: stored[..<layout.headerLength])
        return .hash(InlineHash.sha256(hashed))
    }
}
