import Foundation
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import Testing

/// Anchored object queries, watched queries and observers through the SDK and a real server.
@Suite("Anchored queries and observers over RPC", .timeLimit(.minutes(3)))
struct ChangeQueryRPCTests {
    @Test("one-shot pages chain by anchor; batches, limits and hasMore; bad anchors are refused")
    func oneShot() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let samples = (0..<1_200).map { Samples.heartRate(Double(60 + $0 % 50), at: Double($0) * 60) }
            try await owner.save(samples)
            #expect(try await owner.delete([samples[0].uuid, samples[1].uuid]) == 2)

            let all = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, batchSize: 100))
            #expect(all.addedObjects.map(\.uuid) == samples.dropFirst(2).map(\.uuid))
            #expect(Set(all.deletedObjects.map(\.uuid)) == [samples[0].uuid, samples[1].uuid])
            #expect(!all.hasMore && all.caughtUp)
            #expect(try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: all.newAnchor)).addedObjects.isEmpty)

            // A limit pages: 1,200 changes in pages of 500, 500, 200.
            var anchor: QueryAnchor?
            var seen: [UUID] = []
            var pages: [(Int, Bool)] = []
            repeat {
                let page = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: anchor, limit: 500, batchSize: 64))
                seen += page.addedObjects.map(\.uuid) + page.deletedObjects.map(\.uuid)
                pages.append((page.addedObjects.count + page.deletedObjects.count, page.hasMore))
                anchor = page.newAnchor
            } while pages.last!.1
            #expect(pages.map(\.0) == [500, 500, 200] && pages.map(\.1) == [true, true, false])
            #expect(Set(seen).count == 1_200)

            // Later changes, after the saved anchor only.
            let later = Samples.heartRate(70, at: -60)
            try await owner.save(later)
            let next = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: anchor))
            #expect(next.addedObjects == [later] && next.deletedObjects.isEmpty)

            // Anchors are opaque and bound to their ledger and type.
            await expectRPCError(.invalidArgument, .invalidArgument, "garbage anchor") {
                _ = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: QueryAnchor(bytes: [1, 2, 3])))
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "another type's anchor") {
                _ = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.bodyMass, anchor: anchor))
            }
            let otherLedger = try server.store.createLedger(id: "bob")
            let bob = server.client(try await otherLedger.issueCredential(for: .owner))
            await expectRPCError(.invalidArgument, .invalidArgument, "another ledger's anchor") {
                _ = try await bob.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: anchor))
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "watch with a limit") {
                for try await _ in try await owner.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, limit: 5)) {}
            }
            for store in [owner, bob] { await store.close() }
        }
    }

    @Test("equal dates are ordered by UUID bytes: ascending for an ascending sort, descending for a descending one")
    func tieBreaks() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let same = (0..<6).map { _ in Samples.heartRate(60, at: 0) }
            try await owner.save(same)
            let ascending = same.map(\.uuid).sorted { $0.uuidString < $1.uuidString }
            for (sort, expected) in [
                (SampleQueryDescriptor.Sort.startDate(ascending: true), ascending), (.startDate(ascending: false), ascending.reversed()),
                (.endDate(ascending: true), ascending), (.endDate(ascending: false), ascending.reversed()),
            ] {
                #expect(try await owner.result(for: SampleQueryDescriptor(type: Types.heartRate, sort: sort)).map(\.uuid) == Array(expected), "\(sort)")
            }
            await owner.close()
        }
    }

    @Test("an anchor resumes only a query over its own types; the message says which case it is")
    func anchorOfOtherTypes() async throws {
        try await withTestServer { server in
            let owner = server.client()
            try await owner.save(Samples.heartRate(60, at: 0))
            let anchor = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)).newAnchor
            let one = await expectRPCError(.invalidArgument, .invalidArgument, "one other type") {
                _ = try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.bodyMass, anchor: anchor))
            }
            #expect(one?.message == "the anchor was issued for another type")
            let several = await expectRPCError(.invalidArgument, .invalidArgument, "other types") {
                _ = try await owner.result(for: AnchoredObjectQueryDescriptor(
                    descriptors: [QueryDescriptor(type: Types.heartRate), QueryDescriptor(type: Types.bodyMass)], anchor: anchor))
            }
            #expect(several?.message == "the anchor was issued for other types")
            await owner.close()
        }
    }

    @Test("a watched query streams the initial changes, then each commit's, with no deadline")
    func watched() async throws {
        try await withTestServer(configuration: ServerConfiguration(port: 0, drainTimeout: .seconds(600))) { server in
            // The watch goes through a store whose calls have a 300 ms deadline; the other calls
            // through one with the default (a loaded machine can take longer than 300 ms for them).
            let hurried = HealthStore(configuration: .init(port: server.port, credential: server.ownerCredential, timeout: .milliseconds(300)))
            let owner = server.client()
            let first = (0..<30).map { Samples.heartRate(60, at: Double($0)) }
            try await owner.save(first)
            var iterator = try await hurried.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, batchSize: 20)).makeAsyncIterator()
            var initial: [UUID] = []
            while true {
                let batch = try #require(try await iterator.next())
                initial += batch.addedObjects.map(\.uuid)
                if batch.caughtUp { break }
            }
            #expect(initial == first.map(\.uuid))

            // Past the calls' 300 ms deadline: a long-running call has none.
            try await Task.sleep(for: .milliseconds(500))
            let second = Samples.heartRate(61, at: 100)
            try await owner.save(second)
            let update = try #require(try await iterator.next())
            #expect(update.addedObjects == [second] && update.deletedObjects.isEmpty && update.caughtUp)
            #expect(try await owner.delete([first[3].uuid]) == 1)
            let deletion = try #require(try await iterator.next())
            #expect(deletion.addedObjects.isEmpty && deletion.deletedObjects.map(\.uuid) == [first[3].uuid])
            // Another type's commits send nothing; the next heart-rate one arrives alone.
            try await owner.save(HealthObject.quantitySample(QuantitySample(
                type: try QuantityType(Types.bodyMass.identifier), quantity: try Quantity(70, "kg"), start: Samples.base, end: Samples.base)))
            let third = Samples.heartRate(62, at: 200)
            try await owner.save(third)
            #expect(try #require(try await iterator.next()).addedObjects == [third])
            // Resuming from the last anchor finds nothing new.
            #expect(try await owner.result(for: AnchoredObjectQueryDescriptor(type: Types.heartRate, anchor: deletion.newAnchor)).addedObjects == [third])
            // A shutdown ends the watch at once with `unavailable`, not after the drain timeout.
            let clock = ContinuousClock()
            let started = clock.now
            await server.stop()
            #expect(clock.now - started < .seconds(300), "long before the 600 s drain timeout")
            let error = await expectRPCError(.unavailable, nil, "watch at shutdown") { while try await iterator.next() != nil {} }
            #expect(error?.message == "the server is shutting down; call again (from the last anchor) once it is back")
            await hurried.close()
            await owner.close()
        }
    }

    @Test("an observer is registered when observe returns and reports what its caller may read")
    func observer() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let updates = try await owner.observe(Types.heartRate)
            var ownerUpdates = updates.makeAsyncIterator()
            let appObserver = try await app.observe(Types.heartRate)
            var appUpdates = appObserver.makeAsyncIterator()
            // Narrowed to an interval the samples below fall outside of.
            let narrow = try await owner.observe(Types.heartRate, overlapping: DateInterval(start: Samples.base.addingTimeInterval(-7_200), duration: 60))
            var narrowUpdates = narrow.makeAsyncIterator()

            try await owner.save(Samples.heartRate(70, at: 0))
            #expect(try await ownerUpdates.next() != nil)
            // The app may not read heart rate: the owner's save is not its business; its own is.
            try await app.save(Samples.heartRate(71, at: 60))
            #expect(try await appUpdates.next() != nil)
            #expect(try await ownerUpdates.next() != nil)
            #expect(try await Self.nothingWithin(.milliseconds(300), &appUpdates), "the app heard of the owner's save")
            #expect(try await Self.nothingWithin(.milliseconds(100), &narrowUpdates), "an update outside the observer's interval")
            for store in [owner, app] { await store.close() }
        }
    }

    @Test("cancelled observers and watches leave nothing registered behind")
    func cancelledStreamsUnregister() async throws {
        try await withTestServer { server in
            let app = server.client(server.appCredential)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        if index % 2 == 0 {
                            for try await _ in try await app.observe(Types.heartRate) {}
                        } else {
                            for try await _ in try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.heartRate)) {}
                        }
                    }
                }
                // All 20 registered (each has had its first message or is about to). No time bound:
                // the suite's time limit ends a hang, and a loaded machine may take a while.
                while server.ledger.changeWatchers.count < 20 { try await Task.sleep(for: .milliseconds(10)) }
                #expect(server.ledger.changeWatchers.count == 20)
                group.cancelAll()
            }
            while server.ledger.changeWatchers.count > 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(server.ledger.changeWatchers.count == 0)
            #expect(try await app.ping().principal == "app com.example.walk", "the connection still serves")
            await app.close()
        }
    }

    /// Whether no update arrives within `duration`. Ends the observer's call either way.
    static func nothingWithin(_ duration: Duration, _ iterator: inout ObserverUpdates.AsyncIterator) async throws -> Bool {
        let waiting = iterator
        return try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                var iterator = waiting
                return try await iterator.next() == nil
            }
            group.addTask {
                try await Task.sleep(for: duration)
                return true
            }
            let first = try await group.next()!
            group.cancelAll()
            return first
        }
    }
}
