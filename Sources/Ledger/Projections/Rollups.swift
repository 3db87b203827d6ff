import Foundation
import HealthModel
import LMDB

/// The statistics of the samples in one block of time, in the form in which blocks combine:
/// what a rollup row holds for one (type, source, hour), and what the statistics engine
/// computes for each block of an interval (docs/LEDGER.md, "Rollups").
///
/// Samples enter in (start, save order). Every field is computed by the same arithmetic
/// whether it comes from a row or from the samples themselves, so a statistic combined from
/// rows equals, bit for bit, the one combined from samples.
struct StatisticsPartial: Equatable {
    var count: Int64 = 0
    var firstStart: Int64 = 0
    var lastStart: Int64 = 0
    /// The last sample's value (not its energy).
    var lastValue: Double = 0
    /// The latest end of the samples: a row whose samples end past its hour is not closed.
    var maxEnd: Int64 = .min
    /// Σ of each sample's share: its value, or for a lasting sample the part of its value in
    /// the time it counts for.
    var sum: Double = 0
    /// Σ of the values (sound energies, for decibel levels).
    var plain: Double = 0
    /// Σ value × the time to the next sample's start, over all but the last sample.
    var weighted: Double = 0
    /// Σ of those times.
    var weightTotal: Double = 0
    var minimum: Double = .infinity
    var maximum: Double = -.infinity
    /// The most recent sample, by (end, start, save order).
    var latestEnd: Int64 = .min
    var latestStart: Int64 = .min
    var latestSequence: UInt64 = 0
    var latestValue: Double = 0
    /// Microseconds covered by the lasting samples (overlaps once).
    var coverage: Int64 = 0

    /// How a value enters averages: itself, or for decibel levels its sound energy.
    static func energy(_ value: Double, level: Bool) -> Double { level ? pow(10, value / 10) : value }

    /// Adds the next sample, in (start, save order, place in a series), counting `share` toward the sum.
    mutating func add(_ sample: StatisticsSample, share: Double, level: Bool) {
        if count == 0 {
            firstStart = sample.start
        } else {
            let weight = Double(sample.start) - Double(lastStart)
            weighted += Self.energy(lastValue, level: level) * weight
            weightTotal += weight
        }
        count += 1
        lastStart = sample.start
        lastValue = sample.value
        maxEnd = max(maxEnd, sample.end)
        sum += share
        plain += Self.energy(sample.value, level: level)
        minimum = min(minimum, sample.value)
        maximum = max(maximum, sample.value)
        // Samples come in (start, save order, place in a series): of a series' values equally
        // recent, the later one.
        if (sample.end, sample.start, sample.sequence) >= (latestEnd, latestStart, latestSequence) {
            (latestEnd, latestStart, latestSequence, latestValue) = (sample.end, sample.start, sample.sequence, sample.value)
        }
    }

    /// Appends the block that follows this one in time: the last sample of this block holds
    /// until the first of the next.
    mutating func append(_ next: StatisticsPartial, level: Bool) {
        guard next.count > 0 else { return }
        guard count > 0 else {
            self = next
            return
        }
        let weight = Double(next.firstStart) - Double(lastStart)
        weighted += Self.energy(lastValue, level: level) * weight
        weightTotal += weight
        weighted += next.weighted
        weightTotal += next.weightTotal
        count += next.count
        lastStart = next.lastStart
        lastValue = next.lastValue
        maxEnd = max(maxEnd, next.maxEnd)
        sum += next.sum
        plain += next.plain
        minimum = min(minimum, next.minimum)
        maximum = max(maximum, next.maximum)
        if (next.latestEnd, next.latestStart, next.latestSequence) > (latestEnd, latestStart, latestSequence) {
            (latestEnd, latestStart, latestSequence, latestValue) = (next.latestEnd, next.latestStart, next.latestSequence, next.latestValue)
        }
        coverage += next.coverage
    }

    /// The partial of samples that all lie inside one block, each counting in full.
    init(samples: some Sequence<StatisticsSample>, level: Bool) {
        var coverage = Coverage()
        for sample in samples {
            if sample.end > sample.start {
                add(sample, share: StatisticsEngine.share(of: sample, over: Double(sample.end - sample.start)), level: level)
                coverage.add(sample.start, sample.end)
            } else {
                add(sample, share: sample.value, level: level)
            }
        }
        self.coverage = coverage.length
    }

    init() {}

    static let encodedLength = 16 * 8

