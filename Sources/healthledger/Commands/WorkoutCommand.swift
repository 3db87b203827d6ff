import ArgumentParser
import Foundation
import HealthLedgerSDK

struct WorkoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "workout", abstract: "Save workouts, associate samples with them, show their statistics and routes.",
        discussion: """
            Find a workout's samples with: healthledger query --type HeartRate --workout <uuid>
            and its routes with:          healthledger query --type HKWorkoutRouteTypeIdentifier --workout <uuid>
            """,
        subcommands: [Save.self, Add.self, Stats.self, Route.self])

    struct Save: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "save", abstract: "Save a workout.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The activity type (running, cycling, swimming, swimBikeRun, …).") var activity: String
        @Option(help: "Start (ISO 8601).") var start: String
        @Option(help: "End (ISO 8601).") var end: String
        @Option(help: "indoor, outdoor or unknown.") var location = "unknown"
        @Option(help: "A paused span START/END (ISO 8601), repeatable.") var pause: [String] = []

        func run() async throws {
            let workout: Workout
            do {
                guard let type = WorkoutActivityType(name: activity) else { throw ValidationErrorExit("unknown activity type '\(activity)'") }
                let locations: [String: WorkoutLocationType] = ["indoor": .indoor, "outdoor": .outdoor, "unknown": .unknown]
                guard let locationType = locations[location] else { throw ValidationErrorExit("--location is indoor, outdoor or unknown") }
                guard let from = try SampleInput.date(start, "--start"), let to = try SampleInput.date(end, "--end") else {
                    throw ValidationErrorExit("--start and --end are required")
                }
                let events = try pause.flatMap { span -> [WorkoutEvent] in
                    let parts = span.split(separator: "/").map(String.init)
                    guard parts.count == 2, let paused = try SampleInput.date(parts[0], "--pause"), let resumed = try SampleInput.date(parts[1], "--pause") else {
                        throw ValidationErrorExit("--pause takes START/END, got '\(span)'")
                    }
                    return [WorkoutEvent(type: .pause, start: paused), WorkoutEvent(type: .resume, start: resumed)]
                }
                workout = Workout(configuration: WorkoutConfiguration(activityType: type, locationType: locationType), start: from, end: to, events: events)
            } catch { throw fail(error) }
            try await connection.withStore { store in
                _ = try await store.save(.workout(workout))
                if connection.json {
                    printJSON(["uuid": workout.uuid.uuidString, "duration_s": workout.duration])
                } else {
                    print(workout.uuid.uuidString)
                }
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Associate saved samples with a workout.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The workout's UUID.") var workout: String
        @Argument(help: "The samples' UUIDs.") var samples: [String]

        func run() async throws {
            let workoutUUID = try parseUUID(workout, "--workout")
            let sampleUUIDs = try samples.map { try parseUUID($0, "sample") }
            try await connection.withStore { store in try await store.add(sampleUUIDs, to: workoutUUID) }
        }
    }

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "stats", abstract: "Statistics of the samples associated with a workout, for it and each activity.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The workout's UUID.") var workout: String

        func run() async throws {
            let uuid = try parseUUID(workout, "workout")
            try await connection.withStore { store in
                let statistics = try await store.statistics(for: uuid)
                var rows = try Self.rows(statistics.workout, scope: "workout")
                for activity in statistics.activities { rows += try Self.rows(activity.statistics, scope: activity.uuid.uuidString) }
                if connection.json { return printJSON(rows) }
                print(["SCOPE", "TYPE", "VALUES", "UNIT"].joined(separator: "\t"))
                for row in rows {
                    print(["\(row["scope"]!)", "\(row["type"]!)", StatsCommand.text(row["values"]), "\(row["unit"]!)"].joined(separator: "\t"))
                }
            }
        }

        /// `stats` rows, in canonical units, with the scope (the workout or an activity) and type.
        static func rows(_ statistics: [QuantityType: Statistics], scope: String) throws -> [[String: Any]] {
            try statistics.sorted { $0.key.identifier < $1.key.identifier }.map { type, value in
                var row = try StatsCommand.row(value, unit: DisplayUnits.unit(for: type))
                row["scope"] = scope
                row["type"] = type.identifier
                return row
            }
        }
    }

    struct Route: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "route", abstract: "Print a route's locations in time order, as they stream in.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The route's UUID.") var route: String

        func run() async throws {
            let uuid = try parseUUID(route, "route")
            try await connection.withStore { store in
                if !connection.json { print(["TIME", "LATITUDE", "LONGITUDE", "ALTITUDE", "SPEED"].joined(separator: "\t")) }
                var rows: [[String: Any]] = []
                for try await batch in try await store.routeLocations(of: uuid) {
                    for location in batch.locations {
                        let time = location.timestamp.formatted(.iso8601)
                        if connection.json {
                            rows.append(["time": time, "latitude": location.latitude, "longitude": location.longitude, "altitude": location.altitude, "speed": location.speed])
                        } else {
                            print([time, "\(location.latitude)", "\(location.longitude)", "\(location.altitude)", "\(location.speed)"].joined(separator: "\t"))
                        }
                    }
                }
                if connection.json { printJSON(rows) }
            }
        }
    }
}
