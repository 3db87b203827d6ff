import Foundation
import HealthModel
import LMDB
import LedgerSchema

extension Ledger {
    /// Most intervals one collection query computes.
    public static let maximumStatisticsIntervals = 100_000
    /// Most (sample, interval) pairs one collection query computes: a sample counts once per
    /// interval it overlaps.
    public static let maximumStatisticsMemberships = 4_000_000

    /// Statistics over the samples `principal` may read (docs/SEMANTICS.md §7): for an app without
    /// read authorization, its own samples only, computed as if no one else's existed.
    ///
    /// - Returns: nil when no sample matches.
    /// - Throws: ``HealthError`` `invalidArgument` for options that do not fit the type.
    public func statistics(_ query: StatisticsQuery, as principal: Principal) throws -> Statistics? {
        try statistics(query, as: principal, computation: .fastest)
    }

    /// ``statistics(_:as:)``, computed as `computation` says.
    func statistics(_ query: StatisticsQuery, as principal: Principal, computation: StatisticsComputation) throws -> Statistics? {
        try query.options.validate(for: query.type)
        if let interval = query.interval {
            // Open ends (distant past or future) are fine; other dates must be calendar dates.
            for date in [interval.start, interval.end] where date != .distantPast && date != .distantFuture {
                guard StatisticsIntervals.supported.contains(date) else {
                    throw HealthError.invalidArgument("the interval must lie in the years 1 to 9999", field: "interval")
                }
            }
        }
        let range = TimeRange(query.interval)
        guard range.start <= range.end else { throw HealthError.invalidArgument("the interval ends before it starts", field: "interval") }
        try query.predicate?.validate(for: query.type.objectType)
        return try read { snapshot in
            let engine = try StatisticsEngine(
                type: query.type, options: query.options, principal: principal, wholeBuckets: computation == .wholeBuckets, in: snapshot)
            if let interval = query.interval {
                return try statistics(engine, buckets: [interval], predicate: query.predicate, as: principal, rollups: computation == .fastest, in: snapshot).first
            }
            let samples = try statisticsSamples(engine, overlapping: range, predicate: query.predicate, as: principal, in: snapshot)
            guard !samples.isEmpty else { return nil }
            return engine.statistics(samples[...], bucket: (range.start, range.end), dates: nil)
        }
    }

    /// Statistics per interval of a collection, for the intervals holding samples
    /// `principal` may read, in order.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` for options that do not fit the type, a
    ///   range that ends before it starts, or more than
    ///   ``maximumStatisticsIntervals`` intervals.
    ///
    /// - Parameter onScope: told the read scope of the query's snapshot.
    public func statisticsCollection(
        _ query: StatisticsCollectionQuery, as principal: Principal, onScope: (ReadScope) -> Void = { _ in }
    ) throws -> [Statistics] {
        try statisticsCollection(query, as: principal, computation: .fastest, onScope: onScope)
    }

    /// ``statisticsCollection(_:as:onScope:)``, computed as `computation` says.
    func statisticsCollection(
        _ query: StatisticsCollectionQuery, as principal: Principal, computation: StatisticsComputation, onScope: (ReadScope) -> Void = { _ in }
    ) throws -> [Statistics] {
        try query.options.validate(for: query.type)
        try query.predicate?.validate(for: query.type.objectType)
        guard StatisticsIntervals.supported.contains(query.range.start), StatisticsIntervals.supported.contains(query.range.end) else {
            throw HealthError.invalidArgument("the range must lie in the years 1 to 9999", field: "interval")
        }
        let buckets = query.intervals.intervals(from: query.range.start, to: query.range.end, limit: Self.maximumStatisticsIntervals + 1)
        guard buckets.count <= Self.maximumStatisticsIntervals else {
            throw HealthError.invalidArgument("the range holds more than \(Self.maximumStatisticsIntervals) intervals", field: "interval")
        }
        // The range lies in the supported years; an interval holding its edge may not.
        if let first = buckets.first, let last = buckets.last,
            !StatisticsIntervals.supported.contains(first.start) || !StatisticsIntervals.supported.contains(last.end)
        {
            throw HealthError.invalidArgument(
                "the intervals holding the range run from \(first.start.formatted(.iso8601)) to \(last.end.formatted(.iso8601)), beyond the years 1 to 9999: choose a nearer anchor or shorter intervals",
                field: "interval")
        }
        return try read { snapshot in
            let engine = try StatisticsEngine(
                type: query.type, options: query.options, principal: principal, wholeBuckets: computation == .wholeBuckets, in: snapshot)
            onScope(engine.scope)
            return try statistics(engine, buckets: buckets, predicate: query.predicate, as: principal, rollups: computation == .fastest, in: snapshot)
        }
    }

