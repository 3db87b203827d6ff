import Foundation
import HealthModel
import SwiftProtobuf

extension Healthledger_V1_Predicate {
    /// The schema form of `predicate`.
    public init(_ predicate: ObjectPredicate) {
        self.init()
        switch predicate {
        case .samples(let start, let end, let options):
            samples = .with {
                if let start { $0.startUs = microseconds(start) }
                if let end { $0.endUs = microseconds(end) }
                $0.strictStart = options.contains(.strictStartDate)
                $0.strictEnd = options.contains(.strictEndDate)
            }
        case .date(let which, let comparison, let bound):
            date = .with {
                $0.field = which == .start ? .start : .end
                $0.comparison = .init(comparison)
                $0.dateUs = microseconds(bound)
            }
        case .uuids(let uuids): self.uuids = .with { $0.uuids = uuids.sorted { $0.uuidString < $1.uuidString }.map { Data($0.bytes) } }
        case .sources(let bundles): sources = .with { $0.values = bundles.sorted() }
        case .sourceRevisions(let patterns):
            sourceRevisions = .with {
                $0.revisions = patterns.map { pattern in
                    .with {
                        $0.source.bundleIdentifier = pattern.bundleIdentifier
                        if let value = pattern.version { $0.version = value }
                        if let value = pattern.productType { $0.productType = value }
                        if let value = pattern.operatingSystemVersion { $0.operatingSystemVersion = value }
                    }
                }
            }
        case .devices(let devices): self.devices = .with { $0.devices = devices.map(Healthledger_V1_Device.init) }
        case .deviceProperty(let property, let allowed):
            deviceProperty = .with {
                $0.property = .init(rawValue: DeviceProperty.allCases.firstIndex(of: property)! + 1) ?? .unspecified
                $0.allowedValues = allowed.sorted()
            }
        case .metadata(let key, let condition):
            metadata = .with {
                $0.key = key
                switch condition {
                case .exists: break
                case .comparison(let comparison, let value):
                    $0.comparison = .init(comparison)
                    $0.values = .init([key: value])
                case .oneOf(let values):
                    $0.values = values.map { value in Array<Healthledger_V1_MetadataEntry>([key: value])[0] }
                }
            }
        case .quantity(let comparison, let bound):
            quantity = .with {
                $0.comparison = .init(comparison)
                $0.quantity = .init(bound)
            }
        case .categoryValue(let comparison, let value):
            category = .with {
                $0.comparison = .init(comparison)
                $0.value = Int64(value)
            }
        case .categoryValues(let values): categoryValues = .with { $0.values = values.sorted().map(Int64.init) }
        case .workout(let inner): workout = .init(inner)
        case .stateOfMind(let condition):
            stateOfMind = .with {
                switch condition {
                case .valence(let comparison, let valence): $0.valence = .with { $0.comparison = .init(comparison); $0.valence = valence }
                case .kind(let kind): $0.kind = Int32(kind.rawValue)
                case .label(let label): $0.label = label.rawValue
                case .association(let association): $0.association = association.rawValue
                }
            }
        case .medication(let condition):
            medication = .with {
                switch condition {
                case .doseStatus(let status): $0.doseStatus = Int32(status.rawValue)
                case .doseConcepts(let identifiers): $0.doseConcepts = .with { $0.values = identifiers.sorted() }
                case .archived(let archived): $0.archived = archived
                case .hasSchedule(let scheduled): $0.scheduled = scheduled
                }
            }
        case .associatedWithWorkout(let uuid): associatedWithWorkout = Data(uuid.bytes)
        case .memberOfCorrelation(let uuid): memberOfCorrelation = Data(uuid.bytes)
        case .and(let predicates): allOf = .with { $0.predicates = predicates.map(Healthledger_V1_Predicate.init) }
        case .or(let predicates): anyOf = .with { $0.predicates = predicates.map(Healthledger_V1_Predicate.init) }
        case .not(let inner): negation = .init(inner)
        }
    }

    /// The model predicate. The structure is checked here (every kind, enumeration and UUID
    /// well formed; the depth, term and value limits, counted while converting so a hostile
    /// predicate costs little); ``ObjectPredicate/validate(for:)`` then checks it against its type.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` naming the part at fault.
    public func model() throws -> ObjectPredicate {
        var terms = 0
        return try model(depth: 1, terms: &terms)
    }

