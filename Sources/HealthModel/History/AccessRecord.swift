import Foundation

/// A call that returned health data, as the owner's access records keep it: who read
/// which types, how many objects, when, through which method, and as of which point. Calls
/// alike (the same credential, method, types and point) answered within the same second
/// share one record, which counts them.
public struct AccessRecord: Sendable, Hashable {
    /// When the call (the first of ``calls``) was answered.
    public var time: Date
    /// The id of the credential the call was made with (the third part of the credential string).
    public var credentialID: String
    /// The owner or an app.
    public var principal: Principal
    /// The method's path, e.g. `healthledger.v1.Ledger/QuerySamples`.
    public var method: String
    /// The HealthKit identifiers of the types it read.
    public var types: [String]
    /// How many objects it returned (samples, correlations, changes, statistics,
    /// attachments, characteristics or route locations, by method).
    public var objects: UInt64
    /// The event the ledger was read as of; nil for the present.
    public var asOfSequence: UInt64?
    /// How many calls it stands for, answered from ``time`` to the end of that second;
    /// ``objects`` is their total.
    public var calls: UInt64

    public init(
        time: Date, credentialID: String, principal: Principal, method: String, types: [String], objects: UInt64, asOfSequence: UInt64? = nil,
        calls: UInt64 = 1
    ) {
        self.calls = calls
        self.time = time
        self.credentialID = credentialID
        self.principal = principal
        self.method = method
        self.types = types
        self.objects = objects
        self.asOfSequence = asOfSequence
    }

    /// The method's name without its service, e.g. `QuerySamples`.
    public var methodName: String { String(method.split(separator: "/").last ?? Substring(method)) }
}

/// An access record as a follower hands it to its primary: with its key where the follower
/// keeps it (16 bytes: the record's time, then what tells the follower's batches and records
/// apart), under which the primary keeps it too.
public struct ForwardedAccessRecord: Sendable, Hashable {
    public var key: [UInt8]
    public var record: AccessRecord

    public init(key: [UInt8], record: AccessRecord) {
        self.key = key
        self.record = record
    }
}

/// A page of a ledger's access records in the order they arrived (the ledger's `accessFeed(after:afterKey:limit:)`, a primary's `FetchAccessRecords`).
public struct AccessFeedPage: Sendable {
    public var records: [ForwardedAccessRecord] = []
    /// The place of the last record read, in the order of arrival, and its key: where the next
    /// page begins after (0 and empty when none was read).
    public var next: UInt64 = 0
    public var nextKey: [UInt8] = []
    /// More records follow now.
    public var hasMore = false
    /// The place asked for did not name that key here: the page begins at the first record.
    public var restarted = false

    public init(records: [ForwardedAccessRecord] = [], next: UInt64 = 0, nextKey: [UInt8] = [], hasMore: Bool = false, restarted: Bool = false) {
        (self.records, self.next, self.nextKey, self.hasMore, self.restarted) = (records, next, nextKey, hasMore, restarted)
    }
}

/// Which access records to read: every filter given must match.
public struct AccessRecordFilter: Sendable, Hashable {
    /// Calls made at or after this time.
    public var since: Date?
    /// Calls made before this time.
    public var until: Date?
    /// Calls of this app (a bundle identifier), or `"owner"` for the owner's own.
    public var app: String?
    /// Calls that read this type (a HealthKit identifier).
    public var type: String?

    public init(since: Date? = nil, until: Date? = nil, app: String? = nil, type: String? = nil) {
        self.since = since
        self.until = until
        self.app = app
        self.type = type
    }

    /// Whether `record` passes the principal and type filters (times are a range of keys).
    public func matches(_ record: AccessRecord) -> Bool {
        if let app {
            switch record.principal {
            case .owner: guard app == "owner" else { return false }
            case .app(let source): guard source.bundleIdentifier == app else { return false }
            case .system, .operator: return false
            }
        }
        if let type, !record.types.contains(type) { return false }
        return true
    }
}

/// The access records summed up: per reader and type, how many objects it read in how many calls.
public struct AccessSummary: Sendable, Hashable {
    public struct Line: Sendable, Hashable {
        public var principal: Principal
        public var type: String
        public var objects: UInt64
        public var calls: UInt64
    }

    /// By objects read, most first.
    public var lines: [Line]

    /// Sums `records` by principal and type (a call of several types counts for each).
    public init(_ records: [AccessRecord]) {
        var sums: [String: Line] = [:]
        for record in records {
            for type in record.types {
                let key = "\(record.principal)\u{0}\(type)"
                var line = sums[key] ?? Line(principal: record.principal, type: type, objects: 0, calls: 0)
                line.objects += record.objects
                line.calls += record.calls
                sums[key] = line
            }
        }
        lines = sums.values.sorted { first, second in
            if first.objects != second.objects { return first.objects > second.objects }
            if "\(first.principal)" != "\(second.principal)" { return "\(first.principal)" < "\(second.principal)" }
            return first.type < second.type
        }
    }
}
