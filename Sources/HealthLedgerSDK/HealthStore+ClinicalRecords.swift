import Foundation
import HealthModel

/// The clinical records of a clinical type (`HKClinicalTypeIdentifier…`), optionally of one
/// FHIR resource type, oldest first, as far as the caller may read them (HealthKit's sample
/// query of a clinical type with `HKQuery.predicateForClinicalRecords(withFHIRResourceType:)`).
///
/// ```swift
/// let labs = ClinicalRecordQueryDescriptor(type: try ObjectType("HKClinicalTypeIdentifierLabResultRecord"), resourceType: "Observation")
/// for record in try await labs.result(for: store) { print(record.displayName) }
/// ```
public struct ClinicalRecordQueryDescriptor: Sendable, Hashable {
    public var type: ObjectType
    /// Only resources of this `resourceType` (`Observation`, `Condition`…); all when nil.
    public var resourceType: String?
    /// Only records received within this interval; all when nil.
    public var interval: DateInterval?

    public init(type: ObjectType, resourceType: String? = nil, interval: DateInterval? = nil) {
        self.type = type
        self.resourceType = resourceType
        self.interval = interval
    }

    /// The records, oldest first.
    /// - Throws: ``HealthError`` `invalidArgument` for a type that is not a clinical type.
    public func result(for store: HealthStore) async throws -> [ClinicalRecord] {
        guard type.family == .clinicalRecord else {
            throw HealthError.invalidArgument("\(type) is not a clinical type (HKClinicalTypeIdentifier…)", field: "type")
        }
        let records = try await SampleQueryDescriptor(type: type, interval: interval).result(for: store).compactMap(\.clinicalRecord)
        guard let resourceType else { return records }
        return records.filter { $0.fhirResource.resourceType == resourceType }
    }
}
