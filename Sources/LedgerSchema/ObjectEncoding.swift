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
        var writer = ProtoWriter(capacity: 512)
        for (index, object) in objects.enumerated() {
            writer.message(field: SaveRequestField.objects, long: true) { object.encode(into: &$0) }
            // Room for the rest at the first object's size and a quarter more: a batch's objects
            // are mostly alike, and a buffer of megabytes copied as it doubles costs more than
            // the encoding.
            if index == 0, objects.count > 1 { writer.reserveCapacity(writer.buffer.count * objects.count * 5 / 4 + 512) }
        }
        return writer.buffer
    }

    /// Appends ``encodedBytes()`` to `writer`.
    public func encode(into writer: inout ProtoWriter) {
        switch self {
        case .quantitySample(let sample) where sample.series.isEmpty:
            Self.writeCommon(sample, into: &writer)
            writer.message(field: HealthObjectField.quantity) { body in
                body.message(field: QuantitySampleBodyField.quantity) { Self.write(sample.quantity, into: &$0) }
            }
        case .categorySample(let sample):
            Self.writeCommon(sample, into: &writer)
            writer.message(field: HealthObjectField.category) { $0.signed(field: CategorySampleBodyField.value, Int64(sample.value)) }
        case .visionPrescription(let prescription):
            Self.writeCommon(prescription, into: &writer)
            writer.message(field: HealthObjectField.visionPrescription) { body in
                body.varint(field: VisionPrescriptionBodyField.prescriptionType, UInt64(prescription.prescriptionType.rawValue))
                body.string(field: VisionPrescriptionBodyField.description, prescription.description)
                if let lens = prescription.rightEye { body.message(field: VisionPrescriptionBodyField.rightEye, Self.encoded(lens)) }
                if let lens = prescription.leftEye { body.message(field: VisionPrescriptionBodyField.leftEye, Self.encoded(lens)) }
            }
        case .quantitySample, .workout, .workoutRoute, .correlation, .activitySummary, .audiogram, .clinicalRecord, .electrocardiogram, .heartbeatSeries, .stateOfMind,
            .userAnnotatedMedication, .medicationDoseEvent:
            // Rare and small next to samples (and series samples next to samples of one
            // value): SwiftProtobuf writes them. A proto3 message
            // without `Any` fields cannot fail to serialize.
            let bytes: [UInt8] = try! Healthledger_V1_HealthObject(self).serializedBytes()
            writer.append(bytes)
        }
    }

    private static func writeCommon(_ sample: some HealthSample, into writer: inout ProtoWriter) {
        withUnsafeBytes(of: sample.uuid.uuid) { uuid in writer.bytes(field: HealthObjectField.uuid, uuid) }
        writer.string(field: HealthObjectField.type, sample.objectType.identifier)
        let revision = sample.sourceRevision
        writer.message(field: HealthObjectField.sourceRevision) { message in
            message.message(field: SourceRevisionField.source) { source in
                source.string(field: SourceField.bundleIdentifier, revision.source.bundleIdentifier)
                source.string(field: SourceField.name, revision.source.name)
            }
            if let value = revision.version { message.presentString(field: SourceRevisionField.version, value) }
            if let value = revision.productType { message.presentString(field: SourceRevisionField.productType, value) }
            if let value = revision.operatingSystemVersion { message.presentString(field: SourceRevisionField.operatingSystemVersion, value) }
        }
        if let device = sample.device {
            writer.message(field: HealthObjectField.device) { write(device, into: &$0) }
        }
        // In key order, through the dictionary's positions (sorting its pairs would copy each).
        let metadata = sample.metadata
        for index in metadata.indices.sorted(by: { metadata[$0].key < metadata[$1].key }) {
            let (key, value) = metadata[index]
            writer.message(field: HealthObjectField.metadata) { entry in
                entry.string(field: MetadataEntryField.key, key)
                switch value {
                case .string(let value): entry.presentString(field: MetadataEntryField.stringValue, value)
                case .number(let value): entry.double(field: MetadataEntryField.numberValue, value, present: true)
                case .date(let value): entry.presentSigned(field: MetadataEntryField.dateUs, microseconds(value))
                case .quantity(let value): entry.message(field: MetadataEntryField.quantityValue) { write(value, into: &$0) }
                }
            }
        }
        writer.signed(field: HealthObjectField.startUs, microseconds(sample.startDate))
        writer.signed(field: HealthObjectField.endUs, microseconds(sample.endDate))
    }

    /// A `healthledger.v1.Device`: the fields present, in number order.
    private static func write(_ device: Device, into writer: inout ProtoWriter) {
        if let value = device.name { writer.presentString(field: DeviceField.name, value) }
        if let value = device.manufacturer { writer.presentString(field: DeviceField.manufacturer, value) }
        if let value = device.model { writer.presentString(field: DeviceField.model, value) }
        if let value = device.hardwareVersion { writer.presentString(field: DeviceField.hardwareVersion, value) }
        if let value = device.firmwareVersion { writer.presentString(field: DeviceField.firmwareVersion, value) }
        if let value = device.softwareVersion { writer.presentString(field: DeviceField.softwareVersion, value) }
        if let value = device.localIdentifier { writer.presentString(field: DeviceField.localIdentifier, value) }
        if let value = device.udiDeviceIdentifier { writer.presentString(field: DeviceField.udiDeviceIdentifier, value) }
    }

    /// A `healthledger.v1.LensSpecification`: fields in number order, absent ones omitted.
    private static func encoded(_ lens: LensSpecification) -> [UInt8] {
        var writer = ProtoWriter(capacity: 128)
        let before: [(LensSpecificationField, Quantity?)] = [
            (.sphere, lens.sphere), (.cylinder, lens.cylinder), (.axis, lens.axis), (.addPower, lens.addPower), (.vertexDistance, lens.vertexDistance),
        ]
        for case (let field, let quantity?) in before { writer.message(field: field, encoded(quantity)) }
        if let prism = lens.prism {
            var message = ProtoWriter(capacity: 64)
            message.message(field: PrismField.amount, encoded(prism.amount))
            message.message(field: PrismField.angle, encoded(prism.angle))
            message.varint(field: PrismField.baseDirection, UInt64(prism.base.rawValue))
            message.varint(field: PrismField.eye, UInt64(prism.eye.rawValue))
            writer.message(field: LensSpecificationField.prism, message.buffer)
        }
        let after: [(LensSpecificationField, Quantity?)] = [
            (.farPupillaryDistance, lens.farPupillaryDistance), (.nearPupillaryDistance, lens.nearPupillaryDistance),
            (.baseCurve, lens.baseCurve), (.diameter, lens.diameter),
        ]
        for case (let field, let quantity?) in after { writer.message(field: field, encoded(quantity)) }
        return writer.buffer
    }

    private static func encoded(_ quantity: Quantity) -> [UInt8] {
        var writer = ProtoWriter(capacity: 32)
        write(quantity, into: &writer)
        return writer.buffer
    }

    private static func write(_ quantity: Quantity, into writer: inout ProtoWriter) {
        writer.double(field: QuantityField.value, quantity.value)
        writer.string(field: QuantityField.unit, quantity.unit.description)
    }
}
