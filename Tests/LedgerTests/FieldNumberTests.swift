import Foundation
import LedgerSchema
import SwiftProtobuf
import Testing

/// The field numbers the hand-written codecs use (`FieldNumbers.swift`) are the schema's: for
/// every case, the generated message's field of that number has the case's name.
@Suite("Field numbers")
struct FieldNumberTests {
    /// The JSON name of field `number` of `Message`, found by decoding bytes that set that
    /// field alone (each wire type in turn, with a value that is not the default) and reading
    /// which field the generated type filled. Nil when no such field exists.
    static func jsonName<Message: SwiftProtobuf.Message>(of number: Int, in _: Message.Type) throws -> String? {
        var attempts: [[UInt8]] = []
        var writer = ProtoWriter(capacity: 16)
        writer.varint(field: number, 1)
        attempts.append(writer.buffer)
        writer = ProtoWriter(capacity: 16)
        writer.double(field: number, 1)
        attempts.append(writer.buffer)
        // A fixed32 (a float): no writer of ours makes one.
        attempts.append(varint(number << 3 | 5) + [0, 0, 0x80, 0x3F])
        // An empty message, then a one-byte string or bytes (an empty one is the default).
        writer = ProtoWriter(capacity: 16)
        writer.message(field: number, [])
        attempts.append(writer.buffer)
        writer = ProtoWriter(capacity: 16)
        writer.string(field: number, "x")
        attempts.append(writer.buffer)
        for bytes in attempts {
            guard let message = try? Message(serializedBytes: bytes) else { continue }
            let json = try message.jsonUTF8Data()
            if let object = try JSONSerialization.jsonObject(with: json) as? [String: Any], let name = object.keys.first {
                return name
            }
        }
        return nil
    }

    private static func varint(_ value: Int) -> [UInt8] {
        var value = UInt64(value)
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    /// Each case of `Fields` names the field of its number in `Fields.Message`.
    static func check<Fields: ProtoFields>(_: Fields.Type, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for field in Fields.allCases {
            let name = try jsonName(of: field.rawValue, in: Fields.Message.self)
            #expect(name == "\(field)", "\(Fields.Message.protoMessageName) field \(field.rawValue)", sourceLocation: sourceLocation)
        }
    }

    @Test("objects.proto: every named field is the schema's field of that number")
    func objects() throws {
        try Self.check(HealthObjectField.self)
        try Self.check(SourceRevisionField.self)
        try Self.check(SourceField.self)
        try Self.check(DeviceField.self)
        try Self.check(QuantityField.self)
        try Self.check(MetadataEntryField.self)
        try Self.check(QuantitySampleBodyField.self)
        try Self.check(QuantitySeriesEntryField.self)
        try Self.check(CategorySampleBodyField.self)
        try Self.check(VisionPrescriptionBodyField.self)
        try Self.check(LensSpecificationField.self)
        try Self.check(PrismField.self)
        try Self.check(WorkoutRouteBodyField.self)
        try Self.check(CorrelationBodyField.self)
        try Self.check(AttachmentField.self)
    }

    @Test("ledger.proto: every named field is the schema's field of that number")
    func ledger() throws {
        try Self.check(LedgerEventField.self)
        try Self.check(ActorField.self)
        try Self.check(AttachmentAddedField.self)
        try Self.check(RouteLocationsAddedField.self)
    }

    @Test("rpc.proto: every named field is the schema's field of that number")
    func rpc() throws {
        try Self.check(FrameField.self)
        try Self.check(CallRequestField.self)
        try Self.check(SaveRequestField.self)
        try Self.check(SaveResponseField.self)
        try Self.check(SaveOutcomeField.self)
        try Self.check(ChangeBatchField.self)
        try Self.check(RouteBatchField.self)
        try Self.check(StatisticsBatchField.self)
        try Self.check(StatisticsResultField.self)
        try Self.check(SourceStatisticsField.self)
        try Self.check(StatisticsValuesField.self)
        // A SampleBatch's objects are read and written as a SaveRequest's.
        #expect(try Self.jsonName(of: SaveRequestField.objects.rawValue, in: Healthledger_V1_SampleBatch.self) == "objects")
    }

    @Test("the probe finds each kind of field, and no field where the schema has none")
    func probe() throws {
        // varint, double, string, message, oneof member, repeated, optional: one of each.
        #expect(try Self.jsonName(of: 2, in: Healthledger_V1_LedgerEvent.self) == "sequence")
        #expect(try Self.jsonName(of: 1, in: Healthledger_V1_Quantity.self) == "value")
        #expect(try Self.jsonName(of: 2, in: Healthledger_V1_Quantity.self) == "unit")
        #expect(try Self.jsonName(of: 3, in: Healthledger_V1_HealthObject.self) == "sourceRevision")
        #expect(try Self.jsonName(of: 11, in: Healthledger_V1_HealthObject.self) == "category")
        #expect(try Self.jsonName(of: 2, in: Healthledger_V1_CorrelationBody.self) == "memberUuids")
        #expect(try Self.jsonName(of: 1, in: Healthledger_V1_Device.self) == "name")
        #expect(try Self.jsonName(of: 9, in: Healthledger_V1_HealthObject.self) == nil)
        #expect(try Self.jsonName(of: 3, in: Healthledger_V1_StatisticsBatch.self) == nil)
    }
}
