import Foundation

/// HealthKit's `HKQueryOptions` for date-range predicates.
public struct DateRangeOptions: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The sample must start at or after the range's start (not merely overlap it).
    public static let strictStartDate = DateRangeOptions(rawValue: 1)
    /// The sample must end at or before the range's end.
    public static let strictEndDate = DateRangeOptions(rawValue: 2)
}

/// Which date of a sample a ``ObjectPredicate/date(_:_:_:)`` compares.
public enum SampleDate: Int, Sendable, Hashable, CaseIterable {
    case start = 1
    case end = 2
}

/// A source revision to match (HealthKit's `predicateForObjects(from: Set<HKSourceRevision>)`):
/// a nil version, product type or operating-system version matches any (HealthKit's
/// `HKSourceRevisionAnyVersion`, `…AnyProductType`, `…AnyOperatingSystem`).
public struct SourceRevisionPattern: Sendable, Hashable {
    public var bundleIdentifier: String
    public var version: String?
    public var productType: String?
    public var operatingSystemVersion: String?

    public init(bundleIdentifier: String, version: String? = nil, productType: String? = nil, operatingSystemVersion: String? = nil) {
        self.bundleIdentifier = bundleIdentifier
        self.version = version
        self.productType = productType
        self.operatingSystemVersion = operatingSystemVersion
    }

    public func matches(_ revision: SourceRevision) -> Bool {
        revision.source.bundleIdentifier == bundleIdentifier && (version == nil || version == revision.version)
            && (productType == nil || productType == revision.productType)
            && (operatingSystemVersion == nil || operatingSystemVersion == revision.operatingSystemVersion)
    }
}

/// A property of ``Device`` (HealthKit's `HKDevicePropertyKey…`).
public enum DeviceProperty: String, Sendable, Hashable, CaseIterable {
    case name, manufacturer, model, hardwareVersion, firmwareVersion, softwareVersion, localIdentifier, udiDeviceIdentifier

    public func value(of device: Device) -> String? {
        switch self {
        case .name: device.name
        case .manufacturer: device.manufacturer
        case .model: device.model
        case .hardwareVersion: device.hardwareVersion
        case .firmwareVersion: device.firmwareVersion
        case .softwareVersion: device.softwareVersion
        case .localIdentifier: device.localIdentifier
        case .udiDeviceIdentifier: device.udiDeviceIdentifier
        }
    }
}

/// What a ``ObjectPredicate/metadata(_:_:)`` asks of one metadata key.
public enum MetadataCondition: Sendable, Hashable {
    /// The key is present, whatever its value (HealthKit's `predicateForObjects(withMetadataKey:)`).
    case exists
    /// The value compares with this one (HealthKit's
    /// `predicateForObjects(withMetadataKey:operatorType:value:)`). Strings compare by their
    /// Unicode scalars, numbers and dates by value, quantities after converting to the bound's
    /// unit. A value of another kind, or a quantity of an incompatible unit, does not match,
    /// except under ``Comparison/notEqual``, which matches every present value that is not equal.
    case comparison(Comparison, MetadataValue)
    /// The value equals one of these (HealthKit's `predicateForObjects(withMetadataKey:allowedValues:)`).
    case oneOf([MetadataValue])
}

