import Crypto
import Foundation
import LMDB
import Synchronization
import _CryptoExtras

/// Seals what a ledger stores of health data under the ledger's own data key
/// (docs/LEDGER.md, "Encryption at rest"): events whole, with AES-256-GCM; the values the
/// projections keep (rollups, characteristics, the ledger's own secret keys) the same way;
/// and the one 8-byte value column of the time indexes with an AES-256 pad per event.
///
/// The data key is random, made with the ledger, and kept in its `meta` wrapped by the
/// store's ``MasterKey``; nothing in the data directory or a backup opens it without that key.
final class LedgerCipher: Sendable {
    /// The first byte of a sealed event (a clear one starts with `0x0A`, its `previous_hash` tag).
    static let sealedEventMark: UInt8 = 0xE5
    static let nonceLength = 12
    static let tagLength = 16
    /// What sealing adds to an event: the nonce and the tag.
    static let overhead = nonceLength + tagLength
    /// What sealing adds to a projection's value: the tag.
    static let valueOverhead = tagLength

    /// The data key's raw bytes (wrapped into `meta`).
    let rawKey: [UInt8]
    private let key: SymmetricKey
    /// Derived from the data key: the pads of the index value column.
    private let padKey: SymmetricKey
    /// Derived from the data key: what stands for an app's sync identifier in an index key.
    private let digestKey: SymmetricKey
    /// Nonces are this random base XOR a counter: unique for the key without a call to the
    /// system's random source per value.
    private let nonceBase: [UInt8]
    private let counter = Atomic<UInt64>(0)

    /// Domains of the associated data: a sealed value opens only where it was sealed.
    enum Domain: UInt8 {
        case event = 1
        case rollup = 2
        case characteristic = 3
        case secret = 4
        case syncIdentifier = 5
    }

