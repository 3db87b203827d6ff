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
        let server = try await TestServer()
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
        await server.stop()
    }

    @Test("revoking the read grant ends a watched collection")
    func revocation() async throws {
        let server = try await TestServer()
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
        await server.stop()
    }
}