/// A condition on objects, as HealthKit's `HKQuery.predicateFor…` family builds them, composed
/// with ``and(_:)``, ``or(_:)`` and ``not(_:)``. The same predicate works on every query: sample,
/// anchored, observer, statistics, statistics collection, correlation and delete.
///
/// ```swift
/// // Heart rate above 120 count/min, from the watch, last night.
/// let fast = ObjectPredicate.and([
///     .predicateForSamples(withStart: evening, end: morning),
///     .predicateForQuantitySamples(with: .greater, quantity: try Quantity(120, "count/min")),
///     .predicateForObjects(withDeviceProperty: .model, allowedValues: ["Watch"]),
/// ])
/// ```
///
/// A predicate is checked against the query's type before it runs (``validate(for:)``): a
/// quantity comparison needs a quantity type and a compatible unit, a category value one of
/// the type's values, a workout predicate the workout type.
public indirect enum ObjectPredicate: Sendable, Hashable {
    /// Samples in a date range: overlapping `[start, end)` (nil: unbounded), or with the
    /// options, starting at or after `start` and/or ending at or before `end`.
    case samples(start: Date?, end: Date?, options: DateRangeOptions)
    /// The sample's start or end date compares with a date.
    case date(SampleDate, Comparison, Date)
    /// Objects with one of these UUIDs.
    case uuids(Set<UUID>)
    /// Objects saved by one of these sources (bundle identifiers).
    case sources(Set<String>)
    /// Objects saved by one of these source revisions.
    case sourceRevisions(Set<SourceRevisionPattern>)
    /// Objects from one of these devices: every property a device sets must be equal; the
    /// properties it leaves nil match anything.
    case devices(Set<Device>)
    /// Objects whose device has the property set to one of these values.
    case deviceProperty(DeviceProperty, Set<String>)
    /// A condition on one metadata key.
    case metadata(String, MetadataCondition)
    /// Quantity samples whose value compares with a quantity (after unit conversion).
    case quantity(Comparison, Quantity)
    /// Category samples whose value compares with a raw value.
    case categoryValue(Comparison, Int)
    /// Category samples whose value is one of these.
    case categoryValues(Set<Int>)
    /// Workouts matching a workout predicate (activity type, duration, statistics, activities).
    case workout(WorkoutPredicate)
    /// States of mind matching a condition on their valence, kind, labels or associations.
    case stateOfMind(StateOfMindCondition)
    /// Medications or their dose events matching a condition.
    case medication(MedicationCondition)
    /// Objects associated with this workout (samples added to it, its routes).
    case associatedWithWorkout(UUID)
    /// Objects that are members of this correlation.
    case memberOfCorrelation(UUID)
    case and([ObjectPredicate])
    case or([ObjectPredicate])
    case not(ObjectPredicate)

    /// Most nested levels of ``and(_:)``, ``or(_:)`` and ``not(_:)``.
    public static let maximumDepth = 16
    /// Most predicates (leaves and compositions) in one query's predicate.
    public static let maximumTerms = 256
    /// Most values in one leaf's set (UUIDs, sources, allowed values …).
    public static let maximumValues = 10_000
}

// MARK: - HealthKit's constructors

extension ObjectPredicate {
    /// Samples in a date range (HealthKit's `predicateForSamples(withStart:end:options:)`).
    public static func predicateForSamples(withStart start: Date?, end: Date?, options: DateRangeOptions = []) -> ObjectPredicate {
        .samples(start: start, end: end, options: options)
    }

    /// Objects with one of these UUIDs (HealthKit's `predicateForObjects(with:)`).
    public static func predicateForObjects(with uuids: Set<UUID>) -> ObjectPredicate { .uuids(uuids) }

    /// Objects of one object (HealthKit's `predicateForObject(with:)`).
    public static func predicateForObject(with uuid: UUID) -> ObjectPredicate { .uuids([uuid]) }

    /// Objects saved by one of these sources (HealthKit's `predicateForObjects(from: Set<HKSource>)`).
    public static func predicateForObjects(from sources: Set<Source>) -> ObjectPredicate { .sources(Set(sources.map(\.bundleIdentifier))) }

    /// Objects saved by one of these source revisions (HealthKit's
    /// `predicateForObjects(from: Set<HKSourceRevision>)`).
    public static func predicateForObjects(from revisions: Set<SourceRevisionPattern>) -> ObjectPredicate { .sourceRevisions(revisions) }

    /// Objects from one of these devices (HealthKit's `predicateForObjects(from: Set<HKDevice>)`).
    public static func predicateForObjects(from devices: Set<Device>) -> ObjectPredicate { .devices(devices) }

