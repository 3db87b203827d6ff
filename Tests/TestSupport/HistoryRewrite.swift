import Crypto
import Foundation
import LMDB
import LedgerSchema
import SwiftProtobuf

/// Rewrites a closed ledger's history as someone with the data directory could: event
/// `sequence` gets a commit time one microsecond later, and every later event's link and
/// the log head are recomputed, so the chain is consistent again on its own. (The
/// projections, the Merkle tree included, are left as they were: replay them to hide it.)
public func rewriteHistory(ledgerAt directory: URL, from sequence: UInt64) throws {
    let environment = try Environment(path: directory.path)
    let events = try environment.openDatabase("events")
    let meta = try environment.openDatabase("meta")
    try environment.write { txn in
        func key(_ sequence: UInt64) -> [UInt8] { withUnsafeBytes(of: sequence.bigEndian) { Array($0) } }
        var previous: [UInt8] = []
        var current = sequence
        while let stored = try txn.bytes(forKey: key(current), in: events) {
            var event = try Healthledger_V1_LedgerEvent(serializedBytes: stored)
            if current == sequence { event.commitTimeUs += 1 } else { event.previousHash = Data(previous) }
            let bytes: [UInt8] = try event.serializedBytes()
            try txn.put(bytes, forKey: key(current), in: events)
            previous = eventHash(bytes)
            current += 1
        }
        guard var head = try txn.bytes(forKey: Array("head".utf8), in: meta), head.count == 48 else {
            throw CocoaError(.fileReadCorruptFile)
        }
        head.replaceSubrange(8..<40, with: previous)
        try txn.put(head, forKey: Array("head".utf8), in: meta)
    }
}

/// Damages a closed ledger's projections as a stray write could: the `objects` entry of the
/// object `uuid` (its 16 bytes) goes, while the log still holds its save. True when there was one.
public func dropObjectProjection(ledgerAt directory: URL, uuid: [UInt8]) throws -> Bool {
    let environment = try Environment(path: directory.path)
    let objects = try environment.openDatabase("objects")
    return try environment.write { txn in try txn.delete(uuid, in: objects) }
}
