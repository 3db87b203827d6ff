import Crypto
import Foundation
import Testing
import _CryptoExtras
import HealthModel
import LMDB

@testable import Ledger

/// What docs/LEDGER.md ("Encryption at rest") says a verifier in another language would
/// decrypt, checked with swift-crypto's own AES-GCM, AES-GCM-SIV and AES: the cipher's
/// BoringSSL contexts write standard formats.
@Suite("The sealed formats, opened with swift-crypto's API")
struct LedgerCipherTests {
    let cipher = LedgerCipher.generate()
    var key: SymmetricKey { SymmetricKey(data: cipher.rawKey) }

    @Test("an event: 0xE5, then AES-256-GCM's nonce, ciphertext and tag, with domain 1 and the sequence key as associated data")
    func event() throws {
        let event = Array("the stored bytes of an event".utf8)
        let sequenceKey = KeyEncoding.sequenceKey(42)
        let sealed = cipher.sealEvent(event, key: sequenceKey)
        #expect(sealed.first == LedgerCipher.sealedEventMark && sealed.count == 1 + event.count + LedgerCipher.overhead)
        let box = try AES.GCM.SealedBox(combined: sealed.dropFirst())
        #expect(Array(try AES.GCM.open(box, using: key, authenticating: [1] + sequenceKey)) == event)
        // Each sealing has its own nonce; an event moved to another sequence does not open.
        #expect(cipher.sealEvent(event, key: sequenceKey) != sealed)
        let body = Array(sealed.dropFirst())
        func open(at sequenceKey: [UInt8]) throws -> [UInt8] {
            try body.withUnsafeBytes { sealed in try sequenceKey.withUnsafeBytes { try cipher.open(sealed, domain: .event, context: $0) } }
        }
        #expect(try open(at: sequenceKey) == event)
        #expect(throws: LedgerFailure.self) { try open(at: KeyEncoding.sequenceKey(43)) }
    }

    @Test("a projection's value: AES-256-GCM-SIV with the all-zero nonce, ciphertext then tag, deterministic")
    func value() throws {
        let plain = Array(0..<128).map { UInt8($0) }
        let rowKey: [UInt8] = [0, 0, 0, 7]
        let sealed = plain.withUnsafeBytes { plain in rowKey.withUnsafeBytes { cipher.sealValue(plain, domain: .characteristic, context: $0) } }
        #expect(sealed == plain.withUnsafeBytes { plain in rowKey.withUnsafeBytes { cipher.sealValue(plain, domain: .characteristic, context: $0) } })
        let box = try AES.GCM._SIV.SealedBox(
            nonce: AES.GCM._SIV.Nonce(data: [UInt8](repeating: 0, count: 12)), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
        #expect(Array(try AES.GCM._SIV.open(box, using: key, authenticating: [3] + rowKey)) == plain)
        // Opened as another domain's value, it is refused.
        #expect(throws: LedgerFailure.self) {
            try sealed.withUnsafeBytes { sealed in try rowKey.withUnsafeBytes { try cipher.openValue(sealed, domain: .secret, context: $0) } }
        }
    }

