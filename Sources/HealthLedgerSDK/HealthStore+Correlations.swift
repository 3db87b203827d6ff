import Foundation
import LedgerSchema
import SwiftProtobuf

/// A correlation query (HealthKit's `HKCorrelationQueryDescriptor`): correlations of a type
/// that match a predicate and, for each member type named, hold a member of that type that
/// matches.
///
/// ```swift
/// let systolic = try QuantityType("HKQuantityTypeIdentifierBloodPressureSystolic")
/// let high = try await CorrelationQueryDescriptor(
///     type: .bloodPressure,
///     memberPredicates: [systolic: .predicateForQuantitySamples(with: .greaterOrEqual, quantity: try Quantity(140, "mmHg"))]
/// ).result(for: store)
/// ```
public typealias CorrelationQueryDescriptor = CorrelationQuery

extension CorrelationQueryDescriptor {
    /// The matching correlations, each with the members this app may read.
    public func result(for store: HealthStore) async throws -> [Correlation] { try await store.result(for: self) }
}

extension HealthStore {
    /// Runs a correlation query: the matching correlations, each with the members this app may read.
    public func result(for query: CorrelationQueryDescriptor) async throws -> [Correlation] {
        let request = Healthledger_V1_CorrelationQueryRequest.with { request in
            request.type = query.type.identifier
            if let predicate = query.predicate { request.predicate = .init(predicate) }
            request.memberPredicates = query.memberPredicates.sorted { $0.key.identifier < $1.key.identifier }.map { type, predicate in
                .with {
                    $0.type = type.identifier
                    $0.predicate = .init(predicate)
                }
            }
            if let interval = query.interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
            request.limit = UInt32(clamping: query.limit)
            request.sort = .init(query.sort)
        }
        var correlations: [Correlation] = []
        let batches = try await openStream(.queryCorrelations, request) { bytes in
            try HealthStore.sampleBatch(bytes).map { object in
                guard case .correlation(let correlation) = object else {
                    throw RPCError(.internalError, "the server sent an object that is not a correlation")
                }
                return correlation
            }
        }
        for try await batch in batches { correlations += batch }
        return correlations
    }
}