    init(rawKey: [UInt8]) {
        precondition(rawKey.count == 32, "a data key is 32 bytes")
        self.rawKey = rawKey
        key = SymmetricKey(data: rawKey)
        padKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key, info: Array("healthledger index value pads".utf8), outputByteCount: 32)
        digestKey = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key, info: Array("healthledger sync identifier keys".utf8), outputByteCount: 32)
        var generator = SystemRandomNumberGenerator()
        nonceBase = (0..<Self.nonceLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// A new random data key.
    static func generate() -> LedgerCipher {
        LedgerCipher(rawKey: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    private func nextNonce() -> AES.GCM.Nonce {
        let count = counter.add(1, ordering: .relaxed).newValue
        var bytes = nonceBase
        withUnsafeBytes(of: count.bigEndian) { counterBytes in
            for index in 0..<8 { bytes[4 + index] ^= counterBytes[index] }
        }
        return try! AES.GCM.Nonce(data: bytes)
    }

    private static func associatedData(_ domain: Domain, _ context: UnsafeRawBufferPointer) -> [UInt8] {
        [domain.rawValue] + Array(context)
    }

    /// A projection's value sealed with AES-256-GCM-SIV: ciphertext ‖ tag(16), bound to
    /// `domain` and `context` (the row's key). Deterministic (one fixed nonce, which GCM-SIV
    /// allows): a replay rebuilds the projections byte for byte, and `verify` compares them;
    /// what it tells is only that two equal values under the same key are equal.
    func sealValue(_ plaintext: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer) -> [UInt8] {
        let box = try! AES.GCM._SIV.seal(plaintext, using: key, nonce: Self.valueNonce, authenticating: Self.associatedData(domain, context))
        return Array(box.ciphertext) + Array(box.tag)
    }

    /// Opens what ``sealValue(_:domain:context:)`` made.
    /// - Throws: ``LedgerFailure`` `corrupted` when it does not open.
    func openValue(_ sealed: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer) throws -> Data {
        guard sealed.count >= Self.valueOverhead else { throw LedgerFailure.corrupted("a sealed value is \(sealed.count) bytes, shorter than its tag") }
        do {
            let box = try AES.GCM._SIV.SealedBox(
                nonce: Self.valueNonce, ciphertext: sealed[..<(sealed.count - Self.tagLength)], tag: sealed[(sealed.count - Self.tagLength)...])
            return try AES.GCM._SIV.open(box, using: key, authenticating: Self.associatedData(domain, context))
        } catch {
            throw LedgerFailure.corrupted("a sealed value does not open under the ledger's data key (changed, or moved from elsewhere)")
        }
    }

    private static let valueNonce = try! AES.GCM._SIV.Nonce(data: [UInt8](repeating: 0, count: nonceLength))

    /// `plaintext` sealed with AES-256-GCM: nonce(12) ‖ ciphertext ‖ tag(16), bound to `domain`
    /// and `context` (an event's sequence key).
    func seal(_ plaintext: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer, prefix: UInt8? = nil) -> [UInt8] {
        let box = try! AES.GCM.seal(plaintext, using: key, nonce: nextNonce(), authenticating: Self.associatedData(domain, context))
        var sealed: [UInt8] = []
        sealed.reserveCapacity(plaintext.count + Self.overhead + 1)
        if let prefix { sealed.append(prefix) }
        sealed.append(contentsOf: box.nonce)
        sealed.append(contentsOf: box.ciphertext)
        sealed.append(contentsOf: box.tag)
        return sealed
    }

    /// Opens what ``seal(_:domain:context:prefix:)`` made (without its prefix byte).
    /// - Throws: ``LedgerFailure`` `corrupted` when it does not open: changed bytes, or sealed
    ///   for another place or under another key.
    func open(_ sealed: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer) throws -> Data {
        guard sealed.count >= Self.overhead else { throw LedgerFailure.corrupted("a sealed value is \(sealed.count) bytes, shorter than its nonce and tag") }
        do {
            let box = try AES.GCM.SealedBox(combined: Data(sealed))
            return try AES.GCM.open(box, using: key, authenticating: Self.associatedData(domain, context))
        } catch {
            throw LedgerFailure.corrupted("a sealed value does not open under the ledger's data key (changed, or moved from elsewhere)")
        }
    }

    /// An event's stored bytes, sealed for the `events` database at `key` (its sequence key).
    func sealEvent(_ stored: [UInt8], key: [UInt8]) -> [UInt8] {
        stored.withUnsafeBytes { plain in key.withUnsafeBytes { seal(plain, domain: .event, context: $0, prefix: Self.sealedEventMark) } }
    }

    /// HMAC-SHA256 of `bytes` under a key derived from the data key: an index key for a value
    /// that must be found again but not read.
    func keyedDigest(_ bytes: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: bytes, using: digestKey))
    }

    /// The pad of the index value column of the rows of the object saved by event
    /// `sequence`: the first 8 bytes of AES-256 of (domain ‖ sequence) under the pad key.
    func valuePad(sequence: UInt64) -> UInt64 {
        var block = [UInt8](repeating: 0, count: 16)
        block[0] = 0x76
        withUnsafeBytes(of: sequence.bigEndian) { for index in 0..<8 { block[8 + index] = $0[index] } }
        try! AES.permute(&block, key: padKey)
        return block.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
    }
}

extension LedgerDatabases {
    /// The clear bytes of an event as read from `events` under `key` (its sequence key):
    /// `raw` itself when it is stored clear, else opened into memory that lives as long as
    /// the transaction (as the view it stands for would).
    /// - Throws: ``LedgerFailure`` when it is sealed and this ledger has no data key, or it does not open.
    func event(_ raw: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, in txn: Transaction) throws -> UnsafeRawBufferPointer {
        guard raw.first == LedgerCipher.sealedEventMark else { return raw }
        guard let cipher else { throw LedgerFailure.corrupted("an event is sealed, and this ledger has no data key") }
        let plain = try cipher.open(UnsafeRawBufferPointer(rebasing: raw[1...]), domain: .event, context: key)
        return txn.retain(plain)
    }

