extension QuantityTypeDescriptor {
    /// Every quantity type HealthKit defines (iOS 18 / watchOS 11 era), as an Apple Health export can contain it.
    ///
    /// Units and aggregation styles are the ones HealthKit documents for each identifier
    /// (the comments in `HKTypeIdentifiers.h`), grouped as HealthKit groups them.
    /// Mass amounts of nutrients use the canonical unit `g`; samples in `mg` or `mcg`
    /// are compatible with it.
    ///
    /// ```swift
    /// let heartRate = QuantityTypeDescriptor.catalogue.first {
    ///     $0.identifier == "HKQuantityTypeIdentifierHeartRate"
    /// }
    /// // heartRate?.canonicalUnit == "count/s", .discreteTemporallyWeighted
    /// ```
    public static let catalogue: [QuantityTypeDescriptor] = [
        // MARK: Body measurements
        .init("HKQuantityTypeIdentifierAppleSleepingWristTemperature", unit: "degC", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierBodyFatPercentage", unit: "%", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierBodyMass", unit: "kg", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierBodyMassIndex", unit: "count", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierElectrodermalActivity", unit: "S", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierHeight", unit: "m", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierLeanBodyMass", unit: "kg", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWaistCircumference", unit: "m", .discreteArithmetic),

        // MARK: Fitness
        .init("HKQuantityTypeIdentifierActiveEnergyBurned", unit: "kcal", .cumulative),
        .init("HKQuantityTypeIdentifierAppleExerciseTime", unit: "min", .cumulative),
        .init("HKQuantityTypeIdentifierAppleMoveTime", unit: "min", .cumulative),
        .init("HKQuantityTypeIdentifierAppleStandTime", unit: "min", .cumulative),
        .init("HKQuantityTypeIdentifierBasalEnergyBurned", unit: "kcal", .cumulative),
        .init("HKQuantityTypeIdentifierCrossCountrySkiingSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierCyclingCadence", unit: "count/min", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierCyclingFunctionalThresholdPower", unit: "W", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierCyclingPower", unit: "W", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierCyclingSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierDistanceCrossCountrySkiing", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistanceCycling", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistanceDownhillSnowSports", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistancePaddleSports", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistanceRowing", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistanceSkatingSports", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistanceSwimming", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistanceWalkingRunning", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierDistanceWheelchair", unit: "m", .cumulative),
        .init("HKQuantityTypeIdentifierEstimatedWorkoutEffortScore", unit: "appleEffortScore", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierFlightsClimbed", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierNikeFuel", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierPaddleSportsSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierPhysicalEffort", unit: "kcal/(kg*hr)", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierPushCount", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierRowingSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierRunningPower", unit: "W", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierRunningSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierStepCount", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierSwimmingStrokeCount", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierUnderwaterDepth", unit: "m", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWorkoutEffortScore", unit: "appleEffortScore", .discreteArithmetic),

        // MARK: Hearing health
        .init("HKQuantityTypeIdentifierEnvironmentalAudioExposure", unit: "dBASPL", .discreteEquivalentContinuousLevel),
        .init("HKQuantityTypeIdentifierEnvironmentalSoundReduction", unit: "dBASPL", .discreteEquivalentContinuousLevel),
        .init("HKQuantityTypeIdentifierHeadphoneAudioExposure", unit: "dBASPL", .discreteEquivalentContinuousLevel),

        // MARK: Heart
        .init("HKQuantityTypeIdentifierAtrialFibrillationBurden", unit: "%", .discreteTemporallyWeighted),
        .init("HKQuantityTypeIdentifierHeartRate", unit: "count/s", .discreteTemporallyWeighted),
        .init("HKQuantityTypeIdentifierHeartRateRecoveryOneMinute", unit: "count/min", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierHeartRateVariabilitySDNN", unit: "ms", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierPeripheralPerfusionIndex", unit: "%", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierRestingHeartRate", unit: "count/min", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierVO2Max", unit: "ml/(kg*min)", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWalkingHeartRateAverage", unit: "count/min", .discreteArithmetic),

        // MARK: Mobility
        .init("HKQuantityTypeIdentifierAppleWalkingSteadiness", unit: "%", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierRunningGroundContactTime", unit: "ms", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierRunningStrideLength", unit: "m", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierRunningVerticalOscillation", unit: "cm", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierSixMinuteWalkTestDistance", unit: "m", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierStairAscentSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierStairDescentSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWalkingAsymmetryPercentage", unit: "%", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWalkingDoubleSupportPercentage", unit: "%", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWalkingSpeed", unit: "m/s", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWalkingStepLength", unit: "m", .discreteArithmetic),

        // MARK: Nutrition
        .init("HKQuantityTypeIdentifierDietaryBiotin", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryCaffeine", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryCalcium", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryCarbohydrates", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryChloride", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryCholesterol", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryChromium", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryCopper", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryEnergyConsumed", unit: "kcal", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryFatMonounsaturated", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryFatPolyunsaturated", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryFatSaturated", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryFatTotal", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryFiber", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryFolate", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryIodine", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryIron", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryMagnesium", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryManganese", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryMolybdenum", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryNiacin", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryPantothenicAcid", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryPhosphorus", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryPotassium", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryProtein", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryRiboflavin", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietarySelenium", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietarySodium", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietarySugar", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryThiamin", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryVitaminA", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryVitaminB12", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryVitaminB6", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryVitaminC", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryVitaminD", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryVitaminE", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryVitaminK", unit: "g", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryWater", unit: "mL", .cumulative),
        .init("HKQuantityTypeIdentifierDietaryZinc", unit: "g", .cumulative),

        // MARK: Other
        .init("HKQuantityTypeIdentifierBloodAlcoholContent", unit: "%", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierBloodPressureDiastolic", unit: "mmHg", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierBloodPressureSystolic", unit: "mmHg", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierInsulinDelivery", unit: "IU", .cumulative),
        .init("HKQuantityTypeIdentifierNumberOfAlcoholicBeverages", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierNumberOfTimesFallen", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierTimeInDaylight", unit: "min", .cumulative),
        // note: HealthKit's header leaves the unit blank (a UV index is a plain scalar), so `count`.
        .init("HKQuantityTypeIdentifierUVExposure", unit: "count", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierWaterTemperature", unit: "degC", .discreteArithmetic),

        // MARK: Reproductive health
        .init("HKQuantityTypeIdentifierBasalBodyTemperature", unit: "degC", .discreteArithmetic),

        // MARK: Sleep
        // The sleep schedule's goal: not among HealthKit's public identifiers, but in every
        // export of a phone with a sleep schedule (iOS 17 on), one record per change of it.
        .init("HKDataTypeSleepDurationGoal", unit: "hr", .discreteArithmetic),

        // MARK: Respiratory
        .init("HKQuantityTypeIdentifierAppleSleepingBreathingDisturbances", unit: "count", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierForcedExpiratoryVolume1", unit: "L", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierForcedVitalCapacity", unit: "L", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierInhalerUsage", unit: "count", .cumulative),
        .init("HKQuantityTypeIdentifierOxygenSaturation", unit: "%", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierPeakExpiratoryFlowRate", unit: "L/min", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierRespiratoryRate", unit: "count/s", .discreteArithmetic),

        // MARK: Vital signs
        .init("HKQuantityTypeIdentifierBloodGlucose", unit: "mg/dL", .discreteArithmetic),
        .init("HKQuantityTypeIdentifierBodyTemperature", unit: "degC", .discreteArithmetic),
    ]
}
