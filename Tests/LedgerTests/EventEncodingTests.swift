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
            let salt = Array(saltDigest.prefix(16))
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
}
