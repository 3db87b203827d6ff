import Foundation
import HealthLedgerSDK
import Ledger
import Testing

@Suite("Statistics over RPC", .timeLimit(.minutes(3)))
struct StatisticsRPCTests {
    static let steps = try! QuantityType("HKQuantityTypeIdentifierStepCount")

    static func steps(_ count: Double, hour: Double, minutes: Double = 30) -> HealthObject {
        let start = Samples.base.addingTimeInterval(hour * 3600)
        return .quantitySample(QuantitySample(type: steps, quantity: Quantity(count, .count), start: start, end: start.addingTimeInterval(minutes * 60)))
    }

    @Test("a watched collection sends the collection, then what each commit changes; a read-denied app follows its own")
    func watched() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let (_, credential) = try await server.addApp("com.example.pedometer", name: "Pedometer", share: [Self.steps.objectType])
            let app = server.client(credential)
            try await owner.save([Self.steps(100, hour: 1), Self.steps(50, hour: 30)])
            let query = StatisticsCollectionQueryDescriptor(
                type: Self.steps, range: DateInterval(start: Samples.base, duration: 3 * 86_400),
                intervals: try StatisticsIntervals(anchor: Samples.base, every: 1, .day, timeZone: .gmt), options: [.cumulativeSum, .separateBySource])
            var ownerUpdates = try await owner.statisticsCollectionUpdates(for: query).makeAsyncIterator()
            var appUpdates = try await app.statisticsCollectionUpdates(for: query).makeAsyncIterator()
            let initial = try #require(try await ownerUpdates.next())
            #expect(initial.statistics.map { $0.sumQuantity()?.value } == [100, 50])
            #expect(try #require(try await appUpdates.next()).statistics.isEmpty, "the app has no steps of its own yet")

            // The owner's save changes the owner's first day; the app's own save is the app's first update.
            let extra = Self.steps(20, hour: 2)
            try await owner.save(extra)
            #expect(try #require(try await ownerUpdates.next()).statistics.map { $0.sumQuantity()?.value } == [120, 50])
            try await app.save(Self.steps(7, hour: 50))
            let appSees = try #require(try await appUpdates.next())
            #expect(appSees.statistics.map { $0.sumQuantity()?.value } == [7], "only its own, not the owner's 120 and 50")
            #expect(appSees.statistics.first?.sources.map(\.bundleIdentifier) == ["com.example.pedometer"])
            let withApp = try #require(try await ownerUpdates.next())
            #expect(withApp.statistics.map { $0.sumQuantity()?.value } == [120, 50, 7])
            // A deletion that empties a day removes it from the collection.
            let mine = try #require(try await app.result(for: SampleQueryDescriptor(type: Self.steps.objectType)).first)
            #expect(try await app.delete([mine.uuid]) == 1)
            #expect(try #require(try await ownerUpdates.next()).statistics.map { $0.sumQuantity()?.value } == [120, 50])
            #expect(try #require(try await appUpdates.next()).statistics.isEmpty)
            #expect(try await owner.statisticsCollection(for: query).statistics.count == 2)
            for store in [owner, app] { await store.close() }
        }
    }

    @Test("revoking the read grant ends a watched collection")
    func revocation() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let (source, credential) = try await server.addApp("com.example.pedometer", name: "Pedometer", share: [Self.steps.objectType])
            let app = server.client(credential)
            try await owner.save(Self.steps(100, hour: 1))
            _ = try await app.requestAuthorization(toShare: [], read: [Self.steps.objectType])
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.steps.objectType, direction: .read, decision: .granted)
            let query = StatisticsCollectionQueryDescriptor(
                type: Self.steps, range: DateInterval(start: Samples.base, duration: 86_400),
                intervals: try StatisticsIntervals(anchor: Samples.base, every: 1, .hour, timeZone: .gmt), options: .cumulativeSum)
            var updates = try await app.statisticsCollectionUpdates(for: query).makeAsyncIterator()
            #expect(try #require(try await updates.next()).statistics.map { $0.sumQuantity()?.value } == [100])
            try await owner.decideAuthorization(app: source.bundleIdentifier, type: Self.steps.objectType, direction: .read, decision: .revoked)
            await expectRPCError(.permissionDenied, .authorizationDenied, "watched collection after revocation") { while try await updates.next() != nil {} }
            for store in [owner, app] { await store.close() }
        }
    }

    @Test("samples with the same start are ordered by save order on every path: the app's own, the owner's merged and per-source views agree")
    func ties() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let base = Samples.base
            func pulse(_ perSecond: Double, at offset: TimeInterval, lasting: TimeInterval = 0, uuid: String) -> HealthObject {
                .quantitySample(QuantitySample(
                    type: Samples.heartRate, quantity: try! Quantity(perSecond, "count/s"), start: base.addingTimeInterval(offset),
                    end: base.addingTimeInterval(offset + lasting), uuid: UUID(uuidString: uuid)!))
            }
            // An instant and a lasting sample share a start; the UUIDs order them the other way
            // round from their save order, which is the order that counts: the instant holds for
            // no time (the next sample starts with it), 30 holds 10 s, 20 holds the last 10 s.
            try await app.save([
                pulse(10, at: 0, uuid: "FFFFFFFF-0000-4000-8000-000000000000"), pulse(30, at: 0, lasting: 5, uuid: "00000000-0000-4000-8000-000000000000"),
            ])
            try await app.save(pulse(20, at: 10, uuid: "88888888-0000-4000-8000-000000000000"))
            let interval = DateInterval(start: base, duration: 20)
            func average(_ store: HealthStore, _ options: StatisticsOptions) async throws -> Statistics {
                try #require(try await store.statistics(for: StatisticsQueryDescriptor(type: Samples.heartRate, interval: interval, options: options)))
            }
            let unit = try HealthUnit("count/s")
            let own = try await average(app, .discreteAverage)
            let merged = try await average(owner, .discreteAverage)
            let separate = try await average(owner, [.discreteAverage, .separateBySource])
            #expect(try own.averageQuantity()?.doubleValue(for: unit) == 25)
            #expect(try merged.averageQuantity()?.doubleValue(for: unit) == 25)
            #expect(try separate.averageQuantity(for: TestServer.appSource)?.doubleValue(for: unit) == 25)
            #expect(try separate.averageQuantity()?.doubleValue(for: unit) == 25)
            let collection = try await owner.statisticsCollection(for: StatisticsCollectionQueryDescriptor(
                type: Samples.heartRate, range: interval, intervals: try StatisticsIntervals(anchor: base, every: 1, .minute, timeZone: .gmt),
                options: [.discreteAverage, .separateBySource]))
            // In a one-minute interval the last value holds to its end: (30·10 + 20·50) / 60.
            let minute = try #require(collection.statistics.first)
            #expect(try minute.averageQuantity(for: TestServer.appSource)?.doubleValue(for: unit) == minute.averageQuantity()?.doubleValue(for: unit))
            #expect(abs(try minute.averageQuantity()!.doubleValue(for: unit) - 1300.0 / 60) < 1e-9)
            for store in [app, owner] { await store.close() }
        }
    }
}
