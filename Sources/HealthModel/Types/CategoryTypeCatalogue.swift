extension CategoryValueSet {
    /// HKCategoryValueSleepAnalysis.
    ///
    /// `asleep` is the pre-iOS 16 name of `asleepUnspecified` and shares its raw value;
    /// ``CategoryValueSet/name(of:)`` answers `asleepUnspecified` for 1.
    public static let sleepAnalysis = CategoryValueSet("HKCategoryValueSleepAnalysis", [
        .init("inBed", 0), .init("asleepUnspecified", 1), .init("asleep", 1), .init("awake", 2),
        .init("asleepCore", 3), .init("asleepDeep", 4), .init("asleepREM", 5),
    ])

    /// HKCategoryValue (types whose only value is notApplicable = 0).
    public static let notApplicable = CategoryValueSet("HKCategoryValue", [.init("notApplicable", 0)])

    /// HKCategoryValueAppleStandHour.
    public static let appleStandHour = CategoryValueSet("HKCategoryValueAppleStandHour", [
        .init("stood", 0), .init("idle", 1),
    ])

    /// HKCategoryValueAppleWalkingSteadinessEvent.
    public static let appleWalkingSteadinessEvent = CategoryValueSet("HKCategoryValueAppleWalkingSteadinessEvent", [
        .init("initialLow", 1), .init("initialVeryLow", 2), .init("repeatLow", 3), .init("repeatVeryLow", 4),
    ])

    /// HKCategoryValueAppetiteChanges.
    public static let appetiteChanges = CategoryValueSet("HKCategoryValueAppetiteChanges", [
        .init("unspecified", 0), .init("noChange", 1), .init("decreased", 2), .init("increased", 3),
    ])

    /// HKCategoryValueAudioExposureEvent (deprecated in iOS 14 for ``environmentalAudioExposureEvent``).
    public static let audioExposureEvent = CategoryValueSet("HKCategoryValueAudioExposureEvent", [
        .init("loudEnvironment", 1),
    ])

    /// HKCategoryValueCervicalMucusQuality, ordered from least to most fertile.
    public static let cervicalMucusQuality = CategoryValueSet("HKCategoryValueCervicalMucusQuality", [
        .init("dry", 1), .init("sticky", 2), .init("creamy", 3), .init("watery", 4), .init("eggWhite", 5),
    ])

    /// HKCategoryValueContraceptive.
    public static let contraceptive = CategoryValueSet("HKCategoryValueContraceptive", [
        .init("unspecified", 1), .init("implant", 2), .init("injection", 3), .init("intrauterineDevice", 4),
        .init("intravaginalRing", 5), .init("oral", 6), .init("patch", 7),
    ])

    /// HKCategoryValueEnvironmentalAudioExposureEvent.
    public static let environmentalAudioExposureEvent = CategoryValueSet(
        "HKCategoryValueEnvironmentalAudioExposureEvent", [.init("momentaryLimit", 1)])

    /// HKCategoryValueHeadphoneAudioExposureEvent.
    public static let headphoneAudioExposureEvent = CategoryValueSet(
        "HKCategoryValueHeadphoneAudioExposureEvent", [.init("sevenDayLimit", 1)])

    /// HKCategoryValueLowCardioFitnessEvent.
    public static let lowCardioFitnessEvent = CategoryValueSet(
        "HKCategoryValueLowCardioFitnessEvent", [.init("lowFitness", 1)])

    /// HKCategoryValueMenstrualFlow (deprecated in iOS 18 for ``vaginalBleeding``, same raw values).
    ///
    /// Apple Health exports written before iOS 18 spell menstrual flow values with this prefix
    /// (`HKCategoryValueMenstrualFlowLight`); later ones use `HKCategoryValueVaginalBleeding…`.
    public static let menstrualFlow = CategoryValueSet("HKCategoryValueMenstrualFlow", [
        .init("unspecified", 1), .init("light", 2), .init("medium", 3), .init("heavy", 4), .init("none", 5),
    ])

    /// HKCategoryValueOvulationTestResult. `positive` is the pre-iOS 13 name of `luteinizingHormoneSurge`.
    public static let ovulationTestResult = CategoryValueSet("HKCategoryValueOvulationTestResult", [
        .init("negative", 1), .init("luteinizingHormoneSurge", 2), .init("positive", 2),
        .init("indeterminate", 3), .init("estrogenSurge", 4),
    ])

    /// HKCategoryValuePregnancyTestResult.
    public static let pregnancyTestResult = CategoryValueSet("HKCategoryValuePregnancyTestResult", [
        .init("negative", 1), .init("positive", 2), .init("indeterminate", 3),
    ])

    /// HKCategoryValuePresence.
    public static let presence = CategoryValueSet("HKCategoryValuePresence", [
        .init("present", 0), .init("notPresent", 1),
    ])

    /// HKCategoryValueProgesteroneTestResult.
    public static let progesteroneTestResult = CategoryValueSet("HKCategoryValueProgesteroneTestResult", [
        .init("negative", 1), .init("positive", 2), .init("indeterminate", 3),
    ])

    /// HKCategoryValueSeverity (symptoms).
    public static let severity = CategoryValueSet("HKCategoryValueSeverity", [
        .init("unspecified", 0), .init("notPresent", 1), .init("mild", 2), .init("moderate", 3), .init("severe", 4),
    ])

    /// HKCategoryValueVaginalBleeding (iOS 18): menstrual flow and bleeding during or after pregnancy.
    public static let vaginalBleeding = CategoryValueSet("HKCategoryValueVaginalBleeding", [
        .init("unspecified", 1), .init("light", 2), .init("medium", 3), .init("heavy", 4), .init("none", 5),
    ])

    /// The sleep analysis values that mean "asleep": {1, 3, 4, 5}.
    public static let allAsleepValues: Set<Int> = [1, 3, 4, 5]
}

