import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf
import Testing

@testable import Ledger

@Suite("Workouts, associated samples and routes in the ledger")
struct WorkoutLedgerTests {
    static let base = Fixtures.base
    static let appA = Principal.app(Fixtures.appA)
    static let appB = Principal.app(Fixtures.appB)
    static let heartRate = Fixtures.heartRate
    static let steps = Fixtures.steps

    /// A 30-minute interval workout of two running activities, paused for a minute.
    static func run(uuid: UUID = UUID(), metadata: Metadata = [:]) -> Workout {
        Workout(
            configuration: WorkoutConfiguration(activityType: .running, locationType: .outdoor), start: base, end: base.addingTimeInterval(1800),
            events: [WorkoutEvent(type: .pause, start: base.addingTimeInterval(600)), WorkoutEvent(type: .resume, start: base.addingTimeInterval(660))],
            activities: [
                WorkoutActivity(configuration: WorkoutConfiguration(activityType: .running), start: base, end: base.addingTimeInterval(900)),
                WorkoutActivity(configuration: WorkoutConfiguration(activityType: .running), start: base.addingTimeInterval(900), end: base.addingTimeInterval(1800)),
            ],
            metadata: metadata, uuid: uuid)
    }

    /// A heart-rate statistic in count/min, rounded to 1e-9.
    static func bpm(_ quantity: Quantity?) -> Double? {
        (try? quantity?.doubleValue(for: Fixtures.bpm)).map { ($0 * 1e9).rounded() / 1e9 }
    }

    static func location(_ second: Double) -> RouteLocation {
        RouteLocation(
            timestamp: base.addingTimeInterval(second), latitude: 52.5 + second / 100_000, longitude: 13.4, altitude: 34, horizontalAccuracy: 5,
            verticalAccuracy: 3, course: 90, speed: 3.2)
    }

    @Test("duration excludes paused spans; a pause never resumed runs to the end")
    func duration() {
        #expect(Self.run().duration == 1740)
        var open = Self.run()
        open.events = [WorkoutEvent(type: .pause, start: Self.base.addingTimeInterval(1500))]
        #expect(open.duration == 1500)
    }

    @Test("workouts and routes survive the schema both ways, with every field")
    func roundTrip() throws {
        var workout = Self.run(metadata: ["HKMetadataKeyIndoorWorkout": .number(0)])
        workout.configuration = WorkoutConfiguration(activityType: .swimming, locationType: .indoor, swimmingLocationType: .pool, lapLength: try Quantity(25, "m"))
        workout.activities = []
        workout.events = [
            WorkoutEvent(type: .lap, start: Self.base, end: Self.base.addingTimeInterval(40), metadata: ["HKMetadataKeySwimmingStrokeStyle": .number(2)]),
            WorkoutEvent(type: .marker, start: Self.base.addingTimeInterval(50)),
        ]
        workout.device = Device(name: "Watch", manufacturer: "Apple")
        let objects: [HealthObject] = [
            .workout(workout), .workout(Self.run()),
            .workoutRoute(WorkoutRoute(workoutUUID: workout.uuid, locationCount: 3, start: Self.base, end: Self.base.addingTimeInterval(2))),
        ]
        for object in objects {
            let bytes = object.encodedBytes()
            #expect(try Healthledger_V1_HealthObject(serializedBytes: bytes).model() == object)
            #expect(try bytes.withUnsafeBytes { try HealthObject(serialized: $0) } == object)
        }
        let locations = (0..<5).map { Self.location(Double($0)) }
        #expect(try Healthledger_V1_RouteLocations(locations).model() == locations)
        var ragged = Healthledger_V1_RouteLocations(locations)
        ragged.speed.removeLast()
        #expect(throws: HealthError.self) { try ragged.model() }
    }

