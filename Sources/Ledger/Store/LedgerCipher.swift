import CLedgerAEAD
import Crypto
import Foundation
import LMDB
import Synchronization

/// Seals what a ledger stores of health data under the ledger's own data key
/// (docs/LEDGER.md, "Encryption at rest"): events whole, with AES-256-GCM; the values the
/// projections keep (rollups, characteristics, tombstones' sync identifiers) and the ledger's
/// own secret keys with AES-256-GCM-SIV, deterministically, so that a replay rebuilds them byte
/// for byte; the 8-byte value column of the time indexes with an AES-256 pad per event; and
/// sync identifiers in index keys as a keyed digest.
///
/// The data key is random, made with the ledger, and kept in its `meta` wrapped by the
/// store's ``MasterKey``; nothing in the data directory or a backup opens it without that key.
///
/// The ciphers are swift-crypto's BoringSSL with each key set up once (``CLedgerAEAD``):
/// its Swift API sets the key up on every call, ten times the cost of sealing a small value.
/// BoringSSL's contexts may seal and open from several threads at once.
final class LedgerCipher: @unchecked Sendable {
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
    /// AES-256-GCM under the data key: events.
    private let events: OpaquePointer
    /// AES-256-GCM-SIV under the data key: projections' values and secrets.
    private let values: OpaquePointer
    /// AES-256-GCM under a key derived from the data key: rollups, with synthetic nonces.
    private let rollups: OpaquePointer
    /// Derived from the data key: the HMAC key of the rollups' synthetic nonces.
    private let rollupNonceKey: SymmetricKey
    /// AES-256 under a key derived from the data key: the pads of the index value column.
    private let pads: OpaquePointer
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
        case accessRecord = 6
    }

    init(rawKey: [UInt8]) {
        precondition(rawKey.count == 32, "a data key is 32 bytes")
        self.rawKey = rawKey
        let key = SymmetricKey(data: rawKey)
        func derived(_ label: String) -> [UInt8] {
            HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Array(label.utf8), outputByteCount: 32).withUnsafeBytes { Array($0) }
        }
        // Making a context fails only without memory.
        events = ledger_aead_new(Int32(LEDGER_AEAD_AES_256_GCM.rawValue), rawKey)!
        values = ledger_aead_new(Int32(LEDGER_AEAD_AES_256_GCM_SIV.rawValue), rawKey)!
        rollups = ledger_aead_new(Int32(LEDGER_AEAD_AES_256_GCM.rawValue), derived("healthledger rollups"))!
        rollupNonceKey = SymmetricKey(data: derived("healthledger rollup nonces"))
        pads = ledger_block_key_new(derived("healthledger index value pads"))!
        digestKey = SymmetricKey(data: derived("healthledger sync identifier keys"))
        var generator = SystemRandomNumberGenerator()
        nonceBase = (0..<Self.nonceLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    deinit {
        ledger_aead_free(events)
        ledger_aead_free(values)
        ledger_aead_free(rollups)
        ledger_block_key_free(pads)
    }

    /// A new random data key.
    static func generate() -> LedgerCipher {
        LedgerCipher(rawKey: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    /// Runs `body` with the associated data of `domain` and `context`: domain(1) ‖ context.
    private static func withAssociatedData<R>(_ domain: Domain, _ context: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeTemporaryAllocation(byteCount: context.count + 1, alignment: 1) { buffer in
            buffer[0] = domain.rawValue
            if let base = context.baseAddress { (buffer.baseAddress! + 1).copyMemory(from: base, byteCount: context.count) }
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }

    private static func bytes(_ buffer: UnsafeRawBufferPointer) -> UnsafePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }

    /// A projection's value sealed with AES-256-GCM-SIV: ciphertext ‖ tag(16), bound to
    /// `domain` and `context` (the row's key). Deterministic (one fixed all-zero nonce, which
    /// GCM-SIV allows): a replay rebuilds the projections byte for byte, and `verify` compares
    /// them; what it tells is only that two equal values under the same key are equal.
    func sealValue(_ plaintext: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer) -> [UInt8] {
        Self.withAssociatedData(domain, context) { associated in
            [UInt8](unsafeUninitializedCapacity: plaintext.count + Self.tagLength) { out, count in
                let sealed = ledger_aead_seal(
                    values, out.baseAddress, Self.zeroNonce, Self.bytes(plaintext), plaintext.count, Self.bytes(associated), associated.count)
                precondition(sealed == 1, "AES-GCM-SIV sealing failed")
                count = plaintext.count + Self.tagLength
            }
        }
    }

    /// Opens what ``sealValue(_:domain:context:)`` made.
    /// - Throws: ``LedgerFailure`` `corrupted` when it does not open.
    func openValue(_ sealed: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard sealed.count >= Self.valueOverhead else { throw LedgerFailure.corrupted("a sealed value is \(sealed.count) bytes, shorter than its tag") }
        return try Self.opened(count: sealed.count - Self.tagLength) { out in
            openValue(sealed, domain: domain, context: context, into: out)
        }
    }

    /// Opens what ``sealValue(_:domain:context:)`` made into `out`, which has room for
    /// `sealed.count - valueOverhead` bytes; false when it does not authenticate (or is too short).
    func openValue(_ sealed: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>?) -> Bool {
        guard sealed.count >= Self.valueOverhead else { return false }
        return Self.withAssociatedData(domain, context) { associated in
            ledger_aead_open(values, out, Self.zeroNonce, Self.bytes(sealed), sealed.count, Self.bytes(associated), associated.count) == 1
        }
    }

    private static let zeroNonce = [UInt8](repeating: 0, count: nonceLength)

    /// A rollup's value sealed with AES-256-GCM under the rollup key and a synthetic nonce:
    /// nonce(12) ‖ ciphertext ‖ tag(16), the nonce being the first 12 bytes of HMAC-SHA256,
    /// under the rollup nonce key, of the associated data's length (2 bytes, big-endian), the
    /// associated data and the plaintext. Deterministic as GCM-SIV is (a replay rebuilds the
    /// same bytes; equal values under one key and row tell that they are equal), and opened
    /// by one GCM call with its key set up once: GCM-SIV derives its message keys on every
    /// call, which made a year of hourly statistics a quarter slower (BENCHMARKS.md).
    func sealRollup(_ plaintext: UnsafeRawBufferPointer, context: UnsafeRawBufferPointer) -> [UInt8] {
        Self.withAssociatedData(.rollup, context) { associated in
            var nonceInput = [UInt8(associated.count >> 8), UInt8(associated.count & 0xFF)]
            nonceInput.append(contentsOf: associated)
            nonceInput.append(contentsOf: plaintext)
            let nonce = Array(HMAC<SHA256>.authenticationCode(for: nonceInput, using: rollupNonceKey).prefix(Self.nonceLength))
            return [UInt8](unsafeUninitializedCapacity: plaintext.count + Self.overhead) { out, written in
                for index in 0..<Self.nonceLength { out[index] = nonce[index] }
                let sealed = ledger_aead_seal(
                    rollups, out.baseAddress! + Self.nonceLength, nonce, Self.bytes(plaintext), plaintext.count, Self.bytes(associated), associated.count)
                precondition(sealed == 1, "AES-GCM sealing failed")
                written = plaintext.count + Self.overhead
            }
        }
    }

    /// Opens what ``sealRollup(_:context:)`` made into `out`, which has room for
    /// `sealed.count - overhead` bytes; false when it does not authenticate (or is too short).
    func openRollup(_ sealed: UnsafeRawBufferPointer, context: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>?) -> Bool {
        guard sealed.count >= Self.overhead else { return false }
        return Self.withAssociatedData(.rollup, context) { associated in
            let nonce = Self.bytes(sealed)!
            return ledger_aead_open(
                rollups, out, nonce, nonce + Self.nonceLength, sealed.count - Self.nonceLength, Self.bytes(associated), associated.count) == 1
        }
    }

    /// What sealing adds to a value of `domain`: the nonce and tag of a rollup, the tag of the others.
    static func overhead(of domain: Domain) -> Int { domain == .rollup ? overhead : valueOverhead }

    /// The clear bytes `open` writes into a new array of `count` bytes.
    private static func opened(count: Int, _ open: (UnsafeMutablePointer<UInt8>?) -> Bool) throws -> [UInt8] {
        var authenticated = false
        let plain = [UInt8](unsafeUninitializedCapacity: max(count, 1)) { out, written in
            authenticated = open(out.baseAddress)
            written = authenticated ? count : 0
        }
        guard authenticated else {
            throw LedgerFailure.corrupted("a sealed value does not open under the ledger's data key (changed, or moved from elsewhere)")
        }
        return plain
    }

    /// `plaintext` sealed with AES-256-GCM: [prefix] ‖ nonce(12) ‖ ciphertext ‖ tag(16), bound
    /// to `domain` and `context` (an event's sequence key).
    func seal(_ plaintext: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer, prefix: UInt8? = nil) -> [UInt8] {
        let start = prefix == nil ? 0 : 1
        let count = counter.add(1, ordering: .relaxed).newValue
        return Self.withAssociatedData(domain, context) { associated in
            [UInt8](unsafeUninitializedCapacity: start + plaintext.count + Self.overhead) { out, written in
                if let prefix { out[0] = prefix }
                // The nonce: the base with the counter XORed into its last 8 bytes.
                for index in 0..<Self.nonceLength { out[start + index] = nonceBase[index] }
                withUnsafeBytes(of: count.bigEndian) { counter in
                    for index in 0..<8 { out[start + 4 + index] ^= counter[index] }
                }
                let nonce = out.baseAddress! + start
                let sealed = ledger_aead_seal(
                    events, nonce + Self.nonceLength, nonce, Self.bytes(plaintext), plaintext.count, Self.bytes(associated), associated.count)
                precondition(sealed == 1, "AES-GCM sealing failed")
                written = start + plaintext.count + Self.overhead
            }
        }
    }

    /// Opens what ``seal(_:domain:context:prefix:)`` made (without its prefix byte).
    /// - Throws: ``LedgerFailure`` `corrupted` when it does not open: changed bytes, or sealed
    ///   for another place or under another key.
    func open(_ sealed: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard sealed.count >= Self.overhead else { throw LedgerFailure.corrupted("a sealed value is \(sealed.count) bytes, shorter than its nonce and tag") }
        return try Self.opened(count: sealed.count - Self.overhead) { out in
            open(sealed, domain: domain, context: context, into: out)
        }
    }

    /// Opens what ``seal(_:domain:context:prefix:)`` made into `out`, which has room for
    /// `sealed.count - overhead` bytes; false when it does not authenticate (or is too short).
    func open(_ sealed: UnsafeRawBufferPointer, domain: Domain, context: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>?) -> Bool {
        guard sealed.count >= Self.overhead else { return false }
        return Self.withAssociatedData(domain, context) { associated in
            let nonce = Self.bytes(sealed)!
            return ledger_aead_open(
                events, out, nonce, nonce + Self.nonceLength, sealed.count - Self.nonceLength, Self.bytes(associated), associated.count) == 1
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
    /// `sequence`: the first 8 bytes of AES-256 of (0x76 ‖ 7 zero bytes ‖ sequence) under the
    /// pad key, as a big-endian number (so the stored column is its bytes XOR the pad's).
    func valuePad(sequence: UInt64) -> UInt64 {
        var input = ((UInt64(0x76) << 56).bigEndian, sequence.bigEndian)
        var output: (UInt64, UInt64) = (0, 0)
        withUnsafeBytes(of: &input) { input in
            withUnsafeMutableBytes(of: &output) { output in
                ledger_block_encrypt(pads, Self.bytes(input), output.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return UInt64(bigEndian: output.0)
    }
}

extension LedgerDatabases {
    /// The clear bytes of an event as read from `events` under `key` (its sequence key):
    /// `raw` itself when it is stored clear, else opened into memory that lives as long as
    /// the transaction (as the view it stands for would).
    /// - Throws: ``LedgerFailure`` when it is sealed and this ledger has no data key, or it does not open.
    func event(_ raw: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, in txn: Transaction) throws -> UnsafeRawBufferPointer {
        guard raw.first == LedgerCipher.sealedEventMark else { return raw }
        let sealed = UnsafeRawBufferPointer(rebasing: raw[1...])
        let plain = txn.retainedBuffer(count: max(sealed.count - LedgerCipher.overhead, 0))
        try openEvent(sealed, key: key, into: plain)
        return UnsafeRawBufferPointer(plain)
    }

    /// Opens a sealed event (without its mark) into `out`, which has exactly the room its clear bytes need.
    func openEvent(_ sealed: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) throws {
        guard let cipher else { throw LedgerFailure.corrupted("an event is sealed, and this ledger has no data key") }
        guard sealed.count >= LedgerCipher.overhead, cipher.open(sealed, domain: .event, context: key, into: out.baseAddress?.assumingMemoryBound(to: UInt8.self))
        else { throw LedgerFailure.corrupted("an event does not open under the ledger's data key (changed, or moved from elsewhere)") }
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
        let sealed = UnsafeRawBufferPointer(rebasing: raw[1...])
        let count = max(sealed.count - LedgerCipher.overhead, 0)
        if count > buffer.count {
            buffer.deallocate()
            buffer = .allocate(byteCount: max(count, 2 * buffer.count, 4096), alignment: 8)
        }
        let plain = UnsafeMutableRawBufferPointer(rebasing: buffer[..<count])
        try databases.openEvent(sealed, key: key, into: plain)
        return UnsafeRawBufferPointer(plain)
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
        return value.withUnsafeBytes { plain in
            key.withKeyBytes { key in domain == .rollup ? cipher.sealRollup(plain, context: key) : cipher.sealValue(plain, domain: domain, context: key) }
        }
    }

    /// The clear value of a projection's row read under `key` (``storable(_:domain:key:)``),
    /// valid until the transaction ends.
    func clear(_ stored: UnsafeRawBufferPointer, domain: LedgerCipher.Domain, key: UnsafeRawBufferPointer, in txn: Transaction) throws -> UnsafeRawBufferPointer {
        guard cipher != nil else { return stored }
        let plain = txn.retainedBuffer(count: max(stored.count - LedgerCipher.overhead(of: domain), 0))
        try open(stored, domain: domain, key: key, into: plain)
        return UnsafeRawBufferPointer(plain)
    }

    /// Runs `body` with the clear value of a projection's row read under `key`, opened into
    /// memory that lasts only for the call (a scan over many rows allocates nothing).
    func withClear<R>(
        _ stored: UnsafeRawBufferPointer, domain: LedgerCipher.Domain, key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        guard cipher != nil else { return try body(stored) }
        return try withUnsafeTemporaryAllocation(byteCount: max(stored.count - LedgerCipher.overhead(of: domain), 0), alignment: 8) { plain in
            try open(stored, domain: domain, key: key, into: plain)
            return try body(UnsafeRawBufferPointer(plain))
        }
    }

    private func open(_ stored: UnsafeRawBufferPointer, domain: LedgerCipher.Domain, key: UnsafeRawBufferPointer, into plain: UnsafeMutableRawBufferPointer) throws {
        let out = plain.baseAddress?.assumingMemoryBound(to: UInt8.self)
        guard let cipher, stored.count >= LedgerCipher.overhead(of: domain),
            domain == .rollup ? cipher.openRollup(stored, context: key, into: out) : cipher.openValue(stored, domain: domain, context: key, into: out)
        else { throw LedgerFailure.corrupted("a sealed value does not open under the ledger's data key (changed, or moved from elsewhere)") }
    }
}
