/// Visits the entries of several walks, each already in order, as one walk in that order:
/// each time the least of the walks' current entries (`heads`, nil for a walk that has
/// ended), taken from the walk `next` then moves on, until every walk has ended or `visit`
/// returns false. Sources' ranges of one index are merged this way; a type has few sources,
/// so finding the least head by comparing them all costs less than keeping them in a heap.
func visitMerged<Entry>(
    heads: [Entry?], precedes: (Entry, Entry) -> Bool, next: (_ walk: Int) throws -> Entry?, _ visit: (Entry) throws -> Bool
) throws {
    var heads = heads
    while true {
        var least: Int?
        for index in heads.indices {
            guard let head = heads[index] else { continue }
            if let current = least, !precedes(head, heads[current]!) { continue }
            least = index
        }
        guard let index = least, try visit(heads[index]!) else { return }
        heads[index] = try next(index)
    }
}