    /// How many buckets a query answers from rollups before it reads the rows of the rest.
    static let rollupProbe = 16

    /// Statistics per bucket, in order, for the buckets holding samples: from the rollups
    /// where they answer a bucket exactly, from the samples elsewhere.
    private func statistics(
        _ engine: StatisticsEngine, buckets: [DateInterval], predicate: ObjectPredicate?, as principal: Principal, rollups: Bool, in snapshot: LedgerSnapshot
    ) throws -> [Statistics] {
        let bounds = buckets.map { (start: microseconds($0.start), end: microseconds($0.end)) }
        guard !bounds.isEmpty else { return [] }
        var results = [Statistics?](repeating: nil, count: bounds.count)
        var answered = [Bool](repeating: false, count: bounds.count)
        if rollups, predicate == nil {
            // The latest end of the samples starting in the hours read so far.
            var reach = Int64.min
            var chunk = 0..<min(Self.rollupProbe, bounds.count)
            while !chunk.isEmpty,
                let (rows, open) = try engine.rollups(
                    from: bounds[chunk.lowerBound].start, to: bounds[chunk.upperBound - 1].end, lookingBack: chunk.lowerBound == 0, in: snapshot)
            {
                var next = 0
                var useful = false
                for index in chunk {
                    let bucket = bounds[index]
                    while next < rows.count, rows[next].hour < bucket.start {
                        reach = max(reach, rows[next].partial.maxEnd)
                        next += 1
                    }
                    let inside = next
                    while next < rows.count, rows[next].hour < bucket.end { next += 1 }
                    let members = rows[inside..<next]
                    // Rows answer a bucket made of whole hours that no sample crosses into, out
                    // of or within, each hour holding one source's samples (several would merge),
                    // and out of reach of every open hour (which has no row).
                    let aligned = Rollups.hourStart(bucket.start) == bucket.start && Rollups.hourStart(bucket.end) == bucket.end
                    let closed = reach <= bucket.start && members.allSatisfy { $0.partial.maxEnd <= $0.hour + Rollups.hour }
                        && open.allSatisfy { bucket.end <= $0.start || $0.end <= bucket.start }
                    let single = zip(members, members.dropFirst()).allSatisfy { $0.hour != $1.hour }
                    for row in members { reach = max(reach, row.partial.maxEnd) }
                    guard aligned, closed, single else { continue }
                    answered[index] = true
                    if !members.isEmpty {
                        results[index] = engine.statistics(rows: members, bucket: bucket, dates: buckets[index])
                        useful = true
                    }
                }
                // Rows that answer none of the first buckets (samples crossing hours, or
                // sources sharing them) are not read for the rest: the samples will be.
                if chunk.lowerBound == 0, !useful, !rows.isEmpty { break }
                chunk = chunk.upperBound..<bounds.count
            }
        }
        // The other buckets, from their samples: one scan per run of neighbouring buckets.
        var memberships = 0
        var index = 0
        while index < bounds.count {
            guard !answered[index] else {
                index += 1
                continue
            }
            var end = index
            while end < bounds.count, !answered[end] { end += 1 }
            var walk = SampleBuckets(engine: engine, bounds: bounds, dates: buckets, run: index..<end, memberships: memberships)
            try visitStatisticsSamples(
                engine, overlapping: TimeRange(start: bounds[index].start, end: bounds[end - 1].end), predicate: predicate, as: principal, in: snapshot
            ) { sample in try walk.add(sample, into: &results) }
            try walk.finish(into: &results)
            memberships = walk.memberships
            index = end
        }
        return results.compactMap { $0 }
    }
}

extension Ledger {
    /// Visits the samples a statistics query counts in start order, equal starts in any
    /// order: the engine's scan as it reads, or with a predicate the samples
    /// ``statisticsSamples(_:overlapping:predicate:as:in:)`` gathers.
    func visitStatisticsSamples(
        _ engine: StatisticsEngine, overlapping range: TimeRange, predicate: ObjectPredicate?, as principal: Principal, in snapshot: LedgerSnapshot,
        _ visit: (StatisticsSample) throws -> Void
    ) throws {
        guard predicate == nil else {
            for sample in try statisticsSamples(engine, overlapping: range, predicate: predicate, as: principal, in: snapshot) { try visit(sample) }
            return
        }
        try engine.visitSamples(overlapping: range, in: snapshot, visit)
    }