    /// An event's bytes as the `events` database keeps them: sealed when the ledger has a data key.
    func storable(event stored: [UInt8], key: [UInt8]) -> [UInt8] {
        cipher.map { $0.sealEvent(stored, key: key) } ?? stored
    }
}

extension LedgerDatabases {
    /// A secret of the ledger's own that `meta` keeps under `name` (the anchor key, the
    /// signing key), from its stored form: 32 clear bytes, or sealed when the ledger is encrypted.
    func secret(_ stored: UnsafeRawBufferPointer, name: [UInt8]) throws -> [UInt8]? {
        if stored.count == 32 { return Array(stored) }
        guard let cipher, stored.count == 32 + LedgerCipher.valueOverhead else { return nil }
        return Array(try name.withUnsafeBytes { try cipher.openValue(stored, domain: .secret, context: $0) })
    }

    /// A secret's stored form: sealed when the ledger is encrypted.
    func storable(secret: [UInt8], name: [UInt8]) -> [UInt8] {
        guard let cipher else { return secret }
        return secret.withUnsafeBytes { plain in name.withUnsafeBytes { cipher.sealValue(plain, domain: .secret, context: $0) } }
    }
}

extension LedgerDatabases {
    /// Runs `body` with the clear bytes of an event read from `events` under `key`, opened
    /// into memory that lasts only for the call: for walks over the whole log.
    func withEvent<R>(_ raw: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        guard raw.first == LedgerCipher.sealedEventMark else { return try body(raw) }
        guard let cipher else { throw LedgerFailure.corrupted("an event is sealed, and this ledger has no data key") }
        return try cipher.open(UnsafeRawBufferPointer(rebasing: raw[1...]), domain: .event, context: key).withUnsafeBytes(body)
    }
}

/// Opens the events of a walk over the log one at a time into one buffer: each view it
/// returns is valid until its next call (clear events are returned as they are, in place).
final class EventScratch {
    private let databases: LedgerDatabases
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    init(_ databases: LedgerDatabases) { self.databases = databases }

    deinit { buffer.deallocate() }

    /// The clear bytes of the event read as `raw` under `key`.
    func clear(_ raw: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer {
        guard raw.first == LedgerCipher.sealedEventMark else { return raw }
        return try databases.withEvent(raw, key: key) { plain in
            if plain.count > buffer.count {
                buffer.deallocate()
                buffer = .allocate(byteCount: max(plain.count, 2 * buffer.count, 4096), alignment: 8)
            }
            if let base = plain.baseAddress { buffer.baseAddress!.copyMemory(from: base, byteCount: plain.count) }
            return UnsafeRawBufferPointer(rebasing: buffer[..<plain.count])
        }
    }
}

extension LedgerCipher {
    /// The bits of an index row's value column as stored (``valuePad(sequence:)`` applied) or
    /// read back (applied again): unchanged without a cipher.
    static func masked(_ bits: UInt64, sequence: UInt64, by cipher: LedgerCipher?) -> UInt64 {
        guard let cipher else { return bits }
        return bits ^ cipher.valuePad(sequence: sequence)
    }
}

extension LedgerDatabases {
    /// A projection's value as stored under `key`: sealed in `domain` when the ledger is encrypted.
    func storable(_ value: [UInt8], domain: LedgerCipher.Domain, key: some ContiguousBytesKey) -> [UInt8] {
        guard let cipher else { return value }
        return value.withUnsafeBytes { plain in key.withKeyBytes { cipher.sealValue(plain, domain: domain, context: $0) } }
    }

    /// The clear value of a projection's row read under `key` (``storable(_:domain:key:)``),
    /// valid until the transaction ends.
    func clear(_ stored: UnsafeRawBufferPointer, domain: LedgerCipher.Domain, key: UnsafeRawBufferPointer, in txn: Transaction) throws -> UnsafeRawBufferPointer {
        guard let cipher else { return stored }
        return txn.retain(try cipher.openValue(stored, domain: domain, context: key))
    }
}
