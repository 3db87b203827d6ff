import Foundation
import HealthModel
import SwiftProtobuf

extension HealthObject {
    /// Decodes a serialized `healthledger.v1.HealthObject` into the model object: the same
    /// result (and the same errors) as SwiftProtobuf's decoding followed by
    /// `Healthledger_V1_HealthObject.model()`, read in place for samples, which is what
    /// clients decode by the thousand. Anything else (another payload, a repeated nested
    /// message, a wire type out of place, invalid UTF-8, any error) takes SwiftProtobuf's
    /// path, which decides.
    public init(serialized bytes: UnsafeRawBufferPointer) throws {
        var decoder = HealthObjectDecoder()
        self = try decoder.decode(bytes)
    }
}

/// Decodes many serialized objects, as ``HealthObject/init(serialized:)`` does each: a batch's
/// objects mostly share their type, unit, source revision and device, and the decoder reuses
/// what it made of the same bytes in the object before instead of reading them again.
public struct HealthObjectDecoder {
    private var fast = FastObjectDecoder()

    public init() {}

    public mutating func decode(_ bytes: UnsafeRawBufferPointer) throws -> HealthObject {
        do {
            return try fast.decode(bytes)
        } catch {
            return try Healthledger_V1_HealthObject(serializedBytes: Array(bytes)).model()
        }
    }

    /// A message whose field 1 is `repeated HealthObject` (a `SaveRequest`, a `SampleBatch`)
    /// holding `objects`, each already serialized: what ``objects(in:)`` reads back.
    public static func message(of objects: [[UInt8]]) -> [UInt8] {
        var writer = ProtoWriter(capacity: objects.reduce(0) { $0 + ProtoWriter.messageSize(field: 1, length: $1.count) })
        for object in objects { writer.message(field: 1, object) }
        return writer.buffer
    }

    /// The objects of a message whose field 1 is `repeated HealthObject` and whose other
    /// fields it skips: a `SaveRequest`, a `SampleBatch`.
    ///
    /// - Throws: ``HealthError`` for an object the model refuses, its message prefixed with
    ///   "object N: " (N its index); another error for bytes that are not such a message.
    public static func objects(in message: [UInt8]) throws -> [HealthObject] {
        var decoder = HealthObjectDecoder()
        var objects: [HealthObject] = []
        try message.withUnsafeBytes { raw in
            var reader = ProtoReader(raw)
            while let (field, wireType) = try reader.next() {
                guard field == 1 else {
                    try reader.skip(wireType)
                    continue
                }
                guard wireType == .lengthDelimited else { throw ProtoReader.Malformed() }
                let bytes = try reader.bytes()
                do {
                    objects.append(try decoder.decode(bytes))
                } catch var error as HealthError {
                    error.message = "object \(objects.count): \(error.message)"
                    throw error
                }
            }
        }
        return objects
    }
}

/// The in-place reader behind ``HealthObjectDecoder``. `decode` throws whenever the slow
/// path must decide, including on every error: the slow path words it.
private struct FastObjectDecoder {
    struct Fallback: Error {}

    /// The last value made from some bytes, reused when the same bytes come again.
    struct Reuse<Value> {
        var bytes: [UInt8] = []
        var value: Value?

        mutating func value(for raw: UnsafeRawBufferPointer, _ make: (UnsafeRawBufferPointer) throws -> Value) rethrows -> Value {
            if let value, raw.count == bytes.count, raw.count == 0 || bytes.withUnsafeBytes({ memcmp($0.baseAddress!, raw.baseAddress!, raw.count) == 0 }) {
                return value
            }
            let made = try make(raw)
            bytes = Array(raw)
            value = made
            return made
        }
    }

    private var types = Reuse<String>()
    /// The last quantity type, reused while the type string (itself reused) is the same.
    private var quantityType: QuantityType?
    private var units = Reuse<HealthUnit>()
    private var revisions = Reuse<SourceRevision>()
    private var devices = Reuse<Device>()

