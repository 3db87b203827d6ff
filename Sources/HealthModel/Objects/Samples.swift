import Foundation

/// What every stored object has: identity, origin and metadata.
public protocol HealthObjectProtocol: Sendable, Hashable {
    /// Unique for the life of the ledger.
    var uuid: UUID { get }
    var objectType: ObjectType { get }
    /// Who saved it. For apps the ledger sets the source from the caller's identity.
    var sourceRevision: SourceRevision { get set }
    var device: Device? { get }
    var metadata: Metadata { get }
}

/// A sample: an object with a start and end date (end ≥ start).
public protocol HealthSample: HealthObjectProtocol {
    var startDate: Date { get }
    var endDate: Date { get }
}

extension HealthObjectProtocol {
    /// `HKMetadataKeySyncIdentifier`, if set to a string.
    public var syncIdentifier: String? {
        if case .string(let value)? = metadata[MetadataKey.syncIdentifier] { return value }
        return nil
    }

    /// `HKMetadataKeySyncVersion`, if set to an integral number.
    public var syncVersion: Int64? {
        if case .number(let value)? = metadata[MetadataKey.syncVersion], let integer = Int64(exactly: value) {
            return integer
        }
        return nil
    }
}

/// A value of a quantity type over a time span (HealthKit's `HKQuantitySample`).
///
/// ```swift
/// let sample = QuantitySample(
///     type: try QuantityType("HKQuantityTypeIdentifierHeartRate"),
///     quantity: try Quantity(72, "count/min"),
///     start: now, end: now)
/// ```
public struct QuantitySample: HealthSample {
    public var uuid: UUID
    public var type: QuantityType
    /// For a series sample, the sum (cumulative types) or the mean (discrete types) of the
    /// series' values.
    public var quantity: Quantity
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata
    /// The values a series sample is made of (HealthKit's quantity series, as a watch records
    /// heart rate during a workout), each over its own interval within the sample's, in time
    /// order, in ``quantity``'s unit; empty for a sample of one value. Statistics count each
    /// value over its own interval, as HealthKit's do.
    public var series: [QuantitySeriesEntry]

    /// Inlinable: decoders make samples by the thousand, and inlined the fields go straight
    /// into place instead of through a copy of the whole sample.
    @inlinable
    public init(
        type: QuantityType, quantity: Quantity, start: Date, end: Date, device: Device? = nil,
        metadata: Metadata = [:], uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner),
        series: [QuantitySeriesEntry] = []
    ) {
        self.uuid = uuid
        self.type = type
        self.quantity = quantity
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
        self.series = series
    }

    /// A series sample (HealthKit's `HKQuantitySeriesSampleBuilder`): `series`' values in
    /// `unit`, spanning them, its quantity their sum (a cumulative type) or mean (a discrete
    /// type).
    ///
    /// ```swift
    /// let steps = QuantitySample(type: stepCount, unit: .count, series: minutes.map {
    ///     QuantitySeriesEntry(value: $0.steps, start: $0.start, end: $0.start.addingTimeInterval(60))
    /// })
    /// ```
    public init(
        type: QuantityType, unit: HealthUnit, series: [QuantitySeriesEntry], device: Device? = nil, metadata: Metadata = [:],
        uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        let start = series.map(\.startDate).min() ?? Date(timeIntervalSince1970: 0)
        let end = series.map(\.endDate).max() ?? start
        self.init(
            type: type, quantity: Quantity(Self.aggregate(series, of: type) ?? 0, unit), start: start, end: end, device: device, metadata: metadata,
            uuid: uuid, sourceRevision: sourceRevision, series: series)
    }

    /// What a series sample's quantity holds: the values' sum for a cumulative type; for a
    /// discrete one their mean (HealthKit's `averageQuantity`), for sound levels (dBASPL) the
    /// mean of their energies (10^(L/10)) back in decibels; nil for no values.
    public static func aggregate(_ series: [QuantitySeriesEntry], of type: QuantityType) -> Double? {
        guard !series.isEmpty else { return nil }
        switch type.aggregationStyle {
        case .cumulative:
            return series.reduce(0) { $0 + $1.value }
        case .discreteEquivalentContinuousLevel:
            let energy = series.reduce(0) { $0 + pow(10, $1.value / 10) } / Double(series.count)
            return 10 * log10(energy)
        case .discreteArithmetic, .discreteTemporallyWeighted:
            // Each value divided first, so that values near the largest Double do not overflow.
            return series.reduce(0) { $0 + $1.value / Double(series.count) }
        }
    }

    /// How many values the sample holds (HealthKit's `count`).
    public var count: Int { max(1, series.count) }

    /// The most values one series sample holds (a day of a value every two seconds).
    public static let maximumSeriesEntries = 50_000

    public var objectType: ObjectType { type.objectType }
}

