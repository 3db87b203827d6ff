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
final class MerkleAppender: @unchecked Sendable {
    /// Leaves handed over at a time: enough to make a hand-over's cost vanish per leaf.
    static let chunk = 128

    private let queue = DispatchQueue(label: "healthledger.merkle")
    // The writer's side.
    private var unsent: [InlineHash] = []
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

    private func send() {
        guard !unsent.isEmpty else { return }
        let leaves = unsent
        unsent.removeAll(keepingCapacity: true)
        queue.async {
            for leaf in leaves {
                self.frontier.append(eventHash: leaf) { key, hash in self.completed.append((key, hash)) }
            }
        }
    }

    /// Where the tree stands now, for ``rollBack(to:)``.
    func mark() -> UInt64 {
        send()
        let size = self.size
        queue.async { self.marks.append((size, self.frontier, self.completed.count)) }
        return size
    }

    /// Takes back every leaf appended since `mark` (a value ``mark()`` returned).
    func rollBack(to mark: UInt64) {
        unsent.removeAll(keepingCapacity: true)
        size = mark
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
        send()
        let (completed, frontier) = queue.sync { (self.completed, self.frontier) }
        for node in completed { try txn.put(node.hash, forKey: node.key, in: database, append: true) }
        return frontier
    }
}
