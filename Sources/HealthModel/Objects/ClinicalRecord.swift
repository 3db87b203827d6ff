import Foundation

/// A FHIR resource as a health record holds it (HealthKit's `HKFHIRResource`): its JSON byte
/// for byte, with what identifies it.
public struct FHIRResource: Sendable, Hashable {
    /// The resource's `resourceType` (`Observation`, `Condition`, `Immunization`…).
    public var resourceType: String
    /// The resource's `id` (empty when it has none).
    public var identifier: String
    /// The FHIR release it follows (`4.0.1`, `1.0.2`).
    public var fhirVersion: String
    /// Where it was fetched from (empty when unknown).
    public var sourceURL: String
    /// The resource's JSON, as received.
    public var data: [UInt8]

    public init(resourceType: String, identifier: String, fhirVersion: String, sourceURL: String = "", data: [UInt8]) {
        self.resourceType = resourceType
        self.identifier = identifier
        self.fhirVersion = fhirVersion
        self.sourceURL = sourceURL
        self.data = data
    }

    /// The resource read from its JSON: its `resourceType` and `id`.
    /// - Throws: ``HealthError`` `invalidArgument` when the data is not a JSON object with a
    ///   `resourceType`.
    public init(json data: [UInt8], fhirVersion: String, sourceURL: String = "") throws {
        guard let object = try? JSONSerialization.jsonObject(with: Data(data)) as? [String: Any],
            let resourceType = object["resourceType"] as? String, !resourceType.isEmpty
        else {
            throw HealthError.invalidArgument("fhirResource.data: a FHIR resource is a JSON object with a resourceType", field: "fhirResource.data")
        }
        self.init(resourceType: resourceType, identifier: object["id"] as? String ?? "", fhirVersion: fhirVersion, sourceURL: sourceURL, data: data)
    }

    /// What a person would call the resource: its code's text or first coding's display
    /// (a vaccine's, a medication's), else its type.
    public var suggestedDisplayName: String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(data)) as? [String: Any] else { return resourceType }
        for key in ["code", "vaccineCode", "medicationCodeableConcept", "type"] {
            guard let concept = object[key] as? [String: Any] else { continue }
            if let text = concept["text"] as? String, !text.isEmpty { return text }
            if let coding = (concept["coding"] as? [[String: Any]])?.first, let display = coding["display"] as? String, !display.isEmpty { return display }
        }
        return resourceType
    }
}

/// A record from a health institution (HealthKit's `HKClinicalRecord`): a FHIR resource kept
/// byte for byte, of one of the clinical types (lab results, conditions, immunizations…),
/// dated when it was received. As in HealthKit, apps read clinical records under a read grant
/// of their type and never save one; the owner's import brings them.
public struct ClinicalRecord: HealthSample {
    public var uuid: UUID
    public var type: ObjectType
    /// What the institution calls it ("Hemoglobin A1c").
    public var displayName: String
    public var fhirResource: FHIRResource
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// The largest FHIR resource a record holds.
    public static let maximumResourceBytes = 1 << 20

    public init(
        type: ObjectType, displayName: String, fhirResource: FHIRResource, start: Date, end: Date, device: Device? = nil, metadata: Metadata = [:],
        uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.type = type
        self.displayName = displayName
        self.fhirResource = fhirResource
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { type }
}

extension ObjectType {
    /// HealthKit's clinical types (`HKClinicalTypeIdentifier…`): the kinds of health records.
    public static let clinicalTypes: [ObjectType] = TypeCatalogue.clinicalTypes.map { ObjectType(identifier: $0, family: .clinicalRecord) }
}

extension TypeCatalogue {
    /// HealthKit's `HKClinicalTypeIdentifier`s.
    public static let clinicalTypes = [
        "HKClinicalTypeIdentifierAllergyRecord", "HKClinicalTypeIdentifierClinicalNoteRecord", "HKClinicalTypeIdentifierConditionRecord",
        "HKClinicalTypeIdentifierCoverageRecord", "HKClinicalTypeIdentifierImmunizationRecord", "HKClinicalTypeIdentifierLabResultRecord",
        "HKClinicalTypeIdentifierMedicationRecord", "HKClinicalTypeIdentifierProcedureRecord", "HKClinicalTypeIdentifierVitalSignRecord",
    ]
}