    /// The samples a statistics query counts, in (start, save order): the engine's scan, or
    /// with a predicate the candidates its plan leaves, each checked against it.
    func statisticsSamples(
        _ engine: StatisticsEngine, overlapping range: TimeRange, predicate: ObjectPredicate?, as principal: Principal, in snapshot: LedgerSnapshot
    ) throws -> [StatisticsSample] {
        guard let predicate else { return try engine.samples(overlapping: range, in: snapshot) }
        let context = PredicateContext(principal: principal, snapshot: snapshot)
        let type = engine.type.objectType
        var samples: [StatisticsSample] = []
        try visitCandidates(
            of: type, plan: PredicatePlan(predicate, range: range.widenedForSeries), sort: .startDate(ascending: true), scope: engine.scope, context: context
        ) { entry in
            if range.counts(entry), try predicate.matches(EntrySubject(entry, context), type: type) {
                if entry.isSeries {
                    samples += try SeriesValues.samples(of: entry, overlapping: range, in: snapshot)
                } else {
                    samples.append(StatisticsSample(entry))
                }
            }
            return true
        }
        return StatisticsSample.ordered(samples)
    }
}

/// A run of neighbouring buckets computed from their samples in one pass over a scan in
/// start order: a bucket holds the samples starting in it, plus those carried over from
/// earlier buckets that still reach into it. The scan is consumed as it goes: only the
/// current bucket's samples and those carried are held, never the whole run's.
private struct SampleBuckets {
    let engine: StatisticsEngine
    let bounds: [(start: Int64, end: Int64)]
    let dates: [DateInterval]
    let run: Range<Int>
    /// Samples counted in the buckets so far, each once per bucket it overlaps (the query's
    /// whole count: it goes on from one run to the next).
    var memberships: Int
    private var position: Int
    private var carried: [StatisticsSample] = []
    /// The samples starting in the current bucket, as the scan gave them.
    private var fresh: [StatisticsSample] = []

    init(engine: StatisticsEngine, bounds: [(start: Int64, end: Int64)], dates: [DateInterval], run: Range<Int>, memberships: Int) {
        self.engine = engine
        self.bounds = bounds
        self.dates = dates
        self.run = run
        self.memberships = memberships
        position = run.lowerBound
    }

    /// The scan's next sample: closes the buckets it starts after.
    mutating func add(_ sample: StatisticsSample, into results: inout [Statistics?]) throws {
        while position < run.upperBound, sample.start >= bounds[position].end { try closeBucket(into: &results) }
        if position < run.upperBound { fresh.append(sample) }
    }

    /// Closes the run's remaining buckets once the scan has ended.
    mutating func finish(into results: inout [Statistics?]) throws {
        while position < run.upperBound { try closeBucket(into: &results) }
    }

    /// Computes the bucket at `position` from the samples gathered for it, and moves on.
    private mutating func closeBucket(into results: inout [Statistics?]) throws {
        let (start, end) = bounds[position]
        if !carried.isEmpty { carried.removeAll { $0.end <= start } }
        memberships += carried.count + fresh.count
        // Long samples over many buckets: bound the work (and memory) one collection may
        // ask (a single interval holds each sample once).
        guard bounds.count == 1 || memberships <= Ledger.maximumStatisticsMemberships else {
            throw HealthError(
                .dataSizeExceeded,
                "the query spreads more than \(Ledger.maximumStatisticsMemberships) samples over its intervals: narrow the range or widen the intervals",
                field: "interval")
        }
        do {
            // The scan orders equal starts by UUID; statistics by save order.
            let members = StatisticsSample.ordered(fresh)
            if carried.isEmpty {
                if !members.isEmpty { results[position] = engine.statistics(members[...], bucket: (start, end), dates: dates[position]) }
            } else {
                let all = (carried + members).sorted(by: StatisticsSample.precedes)
                results[position] = engine.statistics(all[...], bucket: (start, end), dates: dates[position])
            }
            for sample in members where sample.end > end { carried.append(sample) }
        }
        // The buffer is the scan's again (`members` shared it, and is gone).
        fresh.removeAll(keepingCapacity: true)
        position += 1
    }
}

/// How a statistics query computes its buckets. Tests hold the first two equal bit for bit,
/// and the third equal to them up to rounding.
enum StatisticsComputation {
    /// From the rollups where they answer a bucket exactly, otherwise from the samples.
    case fastest
    /// From the samples alone, hour by hour where every sample lies within one hour.
    case samples
    /// From the samples alone, every bucket merged as a whole.
    case wholeBuckets
}

/// One hour of one source's rollup, as a statistics query reads it.
struct RollupRow {
    var hour: Int64
    var source: UInt32
    /// The source's place in the reader's priority order.
    var rank: Int
    var partial: StatisticsPartial
}

/// A bucket's hours combined in time order: merged across sources, each source's own, and
/// the sources present.
struct BucketParts {
    var merged = StatisticsPartial()
    /// Each source's own partial (with ``StatisticsOptions/separateBySource`` only).
    var bySource: [UInt32: StatisticsPartial] = [:]
    var present: [UInt32] = []
    let separate: Bool
    let level: Bool

