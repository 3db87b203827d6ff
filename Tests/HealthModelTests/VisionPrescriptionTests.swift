import Foundation
import HealthModel
import Testing

@Suite("Vision prescription validation (docs/SEMANTICS.md §9)")
struct VisionPrescriptionTests {
    let issued = Date(timeIntervalSince1970: 1_700_000_000)
    var expires: Date { issued.addingTimeInterval(2 * 365 * 86_400) }

    static func q(_ value: Double, _ unit: String) -> Quantity { try! Quantity(value, unit) }

    static let glassesLens = LensSpecification.glasses(
        sphere: q(-2.25, "D"), cylinder: q(-0.5, "D"), axis: q(90, "deg"), addPower: q(1.5, "D"), vertexDistance: q(12, "mm"),
        prism: Prism(amount: q(1.5, "pD"), angle: q(90, "deg"), base: .up, eye: .right),
        farPupillaryDistance: q(31.5, "mm"), nearPupillaryDistance: q(2.9, "cm"))
    static let contactsLens = LensSpecification.contacts(
        sphere: q(-2, "D"), cylinder: q(-0.75, "D"), axis: q(180, "deg"), addPower: q(1, "D"), baseCurve: q(8.6, "mm"), diameter: q(14.2, "mm"))

    func glasses(right: LensSpecification? = glassesLens, left: LensSpecification? = nil, description: String = "Distance") -> HealthObject {
        .visionPrescription(VisionPrescription(
            type: .glasses, dateIssued: issued, expirationDate: expires, description: description, rightEye: right, leftEye: left))
    }

    func contacts(right: LensSpecification? = contactsLens, left: LensSpecification? = contactsLens) -> HealthObject {
        .visionPrescription(VisionPrescription(type: .contacts, dateIssued: issued, expirationDate: expires, rightEye: right, leftEye: left))
    }

    func expectInvalid(_ object: HealthObject, field: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = #expect(throws: HealthError.self, sourceLocation: sourceLocation) { try object.validate() }
        #expect(error?.code == .invalidArgument, sourceLocation: sourceLocation)
        #expect(error?.field == field, "message: \(error?.message ?? "")", sourceLocation: sourceLocation)
    }

    func with(_ lens: LensSpecification, _ change: (inout LensSpecification) -> Void) -> LensSpecification {
        var copy = lens
        change(&copy)
        return copy
    }

    @Test("well-formed glasses (with a prism) and contacts prescriptions pass")
    func valid() throws {
        try glasses().validate()
        try glasses(right: nil, left: Self.glassesLens).validate()
        try glasses(right: .glasses(sphere: Self.q(0, "D")), left: .glasses(sphere: Self.q(0.25, "D"))).validate()
        try contacts().validate()
        try contacts(right: .contacts(sphere: Self.q(-1, "D")), left: nil).validate()
        let object = glasses()
        #expect(object.objectType == .visionPrescription)
        #expect(object.startDate == issued && object.endDate == expires)
        #expect(object.visionPrescription?.rightEye?.prism?.base == .up)
        #expect(object.quantitySample == nil && object.categorySample == nil)
    }

    @Test("common sample checks apply: dates, source, metadata")
    func common() throws {
        expectInvalid(.visionPrescription(VisionPrescription(
            type: .glasses, dateIssued: expires, expirationDate: issued, rightEye: Self.glassesLens)), field: "endDate")
        expectInvalid(.visionPrescription(VisionPrescription(
            type: .glasses, dateIssued: issued, expirationDate: expires, rightEye: Self.glassesLens,
            sourceRevision: SourceRevision(source: Source(bundleIdentifier: "", name: "x")))), field: "sourceRevision.source.bundleIdentifier")
        expectInvalid(.visionPrescription(VisionPrescription(
            type: .glasses, dateIssued: issued, expirationDate: expires, rightEye: Self.glassesLens,
            metadata: [MetadataKey.syncIdentifier: .string("rx")])), field: "metadata.\(MetadataKey.syncVersion)")
    }

    @Test("at least one eye")
    func noEye() {
        expectInvalid(glasses(right: nil, left: nil), field: "rightEye")
        expectInvalid(contacts(right: nil, left: nil), field: "rightEye")
    }

    @Test("glasses-only fields on contacts and contacts-only fields on glasses are refused")
    func wrongKind() {
        expectInvalid(contacts(right: Self.glassesLens), field: "rightEye.vertexDistance")
        expectInvalid(contacts(left: with(Self.contactsLens) { $0.prism = Self.glassesLens.prism }), field: "leftEye.prism")
        expectInvalid(contacts(left: with(Self.contactsLens) { $0.farPupillaryDistance = Self.q(31, "mm") }), field: "leftEye.farPupillaryDistance")
        expectInvalid(contacts(left: with(Self.contactsLens) { $0.nearPupillaryDistance = Self.q(29, "mm") }), field: "leftEye.nearPupillaryDistance")
        expectInvalid(glasses(right: Self.contactsLens), field: "rightEye.baseCurve")
        expectInvalid(glasses(left: with(Self.glassesLens) { $0.diameter = Self.q(14, "mm") }), field: "leftEye.diameter")
    }

