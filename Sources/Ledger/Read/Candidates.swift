import HealthModel
import LMDB

/// Where a query's candidate objects come from in one snapshot, in the query's order:
/// entries already collected and sorted, or walks over a start or end index. Each can
/// begin after any entry, so a query can be read a piece at a time (``QueryCursor``).
enum Candidates {
    /// Collected and sorted in the query's order.
    case sorted([IndexEntry])
    /// A walk over the start index: every source's (`source` nil) or one source's (a reader's own).
    case byStart(type: UInt32, source: UInt32?, range: TimeRange, longest: Int64, descending: Bool)
    /// Walks over named sources' parts of the start index, merged (one walk for one source).
    case bySources(type: UInt32, sources: [(code: UInt32, longest: Int64)], range: TimeRange, descending: Bool)
    /// A walk over the end index.
    case byEnd(type: UInt32, range: TimeRange, longest: Int64, descending: Bool)

    static let none = Candidates.sorted([])

    /// Visits the candidates in order, from the one after `position` (an entry visited
    /// earlier, in this snapshot or an older one) or from the first, until `visit` returns false.
    func visit(
        after position: IndexEntry?, sort: SampleSort, in snapshot: LedgerSnapshot, _ visit: (IndexEntry) throws -> Bool
    ) throws {
        switch self {
        case .sorted(let entries):
            var index = entries.startIndex
            if let position {
                // The entries are in `sort` order: skip, by bisection, those up to `position`.
                var upper = entries.endIndex
                while index < upper {
                    let middle = (index + upper) / 2
                    if sort.orders(position, before: entries[middle]) { upper = middle } else { index = middle + 1 }
                }
            }
            for entry in entries[index...] where try !visit(entry) { return }
        case .byStart(let type, let source, let range, let longest, let descending):
            try Ledger.scanByStart(
                type: type, source: source, range: range, longest: longest, descending: descending, after: position, in: snapshot, visit)
        case .bySources(let type, let sources, let range, let descending):
            try Ledger.scanByStart(type: type, sources: sources, range: range, descending: descending, after: position, in: snapshot, visit)
        case .byEnd(let type, let range, let longest, let descending):
            try Ledger.scanByEnd(type: type, range: range, longest: longest, descending: descending, after: position, in: snapshot, visit)
        }
    }
}

extension SampleSort {
    /// Whether `a` comes before `b` in this order: by date, ties by UUID; descending
    /// reverses both (the order of the type's indexes, walked either way).
    func orders(_ a: IndexEntry, before b: IndexEntry) -> Bool {
        let (first, second, byEnd): (IndexEntry, IndexEntry, Bool)
        switch self {
        case .startDate(let ascending): (first, second, byEnd) = ascending ? (a, b, false) : (b, a, false)
        case .endDate(let ascending): (first, second, byEnd) = ascending ? (a, b, true) : (b, a, true)
        }
        let (x, y) = byEnd ? (first.endUs, second.endUs) : (first.startUs, second.startUs)
        return x != y ? x < y : first.uuid.lexicographicallyPrecedes(second.uuid)
    }
}
