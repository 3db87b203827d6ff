/// The units people read each quantity type in (HealthKit's preferred units for a metric
/// locale): heart rate in beats per minute rather than the canonical count/s, distances in
/// kilometres, speeds in km/hr, micronutrients in mg or mcg. Every other type reads in its
/// canonical unit. Values are stored as saved; this only chooses how to show them.
public enum DisplayUnits {
    static let overrides: [String: String] = {
        var table: [String: String] = [
            "HeartRate": "count/min", "RespiratoryRate": "count/min",
            "Height": "cm", "WaistCircumference": "cm",
            "DistanceWalkingRunning": "km", "DistanceCycling": "km", "DistanceWheelchair": "km", "DistanceDownhillSnowSports": "km",
            "DistanceCrossCountrySkiing": "km", "DistancePaddleSports": "km", "DistanceRowing": "km", "DistanceSkatingSports": "km",
            "WalkingSpeed": "km/hr", "RunningSpeed": "km/hr", "CyclingSpeed": "km/hr", "CrossCountrySkiingSpeed": "km/hr",
            "PaddleSportsSpeed": "km/hr", "RowingSpeed": "km/hr",
            "WalkingStepLength": "cm",
        ]
        for nutrient in [
            "Caffeine", "Calcium", "Chloride", "Cholesterol", "Copper", "Iron", "Magnesium", "Manganese", "Niacin", "PantothenicAcid",
            "Phosphorus", "Potassium", "Riboflavin", "Sodium", "Thiamin", "VitaminB6", "VitaminC", "VitaminE", "Zinc",
        ] { table["Dietary\(nutrient)"] = "mg" }
        for nutrient in ["Biotin", "Chromium", "Folate", "Iodine", "Molybdenum", "Selenium", "VitaminA", "VitaminB12", "VitaminD", "VitaminK"] {
            table["Dietary\(nutrient)"] = "mcg"
        }
        return Dictionary(uniqueKeysWithValues: table.map { ("HKQuantityTypeIdentifier\($0.key)", $0.value) })
    }()

    /// The unit to show `type`'s values in; nil for types without quantities.
    public static func unit(for type: ObjectType) -> HealthUnit? {
        guard let quantityType = try? QuantityType(type.identifier) else { return nil }
        return unit(for: quantityType)
    }

    /// The unit to show `type`'s values in.
    public static func unit(for type: QuantityType) -> HealthUnit {
        // The table's units are fixed strings checked by tests against the catalogue.
        overrides[type.identifier].flatMap { try? HealthUnit($0) } ?? type.canonicalUnit
    }
}
