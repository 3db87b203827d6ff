/// The kind of exercise a workout records (HealthKit's `HKWorkoutActivityType`), with HealthKit's raw values.
///
/// Apple Health exports spell a type `HKWorkoutActivityType` followed by the capitalized case name:
///
/// ```swift
/// WorkoutActivityType(name: "HKWorkoutActivityTypeRunning")   // .running
/// WorkoutActivityType(name: "running")                        // .running
/// WorkoutActivityType.swimBikeRun.rawValue                    // 82
/// ```
///
/// The values HealthKit marks unavailable on every platform (`rest` 2998, `group` 2999) are left out.
public enum WorkoutActivityType: Int, Sendable, Hashable, CaseIterable {
    case americanFootball = 1
    case archery = 2
    case australianFootball = 3
    case badminton = 4
    case baseball = 5
    case basketball = 6
    case bowling = 7
    /// See also kickboxing.
    case boxing = 8
    case climbing = 9
    case cricket = 10
    case crossTraining = 11
    case curling = 12
    case cycling = 13
    /// Deprecated in iOS 14 (use socialDance or cardioDance); kept to read older data.
    case dance = 14
    /// Deprecated in iOS 10 (use socialDance, cardioDance, barre or pilates); kept to read older data.
    case danceInspiredTraining = 15
    case elliptical = 16
    /// Polo, horse racing, horse riding.
    case equestrianSports = 17
    case fencing = 18
    case fishing = 19
    /// Primarily free weights, body weight and/or accessories.
    case functionalStrengthTraining = 20
    case golf = 21
    case gymnastics = 22
    case handball = 23
    case hiking = 24
    /// Ice hockey, field hockey.
    case hockey = 25
    case hunting = 26
    case lacrosse = 27
    case martialArts = 28
    /// Qigong, meditation.
    case mindAndBody = 29
    /// Deprecated in iOS 11 (use mixedCardio or highIntensityIntervalTraining); kept to read older data.
    case mixedMetabolicCardioTraining = 30
    /// Canoeing, kayaking, outrigger, stand-up paddle boarding.
    case paddleSports = 31
    /// Dodgeball, hopscotch, tetherball, jungle gym.
    case play = 32
    /// Foam rolling, self massage, flexibility moves.
    case preparationAndRecovery = 33
    case racquetball = 34
    case rowing = 35
    case rugby = 36
    case running = 37
    case sailing = 38
    /// Ice, speed and inline skating, skateboarding.
    case skatingSports = 39
    /// Sledding, snowmobiling; see also crossCountrySkiing, snowboarding, downhillSkiing.
    case snowSports = 40
    case soccer = 41
    case softball = 42
    case squash = 43
    case stairClimbing = 44
    /// Surfing, kite surfing, wind surfing.
    case surfingSports = 45
    case swimming = 46
    case tableTennis = 47
    case tennis = 48
    /// Shot put, javelin, pole vaulting.
    case trackAndField = 49
    /// Primarily machines and/or free weights.
    case traditionalStrengthTraining = 50
    case volleyball = 51
    case walking = 52
    case waterFitness = 53
    case waterPolo = 54
    /// Water skiing, wake boarding.
    case waterSports = 55
    case wrestling = 56
    case yoga = 57
    case barre = 58
    case coreTraining = 59
    case crossCountrySkiing = 60
    case downhillSkiing = 61
    case flexibility = 62
    case highIntensityIntervalTraining = 63
    case jumpRope = 64
    case kickboxing = 65
    case pilates = 66
    case snowboarding = 67
    case stairs = 68
    case stepTraining = 69
    case wheelchairWalkPace = 70
    case wheelchairRunPace = 71
    case taiChi = 72
    case mixedCardio = 73
    case handCycling = 74
    case discSports = 75
    case fitnessGaming = 76
    case cardioDance = 77
    /// Swing, salsa, folk dances.
    case socialDance = 78
    case pickleball = 79
    /// Low-intensity stretching and mobility after a more vigorous workout.
    case cooldown = 80
    /// A multisport workout (triathlon); its activities are swimming, cycling, running or transition.
    case swimBikeRun = 82
    /// The change-over between legs of a swimBikeRun workout.
    case transition = 83
    case underwaterDiving = 84
    case other = 3000

    /// The prefix Apple Health exports put before the capitalized case name.
    public static let exportPrefix = "HKWorkoutActivityType"

    /// The case name, e.g. `running`.
    public var name: String { Self.names[self]! }

    /// The Apple Health export spelling, e.g. `HKWorkoutActivityTypeRunning`.
    public var exportName: String {
        let name = self.name
        return Self.exportPrefix + name.prefix(1).uppercased() + name.dropFirst()
    }

    /// Looks a type up by its case name (`running`) or its export spelling (`HKWorkoutActivityTypeRunning`).
    ///
    /// - Returns: `nil` when the name is neither.
    public init?(name: String) {
        if let type = Self.byName[name] ?? Self.byExportName[name] {
            self = type
        } else {
            return nil
        }
    }

    private static let names: [WorkoutActivityType: String] = Dictionary(
        uniqueKeysWithValues: allCases.map { ($0, String(describing: $0)) })
    private static let byName: [String: WorkoutActivityType] = Dictionary(
        uniqueKeysWithValues: allCases.map { ($0.name, $0) })
    private static let byExportName: [String: WorkoutActivityType] = Dictionary(
        uniqueKeysWithValues: allCases.map { ($0.exportName, $0) })
}