    init(separate: Bool, level: Bool) {
        self.separate = separate
        self.level = level
    }

    /// An hour holding only `source`'s samples: merged and own at once.
    mutating func add(_ partial: StatisticsPartial, source: UInt32) {
        merged.append(partial, level: level)
        addOwn(source: source, partial)
    }

    /// `source`'s own part of an hour (computed only when asked for).
    mutating func addOwn(source: UInt32, _ partial: @autoclosure () -> StatisticsPartial) {
        if separate { bySource[source, default: StatisticsPartial()].append(partial(), level: level) }
        if !present.contains(source) { present.append(source) }
    }
}

/// One sample as statistics see it, from the start indexes: a sample, or one value of a
/// series sample over its own interval (``SeriesValues``).
struct StatisticsSample {
    var start: Int64
    var end: Int64
    /// In the type's canonical unit.
    var value: Double
    var source: UInt32
    /// A series value's place in its series (0 for a sample): orders values that start together.
    /// (Declared beside `source`, the two fill one word.)
    var position: UInt32 = 0
    /// The save event's sequence: breaks ties between equally recent samples.
    var sequence: UInt64

    init(start: Int64, end: Int64, value: Double, source: UInt32, sequence: UInt64, position: UInt32 = 0) {
        (self.start, self.end, self.value, self.source, self.sequence, self.position) = (start, end, value, source, sequence, position)
    }

    /// An entry of a start index or a workout's members, counted as one sample.
    init(_ entry: IndexEntry) {
        self.init(start: entry.startUs, end: entry.endUs, value: entry.value, source: entry.source, sequence: entry.sequence)
    }

    /// The one order every statistics path uses: by start, then by the order they were saved
    /// (docs/SEMANTICS.md §7), then by place in their series.
    static func precedes(_ a: StatisticsSample, _ b: StatisticsSample) -> Bool {
        (a.start, a.sequence, a.position) < (b.start, b.sequence, b.position)
    }

    /// Samples in ``precedes(_:_:)`` order. The indexes order ties by UUID; this settles them.
    static func ordered(_ samples: [StatisticsSample]) -> [StatisticsSample] {
        guard zip(samples, samples.dropFirst()).contains(where: { !precedes($0, $1) }) else { return samples }
        return samples.sorted(by: precedes)
    }
}

/// Computes statistics for one reader: which samples it may see, and how sources merge.
struct StatisticsEngine {
    let type: QuantityType
    let options: StatisticsOptions
    let scope: ReadScope
    /// Source codes, highest priority first.
    let order: [UInt32]
    let rank: [UInt32: Int]
    let sources: [UInt32: Source]
    /// Merge every bucket as a whole, never hour by hour.
    let wholeBuckets: Bool