    @Test("workout rules: events inside, a pause first, laps only in pools, activities ordered and of the right type")
    func validation() throws {
        func invalid(_ change: (inout Workout) -> Void) -> HealthError.Code? {
            var workout = Self.run()
            change(&workout)
            do { try HealthObject.workout(workout).validate() } catch let error as HealthError { return error.code } catch { return nil }
            return nil
        }
        try HealthObject.workout(Self.run()).validate()
        #expect(invalid { $0.events = [WorkoutEvent(type: .resume, start: Self.base.addingTimeInterval(10))] } == .invalidArgument)
        #expect(invalid { $0.events = [WorkoutEvent(type: .marker, start: Self.base.addingTimeInterval(-1))] } == .invalidArgument)
        #expect(invalid { $0.events = [WorkoutEvent(type: .marker, start: Self.base, end: Self.base.addingTimeInterval(5))] } == .invalidArgument)
        #expect(invalid { $0.events = [WorkoutEvent(type: .lap, start: Self.base, end: Self.base.addingTimeInterval(60))] } == nil)
        #expect(invalid { $0.configuration.lapLength = try! Quantity(25, "m") } == .invalidArgument)
        #expect(invalid { $0.activities.reverse() } == .invalidArgument)
        #expect(invalid { $0.activities[1].configuration.activityType = .cycling } == .workoutActivityNotAllowed)
        var pool = Self.run()
        pool.configuration = WorkoutConfiguration(activityType: .swimming, swimmingLocationType: .pool, lapLength: try Quantity(25, "m"))
        pool.activities = []
        try HealthObject.workout(pool).validate()
        var triathlon = Self.run()
        triathlon.configuration = WorkoutConfiguration(activityType: .swimBikeRun)
        triathlon.activities[0].configuration.activityType = .swimming
        triathlon.activities[1].configuration.activityType = .cycling
        try HealthObject.workout(triathlon).validate()
        triathlon.activities[1].configuration.activityType = .yoga
        #expect(throws: HealthError.self) { try HealthObject.workout(triathlon).validate() }
    }

