import Dispatch
import LMDB

/// Extends the Merkle tree on a helper thread while the writer goes on applying events.
///
/// The writer hands over event hashes in chunks; the helper hashes the leaves and the nodes
/// they complete, in order. Before each request of a group commit the writer takes a
/// ``mark()``, so that a refused request's leaves can be taken back (``rollBack(to:)``). At
/// the end of the transaction ``finish()`` waits for the helper and gives the completed nodes
/// to store, which the writer puts in the same transaction: the tree is still written
/// atomically with its events, only its hashing runs beside the rest of the write.
///
/// A transaction of fewer than ``chunk`` leaves (a single save) never reaches the helper:
/// its leaves, and the marks taken among them, wait on the writer's side, and ``finish()``
/// hashes them there. Handing one leaf over and waiting for it would cost two thread
/// switches, more than the hashing.
final class MerkleAppender: @unchecked Sendable {
    /// Leaves handed over at a time: enough to make a hand-over's cost vanish per leaf.
    static let chunk = 128

    private let queue = DispatchQueue(label: "healthledger.merkle")
    // The writer's side.
    private var unsent: [InlineHash] = []
    /// Marks taken since the last hand-over: the tree's size, and how many of `unsent` come before it.
    private var unsentMarks: [(size: UInt64, position: Int)] = []
    /// Whether any leaf went to the helper: until then nothing runs on `queue`, and the
    /// helper's side is the writer's.
    private var handedOver = false
    /// Leaves appended so far (the tree's size once the helper catches up).
    private var size: UInt64
    // The helper's side: touched only on `queue` (or after waiting for it).
    private var frontier: Frontier
    private var completed: [(key: NodeKey, hash: InlineHash)] = []
    private var marks: [(size: UInt64, frontier: Frontier, completed: Int)] = []

    init(frontier: Frontier) {
        self.frontier = frontier
        self.size = frontier.size
        unsent.reserveCapacity(Self.chunk)
    }

    /// Adds the leaf of the event whose hash is `eventHash`.
    func append(eventHash: [UInt8]) {
        eventHash.withUnsafeBytes { append(eventHash: InlineHash($0)) }
    }

    func append(eventHash: InlineHash) {
        unsent.append(eventHash)
        size += 1
        if unsent.count == Self.chunk { send() }
    }

    /// Hands the unsent leaves, and the marks among them, to the helper.
    private func send() {
        guard !unsent.isEmpty else { return }
        let leaves = unsent
        let marks = unsentMarks
        unsent.removeAll(keepingCapacity: true)
        unsentMarks.removeAll()
        handedOver = true
        queue.async { self.extend(with: leaves, marks: marks) }
    }

    /// Appends `leaves`, noting each of `marks` where it was taken: on the helper, or on the
    /// writer while nothing went to the helper.
    private func extend(with leaves: [InlineHash], marks: [(size: UInt64, position: Int)]) {
        var next = marks.startIndex
        for (index, leaf) in leaves.enumerated() {
            while next < marks.endIndex, marks[next].position == index {
                self.marks.append((marks[next].size, frontier, completed.count))
                next += 1
            }
            frontier.append(eventHash: leaf) { key, hash in completed.append((key, hash)) }
        }
        for mark in marks[next...] { self.marks.append((mark.size, frontier, completed.count)) }
    }

    /// Where the tree stands now, for ``rollBack(to:)``.
    func mark() -> UInt64 {
        unsentMarks.append((size, unsent.count))
        return size
    }

    /// Takes back every leaf appended since `mark` (a value ``mark()`` returned).
    func rollBack(to mark: UInt64) {
        size = mark
        if let index = unsentMarks.lastIndex(where: { $0.size == mark }) {
            // Taken since the last hand-over: so were the leaves after it.
            unsent.removeSubrange(unsentMarks[index].position...)
            unsentMarks.removeSubrange((index + 1)...)
            return
        }
        unsent.removeAll(keepingCapacity: true)
        unsentMarks.removeAll()
        queue.sync {
            guard let index = marks.lastIndex(where: { $0.size == mark }) else { preconditionFailure("no Merkle mark at \(mark)") }
            frontier = marks[index].frontier
            completed.removeSubrange(marks[index].completed...)
            marks.removeSubrange((index + 1)...)
        }
    }

    /// Waits for the helper and puts every completed node into `database` in `txn`; returns
    /// the frontier after the last leaf.
    func finish(in txn: Transaction, _ database: Database) throws -> Frontier {
        let completed: [(key: NodeKey, hash: InlineHash)]
        let frontier: Frontier
        if handedOver {
            send()
            (completed, frontier) = queue.sync { (self.completed, self.frontier) }
        } else {
            extend(with: unsent, marks: [])
            unsent.removeAll(keepingCapacity: true)
            (completed, frontier) = (self.completed, self.frontier)
        }
        for node in completed { try txn.put(node.hash, forKey: node.key, in: database, append: true) }
        return frontier
    }
}