    /// Objects whose device property is one of the values (HealthKit's
    /// `predicateForObjects(withDeviceProperty:allowedValues:)`).
    public static func predicateForObjects(withDeviceProperty property: DeviceProperty, allowedValues: Set<String>) -> ObjectPredicate {
        .deviceProperty(property, allowedValues)
    }

    /// Objects that have the metadata key (HealthKit's `predicateForObjects(withMetadataKey:)`).
    public static func predicateForObjects(withMetadataKey key: String) -> ObjectPredicate { .metadata(key, .exists) }

    /// Objects whose metadata value compares with `value` (HealthKit's
    /// `predicateForObjects(withMetadataKey:operatorType:value:)`).
    public static func predicateForObjects(withMetadataKey key: String, operatorType: Comparison, value: MetadataValue) -> ObjectPredicate {
        .metadata(key, .comparison(operatorType, value))
    }

    /// Objects whose metadata value is one of `allowedValues` (HealthKit's
    /// `predicateForObjects(withMetadataKey:allowedValues:)`).
    public static func predicateForObjects(withMetadataKey key: String, allowedValues: [MetadataValue]) -> ObjectPredicate {
        .metadata(key, .oneOf(allowedValues))
    }

    /// Objects without the metadata key (HealthKit writes `NOT` of the existence predicate).
    public static func predicateForObjects(withoutMetadataKey key: String) -> ObjectPredicate { .not(.metadata(key, .exists)) }

    /// Quantity samples whose value compares with `quantity` (HealthKit's
    /// `predicateForQuantitySamples(with:quantity:)`).
    public static func predicateForQuantitySamples(with operatorType: Comparison, quantity: Quantity) -> ObjectPredicate {
        .quantity(operatorType, quantity)
    }

    /// Category samples whose value compares with `value` (HealthKit's
    /// `predicateForCategorySamples(with:value:)`).
    public static func predicateForCategorySamples(with operatorType: Comparison, value: Int) -> ObjectPredicate {
        .categoryValue(operatorType, value)
    }

    /// Category samples whose value is one of `values` (HealthKit's
    /// `predicateForCategorySamples(equalTo:)`); ``allAsleepValues`` for any sleep stage.
    public static func predicateForCategorySamples(equalTo values: Set<Int>) -> ObjectPredicate { .categoryValues(values) }

    /// Sleep analysis: every value that means asleep (HealthKit's
    /// `HKCategoryValueSleepAnalysis.allAsleepValues`): unspecified, core, deep and REM.
    public static let allAsleepValues: Set<Int> = CategoryValueSet.allAsleepValues

    /// Workouts matching `predicate` (HealthKit's `predicateForWorkouts(with:)` family).
    public static func predicateForWorkouts(_ predicate: WorkoutPredicate) -> ObjectPredicate { .workout(predicate) }

    /// States of mind whose valence compares with `valence` (HealthKit's
    /// `predicateForStatesOfMind(with:valence:)`).
    public static func predicateForStatesOfMind(with operatorType: Comparison, valence: Double) -> ObjectPredicate {
        .stateOfMind(.valence(operatorType, valence))
    }

    /// States of mind of one kind (HealthKit's `predicateForStatesOfMind(with: HKStateOfMind.Kind)`).
    public static func predicateForStatesOfMind(with kind: StateOfMind.Kind) -> ObjectPredicate { .stateOfMind(.kind(kind)) }

    /// States of mind with a label among theirs (HealthKit's `predicateForStatesOfMind(with: HKStateOfMind.Label)`).
    public static func predicateForStatesOfMind(with label: StateOfMind.Label) -> ObjectPredicate { .stateOfMind(.label(label)) }

    /// States of mind with an association among theirs (HealthKit's
    /// `predicateForStatesOfMind(with: HKStateOfMind.Association)`).
    public static func predicateForStatesOfMind(with association: StateOfMind.Association) -> ObjectPredicate {
        .stateOfMind(.association(association))
    }

    /// Dose events of one log status (HealthKit's `predicateForMedicationDoseEvent(status:)`).
    public static func predicateForMedicationDoseEvent(status: MedicationDoseEvent.LogStatus) -> ObjectPredicate { .medication(.doseStatus(status)) }

