import Foundation
import LMDB
import Testing

@testable import Ledger

/// The appender keeps a small transaction's leaves on the writer's side and hands a large
/// one's to its helper in chunks; either way, marks and roll-backs must leave the tree a
/// transaction of only the kept leaves would.
struct MerkleAppenderTests {
    @Test("requests of random sizes, some rolled back to their mark, leave the nodes and frontier of the kept leaves alone", arguments: [1, 2, 3, 4, 5, 6])
    func rollBacksMatchTheKeptLeaves(seed: UInt64) throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "merkle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = try Environment(path: directory.path, options: .init(mapSize: 64 << 20, durable: false))
        let appended = try environment.openDatabase("appended")
        var random = SeededGenerator(state: seed)
        func leaf() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) } }

        // A tree already holding some leaves, as a ledger's does.
        let start = UInt64.random(in: 0..<300, using: &random)
        var frontier = Frontier(size: 0)
        for _ in 0..<start { leaf().withUnsafeBytes { frontier.append(eventHash: InlineHash($0)) { _, _ in } } }

        // Sizes from one leaf (a single save) past several hand-overs.
        let requests = Int.random(in: 1...12, using: &random)
        let appender = MerkleAppender(frontier: frontier)
        var kept: [[UInt8]] = []
        for _ in 0..<requests {
            let mark = appender.mark()
            let leaves = (0..<Int.random(in: 0...(Bool.random(using: &random) ? 3 : 300), using: &random)).map { _ in leaf() }
            for hash in leaves { appender.append(eventHash: hash) }
            if Int.random(in: 0..<3, using: &random) == 0 {
                appender.rollBack(to: mark)
            } else {
                kept += leaves
            }
        }
        // The reference: the frontier itself, given only the kept leaves.
        var reference = frontier
        var expectedNodes: [[UInt8]] = []
        for hash in kept {
            reference.append(eventHash: hash) { key, node in
                expectedNodes.append(key.withKeyBytes { Array($0) } + node.bytes)
            }
        }
        let result = try environment.write { txn in try appender.finish(in: txn, appended) }
        #expect(result == reference)
        #expect(result.size == start + UInt64(kept.count))
        let nodes = try environment.read { txn in
            try txn.withCursor(on: appended) { cursor in
                var all: [[UInt8]] = []
                var entry = try cursor.first()
                while let current = entry {
                    all.append(Array(current.key) + Array(current.value))
                    entry = try cursor.next()
                }
                return all
            }
        }
        expectedNodes.sort { $0.lexicographicallyPrecedes($1) }
        #expect(nodes == expectedNodes)
    }
}
