import Foundation

/// One event of a ledger's history as its audit trail shows it: who did what, when, in a
/// sentence, with the hash that chains it to the next event.
public struct AuditEvent: Sendable, Hashable {
    /// 1, 2, 3, … without gaps.
    public var sequence: UInt64
    public var time: Date
    public var actor: Principal
    public var kind: EventKind
    /// The HealthKit type identifier of the object concerned, if any.
    public var objectType: String?
    public var objectUUID: UUID?
    /// What the event did, e.g. "app com.example.walk (Walk) was granted read of StepCount by the owner".
    public var sentence: String
    /// SHA-256 of the event's stored bytes (the next event's previous hash).
    public var hash: [UInt8]
    /// The event's stored bytes, when they were asked for.
    public var stored: [UInt8]?

    public init(
        sequence: UInt64, time: Date, actor: Principal, kind: EventKind, objectType: String?, objectUUID: UUID?,
        sentence: String, hash: [UInt8], stored: [UInt8]? = nil
    ) {
        self.sequence = sequence
        self.time = time
        self.actor = actor
        self.kind = kind
        self.objectType = objectType
        self.objectUUID = objectUUID
        self.sentence = sentence
        self.hash = hash
        self.stored = stored
    }
}

/// Which events an audit reads: every filter given must match.
public struct AuditFilter: Sendable, Hashable {
    /// Who acted.
    public enum Actor: Sendable, Hashable, CustomStringConvertible {
        case system, `operator`, owner
        /// Any app.
        case anyApp
        /// The app with this bundle identifier.
        case app(String)

        public func matches(_ principal: Principal) -> Bool {
            switch (self, principal) {
            case (.system, .system), (.operator, .operator), (.owner, .owner), (.anyApp, .app): true
            case (.app(let bundle), .app(let source)): source.bundleIdentifier == bundle
            default: false
            }
        }

        public var description: String {
            switch self {
            case .system: "system"
            case .operator: "operator"
            case .owner: "owner"
            case .anyApp: "app"
            case .app(let bundle): "app \(bundle)"
            }
        }

        /// Parses `owner`, `operator`, `system`, `app` (any app) or an app's bundle
        /// identifier (with or without `app ` before it).
        public init?(parsing text: String) {
            switch text {
            case "owner": self = .owner
            case "operator": self = .operator
            case "system": self = .system
            case "app", "apps": self = .anyApp
            default:
                let bundle = text.hasPrefix("app ") ? String(text.dropFirst(4)) : text
                guard !bundle.isEmpty, !bundle.contains(" ") else { return nil }
                self = .app(bundle)
            }
        }
    }

    /// First and last sequence numbers (inclusive); nil: unbounded.
    public var fromSequence: UInt64?
    public var toSequence: UInt64?
    /// Committed at or after `since` and before `until`.
    public var since: Date?
    public var until: Date?
    public var actor: Actor?
    /// Empty: every kind.
    public var kinds: Set<EventKind>
    /// Events about this type (objects of it, or decisions, requests, selections, source
    /// orders and characteristics naming it).
    public var type: ObjectType?
    /// Events about this object.
    public var object: UUID?

    public init(
        fromSequence: UInt64? = nil, toSequence: UInt64? = nil, since: Date? = nil, until: Date? = nil, actor: Actor? = nil,
        kinds: Set<EventKind> = [], type: ObjectType? = nil, object: UUID? = nil
    ) {
        self.fromSequence = fromSequence
        self.toSequence = toSequence
        self.since = since
        self.until = until
        self.actor = actor
        self.kinds = kinds
        self.type = type
        self.object = object
    }
}

/// A line of an audit listing: one event, or a run of like events of one commit (the
/// samples of one save), told in one sentence.
public struct AuditLine: Sendable, Hashable {
    /// The sequences the line covers, first to last.
    public var sequences: ClosedRange<UInt64>
    public var time: Date
    public var actor: Principal
    public var kind: EventKind
    public var sentence: String

