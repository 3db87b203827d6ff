import Foundation
import HealthModel
import Ledger
import Testing

/// A cluster member's copy of a ledger it no longer keeps, removed (`releaseCopy`): not while
/// reads' access records wait to go to the primary, nor once it is wanted again; no erasure
/// journaled; what a crash left of one purged.
@Suite("Released copies")
struct ReleasedCopyTests {
    @Test("a copy goes only once its access records were forwarded and it is not wanted again; no erasure is journaled, and the ledger may come back")
    func releaseCopy() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        var ledger: Ledger? = try store.createLedger(id: "alice")
        _ = try await ledger!.save([Fixtures.heartRate(61, at: 0)], by: .owner)

        // A read answered here, on its way to the primary.
        store.accessForwarding.forward(.everyLedger)
        ledger!.recordAccess(AccessRecord(time: Date(), credentialID: "c1", principal: .owner, method: "healthledger.v1.Ledger/Fetch", types: [], objects: 1))
        await #expect(throws: LedgerStore.UnforwardedAccessRecords.self) { try await store.releaseCopy(of: "alice", waitingUpTo: .seconds(5)) }
        #expect(store.holds("alice"))
        ledger = try store.ledger("alice")
        try ledger!.forwarded(try ledger!.forwardableAccessRecords().keys)

        // Wanted again by the time nothing holds it: kept.
        ledger = nil
        let wanted = await #expect(throws: LedgerFailure.self) { try await store.releaseCopy(of: "alice", waitingUpTo: .seconds(5)) { false } }
        #expect(wanted?.message.contains("wanted again") == true, "\(String(describing: wanted))")
        let kept = try store.ledger("alice").head().sequence
        #expect(store.holds("alice") && kept >= 2)

        try await store.releaseCopy(of: "alice", waitingUpTo: .seconds(5))
        let left = try store.ledgerIDs()
        let erased = try store.wasErasedWhole("alice")
        #expect(!store.holds("alice") && left.isEmpty)
        #expect(!erased && store.erasedLedgerIDs().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: temporary.directory.appending(path: "ledgers/.released-alice").path))
        // Not erased: a copy of it may come here again.
        _ = try store.createLedger(id: "alice")
        #expect(store.holds("alice"))
    }

    @Test("what a crash left of a copy being released is no ledger, and is removed when a member starts")
    func purgedOnStart() throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let left = temporary.directory.appending(path: "ledgers/.released-bob")
        try FileManager.default.createDirectory(at: left, withIntermediateDirectories: true)
        try Data(repeating: 7, count: 4096).write(to: left.appending(path: "data.mdb"))
        let ids = try store.ledgerIDs()
        #expect(ids.isEmpty && !store.holds("bob"))
        store.purgeReleasedCopies()
        #expect(!FileManager.default.fileExists(atPath: left.path))
    }
}
