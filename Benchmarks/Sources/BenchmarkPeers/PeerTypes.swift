import Foundation

// The shared vocabulary of the peers: the sample they store, their errors, the two protocols the
// benchmark drives them through, the JSON they write, and the client-side merge of sources.

/// One health sample as the peers store it (times in microseconds since 1970).
public struct PeerSample: Sendable, Hashable {
    /// The sample's identity, unique across all samples.
    public var uuid: UUID
    /// The sample type, e.g. `"HKQuantityTypeIdentifierHeartRate"`.
    public var type: String
    /// The bundle identifier of the app or device that recorded it, e.g. `"com.example.watch"`.
    public var source: String
    /// Start time in microseconds since 1970.
    public var start: Int64
    /// End time in microseconds since 1970 (equal to `start` for an instantaneous sample).
    public var end: Int64
    /// The quantity, in `unit`.
    public var value: Double
    /// The unit of `value`, e.g. `"count/min"`.
    public var unit: String
    /// The source's own identifier for the sample, unique per source and type when present.
    public var syncIdentifier: String?
    /// Free-form string metadata.
    public var metadata: [String: String]

    /// Creates a sample from all its fields.
    public init(
        uuid: UUID,
        type: String,
        source: String,
        start: Int64,
        end: Int64,
        value: Double,
        unit: String,
        syncIdentifier: String? = nil,
        metadata: [String: String] = [:]
    ) {
        self.uuid = uuid
        self.type = type
        self.source = source
        self.start = start
        self.end = end
        self.value = value
        self.unit = unit
        self.syncIdentifier = syncIdentifier
        self.metadata = metadata
    }
}

/// A failure of a peer database, carrying the database's own message where there is one.
public struct PeerError: Error, CustomStringConvertible {
    /// What went wrong, in words.
    public var description: String

    /// Creates an error with the given message.
    public init(_ description: String) {
        self.description = description
    }
}

/// A database server or file the benchmark runs against.
public protocol PeerDatabase: Sendable {
    /// The database and its version, e.g. `"PostgreSQL 15.18"` or `"SQLite 3.40.1"`.
    var name: String { get }
    /// A new client connection (one per concurrent client; a connection is used by one task at a time).
    func connect() throws -> any PeerConnection
    /// Stops the server (PostgreSQL) and removes its files.
    func stop()
}

/// One client connection to a peer database; used by one task at a time.
public protocol PeerConnection: AnyObject {
    /// Saves the samples in one durable transaction: for each sample one row in `events`
    /// (kind `'save'`, type, uuid, body = the whole sample as JSON text) and one row in `samples`
    /// (the projection, with its change anchor). Returns when committed and fsynced.
    func save(_ samples: [PeerSample]) throws
    /// Averages per bucket: samples of `type` with start in [`from`, `to`), grouped by
    /// floor((start - from) / bucket); returns (bucket start in µs, average value), ordered by bucket.
    /// Computed by the database (GROUP BY), not in Swift.
    func averages(type: String, from: Int64, to: Int64, bucket: Int64) throws -> [(start: Int64, average: Double)]
    /// Samples of `type` overlapping [`from`, `to`) (start < to and end > from, or start == end in range),
    /// ordered by start, then anchor: what a client needs to merge sources itself.
    func samples(type: String, overlapping from: Int64, _ to: Int64) throws -> [PeerSample]
    /// The next page of changes of `type` after `anchor` (exclusive), ordered by anchor, at most
    /// `limit` whole rows; returns the rows and the page's last anchor (or `anchor` if empty).
    func changes(type: String, after anchor: Int64, limit: Int) throws -> (samples: [PeerSample], anchor: Int64)
    /// Replay: empties `samples` and rebuilds it from `events` alone, in SQL, in one durable
    /// transaction, indexes included; returns the number of events replayed.
    func rebuildProjection() throws -> Int
    /// One round trip doing nothing (`SELECT 1`).
    func ping() throws
}

/// A connection that can keep several calls in flight (PostgreSQL's pipeline mode).
public protocol PipelinedPeerConnection: PeerConnection {
    /// `count` no-op queries in flight at once, all answered before it returns.
    func pipelinedPings(_ count: Int) throws
}

// MARK: - JSON