    mutating func decode(_ bytes: UnsafeRawBufferPointer) throws -> HealthObject {
        var reader = ProtoReader(bytes)
        var uuidBytes = UnsafeRawBufferPointer(start: nil, count: 0)
        var typeBytes = UnsafeRawBufferPointer(start: nil, count: 0)
        var sourceRevision: SourceRevision?
        var device: Device?
        var entries: [(String, MetadataValue?)] = []
        var startUs: Int64 = 0
        var endUs: Int64 = 0
        enum Body {
            /// The quantity's value and unit, nil when the body has none.
            case quantity((Double, UnsafeRawBufferPointer)?)
            case category(Int64)
        }
        var body: Body?
        while let (field, wireType) = try reader.next() {
            switch (field, wireType) {
            case (1, .lengthDelimited): uuidBytes = try reader.bytes()
            case (2, .lengthDelimited): typeBytes = try reader.bytes()
            case (3, .lengthDelimited):
                guard sourceRevision == nil else { throw Fallback() }
                sourceRevision = try revisions.value(for: try reader.bytes(), Self.decodeSourceRevision)
            case (4, .lengthDelimited):
                guard device == nil else { throw Fallback() }
                device = try devices.value(for: try reader.bytes(), Self.decodeDevice)
            case (5, .lengthDelimited): entries.append(try Self.decodeMetadataEntry(try reader.bytes()))
            case (6, .varint): startUs = try reader.signed()
            case (7, .varint): endUs = try reader.signed()
            case (10, .lengthDelimited):
                guard body == nil else { throw Fallback() }
                body = .quantity(try Self.decodeQuantityBody(try reader.bytes()))
            case (11, .lengthDelimited):
                guard body == nil else { throw Fallback() }
                var inner = ProtoReader(try reader.bytes())
                var value: Int64 = 0
                while let (innerField, innerWire) = try inner.next() {
                    if innerField == 1 {
                        guard innerWire == .varint else { throw Fallback() }
                        value = try inner.signed()
                    } else {
                        try inner.skip(innerWire)
                    }
                }
                body = .category(value)
            case (1...7, _), (10...19, _): throw Fallback()
            default: try reader.skip(wireType)
            }
        }
        guard let uuid = UUID(bytes: uuidBytes), let sourceRevision else { throw Fallback() }
        let type = try types.value(for: typeBytes) { raw in
            guard let string = ProtoReader.validString(raw) else { throw Fallback() }
            return string
        }
        let start = date(microseconds: startUs)
        let end = date(microseconds: endUs)
        var metadata: Metadata = [:]
        for (key, value) in entries {
            guard let value, metadata.updateValue(value, forKey: key) == nil else { throw Fallback() }
        }
        switch body {
        case .quantity(let quantity)?:
            guard let (value, unitBytes) = quantity else { throw Fallback() }
            let quantityType = try self.quantityType.flatMap { $0.identifier == type ? $0 : nil } ?? QuantityType(type)
            self.quantityType = quantityType
            let unit = try units.value(for: unitBytes) { raw in
                guard let string = ProtoReader.validString(raw) else { throw Fallback() }
                return try HealthUnit(string)
            }
            return .quantitySample(QuantitySample(
                type: quantityType, quantity: Quantity(value, unit), start: start, end: end,
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision))
        case .category(let raw)?:
            guard let value = Int(exactly: raw) else { throw Fallback() }
            return .categorySample(CategorySample(
                type: try CategoryType(type), value: value, start: start, end: end,
                device: device, metadata: metadata, uuid: uuid, sourceRevision: sourceRevision))
        case nil:
            throw Fallback()
        }
    }

    private static func string(_ reader: inout ProtoReader) throws -> String {
        guard let string = try reader.validString() else { throw Fallback() }
        return string
    }

