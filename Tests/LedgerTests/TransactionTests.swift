import Foundation
import LMDB
import Testing

/// A write transaction reads, puts and deletes single keys through a cursor per database that
/// it keeps for its whole life (so a key near the previous one is found without a descent from
/// the root). Whatever the order of operations, across databases, appends and nested
/// transactions that join or roll back, the result must be what a dictionary would hold.
@Suite("LMDB write transactions")
struct TransactionTests {
    @Test("puts, reads and deletes, in order and at random, in nested transactions that join or roll back, leave what a dictionary would hold", arguments: [1, 2, 3])
    func operationsMatchAModel(seed: UInt64) throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "transactions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = try Environment(path: directory.path, options: .init(mapSize: 64 << 20, durable: false))
        let databases = [try environment.openDatabase("a"), try environment.openDatabase("b")]
        var model: [[[UInt8]: [UInt8]]] = [[:], [:]]
        var random = SeededGenerator(state: seed)
        // Keys increase (as a time index's do) but also land anywhere, so the kept cursor is
        // sometimes on the right page, sometimes after the last one, sometimes elsewhere.
        var nextAppended: UInt32 = 1 << 20

        func key(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
        func randomKey() -> [UInt8] {
            if Bool.random(using: &random) {
                nextAppended += 1
                return key(nextAppended)
            }
            return key(UInt32.random(in: 0..<(1 << 20), using: &random))
        }

        /// Runs `count` random operations in `txn`, checking every read against `model`.
        func operate(_ txn: Transaction, _ model: inout [[[UInt8]: [UInt8]]], count: Int, depth: Int) throws {
            for _ in 0..<count {
                let which = Int.random(in: 0..<2, using: &random)
                let database = databases[which]
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<5:
                    let key = randomKey()
                    let value = (0..<Int.random(in: 0..<300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                    try txn.put(value, forKey: key, in: database)
                    model[which][key] = value
                case 5..<7:
                    let key = model[which].keys.randomElement(using: &random) ?? randomKey()
                    #expect(try txn.bytes(forKey: key, in: database) == model[which][key])
                case 7..<9:
                    let key = Bool.random(using: &random) ? (model[which].keys.randomElement(using: &random) ?? randomKey()) : randomKey()
                    #expect(try txn.delete(key, in: database) == (model[which].removeValue(forKey: key) != nil))
                default:
                    guard depth < 2 else { continue }
                    var childModel = model
                    let keep = Bool.random(using: &random)
                    struct RolledBack: Error {}
                    do {
                        try txn.nested { child in
                            try operate(child, &childModel, count: 40, depth: depth + 1)
                            if !keep { throw RolledBack() }
                        }
                        model = childModel
                    } catch is RolledBack {}
                }
            }
        }

        for _ in 0..<8 {
            var next = model
            try environment.write { txn in try operate(txn, &next, count: 200, depth: 0) }
            model = next
        }
        for (which, database) in databases.enumerated() {
            var stored: [[UInt8]: [UInt8]] = [:]
            try environment.read { txn in
                try txn.withCursor(on: database) { cursor in
                    var entry = try cursor.first()
                    while let current = entry {
                        stored[Array(current.key)] = Array(current.value)
                        entry = try cursor.next()
                    }
                }
            }
            #expect(stored == model[which])
        }
    }
}
