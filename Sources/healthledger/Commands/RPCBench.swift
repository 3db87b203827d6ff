import Foundation
import HealthLedgerSDK
import HealthLedgerServer
import Ledger
import Logging
import NIOCore

/// The RPC scenarios of `healthledger bench`: an in-process server on a loopback port,
/// driven through the SDK.
struct RPCBench {
    let store: LedgerStore
    let rounds: Int
    let reference: Reference
    let sample: @Sendable (Int) -> HealthObject

    func run(scenarios: (String) -> Bool) async throws {
        let ledger = try store.createLedger(id: "rpc")
        let credential = try await ledger.issueCredential(for: .owner)
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        let server = RPCServer(store: store, configuration: ServerConfiguration(port: 0), logger: logger)
        let port = try await server.start().port!
        defer { Task { await server.shutdown() } }
        let configuration = HealthStoreConfiguration(port: port, credential: credential)
        let client = HealthStore(configuration: configuration)
        _ = try await client.ping()
        let clock = ContinuousClock()

        if scenarios("rpc-ping") {
            var p50s: [Double] = []
            var p99s: [Double] = []
            for _ in 0..<rounds {
                var samples: [Double] = []
                for _ in 0..<5000 {
                    let started = clock.now
                    _ = try await client.ping()
                    samples.append(seconds(clock.now - started) * 1e6)
                }
                samples.sort()
                p50s.append(samples[samples.count / 2])
                p99s.append(samples[samples.count * 99 / 100])
            }
            var line = String(format: "RESULT rpc ping round trip, one connection: p50 %.1f µs, p99 %.1f µs", median(p50s), median(p99s))
            if let tcp = reference.pingPongMicroseconds { line += String(format: " | raw TCP ping-pong %.1f µs | ratio %.2f", tcp, median(p50s) / tcp) }
            print(line)
        }

        if scenarios("rpc-calls") {
            var rates: [Double] = []
            for _ in 0..<rounds {
                let total = 50_000
                let next = Counter()
                let started = clock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<64 {
                        group.addTask { while next.take(below: total) != nil { _ = try await client.ping() } }
                    }
                    try await group.waitForAll()
                }
                rates.append(Double(total) / seconds(clock.now - started))
            }
            print("RESULT rpc calls, 64 in flight on one connection: median \(Int(median(rates))) calls/s")
        }

