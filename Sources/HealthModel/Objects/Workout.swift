import Foundation

/// Where a workout took place (HealthKit's `HKWorkoutSessionLocationType`, same raw values).
public enum WorkoutLocationType: Int, Sendable, Hashable, CaseIterable {
    case unknown = 1
    case indoor = 2
    case outdoor = 3
}

/// Where a swim took place (HealthKit's `HKWorkoutSwimmingLocationType`, same raw values).
public enum SwimmingLocationType: Int, Sendable, Hashable, CaseIterable {
    case unknown = 0
    case pool = 1
    case openWater = 2
}

/// What a workout or one of its activities was (HealthKit's `HKWorkoutConfiguration`).
public struct WorkoutConfiguration: Sendable, Hashable {
    public var activityType: WorkoutActivityType
    public var locationType: WorkoutLocationType
    public var swimmingLocationType: SwimmingLocationType
    /// The pool's length: pool swims only.
    public var lapLength: Quantity?

    public init(
        activityType: WorkoutActivityType, locationType: WorkoutLocationType = .unknown,
        swimmingLocationType: SwimmingLocationType = .unknown, lapLength: Quantity? = nil
    ) {
        self.activityType = activityType
        self.locationType = locationType
        self.swimmingLocationType = swimmingLocationType
        self.lapLength = lapLength
    }
}

/// The kind of a workout event (HealthKit's `HKWorkoutEventType`, same raw values).
public enum WorkoutEventType: Int, Sendable, Hashable, CaseIterable {
    case pause = 1
    case resume = 2
    case lap = 3
    case marker = 4
    case motionPaused = 5
    case motionResumed = 6
    case segment = 7
    case pauseOrResumeRequest = 8

    /// Laps and segments span time; every other event is an instant.
    public var hasDuration: Bool { self == .lap || self == .segment }
}

/// Something that happened during a workout (HealthKit's `HKWorkoutEvent`).
public struct WorkoutEvent: Sendable, Hashable {
    public var type: WorkoutEventType
    public var startDate: Date
    /// Equal to ``startDate`` except for laps and segments.
    public var endDate: Date
    /// e.g. `HKMetadataKeySwimmingStrokeStyle` on a lap.
    public var metadata: Metadata

    public init(type: WorkoutEventType, start: Date, end: Date? = nil, metadata: Metadata = [:]) {
        self.type = type
        self.startDate = start
        self.endDate = end ?? start
        self.metadata = metadata
    }
}

/// One part of a workout, such as a leg of a triathlon or one interval (HealthKit's
/// `HKWorkoutActivity`).
public struct WorkoutActivity: Sendable, Hashable {
    public var uuid: UUID
    public var configuration: WorkoutConfiguration
    public var startDate: Date
    public var endDate: Date
    public var events: [WorkoutEvent]
    public var metadata: Metadata

    public init(
        configuration: WorkoutConfiguration, start: Date, end: Date, events: [WorkoutEvent] = [], metadata: Metadata = [:],
        uuid: UUID = .timeOrdered()
    ) {
        self.uuid = uuid
        self.configuration = configuration
        self.startDate = start
        self.endDate = end
        self.events = events
        self.metadata = metadata
    }

    /// The activity's time less its paused spans.
    public var duration: TimeInterval { WorkoutEvent.activeDuration(start: startDate, end: endDate, events: events) }
}

/// A workout (HealthKit's `HKWorkout`): its configuration, events and activities. Samples
/// recorded during it are associated with it afterwards, and its statistics come from them.
///
/// ```swift
/// let run = Workout(
///     configuration: WorkoutConfiguration(activityType: .running, locationType: .outdoor),
///     start: start, end: start.addingTimeInterval(1800),
///     events: [WorkoutEvent(type: .pause, start: start.addingTimeInterval(600)),
///              WorkoutEvent(type: .resume, start: start.addingTimeInterval(660))])
/// run.duration   // 1740 s
/// ```
public struct Workout: HealthSample {
    public var uuid: UUID
    public var configuration: WorkoutConfiguration
    public var startDate: Date
    public var endDate: Date
    public var events: [WorkoutEvent]
    public var activities: [WorkoutActivity]
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    public init(
        configuration: WorkoutConfiguration, start: Date, end: Date, events: [WorkoutEvent] = [], activities: [WorkoutActivity] = [],
        device: Device? = nil, metadata: Metadata = [:], uuid: UUID = .timeOrdered(),
        sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.configuration = configuration
        self.startDate = start
        self.endDate = end
        self.events = events
        self.activities = activities
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .workout }
    public var activityType: WorkoutActivityType { configuration.activityType }