extension PeerSample {
    /// The whole sample as one JSON object: the body of its `save` event. Keys: `uuid`, `type`,
    /// `source`, `start`, `end` (integers, µs), `value` (number), `unit`, `sync_id` (string or null),
    /// `metadata` (object of strings). The peers' replay reads these keys back in SQL.
    func jsonBody() throws -> [UInt8] {
        guard value.isFinite else {
            throw PeerError("sample \(uuid): value \(value) is not a finite number and has no JSON form")
        }
        var out: [UInt8] = []
        out.reserveCapacity(200 + 40 * metadata.count)
        out += #"{"uuid":""#.utf8
        out += uuid.uuidString.utf8
        out += #"","type":"#.utf8
        appendJSONString(type, to: &out)
        out += #","source":"#.utf8
        appendJSONString(source, to: &out)
        out += #","start":"#.utf8
        out += String(start).utf8
        out += #","end":"#.utf8
        out += String(end).utf8
        out += #","value":"#.utf8
        out += value.description.utf8  // shortest form that reads back as the same Double
        out += #","unit":"#.utf8
        appendJSONString(unit, to: &out)
        out += #","sync_id":"#.utf8
        if let syncIdentifier {
            appendJSONString(syncIdentifier, to: &out)
        } else {
            out += "null".utf8
        }
        out += #","metadata":"#.utf8
        appendMetadataJSON(to: &out)
        out += "}".utf8
        return out
    }

    /// The metadata as a JSON object of strings, keys sorted.
    func metadataJSON() -> [UInt8] {
        var out: [UInt8] = []
        appendMetadataJSON(to: &out)
        return out
    }

    private func appendMetadataJSON(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (index, key) in metadata.keys.sorted().enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendJSONString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendJSONString(metadata[key] ?? "", to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Decodes a metadata column (a JSON object of strings, as either database prints it).
    static func decodeMetadata(_ text: String) throws -> [String: String] {
        if text == "{}" { return [:] }
        let object = try? JSONSerialization.jsonObject(with: Data(text.utf8))
        guard let dictionary = object as? [String: Any] else {
            throw PeerError("metadata is not a JSON object: \(text)")
        }
        var metadata: [String: String] = [:]
        for (key, value) in dictionary {
            metadata[key] = (value as? String) ?? "\(value)"
        }
        return metadata
    }
}

/// Appends `text` as a JSON string literal (quotes, backslashes and control characters escaped).
private func appendJSONString(_ text: String, to out: inout [UInt8]) {
    func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }
    out.append(UInt8(ascii: "\""))
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "\""): out += #"\""#.utf8
        case UInt8(ascii: "\\"): out += #"\\"#.utf8
        case 0x0A: out += #"\n"#.utf8
        case 0x0D: out += #"\r"#.utf8
        case 0x09: out += #"\t"#.utf8
        case 0..<0x20:
            out += #"\u00"#.utf8
            out += [hexDigit(byte >> 4), hexDigit(byte & 0xF)]
        default: out.append(byte)  // bytes of multi-byte UTF-8 sequences are all >= 0x80
        }
    }
    out.append(UInt8(ascii: "\""))
}

// MARK: - Client-side merge of sources

