import Foundation

/// What happened to one object of a save.
public struct SaveResult: Sendable, Hashable {
    public enum Disposition: Sendable, Hashable {
        /// Stored as a new object.
        case saved
        /// Stored, replacing the object with the same sync identifier and a lower version
        /// (which is now a tombstone).
        case replaced(previous: UUID)
        /// Not stored: an object with the same sync identifier and an equal or higher
        /// version exists.
        case ignored(existing: UUID)
    }

    public var uuid: UUID
    public var disposition: Disposition

    public init(uuid: UUID, disposition: Disposition) {
        self.uuid = uuid
        self.disposition = disposition
    }
}

/// How sample results are ordered; ties are broken by UUID bytes, so order is deterministic.
public enum SampleSort: Sendable, Hashable {
    case startDate(ascending: Bool)
    case endDate(ascending: Bool)
}

/// Where an anchored object query stopped (HealthKit's `HKQueryAnchor`): an opaque token
/// that resumes the query after the changes it has seen. It is sealed by the ledger that
/// issued it, valid only there and only for the type it was issued for; keep its bytes to
/// resume later.
public struct QueryAnchor: Sendable, Hashable, Codable {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) {
        self.bytes = bytes
    }
}

/// An object an anchored query reports as gone (HealthKit's `HKDeletedObject`): deleted,
/// replaced by a higher sync version, or no longer readable by the caller.
public struct DeletedObject: Sendable, Hashable {
    public var uuid: UUID
    /// The sync identifier and version the object had, if any.
    public var syncIdentifier: String?
    public var syncVersion: Int64?

    public init(uuid: UUID, syncIdentifier: String? = nil, syncVersion: Int64? = nil) {
        self.uuid = uuid
        self.syncIdentifier = syncIdentifier
        self.syncVersion = syncVersion
    }
}
