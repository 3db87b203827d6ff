import Foundation

/// A correlation type (HealthKit's `HKCorrelationType`): blood pressure or food, with the
/// member types each accepts.
public struct CorrelationType: Sendable, Hashable, CustomStringConvertible {
    public let identifier: String
    /// The quantity types its members may have.
    public let memberTypes: Set<String>

    /// - Throws: ``HealthError`` (`invalidArgument`) when `identifier` is not a correlation type.
    public init(_ identifier: String) throws {
        guard let members = TypeCatalogue.correlationTypes[identifier] else {
            throw HealthError.invalidArgument(TypeCatalogue.wrongFamilyMessage(identifier, expected: .correlation), field: "type")
        }
        self.identifier = identifier
        self.memberTypes = members
    }

    public static let bloodPressure = try! CorrelationType("HKCorrelationTypeIdentifierBloodPressure")
    public static let food = try! CorrelationType("HKCorrelationTypeIdentifierFood")

    public var objectType: ObjectType { ObjectType(identifier: identifier, family: .correlation) }
    public var description: String { identifier }
}

/// Samples that belong together (HealthKit's `HKCorrelation`): a blood-pressure reading (one
/// systolic and one diastolic sample) or a food (its dietary samples, optionally named by
/// `HKMetadataKeyFoodType`). Saving a correlation saves its members with it, atomically;
/// the members are ordinary samples of their own types as well.
///
/// ```swift
/// let reading = Correlation(
///     type: .bloodPressure, start: now, end: now,
///     objects: [QuantitySample(type: systolic, quantity: try Quantity(120, "mmHg"), start: now, end: now),
///               QuantitySample(type: diastolic, quantity: try Quantity(80, "mmHg"), start: now, end: now)])
/// ```
///
/// Read back, a correlation carries only the members the reader may read.
public struct Correlation: HealthSample {
    public var uuid: UUID
    public var type: CorrelationType
    public var objects: [QuantitySample]
    public var startDate: Date
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    /// Most members one correlation may hold.
    public static let maximumObjects = 128

    public init(
        type: CorrelationType, start: Date, end: Date, objects: [QuantitySample], device: Device? = nil, metadata: Metadata = [:],
        uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.type = type
        self.objects = objects
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { type.objectType }

    /// The members of one type (HealthKit's `objects(for:)`).
    public func objects(for type: QuantityType) -> [QuantitySample] { objects.filter { $0.type == type } }

    /// Checks the members: each of a type the correlation accepts, valid on its own, with a
    /// UUID of its own; blood pressure has exactly one systolic and one diastolic member,
    /// food at least one member.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming the member or type at fault.
    func validateMembers() throws {
        guard !objects.isEmpty else {
            throw HealthError.invalidArgument("a correlation needs at least one member sample", field: "objects")
        }
        guard objects.count <= Self.maximumObjects else {
            throw HealthError(.dataSizeExceeded, "a correlation holds at most \(Self.maximumObjects) samples", field: "objects")
        }
        var seen: Set<UUID> = [uuid]
        for (index, member) in objects.enumerated() {
            guard type.memberTypes.contains(member.type.identifier) else {
                throw HealthError.invalidArgument(
                    "\(member.type) does not belong in a \(type) correlation", field: "objects[\(index)].type")
            }
            guard seen.insert(member.uuid).inserted else {
                throw HealthError.invalidArgument("objects[\(index)]: UUID \(member.uuid) appears twice in the correlation", field: "objects[\(index)].uuid")
            }
            guard member.syncIdentifier == nil else {
                throw HealthError.invalidArgument(
                    "objects[\(index)]: a correlation's members take their sync identity from it: give \(MetadataKey.syncIdentifier) to the correlation",
                    field: "objects[\(index)].metadata")
            }
            do {
                try HealthObject.quantitySample(member).validate()
            } catch var error as HealthError {
                error.message = "objects[\(index)]: \(error.message)"
                error.field = "objects[\(index)].\(error.field ?? "")"
                throw error
            }
        }
        if type == .bloodPressure {
            for identifier in ["HKQuantityTypeIdentifierBloodPressureSystolic", "HKQuantityTypeIdentifierBloodPressureDiastolic"] {
                let count = objects.count { $0.type.identifier == identifier }
                guard count == 1 else {
                    throw HealthError.invalidArgument("a blood-pressure correlation has exactly one \(identifier) sample, not \(count)", field: "objects")
                }
            }
        }
    }
}
