import Foundation
import HealthLedgerSDK
import Ledger
import Testing

/// Workouts over the wire: associated samples, workout statistics and predicates, routes,
/// and what an app sees of them per read authorization (the workout paths of the leak matrix).
@Suite("Workouts and routes over RPC", .timeLimit(.minutes(3)))
struct WorkoutRPCTests {
    typealias ReadState = LeakMatrixTests.ReadState
    static let heartRate = Samples.heartRate
    static let bpm = try! HealthUnit("count/min")

    static func run(start: Date = Samples.base) -> Workout {
        Workout(
            configuration: WorkoutConfiguration(activityType: .running, locationType: .outdoor), start: start, end: start.addingTimeInterval(3600),
            activities: [
                WorkoutActivity(configuration: WorkoutConfiguration(activityType: .running), start: start, end: start.addingTimeInterval(1800)),
                WorkoutActivity(configuration: WorkoutConfiguration(activityType: .running), start: start.addingTimeInterval(1800), end: start.addingTimeInterval(3600)),
            ])
    }

    static func location(_ second: Int) -> RouteLocation {
        RouteLocation(
            timestamp: Samples.base.addingTimeInterval(Double(second)), latitude: 48.1 + Double(second) * 1e-5, longitude: 11.5, altitude: 520,
            horizontalAccuracy: 4, verticalAccuracy: 2, course: 180, speed: 2.9)
    }

    /// Lets the test app share workouts and routes and read workouts; puts its read of heart
    /// rate and routes in `state`.
    static func authorize(_ ledger: Ledger, app: Source, state: ReadState) async throws {
        try await ledger.requestAuthorization(toShare: [.workout, .workoutRoute], read: [.workout], by: .app(app))
        for type in [ObjectType.workout, .workoutRoute] {
            try await ledger.decideAuthorization(app: app.bundleIdentifier, type: type, direction: .share, decision: .granted, by: .owner)
        }
        try await ledger.decideAuthorization(app: app.bundleIdentifier, type: .workout, direction: .read, decision: .granted, by: .owner)
        guard state != .notDetermined else { return }
        try await ledger.requestAuthorization(toShare: [], read: [Types.heartRate, .workoutRoute], by: .app(app))
        for type in [Types.heartRate, ObjectType.workoutRoute] {
            for decision in state.decisions {
                try await ledger.decideAuthorization(app: app.bundleIdentifier, type: type, direction: .read, decision: decision, by: .owner)
            }
        }
    }

    @Test("workout statistics, associated samples, workout predicates and routes, per read authorization", arguments: ReadState.allCases)
    func leakMatrix(_ state: ReadState) async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let (_, runCredential) = try await server.addApp("com.example.run", name: "Run")
            let runner = server.client(runCredential)
            // An app that may read nothing, not even workouts.
            let (_, peekCredential) = try await server.addApp("com.example.peek", name: "Peek", share: [])
            let peek = server.client(peekCredential)
            try await Self.authorize(server.ledger, app: TestServer.appSource, state: state)

            // The owner's workout; heart rate of three sources during it (others' higher), some deleted.
            let workout = Self.run()
            try await owner.save(.workout(workout))
            let ownerRates = [150.0, 160, 170, 175].enumerated().map { Samples.heartRate($1, at: Double($0) * 600 + 60) }
            let runRates = [165.0].map { Samples.heartRate($0, at: 2000) }
            let ownRates = [110.0, 120, 130].enumerated().map { Samples.heartRate($1, at: Double($0) * 900 + 120) }
            try await owner.save(ownerRates)
            try await runner.save(runRates)
            try await app.save(ownRates)
            let members = ownerRates + runRates + ownRates
            try await owner.add(members, to: workout)
            #expect(try await owner.delete([ownerRates[3]]) == 1)
            #expect(try await app.delete([ownRates[2]]) == 1)
            let present = members.filter { $0.uuid != ownerRates[3].uuid && $0.uuid != ownRates[2].uuid }
            let ownPresent = [ownRates[0], ownRates[1]]
            let visible = state.readsOthers ? present : ownPresent
            let values = visible.compactMap { try? $0.quantitySample?.quantity.doubleValue(for: Self.bpm) }

