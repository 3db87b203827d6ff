import Foundation
import HealthModel
import LMDB
import Ledger
import LedgerSchema
import TestSupport
import Testing

@Suite("Replay and verify")
struct ReplayAndVerifyTests {
    /// Saves, replaces, deletes and category samples from several principals.
    static func mixedWorkload(_ ledger: Ledger) async throws {
        var rng = SystemRandomNumberGenerator()
        var saved: [UUID] = []
        let types = [Fixtures.heartRate.objectType, Fixtures.steps.objectType, Fixtures.bodyMass.objectType, Fixtures.sleep.objectType]
        try await ledger.authorize([Fixtures.appA, Fixtures.appB], share: types, read: [Fixtures.steps.objectType])
        try await ledger.setSourcePriority(for: Fixtures.steps.objectType, bundleIdentifiers: [], by: .owner)
        for round in 0..<20 {
            let principal: Principal = [.owner, .app(Fixtures.appA), .app(Fixtures.appB)][round % 3]
            var batch = (0..<50).map { Fixtures.heartRate(Double.random(in: 40...180, using: &rng), at: Double(round * 100 + $0)) }
            batch.append(Fixtures.steps(Double(round * 10), from: Double(round) * 3600, to: Double(round) * 3600 + 1800))
            batch.append(Fixtures.weight(60 + Double(round), syncIdentifier: "weight-\(round % 4)", version: Double(round)))
            batch.append(.categorySample(CategorySample(
                type: Fixtures.sleep, value: [0, 1, 2, 3, 4, 5][round % 6], start: Fixtures.base.addingTimeInterval(Double(round) * 600),
                end: Fixtures.base.addingTimeInterval(Double(round) * 600 + 300))))
            _ = try await ledger.save(batch, by: principal)
            if case .owner = principal { saved += batch.prefix(10).map(\.uuid) }
            if round % 5 == 4 {
                try await ledger.delete(Array(saved.suffix(5)), by: .owner)
                saved.removeLast(5)
            }
        }
        _ = try await ledger.deleteObjects(
            of: Fixtures.heartRate.objectType, overlapping: DateInterval(start: Fixtures.base, duration: 30), by: .app(Fixtures.appA))
    }

