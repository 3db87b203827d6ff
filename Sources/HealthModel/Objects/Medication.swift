import Foundation

/// A code for a medication in a clinical coding system (HealthKit's `HKClinicalCoding`):
/// RxNorm's `http://www.nlm.nih.gov/research/umls/rxnorm` and its code, for one.
public struct ClinicalCoding: Sendable, Hashable {
    public var system: String
    public var version: String?
    public var code: String

    public init(system: String, version: String? = nil, code: String) {
        self.system = system
        self.version = version
        self.code = code
    }
}

/// The idea of a medication, like ibuprofen or insulin (HealthKit's `HKMedicationConcept`).
public struct MedicationConcept: Sendable, Hashable {
    /// HealthKit's `HKHealthConceptIdentifier`: what dose events name the medication by.
    public var identifier: String
    /// The medication's name as the person entered or chose it.
    public var displayText: String
    public var generalForm: GeneralForm
    /// Codes for the medication in clinical coding systems, each once.
    public var relatedCodings: [ClinicalCoding]

    /// HealthKit's `HKMedicationGeneralForm`: the form the medication is made in, by its name.
    public enum GeneralForm: String, Sendable, Hashable, CaseIterable {
        case capsule, cream, device, drops, foam, gel, inhaler, injection, liquid, lotion, ointment, patch, powder, spray, suppository, tablet
        case topical, unknown
    }

    public init(identifier: String, displayText: String, generalForm: GeneralForm = .unknown, relatedCodings: [ClinicalCoding] = []) {
        self.identifier = identifier
        self.displayText = displayText
        self.generalForm = generalForm
        self.relatedCodings = relatedCodings
    }

    /// The most codings one concept holds.
    public static let maximumCodings = 64
}

/// A medication on the person's list (HealthKit's `HKUserAnnotatedMedication`, type
/// `HKDataTypeIdentifierUserAnnotatedMedicationConcept`): the medication, the nickname they gave
/// it, and whether it is archived or has a schedule. It is dated when it was recorded (start and
/// end). As in HealthKit, apps read medications under a read grant of the type and never save
/// one; the owner and the owner's import do. A later version of the same entry (the same sync
/// identifier, a higher version) replaces it.
public struct UserAnnotatedMedication: HealthSample {
    public var uuid: UUID
    public var medication: MedicationConcept
    public var nickname: String?
    public var isArchived: Bool
    public var hasSchedule: Bool
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    public init(
        medication: MedicationConcept, nickname: String? = nil, isArchived: Bool = false, hasSchedule: Bool = false, recorded: Date,
        device: Device? = nil, metadata: Metadata = [:], uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.medication = medication
        self.nickname = nickname
        self.isArchived = isArchived
        self.hasSchedule = hasSchedule
        self.startDate = recorded
        self.endDate = recorded
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .userAnnotatedMedication }
}

/// A dose of a medication taken, skipped or not logged (HealthKit's `HKMedicationDoseEvent`,
/// type `HKMedicationDoseEventTypeIdentifierMedicationDoseEvent`), naming its medication by the
/// concept identifier of a ``UserAnnotatedMedication``'s ``MedicationConcept``. As in HealthKit,
/// apps read dose events under a read grant of the type and never save one.
public struct MedicationDoseEvent: HealthSample {
    public var uuid: UUID
    public var medicationConceptIdentifier: String
    public var logStatus: LogStatus
    public var scheduleType: ScheduleType
    /// How much was taken, in ``unit``; nil when not logged.
    public var doseQuantity: Double?
    /// How much the schedule called for, in ``unit``.
    public var scheduledDoseQuantity: Double?
    /// When the schedule called for the dose.
    public var scheduledDate: Date?
    /// The unit of the quantities (`count` for tablets, `mg`, `mL` …).
    public var unit: HealthUnit
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// HealthKit's `HKMedicationDoseEvent.LogStatus`, with its raw values.
    public enum LogStatus: Int, Sendable, Hashable, CaseIterable {
        case notInteracted = 1, notificationNotSent, snoozed, taken, skipped, notLogged
    }

    /// HealthKit's `HKMedicationDoseEvent.ScheduleType`, with its raw values.
    public enum ScheduleType: Int, Sendable, Hashable, CaseIterable {
        /// Logged without a schedule.
        case asNeeded = 1
        /// Logged from a scheduled reminder.
        case schedule = 2
    }

    public init(
        medicationConceptIdentifier: String, logStatus: LogStatus, scheduleType: ScheduleType = .asNeeded, doseQuantity: Double? = nil,
        scheduledDoseQuantity: Double? = nil, scheduledDate: Date? = nil, unit: HealthUnit = .count, start: Date, end: Date, device: Device? = nil,
        metadata: Metadata = [:], uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.medicationConceptIdentifier = medicationConceptIdentifier
        self.logStatus = logStatus
        self.scheduleType = scheduleType
        self.doseQuantity = doseQuantity
        self.scheduledDoseQuantity = scheduledDoseQuantity
        self.scheduledDate = scheduledDate
        self.unit = unit
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .medicationDoseEvent }
}

extension ObjectType {
    /// HealthKit's `HKObjectType.userAnnotatedMedicationType()`.
    public static let userAnnotatedMedication = ObjectType(
        identifier: "HKDataTypeIdentifierUserAnnotatedMedicationConcept", family: .userAnnotatedMedication)
    /// HealthKit's `HKObjectType.medicationDoseEventType()`.
    public static let medicationDoseEvent = ObjectType(identifier: "HKMedicationDoseEventTypeIdentifierMedicationDoseEvent", family: .medicationDoseEvent)
}
