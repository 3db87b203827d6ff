import Foundation
import HealthModel
import SwiftProtobuf

extension HealthObject {
    /// The serialized `healthledger.v1.HealthObject`, written directly from the model.
    ///
    /// Byte-identical to `Healthledger_V1_HealthObject(object).serializedBytes()` (tests
    /// hold the two together), without building the intermediate message.
    public func encodedBytes() -> [UInt8] {
        var writer = ProtoWriter(capacity: 256)
        switch self {
        case .quantitySample(let sample):
            Self.writeCommon(sample, into: &writer)
            var quantity = ProtoWriter(capacity: 32)
            Self.write(sample.quantity, into: &quantity)
            var body = ProtoWriter(capacity: 40)
            body.message(field: 1, quantity.buffer)
            writer.message(field: 10, body.buffer)
        case .categorySample(let sample):
            Self.writeCommon(sample, into: &writer)
            var body = ProtoWriter(capacity: 16)
            body.signed(field: 1, Int64(sample.value))
            writer.message(field: 11, body.buffer)
        case .visionPrescription(let prescription):
            Self.writeCommon(prescription, into: &writer)
            var body = ProtoWriter(capacity: 256)
            body.varint(field: 1, UInt64(prescription.prescriptionType.rawValue))
            body.string(field: 2, prescription.description)
            if let lens = prescription.rightEye { body.message(field: 3, Self.encoded(lens)) }
            if let lens = prescription.leftEye { body.message(field: 4, Self.encoded(lens)) }
            writer.message(field: 12, body.buffer)
        case .workout, .workoutRoute, .correlation:
            // Rare and small next to samples: SwiftProtobuf writes them. A proto3 message
            // without `Any` fields cannot fail to serialize.
            return try! Healthledger_V1_HealthObject(self).serializedBytes()
        }
        return writer.buffer
    }

    private static func writeCommon(_ sample: some HealthSample, into writer: inout ProtoWriter) {
        writer.bytes(field: 1, withUnsafeBytes(of: sample.uuid.uuid) { Array($0) })
        writer.string(field: 2, sample.objectType.identifier)
        var revision = ProtoWriter(capacity: 96)
        var source = ProtoWriter(capacity: 64)
        source.string(field: 1, sample.sourceRevision.source.bundleIdentifier)
        source.string(field: 2, sample.sourceRevision.source.name)
        revision.message(field: 1, source.buffer)
        if let value = sample.sourceRevision.version { revision.presentString(field: 2, value) }
        if let value = sample.sourceRevision.productType { revision.presentString(field: 3, value) }
        if let value = sample.sourceRevision.operatingSystemVersion { revision.presentString(field: 4, value) }
        writer.message(field: 3, revision.buffer)
        if let device = sample.device {
            var message = ProtoWriter(capacity: 64)
            for (index, (_, value)) in device.fields.enumerated() {
                if let value { message.presentString(field: index + 1, value) }
            }
            writer.message(field: 4, message.buffer)
        }
        let metadata = sample.metadata
        for key in metadata.keys.sorted() {
            var entry = ProtoWriter(capacity: 64)
            entry.string(field: 1, key)
            switch metadata[key]! {
            case .string(let value): entry.presentString(field: 2, value)
            case .number(let value): entry.double(field: 3, value, present: true)
            case .date(let value): entry.presentSigned(field: 4, microseconds(value))
            case .quantity(let value):
                var quantity = ProtoWriter(capacity: 32)
                write(value, into: &quantity)
                entry.message(field: 5, quantity.buffer)
            }
            writer.message(field: 5, entry.buffer)
        }
        writer.signed(field: 6, microseconds(sample.startDate))
        writer.signed(field: 7, microseconds(sample.endDate))
    }

    /// A `healthledger.v1.LensSpecification`: fields in number order, absent ones omitted.
    private static func encoded(_ lens: LensSpecification) -> [UInt8] {
        var writer = ProtoWriter(capacity: 128)
        let before: [Quantity?] = [lens.sphere, lens.cylinder, lens.axis, lens.addPower, lens.vertexDistance]
        for (index, quantity) in before.enumerated() {
            if let quantity { writer.message(field: index + 1, encoded(quantity)) }
        }
        if let prism = lens.prism {
            var message = ProtoWriter(capacity: 64)
            message.message(field: 1, encoded(prism.amount))
            message.message(field: 2, encoded(prism.angle))
            message.varint(field: 3, UInt64(prism.base.rawValue))
            message.varint(field: 4, UInt64(prism.eye.rawValue))
            writer.message(field: 6, message.buffer)
        }
        let after: [Quantity?] = [lens.farPupillaryDistance, lens.nearPupillaryDistance, lens.baseCurve, lens.diameter]
        for (index, quantity) in after.enumerated() {
            if let quantity { writer.message(field: index + 7, encoded(quantity)) }
        }
        return writer.buffer
    }

    private static func encoded(_ quantity: Quantity) -> [UInt8] {
        var writer = ProtoWriter(capacity: 32)
        write(quantity, into: &writer)
        return writer.buffer
    }

    private static func write(_ quantity: Quantity, into writer: inout ProtoWriter) {
        writer.double(field: 1, quantity.value)
        writer.string(field: 2, quantity.unit.description)
    }
}
