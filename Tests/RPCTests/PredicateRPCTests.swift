import Foundation
import HealthLedgerSDK
import Ledger
import Synchronization
import Testing

/// Predicates through the SDK against a real server: every leaf kind, compositions, every
/// query kind, the limits, and what a read-denied app's predicate sees.
@Suite("Predicates over RPC", .timeLimit(.minutes(3)))
struct PredicateRPCTests {
    static let watch = SourceRevision(
        source: Source(bundleIdentifier: "com.apple.health.watch", name: "Watch"), version: "10.1", productType: "Watch6,1",
        operatingSystemVersion: "10.1.1")
    static let phone = SourceRevision(
        source: Source(bundleIdentifier: "com.apple.health.phone", name: "iPhone"), version: "17.0", productType: "iPhone15,2",
        operatingSystemVersion: "17.0")
    static let watchDevice = Device(name: "Apple Watch", manufacturer: "Apple Inc.", model: "Watch", hardwareVersion: "Watch6,1")
    static let strap = Device(name: "H10", manufacturer: "Polar", model: "H10")

    /// Heart rate from two sources and two devices, with metadata, an hour apart; their UUIDs by name.
    struct Fixture {
        let server: TestServer
        let owner: HealthStore
        var uuids: [String: UUID] = [:]

        init(server: TestServer, owner: HealthStore) async throws {
            self.server = server
            self.owner = owner
            let rows: [(String, Double, Double, SourceRevision, Device?, Metadata)] = [
                ("rest", 58, 0, PredicateRPCTests.watch, PredicateRPCTests.watchDevice, [MetadataKey.heartRateMotionContext: .number(1)]),
                ("walk", 95, 1, PredicateRPCTests.watch, PredicateRPCTests.watchDevice, [MetadataKey.heartRateMotionContext: .number(2)]),
                ("run", 150, 2, PredicateRPCTests.phone, PredicateRPCTests.strap, ["zone": .string("threshold"), "effort": .quantity(Quantity(8, .count))]),
                ("sprint", 182, 3, PredicateRPCTests.phone, PredicateRPCTests.strap, ["zone": .string("max"), "recorded": .date(Samples.base)]),
                ("night", 49, 4, PredicateRPCTests.watch, nil, [:]),
            ]
            var objects: [HealthObject] = []
            for (name, value, hour, revision, device, metadata) in rows {
                let date = Samples.base.addingTimeInterval(hour * 3600)
                let sample = QuantitySample(
                    type: Samples.heartRate, quantity: try Quantity(value, "count/min"), start: date, end: date.addingTimeInterval(60), device: device,
                    metadata: metadata, sourceRevision: revision)
                uuids[name] = sample.uuid
                objects.append(.quantitySample(sample))
            }
            try await owner.save(objects)
        }

        func names(_ predicate: ObjectPredicate, as store: HealthStore? = nil) async throws -> [String] {
            let found = try await SampleQueryDescriptor(type: Types.heartRate, predicate: predicate).result(for: store ?? owner)
            return found.map { object in uuids.first { $0.value == object.uuid }?.key ?? "other" }
        }
    }

    /// Runs `body` on a fresh ``Fixture``, then closes its owner's store and stops its server,
    /// whether `body` returns or throws.
    static func withFixture<T>(_ body: (Fixture) async throws -> T) async throws -> T {
        try await withTestServer { server in
            let owner = server.client()
            do {
                let result = try await body(try await Fixture(server: server, owner: owner))
                await owner.close()
                return result
            } catch {
                await owner.close()
                throw error
            }
        }
    }

    static let hour: TimeInterval = 3600