    var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.encodedLength)
        for field in [
            UInt64(bitPattern: count), UInt64(bitPattern: firstStart), UInt64(bitPattern: lastStart), lastValue.bitPattern,
            UInt64(bitPattern: maxEnd), sum.bitPattern, plain.bitPattern, weighted.bitPattern, weightTotal.bitPattern, minimum.bitPattern,
            maximum.bitPattern, UInt64(bitPattern: latestEnd), UInt64(bitPattern: latestStart), latestSequence, latestValue.bitPattern,
            UInt64(bitPattern: coverage),
        ] {
            KeyEncoding.append(field, to: &bytes)
        }
        return bytes
    }

    init(encoded bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count == Self.encodedLength else {
            throw LedgerFailure.corrupted("a rollup is \(bytes.count) bytes, not \(Self.encodedLength): replay the ledger")
        }
        func field(_ index: Int) -> UInt64 { KeyEncoding.uint64(bytes, at: index * 8) }
        count = Int64(bitPattern: field(0))
        firstStart = Int64(bitPattern: field(1))
        lastStart = Int64(bitPattern: field(2))
        lastValue = Double(bitPattern: field(3))
        maxEnd = Int64(bitPattern: field(4))
        sum = Double(bitPattern: field(5))
        plain = Double(bitPattern: field(6))
        weighted = Double(bitPattern: field(7))
        weightTotal = Double(bitPattern: field(8))
        minimum = Double(bitPattern: field(9))
        maximum = Double(bitPattern: field(10))
        latestEnd = Int64(bitPattern: field(11))
        latestStart = Int64(bitPattern: field(12))
        latestSequence = field(13)
        latestValue = Double(bitPattern: field(14))
        coverage = Int64(bitPattern: field(15))
    }
}

/// The `rollups` projection: per quantity type, source and clock hour (UTC), the
/// ``StatisticsPartial`` of the samples starting in that hour, for every hour but the source's
/// newest (its *open hour*, the hour of its latest-starting sample), which readers compute
/// from its samples. A write records which hours it touched; at the end of its transaction
/// each is recomputed from `by_source`, so a row is always a function of the samples alone
/// and replay rebuilds it byte for byte. A source saving into its open hour, as one writing
/// as it measures does, writes no row: the row is written once, when a later hour opens.
enum Rollups {
    /// One hour in microseconds: the rollups' block.
    static let hour: Int64 = 3_600_000_000

    /// The start of the hour holding `time`.
    static func hourStart(_ time: Int64) -> Int64 {
        let (quotient, remainder) = time.quotientAndRemainder(dividingBy: hour)
        return (remainder < 0 ? quotient - 1 : quotient) * hour
    }

    /// type(4) | source(4) | hour start(8).
    static func key(type: UInt32, source: UInt32, hour: Int64) -> [UInt8] {
        var key = KeyEncoding.typeKey(type, source: source)
        KeyEncoding.appendTime(hour, to: &key)
        return key
    }

    /// The quantity types' codes, and whether each averages sound energies.
    static let levels: [UInt32: Bool] = Dictionary(
        uniqueKeysWithValues: QuantityTypeDescriptor.catalogue.map {
            (TypeCatalogue.code(of: $0.identifier), $0.aggregationStyle == .discreteEquivalentContinuousLevel)
        })

    /// One hour of one source's samples of one type.
    struct Block: Hashable, Comparable {
        var type: UInt32
        var source: UInt32
        var hour: Int64

        static func < (left: Block, right: Block) -> Bool { (left.type, left.source, left.hour) < (right.type, right.source, right.hour) }
    }

    /// Brings the rows of the touched blocks (in ``Block`` order) in line with the samples:
    /// each touched hour before its source's open hour is recomputed, every other touched hour
    /// and the open hour itself lose their rows. When the open hour moved on, the hour that was
    /// open before gets its row: it is the newest hour below the open one that was not touched
    /// and has no row (all older ones have theirs).
    static func update(_ blocks: [Block], in txn: Transaction, _ databases: LedgerDatabases, seriesValues: SeriesValues.Loader) throws {
        let snapshot = LedgerSnapshot(txn, databases)
        var first = blocks.startIndex
        while first < blocks.endIndex {
            let (type, source) = (blocks[first].type, blocks[first].source)
            var end = first
            while end < blocks.endIndex, blocks[end].type == type, blocks[end].source == source { end += 1 }
            let touched = blocks[first..<end]
            first = end
            let open = try sampleHour(type: type, source: source, in: snapshot)
            for block in touched {
                if let open, block.hour < open {
                    try recompute(block, in: txn, databases, seriesValues: seriesValues)
                } else {
                    try txn.delete(key(type: type, source: source, hour: block.hour), in: databases.rollups)
                }
            }
            guard let open else { continue }
            try txn.delete(key(type: type, source: source, hour: open), in: databases.rollups)
            let recomputed = Set(touched.map(\.hour))
            var below = open
            while let hour = try sampleHour(type: type, source: source, before: below, in: snapshot) {
                below = hour
                if recomputed.contains(hour) { continue }
                if try txn.get(key(type: type, source: source, hour: hour), in: databases.rollups) == nil {
                    try recompute(Block(type: type, source: source, hour: hour), in: txn, databases, seriesValues: seriesValues)
                }
                break
            }
        }
    }

