import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf
import TestSupport
import Testing

@testable import Ledger

@Suite("Object encoding")
struct ObjectEncodingTests {
    static func randomObject(_ rng: inout SplitMix) throws -> HealthObject {
        func maybe(_ text: String) -> String? {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: nil
            case 1: ""
            default: text
            }
        }
        let start = Date(timeIntervalSince1970: Double(Int64.random(in: -2_000_000_000_000...4_000_000_000_000, using: &rng)) / 1000)
        let end = start.addingTimeInterval(Double(Int.random(in: 0...100_000, using: &rng)) / 7)
        let revision = SourceRevision(
            source: Source(bundleIdentifier: "com.example.\(Int.random(in: 0...9, using: &rng))", name: maybe("Äpp ✓") ?? ""),
            version: maybe("1.2"), productType: maybe("Watch6,1"), operatingSystemVersion: maybe("10.1"))
        let device: Device? = Bool.random(using: &rng)
            ? Device(name: Bool.random(using: &rng) ? maybe("Watch") : String(repeating: "w", count: 130), manufacturer: maybe("Apple"), model: maybe("W"), hardwareVersion: maybe("1"),
                     firmwareVersion: maybe("2"), softwareVersion: maybe("3"), localIdentifier: maybe("x"), udiDeviceIdentifier: maybe("u"))
            : nil
        var metadata: Metadata = [:]
        for index in 0..<Int.random(in: 0...6, using: &rng) {
            let key = ["zeta", "Alpha", "ключ", "HKMetadataKeyTimeZone", "émoji😀", "a\(index)"][Int.random(in: 0..<6, using: &rng)]
            switch Int.random(in: 0..<5, using: &rng) {
            // Strings of every length class: empty, short, and past the 127 and 16,383 bytes
            // at which a nested message's length takes a second and a third byte.
            case 0: metadata[key] = .string(["", "value \(index)", String(repeating: "é", count: Int.random(in: 60...9000, using: &rng))][Int.random(in: 0..<3, using: &rng)])
            case 1: metadata[key] = .number([0, -0.5, 1e300, 42, -7][Int.random(in: 0..<5, using: &rng)])
            case 2: metadata[key] = .date(Date(timeIntervalSince1970: Double(Int.random(in: -1_000_000...1_000_000, using: &rng))))
            case 3: metadata[key] = .quantity(try Quantity([0, 1.5, -3][Int.random(in: 0..<3, using: &rng)], ["kg", "mmol<180.15588000005408>/L", "count/min"][Int.random(in: 0..<3, using: &rng)]))
            default: metadata[key] = .number(0)
            }
        }
        if Int.random(in: 0..<3, using: &rng) == 0 {
            metadata[MetadataKey.syncIdentifier] = .string("sync-\(Int.random(in: 0...99, using: &rng))")
            metadata[MetadataKey.syncVersion] = .number(Double(Int.random(in: -5...1_000_000, using: &rng)))
        }
        if Int.random(in: 0..<4, using: &rng) == 0 {
            return .visionPrescription(VisionPrescription(
                type: Bool.random(using: &rng) ? .glasses : .contacts, dateIssued: start, expirationDate: end,
                description: maybe("Distance ✓") ?? "", rightEye: try randomLens(&rng), leftEye: try randomLens(&rng),
                device: device, metadata: metadata, uuid: .random(), sourceRevision: revision))
        }
        if Bool.random(using: &rng) {
            let units = ["count/min", "count/s", "Hz"]
            // Several types in turn, as an export interleaves them (the decoder keeps a few).
            let types = [
                "HeartRate", "RestingHeartRate", "WalkingHeartRateAverage", "HeartRateRecoveryOneMinute", "RespiratoryRate", "CyclingCadence",
            ]
            return .quantitySample(QuantitySample(
                type: try QuantityType("HKQuantityTypeIdentifier" + types[Int.random(in: 0..<types.count, using: &rng)]), quantity: try Quantity([0, -0.0, 72.5, 1e-9, 180][Int.random(in: 0..<5, using: &rng)], units[Int.random(in: 0..<3, using: &rng)]),
                start: start, end: end, device: device, metadata: metadata, uuid: .random(), sourceRevision: revision))
        }
        return .categorySample(CategorySample(
            type: Fixtures.sleep, value: Int.random(in: 0...5, using: &rng), start: start, end: end, device: device,
            metadata: metadata, uuid: .random(), sourceRevision: revision))
    }

    /// A lens with each field present or not (glasses and contacts fields mixed, as the
    /// encoding does not validate), or nil.
    static func randomLens(_ rng: inout SplitMix) throws -> LensSpecification? {
        guard Int.random(in: 0..<4, using: &rng) != 0 else { return nil }
        func quantity(_ units: [String]) throws -> Quantity? {
            guard Bool.random(using: &rng) else { return nil }
            return try Quantity([0, -0.0, -2.25, 1e-9, 14.2, 180][Int.random(in: 0..<6, using: &rng)], units[Int.random(in: 0..<units.count, using: &rng)])
        }
        let power = ["D"], angle = ["deg", "rad"], length = ["mm", "cm", "m"]
        let prism: Prism? = Bool.random(using: &rng)
            ? Prism(
                amount: try quantity(["pD"]) ?? Quantity(0, try HealthUnit("pD")), angle: try quantity(angle) ?? Quantity(0, try HealthUnit("deg")),
                base: PrismBase.allCases.randomElement(using: &rng)!, eye: VisionEye.allCases.randomElement(using: &rng)!)
            : nil
        return LensSpecification(
            sphere: try quantity(power) ?? Quantity(0, try HealthUnit("D")), cylinder: try quantity(power), axis: try quantity(angle),
            addPower: try quantity(power), vertexDistance: try quantity(length), prism: prism,
            farPupillaryDistance: try quantity(length), nearPupillaryDistance: try quantity(length),
            baseCurve: try quantity(length), diameter: try quantity(length))
    }

    @Test("property: reading an object in place gives SwiftProtobuf's object, or its error, also for mutated bytes, alone or after others through one decoder")
    func inPlaceDecoding() throws {
        var rng = SplitMix(state: 77)
        enum Outcome: Equatable {
            case object(HealthObject)
            case failure
        }
        func slow(_ bytes: [UInt8]) -> Outcome {
            (try? Healthledger_V1_HealthObject(serializedBytes: bytes).model()).map(Outcome.object) ?? .failure
        }
        func fast(_ bytes: [UInt8]) -> Outcome {
            (try? bytes.withUnsafeBytes { try HealthObject(serialized: $0) }).map(Outcome.object) ?? .failure
        }
        // One decoder for every object: it reuses what it read of the same bytes before.
        var decoder = HealthObjectDecoder()
        func shared(_ bytes: [UInt8]) -> Outcome {
            (try? bytes.withUnsafeBytes { try decoder.decode($0) }).map(Outcome.object) ?? .failure
        }
        var mutatedOK = 0
        for round in 0..<3000 {
            let object = try Self.randomObject(&rng)
            var bytes: [UInt8] = try Healthledger_V1_HealthObject(object).serializedBytes()
            // (Compared with SwiftProtobuf's answer: dates come back at microsecond precision.)
            let original = slow(bytes)
            #expect(original != .failure)
            #expect(fast(bytes) == original)
            #expect(shared(bytes) == original)
            // The same object again: now from what the decoder kept.
            #expect(shared(bytes) == original)
            if round % 2 == 0 {
                // A few bytes changed, dropped or appended.
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: for _ in 0..<Int.random(in: 1...3, using: &rng) { bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
                case 1: bytes.removeLast(Int.random(in: 1...min(8, bytes.count), using: &rng))
                default: bytes += (0..<Int.random(in: 1...6, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                }
                let expected = slow(bytes)
                #expect(fast(bytes) == expected)
                #expect(shared(bytes) == expected)
                if expected != .failure { mutatedOK += 1 }
            }
        }
        #expect(mutatedOK > 0, "some mutations still decode")
    }

    /// The top-level fields of a serialized message, each as its tag and value bytes.
    static func fields(of bytes: [UInt8]) -> [[UInt8]] {
        var fields: [[UInt8]] = []
        var offset = 0
        func varint() -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = bytes[offset]
                offset += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }
        while offset < bytes.count {
            let start = offset
            switch varint() & 7 {
            case 0: _ = varint()
            case 1: offset += 8
            case 2: offset += Int(varint())
            default: offset += 4
            }
            fields.append(Array(bytes[start..<offset]))
        }
        return fields
    }

    @Test("property: received bytes are kept exactly when they are the object's encoding; reordered, padded or extended bytes are encoded again")
    func receivedBytes() throws {
        var rng = SplitMix(state: 4242)
        func received(_ bytes: [UInt8]) throws -> ReceivedObject {
            var decoder = HealthObjectDecoder()
            return try bytes.withUnsafeBytes { try decoder.received($0) }
        }
        var samples = 0, kept = 0, recoded = 0
        for round in 0..<3000 {
            let object = try Self.randomObject(&rng)
            let canonical = object.encodedBytes()
            let exact = try received(canonical)
            #expect(exact.object == (try Healthledger_V1_HealthObject(serializedBytes: canonical).model()))
            if let bytes = exact.canonicalBytes { #expect(bytes == canonical) }
            switch object {
            case .quantitySample, .categorySample:
                samples += 1
                if exact.canonicalBytes != nil { kept += 1 }
            default:
                #expect(exact.canonicalBytes == nil, "only samples take the in-place path")
            }
            // The same object in bytes no encoder writes: still decoded, never kept.
            var fields = Self.fields(of: canonical)
            switch round % 3 {
            case 0:
                // Two neighbouring fields swapped (two metadata entries: then out of key order).
                let index = Int.random(in: 0..<(fields.count - 1), using: &rng)
                guard fields[index] != fields[index + 1] else { continue }
                fields.swapAt(index, index + 1)
            case 1:
                // An unknown field (30, varint 1) at the end.
                fields.append([0xF0, 0x01, 0x01])
            default:
                // A tag written in two bytes where one does.
                let index = Int.random(in: 0..<fields.count, using: &rng)
                fields[index] = [fields[index][0] | 0x80, 0x00] + fields[index].dropFirst()
            }
            let altered = try received(fields.flatMap { $0 })
            #expect(altered.object == exact.object)
            #expect(altered.canonicalBytes == nil)
            recoded += 1
            // Random damage: whatever still decodes is kept only as its exact encoding.
            var damaged = canonical
            for _ in 0..<Int.random(in: 1...3, using: &rng) { damaged[Int.random(in: 0..<damaged.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            if let decoded = try? received(damaged), let bytes = decoded.canonicalBytes {
                #expect(bytes == decoded.object.encodedBytes())
            }
        }
        #expect(kept > samples * 95 / 100, "\(kept) of \(samples) samples kept")
        #expect(recoded > 2000)

        // A unit in another spelling than its canonical one, and a zero written explicitly.
        let vo2 = try QuantityType("HKQuantityTypeIdentifierVO2Max")
        let sample = HealthObject.quantitySample(QuantitySample(
            type: vo2, quantity: try Quantity(41.5, "ml/(kg*min)"), start: Date(timeIntervalSince1970: 1_700_000_000),
            end: Date(timeIntervalSince1970: 1_700_000_060), uuid: .random(), sourceRevision: SourceRevision(source: Source(bundleIdentifier: "com.example", name: "Example"))))
        var message = Healthledger_V1_HealthObject(sample)
        #expect(try received(try message.serializedBytes()).canonicalBytes != nil)
        message.quantity.quantity.unit = "ml/(kg*min)"
        let respelled = try received(try message.serializedBytes())
        #expect(respelled.canonicalBytes == nil)
        #expect(respelled.object == sample)
        let category = HealthObject.categorySample(CategorySample(
            type: Fixtures.sleep, value: 0, start: Date(timeIntervalSince1970: 1_700_000_000), end: Date(timeIntervalSince1970: 1_700_000_060),
            uuid: .random(), sourceRevision: SourceRevision(source: Source(bundleIdentifier: "com.example", name: "Example"))))
        let zeroWritten = Self.fields(of: category.encodedBytes()).dropLast() + [[0x5A, 0x02, 0x08, 0x00]]
        let explicitZero = try received(zeroWritten.flatMap { $0 })
        #expect(explicitZero.object == category)
        #expect(explicitZero.canonicalBytes == nil)
    }

    @Test("property: the direct encoding equals SwiftProtobuf's, and both summaries agree")
    func matchesSwiftProtobuf() throws {
        var rng = SplitMix(state: 2024)
        for _ in 0..<2000 {
            let object = try Self.randomObject(&rng)
            let direct = object.encodedBytes()
            let message = Healthledger_V1_HealthObject(object)
            #expect(direct == (try message.serializedBytes() as [UInt8]))
            let decoded = try Healthledger_V1_HealthObject(serializedBytes: direct)
            #expect(decoded == message)
            let live = try ObjectSummary(object, units: SummaryCache())
            let replayed = try ObjectSummary(decoded, units: SummaryCache())
            #expect(live.uuid == replayed.uuid && live.typeCode == replayed.typeCode && live.type == replayed.type)
            #expect(live.startUs == replayed.startUs && live.endUs == replayed.endUs && live.sourceBundle == replayed.sourceBundle)
            #expect(live.syncIdentifier == replayed.syncIdentifier && live.syncVersion == replayed.syncVersion)
            #expect(live.syncIdentifier == object.syncIdentifier && live.syncVersion == object.syncVersion)
            #expect(live.value.bitPattern == replayed.value.bitPattern)
            let parsed = try direct.withUnsafeBytes { try ObjectSummary(encoded: $0, units: SummaryCache()) }
            #expect(parsed.uuid == replayed.uuid && parsed.typeCode == replayed.typeCode && parsed.type == replayed.type)
            #expect(parsed.startUs == replayed.startUs && parsed.endUs == replayed.endUs && parsed.sourceBundle == replayed.sourceBundle)
            #expect(parsed.syncIdentifier == replayed.syncIdentifier && parsed.syncVersion == replayed.syncVersion)
            #expect(parsed.value.bitPattern == replayed.value.bitPattern)
        }
    }

    @Test("property: a SaveRequest written in place equals one assembled from each object's bytes, and SwiftProtobuf reads it")
    func messageInPlace() throws {
        var rng = SplitMix(state: 77)
        for count in [0, 1, 2, 5, 40] {
            let objects = try (0..<count).map { _ in try Self.randomObject(&rng) }
            let inPlace = HealthObject.encodedMessage(of: objects)
            #expect(inPlace == HealthObjectDecoder.message(of: objects.map { $0.encodedBytes() }))
            let request = try Healthledger_V1_SaveRequest(serializedBytes: inPlace)
            #expect(request.objects == objects.map { Healthledger_V1_HealthObject($0) })
        }
    }

    @Test("a sub-message written in place has the bytes of one written from its own buffer", arguments: [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152])
    func messageInPlaceLength(length: Int) {
        let body = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
        var separate = ProtoWriter(capacity: length + 16)
        separate.varint(field: 1, 5)
        separate.message(field: 2, body)
        separate.varint(field: 3, 9)
        // One byte kept for the length, or two (`long`): either way the body moves to fit it.
        for long in [false, true] {
            var inPlace = ProtoWriter(capacity: 8)
            inPlace.varint(field: 1, 5)
            inPlace.message(field: 2, long: long) { $0.append(body) }
            inPlace.varint(field: 3, 9)
            #expect(inPlace.buffer == separate.buffer, "long: \(long)")
        }
    }

    @Test("the size of a sub-message field is what writing it takes", arguments: [0, 1, 127, 128, 16_383, 16_384, 2_097_152])
    func messageFieldSize(length: Int) {
        for field in [1, 15, 16, 2047] {
            var writer = ProtoWriter(capacity: length + 8)
            writer.message(field: field, [UInt8](repeating: 7, count: length))
            #expect(ProtoWriter.messageSize(field: field, length: length) == writer.buffer.count)
        }
    }
}