    private static func decodeSourceRevision(_ bytes: UnsafeRawBufferPointer) throws -> SourceRevision {
        var reader = ProtoReader(bytes)
        var source: Source?
        var revision = SourceRevision(source: Source(bundleIdentifier: "", name: ""))
        while let (field, wireType) = try reader.next() {
            guard field > 4 || wireType == .lengthDelimited else { throw Fallback() }
            switch field {
            case 1:
                guard source == nil else { throw Fallback() }
                var inner = ProtoReader(try reader.bytes())
                var decoded = Source(bundleIdentifier: "", name: "")
                while let (innerField, innerWire) = try inner.next() {
                    guard innerField > 2 || innerWire == .lengthDelimited else { throw Fallback() }
                    switch innerField {
                    case 1: decoded.bundleIdentifier = try string(&inner)
                    case 2: decoded.name = try string(&inner)
                    default: try inner.skip(innerWire)
                    }
                }
                source = decoded
            case 2: revision.version = try string(&reader)
            case 3: revision.productType = try string(&reader)
            case 4: revision.operatingSystemVersion = try string(&reader)
            default: try reader.skip(wireType)
            }
        }
        revision.source = source ?? Source(bundleIdentifier: "", name: "")
        return revision
    }

    private static func decodeDevice(_ bytes: UnsafeRawBufferPointer) throws -> Device {
        var reader = ProtoReader(bytes)
        var device = Device()
        while let (field, wireType) = try reader.next() {
            guard field > 8 || wireType == .lengthDelimited else { throw Fallback() }
            switch field {
            case 1: device.name = try string(&reader)
            case 2: device.manufacturer = try string(&reader)
            case 3: device.model = try string(&reader)
            case 4: device.hardwareVersion = try string(&reader)
            case 5: device.firmwareVersion = try string(&reader)
            case 6: device.softwareVersion = try string(&reader)
            case 7: device.localIdentifier = try string(&reader)
            case 8: device.udiDeviceIdentifier = try string(&reader)
            default: try reader.skip(wireType)
            }
        }
        return device
    }

    /// A `Quantity` message: its value and unit string.
    private static func decodeQuantity(_ bytes: UnsafeRawBufferPointer) throws -> (Double, String) {
        let (value, unit) = try decodeRawQuantity(bytes)
        guard let string = ProtoReader.validString(unit) else { throw Fallback() }
        return (value, string)
    }

    /// A `Quantity` message: its value and its unit's bytes.
    private static func decodeRawQuantity(_ bytes: UnsafeRawBufferPointer) throws -> (Double, UnsafeRawBufferPointer) {
        var reader = ProtoReader(bytes)
        var value = 0.0
        var unit = UnsafeRawBufferPointer(start: nil, count: 0)
        while let (field, wireType) = try reader.next() {
            switch (field, wireType) {
            case (1, .fixed64): value = try reader.double()
            case (2, .lengthDelimited): unit = try reader.bytes()
            case (1, _), (2, _): throw Fallback()
            default: try reader.skip(wireType)
            }
        }
        return (value, unit)
    }

    private static func decodeQuantityBody(_ bytes: UnsafeRawBufferPointer) throws -> (Double, UnsafeRawBufferPointer)? {
        var reader = ProtoReader(bytes)
        var quantity: (Double, UnsafeRawBufferPointer)?
        while let (field, wireType) = try reader.next() {
            if field == 1 {
                guard wireType == .lengthDelimited, quantity == nil else { throw Fallback() }
                quantity = try decodeRawQuantity(try reader.bytes())
            } else {
                try reader.skip(wireType)
            }
        }
        return quantity
    }

    private static func decodeMetadataEntry(_ bytes: UnsafeRawBufferPointer) throws -> (String, MetadataValue?) {
        var reader = ProtoReader(bytes)
        var key = ""
        var value: MetadataValue?
        while let (field, wireType) = try reader.next() {
            switch (field, wireType) {
            case (1, .lengthDelimited): key = try string(&reader)
            case (2, .lengthDelimited): value = .string(try string(&reader))
            case (3, .fixed64): value = .number(try reader.double())
            case (4, .varint): value = .date(date(microseconds: try reader.signed()))
            case (5, .lengthDelimited):
                guard case nil = value else { throw Fallback() }
                let (amount, unit) = try decodeQuantity(try reader.bytes())
                value = .quantity(Quantity(amount, try HealthUnit(unit)))
            case (1...5, _): throw Fallback()
            default: try reader.skip(wireType)
            }
        }
        return (key, value)
    }
}