    private func model(depth: Int, terms: inout Int) throws -> ObjectPredicate {
        let field = "predicate"
        terms += 1
        guard terms <= ObjectPredicate.maximumTerms else {
            throw HealthError.invalidArgument("a predicate has at most \(ObjectPredicate.maximumTerms) terms", field: field)
        }
        guard depth <= ObjectPredicate.maximumDepth else {
            throw HealthError.invalidArgument("a predicate nests at most \(ObjectPredicate.maximumDepth) levels", field: field)
        }
        func values<T>(_ list: [T], _ what: String) throws -> [T] {
            guard list.count <= ObjectPredicate.maximumValues else {
                throw HealthError.invalidArgument("a predicate lists at most \(ObjectPredicate.maximumValues) \(what)", field: field)
            }
            return list
        }
        func uuid(_ bytes: Data, _ name: String) throws -> UUID {
            guard let uuid = UUID(bytes: bytes) else { throw HealthError.invalidArgument("a UUID must be 16 bytes", field: "\(field).\(name)") }
            return uuid
        }
        switch kind {
        case .samples(let range):
            var options: DateRangeOptions = []
            if range.strictStart { options.insert(.strictStartDate) }
            if range.strictEnd { options.insert(.strictEndDate) }
            return .samples(
                start: range.hasStartUs ? LedgerSchema.date(microseconds: range.startUs) : nil,
                end: range.hasEndUs ? LedgerSchema.date(microseconds: range.endUs) : nil, options: options)
        case .date(let comparison):
            guard let which = SampleDate(rawValue: comparison.field.rawValue) else {
                throw HealthError.invalidArgument("a date predicate compares the start or the end date", field: "\(field).date.field")
            }
            return .date(
                which, try Comparison(validating: comparison.comparison.rawValue, field: "\(field).date.comparison"),
                LedgerSchema.date(microseconds: comparison.dateUs))
        case .uuids(let list):
            return .uuids(Set(try values(list.uuids, "UUIDs").map { try uuid($0, "uuids") }))
        case .sources(let list):
            return .sources(Set(try values(list.values, "sources")))
        case .sourceRevisions(let list):
            return .sourceRevisions(Set(try values(list.revisions, "source revisions").map { revision in
                guard !revision.source.bundleIdentifier.isEmpty else {
                    throw HealthError.invalidArgument("a source revision names its source's bundle identifier", field: "\(field).source_revisions")
                }
                let model = revision.model
                return SourceRevisionPattern(
                    bundleIdentifier: model.source.bundleIdentifier, version: model.version, productType: model.productType,
                    operatingSystemVersion: model.operatingSystemVersion)
            }))
        case .devices(let list):
            return .devices(Set(try values(list.devices, "devices").map(\.modelValue)))
        case .deviceProperty(let predicate):
            let index = predicate.property.rawValue - 1
            guard DeviceProperty.allCases.indices.contains(index) else {
                throw HealthError.invalidArgument("the device property is not one of the eight HealthKit has", field: "\(field).device_property")
            }
            return .deviceProperty(DeviceProperty.allCases[index], Set(try values(predicate.allowedValues, "device property values")))
        case .metadata(let predicate):
            let entries = try values(predicate.values, "metadata values")
            // The entries' own keys are ignored: the predicate's key is the one compared.
            let bounds = try entries.map { entry in
                var keyed = entry
                keyed.key = predicate.key
                return try [keyed].model()[predicate.key]!
            }
            if predicate.comparison == .unspecified {
                return .metadata(predicate.key, bounds.isEmpty ? .exists : .oneOf(bounds))
            }
            guard bounds.count == 1 else {
                throw HealthError.invalidArgument("a metadata comparison takes exactly one value", field: "\(field).metadata.values")
            }
            return .metadata(predicate.key, .comparison(try Comparison(validating: predicate.comparison.rawValue, field: "\(field).metadata.comparison"), bounds[0]))
        case .quantity(let predicate):
            guard predicate.hasQuantity else { throw HealthError.invalidArgument("the quantity predicate needs a quantity", field: "\(field).quantity") }
            return .quantity(
                try Comparison(validating: predicate.comparison.rawValue, field: "\(field).quantity.comparison"),
                try predicate.quantity.model(field: "\(field).quantity"))
        case .category(let predicate):
            guard let value = Int(exactly: predicate.value) else { throw HealthError.invalidArgument("the category value is out of range", field: "\(field).category") }
            return .categoryValue(try Comparison(validating: predicate.comparison.rawValue, field: "\(field).category.comparison"), value)
        case .categoryValues(let list):
            return .categoryValues(Set(try values(list.values, "category values").map { raw in
                guard let value = Int(exactly: raw) else { throw HealthError.invalidArgument("a category value is out of range", field: "\(field).category_values") }
                return value
            }))
        case .workout(let predicate):
            return .workout(try predicate.model())
        case .stateOfMind(let predicate):
            let name = "\(field).state_of_mind"
            switch predicate.condition {
            case .valence(let bound):
                return .stateOfMind(.valence(try Comparison(validating: bound.comparison.rawValue, field: "\(name).valence.comparison"), bound.valence))
            case .kind(let raw): return .stateOfMind(.kind(try StateOfMind.Kind(validating: Int(raw), field: "\(name).kind")))
            case .label(let label): return .stateOfMind(.label(try StateOfMind.Label(validating: label, field: "\(name).label")))
            case .association(let association):
                return .stateOfMind(.association(try StateOfMind.Association(validating: association, field: "\(name).association")))
            case nil: throw HealthError.invalidArgument("the state of mind predicate is empty: set one condition", field: name)
            }
        case .medication(let predicate):
            let name = "\(field).medication"
            switch predicate.condition {
            case .doseStatus(let raw): return .medication(.doseStatus(try MedicationDoseEvent.LogStatus(validating: Int(raw), field: "\(name).dose_status")))
            case .doseConcepts(let list): return .medication(.doseConcepts(Set(try values(list.values, "medication concepts"))))
            case .archived(let archived): return .medication(.archived(archived))
            case .scheduled(let scheduled): return .medication(.hasSchedule(scheduled))
            case nil: throw HealthError.invalidArgument("the medication predicate is empty: set one condition", field: name)
            }
        case .associatedWithWorkout(let bytes): return .associatedWithWorkout(try uuid(bytes, "associated_with_workout"))
        case .memberOfCorrelation(let bytes): return .memberOfCorrelation(try uuid(bytes, "member_of_correlation"))
        case .allOf(let list): return .and(try list.predicates.map { try $0.model(depth: depth + 1, terms: &terms) })
        case .anyOf(let list): return .or(try list.predicates.map { try $0.model(depth: depth + 1, terms: &terms) })
        case .negation(let inner): return .not(try inner.model(depth: depth + 1, terms: &terms))
        case nil: throw HealthError.invalidArgument("the predicate is empty: set one kind", field: field)
        }
    }
}

extension Healthledger_V1_Comparison {
    public init(_ comparison: Comparison) {
        self = .init(rawValue: comparison.rawValue) ?? .unspecified
    }
}
