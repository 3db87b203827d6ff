import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf
import Synchronization

/// Which of a store's ledgers hand the access records of the reads they answer to a primary
/// (docs/LEDGER.md, "Access records"; docs/PROTOCOL.md §7.18, `ForwardAccessRecords`), and
/// which have records waiting to go.
///
/// A follower (``follow(_:)``) claims the ledgers it copies from a primary for as long as it
/// runs. While a ledger is claimed, each write of its access records also writes their keys
/// into its `access_outbox`, in the same transaction; the follower sends what the outbox
/// names to the primary, then deletes those keys (``Ledger/forwardableAccessRecords(limit:)``,
/// ``Ledger/forwarded(_:)``). The outbox is in the ledger's file: a crash loses nothing
/// written, and a record sent twice is kept once.
public final class AccessForwarding: Sendable {
    /// One follower's claim: the ledgers it copies.
    public struct Claim: Sendable {
        fileprivate let id: UInt64
    }

    private struct State {
        var claims: [UInt64: @Sendable (String) -> Bool] = [:]
        var nextClaim: UInt64 = 0
        /// Ledgers whose outbox may hold keys.
        var pending = Set<String>()
    }

    private let state = Mutex(State())

    init() {}

    /// Claims the ledgers for which `copies` is true (it is asked at each write of their
    /// access records) until ``release(_:)``.
    public func follow(_ copies: @escaping @Sendable (String) -> Bool) -> Claim {
        state.withLock { state in
            state.nextClaim += 1
            state.claims[state.nextClaim] = copies
            return Claim(id: state.nextClaim)
        }
    }

    /// Ends a claim.
    public func release(_ claim: Claim) {
        _ = state.withLock { $0.claims.removeValue(forKey: claim.id) }
    }

    /// Whether ledger `id`'s access records go to a primary.
    func forwards(_ id: String) -> Bool {
        let claims = state.withLock { Array($0.claims.values) }
        return claims.contains { $0(id) }
    }

    /// Notes that ledger `id`'s outbox may hold keys (again, when sending them failed).
    public func note(_ id: String) {
        _ = state.withLock { $0.pending.insert(id) }
    }

    /// Takes the ledgers noted for which `chosen` is true off the list, and returns them: a
    /// write of their access records from now on notes them again.
    public func takePending(where chosen: (String) -> Bool) -> [String] {
        state.withLock { state in
            let taken = state.pending.filter(chosen)
            state.pending.subtract(taken)
            return taken.sorted()
        }
    }
}

extension Ledger {
    /// Most records one forwarding call carries (and ``forwardableAccessRecords(limit:)`` reads).
    public static let maximumForwardedAccessRecords = 10_000

    /// The oldest access records waiting in the outbox to go to the primary, at most `limit`.
    /// A key whose record is gone (expired meanwhile) is returned with no record: pass it to
    /// ``forwarded(_:)`` all the same.
    public func forwardableAccessRecords(limit: Int = 1_000) throws -> (records: [ForwardedAccessRecord], keys: [[UInt8]]) {
        try read { snapshot in
            var records: [ForwardedAccessRecord] = []
            var keys: [[UInt8]] = []
            try snapshot.withCursor(on: snapshot.databases.accessOutbox) { cursor in
                var entry = try cursor.first()
                while let current = entry, keys.count < min(max(limit, 1), Self.maximumForwardedAccessRecords) {
                    let key = Array(current.key)
                    keys.append(key)
                    if let stored = try snapshot.get(key, in: snapshot.databases.accessLog) {
                        let value = try snapshot.databases.clear(accessRecord: stored, key: current.key, in: snapshot.txn)
                        guard let message = try? Healthledger_V1_AccessRecord(serializedBytes: Array(value)) else {
                            throw LedgerFailure.corrupted("an access record does not decode")
                        }
                        records.append(ForwardedAccessRecord(key: key, record: AccessRecord(message)))
                    }
                    entry = try cursor.next()
                }
            }
            return (records, keys)
        }
    }

    /// Removes `keys` from the outbox once the primary has their records.
    public func forwarded(_ keys: [[UInt8]]) throws {
        guard !keys.isEmpty else { return }
        try environment.write { txn in
            for key in keys { try txn.delete(key, in: databases.accessOutbox) }
        }
    }

    /// Whether the outbox is empty.
    public var accessOutboxIsEmpty: Bool {
        get throws { try read { snapshot in try snapshot.withCursor(on: snapshot.databases.accessOutbox) { try $0.first() == nil } } }
    }

    /// Keeps the access records a follower forwarded (the primary's side of
    /// `ForwardAccessRecords`), each under its key, beside this server's own: a key already
    /// kept, or a record past the retention period, is left out.
    /// - Returns: how many were new.
    /// - Throws: ``HealthError`` `invalidArgument` when a key is not 16 bytes or does not
    ///   begin with its record's time, or a record names no method or credential; nothing is
    ///   kept then.
    public func keepForwardedAccessRecords(_ records: [ForwardedAccessRecord], now: Date = Date()) throws -> Int {
        for (index, forwarded) in records.enumerated() {
            let field = "records[\(index)]"
            guard forwarded.key.count == 16 else {
                throw HealthError.invalidArgument("an access record's key is 16 bytes, got \(forwarded.key.count)", field: "\(field).key")
            }
            guard forwarded.key.prefix(8).elementsEqual(AccessLog.lowest(at: forwarded.record.time).prefix(8)) else {
                throw HealthError.invalidArgument("an access record's key does not begin with its time", field: "\(field).key")
            }
            guard !forwarded.record.method.isEmpty, forwarded.record.method.utf8.count <= 200 else {
                throw HealthError.invalidArgument("an access record names its method (at most 200 bytes)", field: "\(field).record.method")
            }
            guard !forwarded.record.credentialID.isEmpty, forwarded.record.credentialID.utf8.count <= 200 else {
                throw HealthError.invalidArgument("an access record names its credential (at most 200 bytes)", field: "\(field).record.credential_id")
            }
            guard forwarded.record.types.count <= 1_000, forwarded.record.types.allSatisfy({ $0.utf8.count <= 200 }) else {
                throw HealthError.invalidArgument("an access record names at most 1,000 types of at most 200 bytes each", field: "\(field).record.types")
            }
        }
        let cutoff = AccessLog.lowest(at: now.addingTimeInterval(-configuration.accessRetention))
        return try environment.write { txn in
            var kept = 0
            for forwarded in records where !forwarded.key.lexicographicallyPrecedes(cutoff) {
                guard try txn.get(forwarded.key, in: databases.accessLog) == nil else { continue }
                let value: [UInt8] = try Healthledger_V1_AccessRecord(forwarded.record).serializedBytes()
                try txn.put(databases.storable(accessRecord: value, key: forwarded.key), forKey: forwarded.key, in: databases.accessLog)
                kept += 1
            }
            return kept
        }
    }
}
