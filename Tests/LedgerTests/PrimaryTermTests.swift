import Foundation
import HealthModel
import Ledger
import LedgerSchema
import Testing

@Suite("A cluster leader's term in the hash chain")
struct PrimaryTermTests {
    /// The kinds of the ledger's events after `sequence`, in order.
    static func kinds(_ ledger: Ledger, after sequence: UInt64) throws -> [EventKind] {
        try ledger.events(from: sequence + 1, limit: 1_000).map(\.kind)
    }

    @Test("the first write under each epoch is preceded by a primaryChanged event, once, and survives closing the ledger")
    func firstWriteRecordsTheEpoch() async throws {
        let temporary = try TemporaryStore()
        do {
            let store = temporary.ledgerStore
            let ledger = try store.createLedger(id: "alice")
            _ = try await ledger.save([Fixtures.heartRate(60, at: 0)], by: .owner)
            let head = try ledger.head().sequence
            #expect(try Self.kinds(ledger, after: 0) == [.ledgerCreated, .objectSaved], "outside a cluster, nothing is recorded")

            store.primaryTerms[Placement.group(of: "alice")] = PrimaryTerm(epoch: 10, node: "n1", cluster: "care")
            _ = try await ledger.save([Fixtures.heartRate(61, at: 1)], by: .owner)
            _ = try await ledger.save([Fixtures.heartRate(62, at: 2)], by: .owner)
            #expect(try Self.kinds(ledger, after: head) == [.primaryChanged, .objectSaved, .objectSaved])
            let changed = try #require(try ledger.events(from: head + 1, limit: 1).first)
            #expect(changed.actor == .system)
            #expect(try changed.decodedBody() == .primaryChanged(epoch: 10, node: "n1", cluster: "care"))
            let page = try ledger.audit(AuditFilter(kinds: [.primaryChanged]), as: .owner)
            #expect(page.events.map(\.sentence) == ["server n1 of cluster care became this ledger's primary (epoch 10)"])
        }

        // Closed and opened again under the same epoch: nothing new to record.
        temporary.close()
        let reopened = try temporary.reopen()
        reopened.primaryTerms[Placement.group(of: "alice")] = PrimaryTerm(epoch: 10, node: "n1", cluster: "care")
        let ledger = try reopened.ledger("alice")
        var head = try ledger.head().sequence
        _ = try await ledger.save([Fixtures.heartRate(63, at: 3)], by: .owner)
        #expect(try Self.kinds(ledger, after: head) == [.objectSaved])

        // A later epoch is recorded; a refused write under it records nothing.
        reopened.primaryTerms[Placement.group(of: "alice")] = PrimaryTerm(epoch: 12, node: "n2", cluster: "care")
        let duplicate = Fixtures.heartRate(64, at: 4)
        _ = try await ledger.save([duplicate], by: .owner)
        head = try ledger.head().sequence
        reopened.primaryTerms[Placement.group(of: "alice")] = PrimaryTerm(epoch: 14, node: "n3", cluster: "care")
        await #expect(throws: (any Error).self) { try await ledger.save([duplicate], by: .owner) }
        #expect(try ledger.head().sequence == head)

        // An earlier epoch than the ledger records: a leader whose time is over writes nothing.
        reopened.primaryTerms[Placement.group(of: "alice")] = PrimaryTerm(epoch: 11, node: "n1", cluster: "care")
        let refusal = await #expect(throws: LedgerFailure.self) { try await ledger.save([Fixtures.heartRate(65, at: 5)], by: .owner) }
        #expect(refusal?.kind == .failedPrecondition)
        #expect(refusal?.message.contains("written under cluster epoch 12, later than this server's 11") == true, "\(String(describing: refusal))")
        #expect(try ledger.head().sequence == head)

        let terms = try ledger.events(from: 1, limit: 1_000).filter { $0.kind == .primaryChanged }.map { try $0.decodedBody() }
        #expect(terms == [.primaryChanged(epoch: 10, node: "n1", cluster: "care"), .primaryChanged(epoch: 12, node: "n2", cluster: "care")])
        #expect(try ledger.verify().isValid)
        #expect(try ledger.replay().identical)
    }

