import Foundation
import HealthLedgerSDK
import Ledger
import Testing

/// Correlations (blood pressure, food) end to end: saved with their members, members as
/// samples of their own types, correlation queries with member predicates, read
/// authorization through member types, tombstones and sync replacement.
@Suite("Correlations over RPC", .timeLimit(.minutes(3)))
struct CorrelationRPCTests {
    static let systolic = try! QuantityType("HKQuantityTypeIdentifierBloodPressureSystolic")
    static let diastolic = try! QuantityType("HKQuantityTypeIdentifierBloodPressureDiastolic")
    static let energy = try! QuantityType("HKQuantityTypeIdentifierDietaryEnergyConsumed")
    static let carbohydrates = try! QuantityType("HKQuantityTypeIdentifierDietaryCarbohydrates")

    static func reading(_ high: Double, _ low: Double, at minutes: Double, metadata: Metadata = [:]) -> Correlation {
        let date = Samples.base.addingTimeInterval(minutes * 60)
        return Correlation(
            type: .bloodPressure, start: date, end: date,
            objects: [
                QuantitySample(type: systolic, quantity: try! Quantity(high, "mmHg"), start: date, end: date),
                QuantitySample(type: diastolic, quantity: try! Quantity(low, "mmHg"), start: date, end: date),
            ], metadata: metadata)
    }

    static func mmHg(_ sample: QuantitySample?) -> Double? { try? sample?.quantity.doubleValue(for: HealthUnit("mmHg")) }

