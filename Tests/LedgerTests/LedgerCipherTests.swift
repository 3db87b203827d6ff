import Crypto
import Foundation
import Testing
import _CryptoExtras

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
        let rowKey: [UInt8] = [0, 0, 0, 7, 0, 0, 0, 1] + KeyEncoding.sequenceKey(1_700_000_000)
        let sealed = plain.withUnsafeBytes { plain in rowKey.withUnsafeBytes { cipher.sealValue(plain, domain: .rollup, context: $0) } }
        #expect(sealed == plain.withUnsafeBytes { plain in rowKey.withUnsafeBytes { cipher.sealValue(plain, domain: .rollup, context: $0) } })
        let box = try AES.GCM._SIV.SealedBox(
            nonce: AES.GCM._SIV.Nonce(data: [UInt8](repeating: 0, count: 12)), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
        #expect(Array(try AES.GCM._SIV.open(box, using: key, authenticating: [2] + rowKey)) == plain)
        // Opened as another domain's value, it is refused.
        #expect(throws: LedgerFailure.self) {
            try sealed.withUnsafeBytes { sealed in try rowKey.withUnsafeBytes { try cipher.openValue(sealed, domain: .characteristic, context: $0) } }
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
}