    @Test("a discarded tail takes its primaryChanged event with it: the next write under that epoch records it again")
    func discardedTailForgetsItsEpoch() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let ledger = try store.createLedger(id: "bob")
        _ = try await ledger.save([Fixtures.heartRate(60, at: 0)], by: .owner)
        let shared = try ledger.head().sequence
        store.primaryTerms[Placement.group(of: "bob")] = PrimaryTerm(epoch: 5, node: "n1", cluster: "care")
        _ = try await ledger.save([Fixtures.heartRate(61, at: 1)], by: .owner)
        let digestWithTerm = try ledger.projectionDigest()

        let (kept, removed) = try await ledger.discardTail(after: shared)
        #expect(kept == shared)
        #expect(removed.map(\.kind) == [.primaryChanged, .objectSaved])
        #expect(try ledger.projectionDigest() != digestWithTerm)
        _ = try await ledger.save([Fixtures.heartRate(62, at: 2)], by: .owner)
        #expect(try Self.kinds(ledger, after: shared) == [.primaryChanged, .objectSaved])
        #expect(try ledger.replay().identical)
        #expect(try ledger.verify().isValid)
    }

    @Test("a term is its placement group's: a ledger of another group is written with none")
    func termsArePerGroup() async throws {
        let temporary = try TemporaryStore()
        let store = temporary.ledgerStore
        let ids = (0..<200).map { "p\($0)" }
        let first = ids[0]
        let other = try #require(ids.first { Placement.group(of: $0) != Placement.group(of: first) })
        let led = try store.createLedger(id: first)
        let notLed = try store.createLedger(id: other)
        store.primaryTerms[Placement.group(of: first)] = PrimaryTerm(epoch: 7, node: "n1", cluster: "care")
        _ = try await led.save([Fixtures.heartRate(60, at: 0)], by: .owner)
        _ = try await notLed.save([Fixtures.heartRate(60, at: 0)], by: .owner)
        #expect(try led.events(from: 1, limit: 100).contains { $0.kind == .primaryChanged })
        #expect(try !notLed.events(from: 1, limit: 100).contains { $0.kind == .primaryChanged })
    }

    @Test("placement: every group on one member, ⌊16 ÷ members⌋ or one more each, the same whatever the order members are listed in")
    func placementIsEven() {
        #expect(Placement.assignment(of: []) == Array(repeating: nil, count: Placement.groups))
        #expect(Placement.assignment(of: ["solo"]) == Array(repeating: "solo", count: Placement.groups))
        for count in 2...7 {
            let members = (1...count).map { "n\($0)" }
            let assigned = Placement.assignment(of: members)
            #expect(assigned == Placement.assignment(of: members.reversed()))
            let loads = Dictionary(grouping: assigned.compactMap { $0 }, by: { $0 }).mapValues(\.count)
            #expect(assigned.allSatisfy { $0 != nil } && loads.keys.count == count, "\(assigned)")
            #expect(loads.values.allSatisfy { $0 == Placement.groups / count || $0 == Placement.groups / count + 1 }, "\(loads)")
        }
        // Ids spread over the groups (a hash of the id), and the same id always in the same one.
        let groups = Set((0..<1_000).map { Placement.group(of: "patient-\($0)") })
        #expect(groups == Set(0..<Placement.groups))
        #expect(Placement.group(of: "alice") == Placement.group(of: "alice"))
    }

    @Test("keepers: the placed member first, then others, as many as asked (all when fewer), the same whatever the order; a member added moves few copies")
    func keepersOfEachGroup() {
        #expect(Placement.keepers(of: [], copies: 3) == Array(repeating: [], count: Placement.groups))
        for count in 1...7 {
            let members = (1...count).map { "n\($0)" }
            let keepers = Placement.keepers(of: members, copies: 3)
            #expect(keepers == Placement.keepers(of: members.reversed(), copies: 3))
            #expect(keepers.map(\.first) == Placement.assignment(of: members))
            #expect(keepers.allSatisfy { Set($0).count == min(3, count) && $0.allSatisfy(members.contains) }, "\(keepers)")
            // With one more member, few copies move: about the new member's share (3 × 16 ÷
            // (count + 1)), plus what the even placement of primaries shifts.
            let grown = Placement.keepers(of: members + ["n\(count + 1)"], copies: 3)
            let moved = zip(keepers, grown).map { Set($0).subtracting($1).count }.reduce(0, +)
            #expect(count < 3 || moved <= 3 * Placement.groups / (count + 1) + 4, "\(moved) copies moved: \(keepers) → \(grown)")
        }
    }
}
