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

    /// Decodes `bytes`, keeping them when they are exactly what ``HealthObject/encodedBytes()``
    /// writes for the object decoded (``ReceivedObject/canonicalBytes``).
    public mutating func received(_ bytes: UnsafeRawBufferPointer) throws -> ReceivedObject {
        do {
            let object = try fast.decode(bytes)
            return ReceivedObject(object: object, canonicalBytes: fast.canonical ? Array(bytes) : nil)
        } catch {
            return ReceivedObject(object: try Healthledger_V1_HealthObject(serializedBytes: Array(bytes)).model(), canonicalBytes: nil)
        }
    }

    /// A message whose field 1 is `repeated HealthObject` (a `SaveRequest`, a `SampleBatch`)
    /// holding `objects`, each already serialized: what ``objects(in:)`` reads back.
    public static func message(of objects: [[UInt8]]) -> [UInt8] {
        var writer = ProtoWriter(capacity: objects.reduce(0) { $0 + ProtoWriter.messageSize(field: SaveRequestField.objects, length: $1.count) })
        for object in objects { writer.message(field: SaveRequestField.objects, object) }
        return writer.buffer
    }

    /// The objects of a message whose field 1 is `repeated HealthObject` and whose other
    /// fields it skips: a `SaveRequest`, a `SampleBatch`.
    ///
    /// - Throws: ``HealthError`` for an object the model refuses, its message prefixed with
    ///   "object N: " (N its index); another error for bytes that are not such a message.
    public static func objects(in message: [UInt8]) throws -> [HealthObject] {
        try each(in: message) { decoder, bytes in try decoder.decode(bytes) }
    }

    /// ``objects(in:)``, each with its bytes when they are canonical (``received(_:)``).
    public static func receivedObjects(in message: [UInt8]) throws -> [ReceivedObject] {
        try each(in: message) { decoder, bytes in try decoder.received(bytes) }
    }

    private static func each<Object>(
        in message: [UInt8], _ decode: (inout HealthObjectDecoder, UnsafeRawBufferPointer) throws -> Object
    ) throws -> [Object] {
        var decoder = HealthObjectDecoder()
        var objects: [Object] = []
        try message.withUnsafeBytes { raw in
            var reader = ProtoReader(raw)
            while let (field, wireType) = try reader.next() {
                guard field == SaveRequestField.objects.rawValue else {
                    try reader.skip(wireType)
                    continue
                }
                guard wireType == .lengthDelimited else { throw ProtoReader.Malformed() }
                let bytes = try reader.bytes()
                do {
                    objects.append(try decode(&decoder, bytes))
                } catch var error as HealthError {
                    error.message = "object \(objects.count): \(error.message)"
                    throw error
                }
            }
        }
        return objects
    }
}

/// An object as it was received: the model, and its serialized bytes when they are exactly
/// the bytes ``HealthObject/encodedBytes()`` writes for it, so that a store can keep them
/// instead of encoding the object again.
public struct ReceivedObject: Sendable {
    public var object: HealthObject
    /// The received bytes when canonical: every field in the encoder's order, each present
    /// exactly when the encoder writes it, varints in their fewest bytes, units in their
    /// canonical spelling, metadata sorted by key. Nil otherwise (the object is encoded again).
    public var canonicalBytes: [UInt8]?

    public init(object: HealthObject, canonicalBytes: [UInt8]? = nil) {
        self.object = object
        self.canonicalBytes = canonicalBytes
    }
}