    /// End minus start, less the paused spans (pause to resume; a pause never resumed runs
    /// to the end).
    public var duration: TimeInterval { WorkoutEvent.activeDuration(start: startDate, end: endDate, events: events) }
}

extension WorkoutEvent {
    /// The time from `start` to `end` less the spans between each pause and its resume.
    static func activeDuration(start: Date, end: Date, events: [WorkoutEvent]) -> TimeInterval {
        var paused: TimeInterval = 0
        var pausedAt: Date?
        for event in events.sorted(by: { $0.startDate < $1.startDate }) {
            switch event.type {
            case .pause where pausedAt == nil: pausedAt = event.startDate
            case .resume:
                if let since = pausedAt { paused += event.startDate.timeIntervalSince(since) }
                pausedAt = nil
            default: break
            }
        }
        if let since = pausedAt { paused += end.timeIntervalSince(since) }
        return max(0, end.timeIntervalSince(start) - paused)
    }
}

/// One point of a route (HealthKit stores `CLLocation`s): degrees, metres, metres per second.
/// Negative accuracies, course or speed mean "not known", as in Core Location.
public struct RouteLocation: Sendable, Hashable {
    public var timestamp: Date
    public var latitude: Double
    public var longitude: Double
    public var altitude: Double
    public var horizontalAccuracy: Double
    public var verticalAccuracy: Double
    /// Degrees from true north, 0 ..< 360.
    public var course: Double
    public var speed: Double

    public init(
        timestamp: Date, latitude: Double, longitude: Double, altitude: Double = 0, horizontalAccuracy: Double = -1,
        verticalAccuracy: Double = -1, course: Double = -1, speed: Double = -1
    ) {
        self.timestamp = timestamp
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.course = course
        self.speed = speed
    }

    /// Checks ranges: latitude ±90, longitude ±180, every value finite, the time in years 1–9999.
    /// - Throws: ``HealthError`` (`invalidArgument`) naming `field`.
    public func validate(field: String) throws {
        let values: [(String, Double)] = [
            ("latitude", latitude), ("longitude", longitude), ("altitude", altitude), ("horizontalAccuracy", horizontalAccuracy),
            ("verticalAccuracy", verticalAccuracy), ("course", course), ("speed", speed),
        ]
        for (name, value) in values where !value.isFinite {
            throw HealthError.invalidArgument("\(field).\(name) must be a finite number", field: "\(field).\(name)")
        }
        guard (-90...90).contains(latitude) else {
            throw HealthError.invalidArgument("\(field).latitude must be within ±90°, got \(latitude)", field: "\(field).latitude")
        }
        guard (-180...180).contains(longitude) else {
            throw HealthError.invalidArgument("\(field).longitude must be within ±180°, got \(longitude)", field: "\(field).longitude")
        }
        guard course < 360 else {
            throw HealthError.invalidArgument("\(field).course must be below 360°, got \(course)", field: "\(field).course")
        }
        guard ObjectLimits.dateRange.contains(timestamp) else {
            throw HealthError.invalidArgument("\(field).timestamp must fall within years 0001–9999", field: "\(field).timestamp")
        }
    }
}

/// The route of a workout (HealthKit's `HKWorkoutRoute`): the object that anchored and sample
/// queries return. Its locations are read with a route query, in batches; a route is saved
/// by finishing a route builder with its workout.
public struct WorkoutRoute: HealthSample {
    public var uuid: UUID
    /// The workout the route was finished with.
    public var workoutUUID: UUID
    public var locationCount: Int
    /// The first location's time.
    public var startDate: Date
    /// The last location's time.
    public var endDate: Date
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    public init(
        workoutUUID: UUID, locationCount: Int, start: Date, end: Date, device: Device? = nil, metadata: Metadata = [:],
        uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.workoutUUID = workoutUUID
        self.locationCount = locationCount
        self.startDate = start
        self.endDate = end
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .workoutRoute }
}
