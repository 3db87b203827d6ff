import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf

/// The sources that saved objects of a type (HealthKit's `HKSourceQueryDescriptor`), as far
/// as the caller may read them: every source for the owner and an app that may read the
/// type; for another app only itself, if it saved any.
///
/// ```swift
/// let writers = try await SourceQueryDescriptor(type: heartRate, predicate: .quantity(.greaterThan, try Quantity(120, "count/min")))
///     .result(for: store)
/// ```
public struct SourceQueryDescriptor: Sendable, Hashable {
    public var type: ObjectType
    /// Only sources of objects overlapping this interval; all when nil.
    public var interval: DateInterval?
    /// Only sources of objects that match.
    public var predicate: ObjectPredicate?

    public init(type: ObjectType, interval: DateInterval? = nil, predicate: ObjectPredicate? = nil) {
        self.type = type
        self.interval = interval
        self.predicate = predicate
    }

    /// The sources, in the order of their first save of the type.
    /// - Throws: ``RPCError`` `invalidArgument` for a characteristic type or a bad predicate.
    public func result(for store: HealthStore) async throws -> [Source] { try await store.sources(for: self) }
}

extension HealthStore {
    /// The sources ``SourceQueryDescriptor`` describes.
    public func sources(for query: SourceQueryDescriptor) async throws -> [Source] {
        let request = Healthledger_V1_SourceQueryRequest.with { request in
            request.type = query.type.identifier
            if let interval = query.interval {
                request.startUs = microseconds(interval.start)
                request.endUs = microseconds(interval.end)
            }
            if let predicate = query.predicate { request.predicate = .init(predicate) }
        }
        return try Self.decode(Healthledger_V1_SourceQueryResponse.self, try await unary(.querySources, request)).sources.map(\.model)
    }
}