            // Workout statistics: from the visible samples only, for the workout and each activity.
            let statistics = try await app.statistics(for: workout.uuid)
            let heart = try #require(statistics.statistics(for: Self.heartRate))
            #expect(try heart.maximumQuantity()!.doubleValue(for: Self.bpm).rounded() == values.max(), "\(state): workout maximum")
            #expect(try heart.minimumQuantity()!.doubleValue(for: Self.bpm).rounded() == values.min(), "\(state): workout minimum")
            for activity in workout.activities {
                let inside = visible.filter { activity.startDate <= $0.startDate && $0.startDate < activity.endDate }
                let maximum = try statistics.statistics(for: Self.heartRate, activity: activity.uuid)?.maximumQuantity()?.doubleValue(for: Self.bpm).rounded()
                #expect(maximum == inside.compactMap { try? $0.quantitySample?.quantity.doubleValue(for: Self.bpm) }.max(), "\(state): activity maximum")
            }
            #expect(try await owner.statistics(for: workout.uuid).statistics(for: Self.heartRate)?.maximumQuantity()?.doubleValue(for: Self.bpm).rounded() == 170)

            // Samples associated with the workout: the visible ones, in order, with limits.
            let associated = SampleQueryDescriptor(type: Types.heartRate, predicate: .associatedWithWorkout(workout.uuid))
            let expected = visible.sorted { $0.startDate < $1.startDate }.map(\.uuid)
            #expect(try await app.result(for: associated).map(\.uuid) == expected, "\(state): associated samples")
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, predicate: .associatedWithWorkout(workout.uuid), limit: 1)).map(\.uuid)
                == Array(expected.prefix(1)))
            #expect(try await peek.result(for: associated).isEmpty, "peek may not read the workout")

            // Predicates over associated samples: a maximum above the app's own matches only
            // when it may read the others'.
            let hot = WorkoutPredicate.statistic(Self.heartRate, .maximum, .greater, try Quantity(140, "count/min"))
            let workouts = { (predicate: WorkoutPredicate) in
                try await app.result(for: SampleQueryDescriptor(type: .workout, predicate: .workout(predicate))).map(\.uuid)
            }
            #expect(try await workouts(hot) == (state.readsOthers ? [workout.uuid] : []), "\(state): statistic predicate")
            #expect(try await workouts(.not(hot)) == (state.readsOthers ? [] : [workout.uuid]), "\(state): negated")
            #expect(try await workouts(.activity(hot)) == (state.readsOthers ? [workout.uuid] : []), "\(state): activity predicate")
            #expect(try await workouts(.all([.activityType(.running), .duration(.equal, 3600)])) == [workout.uuid])
            #expect(try await peek.result(for: SampleQueryDescriptor(type: .workout, predicate: .workout(.activityType(.running)))).isEmpty)
            await expectRPCError(.invalidArgument, .invalidArgument, "sum of heart rate") {
                _ = try await workouts(.statistic(Self.heartRate, .sum, .greater, Quantity(1, .count)))
            }

            // Routes need their own read authorization; a hidden route is answered as an unknown one.
            let builder = try await owner.makeRouteBuilder()
            try await builder.insertRouteData((0..<5000).reversed().map(Self.location))
            let route = try await owner.finishRoute(builder, workout.uuid)
            let routes = try await app.result(for: SampleQueryDescriptor(type: .workoutRoute, predicate: .associatedWithWorkout(workout.uuid))).map(\.uuid)
            #expect(routes == (state.readsOthers ? [route.uuid] : []), "\(state): routes of the workout")
            let unknown = UUID()
            let unknownError = await expectRPCError(.notFound, .noData, "unknown route") { _ = try await app.routeLocations(of: unknown).all() }
            if state.readsOthers {
                var batches: [(Int, Bool)] = []
                for try await batch in try await app.routeLocations(of: route.uuid) { batches.append((batch.locations.count, batch.done)) }
                #expect(batches.map(\.0) == [4096, 904] && batches.map(\.1) == [false, true])
            } else {
                let hidden = await expectRPCError(.notFound, .noData, "\(state): hidden route") { _ = try await app.routeLocations(of: route.uuid).all() }
                #expect(messageShape(hidden, naming: route.uuid) == messageShape(unknownError, naming: unknown))
            }
            // Workout statistics of a workout the reader may not read: as for an unknown one.
            let unknownWorkout = await expectRPCError(.notFound, .noData, "unknown workout") { _ = try await peek.statistics(for: unknown) }
            let hiddenWorkout = await expectRPCError(.notFound, .noData, "peek's workout statistics") { _ = try await peek.statistics(for: workout.uuid) }
            #expect(messageShape(hiddenWorkout, naming: workout.uuid) == messageShape(unknownWorkout, naming: unknown))

            // Associating: only with the app's own workout, and only samples it may read.
            let own = Self.run(start: Samples.base.addingTimeInterval(7200))
            try await app.save(.workout(own))
            let unknownSample = await expectRPCError(.notFound, .noData, "unknown sample") { try await app.add([unknown], to: own.uuid) }
            if state.readsOthers {
                try await app.add([ownerRates[0].uuid], to: own.uuid)
            } else {
                let hidden = await expectRPCError(.notFound, .noData, "\(state): another source's sample") { try await app.add([ownerRates[0].uuid], to: own.uuid) }
                #expect(messageShape(hidden, naming: ownerRates[0].uuid) == messageShape(unknownSample, naming: unknown))
            }
            await expectRPCError(.permissionDenied, .authorizationDenied, "the owner's workout") { try await app.add([ownRates[0].uuid], to: workout.uuid) }

            // Deleting the workout deletes its route: anchored route queries report the tombstone
            // only to an app that may read routes.
            #expect(try await owner.delete([workout.uuid]) == 1)
            #expect(try await owner.object(with: route.uuid) == nil)
            let changes = try await app.result(for: AnchoredObjectQueryDescriptor(type: .workoutRoute))
            #expect(changes.addedObjects.isEmpty)
            #expect(changes.deletedObjects.map(\.uuid) == (state.readsOthers ? [route.uuid] : []), "\(state): route tombstone")
            #expect(try await owner.object(with: ownerRates[0].uuid) != nil, "associated samples stay")

            for store in [owner, app, runner, peek] { await store.close() }
        }
    }

    @Test("revoking the route read grant ends a route stream at once; the workout stays readable")
    func routeRevocation() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await Self.authorize(server.ledger, app: TestServer.appSource, state: .granted)
            let workout = Self.run()
            try await owner.save(.workout(workout))
            // 200,000 locations: 49 chunks, more than the stream's window of 16 batches, so the
            // server is still sending when the grant goes.
            let builder = try await owner.makeRouteBuilder()
            try await builder.insertRouteData((0..<ObjectLimits.maximumRouteLocations).map(Self.location))
            let route = try await builder.finishRoute(with: workout.uuid)
            var batches = try await app.routeLocations(of: route.uuid).makeAsyncIterator()
            var received = try #require(try await batches.next()).locations.count
            try await owner.decideAuthorization(
                app: TestServer.appSource.bundleIdentifier, type: .workoutRoute, direction: .read, decision: .revoked)
            await expectRPCError(.permissionDenied, .authorizationDenied, "route stream") {
                while let batch = try await batches.next() { received += batch.locations.count }
            }
            #expect(received < route.locationCount, "the stream ended early (got \(received))")
            await expectRPCError(.notFound, .noData, "the next route query") { _ = try await app.routeLocations(of: route.uuid).all() }
            #expect(try await app.object(with: workout.uuid) != nil)
            for store in [owner, app] { await store.close() }
        }
    }

    @Test("an app builds a marathon-sized route in batches and reads it back in order; bad input changes nothing")
    func appRoute() async throws {
        try await withTestServer { server in
            let app = server.client(server.appCredential)
            try await Self.authorize(server.ledger, app: TestServer.appSource, state: .granted)
            let workout = Self.run()
            try await app.save(.workout(workout))
            let builder = try await app.makeRouteBuilder()
            // Four hours at one a second, sent shuffled in three calls.
            let seconds = Array(0..<14_400).shuffled()
            for part in 0..<3 { try await builder.insertRouteData(seconds[(part * 4800)..<((part + 1) * 4800)].map(Self.location)) }
            await expectRPCError(.invalidArgument, .invalidArgument, "latitude 95") {
                try await builder.insertRouteData([RouteLocation(timestamp: Samples.base, latitude: 95, longitude: 0)])
            }
            await expectRPCError(.notFound, .noData, "unknown workout") { _ = try await builder.finishRoute(with: UUID()) }
            // An app cannot record its route under another source: the source is always its own.
            let forged = SourceRevision(source: Source(bundleIdentifier: "com.apple.health", name: "Health"), version: "2")
            let device = Device(name: "Apple Watch")
            let route = try await builder.finishRoute(
                with: workout.uuid, metadata: ["com.example.note": .string("city loop")], sourceRevision: forged, device: device).route
            #expect(route.sourceRevision.source == TestServer.appSource && route.device == device)
            #expect(route.locationCount == 14_400 && route.endDate == Samples.base.addingTimeInterval(14_399))
            #expect(try await app.object(with: route.uuid) == .workoutRoute(route))
            #expect(try await app.routeLocations(of: route.uuid).all() == (0..<14_400).map(Self.location))
            // The builder is gone once finished; an empty one cannot finish; saves cannot forge routes.
            await expectRPCError(.notFound, .noData, "finished builder") { try await builder.insertRouteData([Self.location(1)]) }
            let empty = try await app.makeRouteBuilder()
            await expectRPCError(.invalidArgument, .invalidArgument, "empty builder") { _ = try await empty.finishRoute(with: workout.uuid) }
            try await empty.discard()
            await expectRPCError(.invalidArgument, .invalidArgument, "a route through save") { try await app.save(.workoutRoute(route)) }
            // A workout breaking the rules is refused whole.
            var broken = Self.run()
            broken.activities[1].configuration.activityType = .cycling
            await expectRPCError(.failedPrecondition, .workoutActivityNotAllowed, "cycling in a run") { try await app.save(.workout(broken)) }
            #expect(try await app.object(with: broken.uuid) == nil)
            await app.close()
        }
    }
}