    /// The events in lines: runs of saves (or plain deletes) of one type by one actor in
    /// one commit become "3 samples of HeartRate saved by app com.example.walk (Walk)".
    public static func lines(_ events: [AuditEvent]) -> [AuditLine] {
        var lines: [AuditLine] = []
        var run: [AuditEvent] = []
        func flush() {
            guard let first = run.first, let last = run.last else { return }
            let sentence = run.count == 1 ? first.sentence : Self.summary(of: run)
            lines.append(AuditLine(sequences: first.sequence...last.sequence, time: first.time, actor: first.actor, kind: first.kind, sentence: sentence))
            run = []
        }
        for event in events {
            if let previous = run.last,
                !(Self.groups(event) && previous.sequence + 1 == event.sequence && previous.kind == event.kind
                    && previous.actor == event.actor && previous.objectType == event.objectType && previous.time == event.time
                    && Self.plainDelete(previous) == Self.plainDelete(event))
            {
                flush()
            }
            if !Self.groups(event) {
                flush()
                run = [event]
                flush()
            } else {
                run.append(event)
            }
        }
        flush()
        return lines
    }

    private static func groups(_ event: AuditEvent) -> Bool {
        (event.kind == .objectSaved || plainDelete(event)) && event.objectType != nil
    }

    /// A delete the caller asked for (not one made by a replacement or with a parent),
    /// whose sentence ends " deleted by …".
    private static func plainDelete(_ event: AuditEvent) -> Bool {
        event.kind == .objectDeleted && event.sentence.contains(" deleted by ")
    }

    private static func summary(of run: [AuditEvent]) -> String {
        let first = run[0]
        let type = first.objectType.map(ObjectType.shortName) ?? "objects"
        let noun = first.objectType.flatMap { try? ObjectType($0) }?.family.noun ?? "objects"
        let verb = first.kind == .objectSaved ? "saved" : "deleted"
        return "\(run.count) \(noun) of \(type) \(verb) by \(first.actor.narrated)"
    }
}

extension Principal {
    /// The actor as a sentence names it: "the owner", "app com.example.walk (Walk)".
    public var narrated: String {
        switch self {
        case .system: "the system"
        case .operator: "the operator"
        case .owner: "the owner"
        case .app(let source): source.name.isEmpty ? "app \(source.bundleIdentifier)" : "app \(source.bundleIdentifier) (\(source.name))"
        }
    }
}

extension ObjectType {
    /// A type identifier without HealthKit's prefix: "HeartRate" for
    /// `HKQuantityTypeIdentifierHeartRate`, "Workout" for `HKWorkoutTypeIdentifier`.
    public static func shortName(_ identifier: String) -> String {
        for prefix in [
            "HKQuantityTypeIdentifier", "HKCategoryTypeIdentifier", "HKCorrelationTypeIdentifier", "HKCharacteristicTypeIdentifier",
            "HKDataTypeIdentifier",
        ] where identifier.hasPrefix(prefix) && identifier.count > prefix.count {
            return String(identifier.dropFirst(prefix.count))
        }
        var name = Substring(identifier)
        if name.hasPrefix("HK") { name = name.dropFirst(2) }
        if name.hasSuffix("TypeIdentifier") { name = name.dropLast("TypeIdentifier".count) }
        return name.isEmpty ? identifier : String(name)
    }
}

extension ObjectTypeFamily {
    /// What objects of the family are called, in the plural.
    public var noun: String {
        switch self {
        case .quantity, .category: "samples"
        case .correlation: "correlations"
        case .workout: "workouts"
        case .workoutRoute: "routes"
        case .visionPrescription: "prescriptions"
        case .characteristic: "characteristics"
        case .activitySummary: "activity summaries"
        case .audiogram: "audiograms"
        case .clinicalRecord: "clinical records"
        case .electrocardiogram: "electrocardiograms"
        case .heartbeatSeries: "heartbeat series"
        case .stateOfMind: "states of mind"
        case .userAnnotatedMedication: "medications"
        case .medicationDoseEvent: "medication doses"
        }
    }
}
