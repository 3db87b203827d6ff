import Foundation
import HealthModel

/// The person's medications, as far as the caller may read them, oldest recorded first
/// (HealthKit's `HKUserAnnotatedMedicationQueryDescriptor`), optionally only those matching
/// `predicateForUserAnnotatedMedications(isArchived:)` or `(hasSchedule:)`.
///
/// ```swift
/// let current = UserAnnotatedMedicationQueryDescriptor(predicate: .predicateForUserAnnotatedMedications(isArchived: false))
/// for entry in try await current.result(for: store) {
///     let doses = SampleQueryDescriptor(
///         type: .medicationDoseEvent,
///         predicate: .predicateForMedicationDoseEvent(medicationConceptIdentifiers: [entry.medication.identifier]))
///     print(entry.medication.displayText, try await doses.result(for: store).count)
/// }
/// ```
public struct UserAnnotatedMedicationQueryDescriptor: Sendable, Hashable {
    public var predicate: ObjectPredicate?
    /// 0: no limit.
    public var limit: Int

    public init(predicate: ObjectPredicate? = nil, limit: Int = 0) {
        self.predicate = predicate
        self.limit = limit
    }

    public func result(for store: HealthStore) async throws -> [UserAnnotatedMedication] {
        try await SampleQueryDescriptor(type: .userAnnotatedMedication, predicate: predicate, limit: limit).result(for: store)
            .compactMap(\.userAnnotatedMedication)
    }
}