    @Test("each quantity must have its dimension")
    func units() {
        let cases: [(WritableKeyPath<LensSpecification, Quantity?>, Quantity, String)] = [
            (\.cylinder, Self.q(-0.5, "deg"), "cylinder"), (\.axis, Self.q(90, "D"), "axis"), (\.addPower, Self.q(1, "mm"), "addPower"),
            (\.vertexDistance, Self.q(12, "D"), "vertexDistance"), (\.farPupillaryDistance, Self.q(31, "deg"), "farPupillaryDistance"),
            (\.nearPupillaryDistance, Self.q(29, "pD"), "nearPupillaryDistance"),
        ]
        for (path, quantity, name) in cases {
            expectInvalid(glasses(right: with(Self.glassesLens) { $0[keyPath: path] = quantity }), field: "rightEye.\(name).unit")
        }
        expectInvalid(glasses(right: with(Self.glassesLens) { $0.sphere = Self.q(-2, "pD") }), field: "rightEye.sphere.unit")
        expectInvalid(glasses(right: with(Self.glassesLens) { $0.prism?.amount = Self.q(1, "D") }), field: "rightEye.prism.amount.unit")
        expectInvalid(glasses(right: with(Self.glassesLens) { $0.prism?.angle = Self.q(1, "pD") }), field: "rightEye.prism.angle.unit")
        expectInvalid(contacts(left: with(Self.contactsLens) { $0.baseCurve = Self.q(8.6, "D") }), field: "leftEye.baseCurve.unit")
        expectInvalid(contacts(left: with(Self.contactsLens) { $0.diameter = Self.q(14, "count") }), field: "leftEye.diameter.unit")
        // Any angle and length unit will do.
        #expect(throws: Never.self) {
            try glasses(right: with(Self.glassesLens) { $0.axis = Self.q(1.5, "rad"); $0.vertexDistance = Self.q(0.012, "m") }).validate()
        }
    }

    @Test("values must be finite")
    func finite() {
        expectInvalid(glasses(right: with(Self.glassesLens) { $0.sphere = Quantity(.nan, $0.sphere.unit) }), field: "rightEye.sphere")
        expectInvalid(glasses(left: with(Self.glassesLens) { $0.cylinder = Self.q(.infinity, "D") }), field: "leftEye.cylinder")
        expectInvalid(glasses(right: with(Self.glassesLens) { $0.prism?.amount = Self.q(-.infinity, "pD") }), field: "rightEye.prism.amount")
        expectInvalid(contacts(left: with(Self.contactsLens) { $0.diameter = Self.q(.nan, "mm") }), field: "leftEye.diameter")
    }

    @Test("the description is at most the maximum string length")
    func longDescription() throws {
        try glasses(description: String(repeating: "x", count: ObjectLimits.maximumStringLength)).validate()
        expectInvalid(glasses(description: String(repeating: "x", count: ObjectLimits.maximumStringLength + 1)), field: "description")
    }

    @Test("enumeration values out of range are refused by the decoding initializers")
    func enumerations() throws {
        #expect(try VisionPrescriptionType(validating: 2, field: "prescriptionType") == .contacts)
        #expect(try PrismBase(validating: 0, field: "rightEye.prism.base") == PrismBase.none)
        #expect(try PrismBase(validating: 4, field: "rightEye.prism.base") == .out)
        #expect(try VisionEye(validating: 1, field: "rightEye.prism.eye") == .left)
        for (raw, field, make) in [
            (0, "prescriptionType", { try VisionPrescriptionType(validating: $0, field: $1) as Any }),
            (3, "prescriptionType", { try VisionPrescriptionType(validating: $0, field: $1) as Any }),
            (5, "rightEye.prism.base", { try PrismBase(validating: $0, field: $1) as Any }),
            (-1, "rightEye.prism.base", { try PrismBase(validating: $0, field: $1) as Any }),
            (0, "leftEye.prism.eye", { try VisionEye(validating: $0, field: $1) as Any }),
            (3, "leftEye.prism.eye", { try VisionEye(validating: $0, field: $1) as Any }),
        ] as [(Int, String, (Int, String) throws -> Any)] {
            let error = #expect(throws: HealthError.self) { try make(raw, field) }
            #expect(error?.code == .invalidArgument && error?.field == field, "message: \(error?.message ?? "")")
        }
    }
}