    init(
        type: QuantityType, options: StatisticsOptions, principal: Principal, wholeBuckets: Bool = false, in snapshot: LedgerSnapshot
    ) throws {
        self.wholeBuckets = wholeBuckets
        self.type = type
        self.options = options
        scope = try ReadScope(principal, type: type.objectType, in: snapshot)
        var order: [UInt32] = []
        var sources: [UInt32: Source] = [:]
        if scope.all {
            for source in try Ledger.sourceOrder(type.objectType.code, in: snapshot) {
                guard let code = try SourceRegistry.code(of: source.bundleIdentifier, in: snapshot) else { continue }
                order.append(code)
                sources[code] = source
            }
        } else if scope.ownSource != 0, let own = try SourceRegistry.source(code: scope.ownSource, in: snapshot) {
            // A reader limited to its own samples sees no other source, and its query does
            // not even list them (the work would grow with their number).
            order = [scope.ownSource]
            sources[scope.ownSource] = own
        }
        self.order = order
        self.sources = sources
        rank = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) })
    }

    /// The readable samples overlapping `range`, in start order: every source's for a reader
    /// of the whole type (`by_start`), otherwise only the reader's own (`by_source`). The
    /// index entries hold all statistics need: no object is loaded.
    func samples(overlapping range: TimeRange, in snapshot: LedgerSnapshot) throws -> [StatisticsSample] {
        var samples: [StatisticsSample] = []
        try visitSamples(overlapping: range, in: snapshot) { samples.append($0) }
        return StatisticsSample.ordered(samples)
    }

    /// ``samples(overlapping:in:)`` visited as the scan reads them: in start order, equal
    /// starts in the index's (UUID) order; each series sample's values in its place.
    func visitSamples(overlapping range: TimeRange, in snapshot: LedgerSnapshot, _ visit: (StatisticsSample) throws -> Void) throws {
        let code = type.objectType.code
        let source: UInt32? = scope.all ? nil : scope.ownSource
        if source == 0 { return }
        var expansion = SeriesExpansion(range: range, snapshot: snapshot)
        try Ledger.scanByStart(
            type: code, source: source, range: range.widenedForSeries, longest: try longestReadable(in: snapshot), uuids: false, in: snapshot
        ) { entry in
            if range.counts(entry) { try expansion.add(entry, visit) }
            return true
        }
        try expansion.finish(visit)
    }

    /// How long the longest sample this reader counts lasts: every source's for a reader of
    /// the whole type, its own source's otherwise. Bounds how far before a range its scans
    /// and rollup reads look.
    func longestReadable(in snapshot: LedgerSnapshot) throws -> Int64 {
        let code = type.objectType.code
        return scope.all
            ? try SourceRegistry.longestDuration(type: code, in: snapshot) : try SourceRegistry.longestDuration(type: code, code: scope.ownSource, in: snapshot)
    }

    /// Whether averages weigh sound energies (decibel levels).
    var level: Bool { type.aggregationStyle == .discreteEquivalentContinuousLevel }

    /// The statistics of `samples` (all overlapping `bucket`, in start order).
    ///
    /// A bounded bucket whose samples each lie within one clock hour of it is computed hour
    /// by hour: each hour's ``StatisticsPartial``, merged across sources inside the hour,
    /// then the hours combined in order, exactly as from the rollups. Otherwise the bucket
    /// is merged as a whole.
    func statistics(_ samples: ArraySlice<StatisticsSample>, bucket: (start: Int64, end: Int64), dates: DateInterval?) -> Statistics {
        if !wholeBuckets, let dates, bucket.start != .min, bucket.end != .max, let hours = Self.hours(samples, bucket: bucket) {
            var parts = BucketParts(separate: options.contains(.separateBySource), level: level)
            for hour in hours {
                let first = hour.first!.source
                if hour.allSatisfy({ $0.source == first }) {
                    parts.add(StatisticsPartial(samples: hour, level: level), source: first)
                } else {
                    let codes = Set(hour.map(\.source)).sorted { (rank[$0] ?? Int.max, $0) < (rank[$1] ?? Int.max, $1) }
                    parts.merged.append(mergedPartial(hour, codes: codes), level: level)
                    for code in codes { parts.addOwn(source: code, StatisticsPartial(samples: hour.lazy.filter { $0.source == code }, level: level)) }
                }
            }
            return statistics(parts, bucket: bucket, dates: dates)
        }
        return wholeBucketStatistics(samples, bucket: bucket, dates: dates)
    }

    /// The statistics of a bucket whose hours are `rows`, one source each, in order.
    func statistics(rows: ArraySlice<RollupRow>, bucket: (start: Int64, end: Int64), dates: DateInterval) -> Statistics {
        var parts = BucketParts(separate: options.contains(.separateBySource), level: level)
        for row in rows { parts.add(row.partial, source: row.source) }
        return statistics(parts, bucket: bucket, dates: dates)
    }

    /// `samples` cut into the clock hours of `bucket` they start in; nil when one does not
    /// lie wholly within its hour and the bucket.
    static func hours(_ samples: ArraySlice<StatisticsSample>, bucket: (start: Int64, end: Int64)) -> [ArraySlice<StatisticsSample>]? {
        var hours: [ArraySlice<StatisticsSample>] = []
        var index = samples.startIndex
        while index < samples.endIndex {
            let hour = Rollups.hourStart(samples[index].start)
            let (from, to) = (max(hour, bucket.start), min(hour + Rollups.hour, bucket.end))
            var end = index
            while end < samples.endIndex, samples[end].start < hour + Rollups.hour {
                guard samples[end].start >= from, samples[end].end <= to else { return nil }
                end += 1
            }
            hours.append(samples[index..<end])
            index = end
        }
        return hours
    }

    /// The merged partial of one hour's samples from several sources (`codes`, highest
    /// priority first): a lower source counts only where no higher one has covered the time.
    private func mergedPartial(_ hour: ArraySlice<StatisticsSample>, codes: [UInt32]) -> StatisticsPartial {
        var covered = Coverage()
        var included: [(sample: StatisticsSample, share: Double)] = []
        for code in codes {
            for sample in hour where sample.source == code {
                if sample.end > sample.start {
                    let free = Double(sample.end - sample.start) - Double(covered.overlap(sample.start, sample.end))
                    if free > 0 { included.append((sample, Self.share(of: sample, over: free))) }
                } else if !covered.contains(sample.start) {
                    included.append((sample, sample.value))
                }
            }
            for sample in hour where sample.source == code && sample.end > sample.start { covered.add(sample.start, sample.end) }
        }
        included.sort { StatisticsSample.precedes($0.sample, $1.sample) }
        var partial = StatisticsPartial()
        for (sample, share) in included { partial.add(sample, share: share, level: level) }
        partial.coverage = covered.length
        return partial
    }

    /// The result of a bucket combined hour by hour.
    private func statistics(_ parts: BucketParts, bucket: (start: Int64, end: Int64), dates: DateInterval) -> Statistics {
        let present = parts.present
        let order = present.count < 2 ? present : present.sorted { (rank[$0] ?? Int.max, $0) < (rank[$1] ?? Int.max, $1) }
        var separate: [Source: StatisticsValues] = [:]
        for (code, partial) in parts.bySource { if let source = sources[code] { separate[source] = values(of: partial, bucket: bucket) } }
        return Statistics(
            type: type, startDate: dates.start, endDate: dates.end, values: values(of: parts.merged, bucket: bucket), valuesBySource: separate,
            sources: order.compactMap { sources[$0] })
    }

    /// The asked-for values of a combined partial.
    private func values(of partial: StatisticsPartial, bucket: (start: Int64, end: Int64)) -> StatisticsValues {
        var values = StatisticsValues()
        guard partial.count > 0 else { return values }
        let unit = type.canonicalUnit
        if options.contains(.cumulativeSum) { values.sum = Quantity(partial.sum, unit) }
        if options.contains(.discreteMin) { values.minimum = Quantity(partial.minimum, unit) }
        if options.contains(.discreteMax) { values.maximum = Quantity(partial.maximum, unit) }
        if options.contains(.discreteAverage) {
            var mean = partial.plain / Double(partial.count)
            if type.aggregationStyle == .discreteTemporallyWeighted || level {
                // The last value holds to the end of the bucket.
                let last = Double(max(bucket.end, partial.lastStart)) - Double(partial.lastStart)
                let weighted = partial.weighted + StatisticsPartial.energy(partial.lastValue, level: level) * last
                let total = partial.weightTotal + last
                if total > 0 { mean = weighted / total }
            }
            values.average = Quantity(level ? 10 * log10(mean) : mean, unit)
        }
        if options.contains(.mostRecent) {
            values.mostRecent = Quantity(partial.latestValue, unit)
            values.mostRecentInterval = DateInterval(start: date(microseconds: partial.latestStart), end: date(microseconds: partial.latestEnd))
        }
        if options.contains(.duration) { values.duration = Double(partial.coverage) / 1_000_000 }
        return values
    }

    /// The rollup rows of the hours starting in `[from, to)` (looking back, also those before
    /// it as far as a readable sample can last), in (hour, priority) order, and the times the
    /// readable sources' open hours reach (each source's newest hour has no row: its samples,
    /// starting in it, may last as long as the type's longest); nil when rollups cannot serve
    /// this reader.
    func rollups(from: Int64, to: Int64, lookingBack: Bool, in snapshot: LedgerSnapshot) throws -> (rows: [RollupRow], open: [TimeRange])? {
        guard scope.selected.isEmpty else { return nil }
        let code = type.objectType.code
        let codes = scope.all ? order : scope.ownSource == 0 ? [] : [scope.ownSource]
        let longest = try longestReadable(in: snapshot)
        // A sample lasting longer than a year would make every query read a year of rows
        // before its range: such types are computed from their samples.
        guard longest <= Self.longestRolledUp else { return nil }
        var rows: [RollupRow] = []
        // At most a row per hour and source: room for them at once rather than growing (and
        // copying) the array on the way, within a bound (a year of hours) that a huge or
        // sparse range does not raise.
        let first = lookingBack ? Rollups.hourStart(from - longest) : from
        rows.reserveCapacity(Int(min(Int64(codes.count) * ((to - first) / Rollups.hour + 1), 9_000)))
        var open: [TimeRange] = []
        for (rank, source) in codes.enumerated() {
            if let hour = try Rollups.sampleHour(type: code, source: source, in: snapshot) {
                open.append(TimeRange(start: hour, end: hour + Rollups.hour + longest))
            }
            try Rollups.rows(type: code, source: source, from: first, to: to, in: snapshot) {
                rows.append(RollupRow(hour: $0, source: source, rank: rank, partial: $1))
            }
        }
        if codes.count > 1 { rows.sort { ($0.hour, $0.rank) < ($1.hour, $1.rank) } }
        return (rows, open)
    }

    /// The longest a sample may last for its type's statistics to come from rollups.
    static let longestRolledUp: Int64 = 366 * 86_400 * 1_000_000

    /// The whole bucket merged at once: a lower source counts only where no higher one has
    /// covered the time, partly covered samples in proportion.
    private func wholeBucketStatistics(_ samples: ArraySlice<StatisticsSample>, bucket: (start: Int64, end: Int64), dates: DateInterval?) -> Statistics {
        if let single = singleSource(samples, bucket: bucket, dates: dates) { return single }
        // Each source's samples (a bucket holds a handful of sources: a list, not a table).
        var codes: [UInt32] = []
        var groups: [[StatisticsSample]] = []
        for sample in samples {
            if let index = codes.firstIndex(of: sample.source) {
                groups[index].append(sample)
            } else {
                codes.append(sample.source)
                groups.append([sample])
            }
        }
        let ranked = codes.indices.sorted { (rank[codes[$0]] ?? Int.max, codes[$0]) < (rank[codes[$1]] ?? Int.max, codes[$1]) }
        let present = ranked.map { codes[$0] }

        // Merged: sources in priority order; a lower one counts only where no higher one
        // has covered the time already (a partly covered sample in proportion).
        var covered = Coverage()
        var included: [StatisticsSample] = []
        var sum = 0.0
        for index in ranked {
            let own = groups[index]
            for sample in own {
                let (clipStart, clipEnd) = (max(sample.start, bucket.start), min(sample.end, bucket.end))
                if sample.end > sample.start {
                    let free = Double(clipEnd - clipStart) - Double(covered.overlap(clipStart, clipEnd))
                    if free > 0 {
                        sum += Self.share(of: sample, over: free)
                        included.append(sample)
                    }
                } else if !covered.contains(sample.start) {
                    sum += sample.value
                    included.append(sample)
                }
            }
            for sample in own where sample.end > sample.start {
                covered.add(max(sample.start, bucket.start), min(sample.end, bucket.end))
            }
        }
        included = StatisticsSample.ordered(included)
        let merged = values(of: included, sum: sum, duration: covered.length, bucket: bucket)

        var separate: [Source: StatisticsValues] = [:]
        if options.contains(.separateBySource) {
            for index in ranked {
                let (code, own) = (codes[index], groups[index])
                var coverage = Coverage()
                var raw = 0.0
                for sample in own {
                    if sample.end > sample.start {
                        let (clipStart, clipEnd) = (max(sample.start, bucket.start), min(sample.end, bucket.end))
                        raw += Self.share(of: sample, over: Double(clipEnd - clipStart))
                        coverage.add(clipStart, clipEnd)
                    } else {
                        raw += sample.value
                    }
                }
                if let source = sources[code] { separate[source] = values(of: own, sum: raw, duration: coverage.length, bucket: bucket) }
            }
        }
        // Collections give their interval's dates; a single result spans its samples.
        return Statistics(
            type: type, startDate: dates?.start ?? date(microseconds: samples.lazy.map(\.start).min() ?? bucket.start),
            endDate: dates?.end ?? date(microseconds: samples.lazy.map(\.end).max() ?? bucket.end),
            values: merged, valuesBySource: separate, sources: present.compactMap { sources[$0] })
    }

    /// The part of a lasting sample's value that falls in `length` microseconds of it (sums
    /// count samples in proportion to their time inside a bucket).
    static func share(of sample: StatisticsSample, over length: Double) -> Double {
        sample.value * length / Double(sample.end - sample.start)
    }

    /// The common case, without the merge's bookkeeping: one source, no per-source values,
    /// samples already in (start, sequence) order. Nil when it does not apply.
    private func singleSource(_ samples: ArraySlice<StatisticsSample>, bucket: (start: Int64, end: Int64), dates: DateInterval?) -> Statistics? {
        guard !options.contains(.separateBySource), let first = samples.first, let source = sources[first.source] else { return nil }
        var previous: StatisticsSample?
        var sum = 0.0
        var coverage = Coverage()
        var earliest = Int64.max
        var latest = Int64.min
        for sample in samples {
            guard sample.source == first.source else { return nil }
            if let previous, StatisticsSample.precedes(sample, previous) { return nil }
            previous = sample
            earliest = min(earliest, sample.start)
            latest = max(latest, sample.end)
            if sample.end > sample.start {
                let (clipStart, clipEnd) = (max(sample.start, bucket.start), min(sample.end, bucket.end))
                sum += Self.share(of: sample, over: Double(clipEnd - clipStart))
                if options.contains(.duration) { coverage.add(clipStart, clipEnd) }
            } else {
                sum += sample.value
            }
        }
        return Statistics(
            type: type, startDate: dates?.start ?? date(microseconds: earliest), endDate: dates?.end ?? date(microseconds: latest),
            values: values(of: samples, sum: sum, duration: coverage.length, bucket: bucket), sources: [source])
    }

    /// The asked-for values of `samples` (in start order).
    private func values<Samples: RandomAccessCollection<StatisticsSample>>(
        of samples: Samples, sum: Double, duration: Int64, bucket: (start: Int64, end: Int64)
    ) -> StatisticsValues {
        var values = StatisticsValues()
        guard !samples.isEmpty else { return values }
        let unit = type.canonicalUnit
        if options.contains(.cumulativeSum) { values.sum = Quantity(sum, unit) }
        if options.contains(.discreteMin) { values.minimum = Quantity(samples.lazy.map(\.value).min()!, unit) }
        if options.contains(.discreteMax) { values.maximum = Quantity(samples.lazy.map(\.value).max()!, unit) }
        if options.contains(.discreteAverage) { values.average = Quantity(average(samples, bucket: bucket), unit) }
        if options.contains(.mostRecent) {
            let latest = samples.max { ($0.end, $0.start, $0.sequence, $0.position) < ($1.end, $1.start, $1.sequence, $1.position) }!
            values.mostRecent = Quantity(latest.value, unit)
            values.mostRecentInterval = DateInterval(start: date(microseconds: latest.start), end: date(microseconds: latest.end))
        }
        if options.contains(.duration) { values.duration = Double(duration) / 1_000_000 }
        return values
    }

    /// The average for the type's aggregation style: a plain mean; or weighted by the time
    /// each value holds (from its sample's start to the next sample's, the last one to the
    /// end of the interval), for heart rate; or that weighting over sound energies, for
    /// decibel levels. With no time to weigh by, the plain mean.
    private func average<Samples: RandomAccessCollection<StatisticsSample>>(_ samples: Samples, bucket: (start: Int64, end: Int64)) -> Double {
        let style = type.aggregationStyle
        let level = style == .discreteEquivalentContinuousLevel
        func value(_ sample: StatisticsSample) -> Double { level ? pow(10, sample.value / 10) : sample.value }
        var plain = 0.0
        for sample in samples { plain += value(sample) }
        var mean = plain / Double(samples.count)
        if style == .discreteTemporallyWeighted || level {
            // The last value holds to the end of the interval; when the query has no end, for
            // as long as the others held on average. Weights are computed in Double: times
            // span the whole Int64 range.
            var weighted = 0.0
            var total = 0.0
            var index = samples.startIndex
            while index != samples.endIndex {
                let following = samples.index(after: index)
                let from = max(samples[index].start, bucket.start)
                let weight: Double
                if following != samples.endIndex {
                    weight = Double(max(samples[following].start, bucket.start)) - Double(from)
                } else if bucket.end != Int64.max {
                    weight = Double(max(bucket.end, from)) - Double(from)
                } else {
                    weight = samples.count > 1 ? total / Double(samples.count - 1) : 0
                }
                weighted += value(samples[index]) * weight
                total += weight
                index = following
            }
            if total > 0 { mean = weighted / total }
        }
        return level ? 10 * log10(mean) : mean
    }
}