    /// Dose events of these medications, by concept identifier (HealthKit's
    /// `predicateForMedicationDoseEvent(medicationConceptIdentifiers:)`).
    public static func predicateForMedicationDoseEvent(medicationConceptIdentifiers: Set<String>) -> ObjectPredicate {
        .medication(.doseConcepts(medicationConceptIdentifiers))
    }

    /// Medications archived or not (HealthKit's `predicateForUserAnnotatedMedications(isArchived:)`).
    public static func predicateForUserAnnotatedMedications(isArchived: Bool) -> ObjectPredicate { .medication(.archived(isArchived)) }

    /// Medications with a schedule or without (HealthKit's `predicateForUserAnnotatedMedications(hasSchedule:)`).
    public static func predicateForUserAnnotatedMedications(hasSchedule: Bool) -> ObjectPredicate { .medication(.hasSchedule(hasSchedule)) }

    /// Objects associated with a workout (HealthKit's `predicateForObjects(from: HKWorkout)`).
    public static func predicateForObjects(from workout: UUID) -> ObjectPredicate { .associatedWithWorkout(workout) }

    /// Members of a correlation (HealthKit's `predicateForObjects(withCorrelation:)`... as
    /// `HKCorrelation.objects` lists them).
    public static func predicateForObjects(inCorrelation correlation: UUID) -> ObjectPredicate { .memberOfCorrelation(correlation) }

    /// All of the predicates (`NSCompoundPredicate(andPredicateWithSubpredicates:)`).
    public static func andPredicate(withSubpredicates predicates: [ObjectPredicate]) -> ObjectPredicate { .and(predicates) }
    /// Any of the predicates (`NSCompoundPredicate(orPredicateWithSubpredicates:)`).
    public static func orPredicate(withSubpredicates predicates: [ObjectPredicate]) -> ObjectPredicate { .or(predicates) }
    /// Not the predicate (`NSCompoundPredicate(notPredicateWithSubpredicate:)`).
    public static func notPredicate(withSubpredicate predicate: ObjectPredicate) -> ObjectPredicate { .not(predicate) }
}

// MARK: - Validation

extension ObjectPredicate {
    /// Checks the predicate against the type it will run on and against the limits.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` naming the limit (depth, terms, values) or
    ///   the leaf that does not fit `type`: a quantity comparison on another family or with
    ///   an incompatible unit, a category value outside the type's values, a workout predicate
    ///   on another type, a metadata bound that breaks its key's rule, a non-finite number.
    public func validate(for type: ObjectType) throws {
        var terms = 0
        try validate(for: type, depth: 1, terms: &terms)
    }

