import Crypto
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
    /// SHA-256 of the previous event's stored bytes.
    public var previousHash: [UInt8]

    /// Decodes an event from its stored bytes.
    /// - Throws: ``LedgerFailure`` (`corrupted`) when the bytes are not a valid event.
    init(stored bytes: UnsafeRawBufferPointer) throws {
        let message: Healthledger_V1_LedgerEvent
        do {
            message = try Healthledger_V1_LedgerEvent(serializedBytes: Array(bytes))
        } catch {
            throw LedgerFailure.corrupted("an event does not decode: \(error)")
        }
        guard message.formatVersion == EventCodec.formatVersion,
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
    }

    /// The body (field 15) of an event's stored bytes, read in place without decoding the
    /// rest: what reads send over the wire for a saved object.
    static func body(stored bytes: UnsafeRawBufferPointer) throws -> [UInt8] {
        Array(try bodyView(stored: bytes))
    }

    /// The same body as a view into the stored bytes (valid while they are).
    static func bodyView(stored bytes: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer {
        let body: UnsafeRawBufferPointer?
        do { body = try ProtoReader.field(15, in: bytes) } catch is ProtoReader.Malformed { throw LedgerFailure.corrupted("an event does not decode") }
        guard let body else { throw LedgerFailure.corrupted("an event has no body") }
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
    static let formatVersion: UInt32 = 1
    static let zeroHash = [UInt8](repeating: 0, count: 32)

    /// The stored bytes of an event: the protobuf encoding of `healthledger.v1.LedgerEvent`,
    /// written directly (this is the hot path of every write). The bytes are exactly what
    /// SwiftProtobuf would produce for the same message; a test holds the two together.
    static func encode(
        sequence: UInt64, previousHash: [UInt8], commitTimeUs: Int64, actor: Principal,
        kind: EventKind, objectType: String?, objectUUID: [UInt8]?, body: [UInt8]
    ) -> [UInt8] {
        var writer = ProtoWriter(capacity: body.count + 128)
        writer.bytes(field: 1, previousHash)
        writer.varint(field: 2, sequence)
        writer.varint(field: 3, UInt64(formatVersion))
        writer.varint(field: 4, UInt64(bitPattern: (commitTimeUs << 1) ^ (commitTimeUs >> 63)))
        var actorMessage = ProtoWriter(capacity: 64)
        actorMessage.varint(field: 1, UInt64(actor.schemaKind))
        if case .app(let source) = actor {
            var sourceMessage = ProtoWriter(capacity: 64)
            sourceMessage.bytes(field: 1, Array(source.bundleIdentifier.utf8))
            sourceMessage.bytes(field: 2, Array(source.name.utf8))
            actorMessage.message(field: 2, sourceMessage.buffer)
        }
        writer.message(field: 5, actorMessage.buffer)
        writer.varint(field: 6, UInt64(kind.rawValue))
        if let objectType { writer.bytes(field: 7, Array(objectType.utf8)) }
        if let objectUUID { writer.bytes(field: 8, objectUUID) }
        writer.bytes(field: 15, body)
        return writer.buffer
    }

    static func hash(_ stored: UnsafeRawBufferPointer) -> [UInt8] {
        SHA256.digest(of: stored).withUnsafeBytes { Array($0) }
    }

    static func hash(_ stored: [UInt8]) -> [UInt8] {
        stored.withUnsafeBytes { hash($0) }
    }

    /// Reads `previous_hash` (field 1) and `sequence` (field 2) straight from the stored
    /// bytes, which the encoder always writes first. Nil when the prefix is not as expected.
    static func chainFields(_ stored: UnsafeRawBufferPointer) -> (previousHash: UnsafeRawBufferPointer, sequence: UInt64)? {
        guard stored.count >= 35, stored[0] == 0x0A, stored[1] == 32, stored[34] == 0x10 else { return nil }
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

extension SHA256 {
    /// The digest of `bytes`, hashed straight from memory (``hash(data:)`` goes through the
    /// generic `DataProtocol` path).
    static func digest(of bytes: UnsafeRawBufferPointer) -> SHA256Digest {
        var hasher = SHA256()
        hasher.update(bufferPointer: bytes)
        return hasher.finalize()
    }
}