/// The values last made from some bytes, given again while the same bytes come back: objects
/// read in a row mostly share their type, unit, source and device, and an export interleaves
/// a few of each (a watch's and a phone's records, heart rate between steps), so a handful
/// of the latest are kept, not only the last.
///
/// Public although only our modules use it: it is inlinable so as to be specialised where it
/// is used (the hot loops of decoding, replay and the export reader), and Swift 6.1 does not
/// specialise a `package` type's inlinable generic code in another module; it called the
/// generic version there, looking up tuple metadata on every call.
public struct Reuse<Value> {
    /// The bytes of at most ``capacity`` entries, apart from their values so that looking
    /// through them copies no value (a device's copy retains each of its strings); the one to
    /// be replaced next is at `next`.
    @usableFromInline var keys: [[UInt8]] = []
    @usableFromInline var values: [Value] = []
    /// A flag made with each value (``valueAndFlag(for:_:)``), apart from it: an array of
    /// tuples would copy each one out through the tuple's generic value witnesses.
    @usableFromInline var flags: [Bool] = []
    @usableFromInline var next = 0
    /// The entry found or made last, looked at first: a run of objects mostly repeats it.
    @usableFromInline var last = 0

    /// Entries kept: enough for the sources, types and units an export interleaves, few
    /// enough that looking through them costs less than making the value again.
    @usableFromInline static var capacity: Int { 8 }

    /// No value kept yet.
    @inlinable
    public init() {}

    /// The value kept for bytes equal to `raw`, or the one `make` makes from them (kept in
    /// place of the oldest when all slots are taken).
    @inlinable
    public mutating func value(for raw: UnsafeRawBufferPointer, _ make: (UnsafeRawBufferPointer) throws -> Value) rethrows -> Value {
        try values[index(for: raw) { (try make($0), false) }]
    }

    /// ``value(for:_:)`` for values made with a flag (whether their bytes were canonical, say).
    @inlinable
    public mutating func valueAndFlag(
        for raw: UnsafeRawBufferPointer, _ make: (UnsafeRawBufferPointer) throws -> (Value, Bool)
    ) rethrows -> (value: Value, flag: Bool) {
        let index = try index(for: raw, make)
        return (values[index], flags[index])
    }

    /// The index of the entry for `raw`, made when there is none.
    @inlinable
    mutating func index(for raw: UnsafeRawBufferPointer, _ make: (UnsafeRawBufferPointer) throws -> (Value, Bool)) rethrows -> Int {
        if last < keys.count, Self.equal(keys[last], raw) { return last }
        for index in keys.indices where index != last && Self.equal(keys[index], raw) {
            last = index
            return index
        }
        let (value, flag) = try make(raw)
        if keys.count < Self.capacity {
            last = keys.count
            keys.append(Array(raw))
            values.append(value)
            flags.append(flag)
        } else {
            last = next
            keys[next] = Array(raw)
            values[next] = value
            flags[next] = flag
            next = (next + 1) % Self.capacity
        }
        return last
    }

    @inlinable
    static func equal(_ key: [UInt8], _ raw: UnsafeRawBufferPointer) -> Bool {
        key.count == raw.count && (raw.count == 0 || key.withUnsafeBytes { memcmp($0.baseAddress!, raw.baseAddress!, raw.count) == 0 })
    }
}

/// The in-place reader behind ``HealthObjectDecoder``. `decode` throws whenever the slow
/// path must decide, including on every error: the slow path words it. Alongside the
/// object it tells whether the bytes are canonical (``ReceivedObject/canonicalBytes``): the
/// rules below mirror ``HealthObject/encode(into:)`` for quantity and category samples, and
/// a test holds every object found canonical byte-identical to its encoding.
private struct FastObjectDecoder {
    struct Fallback: Error {}

    private var types = Reuse<String>()
    /// Quantity types by their identifier's bytes.
    private var quantityTypes = Reuse<QuantityType>()
    /// Metadata keys by their bytes: the same few keys come in every object.
    private var metadataKeys = Reuse<String>()
    /// Each made value, flagged with whether its bytes were canonical.
    private var units = Reuse<HealthUnit>()
    private var revisions = Reuse<SourceRevision>()
    private var devices = Reuse<Device>()

    /// Whether the bytes `decode` read last were canonical.
    private(set) var canonical = false