    private func validate(for type: ObjectType, depth: Int, terms: inout Int) throws {
        terms += 1
        guard terms <= Self.maximumTerms else {
            throw HealthError.invalidArgument("a predicate has at most \(Self.maximumTerms) terms", field: "predicate")
        }
        guard depth <= Self.maximumDepth else {
            throw HealthError.invalidArgument("a predicate nests at most \(Self.maximumDepth) levels", field: "predicate")
        }
        func values(_ count: Int, _ what: String) throws {
            guard count <= Self.maximumValues else {
                throw HealthError.invalidArgument("a predicate lists at most \(Self.maximumValues) \(what)", field: "predicate")
            }
        }
        func date(_ date: Date, _ name: String) throws {
            guard ObjectLimits.dateRange.contains(date) || date == .distantPast || date == .distantFuture else {
                throw HealthError.invalidArgument("the predicate's \(name) must fall within years 0001–9999", field: "predicate")
            }
        }
        switch self {
        case .samples(let start, let end, _):
            if let start { try date(start, "start date") }
            if let end { try date(end, "end date") }
            if let start, let end, end < start {
                throw HealthError.invalidArgument("the predicate's date range ends before it starts", field: "predicate")
            }
        case .date(_, _, let bound):
            try date(bound, "date")
        case .uuids(let uuids): try values(uuids.count, "UUIDs")
        case .sources(let bundles): try values(bundles.count, "sources")
        case .sourceRevisions(let revisions): try values(revisions.count, "source revisions")
        case .devices(let devices): try values(devices.count, "devices")
        case .deviceProperty(_, let allowed): try values(allowed.count, "device property values")
        case .metadata(let key, let condition):
            guard !key.isEmpty, key.utf8.count <= ObjectLimits.maximumKeyLength else {
                throw HealthError.invalidArgument("a metadata key is 1 to \(ObjectLimits.maximumKeyLength) bytes", field: "predicate.metadata")
            }
            switch condition {
            case .exists: break
            case .comparison(_, let value): try Self.validate(value, key: key)
            case .oneOf(let allowed):
                guard !allowed.isEmpty else {
                    throw HealthError.invalidArgument("a metadata 'in' predicate needs at least one value", field: "predicate.metadata")
                }
                try values(allowed.count, "metadata values")
                for value in allowed { try Self.validate(value, key: key) }
            }
        case .quantity(_, let bound):
            guard type.family == .quantity, let quantityType = try? QuantityType(type.identifier) else {
                throw HealthError.invalidArgument("a quantity predicate needs a quantity type; \(type) is a \(type.family.rawValue) type", field: "predicate.quantity")
            }
            guard bound.value.isFinite else {
                throw HealthError.invalidArgument("a quantity predicate's value must be finite", field: "predicate.quantity")
            }
            guard bound.isCompatible(with: quantityType.canonicalUnit) else {
                throw HealthError.invalidArgument(
                    "'\(bound.unit)' is not compatible with \(type)'s unit '\(quantityType.canonicalUnit)'", field: "predicate.quantity")
            }
        case .categoryValue(_, let value):
            try Self.categoryType(type).map { try Self.check(value, in: $0) }
        case .categoryValues(let allowed):
            try values(allowed.count, "category values")
            if let category = try Self.categoryType(type) { for value in allowed { try Self.check(value, in: category) } }
        case .workout(let predicate):
            guard type == .workout else {
                throw HealthError.invalidArgument("a workout predicate needs the workout type, not \(type)", field: "predicate.workout")
            }
            try predicate.validate()
        case .stateOfMind(let condition):
            guard type == .stateOfMind else {
                throw HealthError.invalidArgument("a state of mind predicate needs the state of mind type, not \(type)", field: "predicate.state_of_mind")
            }
            if case .valence(_, let valence) = condition, !valence.isFinite {
                throw HealthError.invalidArgument("a valence predicate's value must be finite", field: "predicate.state_of_mind.valence")
            }
        case .medication(let condition):
            guard type == condition.type else {
                throw HealthError.invalidArgument("this medication predicate needs the type \(condition.type), not \(type)", field: "predicate.medication")
            }
            if case .doseConcepts(let identifiers) = condition { try values(identifiers.count, "medication concepts") }
        case .associatedWithWorkout, .memberOfCorrelation:
            break
        case .and(let predicates), .or(let predicates):
            for predicate in predicates { try predicate.validate(for: type, depth: depth + 1, terms: &terms) }
        case .not(let predicate):
            try predicate.validate(for: type, depth: depth + 1, terms: &terms)
        }
    }

    private static func categoryType(_ type: ObjectType) throws -> CategoryType? {
        guard type.family == .category else {
            throw HealthError.invalidArgument("a category predicate needs a category type; \(type) is a \(type.family.rawValue) type", field: "predicate.category")
        }
        return try? CategoryType(type.identifier)
    }

    private static func check(_ value: Int, in type: CategoryType) throws {
        guard type.values.contains(value) else {
            throw HealthError.invalidArgument("\(value) is not a value of \(type.values.name)", field: "predicate.category")
        }
    }

