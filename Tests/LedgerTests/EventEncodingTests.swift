import Crypto
import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf
import Testing

@testable import Ledger

@Suite("Event encoding")
struct EventEncodingTests {
    @Test("the hand-written event encoding is byte-identical to SwiftProtobuf's", arguments: [
        Principal.system, .operator, .owner, .app(Source(bundleIdentifier: "com.example.ü", name: "Ünïcode App")),
    ])
    func matchesSwiftProtobuf(actor: Principal) throws {
        let body = Array((0..<300).map { UInt8($0 % 251) })
        for (sequence, time, type, uuid) in [
            (UInt64(1), Int64(0), String?.none, [UInt8]?.none),
            (300, -1_234_567, "HKQuantityTypeIdentifierHeartRate", UUID.random().bytes),
            (UInt64.max, Int64.max, "", [UInt8]()),
            (1 << 40, Int64.min, "HKWorkoutTypeIdentifier", UUID.random().bytes),
        ] {
            let previous = (0..<32).map { _ in UInt8.random(in: 0...255) }
            let saltDigest = EventCodec.salt(seed: (0..<32).map { _ in UInt8.random(in: 0...255) }, sequence: sequence)
            let salt = Array(saltDigest.bytes.prefix(16))
            let (stored, hash) = EventCodec.encode(
                sequence: sequence, previousHash: previous, commitTimeUs: time, actor: actor, kind: .objectSaved,
                objectType: type, objectUUID: uuid, body: body, salt: saltDigest)
            var message = Healthledger_V1_LedgerEvent()
            message.previousHash = Data(previous)
            message.sequence = sequence
            message.formatVersion = EventLayout.currentFormat
            message.commitTimeUs = time
            message.actor = actor.schema
            message.kind = .objectSaved
            if let type { message.objectType = type }
            if let uuid { message.objectUuid = Data(uuid) }
            message.bodyCommitment = Data(SHA256.hash(data: salt + body))
            message.bodySalt = Data(salt)
            message.body = Data(body)
            #expect(stored == (try message.serializedBytes() as [UInt8]))
            // The hash covers the header (the message without salt and body), which commits to the body.
            var header = message
            header.bodySalt = Data()
            header.body = Data()
            #expect(hash == Array(SHA256.hash(data: try header.serializedBytes() as [UInt8])))
            #expect(try EventCodec.hash(stored) == hash)
            // Erased, it keeps its hash and loses every byte of its body and salt.
            let erased = try stored.withUnsafeBytes { try EventLayout.erased($0) }
            #expect(erased == (try header.serializedBytes() as [UInt8]))
            #expect(try EventCodec.hash(erased) == hash)
            let decoded = try Healthledger_V1_LedgerEvent(serializedBytes: stored)
            #expect(decoded == message)
            let chain = try #require(stored.withUnsafeBytes { EventCodec.chainFields($0).map { (Array($0.previousHash), $0.sequence) } })
            #expect(chain.0 == previous && chain.1 == sequence)
        }
    }

    @Test("the hashes of events and tree nodes (BoringSSL's SHA-256, its state on the stack) are swift-crypto's SHA-256 of the two pieces joined, at every length around a block's")
    func sha256MatchesSwiftCrypto() {
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        for length in [0, 1, 31, 32, 55, 56, 63, 64, 65, 119, 128, 129, 300] {
            for split in Set([0, length / 3, length]) {
                let whole = Array(SHA256.hash(data: bytes[..<length]))
                let hash = bytes.withUnsafeBytes { all in
                    InlineHash.sha256(UnsafeRawBufferPointer(rebasing: all[..<split]), UnsafeRawBufferPointer(rebasing: all[split..<length]))
                }
                #expect(hash.bytes == whole, "length \(length), split at \(split)")
            }
        }
    }
}
