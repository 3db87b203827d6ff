@testable import HealthModel
import Testing

@Suite("Type catalogue (docs/SEMANTICS.md §2)")
struct CatalogueTests {
    @Test("docs/SEMANTICS.md §2 table", arguments: [
        ("StepCount", "count", AggregationStyle.cumulative),
        ("DistanceWalkingRunning", "m", .cumulative), ("DistanceCycling", "m", .cumulative), ("DistanceSwimming", "m", .cumulative),
        ("ActiveEnergyBurned", "kcal", .cumulative), ("BasalEnergyBurned", "kcal", .cumulative),
        ("DietaryEnergyConsumed", "kcal", .cumulative), ("SwimmingStrokeCount", "count", .cumulative),
        ("FlightsClimbed", "count", .cumulative), ("InsulinDelivery", "IU", .cumulative),
        ("HeartRate", "count/s", .discreteTemporallyWeighted), ("RestingHeartRate", "count/min", .discreteArithmetic),
        ("HeartRateRecoveryOneMinute", "count/min", .discreteArithmetic), ("BodyMass", "kg", .discreteArithmetic),
        ("Height", "m", .discreteArithmetic), ("WaistCircumference", "m", .discreteArithmetic),
        ("SixMinuteWalkTestDistance", "m", .discreteArithmetic), ("BodyMassIndex", "count", .discreteArithmetic),
        ("VO2Max", "ml/(kg*min)", .discreteArithmetic), ("BloodGlucose", "mg/dL", .discreteArithmetic),
        ("BloodPressureSystolic", "mmHg", .discreteArithmetic), ("BloodPressureDiastolic", "mmHg", .discreteArithmetic),
        ("BodyTemperature", "degC", .discreteArithmetic), ("OxygenSaturation", "%", .discreteArithmetic),
        ("RespiratoryRate", "count/s", .discreteArithmetic), ("RunningStrideLength", "m", .discreteArithmetic),
        ("RunningPower", "W", .discreteArithmetic),
        ("EnvironmentalAudioExposure", "dBASPL", .discreteEquivalentContinuousLevel),
        ("HeadphoneAudioExposure", "dBASPL", .discreteEquivalentContinuousLevel),
    ])
    func table(_ name: String, _ unit: String, _ style: AggregationStyle) throws {
        let type = try QuantityType("HKQuantityTypeIdentifier\(name)")
        #expect(type.canonicalUnit == (try HealthUnit(unit)))
        #expect(type.aggregationStyle == style)
    }

    @Test("every catalogue entry is well-formed and unique")
    func wellFormed() throws {
        let quantities = QuantityTypeDescriptor.catalogue
        #expect(quantities.count >= 100)
        #expect(CategoryTypeDescriptor.catalogue.count >= 60)
        for descriptor in quantities {
            #expect(throws: Never.self) { try HealthUnit(descriptor.canonicalUnit) }
            // HealthKit's public identifiers, and the sleep schedule's goal as exports name it.
            #expect(descriptor.identifier.hasPrefix("HKQuantityTypeIdentifier") || descriptor.identifier == "HKDataTypeSleepDurationGoal")
        }
        let identifiers = TypeCatalogue.allIdentifiers
        #expect(Set(identifiers).count == identifiers.count)
        // Index keys use a 32-bit code per type: no two types may share one.
        #expect(Set(identifiers.map(TypeCatalogue.code(of:))).count == identifiers.count)
    }

    @Test("constructors refuse the wrong family")
    func wrongFamily() throws {
        #expect(throws: HealthError.self) { try QuantityType("HKCategoryTypeIdentifierSleepAnalysis") }
        #expect(throws: HealthError.self) { try CategoryType("HKQuantityTypeIdentifierHeartRate") }
        #expect(throws: HealthError.self) { try ObjectType("HKQuantityTypeIdentifierNope") }
        #expect(try ObjectType("HKCorrelationTypeIdentifierBloodPressure").family == .correlation)
        #expect(try ObjectType("HKWorkoutRouteTypeIdentifier").family == .workoutRoute)
        #expect(try ObjectType("HKVisionPrescriptionTypeIdentifier").family == .visionPrescription)
        #expect(try ObjectType("HKCharacteristicTypeIdentifierBloodType").family == .characteristic)
        #expect(try ObjectType("HKWorkoutTypeIdentifier").family == .workout)
    }

    @Test("seed-named types are present", arguments: [
        "WaistCircumference", "VO2Max", "InsulinDelivery", "SixMinuteWalkTestDistance", "HeartRateRecoveryOneMinute",
        "DistanceSwimming", "SwimmingStrokeCount", "RunningStrideLength", "RunningPower",
    ])
    func seedTypes(_ name: String) throws {
        _ = try QuantityType("HKQuantityTypeIdentifier\(name)")
    }

    @Test("sleep analysis values")
    func sleepAnalysis() throws {
        let sleep = try CategoryType("HKCategoryTypeIdentifierSleepAnalysis").values
        #expect(sleep.value(named: "inBed") == 0)
        #expect(sleep.value(named: "asleepUnspecified") == 1)
        #expect(sleep.value(named: "asleep") == 1)
        #expect(sleep.value(named: "awake") == 2)
        #expect(sleep.value(named: "asleepCore") == 3)
        #expect(sleep.value(named: "asleepDeep") == 4)
        #expect(sleep.value(named: "asleepREM") == 5)
        #expect(!sleep.contains(6))
        #expect(CategoryValueSet.allAsleepValues == [1, 3, 4, 5])
    }

    @Test("workout activity types by name and raw value")
    func activityTypes() {
        #expect(WorkoutActivityType(name: "taiChi")?.rawValue == 72)
        #expect(WorkoutActivityType(name: "HKWorkoutActivityTypeSwimBikeRun") == .swimBikeRun)
        #expect(WorkoutActivityType.transition.rawValue == 83)
        #expect(WorkoutActivityType.handCycling.rawValue == 74)
        #expect(WorkoutActivityType.mixedCardio.rawValue == 73)
        #expect(WorkoutActivityType.swimming.rawValue == 46)
    }

    @Test("every display unit parses, names a catalogue type and converts to its canonical unit")
    func displayUnits() throws {
        for (identifier, unit) in DisplayUnits.overrides {
            let type = try QuantityType(identifier)
            #expect(try HealthUnit(unit).isCompatible(with: type.canonicalUnit), "\(identifier) in \(unit)")
        }
        #expect(DisplayUnits.unit(for: try QuantityType("HKQuantityTypeIdentifierHeartRate")).description == "count/min")
        #expect(DisplayUnits.unit(for: try QuantityType("HKQuantityTypeIdentifierBodyMass")).description == "kg")
        #expect(DisplayUnits.unit(for: ObjectType.workout) == nil)
    }
}
