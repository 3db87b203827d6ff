import Foundation

/// Glasses or contact lenses (HealthKit's `HKVisionPrescriptionType`).
public enum VisionPrescriptionType: Int, Sendable, Hashable, CaseIterable {
    case glasses = 1
    case contacts = 2
}

/// Which eye a lens or prism is for (HealthKit's `HKVisionEye`).
public enum VisionEye: Int, Sendable, Hashable, CaseIterable {
    case left = 1
    case right = 2
}

/// The direction of a prism's base (HealthKit's `HKPrismBase`).
public enum PrismBase: Int, Sendable, Hashable, CaseIterable {
    case none = 0
    case up = 1
    case down = 2
    case `in` = 3
    case out = 4
}

/// A prism correction of a glasses lens (HealthKit's `HKVisionPrism`).
public struct Prism: Sendable, Hashable {
    /// In prism diopters (`pD`).
    public var amount: Quantity
    /// The direction of the base, an angle (`deg`).
    public var angle: Quantity
    public var base: PrismBase
    public var eye: VisionEye

    public init(amount: Quantity, angle: Quantity, base: PrismBase, eye: VisionEye) {
        self.amount = amount
        self.angle = angle
        self.base = base
        self.eye = eye
    }
}

/// The correction for one eye (HealthKit's `HKGlassesLensSpecification` and
/// `HKContactsLensSpecification` in one type).
///
/// Powers are in diopters (`D`), angles in degrees (`deg`), lengths in any length unit
/// (usually `mm`). The glasses-only fields must be nil in a contacts prescription and the
/// contacts-only ones in a glasses prescription.
///
/// ```swift
/// let right = LensSpecification.glasses(
///     sphere: try Quantity(-2.25, "D"), cylinder: try Quantity(-0.5, "D"), axis: try Quantity(90, "deg"),
///     farPupillaryDistance: try Quantity(31.5, "mm"))
/// ```
public struct LensSpecification: Sendable, Hashable {
    public var sphere: Quantity
    public var cylinder: Quantity?
    public var axis: Quantity?
    public var addPower: Quantity?
    /// Glasses only.
    public var vertexDistance: Quantity?
    /// Glasses only.
    public var prism: Prism?
    /// Glasses only.
    public var farPupillaryDistance: Quantity?
    /// Glasses only.
    public var nearPupillaryDistance: Quantity?
    /// Contacts only.
    public var baseCurve: Quantity?
    /// Contacts only.
    public var diameter: Quantity?

    public init(
        sphere: Quantity, cylinder: Quantity? = nil, axis: Quantity? = nil, addPower: Quantity? = nil,
        vertexDistance: Quantity? = nil, prism: Prism? = nil, farPupillaryDistance: Quantity? = nil,
        nearPupillaryDistance: Quantity? = nil, baseCurve: Quantity? = nil, diameter: Quantity? = nil
    ) {
        self.sphere = sphere
        self.cylinder = cylinder
        self.axis = axis
        self.addPower = addPower
        self.vertexDistance = vertexDistance
        self.prism = prism
        self.farPupillaryDistance = farPupillaryDistance
        self.nearPupillaryDistance = nearPupillaryDistance
        self.baseCurve = baseCurve
        self.diameter = diameter
    }

    /// A glasses lens (HealthKit's `HKGlassesLensSpecification`).
    public static func glasses(
        sphere: Quantity, cylinder: Quantity? = nil, axis: Quantity? = nil, addPower: Quantity? = nil,
        vertexDistance: Quantity? = nil, prism: Prism? = nil, farPupillaryDistance: Quantity? = nil,
        nearPupillaryDistance: Quantity? = nil
    ) -> LensSpecification {
        LensSpecification(
            sphere: sphere, cylinder: cylinder, axis: axis, addPower: addPower, vertexDistance: vertexDistance, prism: prism,
            farPupillaryDistance: farPupillaryDistance, nearPupillaryDistance: nearPupillaryDistance)
    }

    /// A contact lens (HealthKit's `HKContactsLensSpecification`).
    public static func contacts(
        sphere: Quantity, cylinder: Quantity? = nil, axis: Quantity? = nil, addPower: Quantity? = nil,
        baseCurve: Quantity? = nil, diameter: Quantity? = nil
    ) -> LensSpecification {
        LensSpecification(
            sphere: sphere, cylinder: cylinder, axis: axis, addPower: addPower, baseCurve: baseCurve, diameter: diameter)
    }
}

/// A prescription for glasses or contact lenses (HealthKit's `HKVisionPrescription`,
/// `HKGlassesPrescription` and `HKContactsPrescription`). Its time span runs from the
/// date issued to the expiration date.
///
/// ```swift
/// let prescription = VisionPrescription(
///     type: .glasses, dateIssued: issued, expirationDate: issued.addingTimeInterval(2 * 365 * 86_400),
///     description: "Distance", rightEye: right, leftEye: left)
/// ```
public struct VisionPrescription: HealthSample {
    public var uuid: UUID
    public var prescriptionType: VisionPrescriptionType
    public var dateIssued: Date
    public var expirationDate: Date
    /// Free text (e.g. the lens or the contacts' brand).
    public var description: String
    public var rightEye: LensSpecification?
    public var leftEye: LensSpecification?
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    public init(
        type: VisionPrescriptionType, dateIssued: Date, expirationDate: Date, description: String = "",
        rightEye: LensSpecification? = nil, leftEye: LensSpecification? = nil, device: Device? = nil,
        metadata: Metadata = [:], uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.prescriptionType = type
        self.dateIssued = dateIssued
        self.expirationDate = expirationDate
        self.description = description
        self.rightEye = rightEye
        self.leftEye = leftEye
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .visionPrescription }
    /// The date issued.
    public var startDate: Date { dateIssued }
    /// The expiration date.
    public var endDate: Date { expirationDate }
}
