import Foundation
import HealthModel
import SwiftProtobuf

extension HealthObject {
    /// The serialized `healthledger.v1.HealthObject`, written directly from the model.
    ///
    /// Byte-identical to `Healthledger_V1_HealthObject(object).serializedBytes()` (tests
    /// hold the two together), without building the intermediate message.
    public func encodedBytes() -> [UInt8] {
        var writer = ProtoWriter(capacity: 320)
        encode(into: &writer)
        return writer.buffer
    }

    /// A message whose field 1 is `repeated HealthObject` (a `SaveRequest`) holding
    /// `objects`, each written in place: ``HealthObjectDecoder/message(of:)`` over their
    /// ``encodedBytes()``, without a buffer per object.
    public static func encodedMessage(of objects: [HealthObject]) -> [UInt8] {
        var writer = ProtoWriter(capacity: objects.count * 320)
        for object in objects { writer.message(field: 1) { object.encode(into: &$0) } }
        return writer.buffer
    }

    /// Appends ``encodedBytes()`` to `writer`.
    public func encode(into writer: inout ProtoWriter) {
        switch self {
        case .quantitySample(let sample):
            Self.writeCommon(sample, into: &writer)
            writer.message(field: 10) { body in
                body.message(field: 1) { Self.write(sample.quantity, into: &$0) }
            }
        case .categorySample(let sample):
            Self.writeCommon(sample, into: &writer)
            writer.message(field: 11) { $0.signed(field: 1, Int64(sample.value)) }
        case .visionPrescription(let prescription):
            Self.writeCommon(prescription, into: &writer)
            writer.message(field: 12) { body in
                body.varint(field: 1, UInt64(prescription.prescriptionType.rawValue))
                body.string(field: 2, prescription.description)
                if let lens = prescription.rightEye { body.message(field: 3, Self.encoded(lens)) }
                if let lens = prescription.leftEye { body.message(field: 4, Self.encoded(lens)) }
            }
        case .workout, .workoutRoute, .correlation:
            // Rare and small next to samples: SwiftProtobuf writes them. A proto3 message
            // without `Any` fields cannot fail to serialize.
            let bytes: [UInt8] = try! Healthledger_V1_HealthObject(self).serializedBytes()
            writer.append(bytes)
        }
    }

    private static func writeCommon(_ sample: some HealthSample, into writer: inout ProtoWriter) {
        withUnsafeBytes(of: sample.uuid.uuid) { uuid in writer.bytes(field: 1, uuid) }
        writer.string(field: 2, sample.objectType.identifier)
        let revision = sample.sourceRevision
        writer.message(field: 3) { message in
            message.message(field: 1) { source in
                source.string(field: 1, revision.source.bundleIdentifier)
                source.string(field: 2, revision.source.name)
            }
            if let value = revision.version { message.presentString(field: 2, value) }
            if let value = revision.productType { message.presentString(field: 3, value) }
            if let value = revision.operatingSystemVersion { message.presentString(field: 4, value) }
        }
        if let device = sample.device {
            writer.message(field: 4) { message in
                device.forEachField { number, _, value in
                    if let value { message.presentString(field: number, value) }
                }
            }
        }
        for (key, value) in sample.metadata.sorted(by: { $0.key < $1.key }) {
            writer.message(field: 5) { entry in
                entry.string(field: 1, key)
                switch value {
                case .string(let value): entry.presentString(field: 2, value)
                case .number(let value): entry.double(field: 3, value, present: true)
                case .date(let value): entry.presentSigned(field: 4, microseconds(value))
                case .quantity(let value): entry.message(field: 5) { write(value, into: &$0) }
                }
            }
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