/// A union of half-open time spans, kept sorted and disjoint.
struct Coverage {
    private var spans: [(start: Int64, end: Int64)] = []

    var length: Int64 { spans.reduce(0) { $0 + ($1.end - $1.start) } }

    /// The first span ending after `time`.
    private func firstEnding(after time: Int64) -> Int {
        var low = 0
        var high = spans.count
        while low < high {
            let middle = (low + high) / 2
            if spans[middle].end <= time { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func contains(_ time: Int64) -> Bool {
        let index = firstEnding(after: time)
        return index < spans.count && spans[index].start <= time
    }

    /// How much of `[start, end)` the spans cover.
    func overlap(_ start: Int64, _ end: Int64) -> Int64 {
        var total: Int64 = 0
        var index = firstEnding(after: start)
        while index < spans.count, spans[index].start < end {
            total += min(end, spans[index].end) - max(start, spans[index].start)
            index += 1
        }
        return total
    }

    mutating func add(_ start: Int64, _ end: Int64) {
        guard start < end else { return }
        // Spans mostly come in start order: they extend or follow the last one.
        if let last = spans.last, start >= last.start {
            if start > last.end {
                spans.append((start, end))
            } else if end > last.end {
                spans[spans.count - 1].end = end
            }
            return
        }
        let index = firstEnding(after: start &- 1)
        // Already covered.
        if index < spans.count, spans[index].start <= start, spans[index].end >= end { return }
        var merged = (start: start, end: end)
        while index < spans.count, spans[index].start <= merged.end {
            merged = (min(merged.start, spans[index].start), max(merged.end, spans[index].end))
            spans.remove(at: index)
        }
        spans.insert(merged, at: index)
    }
}