    @Test("every leaf kind selects what HealthKit's would")
    func leaves() async throws {
        try await Self.withFixture { fixture in
            let base = Samples.base
            let hour = Self.hour
            let cases: [(ObjectPredicate, [String], String)] = [
                // Dates: overlapping by default, strict start / end, both.
                (.predicateForSamples(withStart: base.addingTimeInterval(30), end: base.addingTimeInterval(hour + 30)), ["rest", "walk"], "overlap"),
                (.predicateForSamples(withStart: base.addingTimeInterval(30), end: base.addingTimeInterval(hour + 30), options: .strictStartDate), ["walk"], "strict start"),
                (.predicateForSamples(withStart: base, end: base.addingTimeInterval(hour + 30), options: .strictEndDate), ["rest"], "strict end"),
                (.predicateForSamples(withStart: base, end: base.addingTimeInterval(2 * hour + 60), options: [.strictStartDate, .strictEndDate]), ["rest", "walk", "run"], "both"),
                (.predicateForSamples(withStart: base.addingTimeInterval(3 * hour), end: nil), ["sprint", "night"], "open end"),
                (.date(.start, .less, base.addingTimeInterval(hour)), ["rest"], "start before"),
                (.date(.end, .greater, base.addingTimeInterval(3 * hour + 60)), ["night"], "end after"),
                (.date(.start, .equal, base.addingTimeInterval(2 * hour)), ["run"], "start at"),
                // Objects.
                (.predicateForObjects(with: [fixture.uuids["run"]!, fixture.uuids["night"]!, UUID()]), ["run", "night"], "uuids"),
                (.predicateForObject(with: fixture.uuids["walk"]!), ["walk"], "one uuid"),
                (.predicateForObjects(from: [Self.phone.source]), ["run", "sprint"], "sources"),
                (.sources(["com.apple.health.watch", "com.example.nobody"]), ["rest", "walk", "night"], "sources with an unknown one"),
                (.predicateForObjects(from: Set([SourceRevisionPattern(bundleIdentifier: "com.apple.health.watch", version: "10.1")])), ["rest", "walk", "night"], "revision, any product"),
                (.predicateForObjects(from: Set([SourceRevisionPattern(bundleIdentifier: "com.apple.health.watch", version: "9.0")])), [], "revision, other version"),
                (.predicateForObjects(from: Set([SourceRevisionPattern(bundleIdentifier: "com.apple.health.phone", productType: "iPhone15,2", operatingSystemVersion: "17.0")])), ["run", "sprint"], "revision, product and OS"),
                (.predicateForObjects(from: Set([Device(manufacturer: "Polar")])), ["run", "sprint"], "device, one property"),
                (.predicateForObjects(from: Set([Device(name: "Apple Watch", model: "Watch")])), ["rest", "walk"], "device, two properties"),
                (.predicateForObjects(withDeviceProperty: .model, allowedValues: ["H10", "Ring"]), ["run", "sprint"], "device property"),
                // Metadata.
                (.predicateForObjects(withMetadataKey: "zone"), ["run", "sprint"], "key exists"),
                (.predicateForObjects(withoutMetadataKey: "zone"), ["rest", "walk", "night"], "key missing"),
                (.predicateForObjects(withMetadataKey: "zone", operatorType: .equal, value: .string("max")), ["sprint"], "string ="),
                (.predicateForObjects(withMetadataKey: "zone", operatorType: .notEqual, value: .string("max")), ["run"], "string ≠"),
                (.predicateForObjects(withMetadataKey: "zone", operatorType: .less, value: .string("n")), ["sprint"], "string <"),
                (.predicateForObjects(withMetadataKey: MetadataKey.heartRateMotionContext, operatorType: .greaterOrEqual, value: .number(2)), ["walk"], "number ≥"),
                (.predicateForObjects(withMetadataKey: MetadataKey.heartRateMotionContext, operatorType: .lessOrEqual, value: .number(2)), ["rest", "walk"], "number ≤"),
                (.predicateForObjects(withMetadataKey: "effort", operatorType: .greater, value: .quantity(Quantity(7, .count))), ["run"], "quantity >"),
                (.predicateForObjects(withMetadataKey: "recorded", operatorType: .lessOrEqual, value: .date(Samples.base)), ["sprint"], "date ≤"),
                (.predicateForObjects(withMetadataKey: "zone", allowedValues: [.string("threshold"), .string("easy")]), ["run"], "in"),
                (.predicateForObjects(withMetadataKey: "zone", operatorType: .equal, value: .number(1)), [], "a number never equals a string"),
                // Quantities, unit-converted.
                (.predicateForQuantitySamples(with: .greater, quantity: try Quantity(120, "count/min")), ["run", "sprint"], "> 120 count/min"),
                (.predicateForQuantitySamples(with: .lessOrEqual, quantity: try Quantity(1, "count/s")), ["rest", "night"], "≤ 1 count/s"),
                (.predicateForQuantitySamples(with: .equal, quantity: try Quantity(95, "count/min")), ["walk"], "= 95 count/min"),
            ]
            for (predicate, expected, what) in cases {
                #expect(try await fixture.names(predicate) == expected, "\(what)")
            }
        }
    }