    private static func validate(_ value: MetadataValue, key: String) throws {
        switch value {
        case .string(let string):
            guard string.utf8.count <= ObjectLimits.maximumStringLength else {
                throw HealthError.invalidArgument("a metadata string is at most \(ObjectLimits.maximumStringLength) bytes", field: "predicate.metadata")
            }
        case .number(let number):
            guard number.isFinite else { throw HealthError.invalidArgument("a metadata number must be finite", field: "predicate.metadata") }
        case .date(let date):
            guard ObjectLimits.dateRange.contains(date) else {
                throw HealthError.invalidArgument("a metadata date must fall within years 0001–9999", field: "predicate.metadata")
            }
        case .quantity(let quantity):
            guard quantity.value.isFinite else { throw HealthError.invalidArgument("a metadata quantity must be finite", field: "predicate.metadata") }
            if case .quantity(let unit)? = MetadataRule.rules[key], !quantity.isCompatible(with: unit) {
                throw HealthError.invalidArgument(
                    "\(key) holds quantities in units compatible with '\(unit)'; '\(quantity.unit)' is not", field: "predicate.metadata")
            }
        }
    }
}

// MARK: - Evaluation

/// One candidate object as a predicate sees it. A ledger answers the cheap questions (dates,
/// UUID, source, value) from its indexes and loads the object only when a leaf needs it.
public protocol PredicateSubject {
    var uuid: UUID { get }
    var startDate: Date { get }
    var endDate: Date { get }
    /// The bundle identifier of the object's source.
    func sourceBundleIdentifier() throws -> String
    /// A quantity sample's value in its type's canonical unit, a category sample's raw value.
    func value() throws -> Double?
    /// The whole object (source revision, device, metadata, workout).
    func object() throws -> HealthObject
    /// Whether the object is associated with the workout (`correlation` false), or a member
    /// of the correlation.
    func isMember(of parent: UUID, correlation: Bool) throws -> Bool
    /// Whether the object, a workout, matches a workout predicate (its statistics count only
    /// what the reader may read).
    func matches(_ predicate: WorkoutPredicate) throws -> Bool
}

extension ObjectPredicate {
    /// Whether `subject`, an object of `type` (the type the predicate was validated for), matches.
    public func matches(_ subject: some PredicateSubject, type: ObjectType) throws -> Bool {
        switch self {
        case .samples(let start, let end, let options):
            let (from, to) = (subject.startDate, subject.endDate)
            let lower = start ?? .distantPast
            let upper = end ?? .distantFuture
            let startsIn = options.contains(.strictStartDate) ? from >= lower : (from == to ? from >= lower : to > lower)
            let endsIn = options.contains(.strictEndDate) ? to <= upper : from < upper
            return startsIn && endsIn
        case .date(let which, let comparison, let bound):
            let value = which == .start ? subject.startDate : subject.endDate
            return comparison.holds(value.timeIntervalSince1970, bound.timeIntervalSince1970)
        case .uuids(let uuids):
            return uuids.contains(subject.uuid)
        case .sources(let bundles):
            return bundles.contains(try subject.sourceBundleIdentifier())
        case .sourceRevisions(let patterns):
            let revision = try subject.object().sourceRevision
            return patterns.contains { $0.matches(revision) }
        case .devices(let devices):
            guard let device = try subject.object().device else { return false }
            return devices.contains { pattern in
                DeviceProperty.allCases.allSatisfy { property in
                    property.value(of: pattern).map { $0 == property.value(of: device) } ?? true
                }
            }
        case .deviceProperty(let property, let allowed):
            guard let value = try subject.object().device.flatMap(property.value(of:)) else { return false }
            return allowed.contains(value)
        case .metadata(let key, let condition):
            guard let stored = try subject.object().metadata[key] else { return false }
            switch condition {
            case .exists: return true
            case .comparison(let comparison, let bound): return Self.compare(stored, comparison, bound)
            case .oneOf(let allowed): return allowed.contains { Self.compare(stored, .equal, $0) }
            }
        case .quantity(let comparison, let bound):
            guard let quantityType = try? QuantityType(type.identifier), let value = try subject.value(),
                let boundValue = try? bound.doubleValue(for: quantityType.canonicalUnit)
            else { return false }
            return comparison.holds(value, boundValue)
        case .categoryValue(let comparison, let bound):
            guard type.family == .category, let value = try subject.value() else { return false }
            return comparison.holds(value, Double(bound))
        case .categoryValues(let allowed):
            guard type.family == .category, let value = try subject.value(), let raw = Int(exactly: value) else { return false }
            return allowed.contains(raw)
        case .workout(let predicate):
            return try subject.matches(predicate)
        case .stateOfMind(let condition):
            guard case .stateOfMind(let state) = try subject.object() else { return false }
            return condition.matches(state)
        case .medication(let condition):
            return condition.matches(try subject.object())
        case .associatedWithWorkout(let parent):
            return try subject.isMember(of: parent, correlation: false)
        case .memberOfCorrelation(let parent):
            return try subject.isMember(of: parent, correlation: true)
        case .and(let predicates):
            for predicate in predicates where try !predicate.matches(subject, type: type) { return false }
            return true
        case .or(let predicates):
            for predicate in predicates where try predicate.matches(subject, type: type) { return true }
            return false
        case .not(let predicate):
            return try !predicate.matches(subject, type: type)
        }
    }