/// HealthKit's merge of overlapping sources for cumulative sums, done by a client of a database
/// that cannot do it in SQL.
///
/// For each bucket [bucketStart, bucketStart + bucket) from `from` to `to` (the last one cut at
/// `to`), sources are taken in `priority` order (highest first; sources not listed come after, by
/// name). Each sample of the source is clipped to the bucket; if it lasts (end > start) it adds
/// value × free / (end − start), where free is the clipped length minus the part of the clipped
/// span already covered by higher-priority sources' spans in this bucket (only when free > 0); an
/// instantaneous sample (end == start) adds its value when its start is not covered. After all of
/// one source's samples are counted, its clipped spans are added to the coverage.
public enum PeerMerge {
    /// One sum per bucket (0 for empty buckets), in order; empty when `to <= from` or `bucket <= 0`.
    public static func sums(of samples: [PeerSample], priority: [String], from: Int64, to: Int64, bucket: Int64) -> [Double] {
        guard bucket > 0, to > from else { return [] }
        let bucketCount = Int((to - from - 1) / bucket) + 1

        // Rank of every source: listed ones in their order, then the others by name.
        var rank: [String: Int] = [:]
        for source in priority where rank[source] == nil {
            rank[source] = rank.count
        }
        for source in Set(samples.map(\.source)).sorted() where rank[source] == nil {
            rank[source] = rank.count
        }
        let sampleRank = samples.map { rank[$0.source] ?? 0 }

        // The samples touching each bucket.
        var members = [[Int]](repeating: [], count: bucketCount)
        for (index, sample) in samples.enumerated() {
            if sample.end > sample.start {
                guard sample.start < to, sample.end > from else { continue }
                let first = sample.start <= from ? 0 : Int((sample.start - from) / bucket)
                let last = Int((min(sample.end, to) - 1 - from) / bucket)
                for k in first...last { members[k].append(index) }
            } else if sample.end == sample.start, sample.start >= from, sample.start < to {
                members[Int((sample.start - from) / bucket)].append(index)
            }
        }

        var sums = [Double](repeating: 0, count: bucketCount)
        for k in 0..<bucketCount {
            let bucketStart = from + Int64(k) * bucket
            let bucketEnd = min(bucketStart + bucket, to)
            let ordered = members[k].sorted { (sampleRank[$0], $0) < (sampleRank[$1], $1) }
            var coverage: [Span] = []  // sorted, disjoint
            var sum = 0.0
            var position = 0
            while position < ordered.count {
                let sourceRank = sampleRank[ordered[position]]
                var spans: [Span] = []
                while position < ordered.count, sampleRank[ordered[position]] == sourceRank {
                    let sample = samples[ordered[position]]
                    position += 1
                    if sample.end > sample.start {
                        let span = Span(start: max(sample.start, bucketStart), end: min(sample.end, bucketEnd))
                        guard span.end > span.start else { continue }
                        let free = (span.end - span.start) - coveredLength(of: span, by: coverage)
                        if free > 0 {
                            sum += sample.value * Double(free) / Double(sample.end - sample.start)
                        }
                        spans.append(span)
                    } else if !isCovered(sample.start, by: coverage) {
                        sum += sample.value
                    }
                }
                coverage = merged(coverage + spans)
            }
            sums[k] = sum
        }
        return sums
    }

    /// A half-open time span [start, end).
    private struct Span {
        var start: Int64
        var end: Int64
    }

    /// Index of the first span of `coverage` (sorted, disjoint) ending after `time`.
    private static func firstSpan(endingAfter time: Int64, in coverage: [Span]) -> Int {
        var low = 0
        var high = coverage.count
        while low < high {
            let middle = (low + high) / 2
            if coverage[middle].end > time { high = middle } else { low = middle + 1 }
        }
        return low
    }

    private static func coveredLength(of span: Span, by coverage: [Span]) -> Int64 {
        var covered: Int64 = 0
        var index = firstSpan(endingAfter: span.start, in: coverage)
        while index < coverage.count, coverage[index].start < span.end {
            covered += min(coverage[index].end, span.end) - max(coverage[index].start, span.start)
            index += 1
        }
        return covered
    }

    private static func isCovered(_ time: Int64, by coverage: [Span]) -> Bool {
        let index = firstSpan(endingAfter: time, in: coverage)
        return index < coverage.count && coverage[index].start <= time
    }

    private static func merged(_ spans: [Span]) -> [Span] {
        var result: [Span] = []
        for span in spans.sorted(by: { $0.start < $1.start }) {
            if let last = result.last, span.start <= last.end {
                result[result.count - 1].end = max(last.end, span.end)
            } else {
                result.append(span)
            }
        }
        return result
    }
}

/// What both peers' schemas share: the projection's indexes and the columns a
/// ``PeerSample`` is read from.
enum PeerSchema {
    static let indexes = """
        CREATE INDEX samples_type_start ON samples (type, start_us);
        CREATE INDEX samples_type_anchor ON samples (type, anchor);
        CREATE UNIQUE INDEX samples_source_type_sync ON samples (source, type, sync_id);
        """

    /// In the order the peers' row readers expect.
    static let sampleColumns = "uuid, type, source, start_us, end_us, value, unit, sync_id, metadata"
}