    @Test("replay after a mixed workload is byte-identical to the live projections")
    func replayEquality() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "mixed")
        try await Self.mixedWorkload(ledger)
        let report = try ledger.replay()
        #expect(report.identical)
        #expect(report.events == (try ledger.head().sequence))
        #expect(report.liveDigest == (try ledger.projectionDigest()))
        #expect(try ledger.verify().isValid)
    }

    /// Past one scratch transaction (50,000 events) and many of the reader's chunks (1,024),
    /// with deletes that read back earlier events; the log is also hashed in segments.
    @Test("replay of a log longer than one scratch transaction is byte-identical")
    func longReplay() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "long")
        var kept: [UUID] = []
        for batch in 0..<55 {
            let objects = (0..<1000).map { Fixtures.heartRate(60, at: Double(batch * 1000 + $0)) }
            _ = try await ledger.save(objects, by: .owner)
            kept.append(objects[0].uuid)
        }
        try await ledger.delete(Array(kept.prefix(50)), by: .owner)
        let report = try ledger.replay()
        #expect(report.identical)
        #expect(report.events == (try ledger.head().sequence))
        #expect(try ledger.verify(expectedHead: nil, segments: 2, progress: nil).isValid)
    }

    @Test("replay --install repairs damaged projections")
    func repair() async throws {
        let temporary = try TemporaryStore()
        let uuid: UUID
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "repair")
            try await Self.mixedWorkload(ledger)
            uuid = try #require(try ledger.samples(SampleQuery(type: Fixtures.heartRate.objectType, limit: 1), as: .owner).first?.uuid)
        }
        temporary.close()
        // Damage a projection behind the ledger's back: drop one object's entry.
        do {
            let environment = try Environment(path: temporary.directory.appending(path: "ledgers/repair").path)
            let objects = try environment.openDatabase("objects")
            let removed = try environment.write { txn in try txn.delete(uuid.bytes, in: objects) }
            #expect(removed)
        }
        let ledger = try temporary.reopen().ledger("repair")
        #expect(try ledger.object(with: uuid, as: .owner) == nil)
        let damaged = try ledger.replay()
        #expect(!damaged.identical && !damaged.installed)
        let repaired = try ledger.replay(install: true)
        #expect(repaired.installed)
        #expect(try ledger.object(with: uuid, as: .owner) != nil)
        #expect(try ledger.replay().identical)
    }

    /// Verifies `ledger` on one thread and hashing its chain in 2 to 8 parallel segments;
    /// every report must be the same. Returns the one-thread report.
    static func verifyEveryWay(_ ledger: Ledger, expectedHead: (sequence: UInt64, hash: [UInt8])? = nil) throws -> VerifyReport {
        let single = try ledger.verify(expectedHead: expectedHead, segments: 1, progress: nil)
        for segments in 2...8 {
            let split = try ledger.verify(expectedHead: expectedHead, segments: segments, progress: nil)
            #expect(
                split.problem == single.problem && split.eventsChecked == single.eventsChecked && split.headHash == single.headHash,
                "\(segments) segments: \(split.problem?.description ?? "valid") against \(single.problem?.description ?? "valid")")
        }
        return single
    }

    @Test("verify names the event whose stored bytes had a byte flipped")
    func flippedByte() async throws {
        let temporary = try TemporaryStore()
        let marker = "FLIP-MARKER-\(UUID().uuidString)"
        let target: UInt64
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "flip")
            // Events 2–99, the marked 100, then 101–200: in two segments, the marked event
            // ends the first, and only the join of the two sees its change.
            _ = try await ledger.save((0..<98).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
            let marked = Fixtures.heartRate(61, at: 500, metadata: ["note": .string(marker)])
            _ = try await ledger.save([marked], by: .owner)
            _ = try await ledger.save((0..<100).map { Fixtures.heartRate(62, at: 1000 + Double($0)) }, by: .owner)
            target = try #require(try ledger.events(from: 1, limit: 1000).first { $0.objectUUID == marked.uuid }?.sequence)
            #expect(target == 100)
            #expect(try ledger.verify().isValid)
        }
        temporary.close()
        let file = temporary.directory.appending(path: "ledgers/flip/data.mdb")
        var bytes = try [UInt8](Data(contentsOf: file))
        let needle = Array(marker.utf8)
        var flipped = 0
        // Old copies of the page may remain in free pages: flip every occurrence.
        var index = 0
        while index <= bytes.count - needle.count {
            if bytes[index] == needle[0], Array(bytes[index..<(index + needle.count)]) == needle {
                bytes[index + 3] ^= 0x01
                flipped += 1
                index += needle.count
            } else {
                index += 1
            }
        }
        #expect(flipped >= 1)
        try Data(bytes).write(to: file)

        let report = try Self.verifyEveryWay(temporary.reopen().ledger("flip"))
        #expect(!report.isValid)
        #expect(report.problem?.sequence == target)
    }

    /// Event 51 of 101 begins the second of two segments: only the join of the segments
    /// sees its link.
    @Test("verify names the event whose own link (previous hash) was damaged", arguments: [40, 51] as [UInt64])
    func damagedLink(target: UInt64) async throws {
        let temporary = try TemporaryStore()
        let link: [UInt8]
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "link")
            _ = try await ledger.save((0..<100).map { Fixtures.heartRate(60, at: Double($0)) }, by: .owner)
            link = try #require(try ledger.events(from: target, limit: 1).first?.previousHash)
        }
        temporary.close()
        let file = temporary.directory.appending(path: "ledgers/link/data.mdb")
        var bytes = try [UInt8](Data(contentsOf: file))
        var flipped = 0
        for index in 0...(bytes.count - link.count) where bytes[index] == link[0] && Array(bytes[index..<(index + link.count)]) == link {
            bytes[index + 10] ^= 0x80
            flipped += 1
        }
        #expect(flipped >= 1)
        try Data(bytes).write(to: file)
        let report = try Self.verifyEveryWay(temporary.reopen().ledger("link"))
        #expect(report.problem?.sequence == target)
    }

    @Test("verify prints the head; --expect-head passes on the ledger that extends it and fails on a history rewritten with a consistent chain")
    func expectedHead() async throws {
        let temporary = try TemporaryStore()
        let pinned: (sequence: UInt64, hash: [UInt8])
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "pinned")
            for round in 0..<4 { _ = try await ledger.save((0..<5).map { Fixtures.heartRate(60, at: Double(round * 10 + $0)) }, by: .owner) }
            pinned = try ledger.head()
            let report = try Self.verifyEveryWay(ledger, expectedHead: pinned)
            #expect(report.isValid && report.headSequence == pinned.sequence && report.headHash == pinned.hash)
            // More events later: the ledger still extends the pinned head.
            _ = try await ledger.save([Fixtures.heartRate(70, at: 999)], by: .owner)
            #expect(try ledger.verify(expectedHead: pinned).isValid)
            #expect(try ledger.verify(expectedHead: (pinned.sequence + 5, pinned.hash)).problem?.reason.contains("ends at event") == true)
            var wrong = pinned.hash
            wrong[0] ^= 1
            #expect(try ledger.verify(expectedHead: (pinned.sequence, wrong)).problem?.sequence == pinned.sequence)
        }
        temporary.close()
        // Rewrite event 5 (its commit time), then re-link every later event and the head, as
        // someone covering their tracks would: the chain is consistent again.
        let rewritten: UInt64 = 5
        try rewriteHistory(ledgerAt: temporary.directory.appending(path: "ledgers/pinned"), from: rewritten)
        let ledger = try temporary.reopen().ledger("pinned")
        #expect(try ledger.verify().isValid, "the rewritten chain is consistent on its own")
        let report = try Self.verifyEveryWay(ledger, expectedHead: pinned)
        #expect(report.problem?.sequence == pinned.sequence)
        #expect(report.problem?.reason.contains("rewritten") == true)
    }

    @Test("verify detects events removed from the end or the middle of the log")
    func removedEvents() async throws {
        let temporary = try TemporaryStore()
        let head: UInt64
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "cut")
            for round in 0..<5 { _ = try await ledger.save((0..<10).map { Fixtures.heartRate(60, at: Double(round * 10 + $0)) }, by: .owner) }
            head = try ledger.head().sequence
        }
        temporary.close()
        func removeEvents(_ sequences: [UInt64]) throws {
            let environment = try Environment(path: temporary.directory.appending(path: "ledgers/cut").path)
            let events = try environment.openDatabase("events")
            let removed = try environment.write { txn in
                try sequences.filter { try txn.delete(withUnsafeBytes(of: $0.bigEndian) { Array($0) }, in: events) }
            }
            #expect(removed == sequences)
        }
        try removeEvents([head, head - 1])
        let truncated = try Self.verifyEveryWay(temporary.reopen().ledger("cut"))
        #expect(truncated.problem?.sequence == head - 1)
        #expect(truncated.problem?.reason.contains("truncated") == true)

        temporary.close()
        try removeEvents([20])
        let gap = try Self.verifyEveryWay(temporary.reopen().ledger("cut"))
        #expect(gap.problem?.sequence == 20)
    }

    @Test("a truncated data file is reported, not a crash")
    func truncatedFile() async throws {
        let temporary = try TemporaryStore()
        do {
            let ledger = try temporary.ledgerStore.createLedger(id: "short")
            for round in 0..<20 { _ = try await ledger.save((0..<100).map { Fixtures.heartRate(60, at: Double(round * 100 + $0)) }, by: .owner) }
        }
        temporary.close()
        let file = temporary.directory.appending(path: "ledgers/short/data.mdb")
        let handle = try FileHandle(forWritingTo: file)
        let length = try handle.seekToEnd()
        try handle.truncate(atOffset: length / 2)
        try handle.close()
        let failure = #expect(throws: LedgerFailure.self) { try temporary.reopen().ledger("short") }
        #expect(failure?.kind == .corrupted)
        #expect(failure?.message.contains("truncated") == true)
    }
}