    /// The object in `bytes`; ``canonical`` then tells whether they were canonical. (The
    /// object is returned alone: taking it out of a tuple copied it, retaining its parts.)
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
        // Canonical: fields in ascending order (metadata entries, field 5, may repeat), none
        // the encoder leaves out, every nested part canonical too.
        var canonical = true
        var lastField = 0
        while let (field, wireType) = try reader.next() {
            if field < lastField || (field == lastField && field != HealthObjectField.metadata.rawValue) { canonical = false }
            lastField = field
            switch (HealthObjectField(rawValue: field), wireType) {
            case (.uuid, .lengthDelimited): uuidBytes = try reader.bytes()
            case (.type, .lengthDelimited): typeBytes = try reader.bytes()
            case (.sourceRevision, .lengthDelimited):
                guard sourceRevision == nil else { throw Fallback() }
                let (revision, canonicalRevision) = try revisions.valueAndFlag(for: try reader.bytes(), Self.decodeSourceRevision)
                sourceRevision = revision
                canonical = canonical && canonicalRevision
            case (.device, .lengthDelimited):
                guard device == nil else { throw Fallback() }
                let (decoded, canonicalDevice) = try devices.valueAndFlag(for: try reader.bytes(), Self.decodeDevice)
                device = decoded
                canonical = canonical && canonicalDevice
            case (.metadata, .lengthDelimited):
                let (key, value, canonicalEntry) = try Self.decodeMetadataEntry(try reader.bytes(), keys: &metadataKeys)
                // The encoder writes the entries sorted by key.
                if !canonicalEntry || entries.last.map({ !($0.0 < key) }) == true { canonical = false }
                entries.append((key, value))
            case (.startUs, .varint):
                startUs = try reader.signed()
                if startUs == 0 { canonical = false }
            case (.endUs, .varint):
                endUs = try reader.signed()
                if endUs == 0 { canonical = false }
            case (.quantity, .lengthDelimited):
                guard body == nil else { throw Fallback() }
                let (quantity, canonicalBody) = try Self.decodeQuantityBody(try reader.bytes())
                body = .quantity(quantity)
                canonical = canonical && canonicalBody
            case (.category, .lengthDelimited):
                guard body == nil else { throw Fallback() }
                var inner = ProtoReader(try reader.bytes())
                var value: Int64 = 0
                var innerFields = 0
                while let (innerField, innerWire) = try inner.next() {
                    innerFields += 1
                    if innerField == CategorySampleBodyField.value.rawValue {
                        guard innerWire == .varint else { throw Fallback() }
                        value = try inner.signed()
                    } else {
                        try inner.skip(innerWire)
                        canonical = false
                    }
                }
                if innerFields > 1 || (innerFields == 1 && value == 0) || !inner.varintsMinimal { canonical = false }
                body = .category(value)
            // A known field in another wire type, or another body (rare: the slow path reads it).
            case (.some, _): throw Fallback()
            case (nil, _):
                try reader.skip(wireType)
                canonical = false
            }
        }
        // The parts are consumed into the sample, not copied: a copy of a source revision or a
        // device retains each of its strings, and a page decodes a thousand objects.
        guard let uuid = UUID(bytes: uuidBytes), let sourceRevision = consume sourceRevision else { throw Fallback() }
        let type = try types.value(for: typeBytes) { raw in
            guard let string = ProtoReader.validString(raw) else { throw Fallback() }
            return string
        }
        let start = date(microseconds: startUs)
        let end = date(microseconds: endUs)
        // The encoder writes the dates back from `Date`: canonical when they come back the same.
        if !reader.varintsMinimal || microseconds(start) != startUs || microseconds(end) != endUs { canonical = false }
        var metadata = Metadata(minimumCapacity: entries.count)
        for (key, value) in entries {
            guard let value, metadata.updateValue(value, forKey: key) == nil else { throw Fallback() }
        }
        switch body {
        case .quantity(let quantity)?:
            guard let (value, unitBytes) = quantity else { throw Fallback() }
            let quantityType = try quantityTypes.value(for: typeBytes) { _ in try QuantityType(type) }
            let (unit, canonicalUnit) = try units.valueAndFlag(for: unitBytes, Self.unit)
            self.canonical = canonical && canonicalUnit
            return .quantitySample(QuantitySample(
                type: quantityType, quantity: Quantity(value, unit), start: start, end: end,
                device: consume device, metadata: consume metadata, uuid: uuid, sourceRevision: consume sourceRevision))
        case .category(let raw)?:
            guard let value = Int(exactly: raw) else { throw Fallback() }
            self.canonical = canonical
            return .categorySample(CategorySample(
                type: try CategoryType(type), value: value, start: start, end: end,
                device: consume device, metadata: consume metadata, uuid: uuid, sourceRevision: consume sourceRevision))
        case nil:
            throw Fallback()
        }
    }

    /// A unit from its string's bytes, and whether they are its canonical spelling (the one
    /// the encoder writes).
    private static func unit(_ raw: UnsafeRawBufferPointer) throws -> (HealthUnit, Bool) {
        guard let string = ProtoReader.validString(raw) else { throw Fallback() }
        let unit = try HealthUnit(string)
        return (unit, unit.description == string)
    }

    private static func string(_ reader: inout ProtoReader) throws -> String {
        guard let string = try reader.validString() else { throw Fallback() }
        return string
    }

    private static func decodeSourceRevision(_ bytes: UnsafeRawBufferPointer) throws -> (SourceRevision, Bool) {
        var reader = ProtoReader(bytes)
        var source: Source?
        var revision = SourceRevision(source: Source(bundleIdentifier: "", name: ""))
        // The encoder writes the source, then the optional fields present, in order.
        var canonical = true
        var lastField = 0
        while let (field, wireType) = try reader.next() {
            let known = SourceRevisionField(rawValue: field)
            guard known == nil || wireType == .lengthDelimited else { throw Fallback() }
            if field <= lastField { canonical = false }
            lastField = field
            switch known {
            case .source:
                guard source == nil else { throw Fallback() }
                var inner = ProtoReader(try reader.bytes())
                var decoded = Source(bundleIdentifier: "", name: "")
                var lastInner = 0
                while let (innerField, innerWire) = try inner.next() {
                    let knownInner = SourceField(rawValue: innerField)
                    guard knownInner == nil || innerWire == .lengthDelimited else { throw Fallback() }
                    if innerField <= lastInner { canonical = false }
                    lastInner = innerField
                    switch knownInner {
                    case .bundleIdentifier:
                        decoded.bundleIdentifier = try string(&inner)
                        if decoded.bundleIdentifier.isEmpty { canonical = false }
                    case .name:
                        decoded.name = try string(&inner)
                        if decoded.name.isEmpty { canonical = false }
                    case nil:
                        try inner.skip(innerWire)
                        canonical = false
                    }
                }
                if !inner.varintsMinimal { canonical = false }
                source = decoded
            case .version: revision.version = try string(&reader)
            case .productType: revision.productType = try string(&reader)
            case .operatingSystemVersion: revision.operatingSystemVersion = try string(&reader)
            case nil:
                try reader.skip(wireType)
                canonical = false
            }
        }
        if source == nil || !reader.varintsMinimal { canonical = false }
        revision.source = source ?? Source(bundleIdentifier: "", name: "")
        return (revision, canonical)
    }

    private static func decodeDevice(_ bytes: UnsafeRawBufferPointer) throws -> (Device, Bool) {
        var reader = ProtoReader(bytes)
        var device = Device()
        var canonical = true
        var lastField = 0
        while let (field, wireType) = try reader.next() {
            let known = DeviceField(rawValue: field)
            guard known == nil || wireType == .lengthDelimited else { throw Fallback() }
            if field <= lastField { canonical = false }
            lastField = field
            switch known {
            case .name: device.name = try string(&reader)
            case .manufacturer: device.manufacturer = try string(&reader)
            case .model: device.model = try string(&reader)
            case .hardwareVersion: device.hardwareVersion = try string(&reader)
            case .firmwareVersion: device.firmwareVersion = try string(&reader)
            case .softwareVersion: device.softwareVersion = try string(&reader)
            case .localIdentifier: device.localIdentifier = try string(&reader)
            case .udiDeviceIdentifier: device.udiDeviceIdentifier = try string(&reader)
            case nil:
                try reader.skip(wireType)
                canonical = false
            }
        }
        return (device, canonical && reader.varintsMinimal)
    }

    /// A `Quantity` message: its value, its unit's bytes, and whether the message is written
    /// as the encoder writes it (the unit's spelling is the caller's to check).
    private static func decodeRawQuantity(_ bytes: UnsafeRawBufferPointer) throws -> (Double, UnsafeRawBufferPointer, Bool) {
        var reader = ProtoReader(bytes)
        var value = 0.0
        var unit = UnsafeRawBufferPointer(start: nil, count: 0)
        var canonical = true
        var lastField = 0
        while let (field, wireType) = try reader.next() {
            if field <= lastField { canonical = false }
            lastField = field
            switch (QuantityField(rawValue: field), wireType) {
            case (.value, .fixed64):
                value = try reader.double()
                // A +0 value is left out.
                if value.bitPattern == 0 { canonical = false }
            case (.unit, .lengthDelimited):
                unit = try reader.bytes()
                if unit.isEmpty { canonical = false }
            case (.some, _): throw Fallback()
            case (nil, _):
                try reader.skip(wireType)
                canonical = false
            }
        }
        return (value, unit, canonical && reader.varintsMinimal)
    }

    private static func decodeQuantityBody(_ bytes: UnsafeRawBufferPointer) throws -> ((Double, UnsafeRawBufferPointer)?, Bool) {
        var reader = ProtoReader(bytes)
        var quantity: (Double, UnsafeRawBufferPointer)?
        var canonical = true
        while let (field, wireType) = try reader.next() {
            if field == QuantitySampleBodyField.quantity.rawValue {
                guard wireType == .lengthDelimited, quantity == nil else { throw Fallback() }
                let (value, unit, canonicalQuantity) = try decodeRawQuantity(try reader.bytes())
                quantity = (value, unit)
                canonical = canonical && canonicalQuantity
            } else if field == QuantitySampleBodyField.series.rawValue {
                // A series sample: SwiftProtobuf's path reads it.
                throw Fallback()
            } else {
                try reader.skip(wireType)
                canonical = false
            }
        }
        return (quantity, canonical && reader.varintsMinimal)
    }

    private static func decodeMetadataEntry(_ bytes: UnsafeRawBufferPointer, keys: inout Reuse<String>) throws -> (String, MetadataValue?, Bool) {
        var reader = ProtoReader(bytes)
        var key = ""
        var value: MetadataValue?
        // The encoder writes the key (left out when empty), then the one value.
        var canonical = true
        var lastField = 0
        while let (field, wireType) = try reader.next() {
            if field <= lastField || (field > MetadataEntryField.key.rawValue && value != nil) { canonical = false }
            lastField = field
            switch (MetadataEntryField(rawValue: field), wireType) {
            case (.key, .lengthDelimited):
                key = try keys.value(for: try reader.bytes()) { raw in
                    guard let string = ProtoReader.validString(raw) else { throw Fallback() }
                    return string
                }
                if key.isEmpty { canonical = false }
            case (.stringValue, .lengthDelimited): value = .string(try string(&reader))
            case (.numberValue, .fixed64): value = .number(try reader.double())
            case (.dateUs, .varint):
                let microseconds = try reader.signed()
                let date = date(microseconds: microseconds)
                if LedgerSchema.microseconds(date) != microseconds { canonical = false }
                value = .date(date)
            case (.quantityValue, .lengthDelimited):
                guard case nil = value else { throw Fallback() }
                let (amount, unitBytes, canonicalQuantity) = try decodeRawQuantity(try reader.bytes())
                let (unit, canonicalUnit) = try Self.unit(unitBytes)
                if !canonicalQuantity || !canonicalUnit { canonical = false }
                value = .quantity(Quantity(amount, unit))
            case (.some, _): throw Fallback()
            case (nil, _):
                try reader.skip(wireType)
                canonical = false
            }
        }
        return (key, value, canonical && reader.varintsMinimal)
    }
}