    @Test("a rollup: AES-256-GCM under the HKDF-derived rollup key, its nonce the first 12 bytes of an HMAC of the associated data and the value, deterministic")
    func rollup() throws {
        let plain = Array(0..<144).map { UInt8($0 & 0xFF) }
        let rowKey: [UInt8] = [0, 0, 0, 7, 0, 0, 0, 1] + KeyEncoding.sequenceKey(1_700_000_000)
        func seal(_ plain: [UInt8], _ rowKey: [UInt8]) -> [UInt8] {
            plain.withUnsafeBytes { plain in rowKey.withUnsafeBytes { cipher.sealRollup(plain, context: $0) } }
        }
        let sealed = seal(plain, rowKey)
        #expect(sealed.count == plain.count + LedgerCipher.overhead && sealed == seal(plain, rowKey))
        // What a verifier in another language computes.
        func derived(_ info: String) -> SymmetricKey { HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Array(info.utf8), outputByteCount: 32) }
        let associated: [UInt8] = [2] + rowKey
        let nonce = Array(HMAC<SHA256>.authenticationCode(for: [0, UInt8(associated.count)] + associated + plain, using: derived("healthledger rollup nonces")))
        #expect(Array(sealed.prefix(12)) == Array(nonce.prefix(12)))
        let box = try AES.GCM.SealedBox(combined: sealed)
        #expect(Array(try AES.GCM.open(box, using: derived("healthledger rollups"), authenticating: associated)) == plain)
        // Another value or another row: another nonce; a changed byte or another row does not open.
        #expect(seal(plain.reversed(), rowKey).prefix(12) != sealed.prefix(12))
        #expect(seal(plain, rowKey + [0]).prefix(12) != sealed.prefix(12))
        var changed = sealed
        changed[20] ^= 1
        for (bytes, row) in [(changed, rowKey), (sealed, rowKey + [0])] {
            let opened = [UInt8](unsafeUninitializedCapacity: plain.count) { out, count in
                count = bytes.withUnsafeBytes { bytes in row.withUnsafeBytes { cipher.openRollup(bytes, context: $0, into: out.baseAddress) } } ? plain.count : 0
            }
            #expect(opened.isEmpty)
        }
    }

    @Test("the index value pad: the first 8 bytes of AES-256 of 0x76, 7 zero bytes and the sequence, under the HKDF-derived pad key")
    func pad() throws {
        let padKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Array("healthledger index value pads".utf8), outputByteCount: 32)
        for sequence: UInt64 in [1, 42, 1 << 40] {
            var block: [UInt8] = [0x76, 0, 0, 0, 0, 0, 0, 0] + KeyEncoding.sequenceKey(sequence)
            try AES.permute(&block, key: padKey)
            #expect(cipher.valuePad(sequence: sequence) == block[0..<8].reduce(0) { $0 << 8 | UInt64($1) })
        }
        #expect(cipher.valuePad(sequence: 1) != cipher.valuePad(sequence: 2))
    }

    @Test("an encrypted ledger whose rollups are sealed with GCM-SIV (projection layout 14) rebuilds them on opening; its statistics still come from rollups")
    func rollupUpgrade() async throws {
        let keyFile = URL(filePath: NSTemporaryDirectory()).appending(path: "rollup-upgrade-\(UUID().uuidString).key")
        defer { try? FileManager.default.removeItem(at: keyFile) }
        var configuration = LedgerConfiguration()
        configuration.masterKey = try MasterKey.create(at: keyFile.path)
        let temporary = try TemporaryStore(configuration: configuration)
        let base = Date(timeIntervalSince1970: 1_699_999_200)
        let query = StatisticsCollectionQuery(
            type: Fixtures.heartRate, range: DateInterval(start: base, duration: 6 * 3600),
            intervals: try StatisticsIntervals(anchor: base, every: 1, .hour, timeZone: .gmt), options: [.discreteAverage, .discreteMax])
        // Written as the layout before: every rollup row sealed with GCM-SIV.
        func writeLayoutFourteen() async throws -> [Statistics] {
            let ledger = try temporary.ledgerStore.createLedger(id: "siv")
            let samples = (0..<360).map { minute in
                HealthObject.quantitySample(
                    QuantitySample(type: Fixtures.heartRate, quantity: try! Quantity(Double(60 + minute % 40), "count/min"), start: base.addingTimeInterval(Double(minute) * 60), end: base.addingTimeInterval(Double(minute) * 60)))
            }
            try await ledger.save(samples, by: .owner)
            let statistics = try ledger.statisticsCollection(query, as: .owner)
            let cipher = try #require(ledger.databases.cipher)
            try ledger.environment.write { txn in
                var rows: [([UInt8], [UInt8])] = []
                try txn.withCursor(on: ledger.databases.rollups) { cursor in
                    var entry = try cursor.first()
                    while let current = entry {
                        let clear = try ledger.databases.withClear(current.value, domain: .rollup, key: current.key) { Array($0) }
                        let old = clear.withUnsafeBytes { plain in current.key.withUnsafeBytes { cipher.sealValue(plain, domain: .rollup, context: $0) } }
                        rows.append((Array(current.key), old))
                        entry = try cursor.next()
                    }
                }
                #expect(rows.count >= 5)
                for (key, value) in rows { try txn.put(value, forKey: key, in: ledger.databases.rollups) }
                try txn.put([0, 0, 0, 14], forKey: ProjectionLayout.key, in: ledger.databases.meta)
            }
            return statistics
        }
        let before = try await writeLayoutFourteen()
        temporary.close()

        let reopened = try temporary.reopen(configuration: configuration).ledger("siv")
        #expect(try reopened.read { try ProjectionLayout.recorded(in: $0) } == ProjectionLayout.current)
        #expect(try reopened.statisticsCollection(query, as: .owner, computation: .fastest) == before)
        #expect(try reopened.statisticsCollection(query, as: .owner, computation: .samples) == before)
        #expect(try reopened.replay().identical)
        #expect(try reopened.verify().isValid)
    }
}
