import BenchmarkPeers
import Foundation
import HealthModel

/// A peer's figures for the scenarios it can do.
struct PeerFigures: Sendable {
    /// Ping p50 and 64 pipelined calls in flight, over the Unix socket and over TCP loopback:
    /// measured in HealthLedger's rounds (``RPCScenarios/run(_:peerConnections:)``).
    var pingUnixSocket: Figure?
    var pingTCP: Figure?
    var callsInFlightUnixSocket: Figure?
    var callsInFlightTCP: Figure?
    var batchedIngest: Figure?
    var concurrentSaves: Figure?
    var sequentialSaves: Figure?
    var hourlyAverage: Figure?
    var dailyMergedSteps: Figure?
    var anchoredPage: Figure?
    var rebuild: Figure?
    /// Set when the peer's merged daily sums differ from HealthLedger's.
    var mergeMismatch: String?
}

/// The TARGETS scenarios on a peer database, with the same samples, batches and concurrency
/// as HealthLedger's. The clients are blocking C libraries, so they run on threads of their own.
struct PeerScenarios {
    let peer: any PeerDatabase
    let workload: Workload
    let plan: Plan
    let sourcePriority: [String]
    /// HealthLedger's merged daily sums, which the peer's must equal.
    var expectedDailySums: [Double] = []

    func run() throws -> PeerFigures {
        var figures = PeerFigures()
        let clock = ContinuousClock()
        let (workload, plan, peer) = (self.workload, self.plan, self.peer)
        let connection = try peer.connect()

        // Batched ingest: 1,000 samples per transaction, 4 clients.
        var rates: [Double] = []
        let ingestConnections = try (0..<4).map { _ in Connection(try peer.connect()) }
        for round in 0..<plan.rounds {
            let first = round * plan.ingestPerRound
            let batches = plan.ingestPerRound / 1000
            let next = Counter()
            let started = clock.now
            try onThreads(4) { client in
                while let batch = next.take(below: batches) {
                    try ingestConnections[client].value.save((0..<1000).map { workload.ingest(first + batch * 1000 + $0).row })
                }
            }
            rates.append(Double(plan.ingestPerRound) / seconds(clock.now - started))
        }
        figures.batchedIngest = Figure(rates)
        print("  \(peer.name): batched ingest \(Int(figures.batchedIngest!.median)) samples/s")

        // 64 clients, a durable transaction per sample.
        let clients = try (0..<64).map { _ in Connection(try peer.connect()) }
        rates = []
        var base = 50_000_000
        for _ in 0..<plan.rounds {
            let total = plan.concurrentSaves
            let next = Counter()
            let first = base
            let started = clock.now
            try onThreads(64) { client in
                while let index = next.take(below: total) { try clients[client].value.save([workload.ingest(first + index).row]) }
            }
            base += total
            rates.append(Double(total) / seconds(clock.now - started))
        }
        figures.concurrentSaves = Figure(rates)
        print("  \(peer.name): 64 clients \(Int(figures.concurrentSaves!.median)) saves/s")

        rates = []
        for _ in 0..<plan.rounds {
            let started = clock.now
            for index in 0..<plan.sequentialSaves { try connection.save([workload.ingest(base + index).row]) }
            base += plan.sequentialSaves
            rates.append(Double(plan.sequentialSaves) / seconds(clock.now - started))
        }
        figures.sequentialSaves = Figure(rates)

        // Statistics: the same year of heart rate and steps.
        try load(ingestConnections, count: workload.minutes) { workload.minuteOfYear($0).row }
        for source in 0..<3 { try load(ingestConnections, count: workload.stepsPerSource) { workload.steps(source: source, $0).row } }
        let from = Int64(workload.year.start.timeIntervalSince1970) * 1_000_000
        let to = Int64(workload.year.end.timeIntervalSince1970) * 1_000_000
        var hourly: [Double] = []
        var daily: [Double] = []
        var sums: [Double] = []
        for _ in 0..<max(plan.rounds, 3) {
            var started = clock.now
            let averages = try connection.averages(type: workload.heartRate.identifier, from: from, to: to, bucket: 3_600_000_000)
            hourly.append(seconds(clock.now - started) * 1e3)
            guard averages.count == workload.days * 24 else { throw BenchFailure("\(peer.name): \(averages.count) hourly averages") }
            started = clock.now
            let steps = try connection.samples(type: workload.steps.identifier, overlapping: from, to)
            sums = PeerMerge.sums(of: steps, priority: sourcePriority, from: from, to: to, bucket: 86_400_000_000)
            daily.append(seconds(clock.now - started) * 1e3)
        }
        figures.hourlyAverage = Figure(hourly)
        figures.dailyMergedSteps = Figure(daily)
        if sums.count != expectedDailySums.count {
            figures.mergeMismatch = "\(sums.count) days, HealthLedger \(expectedDailySums.count)"
        } else if let day = sums.indices.first(where: { abs(sums[$0] - expectedDailySums[$0]) > 1e-6 * max(1, abs(expectedDailySums[$0])) }) {
            figures.mergeMismatch = "day \(day): \(sums[day]) against \(expectedDailySums[day])"
        }

        // Anchored pages of the resting heart rate, walked from the beginning.
        try load([ingestConnections[0]], count: plan.pageSamples) { workload.resting($0).row }
        var p50s: [Double] = []
        for _ in 0..<plan.rounds {
            var anchor: Int64 = 0
            var times: [Double] = []
            for _ in 0..<plan.ownerPages {
                let started = clock.now
                let page = try connection.changes(type: workload.restingHeartRate.identifier, after: anchor, limit: 1000)
                times.append(seconds(clock.now - started) * 1e3)
                guard page.samples.count == 1000 else { throw BenchFailure("\(peer.name): a short page") }
                anchor = page.anchor
            }
            p50s.append(percentile(times.sorted(), 0.5))
        }
        figures.anchoredPage = Figure(p50s)

        // Replay: the samples table rebuilt from the events table.
        rates = []
        for _ in 0..<max(1, plan.rounds / 2) {
            let started = clock.now
            let events = try connection.rebuildProjection()
            rates.append(Double(events) / seconds(clock.now - started))
        }
        figures.rebuild = Figure(rates)
        return figures
    }

    /// Saves `count` rows in transactions of 1,000, one client per connection.
    private func load(_ connections: [Connection], count: Int, _ row: @escaping @Sendable (Int) -> PeerSample) throws {
        let next = Counter()
        let batches = (count + 999) / 1000
        try onThreads(connections.count) { client in
            while let batch = next.take(below: batches) {
                try connections[client].value.save((batch * 1000..<min(count, batch * 1000 + 1000)).map(row))
            }
        }
    }
}

/// A peer connection handed to one thread at a time.
final class Connection: @unchecked Sendable {
    let value: any PeerConnection
    init(_ value: any PeerConnection) { self.value = value }
}
