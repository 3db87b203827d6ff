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
        case .quantity(let body): value = try units.canonicalValue(body.quantity, type: object.type)
        case .category(let body): value = Double(body.value)
        case nil: value = 0
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

/// Parsed units by string, and their factor to each type's canonical unit.
final class UnitCache: @unchecked Sendable {
    private var units: [String: HealthUnit] = [:]
    private var factors: [String: (HealthUnit, HealthUnit)] = [:]

    func unit(_ string: String) throws -> HealthUnit {
        if let unit = units[string] { return unit }
        let unit = try HealthUnit(string)
        units[string] = unit
        return unit
    }

    func canonicalValue(_ quantity: Healthledger_V1_Quantity, type: String) throws -> Double {
        let unit = try unit(quantity.unit)
        let canonical = try QuantityType(type).canonicalUnit
        return try unit.convert(quantity.value, to: canonical)
    }
}