    /// Compares a stored metadata value with a predicate's bound.
    static func compare(_ stored: MetadataValue, _ comparison: Comparison, _ bound: MetadataValue) -> Bool {
        let order: ComparisonResult?
        switch (stored, bound) {
        case (.string(let a), .string(let b)):
            order = a.unicodeScalars.lexicographicallyPrecedes(b.unicodeScalars)
                ? .orderedAscending : a.unicodeScalars.elementsEqual(b.unicodeScalars) ? .orderedSame : .orderedDescending
        case (.number(let a), .number(let b)): order = a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame
        case (.date(let a), .date(let b)): order = a < b ? .orderedAscending : a > b ? .orderedDescending : .orderedSame
        case (.quantity(let a), .quantity(let b)):
            guard let value = try? a.doubleValue(for: b.unit) else { order = nil; break }
            order = value < b.value ? .orderedAscending : value > b.value ? .orderedDescending : .orderedSame
        default: order = nil
        }
        guard let order else { return comparison == .notEqual }
        switch comparison {
        case .less: return order == .orderedAscending
        case .lessOrEqual: return order != .orderedDescending
        case .equal: return order == .orderedSame
        case .greaterOrEqual: return order != .orderedAscending
        case .greater: return order == .orderedDescending
        case .notEqual: return order != .orderedSame
        }
    }

    /// The predicates that must all hold: the leaves of the top-level ``and(_:)`` (nested ones
    /// flattened), or the predicate itself. Queries read their index hints from these.
    public var conjuncts: [ObjectPredicate] {
        guard case .and(let predicates) = self else { return [self] }
        return predicates.flatMap(\.conjuncts)
    }
}

extension HealthObject {
    /// A quantity sample's value in its type's canonical unit, a category sample's raw value;
    /// nil for other objects (what quantity and category predicates compare).
    public var canonicalValue: Double? {
        switch self {
        case .quantitySample(let sample): try? sample.quantity.doubleValue(for: sample.type.canonicalUnit)
        case .categorySample(let sample): Double(sample.value)
        default: nil
        }
    }
}

/// What a state of mind predicate asks of one (HealthKit's `predicateForStatesOfMind`).
public enum StateOfMindCondition: Sendable, Hashable {
    /// The valence compares with a value.
    case valence(Comparison, Double)
    case kind(StateOfMind.Kind)
    /// The label is among the state's.
    case label(StateOfMind.Label)
    /// The association is among the state's.
    case association(StateOfMind.Association)

    public func matches(_ state: StateOfMind) -> Bool {
        switch self {
        case .valence(let comparison, let bound): comparison.holds(state.valence, bound)
        case .kind(let kind): state.kind == kind
        case .label(let label): state.labels.contains(label)
        case .association(let association): state.associations.contains(association)
        }
    }
}

