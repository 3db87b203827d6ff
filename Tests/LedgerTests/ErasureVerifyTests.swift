import Foundation
import HealthModel
import LMDB
import Ledger
import LedgerSchema
import Testing

/// `verify`'s rule for bodies (docs/LEDGER.md, "Events and the hash chain"): what the hash no
/// longer covers is still checked.
@Suite("Verify: bodies against their commitments")
struct ErasureVerifyTests {
    /// Rewrites event `sequence` of the closed ledger `id` with `change`.
    static func edit(_ temporary: TemporaryStore, ledger id: String, event sequence: UInt64, _ change: ([UInt8]) throws -> [UInt8]) throws {
        let environment = try Environment(path: temporary.directory.appending(path: "ledgers/\(id)").path)
        let events = try environment.openDatabase("events")
        let key = withUnsafeBytes(of: sequence.bigEndian) { Array($0) }
        try environment.write { txn in
            let stored = try #require(try txn.bytes(forKey: key, in: events))
            try txn.put(try change(stored), forKey: key, in: events)
        }
    }

    @Test("a body stripped without an erasure event, a body changed, and a second body are each named at their event")
    func strippedChangedAndDoubled() async throws {
        let temporary = try TemporaryStore()
        let cases: [(String, String, ([UInt8]) throws -> [UInt8])] = [
            // Stripped: the hash is unchanged, so only the erasure rule sees it.
            ("stripped", "its body is missing and no erasure event names it", { stored in try stored.withUnsafeBytes { try EventLayout.erased($0) } }),
            // Changed: the body's last byte, under the same header.
            ("changed", "its body does not match the commitment in its header", { stored in
                var changed = stored
                changed[changed.count - 1] ^= 1
                return changed
            }),
            // Doubled: a forged body before the salt and the genuine body, which a reader taking
            // the first body would serve.
            ("doubled", "the stored bytes are not a well-formed event", { stored in
                let layout = try stored.withUnsafeBytes { try EventLayout(stored: $0) }
                let forged: [UInt8] = [0x7A, 3, 1, 2, 3]
                return Array(stored[..<layout.headerLength]) + forged + Array(stored[layout.headerLength...])
            }),
        ]
        for (id, _, _) in cases {
            let ledger = try temporary.ledgerStore.createLedger(id: id)
            try await ledger.save([Fixtures.heartRate(70, at: 0), Fixtures.heartRate(71, at: 60), Fixtures.heartRate(72, at: 120)], by: .owner)
            #expect(try ledger.verify().isValid)
        }
        temporary.close()
        for (id, _, change) in cases { try Self.edit(temporary, ledger: id, event: 3, change) }
        let store = try temporary.reopen()
        for (id, reason, _) in cases {
            let report = try store.ledger(id).verify()
            #expect(report.problem?.sequence == 3 && report.problem?.reason == reason, "\(id): \(String(describing: report.problem))")
        }
    }
}