    @Test("a reading is saved with its members, which are samples of their own types; member predicates select readings")
    func saveAndQuery() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let normal = Self.reading(118, 76, at: 0)
            let high = Self.reading(152, 95, at: 60)
            #expect(try await owner.save([.correlation(normal), .correlation(high)]).map(\.disposition) == [.saved, .saved])
            // Members are ordinary samples: in their types' queries and statistics.
            let systolic = try await SampleQueryDescriptor(type: Self.systolic.objectType).result(for: owner)
            #expect(systolic.map(\.uuid) == [normal.objects[0].uuid, high.objects[0].uuid])
            let statistics = try #require(try await owner.statistics(for: StatisticsQueryDescriptor(type: Self.systolic, options: .discreteMax)))
            #expect(try statistics.maximumQuantity()?.doubleValue(for: HealthUnit("mmHg")) == 152)
            // The correlation query: every reading with both members, or those whose member matches.
            let all = try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: owner)
            #expect(all.map(\.uuid) == [normal.uuid, high.uuid])
            #expect(all.map { Set($0.objects.map(\.uuid)) } == [Set(normal.objects.map(\.uuid)), Set(high.objects.map(\.uuid))])
            let hypertensive = try await CorrelationQueryDescriptor(
                type: .bloodPressure,
                memberPredicates: [Self.systolic: .predicateForQuantitySamples(with: .greaterOrEqual, quantity: try Quantity(140, "mmHg"))]
            ).result(for: owner)
            #expect(hypertensive.map(\.uuid) == [high.uuid])
            let both = try await CorrelationQueryDescriptor(
                type: .bloodPressure,
                memberPredicates: [
                    Self.systolic: .predicateForQuantitySamples(with: .greaterOrEqual, quantity: try Quantity(140, "mmHg")),
                    Self.diastolic: .predicateForQuantitySamples(with: .less, quantity: try Quantity(90, "mmHg")),
                ]
            ).result(for: owner)
            #expect(both.isEmpty, "no reading has both")
            let morning = try await CorrelationQueryDescriptor(
                type: .bloodPressure, predicate: .predicateForSamples(withStart: Samples.base, end: Samples.base.addingTimeInterval(1800))
            ).result(for: owner)
            #expect(morning.map(\.uuid) == [normal.uuid])
            // Fetching the correlation brings its members; members find their correlation by predicate.
            guard case .correlation(let fetched)? = try await owner.object(with: high.uuid) else { Issue.record("no correlation"); return }
            #expect(Self.mmHg(fetched.objects(for: Self.systolic).first) == 152)
            let members = try await SampleQueryDescriptor(type: Self.diastolic.objectType, predicate: .predicateForObjects(inCorrelation: high.uuid)).result(for: owner)
            #expect(members.map(\.uuid) == [high.objects[1].uuid])
            await owner.close()
        }
    }

    @Test("member types are checked, and a refused correlation writes nothing")
    func validation() async throws {
        try await withTestServer { server in
            let owner = server.client()
            var wrong = Self.reading(120, 80, at: 0)
            wrong.objects[1] = QuantitySample(type: Samples.heartRate, quantity: try Quantity(60, "count/min"), start: wrong.startDate, end: wrong.endDate)
            let error = await expectRPCError(.invalidArgument, .invalidArgument) { try await owner.save(.correlation(wrong)) }
            #expect(error?.message.contains("HKQuantityTypeIdentifierHeartRate does not belong") == true, "\(error?.message ?? "")")
            var twice = Self.reading(120, 80, at: 0)
            twice.objects[1] = QuantitySample(type: Self.systolic, quantity: try Quantity(121, "mmHg"), start: twice.startDate, end: twice.endDate)
            let doubled = await expectRPCError(.invalidArgument) { try await owner.save(.correlation(twice)) }
            #expect(doubled?.message.contains("exactly one HKQuantityTypeIdentifierBloodPressureSystolic sample, not 2") == true, "\(doubled?.message ?? "")")
            var empty = Self.reading(120, 80, at: 0)
            empty.objects = []
            await expectRPCError(.invalidArgument) { try await owner.save(.correlation(empty)) }
            var synced = Self.reading(120, 80, at: 0)
            synced.objects[0].metadata = [MetadataKey.syncIdentifier: .string("s"), MetadataKey.syncVersion: .number(1)]
            await expectRPCError(.invalidArgument) { try await owner.save(.correlation(synced)) }
            // A good reading and a bad one in one save: neither is written.
            await expectRPCError(.invalidArgument) { try await owner.save([.correlation(Self.reading(120, 80, at: 5)), .correlation(wrong)]) }
            #expect(try await SampleQueryDescriptor(type: Self.systolic.objectType).result(for: owner).isEmpty)
            #expect(try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: owner).isEmpty)
            // A correlation type is authorized through its members: asking for it is refused.
            let (_, credential) = try await server.addApp("com.example.cuff", name: "Cuff", share: [])
            let app = server.client(credential)
            await expectRPCError(.invalidArgument) { _ = try await app.requestAuthorization(toShare: [CorrelationType.bloodPressure.objectType], read: []) }
            await app.close()
            await owner.close()
        }
    }

    @Test("an app reads correlations through their member types and sees only the members it may read")
    func readAuthorization() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let reading = Self.reading(130, 85, at: 0)
            try await owner.save(.correlation(reading))
            // A cuff app shares both member types (so it may save readings) and reads neither.
            let (_, cuffCredential) = try await server.addApp("com.example.cuff", name: "Cuff", share: [Self.systolic.objectType, Self.diastolic.objectType])
            let cuff = server.client(cuffCredential)
            #expect(try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: cuff).isEmpty)
            #expect(try await cuff.object(with: reading.uuid) == nil)
            let own = Self.reading(125, 82, at: 30)
            try await cuff.save(.correlation(own))
            let cuffSees = try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: cuff)
            #expect(cuffSees.map(\.uuid) == [own.uuid] && cuffSees[0].objects.count == 2, "its own reading, whole")
            // A reader granted systolic only sees every reading, with its systolic member alone.
            let (source, readerCredential) = try await server.addApp("com.example.chart", name: "Chart", share: [])
            let reader = server.client(readerCredential)
            _ = try await reader.requestAuthorization(toShare: [], read: [Self.systolic.objectType, Self.diastolic.objectType])
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.systolic.objectType, direction: .read, decision: .granted)
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.diastolic.objectType, direction: .read, decision: .denied)
            let partial = try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: reader)
            #expect(partial.map(\.uuid) == [reading.uuid, own.uuid])
            #expect(partial.map { $0.objects.map(\.type) } == [[Self.systolic], [Self.systolic]])
            guard case .correlation(let fetched)? = try await reader.object(with: reading.uuid) else { Issue.record("hidden"); return }
            #expect(fetched.objects.map(\.uuid) == [reading.objects[0].uuid])
            // A member predicate on a type it may not read matches nothing.
            let byDiastolic = try await CorrelationQueryDescriptor(
                type: .bloodPressure, memberPredicates: [Self.diastolic: .predicateForQuantitySamples(with: .greater, quantity: try Quantity(0, "mmHg"))]
            ).result(for: reader)
            #expect(byDiastolic.isEmpty)
            // Anchored queries of the correlation type follow the same rule; revoking the grant hides them again.
            let changes = try await reader.result(for: AnchoredObjectQueryDescriptor(type: CorrelationType.bloodPressure.objectType))
            #expect(changes.addedObjects.map(\.uuid) == [reading.uuid, own.uuid])
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.systolic.objectType, direction: .read, decision: .revoked)
            #expect(try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: reader).isEmpty)
            let after = try await reader.result(for: AnchoredObjectQueryDescriptor(type: CorrelationType.bloodPressure.objectType, anchor: changes.newAnchor))
            #expect(Set(after.deletedObjects.map(\.uuid)) == [reading.uuid, own.uuid], "no longer readable: reported gone")
            for store in [cuff, reader, owner] { await store.close() }
        }
    }

    @Test("deleting a reading deletes its members; anchored queries report the tombstones")
    func tombstones() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let reading = Self.reading(120, 80, at: 0)
            try await owner.save(.correlation(reading))
            let correlationType = CorrelationType.bloodPressure.objectType
            let first = try await owner.result(for: AnchoredObjectQueryDescriptor(type: correlationType))
            #expect(first.addedObjects.map(\.uuid) == [reading.uuid])
            guard case .correlation(let reported)? = first.addedObjects.first else { Issue.record("not a correlation"); return }
            #expect(reported.objects.count == 2)
            let members = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Self.systolic.objectType))
            #expect(try await owner.delete([reading.uuid]) == 1)
            #expect(try await owner.result(for: AnchoredObjectQueryDescriptor(type: correlationType, anchor: first.newAnchor)).deletedObjects.map(\.uuid) == [reading.uuid])
            #expect(try await owner.result(for: AnchoredObjectQueryDescriptor(type: Self.systolic.objectType, anchor: members.newAnchor)).deletedObjects.map(\.uuid) == [reading.objects[0].uuid])
            #expect(try await SampleQueryDescriptor(type: Self.diastolic.objectType).result(for: owner).isEmpty)
            #expect(try server.ledger.tombstone(for: reading.objects[1].uuid)?.reason == .correlationDeleted)
            // Deleting a member alone leaves the correlation with the rest.
            let other = Self.reading(140, 90, at: 10)
            try await owner.save(.correlation(other))
            try await owner.delete([other.objects[1].uuid])
            let left = try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: owner)
            #expect(left.map { $0.objects.map(\.uuid) } == [[other.objects[0].uuid]])
            #expect(try server.ledger.replay().identical)
            await owner.close()
        }
    }

    @Test("a higher sync version replaces a reading and its members; an equal one is ignored")
    func syncReplacement() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let sync: (Double) -> Metadata = { [MetadataKey.syncIdentifier: .string("cuff-0001"), MetadataKey.syncVersion: .number($0)] }
            let first = Self.reading(150, 95, at: 0, metadata: sync(1))
            try await owner.save(.correlation(first))
            let anchor = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Self.systolic.objectType)).newAnchor
            let corrected = Self.reading(135, 88, at: 0, metadata: sync(2))
            #expect(try await owner.save(.correlation(corrected)).disposition == .replaced(previous: first.uuid))
            let readings = try await CorrelationQueryDescriptor(type: .bloodPressure).result(for: owner)
            #expect(readings.map(\.uuid) == [corrected.uuid])
            #expect(Self.mmHg(readings.first?.objects(for: Self.systolic).first) == 135)
            #expect(try await SampleQueryDescriptor(type: Self.systolic.objectType).result(for: owner).map(\.uuid) == [corrected.objects[0].uuid])
            let changes = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Self.systolic.objectType, anchor: anchor))
            #expect(changes.deletedObjects.map(\.uuid) == [first.objects[0].uuid] && changes.addedObjects.map(\.uuid) == [corrected.objects[0].uuid])
            #expect(try await owner.object(with: first.uuid) == nil)
            let stale = Self.reading(160, 99, at: 0, metadata: sync(2))
            #expect(try await owner.save(.correlation(stale)).disposition == .ignored(existing: corrected.uuid))
            #expect(try await SampleQueryDescriptor(type: Self.systolic.objectType).result(for: owner).count == 1, "an ignored reading saves no members")
            #expect(try server.ledger.replay().identical)
            await owner.close()
        }
    }

    @Test("a food: dietary members, its name in HKMetadataKeyFoodType, found by metadata")
    func food() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let date = Samples.base
            let apple = Correlation(
                type: .food, start: date, end: date,
                objects: [
                    QuantitySample(type: Self.energy, quantity: try Quantity(95, "kcal"), start: date, end: date),
                    QuantitySample(type: Self.carbohydrates, quantity: try Quantity(25, "g"), start: date, end: date),
                ], metadata: [MetadataKey.foodType: .string("Apple")])
            let bread = Correlation(
                type: .food, start: date.addingTimeInterval(60), end: date.addingTimeInterval(60),
                objects: [QuantitySample(type: Self.energy, quantity: try Quantity(250, "kcal"), start: date, end: date)],
                metadata: [MetadataKey.foodType: .string("Bread")])
            try await owner.save([.correlation(apple), .correlation(bread)])
            let found = try await CorrelationQueryDescriptor(
                type: .food, predicate: .predicateForObjects(withMetadataKey: MetadataKey.foodType, operatorType: .equal, value: .string("Apple"))
            ).result(for: owner)
            #expect(found.map(\.uuid) == [apple.uuid] && found[0].objects.count == 2)
            let energy = try #require(try await owner.statistics(for: StatisticsQueryDescriptor(type: Self.energy, options: .cumulativeSum)))
            #expect(try energy.sumQuantity()?.doubleValue(for: HealthUnit("kcal")) == 345)
            var salty = bread
            salty.uuid = UUID()
            salty.objects = [QuantitySample(type: Self.systolic, quantity: try Quantity(1, "mmHg"), start: date, end: date)]
            await expectRPCError(.invalidArgument) { try await owner.save(.correlation(salty)) }
            await owner.close()
        }
    }

    @Test("an app deletes its own readings; a reading named with its member goes in one delete; parents are of their kind")
    func deletesAndParents() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let (_, credential) = try await server.addApp("com.example.cuff", name: "Cuff", share: [Self.systolic.objectType, Self.diastolic.objectType])
            let cuff = server.client(credential)
            let first = Self.reading(120, 80, at: 0)
            let second = Self.reading(125, 82, at: 10)
            try await cuff.save([.correlation(first), .correlation(second)])
            #expect(try await cuff.delete([first.uuid]) == 1)
            #expect(try await cuff.deleteObjects(of: CorrelationType.bloodPressure.objectType) == 1)
            #expect(try await SampleQueryDescriptor(type: Self.systolic.objectType).result(for: cuff).isEmpty, "members went with them")
            let third = Self.reading(130, 85, at: 20)
            try await owner.save(.correlation(third))
            #expect(try await owner.delete([third.uuid, third.objects[0].uuid]) == 2)
            #expect(try await SampleQueryDescriptor(type: Self.diastolic.objectType).result(for: owner).isEmpty)
            // A workout's UUID is no correlation, and a correlation's no workout.
            let reading = Self.reading(140, 90, at: 30)
            let run = Workout(configuration: WorkoutConfiguration(activityType: .running), start: Samples.base, end: Samples.base.addingTimeInterval(3600))
            try await owner.save([.correlation(reading), .workout(run)])
            try await owner.add([reading.objects[0].uuid], to: run.uuid)
            let systolic = Self.systolic.objectType
            #expect(try await SampleQueryDescriptor(type: systolic, predicate: .predicateForObjects(inCorrelation: reading.uuid)).result(for: owner).count == 1)
            #expect(try await SampleQueryDescriptor(type: systolic, predicate: .predicateForObjects(inCorrelation: run.uuid)).result(for: owner).isEmpty)
            #expect(try await SampleQueryDescriptor(type: systolic, predicate: .predicateForObjects(from: reading.uuid)).result(for: owner).isEmpty)
            #expect(try await SampleQueryDescriptor(type: systolic, predicate: .predicateForObjects(from: run.uuid)).result(for: owner).count == 1)
            #expect(try await SampleQueryDescriptor(type: systolic, predicate: .or([.predicateForObjects(inCorrelation: run.uuid)])).result(for: owner).isEmpty)
            for store in [cuff, owner] { await store.close() }
        }
    }

    @Test("another source's correlation showing no readable member does not exist for the app; revoking a member type ends its streams")
    func hiddenAndRevoked() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let protein = try QuantityType("HKQuantityTypeIdentifierDietaryProtein")
            let meal = Correlation(
                type: .food, start: Samples.base, end: Samples.base,
                objects: [QuantitySample(type: protein, quantity: try Quantity(30, "g"), start: Samples.base, end: Samples.base)])
            try await owner.save(.correlation(meal))
            let (source, credential) = try await server.addApp("com.example.diet", name: "Diet", share: [Self.energy.objectType])
            let app = server.client(credential)
            _ = try await app.requestAuthorization(toShare: [], read: [Self.energy.objectType, Self.systolic.objectType, Self.diastolic.objectType])
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.energy.objectType, direction: .read, decision: .granted)
            #expect(try await CorrelationQueryDescriptor(type: .food).result(for: app).isEmpty)
            #expect(try await app.object(with: meal.uuid) == nil)
            let unknown = await expectRPCError(.notFound, .noData) { try await app.delete([UUID()]) }
            let hidden = await expectRPCError(.notFound, .noData, "as for an unknown UUID") { try await app.delete([meal.uuid]) }
            #expect(hidden?.message.contains("no object") == true && unknown?.message.contains("no object") == true)
            // Its deletion is not reported either; a meal the app may see is, added then gone.
            let anchor = try await app.result(for: AnchoredObjectQueryDescriptor(type: CorrelationType.food.objectType)).newAnchor
            let snack = Correlation(
                type: .food, start: Samples.base, end: Samples.base,
                objects: [QuantitySample(type: Self.energy, quantity: try Quantity(90, "kcal"), start: Samples.base, end: Samples.base)])
            try await owner.save(.correlation(snack))
            #expect(try await owner.delete([meal.uuid, snack.uuid]) == 2)
            let gone = try await app.result(for: AnchoredObjectQueryDescriptor(type: CorrelationType.food.objectType, anchor: anchor))
            #expect(gone.addedObjects.isEmpty && gone.deletedObjects.map(\.uuid) == [snack.uuid], "the hidden meal's tombstone stays hidden")
            let everything = try await app.result(for: AnchoredObjectQueryDescriptor(type: CorrelationType.food.objectType))
            #expect(everything.deletedObjects.map(\.uuid) == [snack.uuid])

            // A reader of both blood-pressure member types watches readings; losing one ends the watch.
            for type in [Self.systolic, Self.diastolic] {
                try await owner.decideAuthorization(app: source.bundleIdentifier, type: type.objectType, direction: .read, decision: .granted)
            }
            try await owner.save(.correlation(Self.reading(120, 80, at: 0)))
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: CorrelationType.bloodPressure.objectType)).makeAsyncIterator()
            let initial = try #require(try await watch.next())
            #expect(initial.addedObjects.count == 1)
            guard case .correlation(let seen)? = initial.addedObjects.first else { Issue.record("not a correlation"); return }
            #expect(seen.objects.count == 2)
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.diastolic.objectType, direction: .read, decision: .revoked)
            await expectRPCError(.permissionDenied, .authorizationDenied, "the watch relied on diastolic") { while try await watch.next() != nil {} }
            for store in [app, owner] { await store.close() }
        }
    }
}
