import Foundation

/// What the recording device made of an electrocardiogram (HealthKit's
/// `HKElectrocardiogram.Classification`, raw values as HealthKit's).
public enum ElectrocardiogramClassification: Int, Sendable, Hashable, CaseIterable {
    case notSet = 0
    case sinusRhythm = 1
    case atrialFibrillation = 2
    case inconclusiveLowHeartRate = 3
    case inconclusiveHighHeartRate = 4
    case inconclusivePoorReading = 5
    case inconclusiveOther = 6
    case unrecognized = 100
}

/// Whether the person reported symptoms with the recording (HealthKit's
/// `HKElectrocardiogram.SymptomsStatus`).
public enum ElectrocardiogramSymptomsStatus: Int, Sendable, Hashable, CaseIterable {
    case notSet = 0
    case none = 1
    case present = 2
}

/// A single-lead electrocardiogram (HealthKit's `HKElectrocardiogram`, type
/// `HKDataTypeIdentifierElectrocardiogram`): its classification, symptoms status, average heart
/// rate, sampling frequency, and the voltage measurements of lead I in microvolts, one per
/// sample from the start. As in HealthKit, apps read electrocardiograms under a read grant and
/// never save one; the owner's import brings them.
public struct Electrocardiogram: HealthSample {
    public var uuid: UUID
    public var classification: ElectrocardiogramClassification
    public var symptomsStatus: ElectrocardiogramSymptomsStatus
    /// `count/min`; nil when the device gave none.
    public var averageHeartRate: Quantity?
    /// `Hz`.
    public var samplingFrequency: Quantity
    /// Lead I, in `µV`, at the sampling frequency from ``startDate``.
    public var voltages: [Float]
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// The most measurements one recording holds (over six minutes at 512 Hz).
    public static let maximumVoltages = 200_000

    public init(
        classification: ElectrocardiogramClassification, symptomsStatus: ElectrocardiogramSymptomsStatus = .notSet, averageHeartRate: Quantity? = nil,
        samplingFrequency: Quantity, voltages: [Float], start: Date, end: Date, device: Device? = nil, metadata: Metadata = [:],
        uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.classification = classification
        self.symptomsStatus = symptomsStatus
        self.averageHeartRate = averageHeartRate
        self.samplingFrequency = samplingFrequency
        self.voltages = voltages
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .electrocardiogram }
}

extension ObjectType {
    /// HealthKit's `HKElectrocardiogramType`.
    public static let electrocardiogram = ObjectType(identifier: "HKDataTypeIdentifierElectrocardiogram", family: .electrocardiogram)
}
