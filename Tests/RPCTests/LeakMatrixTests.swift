import Foundation
import HealthLedgerSDK
import Ledger
import Testing

/// What an app sees of heart rate, on every read path, for each state of its read
/// authorization; objects of three sources (the app, the owner, a second app), some deleted.
@Suite("Leak matrix: what an app reads, per read authorization", .timeLimit(.minutes(3)))
struct LeakMatrixTests {
    enum ReadState: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case notDetermined, pending, denied, granted, revoked
        var testDescription: String { rawValue }
        /// Whether the app reads other sources' heart rate.
        var readsOthers: Bool { self == .granted }
        /// The owner's decisions, in order, that lead to this state from a pending request.
        var decisions: [AuthorizationDecision] {
            switch self {
            case .notDetermined, .pending: []
            case .denied: [.denied]
            case .granted: [.granted]
            case .revoked: [.granted, .revoked]
            }
        }
    }

    /// Puts the app's read authorization for heart rate in `state`.
    static func setReadState(_ state: ReadState, app: HealthStore, bundle: String, owner: HealthStore) async throws {
        if state == .notDetermined { return }
        #expect(try await app.requestAuthorization(toShare: [], read: [Types.heartRate]) == 1)
        for decision in state.decisions {
            try await owner.decideAuthorization(app: bundle, type: Types.heartRate, direction: .read, decision: decision)
        }
    }

    @Test("every read path, per read authorization state", arguments: ReadState.allCases)
    func matrix(_ state: ReadState) async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let (_, runCredential) = try await server.addApp("com.example.run", name: "Run")
            let runner = server.client(runCredential)
            // An app that has never saved anything (its own source is unknown to the ledger).
            let (peekSource, peekCredential) = try await server.addApp("com.example.peek", name: "Peek", share: [])
            let peek = server.client(peekCredential)

            // 48 samples a minute apart, in this order of sources: owner, run, owner, app, …
            // Others' samples come first, so a limit that counted them would come up short.
            var all: [HealthObject] = []
            var own: [HealthObject] = [], ownerObjects: [HealthObject] = [], runObjects: [HealthObject] = []
            for index in 0..<48 {
                let sample = Samples.heartRate(Double(60 + index), at: Double(index) * 60)
                all.append(sample)
                switch index % 4 {
                case 3: own.append(sample)
                case 1: runObjects.append(sample)
                default: ownerObjects.append(sample)
                }
            }
            try await owner.save(ownerObjects)
            try await runner.save(runObjects)
            try await app.save(own)
            // Some of each source's are deleted.
            let deleted = [own[0], own[5], ownerObjects[0], ownerObjects[7], runObjects[2]]
            #expect(try await app.delete([own[0], own[5]]) == 2)
            #expect(try await owner.delete([ownerObjects[0], ownerObjects[7]]) == 2)
            #expect(try await runner.delete([runObjects[2]]) == 1)
            let deletedIDs = Set(deleted.map(\.uuid))
            let ownIDs = Set(own.map(\.uuid))
            let present = all.filter { !deletedIDs.contains($0.uuid) }
            let ownPresent = present.filter { ownIDs.contains($0.uuid) }
            let othersPresent = present.filter { !ownIDs.contains($0.uuid) }
            // Another type the app shares but never may read: the owner's body mass.
            let weight = HealthObject.quantitySample(QuantitySample(
                type: try QuantityType(Types.bodyMass.identifier), quantity: try Quantity(70, "kg"), start: Samples.base, end: Samples.base))
            try await owner.save(weight)

            try await Self.setReadState(state, app: app, bundle: TestServer.appSource.bundleIdentifier, owner: owner)
            try await Self.setReadState(state, app: peek, bundle: peekSource.bundleIdentifier, owner: owner)
            let visible = state.readsOthers ? present : ownPresent
            let visibleIDs = Set(visible.map(\.uuid))
            let peekVisible = state.readsOthers ? present : []
            #expect(ownPresent.count == 10 && othersPresent.count == 33 && visible.count == (state.readsOthers ? 43 : 10))

            // Fetch by UUID: a hidden or deleted object is nil, like an unknown UUID.
            let unknown = UUID()
            #expect(try await app.object(with: unknown) == nil)
            for object in all {
                let fetched = try await app.object(with: object.uuid)
                if visibleIDs.contains(object.uuid) {
                    #expect(fetched?.uuid == object.uuid, "\(state): \(object.uuid) must be visible")
                    if ownIDs.contains(object.uuid) { #expect(fetched?.sourceRevision.source == TestServer.appSource) }
                    if ownerObjects.contains(object) { #expect(fetched == object) }
                } else {
                    #expect(fetched == nil, "\(state): \(object.uuid) (\(deletedIDs.contains(object.uuid) ? "deleted" : "another source's")) must be hidden")
                }
                #expect((try await peek.object(with: object.uuid) != nil) == peekVisible.contains { $0.uuid == object.uuid }, "\(state): peek fetch")
            }
            for object in deleted { #expect(try await owner.object(with: object.uuid) == nil, "deleted objects are seen by nobody") }
            #expect(try await app.object(with: weight.uuid) == nil, "body mass is never readable")

            // Full sample query, both sorts.
            let query = SampleQueryDescriptor(type: Types.heartRate)
            #expect(try await app.result(for: query).map(\.uuid) == visible.map(\.uuid))
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, sort: .startDate(ascending: false))).map(\.uuid)
                == visible.reversed().map(\.uuid))
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, sort: .endDate(ascending: true))).map(\.uuid)
                == visible.map(\.uuid))
            #expect(try await peek.result(for: query).map(\.uuid) == peekVisible.map(\.uuid))
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.bodyMass)).isEmpty)
            #expect(try await owner.result(for: query).map(\.uuid) == present.map(\.uuid), "the owner reads everything not deleted")

            // A limit counts only what the app sees.
            for limit in [1, 2, 5, ownPresent.count - 1, ownPresent.count, ownPresent.count + 1, present.count + 5] {
                #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, limit: limit)).map(\.uuid)
                    == visible.prefix(limit).map(\.uuid), "\(state): limit \(limit)")
                #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, limit: limit, sort: .startDate(ascending: false))).map(\.uuid)
                    == visible.reversed().prefix(limit).map(\.uuid), "\(state): limit \(limit) descending")
            }
            #expect(try await peek.result(for: SampleQueryDescriptor(type: Types.heartRate, limit: 3)).map(\.uuid) == peekVisible.prefix(3).map(\.uuid))
            let window = DateInterval(start: Samples.base.addingTimeInterval(10 * 60), end: Samples.base.addingTimeInterval(30 * 60))
            let inWindow = visible.filter { window.start <= $0.startDate && $0.startDate < window.end }
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, interval: window)).map(\.uuid) == inWindow.map(\.uuid))
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, interval: window, limit: 3)).map(\.uuid)
                == inWindow.prefix(3).map(\.uuid))

            // Streamed in small batches: full batches of visible objects only.
            let streamed = try await batches(app, SampleQueryDescriptor(type: Types.heartRate, batchSize: 3))
            #expect(streamed.flatMap { $0 }.map(\.uuid) == visible.map(\.uuid))
            #expect(streamed.count == (visible.count + 2) / 3)
            #expect(streamed.dropLast().allSatisfy { $0.count == 3 } && (streamed.last?.count ?? 0) > 0)
            let limited = try await batches(app, SampleQueryDescriptor(type: Types.heartRate, limit: 7, batchSize: 3))
            #expect(limited.map(\.count) == [3, 3, 1])
            #expect(limited.flatMap { $0 }.map(\.uuid) == visible.prefix(7).map(\.uuid))

            // Anchored query: added objects in commit order (owner's, run's, then the app's
            // saves) and the tombstones of deleted ones, only of what the app may read.
            let committed = ownerObjects + runObjects + own
            let ownDeleted: Set<UUID> = [own[0].uuid, own[5].uuid]
            let expectedAdded = committed.filter { visibleIDs.contains($0.uuid) }.map(\.uuid)
            let expectedDeleted = state.readsOthers ? deletedIDs : ownDeleted
            let changes = try await app.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate))
            #expect(changes.addedObjects.map(\.uuid) == expectedAdded, "\(state): anchored added")
            #expect(Set(changes.deletedObjects.map(\.uuid)) == expectedDeleted, "\(state): anchored deleted")
            #expect(changes.deletedObjects.count == expectedDeleted.count && !changes.hasMore)
            let peekChanges = try await peek.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate))
            #expect(peekChanges.addedObjects.map(\.uuid) == committed.filter { state.readsOthers && !deletedIDs.contains($0.uuid) }.map(\.uuid))
            #expect(Set(peekChanges.deletedObjects.map(\.uuid)) == (state.readsOthers ? deletedIDs : []))
            #expect(try await app.result(for: AnchoredObjectQueryDescriptor(type: Types.bodyMass)).addedObjects.isEmpty)
            // Pages: their sizes and hasMore flags count only what the app may read.
            let total = expectedAdded.count + expectedDeleted.count
            for limit in [1, 4, 10, total, total + 1] {
                var anchor: QueryAnchor?
                var sizes: [Int] = []
                var more: [Bool] = []
                repeat {
                    let page = try await app.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: anchor, limit: limit, batchSize: 3))
                    sizes.append(page.addedObjects.count + page.deletedObjects.count)
                    more.append(page.hasMore)
                    anchor = page.newAnchor
                } while more.last!
                let pages = (total + limit - 1) / limit
                #expect(sizes == (0..<pages).map { min(limit, total - $0 * limit) }, "\(state): anchored pages of \(limit)")
                #expect(more == (0..<pages).map { $0 < pages - 1 }, "\(state): hasMore, pages of \(limit)")
            }
            // Watched: the initial batches, then another source's commit only when it may read it.
            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, batchSize: 4)).makeAsyncIterator()
            var initial: [UUID] = []
            while true {
                let batch = try #require(try await watch.next())
                #expect(batch.addedObjects.count + batch.deletedObjects.count <= 4)
                initial += batch.addedObjects.map(\.uuid)
                if batch.caughtUp { break }
            }
            #expect(initial == expectedAdded, "\(state): watched initial")
            var observer = try await app.observe(Types.heartRate).makeAsyncIterator()
            let othersLater = Samples.heartRate(50, at: -120)
            try await runner.save(othersLater)
            let ownLater = Samples.heartRate(51, at: -60)
            try await app.save(ownLater)
            var watched: [UUID] = []
            while !watched.contains(ownLater.uuid) { watched += try #require(try await watch.next()).addedObjects.map(\.uuid) }
            #expect(watched == (state.readsOthers ? [othersLater.uuid, ownLater.uuid] : [ownLater.uuid]), "\(state): watched updates")
            #expect(try await observer.next() != nil)
            if !state.readsOthers {
                // The one update was the app's own save; another source's never comes.
                #expect(try await ChangeQueryRPCTests.nothingWithin(.milliseconds(200), &observer), "\(state): observer heard another source")
            }
            #expect(try await app.delete([ownLater.uuid]) == 1)
            #expect(try await owner.delete([othersLater.uuid]) == 1)

            // Predicates: whatever they name or would match, the app's view is the same.
            let everyone: Set<String> = [TestServer.appSource.bundleIdentifier, "com.example.run", Source.owner.bundleIdentifier]
            let above = try Quantity(80, "count/min")
            let predicates: [(ObjectPredicate, [HealthObject], String)] = [
                (.uuids(Set(all.map(\.uuid))), visible, "every UUID"),
                (.sources(everyone), visible, "every source"),
                (.not(.sources([TestServer.appSource.bundleIdentifier])), state.readsOthers ? othersPresent : [], "not its own"),
                (.quantity(.greater, above), visible.filter { ($0.quantitySample?.quantity.value ?? 0) > 80 }, "value > 80"),
                (.or([.uuids([ownerObjects[1].uuid]), .sources(["com.example.run"])]), state.readsOthers ? othersPresent.filter { !ownerObjects.contains($0) || $0 == ownerObjects[1] } : [], "another's UUID or source"),
            ]
            for (predicate, expected, what) in predicates {
                #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, predicate: predicate)).map(\.uuid) == expected.map(\.uuid), "\(state): \(what)")
                #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate, predicate: predicate, limit: 2)).map(\.uuid)
                    == expected.prefix(2).map(\.uuid), "\(state): \(what), limit 2")
                let expectedChanges = committed.filter { object in expected.contains { $0.uuid == object.uuid } }.map(\.uuid)
                let predicateChanges = try await app.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, predicate: predicate, limit: 3))
                #expect(predicateChanges.addedObjects.map(\.uuid) == Array(expectedChanges.prefix(3)), "\(state): \(what), anchored")
                #expect(try await peek.result(for: SampleQueryDescriptor(type: Types.heartRate, predicate: predicate)).map(\.uuid)
                    == expected.filter { object in peekVisible.contains { $0.uuid == object.uuid } }.map(\.uuid), "\(state): peek \(what)")
            }
            let predicated = try await app.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, options: .discreteMax, predicate: .sources(everyone)))
            #expect(try predicated?.maximumQuantity()?.doubleValue(for: HealthUnit("count/min")) == visible.compactMap { $0.quantitySample?.quantity.value }.max(), "\(state): statistics with a predicate")

            // Statistics: computed from what the app may read only, sources included.
            let bpm = try HealthUnit("count/min")
            let visibleValues = visible.compactMap { $0.quantitySample?.quantity.value }
            let statisticsQuery = StatisticsQueryDescriptor(
                type: Samples.heartRate, options: [.discreteMin, .discreteMax, .discreteAverage, .mostRecent, .separateBySource, .duration])
            let statistics = try #require(try await app.statistics(for: statisticsQuery))
            #expect(try statistics.minimumQuantity()?.doubleValue(for: bpm) == visibleValues.min(), "\(state): minimum")
            #expect(try abs(statistics.maximumQuantity()!.doubleValue(for: bpm) - visibleValues.max()!) < 1e-9, "\(state): maximum")
            #expect(statistics.values.mostRecentInterval?.start == visible.last?.startDate, "\(state): most recent")
            #expect(statistics.sources.contains(TestServer.appSource) && (statistics.sources.count > 1) == state.readsOthers, "\(state): sources")
            #expect(Set(statistics.valuesBySource.keys) == Set(statistics.sources))
            if !state.readsOthers { #expect(try await peek.statistics(for: statisticsQuery) == nil, "\(state): peek's statistics") }
            let minutes = try StatisticsIntervals(anchor: Samples.base, every: 10, .minute, timeZone: .gmt)
            let collection = try await app.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: Samples.heartRate, range: DateInterval(start: Samples.base, duration: 3_600), intervals: minutes, options: [.discreteMax, .separateBySource]))
            let populated = Set(visible.map { minutes.interval(containing: $0.startDate).start })
            #expect(collection.statistics.map(\.startDate) == populated.sorted(), "\(state): populated intervals")
            #expect(collection.enumerateStatistics(from: Samples.base, to: Samples.base.addingTimeInterval(3_600)).count == 6)
            for interval in collection.statistics {
                let inside = visible.filter { interval.startDate <= $0.startDate && $0.startDate < interval.endDate }
                #expect(try abs(interval.maximumQuantity()!.doubleValue(for: bpm) - inside.compactMap { $0.quantitySample?.quantity.value }.max()!) < 1e-9)
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "\(state): sum of heart rate") {
                _ = try await app.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, options: .cumulativeSum))
            }

            // Delete by UUID: another source's object is unknown unless the app may read it.
            let unknownError = await expectRPCError(.notFound, .noData, "\(state): unknown UUID") { _ = try await app.delete([unknown]) }
            let unknownShape = messageShape(unknownError, naming: unknown)
            #expect(unknownShape == "no object with UUID <uuid>")
            for object in othersPresent.prefix(4) + [othersPresent.last!] {
                if state.readsOthers {
                    await expectRPCError(.permissionDenied, .authorizationDenied, "\(state): another source's, readable") { _ = try await app.delete([object.uuid]) }
                } else {
                    let error = await expectRPCError(.notFound, .noData, "\(state): another source's, hidden") { _ = try await app.delete([object.uuid]) }
                    #expect(messageShape(error, naming: object.uuid) == unknownShape)
                }
            }
            for object in deleted {
                let error = await expectRPCError(.notFound, .noData, "\(state): deleted") { _ = try await app.delete([object.uuid]) }
                #expect(messageShape(error, naming: object.uuid) == unknownShape)
            }
            // With the app's own object in the same call: all or none, and the same error as with an unknown UUID.
            let mixedUnknown = await expectRPCError(.notFound, .noData, "\(state): own + unknown") { _ = try await app.delete([ownPresent[0].uuid, unknown]) }
            let hiddenOther = othersPresent[3]
            let mixedOther = await expectRPCError(state.readsOthers ? .permissionDenied : .notFound, nil, "\(state): own + other") {
                _ = try await app.delete([ownPresent[0].uuid, hiddenOther.uuid])
            }
            if !state.readsOthers {
                #expect(messageShape(mixedOther, naming: hiddenOther.uuid) == messageShape(mixedUnknown, naming: unknown))
            }
            #expect(try await app.object(with: ownPresent[0].uuid) != nil, "a failed delete deletes nothing")
            #expect(try await owner.object(with: hiddenOther.uuid) != nil)
            // Peek (no objects of its own): the same answers.
            let peekError = await expectRPCError(state.readsOthers ? .permissionDenied : .notFound, nil, "\(state): peek deletes another's") {
                _ = try await peek.delete([hiddenOther.uuid])
            }
            if !state.readsOthers { #expect(messageShape(peekError, naming: hiddenOther.uuid) == unknownShape) }

            // deleteObjects counts (and deletes) only the app's own.
            let ownInWindow = ownPresent.filter { window.start <= $0.startDate && $0.startDate < window.end }
            #expect(!ownInWindow.isEmpty)
            #expect(try await app.deleteObjects(of: Types.heartRate, overlapping: window) == ownInWindow.count)
            #expect(try await app.deleteObjects(of: Types.heartRate) == ownPresent.count - ownInWindow.count)
            #expect(try await app.deleteObjects(of: Types.heartRate) == 0)
            #expect(try await owner.result(for: query).map(\.uuid) == othersPresent.map(\.uuid), "others' objects are untouched")
            #expect(try await app.result(for: query).map(\.uuid) == (state.readsOthers ? othersPresent.map(\.uuid) : []))
            for object in ownPresent { #expect(try await app.object(with: object.uuid) == nil) }

            // The past shows an app no more than the present: as of the head, exactly what it
            // reads now; as of before any of its requests, its own objects only.
            let head = try server.ledger.head().sequence
            #expect(try await app.asOf(.sequence(head)).result(for: query).map(\.uuid) == (try await app.result(for: query)).map(\.uuid), "\(state): as of the head")
            #expect(try await peek.asOf(.sequence(head)).result(for: query).map(\.uuid) == (try await peek.result(for: query)).map(\.uuid), "\(state): peek as of the head")
            #expect(try await app.asOf(.sequence(3)).result(for: query).isEmpty, "\(state): as of before the app saved anything")

            // The audit trail is the owner's: no read grant opens it to an app.
            for (store, who) in [(app, "app"), (peek, "peek")] {
                await expectRPCError(.permissionDenied, .authorizationDenied, "\(state): \(who)'s audit") { for try await _ in try await store.audit() {} }
                await expectRPCError(.permissionDenied, .authorizationDenied, "\(state): \(who)'s watched audit") {
                    for try await _ in try await store.watchAudit() {}
                }
                // So are the ledger's credentials: an app neither lists nor revokes them.
                await expectRPCError(.permissionDenied, .authorizationDenied, "\(state): \(who) listing credentials") { _ = try await store.credentials() }
                await expectRPCError(.permissionDenied, .authorizationDenied, "\(state): \(who) revoking the owner's credential") {
                    try await store.revokeCredential(id: credentialID(server.ownerCredential))
                }
            }

            for store in [owner, app, runner, peek] { await store.close() }
        }
    }

    @Test("characteristics: an app reads one only when granted; otherwise it is not set, whether set or not", arguments: ReadState.allCases)
    func characteristics(_ state: ReadState) async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let bundle = TestServer.appSource.bundleIdentifier
            let types: [ObjectType] = [.dateOfBirth, .bloodType, .biologicalSex]
            // Before anything is set, and before any request: the baseline answer.
            let unset = try await app.characteristics(types)
            #expect(unset == [nil, nil, nil])
            try await owner.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: 1990, month: 7, day: 14))
            try await owner.setCharacteristic(of: .bloodType, to: .bloodType(.abPositive))
            if state != .notDetermined { _ = try await app.requestAuthorization(toShare: [], read: [.dateOfBirth, .bloodType, .biologicalSex]) }
            for type in [ObjectType.dateOfBirth, .biologicalSex] {
                for decision in state.decisions {
                    try await owner.decideAuthorization(app: bundle, type: type, direction: .read, decision: decision)
                }
            }
            // Blood type is set but never granted; biological sex is granted (when granted) but not set.
            let seen = try await app.characteristics(types)
            #expect(seen == [state.readsOthers ? .dateOfBirth(year: 1990, month: 7, day: 14) : nil, nil, nil], "\(state)")
            #expect(try await app.bloodType() == .notSet)
            #expect(try await app.biologicalSex() == .notSet)
            #expect(try await app.dateOfBirthComponents()?.year == (state.readsOthers ? 1990 : nil))
            #expect(try await owner.characteristics(types) == [.dateOfBirth(year: 1990, month: 7, day: 14), .bloodType(.abPositive), nil])
            // Apps never set them; the refusal says nothing of the current value.
            await expectRPCError(.permissionDenied, .authorizationDenied, "\(state): app sets") {
                try await app.setCharacteristic(of: .bloodType, to: .bloodType(.oPositive))
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "\(state): not a characteristic") { _ = try await app.characteristics([Types.heartRate]) }
            for store in [owner, app] { await store.close() }
        }
    }

    @Test("a read grant is per type and per app", arguments: [false, true])
    func grantScope(_ grantedToOtherApp: Bool) async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let (run, runCredential) = try await server.addApp("com.example.run", name: "Run")
            let runner = server.client(runCredential)
            let heart = Samples.heartRate(70, at: 0)
            let weight = HealthObject.quantitySample(QuantitySample(
                type: try QuantityType(Types.bodyMass.identifier), quantity: try Quantity(70, "kg"), start: Samples.base, end: Samples.base))
            try await owner.save([heart, weight])
            // The app may read body mass; the other app (or no one) heart rate.
            _ = try await app.requestAuthorization(toShare: [], read: [Types.bodyMass])
            try await owner.decideAuthorization(app: TestServer.appSource.bundleIdentifier, type: Types.bodyMass, direction: .read, decision: .granted)
            if grantedToOtherApp {
                _ = try await runner.requestAuthorization(toShare: [], read: [Types.heartRate])
                try await owner.decideAuthorization(app: run.bundleIdentifier, type: Types.heartRate, direction: .read, decision: .granted)
            }
            #expect(try await app.object(with: weight.uuid) == weight)
            #expect(try await app.object(with: heart.uuid) == nil)
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.heartRate)).isEmpty)
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.bodyMass)).map(\.uuid) == [weight.uuid])
            #expect(try await runner.object(with: heart.uuid) == (grantedToOtherApp ? heart : nil))
            #expect(try await runner.object(with: weight.uuid) == nil)
            for store in [owner, app, runner] { await store.close() }
        }
    }
}