extension CategoryTypeDescriptor {
    /// Every category type HealthKit defines, as an Apple Health export can contain it.
    ///
    /// Each type pairs with the value enumeration HealthKit documents for it (the comments in
    /// `HKTypeIdentifiers.h`, iOS 18), grouped as HealthKit groups them. The deprecated
    /// `HKCategoryTypeIdentifierAudioExposureEvent` is kept because old exports contain it.
    ///
    /// ```swift
    /// let sleep = CategoryTypeDescriptor.catalogue.first {
    ///     $0.identifier == "HKCategoryTypeIdentifierSleepAnalysis"
    /// }
    /// // sleep?.values.value(named: "asleepREM") == 5
    /// ```
    public static let catalogue: [CategoryTypeDescriptor] = [
        // MARK: Sleep
        .init("HKCategoryTypeIdentifierSleepAnalysis", .sleepAnalysis),

        // MARK: Fitness
        .init("HKCategoryTypeIdentifierAppleStandHour", .appleStandHour),

        // MARK: Mindfulness
        .init("HKCategoryTypeIdentifierMindfulSession", .notApplicable),

        // MARK: Hearing health
        .init("HKCategoryTypeIdentifierEnvironmentalAudioExposureEvent", .environmentalAudioExposureEvent),
        .init("HKCategoryTypeIdentifierHeadphoneAudioExposureEvent", .headphoneAudioExposureEvent),
        .init("HKCategoryTypeIdentifierAudioExposureEvent", .audioExposureEvent),

        // MARK: Heart
        .init("HKCategoryTypeIdentifierHighHeartRateEvent", .notApplicable),
        .init("HKCategoryTypeIdentifierIrregularHeartRhythmEvent", .notApplicable),
        .init("HKCategoryTypeIdentifierLowCardioFitnessEvent", .lowCardioFitnessEvent),
        .init("HKCategoryTypeIdentifierLowHeartRateEvent", .notApplicable),

        // MARK: Mobility
        .init("HKCategoryTypeIdentifierAppleWalkingSteadinessEvent", .appleWalkingSteadinessEvent),

        // MARK: Other
        .init("HKCategoryTypeIdentifierHandwashingEvent", .notApplicable),
        .init("HKCategoryTypeIdentifierToothbrushingEvent", .notApplicable),

        // MARK: Respiratory
        .init("HKCategoryTypeIdentifierSleepApneaEvent", .notApplicable),

        // MARK: Reproductive health
        .init("HKCategoryTypeIdentifierBleedingAfterPregnancy", .vaginalBleeding),
        .init("HKCategoryTypeIdentifierBleedingDuringPregnancy", .vaginalBleeding),
        .init("HKCategoryTypeIdentifierCervicalMucusQuality", .cervicalMucusQuality),
        .init("HKCategoryTypeIdentifierContraceptive", .contraceptive),
        .init("HKCategoryTypeIdentifierInfrequentMenstrualCycles", .notApplicable),
        .init("HKCategoryTypeIdentifierIntermenstrualBleeding", .notApplicable),
        .init("HKCategoryTypeIdentifierIrregularMenstrualCycles", .notApplicable),
        .init("HKCategoryTypeIdentifierLactation", .notApplicable),
        // note: iOS 18 pairs MenstrualFlow with HKCategoryValueVaginalBleeding; older exports use
        // HKCategoryValueMenstrualFlow names (see `CategoryValueSet.menstrualFlow`, same raw values).
        .init("HKCategoryTypeIdentifierMenstrualFlow", .vaginalBleeding),
        .init("HKCategoryTypeIdentifierOvulationTestResult", .ovulationTestResult),
        .init("HKCategoryTypeIdentifierPersistentIntermenstrualBleeding", .notApplicable),
        .init("HKCategoryTypeIdentifierPregnancy", .notApplicable),
        .init("HKCategoryTypeIdentifierPregnancyTestResult", .pregnancyTestResult),
        .init("HKCategoryTypeIdentifierProgesteroneTestResult", .progesteroneTestResult),
        .init("HKCategoryTypeIdentifierProlongedMenstrualPeriods", .notApplicable),
        .init("HKCategoryTypeIdentifierSexualActivity", .notApplicable),

        // MARK: Symptoms
        .init("HKCategoryTypeIdentifierAbdominalCramps", .severity),
        .init("HKCategoryTypeIdentifierAcne", .severity),
        .init("HKCategoryTypeIdentifierAppetiteChanges", .appetiteChanges),
        .init("HKCategoryTypeIdentifierBladderIncontinence", .severity),
        .init("HKCategoryTypeIdentifierBloating", .severity),
        .init("HKCategoryTypeIdentifierBreastPain", .severity),
        .init("HKCategoryTypeIdentifierChestTightnessOrPain", .severity),
        .init("HKCategoryTypeIdentifierChills", .severity),
        .init("HKCategoryTypeIdentifierConstipation", .severity),
        .init("HKCategoryTypeIdentifierCoughing", .severity),
        .init("HKCategoryTypeIdentifierDiarrhea", .severity),
        .init("HKCategoryTypeIdentifierDizziness", .severity),
        .init("HKCategoryTypeIdentifierDrySkin", .severity),
        .init("HKCategoryTypeIdentifierFainting", .severity),
        .init("HKCategoryTypeIdentifierFatigue", .severity),
        .init("HKCategoryTypeIdentifierFever", .severity),
        .init("HKCategoryTypeIdentifierGeneralizedBodyAche", .severity),
        .init("HKCategoryTypeIdentifierHairLoss", .severity),
        .init("HKCategoryTypeIdentifierHeadache", .severity),
        .init("HKCategoryTypeIdentifierHeartburn", .severity),
        .init("HKCategoryTypeIdentifierHotFlashes", .severity),
        .init("HKCategoryTypeIdentifierLossOfSmell", .severity),
        .init("HKCategoryTypeIdentifierLossOfTaste", .severity),
        .init("HKCategoryTypeIdentifierLowerBackPain", .severity),
        .init("HKCategoryTypeIdentifierMemoryLapse", .severity),
        .init("HKCategoryTypeIdentifierMoodChanges", .presence),
        .init("HKCategoryTypeIdentifierNausea", .severity),
        .init("HKCategoryTypeIdentifierNightSweats", .severity),
        .init("HKCategoryTypeIdentifierPelvicPain", .severity),
        .init("HKCategoryTypeIdentifierRapidPoundingOrFlutteringHeartbeat", .severity),
        .init("HKCategoryTypeIdentifierRunnyNose", .severity),
        .init("HKCategoryTypeIdentifierShortnessOfBreath", .severity),
        .init("HKCategoryTypeIdentifierSinusCongestion", .severity),
        .init("HKCategoryTypeIdentifierSkippedHeartbeat", .severity),
        .init("HKCategoryTypeIdentifierSleepChanges", .presence),
        .init("HKCategoryTypeIdentifierSoreThroat", .severity),
        .init("HKCategoryTypeIdentifierVaginalDryness", .severity),
        .init("HKCategoryTypeIdentifierVomiting", .severity),
        .init("HKCategoryTypeIdentifierWheezing", .severity),
    ]
}
