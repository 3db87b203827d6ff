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
