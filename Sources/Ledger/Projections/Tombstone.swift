import Foundation
import LedgerSchema

/// What remains of a deleted object: its UUID, type, sync identifier and version.
public struct Tombstone: Sendable, Hashable {
    public var uuid: UUID
    public var objectType: String
    /// Sequence of the event that deleted it.
    public var sequence: UInt64
    public var reason: DeletionReason
    public var syncIdentifier: String?
    public var syncVersion: Int64?
    /// Bundle identifier of the source that saved it (for authorization filtering; not exposed to apps).
    var sourceBundle: String
}

/// Why an object was deleted.
public enum DeletionReason: Int, Sendable, Hashable {
    case deleted = 1
    case replacedBySyncVersion = 2
    /// A route deleted with its workout.
    case workoutDeleted = 3
    /// A member deleted with its correlation (deleted, or replaced by a sync version).
    case correlationDeleted = 4
    /// Erased: its values are gone from the ledger (docs/SEMANTICS.md §5).
    case erased = 5
}

extension Tombstone {
    /// deleteSeq(8) type(4) reason(1) hasSync(1) syncVersion(8) idLength(2) syncId sourceBundle;
    /// in an encrypted ledger, the sync identifier (metadata) sealed, bound to deleteSeq.
    static func encode(sequence: UInt64, summary: ObjectSummary, reason: DeletionReason, cipher: LedgerCipher?) -> [UInt8] {
        encode(
            sequence: sequence, type: summary.typeCode, reason: reason, syncIdentifier: summary.syncIdentifier, syncVersion: summary.syncVersion,
            sourceBundle: summary.sourceBundle, cipher: cipher)
    }

    static func encode(
        sequence: UInt64, type: UInt32, reason: DeletionReason, syncIdentifier: String?, syncVersion: Int64?, sourceBundle: String,
        cipher: LedgerCipher?
    ) -> [UInt8] {
        var value: [UInt8] = []
        KeyEncoding.append(sequence, to: &value)
        KeyEncoding.append(type, to: &value)
        value.append(UInt8(reason.rawValue))
        var identifier = Array((syncIdentifier ?? "").utf8)
        if let cipher, syncIdentifier != nil {
            identifier = identifier.withUnsafeBytes { plain in value[0..<8].withUnsafeBytes { cipher.sealValue(plain, domain: .syncIdentifier, context: $0) } }
        }
        value.append(syncIdentifier == nil ? 0 : 1)
        KeyEncoding.append(UInt64(bitPattern: syncVersion ?? 0), to: &value)
        value.append(UInt8(identifier.count >> 8))
        value.append(UInt8(identifier.count & 0xFF))
        value.append(contentsOf: identifier)
        value.append(contentsOf: Array(sourceBundle.utf8))
        return value
    }

    init(uuid: UUID, stored value: UnsafeRawBufferPointer, type: String, cipher: LedgerCipher?) throws {
        guard value.count >= 24 else { throw LedgerFailure.corrupted("a tombstone record is too short") }
        self.uuid = uuid
        self.objectType = type
        sequence = KeyEncoding.uint64(value, at: 0)
        reason = DeletionReason(rawValue: Int(value[12])) ?? .deleted
        let hasSync = value[13] == 1
        let version = Int64(bitPattern: KeyEncoding.uint64(value, at: 14))
        let length = Int(value[22]) << 8 | Int(value[23])
        guard value.count >= 24 + length else { throw LedgerFailure.corrupted("a tombstone record is truncated") }
        let identifier = UnsafeRawBufferPointer(rebasing: value[24..<(24 + length)])
        if hasSync, let cipher {
            syncIdentifier = String(decoding: try cipher.openValue(identifier, domain: .syncIdentifier, context: UnsafeRawBufferPointer(rebasing: value[0..<8])), as: UTF8.self)
        } else {
            syncIdentifier = hasSync ? String(decoding: identifier, as: UTF8.self) : nil
        }
        syncVersion = hasSync ? version : nil
        sourceBundle = String(decoding: value[(24 + length)...], as: UTF8.self)
    }
}
