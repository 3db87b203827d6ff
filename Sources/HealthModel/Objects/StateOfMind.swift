import Foundation

/// How a person felt (HealthKit's `HKStateOfMind`, type `HKDataTypeStateOfMind`): an emotion
/// of a moment or the mood of a day, how pleasant it was (`valence`, from -1 very unpleasant
/// to 1 very pleasant), the words that describe it and the parts of life it concerns. Apps save
/// and read states of mind under grants of the type, as any sample's.
///
/// ```swift
/// let mood = StateOfMind(date: evening, kind: .dailyMood, valence: 0.4, labels: [.calm, .grateful], associations: [.family])
/// try await store.save(.stateOfMind(mood))
/// ```
public struct StateOfMind: HealthSample {
    public var uuid: UUID
    public var kind: Kind
    /// From -1 (very unpleasant) to 1 (very pleasant).
    public var valence: Double
    /// Each at most once, in the order given.
    public var labels: [Label]
    /// Each at most once, in the order given.
    public var associations: [Association]
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// The valences a state of mind may have.
    public static let valences: ClosedRange<Double> = -1...1

    /// HealthKit's `HKStateOfMind.Kind`, with its raw values.
    public enum Kind: Int, Sendable, Hashable, CaseIterable {
        /// How one felt at a moment.
        case momentaryEmotion = 1
        /// How one felt over a day.
        case dailyMood = 2

        /// HealthKit's name of the case, which the protocol and the exports write.
        public var name: String { self == .momentaryEmotion ? "momentaryEmotion" : "dailyMood" }

        public init?(name: String) {
            guard let kind = Self.allCases.first(where: { $0.name == name }) else { return nil }
            self = kind
        }
    }

    /// HealthKit's `HKStateOfMind.ValenceClassification`: a valence in seven bands.
    public enum ValenceClassification: Int, Sendable, Hashable, CaseIterable {
        case veryUnpleasant = 1, unpleasant, slightlyUnpleasant, neutral, slightlyPleasant, pleasant, veryPleasant

        /// The band of `valence`: [-1, 1] cut into seven equal bands, neutral around 0, each band's
        /// bound belonging to the band nearer zero (±1/7 is neutral); nil outside [-1, 1].
        public init?(valence: Double) {
            guard StateOfMind.valences.contains(valence) else { return nil }
            let magnitude = abs(valence)
            let steps = magnitude <= 1.0 / 7 ? 0 : magnitude <= 3.0 / 7 ? 1 : magnitude <= 5.0 / 7 ? 2 : 3
            self.init(rawValue: 4 + (valence < 0 ? -steps : steps))
        }
    }

    /// HealthKit's `HKStateOfMind.Label`: a word for the feeling, by its case name.
    public enum Label: String, Sendable, Hashable, CaseIterable {
        case amazed, amused, angry, annoyed, anxious, ashamed, brave, calm, confident, content, disappointed, discouraged, disgusted
        case drained, embarrassed, excited, frustrated, grateful, guilty, happy, hopeful, hopeless, indifferent, irritated, jealous
        case joyful, lonely, overwhelmed, passionate, peaceful, proud, relieved, sad, satisfied, scared, stressed, surprised, worried
    }

    /// HealthKit's `HKStateOfMind.Association`: a part of life the feeling concerns, by its case name.
    public enum Association: String, Sendable, Hashable, CaseIterable {
        case community, currentEvents, dating, education, family, fitness, friends, health, hobbies, identity, money, partner
        case selfCare, spirituality, tasks, travel, weather, work
    }

    /// A state of mind at one moment, as HealthKit's `HKStateOfMind(date:kind:valence:labels:associations:metadata:)` makes it.
    public init(
        date: Date, kind: Kind, valence: Double, labels: [Label] = [], associations: [Association] = [], device: Device? = nil,
        metadata: Metadata = [:], uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.init(
            kind: kind, valence: valence, labels: labels, associations: associations, start: date, end: date, device: device, metadata: metadata,
            uuid: uuid, sourceRevision: sourceRevision)
    }

    /// A state of mind over a span (an import's record may have one).
    public init(
        kind: Kind, valence: Double, labels: [Label], associations: [Association], start: Date, end: Date, device: Device? = nil,
        metadata: Metadata = [:], uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.kind = kind
        self.valence = valence
        self.labels = labels
        self.associations = associations
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    /// The band the valence falls in (nil only for a valence validation refuses).
    public var valenceClassification: ValenceClassification? { ValenceClassification(valence: valence) }

    public var objectType: ObjectType { .stateOfMind }
}

extension ObjectType {
    /// HealthKit's `HKObjectType.stateOfMindType()`.
    public static let stateOfMind = ObjectType(identifier: "HKDataTypeStateOfMind", family: .stateOfMind)
}