/// One value of a quantity series sample over its own interval (an entry of HealthKit's
/// `HKQuantitySeriesSampleBuilder`), in the unit of its sample's quantity.
public struct QuantitySeriesEntry: Sendable, Hashable {
    /// In the unit of the sample's ``QuantitySample/quantity``.
    public var value: Double
    public var startDate: Date
    public var endDate: Date

    /// `value` over `start`–`end` (an instant when they are equal).
    public init(value: Double, start: Date, end: Date) {
        self.value = value
        self.startDate = start
        self.endDate = end
    }
}

/// A value of a category type over a time span (HealthKit's `HKCategorySample`).
public struct CategorySample: HealthSample {
    public var uuid: UUID
    public var type: CategoryType
    /// A raw value of the type's enumeration (e.g. sleep analysis asleepREM = 5).
    public var value: Int
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// Inlinable, as ``QuantitySample/init(type:quantity:start:end:device:metadata:uuid:sourceRevision:)`` is.
    @inlinable
    public init(
        type: CategoryType, value: Int, start: Date, end: Date, device: Device? = nil,
        metadata: Metadata = [:], uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.type = type
        self.value = value
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { type.objectType }
}

/// Any object a ledger stores.
public indirect enum HealthObject: Sendable, Hashable {
    case quantitySample(QuantitySample)
    case categorySample(CategorySample)
    case visionPrescription(VisionPrescription)
    case workout(Workout)
    case workoutRoute(WorkoutRoute)
    case correlation(Correlation)
    case activitySummary(ActivitySummary)
    case audiogram(Audiogram)
    case clinicalRecord(ClinicalRecord)
    case electrocardiogram(Electrocardiogram)
    case heartbeatSeries(HeartbeatSeriesSample)
    case stateOfMind(StateOfMind)
    case userAnnotatedMedication(UserAnnotatedMedication)
    case medicationDoseEvent(MedicationDoseEvent)

    /// The object as its common protocol.
    public var object: any HealthSample {
        switch self {
        case .quantitySample(let sample): sample
        case .categorySample(let sample): sample
        case .visionPrescription(let sample): sample
        case .workout(let sample): sample
        case .workoutRoute(let sample): sample
        case .correlation(let sample): sample
        case .activitySummary(let sample): sample
        case .audiogram(let sample): sample
        case .clinicalRecord(let sample): sample
        case .electrocardiogram(let sample): sample
        case .heartbeatSeries(let sample): sample
        case .stateOfMind(let sample): sample
        case .userAnnotatedMedication(let sample): sample
        case .medicationDoseEvent(let sample): sample
        }
    }

    public var uuid: UUID {
        switch self {
        case .quantitySample(let sample): sample.uuid
        case .categorySample(let sample): sample.uuid
        case .visionPrescription(let sample): sample.uuid
        case .workout(let sample): sample.uuid
        case .workoutRoute(let sample): sample.uuid
        case .correlation(let sample): sample.uuid
        case .activitySummary(let sample): sample.uuid
        case .audiogram(let sample): sample.uuid
        case .clinicalRecord(let sample): sample.uuid
        case .electrocardiogram(let sample): sample.uuid
        case .heartbeatSeries(let sample): sample.uuid
        case .stateOfMind(let sample): sample.uuid
        case .userAnnotatedMedication(let sample): sample.uuid
        case .medicationDoseEvent(let sample): sample.uuid
        }
    }

    public var objectType: ObjectType {
        switch self {
        case .quantitySample(let sample): sample.objectType
        case .categorySample(let sample): sample.objectType
        case .visionPrescription(let sample): sample.objectType
        case .workout(let sample): sample.objectType
        case .workoutRoute(let sample): sample.objectType
        case .correlation(let sample): sample.objectType
        case .activitySummary(let sample): sample.objectType
        case .audiogram(let sample): sample.objectType
        case .clinicalRecord(let sample): sample.objectType
        case .electrocardiogram(let sample): sample.objectType
        case .heartbeatSeries(let sample): sample.objectType
        case .stateOfMind(let sample): sample.objectType
        case .userAnnotatedMedication(let sample): sample.objectType
        case .medicationDoseEvent(let sample): sample.objectType
        }
    }

    public var startDate: Date {
        switch self {
        case .quantitySample(let sample): sample.startDate
        case .categorySample(let sample): sample.startDate
        case .visionPrescription(let sample): sample.startDate
        case .workout(let sample): sample.startDate
        case .workoutRoute(let sample): sample.startDate
        case .correlation(let sample): sample.startDate
        case .activitySummary(let sample): sample.startDate
        case .audiogram(let sample): sample.startDate
        case .clinicalRecord(let sample): sample.startDate
        case .electrocardiogram(let sample): sample.startDate
        case .heartbeatSeries(let sample): sample.startDate
        case .stateOfMind(let sample): sample.startDate
        case .userAnnotatedMedication(let sample): sample.startDate
        case .medicationDoseEvent(let sample): sample.startDate
        }
    }

    public var endDate: Date {
        switch self {
        case .quantitySample(let sample): sample.endDate
        case .categorySample(let sample): sample.endDate
        case .visionPrescription(let sample): sample.endDate
        case .workout(let sample): sample.endDate
        case .workoutRoute(let sample): sample.endDate
        case .correlation(let sample): sample.endDate
        case .activitySummary(let sample): sample.endDate
        case .audiogram(let sample): sample.endDate
        case .clinicalRecord(let sample): sample.endDate
        case .electrocardiogram(let sample): sample.endDate
        case .heartbeatSeries(let sample): sample.endDate
        case .stateOfMind(let sample): sample.endDate
        case .userAnnotatedMedication(let sample): sample.endDate
        case .medicationDoseEvent(let sample): sample.endDate
        }
    }

    public var metadata: Metadata {
        switch self {
        case .quantitySample(let sample): sample.metadata
        case .categorySample(let sample): sample.metadata
        case .visionPrescription(let sample): sample.metadata
        case .workout(let sample): sample.metadata
        case .workoutRoute(let sample): sample.metadata
        case .correlation(let sample): sample.metadata
        case .activitySummary(let sample): sample.metadata
        case .audiogram(let sample): sample.metadata
        case .clinicalRecord(let sample): sample.metadata
        case .electrocardiogram(let sample): sample.metadata
        case .heartbeatSeries(let sample): sample.metadata
        case .stateOfMind(let sample): sample.metadata
        case .userAnnotatedMedication(let sample): sample.metadata
        case .medicationDoseEvent(let sample): sample.metadata
        }
    }

    public var device: Device? {
        switch self {
        case .quantitySample(let sample): sample.device
        case .categorySample(let sample): sample.device
        case .visionPrescription(let sample): sample.device
        case .workout(let sample): sample.device
        case .workoutRoute(let sample): sample.device
        case .correlation(let sample): sample.device
        case .activitySummary(let sample): sample.device
        case .audiogram(let sample): sample.device
        case .clinicalRecord(let sample): sample.device
        case .electrocardiogram(let sample): sample.device
        case .heartbeatSeries(let sample): sample.device
        case .stateOfMind(let sample): sample.device
        case .userAnnotatedMedication(let sample): sample.device
        case .medicationDoseEvent(let sample): sample.device
        }
    }

    public var syncIdentifier: String? {
        switch self {
        case .quantitySample(let sample): sample.syncIdentifier
        case .categorySample(let sample): sample.syncIdentifier
        case .visionPrescription(let sample): sample.syncIdentifier
        case .workout(let sample): sample.syncIdentifier
        case .workoutRoute(let sample): sample.syncIdentifier
        case .correlation(let sample): sample.syncIdentifier
        case .activitySummary(let sample): sample.syncIdentifier
        case .audiogram(let sample): sample.syncIdentifier
        case .clinicalRecord(let sample): sample.syncIdentifier
        case .electrocardiogram(let sample): sample.syncIdentifier
        case .heartbeatSeries(let sample): sample.syncIdentifier
        case .stateOfMind(let sample): sample.syncIdentifier
        case .userAnnotatedMedication(let sample): sample.syncIdentifier
        case .medicationDoseEvent(let sample): sample.syncIdentifier
        }
    }

    public var syncVersion: Int64? {
        switch self {
        case .quantitySample(let sample): sample.syncVersion
        case .categorySample(let sample): sample.syncVersion
        case .visionPrescription(let sample): sample.syncVersion
        case .workout(let sample): sample.syncVersion
        case .workoutRoute(let sample): sample.syncVersion
        case .correlation(let sample): sample.syncVersion
        case .activitySummary(let sample): sample.syncVersion
        case .audiogram(let sample): sample.syncVersion
        case .clinicalRecord(let sample): sample.syncVersion
        case .electrocardiogram(let sample): sample.syncVersion
        case .heartbeatSeries(let sample): sample.syncVersion
        case .stateOfMind(let sample): sample.syncVersion
        case .userAnnotatedMedication(let sample): sample.syncVersion
        case .medicationDoseEvent(let sample): sample.syncVersion
        }
    }

    public var sourceRevision: SourceRevision {
        get {
            switch self {
            case .quantitySample(let sample): sample.sourceRevision
            case .categorySample(let sample): sample.sourceRevision
            case .visionPrescription(let sample): sample.sourceRevision
            case .workout(let sample): sample.sourceRevision
            case .workoutRoute(let sample): sample.sourceRevision
            case .correlation(let sample): sample.sourceRevision
            case .activitySummary(let sample): sample.sourceRevision
            case .audiogram(let sample): sample.sourceRevision
            case .clinicalRecord(let sample): sample.sourceRevision
            case .electrocardiogram(let sample): sample.sourceRevision
            case .heartbeatSeries(let sample): sample.sourceRevision
            case .stateOfMind(let sample): sample.sourceRevision
            case .userAnnotatedMedication(let sample): sample.sourceRevision
            case .medicationDoseEvent(let sample): sample.sourceRevision
            }
        }
        set {
            switch self {
            case .quantitySample(var sample): sample.sourceRevision = newValue; self = .quantitySample(sample)
            case .categorySample(var sample): sample.sourceRevision = newValue; self = .categorySample(sample)
            case .visionPrescription(var sample): sample.sourceRevision = newValue; self = .visionPrescription(sample)
            case .workout(var sample): sample.sourceRevision = newValue; self = .workout(sample)
            case .workoutRoute(var sample): sample.sourceRevision = newValue; self = .workoutRoute(sample)
            case .activitySummary(var sample): sample.sourceRevision = newValue; self = .activitySummary(sample)
            case .audiogram(var sample): sample.sourceRevision = newValue; self = .audiogram(sample)
            case .clinicalRecord(var sample): sample.sourceRevision = newValue; self = .clinicalRecord(sample)
            case .electrocardiogram(var sample): sample.sourceRevision = newValue; self = .electrocardiogram(sample)
            case .heartbeatSeries(var sample): sample.sourceRevision = newValue; self = .heartbeatSeries(sample)
            case .stateOfMind(var sample): sample.sourceRevision = newValue; self = .stateOfMind(sample)
            case .userAnnotatedMedication(var sample): sample.sourceRevision = newValue; self = .userAnnotatedMedication(sample)
            case .medicationDoseEvent(var sample): sample.sourceRevision = newValue; self = .medicationDoseEvent(sample)
            case .correlation(var sample):
                // Members saved with a correlation come from the same source.
                sample.sourceRevision = newValue
                for index in sample.objects.indices { sample.objects[index].sourceRevision.source = newValue.source }
                self = .correlation(sample)
            }
        }
    }

    public var quantitySample: QuantitySample? {
        if case .quantitySample(let sample) = self { return sample }
        return nil
    }

    public var categorySample: CategorySample? {
        if case .categorySample(let sample) = self { return sample }
        return nil
    }

    public var visionPrescription: VisionPrescription? {
        if case .visionPrescription(let prescription) = self { return prescription }
        return nil
    }

    public var workout: Workout? {
        if case .workout(let workout) = self { return workout }
        return nil
    }

    public var correlation: Correlation? {
        if case .correlation(let correlation) = self { return correlation }
        return nil
    }

    public var workoutRoute: WorkoutRoute? {
        if case .workoutRoute(let route) = self { return route }
        return nil
    }

    public var activitySummary: ActivitySummary? {
        if case .activitySummary(let summary) = self { return summary }
        return nil
    }

    public var audiogram: Audiogram? {
        if case .audiogram(let audiogram) = self { return audiogram }
        return nil
    }

    public var clinicalRecord: ClinicalRecord? {
        if case .clinicalRecord(let record) = self { return record }
        return nil
    }

    public var electrocardiogram: Electrocardiogram? {
        if case .electrocardiogram(let recording) = self { return recording }
        return nil
    }

    /// The heartbeat series, when the object is one.
    public var heartbeatSeries: HeartbeatSeriesSample? {
        if case .heartbeatSeries(let series) = self { return series }
        return nil
    }

    /// The state of mind, when the object is one.
    public var stateOfMind: StateOfMind? {
        if case .stateOfMind(let state) = self { return state }
        return nil
    }

    /// The medication on the person's list, when the object is one.
    public var userAnnotatedMedication: UserAnnotatedMedication? {
        if case .userAnnotatedMedication(let medication) = self { return medication }
        return nil
    }

    /// The dose event, when the object is one.
    public var medicationDoseEvent: MedicationDoseEvent? {
        if case .medicationDoseEvent(let dose) = self { return dose }
        return nil
    }
}