/// What a medication predicate asks of a medication or a dose event (HealthKit's
/// `predicateForMedicationDoseEvent` and `predicateForUserAnnotatedMedications`).
public enum MedicationCondition: Sendable, Hashable {
    /// A dose event of this log status.
    case doseStatus(MedicationDoseEvent.LogStatus)
    /// A dose event of one of these medications (concept identifiers).
    case doseConcepts(Set<String>)
    /// A medication archived (true) or not.
    case archived(Bool)
    /// A medication with a schedule (true) or without.
    case hasSchedule(Bool)

    /// The type whose objects the condition applies to.
    public var type: ObjectType {
        switch self {
        case .doseStatus, .doseConcepts: .medicationDoseEvent
        case .archived, .hasSchedule: .userAnnotatedMedication
        }
    }

    public func matches(_ object: HealthObject) -> Bool {
        switch (self, object) {
        case (.doseStatus(let status), .medicationDoseEvent(let dose)): dose.logStatus == status
        case (.doseConcepts(let identifiers), .medicationDoseEvent(let dose)): identifiers.contains(dose.medicationConceptIdentifier)
        case (.archived(let archived), .userAnnotatedMedication(let medication)): medication.isArchived == archived
        case (.hasSchedule(let scheduled), .userAnnotatedMedication(let medication)): medication.hasSchedule == scheduled
        default: false
        }
    }
}

/// A plain object as a predicate subject (no ledger around it: it belongs to no workout or
/// correlation, and a workout predicate sees no statistics).
public struct ObjectSubject: PredicateSubject {
    public let wrapped: HealthObject

    public init(_ object: HealthObject) { wrapped = object }

    public var uuid: UUID { wrapped.uuid }
    public var startDate: Date { wrapped.startDate }
    public var endDate: Date { wrapped.endDate }
    public func sourceBundleIdentifier() -> String { wrapped.sourceRevision.source.bundleIdentifier }
    public func value() -> Double? { wrapped.canonicalValue }
    public func object() -> HealthObject { wrapped }
    public func isMember(of parent: UUID, correlation: Bool) -> Bool { false }
    public func matches(_ predicate: WorkoutPredicate) throws -> Bool {
        guard case .workout(let workout) = wrapped else { return false }
        return try predicate.matches(WorkoutFacts(
            activityType: workout.activityType, duration: workout.duration, statistics: { _ in nil },
            activities: workout.activities.map {
                WorkoutFacts(activityType: $0.configuration.activityType, duration: $0.duration, statistics: { _ in nil }, activities: nil)
            }))
    }
}

/// One type of a query over several types and the predicate its objects must match
/// (HealthKit's `HKSamplePredicate` / `HKQueryDescriptor`).
public struct QueryDescriptor: Sendable, Hashable {
    public var type: ObjectType
    public var predicate: ObjectPredicate?

    public init(type: ObjectType, predicate: ObjectPredicate? = nil) {
        self.type = type
        self.predicate = predicate
    }

    /// Most descriptors one query takes.
    public static let maximumCount = 64

    /// Checks a query's descriptors: 1 to ``maximumCount``, each type once, each predicate
    /// against its type.
    /// - Throws: ``HealthError`` `invalidArgument` naming the fault.
    public static func validate(_ descriptors: [QueryDescriptor]) throws {
        guard !descriptors.isEmpty else { throw HealthError.invalidArgument("a query needs at least one type", field: "descriptors") }
        guard descriptors.count <= maximumCount else {
            throw HealthError.invalidArgument("a query takes at most \(maximumCount) descriptors", field: "descriptors")
        }
        var seen = Set<ObjectType>()
        for descriptor in descriptors {
            guard seen.insert(descriptor.type).inserted else {
                throw HealthError.invalidArgument("\(descriptor.type) appears in two descriptors: combine their predicates with OR", field: "descriptors")
            }
            try descriptor.predicate?.validate(for: descriptor.type)
        }
    }
}
