import Foundation
import HealthModel
import Ledger

/// The `denied-read` scenario of `healthledger-bench ledger`: what a read-denied app's reads cost
/// alone in a ledger, and next to a crowd of other sources' samples of the same type.
/// The cost must not depend on the crowd (TARGETS: no count, error or timing difference
/// reveals others' data), so each read is reported as a ratio crowded / alone.
struct PrivacyBench {
    let store: LedgerStore
    let rounds: Int
    /// The app's own samples.
    let own: Int
    /// Other sources' samples in the crowded ledger.
    let others: Int

    static let app = Source(bundleIdentifier: "com.example.bench", name: "Bench")

    func run() async throws {
        let type = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        let unit = try HealthUnit("count/min")
        let base = Date(timeIntervalSince1970: 1_600_000_000)
        // The app's samples spread over the crowd's span: one every `spacing` minutes.
        let spacing = max(1, others / max(own, 1))
        func sample(minute: Int) -> HealthObject {
            let date = base.addingTimeInterval(Double(minute) * 60)
            return .quantitySample(QuantitySample(type: type, quantity: Quantity(Double(50 + minute % 120), unit), start: date, end: date))
        }
        let ownSamples = (0..<own).map { sample(minute: $0 * spacing) }
        let hiddenUUID = UUID.timeOrdered()
        // The owner's workout spanning everything, every sample associated with it.
        let workout = Workout(
            configuration: WorkoutConfiguration(activityType: .running), start: base,
            end: base.addingTimeInterval(Double(max(others, own * spacing) + 1) * 60))

        print("== denied-read: an app without read authorization, \(own) samples of its own, alone and among \(others) of other sources")
        let alone = try await ledger("denied-alone", ownSamples, others: [], workout: workout)
        let crowd = (0..<others).lazy.map { index -> HealthObject in
            let date = base.addingTimeInterval(Double(index) * 60 + 30)
            return .quantitySample(QuantitySample(
                type: type, quantity: Quantity(Double(60 + index % 100), unit), start: date, end: date,
                uuid: index == others / 2 ? hiddenUUID : .timeOrdered()))
        }
        let crowded = try await ledger("denied-crowded", ownSamples, others: crowd, workout: workout)

        let app = Principal.app(Self.app)
        let middle = base.addingTimeInterval(Double(own * spacing / 2) * 60)
        /// 100 fetches of `uuid`; the answer counts those that found nothing.
        func fetches(_ uuid: UUID) -> @Sendable (Ledger) throws -> Int {
            { ledger in (0..<100).reduce(0) { count, _ in count + ((try? ledger.object(with: uuid, as: app)) == nil ? 1 : 0) } }
        }
        let reads: [(String, @Sendable (Ledger) throws -> Int)] = [
            ("sample query, all its own", { try $0.samples(SampleQuery(type: type.objectType), as: app).count }),
            ("sample query, limit 10, start descending", {
                try $0.samples(SampleQuery(type: type.objectType, limit: 10, sort: .startDate(ascending: false)), as: app).count
            }),
            ("sample query, limit 10, end ascending", {
                try $0.samples(SampleQuery(type: type.objectType, limit: 10, sort: .endDate(ascending: true)), as: app).count
            }),
            ("sample query, one day in the middle", {
                try $0.samples(SampleQuery(type: type.objectType, interval: DateInterval(start: middle, duration: 86_400)), as: app).count
            }),
            ("anchored query, all its own changes", { try $0.changes(ChangeQuery(type: type.objectType), as: app).count }),
            ("anchored query, limit 10", { try $0.changes(ChangeQuery(type: type.objectType, limit: 10), as: app).count }),
            ("observer check, nothing new", { ledger in
                let latest = try ledger.latestAnchor(for: type.objectType, as: app)
                return try ledger.hasChanges(ChangeQuery(type: type.objectType, anchor: latest), as: app).changed ? 1 : 0
            }),
            ("workout statistics, every sample associated", { try $0.workoutStatistics(for: workout.uuid, as: app)?.workout.count ?? -1 }),
            ("samples associated with the workout", { try $0.samples(SampleQuery(type: type.objectType, predicate: .associatedWithWorkout(workout.uuid)), as: app).count }),
            ("workouts whose maximum heart rate > 100 count/min", {
                let fast = WorkoutPredicate.statistic(type, .maximum, .greater, Quantity(100, unit))
                return try $0.samples(SampleQuery(type: .workout, predicate: .workout(fast)), as: app).count
            }),
            ("fetch another source's UUID (crowded) / an unknown one (alone)", fetches(hiddenUUID)),
            // Predicates that would match the others' samples, or name them outright.
            ("source predicate naming the owner and itself", {
                try $0.samples(SampleQuery(type: type.objectType, predicate: .sources([Source.owner.bundleIdentifier, Self.app.bundleIdentifier])), as: app).count
            }),
            ("UUID predicate, its own 100 and another source's", {
                try $0.samples(SampleQuery(type: type.objectType, predicate: .uuids(Set(ownSamples.prefix(100).map(\.uuid) + [hiddenUUID]))), as: app).count
            }),
            ("quantity predicate > 100 count/min, limit 10", {
                try $0.samples(SampleQuery(type: type.objectType, predicate: .quantity(.greater, Quantity(100, unit)), limit: 10), as: app).count
            }),
            ("statistics with a quantity predicate", {
                try $0.statistics(StatisticsQuery(type: type, options: .discreteMax, predicate: .quantity(.greater, Quantity(100, unit))), as: app) == nil ? 0 : 1
            }),
        ]
        let clock = ContinuousClock()
        /// The median duration of a read and what it answered.
        func timed(_ ledger: Ledger, _ read: (Ledger) throws -> Int) throws -> (microseconds: Double, answer: Int) {
            var durations: [Double] = []
            var answer = 0
            for _ in 0..<max(rounds * 20, 20) {
                let started = clock.now
                answer = try read(ledger)
                durations.append(seconds(clock.now - started) * 1e6)
            }
            return (median(durations), answer)
        }
        for (name, read) in reads {
            let lone = try timed(alone, read)
            let among = try timed(crowded, read)
            guard lone.answer == among.answer else { throw BenchFailure("\(name): the crowded ledger answered differently") }
            print(String(
                format: "RESULT denied read, %@: median %.1f µs among %d others | alone %.1f µs | ratio %.2f",
                name, among.microseconds, others, lone.microseconds, among.microseconds / lone.microseconds))
        }
        // What an app could compare itself: in one ledger, another source's UUID against one
        // never used (100 fetches each).
        let unknownUUID = UUID.timeOrdered()
        let hidden = try timed(crowded, fetches(hiddenUUID))
        let unknown = try timed(crowded, fetches(unknownUUID))
        print(String(
            format: "RESULT denied read, 100 fetches in one ledger: another source's UUID median %.1f µs | an unknown UUID %.1f µs | ratio %.2f",
            hidden.microseconds, unknown.microseconds, hidden.microseconds / unknown.microseconds))
    }