    /// The hour of the latest-starting sample of `type` from `source` (starting before `before`,
    /// when given): the source's open hour, which has no row. Nil when there is none.
    static func sampleHour(type: UInt32, source: UInt32, before: Int64? = nil, in snapshot: LedgerSnapshot) throws -> Int64? {
        try snapshot.withCursor(on: snapshot.databases.bySource) { cursor in
            // Past every row of the source (keys are 32 bytes), or before the hour's first.
            let found = try before.map { try cursor.seek(atLeast: StartIndexRow.key(type: type, source: source, start: $0, uuid: [])) }
                ?? cursor.seek(atLeast: KeyEncoding.typeKey(type, source: source) + [UInt8](repeating: 0xFF, count: 25))
            let entry = try found != nil ? cursor.previous() : cursor.last()
            guard let entry, let row = try StartIndexRow(entry, type: type, source: source, cipher: nil) else { return nil }
            return hourStart(row.startUs)
        }
    }

    /// Recomputes one row from the samples in `by_source` (deleting it when none is left). A
    /// series sample counts as its values (``SeriesValues``), all of them in the hour its
    /// sample starts in. A value starting after that hour makes the row reach past the
    /// hour's end (at least a microsecond past its own start), so that neither its hour nor
    /// the next is answered from rows: those are computed from the values.
    static func recompute(_ block: Block, in txn: Transaction, _ databases: LedgerDatabases, seriesValues: SeriesValues.Loader) throws {
        guard let level = levels[block.type] else { return }
        var samples: [StatisticsSample] = []
        let end = block.hour + hour
        var series: [UInt64] = []
        try txn.withCursor(on: databases.bySource) { cursor in
            var entry = try cursor.seek(atLeast: StartIndexRow.key(type: block.type, source: block.source, start: block.hour, uuid: []))
            while let current = entry, let row = try StartIndexRow(current, type: block.type, source: block.source, cipher: databases.cipher) {
                let start = row.startUs
                guard start < end else { break }
                if row.isSeries {
                    series.append(row.sequence)
                } else {
                    samples.append(StatisticsSample(start: start, end: row.endUs, value: row.value, source: block.source, sequence: row.sequence))
                }
                entry = try cursor.next()
            }
        }
        var reach = Int64.min
        for sequence in series {
            for value in try seriesValues(sequence, block.source) {
                if value.start >= end { reach = max(reach, value.end, value.start + 1) }
                samples.append(value)
            }
        }
        let key = key(type: block.type, source: block.source, hour: block.hour)
        if samples.isEmpty {
            try txn.delete(key, in: databases.rollups)
        } else {
            var partial = StatisticsPartial(samples: StatisticsSample.ordered(samples), level: level)
            partial.maxEnd = max(partial.maxEnd, reach)
            try txn.put(databases.storable(partial.encoded, domain: .rollup, key: key), forKey: key, in: databases.rollups)
        }
    }

    /// Visits the rows of (`type`, `source`) for the hours starting in `[from, to)`, in order.
    static func rows(
        type: UInt32, source: UInt32, from: Int64, to: Int64, in snapshot: LedgerSnapshot,
        _ visit: (_ hour: Int64, StatisticsPartial) throws -> Void
    ) throws {
        try snapshot.withCursor(on: snapshot.databases.rollups) { cursor in
            var entry = try cursor.seek(atLeast: key(type: type, source: source, hour: from))
            while let current = entry, current.key.count == 16, KeyEncoding.uint32(current.key, at: 0) == type,
                KeyEncoding.uint32(current.key, at: 4) == source
            {
                let hour = KeyEncoding.time(current.key, at: 8)
                guard hour < to else { break }
                try visit(hour, try snapshot.databases.withClear(current.value, domain: .rollup, key: current.key) { try StatisticsPartial(encoded: $0) })
                entry = try cursor.next()
            }
        }
    }
}