extension WorkoutRPCTests {
    @Test("a route finished with a higher sync version replaces the stored one atomically; an equal one is ignored")
    func routeReplacement() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let workout = Self.run()
            try await owner.save(.workout(workout))
            func finish(_ seconds: Range<Int>, step: Int, version: Double) async throws -> FinishedRoute {
                let builder = try await owner.makeRouteBuilder()
                try await builder.insertRouteData(stride(from: seconds.lowerBound, to: seconds.upperBound, by: step).map(Self.location))
                return try await builder.finishRoute(
                    with: workout.uuid, metadata: [MetadataKey.syncIdentifier: .string("route-1"), MetadataKey.syncVersion: .number(version)])
            }
            let raw = try await finish(0..<600, step: 1, version: 1)
            #expect(raw.disposition == .saved && raw.locationCount == 600)
            let anchor = try await owner.result(for: AnchoredObjectQueryDescriptor(type: .workoutRoute)).newAnchor
            // The "smoothed" route of the 2017 talk: fewer points, a higher version.
            let smoothed = try await finish(0..<600, step: 10, version: 2)
            #expect(smoothed.disposition == .replaced(previous: raw.uuid))
            let routes = try await SampleQueryDescriptor(type: .workoutRoute, predicate: .associatedWithWorkout(workout.uuid)).result(for: owner)
            #expect(routes.map(\.uuid) == [smoothed.uuid])
            #expect(try await owner.routeLocations(of: smoothed.uuid).all().count == 60)
            #expect(try await owner.object(with: raw.uuid) == nil)
            await expectRPCError(.notFound) { _ = try await owner.routeLocations(of: raw.uuid).all() }
            let changes = try await owner.result(for: AnchoredObjectQueryDescriptor(type: .workoutRoute, anchor: anchor))
            #expect(changes.deletedObjects.map(\.uuid) == [raw.uuid] && changes.addedObjects.map(\.uuid) == [smoothed.uuid])
            #expect(changes.deletedObjects.first?.syncVersion == 1)
            // The same version again changes nothing, and says so.
            let again = try await finish(0..<600, step: 20, version: 2)
            #expect(again.disposition == .ignored(existing: smoothed.uuid))
            #expect(try await owner.object(with: again.uuid) == nil)
            #expect(try await SampleQueryDescriptor(type: .workoutRoute).result(for: owner).map(\.uuid) == [smoothed.uuid])
            #expect(try server.ledger.replay().identical)
            await owner.close()
        }
    }
}

extension HealthStore {
    /// Finishes `builder` with `workout` (test shorthand).
    func finishRoute(_ builder: WorkoutRouteBuilder, _ workout: UUID) async throws -> WorkoutRoute {
        try await builder.finishRoute(with: workout).route
    }
}