        if scenarios("rpc-ingest") {
            var rates: [Double] = []
            var base = 10_000_000
            for _ in 0..<rounds {
                let total = 200_000
                let batches = total / 1000
                let next = Counter()
                let first = base
                let started = clock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 {
                        group.addTask {
                            while let batch = next.take(below: batches) {
                                try await client.save((0..<1000).map { sample(first + batch * 1000 + $0) })
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                base += total
                rates.append(Double(total) / seconds(clock.now - started))
            }
            var line = "RESULT rpc batched ingest (1,000/call, durable, 4 calls in flight): median \(Int(median(rates))) samples/s"
            if let raw = reference.batchedAppends { line += String(format: " | raw LMDB 1000/commit %d/s | ratio %.3f", Int(raw), median(rates) / raw) }
            print(line)
        }

        if scenarios("rpc-concurrent") {
            let clients = (0..<64).map { _ in HealthStore(configuration: configuration) }
            for store in clients { _ = try await store.ping() }
            var rates: [Double] = []
            var base = 50_000_000
            for _ in 0..<rounds {
                let total = 20_000
                let next = Counter()
                let first = base
                let started = clock.now
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in clients {
                        group.addTask { while let index = next.take(below: total) { try await store.save(sample(first + index)) } }
                    }
                    try await group.waitForAll()
                }
                base += total
                rates.append(Double(total) / seconds(clock.now - started))
            }
            for store in clients { await store.close() }
            var line = "RESULT rpc 64 clients, single-sample saves: median \(Int(median(rates))) saves/s"
            if let raw = reference.singleCommits { line += String(format: " | raw LMDB 1/commit %d/s | ratio %.2f", Int(raw), median(rates) / raw) }
            print(line)
        }
        if scenarios("rpc-changes") {
            try await anchoredPages(ledger: ledger, client: client, port: port)
        }
        if scenarios("rpc-stats") {
            try await statisticsCollections(port: port)
        }
        await client.close()
        await server.shutdown()
    }

    /// TARGETS' statistics collections over RPC: a year of per-minute heart rate averaged
    /// per hour, and a year of step counts from three overlapping sources summed per day.
    private func statisticsCollections(port: Int) async throws {
        let ledger = try store.createLedger(id: "rpc-stats")
        let client = HealthStore(configuration: HealthStoreConfiguration(port: port, credential: try await ledger.issueCredential(for: .owner)))
        let heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
        let bpm = try HealthUnit("count/min")
        let year = DateInterval(start: Date(timeIntervalSince1970: 1_704_067_200), duration: 365 * 86_400)  // 2024-01-01
        let minutes = 525_600
        for first in stride(from: 0, to: minutes, by: 10_000) {
            _ = try await ledger.save((first..<min(first + 10_000, minutes)).map { minute in
                let date = year.start.addingTimeInterval(Double(minute) * 60)
                return .quantitySample(QuantitySample(type: heartRate, quantity: Quantity(Double(55 + minute % 90), bpm), start: date, end: date))
            }, by: .owner)
        }
        // Three sources, each with a sample every 10 minutes lasting 10 to 15 minutes: they overlap.
        for (offset, bundle) in ["com.example.watch", "com.example.phone", "com.example.ring"].enumerated() {
            let revision = SourceRevision(source: Source(bundleIdentifier: bundle, name: bundle))
            let count = 365 * 144
            for first in stride(from: 0, to: count, by: 10_000) {
                _ = try await ledger.save((first..<min(first + 10_000, count)).map { index in
                    let start = year.start.addingTimeInterval(Double(index) * 600 + Double(offset) * 120)
                    return .quantitySample(QuantitySample(
                        type: steps, quantity: Quantity(Double(100 + index % 50), .count), start: start, end: start.addingTimeInterval(600 + Double(offset) * 150),
                        sourceRevision: revision))
                }, by: .owner)
            }
        }
        let utc = TimeZone(identifier: "UTC")!
        let hourly = StatisticsCollectionQueryDescriptor(
            type: heartRate, range: year, intervals: try StatisticsIntervals(anchor: year.start, every: 1, .hour, timeZone: utc), options: .discreteAverage)
        let daily = StatisticsCollectionQueryDescriptor(
            type: steps, range: year, intervals: try StatisticsIntervals(anchor: year.start, every: 1, .day, timeZone: utc), options: .cumulativeSum)
        let clock = ContinuousClock()
        for (name, query, expected) in [("hourly average heart rate, a year of per-minute samples", hourly, 8760), ("daily steps merged across 3 sources, a year", daily, 365)] {
            var times: [Double] = []
            var inProcess: [Double] = []
            for _ in 0..<max(rounds, 3) {
                var started = clock.now
                let collection = try await client.statisticsCollection(for: query)
                times.append(seconds(clock.now - started) * 1e3)
                guard collection.statistics.count == expected else { throw ValidationErrorExit("\(name): \(collection.statistics.count) intervals, not \(expected)") }
                started = clock.now
                _ = try ledger.statisticsCollection(query, as: .owner)
                inProcess.append(seconds(clock.now - started) * 1e3)
            }
            print(String(
                format: "RESULT rpc statistics collection, %@: median %.1f ms (the ledger alone %.1f ms) | PostgreSQL reference (TARGETS, not measured here) 260 ms",
                name, median(times), median(inProcess)))
        }
        await client.close()
    }

    /// Anchored query pages of 1,000 changes over RPC, walked from the beginning: the owner's
    /// (every source's changes), and a read-denied app's (its own changes, interleaved with
    /// ten times as many of others').
    private func anchoredPages(ledger: Ledger, client: HealthStore, port: Int) async throws {
        let heartRate = try ObjectType("HKQuantityTypeIdentifierHeartRate")
        let app = Source(bundleIdentifier: "com.example.bench", name: "Bench")
        try await ledger.requestAuthorization(toShare: [heartRate], read: [heartRate], by: .app(app))
        try await ledger.decideAuthorization(app: app.bundleIdentifier, type: heartRate, direction: .share, decision: .granted, by: .owner)
        try await ledger.decideAuthorization(app: app.bundleIdentifier, type: heartRate, direction: .read, decision: .denied, by: .owner)
        let appClient = HealthStore(configuration: HealthStoreConfiguration(port: port, credential: try await ledger.issueCredential(for: .app(app))))
        // 10 owner batches for each app batch, so the app's changes are spread through the log.
        for batch in 0..<110 {
            let objects = (0..<1000).map { sample(90_000_000 + batch * 1000 + $0) }
            _ = try await ledger.save(objects, by: batch % 11 == 10 ? .app(app) : .owner)
        }
        let clock = ContinuousClock()
        func walk(_ store: HealthStore, pages: Int) async throws -> [Double] {
            var anchor: QueryAnchor?
            var times: [Double] = []
            for _ in 0..<pages {
                let started = clock.now
                let page = try await store.result(for: AnchoredObjectQueryDescriptor(type: heartRate, anchor: anchor, limit: 1000, batchSize: 1000))
                times.append(seconds(clock.now - started) * 1e3)
                guard page.addedObjects.count + page.deletedObjects.count == 1000 else { throw ValidationErrorExit("a short page") }
                anchor = page.newAnchor
            }
            return times
        }
        var ownerP50s: [Double] = []
        var appP50s: [Double] = []
        for _ in 0..<rounds {
            let owner = try await walk(client, pages: 100).sorted()
            let own = try await walk(appClient, pages: 10).sorted()
            ownerP50s.append(owner[owner.count / 2])
            appP50s.append(own[own.count / 2])
        }
        await appClient.close()
        var line = String(format: "RESULT rpc anchored query, pages of 1,000 changes: owner p50 %.2f ms, read-denied app (own changes among 10× others') p50 %.2f ms", median(ownerP50s), median(appP50s))
        if let tcp = reference.pingPongMicroseconds { line += String(format: " | raw TCP ping-pong %.1f µs | owner page = %.0f round trips", tcp, median(ownerP50s) * 1000 / tcp) }
        print(line)
    }
}
