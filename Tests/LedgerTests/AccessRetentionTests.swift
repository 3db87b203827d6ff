import Foundation
import HealthModel
import Ledger
import Testing

@Suite("Access records' retention", .timeLimit(.minutes(1)))
struct AccessRetentionTests {
    static func record(daysAgo days: Double) -> AccessRecord {
        AccessRecord(
            time: Date().addingTimeInterval(-days * 86_400), credentialID: "0123456789abcdef", principal: .owner,
            method: "healthledger.v1.Ledger/Fetch", types: ["HKQuantityTypeIdentifierHeartRate"], objects: 1)
    }

    @Test("a ledger nobody reads still forgets expired access records: its flush loop deletes them with nothing new to write")
    func pruneWithoutReads() async throws {
        var keeping = LedgerConfiguration()
        keeping.accessFlushInterval = nil
        let temporary = try TemporaryStore(configuration: keeping)
        func write() throws {
            let ledger = try temporary.ledgerStore.createLedger(id: "quiet")
            ledger.recordAccess(Self.record(daysAgo: 40))
            ledger.recordAccess(Self.record(daysAgo: 10))
            #expect(try ledger.flushAccessRecords() == 2)
            // Nothing noted, nothing expired: nothing to write.
            #expect(try ledger.flushAccessRecords() == 0)
            #expect(try ledger.accessRecords(AccessRecordFilter(), as: .owner).records.count == 2)
        }
        try write()
        temporary.close()

        var forgetting = LedgerConfiguration()
        forgetting.accessRetention = 30 * 86_400
        forgetting.accessFlushInterval = .milliseconds(10)
        let ledger = try temporary.reopen(configuration: forgetting).ledger("quiet")
        // No call reads the ledger; its loop's first turn deletes the expired record.
        while try ledger.accessRecords(AccessRecordFilter(), as: .owner).records.count == 2 { try await Task.sleep(for: .milliseconds(10)) }
        let left = try ledger.accessRecords(AccessRecordFilter(), as: .owner).records
        #expect(left.count == 1 && left[0].time > Date().addingTimeInterval(-11 * 86_400))
    }
}
