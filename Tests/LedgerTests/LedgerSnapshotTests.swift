import Foundation
import HealthModel
import LedgerSchema
import Testing

@testable import Ledger

@Suite("Read snapshots")
struct LedgerSnapshotTests {
    /// What a write saw through its own snapshot before it failed on purpose.
    struct Observed: Error {
        let sequence: UInt64
        let ownEvent: LedgerEvent
        let headInside: UInt64
        let earlierObjectFound: Bool
    }

    @Test("a write reads its own appended events through its snapshot; once it fails, no read snapshot sees them")
    func writeSnapshot() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "snapshots")
        let earlier = Fixtures.heartRate(60, at: 0)
        _ = try await ledger.save([earlier], by: .owner)
        let headBefore = try ledger.read { try LogHead.read($0) }

        var observed: Observed?
        do {
            _ = try await ledger.committer.submit { context -> Void in
                let sequence = try context.append(kind: .ledgerCreated, actor: .system, objectType: nil, objectUUID: nil, body: [], change: .none)
                throw Observed(
                    sequence: sequence, ownEvent: try LedgerEvent(stored: try Ledger.storedEvent(sequence, in: context.reads)),
                    headInside: try LogHead.read(context.reads).sequence,
                    earlierObjectFound: try StoredObject.load(earlier.uuid.bytes, in: context.reads) != nil)
            }
        } catch let error as Observed {
            observed = error
        }
        let inside = try #require(observed)
        #expect(inside.sequence == headBefore.sequence + 1)
        #expect(inside.ownEvent.kind == .ledgerCreated, "the write's snapshot holds the event it appended")
        #expect(inside.headInside == headBefore.sequence, "the head record is written when the transaction finishes")
        #expect(inside.earlierObjectFound, "and everything committed before it")

        // The failed write is gone: the next read snapshot ends where the log ended before.
        let after = try ledger.read { snapshot in (try LogHead.read(snapshot), try? Ledger.storedEvent(inside.sequence, in: snapshot)) }
        #expect(after.0 == headBefore)
        #expect(after.1 == nil)
        #expect(try ledger.object(with: earlier.uuid, as: .owner) != nil)
    }
}
