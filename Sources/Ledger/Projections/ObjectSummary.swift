import Crypto
import Foundation
import HealthModel
import LedgerSchema

/// What the projections need to know of an object, taken from its schema form.
struct ObjectSummary: Sendable {
    var uuid: [UInt8]
    var type: String
    var typeCode: UInt32
    var startUs: Int64
    var endUs: Int64
    var sourceBundle: String
    var syncIdentifier: String?
    var syncVersion: Int64?
    /// Quantity in the type's canonical unit, or the category value.
    var value: Double

    init(_ object: Healthledger_V1_HealthObject, units: UnitCache) throws {
        uuid = Array(object.uuid)
        type = object.type
        typeCode = TypeCatalogue.code(of: object.type)
        startUs = object.startUs
        endUs = object.endUs
        sourceBundle = object.sourceRevision.source.bundleIdentifier
        for entry in object.metadata {
            switch (entry.key, entry.value) {
            case (MetadataKey.syncIdentifier, .stringValue(let identifier)): syncIdentifier = identifier
            case (MetadataKey.syncVersion, .numberValue(let number)): syncVersion = Int64(exactly: number)
            default: break
            }
        }
        switch object.body {
        case .quantity(let body): value = try units.canonicalValue(body.quantity.value, unit: body.quantity.unit, type: object.type)
        case .category(let body): value = Double(body.value)
        case nil: value = 0
        }
    }

    /// The same summary, taken from the model object before it is encoded (the live write
    /// path). Every field is derived exactly as from the schema form, so live projections
    /// and replayed ones agree byte for byte.
    init(_ object: HealthObject, units: UnitCache) throws {
        uuid = withUnsafeBytes(of: object.uuid.uuid) { Array($0) }
        type = object.objectType.identifier
        typeCode = TypeCatalogue.code(of: type)
        startUs = microseconds(object.startDate)
        endUs = microseconds(object.endDate)
        sourceBundle = object.sourceRevision.source.bundleIdentifier
        if case .string(let identifier)? = object.metadata[MetadataKey.syncIdentifier] { syncIdentifier = identifier }
        if case .number(let number)? = object.metadata[MetadataKey.syncVersion] { syncVersion = Int64(exactly: number) }
        switch object {
        case .quantitySample(let sample):
            // Through the unit's printed form, as replay sees it in the log.
            value = try units.canonicalValue(sample.quantity.value, unit: sample.quantity.unit.description, type: type)
        case .categorySample(let sample):
            value = Double(Int64(sample.value))
        }
    }

    var duration: Int64 { endUs &- startUs }

    /// The key of the (source, type, sync identifier) index.
    var syncKey: [UInt8]? {
        syncIdentifier.map { Self.syncKey(source: sourceBundle, type: type, identifier: $0) }
    }

    static func syncKey(source: String, type: String, identifier: String) -> [UInt8] {
        var hasher = SHA256()
        for part in [source, type, identifier] {
            var length = UInt32(part.utf8.count).bigEndian
            withUnsafeBytes(of: &length) { hasher.update(bufferPointer: $0) }
            hasher.update(data: Array(part.utf8))
        }
        return Array(hasher.finalize())
    }
}

/// Parsed units by (unit string, type), for converting values to canonical units.
///
/// Not thread-safe: each writer or replay owns its own.
final class UnitCache {
    private struct Key: Hashable {
        var unit: String
        var type: String
    }

    private var conversions: [Key: (HealthUnit, HealthUnit)] = [:]

    func canonicalValue(_ value: Double, unit: String, type: String) throws -> Double {
        let key = Key(unit: unit, type: type)
        if let (from, to) = conversions[key] { return try from.convert(value, to: to) }
        let pair = (try HealthUnit(unit), try QuantityType(type).canonicalUnit)
        conversions[key] = pair
        return try pair.0.convert(value, to: pair.1)
    }
}