    @Test("AND, OR and NOT compose, nested")
    func compositions() async throws {
        try await Self.withFixture { fixture in
            let fast = ObjectPredicate.predicateForQuantitySamples(with: .greater, quantity: try Quantity(120, "count/min"))
            let watch = ObjectPredicate.predicateForObjects(from: [Self.watch.source])
            #expect(try await fixture.names(.and([fast, watch])) == [])
            #expect(try await fixture.names(.or([fast, .predicateForObject(with: fixture.uuids["rest"]!)])) == ["rest", "run", "sprint"])
            #expect(try await fixture.names(.not(fast)) == ["rest", "walk", "night"])
            #expect(try await fixture.names(.and([watch, .not(.or([.predicateForObjects(withMetadataKey: MetadataKey.heartRateMotionContext), .date(.start, .less, Samples.base)]))])) == ["night"])
            #expect(try await fixture.names(.and([])) == ["rest", "walk", "run", "sprint", "night"], "an empty AND holds")
            #expect(try await fixture.names(.or([])) == [], "an empty OR does not")
        }
    }

    @Test("every query kind takes the predicate: sample, anchored, observer, statistics, collection, delete")
    func everyQueryKind() async throws {
        try await Self.withFixture { fixture in
            let owner = fixture.owner
            let fast = ObjectPredicate.predicateForQuantitySamples(with: .greater, quantity: try Quantity(120, "count/min"))
            let heartRate = Samples.heartRate
            // Sample query with a limit and a sort: the limit counts matches only.
            let latest = try await SampleQueryDescriptor(type: Types.heartRate, predicate: fast, limit: 1, sort: .startDate(ascending: false)).result(for: owner)
            #expect(latest.map(\.uuid) == [fixture.uuids["sprint"]!])
            // Anchored: only matching additions; paging with a limit neither skips nor repeats.
            var anchor: QueryAnchor?
            var seen: [UUID] = []
            repeat {
                let page = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, predicate: fast, anchor: anchor, limit: 1))
                seen += page.addedObjects.map(\.uuid)
                anchor = page.newAnchor
                if !page.hasMore { break }
            } while true
            #expect(seen == [fixture.uuids["run"]!, fixture.uuids["sprint"]!])
            // A deletion is reported whatever the object was.
            try await owner.delete([fixture.uuids["rest"]!])
            let after = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, predicate: fast, anchor: anchor))
            #expect(after.addedObjects.isEmpty && after.deletedObjects.map(\.uuid) == [fixture.uuids["rest"]!])
            // Observer: a save that does not match is not reported; one that does is.
            var updates = try await owner.observe(Types.heartRate, matching: fast).makeAsyncIterator()
            try await owner.save(Samples.heartRate(70, at: 6 * Self.hour))
            try await owner.save(Samples.heartRate(130, at: 7 * Self.hour))
            #expect(try await updates.next() != nil)
            let marker = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, predicate: fast, anchor: after.newAnchor))
            #expect(marker.addedObjects.count == 1, "the observer's update is the matching save")
            // Statistics and a collection count only matching samples.
            let statistics = try #require(try await owner.statistics(for: StatisticsQueryDescriptor(type: heartRate, options: [.discreteMin, .discreteMax], predicate: fast)))
            #expect(try statistics.minimumQuantity()?.doubleValue(for: HealthUnit("count/min")) == 130)
            #expect(try statistics.maximumQuantity()?.doubleValue(for: HealthUnit("count/min")) == 182)
            let collection = try await owner.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: heartRate, range: DateInterval(start: Samples.base, duration: 86_400),
                intervals: try StatisticsIntervals(anchor: Samples.base, every: 1, .hour, timeZone: .gmt), options: .discreteMax, predicate: fast))
            #expect(collection.statistics.map { $0.startDate.timeIntervalSince(Samples.base) / Self.hour } == [2, 3, 7])
            // Delete by predicate: the matching ones only.
            #expect(try await owner.deleteObjects(of: Types.heartRate, matching: fast) == 3)
            #expect(try await fixture.names(.and([])) == ["walk", "night", "other"])
        }
    }

    @Test("a predicate that does not fit its type, or breaks a limit, is invalidArgument naming it")
    func invalid() async throws {
        try await Self.withFixture { fixture in
            let owner = fixture.owner
            func refused(_ type: ObjectType, _ predicate: ObjectPredicate, mentioning words: String) async {
                let error = await expectRPCError(.invalidArgument, .invalidArgument, "\(predicate)") {
                    _ = try await SampleQueryDescriptor(type: type, predicate: predicate).result(for: owner)
                }
                #expect(error?.message.contains(words) == true, "\(error?.message ?? "")")
            }
            await refused(Types.heartRate, .predicateForQuantitySamples(with: .greater, quantity: try Quantity(1, "kg")), mentioning: "not compatible")
            await refused(try ObjectType("HKCategoryTypeIdentifierSleepAnalysis"), .predicateForQuantitySamples(with: .greater, quantity: Quantity(1, .count)), mentioning: "quantity type")
            await refused(try ObjectType("HKCategoryTypeIdentifierSleepAnalysis"), .predicateForCategorySamples(equalTo: [9]), mentioning: "not a value")
            await refused(Types.heartRate, .predicateForCategorySamples(equalTo: [1]), mentioning: "category type")
            await refused(Types.heartRate, .workout(.activityType(.running)), mentioning: "workout type")
            await refused(Types.heartRate, .predicateForObjects(withMetadataKey: MetadataKey.lapLength, operatorType: .equal, value: .quantity(Quantity(1, .count))), mentioning: "compatible")
            var deep = ObjectPredicate.predicateForObjects(withMetadataKey: "x")
            for _ in 0..<ObjectPredicate.maximumDepth { deep = .not(deep) }
            await refused(Types.heartRate, deep, mentioning: "at most \(ObjectPredicate.maximumDepth) levels")
            let wide = ObjectPredicate.or((0...ObjectPredicate.maximumTerms).map { _ in .predicateForObjects(withMetadataKey: "x") })
            await refused(Types.heartRate, wide, mentioning: "at most \(ObjectPredicate.maximumTerms) terms")
            await refused(Types.heartRate, .uuids(Set((0...ObjectPredicate.maximumValues).map { _ in UUID() })), mentioning: "at most \(ObjectPredicate.maximumValues)")
            // The same checks guard statistics and deletes, which change nothing.
            await expectRPCError(.invalidArgument) {
                _ = try await owner.deleteObjects(of: Types.heartRate, matching: .predicateForQuantitySamples(with: .greater, quantity: try Quantity(1, "kg")))
            }
            #expect(try await fixture.names(.and([])).count == 5)
        }
    }

    @Test("a read-denied app's predicate sees exactly its own objects, however it is phrased")
    func leakMatrix() async throws {
        try await Self.withFixture { fixture in
            let (source, credential) = try await fixture.server.addApp("com.example.pulse", name: "Pulse")
            let app = fixture.server.client(credential)
            let own = QuantitySample(
                type: Samples.heartRate, quantity: try Quantity(150, "count/min"), start: Samples.base.addingTimeInterval(2 * Self.hour),
                end: Samples.base.addingTimeInterval(2 * Self.hour + 60), device: Self.strap, metadata: ["zone": .string("threshold")])
            try await app.save(.quantitySample(own))
            let everything = fixture.uuids.values.map { $0 } + [own.uuid]
            // Predicates that would match the owner's data, and some that name it outright.
            let probes: [(ObjectPredicate, Bool)] = [
                (.and([]), true),
                (.predicateForObjects(with: Set(everything)), true),
                (.predicateForObject(with: fixture.uuids["run"]!), false),
                (.predicateForObjects(from: [Self.phone.source, Self.watch.source]), false),
                (.predicateForObjects(from: [source]), true),
                (.predicateForObjects(from: Set([Device(model: "H10")])), true),
                (.predicateForObjects(withMetadataKey: "zone", operatorType: .equal, value: .string("threshold")), true),
                (.predicateForObjects(withMetadataKey: "zone", operatorType: .equal, value: .string("max")), false),
                (.predicateForQuantitySamples(with: .greater, quantity: try Quantity(100, "count/min")), true),
                (.predicateForSamples(withStart: Samples.base, end: Samples.base.addingTimeInterval(86_400)), true),
                (.not(.predicateForObjects(from: [source])), false),
            ]
            for (predicate, seesOwn) in probes {
                let found = try await SampleQueryDescriptor(type: Types.heartRate, predicate: predicate).result(for: app).map(\.uuid)
                #expect(found == (seesOwn ? [own.uuid] : []), "\(predicate)")
                let limited = try await SampleQueryDescriptor(type: Types.heartRate, predicate: predicate, limit: 1).result(for: app).map(\.uuid)
                #expect(limited == found, "limit with \(predicate)")
                let changes = try await app.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, predicate: predicate, limit: 1))
                #expect(changes.addedObjects.map(\.uuid) == found && !changes.hasMore, "anchored \(predicate)")
                let statistics = try await app.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, options: .discreteMax, predicate: predicate))
                #expect(try statistics?.maximumQuantity()?.doubleValue(for: HealthUnit("count/min")) == (seesOwn ? 150 : nil), "statistics \(predicate)")
            }
            // Deleting by a predicate that matches the owner's samples deletes only its own.
            #expect(try await app.deleteObjects(of: Types.heartRate, matching: .predicateForQuantitySamples(with: .greater, quantity: try Quantity(100, "count/min"))) == 1)
            #expect(try await fixture.names(.and([])).count == 5)
            await app.close()
        }
    }

    @Test("one anchor over several descriptors: paging under concurrent writers neither skips nor repeats a change")
    func severalDescriptors() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let fast = ObjectPredicate.predicateForQuantitySamples(with: .greater, quantity: try Quantity(100, "count/min"))
            let descriptors = [
                QueryDescriptor(type: Types.heartRate, predicate: fast), QueryDescriptor(type: Types.bodyMass), QueryDescriptor(type: Types.stepCount),
            ]
            let bodyMass = try QuantityType(Types.bodyMass.identifier)
            let steps = try QuantityType(Types.stepCount.identifier)
            // Writers save (and delete) the three types while a reader pages; what must be seen:
            // every matching save and every deletion, each exactly once.
            let writers = (0..<3).map { writer in
                Task { () -> (added: [UUID], deleted: [UUID]) in
                    let store = server.client()
                    var added: [UUID] = []
                    var deleted: [UUID] = []
                    for round in 0..<25 {
                        let date = Samples.base.addingTimeInterval(Double(writer * 1000 + round) * 60)
                        let pulse = QuantitySample(type: Samples.heartRate, quantity: try Quantity(round.isMultiple(of: 2) ? 120 : 80, "count/min"), start: date, end: date)
                        let weight = QuantitySample(type: bodyMass, quantity: try Quantity(70, "kg"), start: date, end: date)
                        let walk = QuantitySample(type: steps, quantity: Quantity(100, .count), start: date, end: date.addingTimeInterval(60))
                        try await store.save([.quantitySample(pulse), .quantitySample(weight), .quantitySample(walk)])
                        if round.isMultiple(of: 2) { added.append(pulse.uuid) }
                        added += [weight.uuid, walk.uuid]
                        if round.isMultiple(of: 5) {
                            try await store.delete([weight.uuid])
                            deleted.append(weight.uuid)
                        }
                    }
                    await store.close()
                    return (added, deleted)
                }
            }
            var seenAdded: [UUID] = []
            var seenDeleted: [UUID] = []
            var anchor: QueryAnchor?
            func drain() async throws -> Bool {
                let page = try await AnchoredObjectQueryDescriptor(descriptors: descriptors, anchor: anchor, limit: 7).result(for: owner)
                #expect(page.addedObjects.count + page.deletedObjects.count <= 7)
                seenAdded += page.addedObjects.map(\.uuid)
                seenDeleted += page.deletedObjects.map(\.uuid)
                anchor = page.newAnchor
                return page.hasMore
            }
            let written = Mutex(false)
            let writing = Task { () -> (added: [UUID], deleted: [UUID]) in
                var added: [UUID] = []
                var deleted: [UUID] = []
                for writer in writers {
                    let result = try await writer.value
                    added += result.added
                    deleted += result.deleted
                }
                written.withLock { $0 = true }
                return (added, deleted)
            }
            // Page while the writers write (no time bound: until they are done).
            while !written.withLock({ $0 }) { _ = try await drain() }
            let (expectedAdded, expectedDeleted) = try await writing.value
            while try await drain() {}
            _ = try await drain()
            #expect(Set(seenAdded).count == seenAdded.count, "no object reported twice")
            #expect(Set(seenDeleted).count == seenDeleted.count, "no deletion reported twice")
            // A deleted object may have been deleted before the reader saw it added: then it is
            // reported deleted only. Every other matching save is reported added.
            #expect(Set(seenAdded).union(seenDeleted) == Set(expectedAdded), "no gap")
            #expect(Set(seenDeleted) == Set(expectedDeleted))
            // The anchor belongs to the three types together.
            await expectRPCError(.invalidArgument) { _ = try await AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: anchor).result(for: owner) }
            await expectRPCError(.invalidArgument) {
                _ = try await AnchoredObjectQueryDescriptor(descriptors: descriptors + [QueryDescriptor(type: Types.heartRate)]).result(for: owner)
            }
            // In another order, the same types resume from the same place.
            #expect(try await AnchoredObjectQueryDescriptor(descriptors: descriptors.reversed(), anchor: anchor).result(for: owner).addedObjects.isEmpty)
            // An observer of several types hears a save of any of them.
            var updates = try await owner.observe(descriptors).makeAsyncIterator()
            try await owner.save(.quantitySample(QuantitySample(type: bodyMass, quantity: try Quantity(71, "kg"), start: Samples.base, end: Samples.base)))
            #expect(try await updates.next() != nil)
            await owner.close()
        }
    }

    @Test("descriptors in HealthKit's shape run against a store; cancelling the consuming task cancels the call")
    func descriptorShapes() async throws {
        try await Self.withFixture { fixture in
            let owner = fixture.owner
            let fast = ObjectPredicate.predicateForQuantitySamples(with: .greater, quantity: try Quantity(120, "count/min"))
            let statistics = try await StatisticsQueryDescriptor(type: Samples.heartRate, options: .discreteMax, predicate: fast).result(for: owner)
            #expect(try statistics?.maximumQuantity()?.doubleValue(for: HealthUnit("count/min")) == 182)
            let collection = StatisticsCollectionQueryDescriptor(
                type: Samples.heartRate, range: DateInterval(start: Samples.base, duration: 86_400),
                intervals: try StatisticsIntervals(anchor: Samples.base, every: 1, .day, timeZone: .gmt), options: .discreteMax, predicate: fast)
            #expect(try await collection.result(for: owner).statistics.count == 1)
            var updates = try await collection.results(for: owner).makeAsyncIterator()
            #expect(try await updates.next()?.statistics.count == 1)
            // An observer whose consuming task is cancelled: the server drops its watcher.
            let watchers = fixture.server.ledger.changeWatchers.count
            let registered = AsyncStream.makeStream(of: Void.self)
            let observing = Task {
                let results = try await ObserverQueryDescriptor([QueryDescriptor(type: Types.heartRate, predicate: fast)]).results(for: owner)
                registered.continuation.yield()
                for try await _ in results {}
            }
            for await _ in registered.stream { break }
            #expect(fixture.server.ledger.changeWatchers.count == watchers + 1)
            observing.cancel()
            while fixture.server.ledger.changeWatchers.count > watchers { try await Task.sleep(for: .milliseconds(10)) }
            #expect(fixture.server.ledger.changeWatchers.count == watchers)
        }
    }
}
