import Foundation

/// One frequency of a hearing test: the quietest level heard there by each ear tested
/// (HealthKit's `HKAudiogramSensitivityPoint`).
public struct AudiogramPoint: Sendable, Hashable {
    /// The tone's frequency (`Hz`).
    public var frequency: Quantity
    /// The left ear's threshold in hearing level (`dBHL`); nil when not tested.
    public var leftEar: Quantity?
    /// The right ear's threshold (`dBHL`); nil when not tested.
    public var rightEar: Quantity?
    /// The other ear was masked with noise while this one was tested.
    public var leftEarMasked: Bool
    public var rightEarMasked: Bool

    public init(frequency: Quantity, leftEar: Quantity? = nil, rightEar: Quantity? = nil, leftEarMasked: Bool = false, rightEarMasked: Bool = false) {
        self.frequency = frequency
        self.leftEar = leftEar
        self.rightEar = rightEar
        self.leftEarMasked = leftEarMasked
        self.rightEarMasked = rightEarMasked
    }
}

/// A hearing test's result (HealthKit's `HKAudiogramSample`, type
/// `HKDataTypeIdentifierAudiogram`): the thresholds at each frequency tested, over the test's
/// span. Apps share and read audiograms under grants of the type, as any sample's.
///
/// ```swift
/// let test = Audiogram(points: [
///     AudiogramPoint(frequency: try Quantity(1000, "Hz"), leftEar: try Quantity(5, "dBHL"), rightEar: try Quantity(10, "dBHL")),
///     AudiogramPoint(frequency: try Quantity(4000, "Hz"), leftEar: try Quantity(25, "dBHL")),
/// ], start: started, end: finished)
/// ```
public struct Audiogram: HealthSample {
    public var uuid: UUID
    /// In increasing frequency, one per frequency.
    public var points: [AudiogramPoint]
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// The most frequencies one audiogram holds.
    public static let maximumPoints = 64
    /// The thresholds an audiogram may hold, in `dBHL` (an audiometer's range, with room).
    public static let hearingLevels: ClosedRange<Double> = -20...140

    public init(
        points: [AudiogramPoint], start: Date, end: Date, device: Device? = nil, metadata: Metadata = [:], uuid: UUID = .timeOrdered(),
        sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.points = points
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .audiogram }
}

extension ObjectType {
    /// HealthKit's `HKAudiogramSampleType`.
    public static let audiogram = ObjectType(identifier: "HKDataTypeIdentifierAudiogram", family: .audiogram)
}