    /// A ledger where the app may share heart rate but never asked to read it (it reads
    /// workouts), holding its samples and the owner's `others`, all associated with the
    /// owner's `workout`.
    private func ledger(_ id: String, _ own: [HealthObject], others: some Sequence<HealthObject>, workout: Workout) async throws -> Ledger {
        let ledger = try store.createLedger(id: id)
        let app = Principal.app(Self.app)
        let heartRate = own.first!.objectType
        try await ledger.requestAuthorization(toShare: [heartRate], read: [.workout], by: app)
        try await ledger.decideAuthorization(app: Self.app.bundleIdentifier, type: heartRate, direction: .share, decision: .granted, by: .owner)
        try await ledger.decideAuthorization(app: Self.app.bundleIdentifier, type: .workout, direction: .read, decision: .granted, by: .owner)
        _ = try await ledger.save([.workout(workout)], by: .owner)
        var batch: [HealthObject] = []
        for object in others {
            batch.append(object)
            if batch.count == Ledger.maximumAssociatedSamples {
                _ = try await ledger.save(batch, by: .owner)
                try await ledger.associate(batch.map(\.uuid), with: workout.uuid, by: .owner)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty {
            _ = try await ledger.save(batch, by: .owner)
            try await ledger.associate(batch.map(\.uuid), with: workout.uuid, by: .owner)
        }
        _ = try await ledger.save(own, by: app)
        try await ledger.associate(own.map(\.uuid), with: workout.uuid, by: .owner)
        return ledger
    }
}