    @Test("statistics and the associated-objects predicate, for the workout and each activity; replay rebuilds them")
    func associatedStatistics() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "workouts")
        let workout = Self.run()
        let rates = [(120.0, 100.0), (150, 800), (170, 1000)]
        let samples = rates.map { Fixtures.heartRate($0.0, at: $0.1) } + [Fixtures.steps(1000, from: 0, to: 600), Fixtures.steps(1500, from: 1000, to: 1600)]
        let unrelated = Fixtures.heartRate(60, at: 200)
        _ = try await ledger.save([.workout(workout)] + samples + [unrelated], by: .owner)
        try await ledger.associate(samples.map(\.uuid), with: workout.uuid, by: .owner)
        try await ledger.associate([samples[0].uuid], with: workout.uuid, by: .owner)  // again: no change

        let statistics = try #require(try ledger.workoutStatistics(for: workout.uuid, as: .owner))
        let heart = try #require(statistics.statistics(for: Self.heartRate))
        // Time-weighted, as heart rate is: 120 holds 700 s, 150 holds 200 s, 170 the last 800 s.
        #expect(Self.bpm(heart.values.average) == ((120.0 * 700 + 150 * 200 + 170 * 800) / 1700 * 1e9).rounded() / 1e9)
        #expect(Self.bpm(heart.values.minimum) == 120 && Self.bpm(heart.values.maximum) == 170)
        #expect(statistics.statistics(for: Self.steps)?.values.sum?.value == 2500)
        let second = try #require(workout.activities.last?.uuid)
        #expect(Self.bpm(statistics.statistics(for: Self.heartRate, activity: second)?.values.average) == 170)
        #expect(statistics.statistics(for: Self.steps, activity: second)?.values.sum?.value == 1500)

        let associated = try ledger.samples(SampleQuery(type: Self.heartRate.objectType, predicate: .associatedWithWorkout(workout.uuid)), as: .owner)
        #expect(associated.map(\.uuid) == samples.prefix(3).map(\.uuid))
        let late = try ledger.samples(
            SampleQuery(type: Self.heartRate.objectType, interval: DateInterval(start: Self.base.addingTimeInterval(500), duration: 1000),
                        predicate: .associatedWithWorkout(workout.uuid), sort: .startDate(ascending: false)), as: .owner)
        #expect(late.map(\.uuid) == [samples[2].uuid, samples[1].uuid])

        let hard = WorkoutPredicate.activity(.statistic(Self.heartRate, .average, .greater, try Quantity(150, "count/min")))
        #expect(try ledger.samples(SampleQuery(type: .workout, predicate: .workout(hard)), as: .owner).map(\.uuid) == [workout.uuid])
        let easy = WorkoutPredicate.all([.activityType(.running), .not(hard)])
        #expect(try ledger.samples(SampleQuery(type: .workout, predicate: .workout(easy)), as: .owner).isEmpty)
        #expect(try ledger.samples(SampleQuery(type: .workout, predicate: .workout(.duration(.greaterOrEqual, 1740))), as: .owner).count == 1)
        #expect(throws: HealthError.self) {
            try ledger.samples(SampleQuery(type: .workout, predicate: .workout(.statistic(Self.heartRate, .sum, .greater, Quantity(1, .count)))), as: .owner)
        }

        // A deleted sample leaves the workout; one replaced by sync version hands its place on.
        try await ledger.delete([samples[0].uuid], by: .owner)
        #expect(Self.bpm(try ledger.workoutStatistics(for: workout.uuid, as: .owner)?.statistics(for: Self.heartRate)?.values.minimum) == 150)
        let weight = Fixtures.weight(70, syncIdentifier: "w", version: 1)
        _ = try await ledger.save([weight], by: .owner)
        try await ledger.associate([weight.uuid], with: workout.uuid, by: .owner)
        let newer = Fixtures.weight(71, syncIdentifier: "w", version: 2)
        _ = try await ledger.save([newer], by: .owner)
        let weights = try ledger.samples(SampleQuery(type: Fixtures.bodyMass.objectType, predicate: .associatedWithWorkout(workout.uuid)), as: .owner)
        #expect(weights.map(\.uuid) == [newer.uuid])
        #expect(try ledger.replay().identical)
    }

    @Test("routes: built in batches in any order, stored sorted in chunks, read back, deleted with their workout")
    func routes() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "routes")
        let workout = Self.run()
        let heart = Fixtures.heartRate(130, at: 100)
        _ = try await ledger.save([.workout(workout), heart], by: .owner)
        try await ledger.associate([heart.uuid], with: workout.uuid, by: .owner)

        let builder = try ledger.beginRoute(by: .owner)
        await #expect(throws: HealthError.self) { _ = try await ledger.finishRoute(builder, workout: workout.uuid, by: .owner) }
        let seconds = (0..<10_000).map(Double.init).shuffled()
        for batch in stride(from: 0, to: seconds.count, by: 3000) {
            try ledger.addRouteLocations(seconds[batch..<min(batch + 3000, seconds.count)].map(Self.location), to: builder, by: .owner)
        }
        #expect(throws: HealthError.self) { try ledger.addRouteLocations([RouteLocation(timestamp: Self.base, latitude: 91, longitude: 0)], to: builder, by: .owner) }
        #expect(throws: HealthError.self) { try ledger.addRouteLocations([Self.location(1)], to: builder, by: Self.appA) }
        let unpaired: Metadata = [MetadataKey.syncIdentifier: .string("r")]
        await #expect(throws: HealthError.self) { _ = try await ledger.finishRoute(builder, workout: workout.uuid, metadata: unpaired, by: .owner) }
        let route = try await ledger.finishRoute(builder, workout: workout.uuid, by: .owner).route
        #expect(route.locationCount == 10_000 && route.startDate == Self.base && route.endDate == Self.base.addingTimeInterval(9999))
        #expect(throws: HealthError.self) { try ledger.addRouteLocations([Self.location(1)], to: builder, by: .owner) }

        let chunks = try ledger.routeChunks(of: route.uuid, as: .owner)
        #expect(chunks.count == 3)
        let locations = try ledger.routeLocations(of: route.uuid, as: .owner)
        #expect(locations == (0..<10_000).map { Self.location(Double($0)) })
        let routes = try ledger.samples(SampleQuery(type: .workoutRoute, predicate: .associatedWithWorkout(workout.uuid)), as: .owner)
        #expect(routes.compactMap(\.workoutRoute) == [route])
        #expect(try ledger.replay().identical)

        try await ledger.delete([workout.uuid], by: .owner)
        #expect(try ledger.object(with: route.uuid, as: .owner) == nil)
        #expect(try ledger.tombstone(for: route.uuid)?.reason == .workoutDeleted)
        #expect(try ledger.object(with: heart.uuid, as: .owner) != nil)
        #expect(throws: HealthError.self) { try ledger.routeChunks(of: route.uuid, as: .owner) }
        #expect(try ledger.replay().identical)
    }

    @Test("route builders are for callers that may share routes, capped per caller and per ledger, and belong to whoever opened them")
    func builderLimits() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "builders")
        func refused(_ code: HealthError.Code, _ message: String) -> (any Error) -> Bool {
            { error in (error as? HealthError)?.code == code && (error as? HealthError)?.message == message }
        }
        func app(_ index: Int) -> Source { Source(bundleIdentifier: "com.example.app\(index)", name: "App \(index)") }
        // An app that may not share routes opens no builder (its locations would take the
        // ledger's memory before any commit checked it).
        #expect { try ledger.beginRoute(by: .app(app(9))) } throws: {
            refused(.authorizationNotDetermined, "com.example.app9 has no decision to share HKWorkoutRouteTypeIdentifier: request authorization first")($0)
        }
        try await ledger.authorize([Fixtures.appA, Fixtures.appB, app(2), app(3)], share: [.workoutRoute])
        let opened = try (0..<RouteBuilders.maximumOpenPerPrincipal).map { _ in try ledger.beginRoute(by: Self.appA) }
        #expect(RouteBuilders.maximumOpenPerPrincipal == 8)
        #expect { try ledger.beginRoute(by: Self.appA) } throws: {
            refused(.dataSizeExceeded, "at most 8 route builders may be open at once: finish or discard one")($0)
        }
        let other = try ledger.beginRoute(by: Self.appB)
        #expect { try ledger.discardRoute(other, by: Self.appA) } throws: { ($0 as? HealthError)?.code == .noData }
        try ledger.discardRoute(opened[0], by: Self.appA)
        let again = try ledger.beginRoute(by: Self.appA)
        // A route holds at most 200,000 locations.
        #expect(ObjectLimits.maximumRouteLocations == 200_000)
        let batch = (0..<ObjectLimits.maximumRouteLocations).map { Self.location(Double($0)) }
        try ledger.addRouteLocations(batch, to: opened[1], by: Self.appA)
        #expect { try ledger.addRouteLocations([Self.location(0)], to: opened[1], by: Self.appA) } throws: {
            refused(.dataSizeExceeded, "a route holds at most 200000 locations")($0)
        }
        // One caller's builders together hold at most a quarter of the ledger's million.
        let quarter = Array(batch.prefix(50_000))
        try ledger.addRouteLocations(quarter, to: opened[2], by: Self.appA)
        #expect { try ledger.addRouteLocations([Self.location(0)], to: again, by: Self.appA) } throws: {
            refused(.dataSizeExceeded, "this caller's route builders hold 250000 locations, the most one caller may hold at once (250000): finish or discard some")($0)
        }
        // The ledger's builders together hold at most a million locations.
        try ledger.addRouteLocations(batch, to: other, by: Self.appB)
        try ledger.addRouteLocations(quarter, to: try ledger.beginRoute(by: Self.appB), by: Self.appB)
        for index in 2...3 {
            let builder = try ledger.beginRoute(by: .app(app(index)))
            try ledger.addRouteLocations(batch, to: builder, by: .app(app(index)))
            if index == 2 { try ledger.addRouteLocations(quarter, to: try ledger.beginRoute(by: .app(app(index))), by: .app(app(index))) }
        }
        let holdingAll = "the ledger's route builders hold 950000 locations, the most allowed at once: finish or discard some"
        #expect { try ledger.addRouteLocations(quarter + [Self.location(0)], to: try ledger.beginRoute(by: .owner), by: .owner) } throws: {
            refused(.dataSizeExceeded, holdingAll)($0)
        }
        try ledger.discardRoute(opened[1], by: Self.appA)
        #expect(try ledger.addRouteLocations(batch, to: again, by: Self.appA) == ObjectLimits.maximumRouteLocations)

        // The ledger's builders together: at most 64, whoever opened them.
        let full = try temporary.ledgerStore.createLedger(id: "full")
        let apps = (0..<9).map { app($0) }
        try await full.authorize(apps, share: [.workoutRoute])
        for app in apps.prefix(8) {
            for _ in 0..<RouteBuilders.maximumOpenPerPrincipal { _ = try full.beginRoute(by: .app(app)) }
        }
        #expect(RouteBuilders.maximumOpenPerPrincipal * 8 == RouteBuilders.maximumOpen)
        #expect { try full.beginRoute(by: .app(apps[8])) } throws: { ($0 as? HealthError)?.code == .dataSizeExceeded }
        #expect { try full.beginRoute(by: .owner) } throws: { ($0 as? HealthError)?.code == .dataSizeExceeded }
    }

    @Test("workout statistics are statistics queries over the workout's span; a sample crossing an activity boundary is split")
    func statisticsAgree() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "workouts")
        let workout = Self.run()
        let samples = [
            Fixtures.heartRate(120, at: 100), Fixtures.heartRate(150, at: 800), Fixtures.heartRate(170, at: 1000),
            Fixtures.steps(600, from: 600, to: 1200), Fixtures.steps(100, from: 1700, to: 1900),
        ]
        try await ledger.save([.workout(workout)] + samples, by: .owner)
        try await ledger.associate(samples.map(\.uuid), with: workout.uuid, by: .owner)
        let statistics = try #require(try ledger.workoutStatistics(for: workout.uuid, as: .owner))
        let span = DateInterval(start: workout.startDate, end: workout.endDate)
        let associated = ObjectPredicate.associatedWithWorkout(workout.uuid)
        for (type, options) in [(Self.heartRate, StatisticsOptions([.discreteAverage, .discreteMin, .discreteMax])), (Self.steps, .cumulativeSum)] {
            let query = try #require(try ledger.statistics(StatisticsQuery(type: type, interval: span, options: options, predicate: associated), as: .owner))
            #expect(statistics.statistics(for: type)?.values == query.values, "\(type)")
        }
        // 600 steps over [600 s, 1200 s] cross the activities' boundary at 900 s: half each;
        // the last sample runs 100 s past the workout's end: half of it counts.
        let (first, second) = (workout.activities[0].uuid, workout.activities[1].uuid)
        #expect(statistics.statistics(for: Self.steps, activity: first)?.values.sum?.value == 300)
        #expect(statistics.statistics(for: Self.steps, activity: second)?.values.sum?.value == 350)
        #expect(statistics.statistics(for: Self.steps)?.values.sum?.value == 650)
    }

    @Test("privacy: statistics, predicates, associated objects and routes count only what the reader may read")
    func privacy() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "private")
        // A may share and read workouts; it shares heart rate but may not read others' heart rate.
        try await ledger.authorize([Fixtures.appA], share: [.workout, Self.heartRate.objectType, .workoutRoute], read: [.workout])
        try await ledger.authorize([Fixtures.appB], share: [Self.heartRate.objectType])
        let workout = Self.run()
        let hidden = Fixtures.heartRate(180, at: 100)
        _ = try await ledger.save([.workout(workout), hidden], by: .owner)
        try await ledger.associate([hidden.uuid], with: workout.uuid, by: .owner)
        let builder = try ledger.beginRoute(by: .owner)
        try ledger.addRouteLocations([Self.location(0), Self.location(1)], to: builder, by: .owner)
        let route = try await ledger.finishRoute(builder, workout: workout.uuid, by: .owner).route

        // A reads the workout but none of the heart rate: no statistics, no match, no members.
        let seen = try #require(try ledger.workoutStatistics(for: workout.uuid, as: Self.appA))
        #expect(seen.workout.isEmpty && seen.activities.allSatisfy(\.statistics.isEmpty))
        let fast = WorkoutPredicate.statistic(Self.heartRate, .maximum, .greater, try Quantity(100, "count/min"))
        #expect(try ledger.samples(SampleQuery(type: .workout, predicate: .workout(fast)), as: Self.appA).isEmpty)
        #expect(try ledger.samples(SampleQuery(type: .workout, predicate: .workout(.not(fast))), as: Self.appA).count == 1)
        #expect(try ledger.samples(SampleQuery(type: Self.heartRate.objectType, predicate: .associatedWithWorkout(workout.uuid)), as: Self.appA).isEmpty)
        // Routes need their own read authorization.
        #expect(try ledger.samples(SampleQuery(type: .workoutRoute, predicate: .associatedWithWorkout(workout.uuid)), as: Self.appA).isEmpty)
        #expect(throws: HealthError.self) { try ledger.routeChunks(of: route.uuid, as: Self.appA) }
        // Associating a hidden sample is answered as for an unknown one.
        let ownWorkout = Self.run()
        _ = try await ledger.save([.workout(ownWorkout)], by: Self.appA)
        await #expect { try await ledger.associate([hidden.uuid], with: ownWorkout.uuid, by: Self.appA) } throws: { error in
            (error as? HealthError)?.code == .noData
        }
        // A's own sample counts in the owner's workout; B, without workout read, sees nothing.
        let own = Fixtures.heartRate(90, at: 300)
        _ = try await ledger.save([own], by: Self.appA)
        try await ledger.associate([own.uuid], with: workout.uuid, by: .owner)
        #expect(Self.bpm(try ledger.workoutStatistics(for: workout.uuid, as: Self.appA)?.statistics(for: Self.heartRate)?.values.maximum) == 90)
        #expect(Self.bpm(try ledger.workoutStatistics(for: workout.uuid, as: .owner)?.statistics(for: Self.heartRate)?.values.maximum) == 180)
        #expect(try ledger.workoutStatistics(for: workout.uuid, as: Self.appB) == nil)
        #expect(try ledger.samples(SampleQuery(type: Self.heartRate.objectType, predicate: .associatedWithWorkout(workout.uuid)), as: Self.appB).isEmpty)
        // A may not attach a route to a workout it did not save.
        let other = try ledger.beginRoute(by: Self.appA)
        try ledger.addRouteLocations([Self.location(5)], to: other, by: Self.appA)
        await #expect { _ = try await ledger.finishRoute(other, workout: workout.uuid, by: Self.appA) } throws: { error in
            (error as? HealthError)?.code == .authorizationDenied
        }
        #expect(try await ledger.finishRoute(other, workout: ownWorkout.uuid, by: Self.appA).route.locationCount == 1)
    }
}
