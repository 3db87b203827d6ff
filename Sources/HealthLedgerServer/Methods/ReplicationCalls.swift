import Foundation
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// The primary's side of replication (docs/PROTOCOL.md §7.18): a follower's fetches of a
/// ledger's log, each acknowledging the follower's head, and snapshots for a follower that
/// has none of the ledger yet.
extension OperatorCall {
    /// Most events one fetch answers, and the default.
    static let maximumFetchedEvents: UInt32 = 10_000
    static let defaultFetchedEvents: UInt32 = 1_000
    /// About the most bytes of events one fetch answers (always one event, whatever its size).
    static let maximumFetchedBytes = 4 << 20
    /// The longest a fetch waits for an event.
    static let maximumFetchWait: UInt32 = 30_000

    func fetchLog(_ request: Healthledger_V1_FetchLogRequest) async throws -> [UInt8] {
        guard (1...128).contains(request.followerID.utf8.count) else {
            throw HealthError.invalidArgument("name the follower: 1–128 bytes, got \(request.followerID.utf8.count)", field: "follower_id")
        }
        guard request.afterHash.count == 32 else {
            throw HealthError.invalidArgument("the follower's head hash is 32 bytes, got \(request.afterHash.count)", field: "after_hash")
        }
        guard request.maxEvents <= Self.maximumFetchedEvents else {
            throw HealthError.invalidArgument("a fetch asks for at most \(Self.maximumFetchedEvents) events, got \(request.maxEvents)", field: "max_events")
        }
        guard request.waitMs <= Self.maximumFetchWait else {
            throw HealthError.invalidArgument("a fetch waits at most \(Self.maximumFetchWait) ms, got \(request.waitMs)", field: "wait_ms")
        }
        let ledger = try store.ledger(request.ledgerID)
        let limit = Int(request.maxEvents == 0 ? Self.defaultFetchedEvents : request.maxEvents)
        let hash = Array(request.afterHash)
        var shipped = try ledger.shippedEvents(after: request.afterSequence, hash: hash, limit: limit, maximumBytes: Self.maximumFetchedBytes)
        // The follower's head is this ledger's: every event up to it is durable there.
        try await ledger.followers.fetching(by: request.followerID, acknowledging: request.afterSequence) {
            guard shipped.events.isEmpty, request.waitMs > 0 else { return }
            try await ledger.waitForEvents(after: request.afterSequence, timeout: .milliseconds(Int64(request.waitMs)))
            try Task.checkCancellation()
            shipped = try ledger.shippedEvents(after: request.afterSequence, hash: hash, limit: limit, maximumBytes: Self.maximumFetchedBytes)
        }
        let hold = try ledger.legalHold()
        return try Healthledger_V1_FetchLogResponse.with {
            $0.events = shipped.events.map { Data($0) }
            $0.headSequence = shipped.headSequence
            $0.legalHold = hold != nil
            $0.legalHoldReason = hold ?? ""
        }.serializedBytes()
    }

    func fetchSnapshot(_ request: Healthledger_V1_FetchSnapshotRequest) async throws -> [UInt8] {
        if request.snapshotID.isEmpty {
            guard request.file.isEmpty, request.offset == 0, !request.release else {
                throw HealthError.invalidArgument("name the snapshot to read or release", field: "snapshot_id")
            }
            let ledgerID = request.ledgerID
            // A copy of the whole ledger: seconds on a large one, off the shared threads.
            let snapshot = try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global(qos: .utility).async { continuation.resume(with: Result { try store.takeSnapshot(of: ledgerID) }) }
            }
            return try Healthledger_V1_FetchSnapshotResponse.with {
                $0.snapshotID = snapshot.id
                $0.manifest = Data(snapshot.manifest)
                $0.files = snapshot.files.map { file in .with { $0.name = file.name; $0.size = file.size } }
            }.serializedBytes()
        }
        if request.release {
            try store.releaseSnapshot(request.snapshotID)
            return try Healthledger_V1_FetchSnapshotResponse.with { $0.snapshotID = request.snapshotID }.serializedBytes()
        }
        let data = try store.snapshotChunk(request.snapshotID, file: request.file, offset: request.offset)
        return try Healthledger_V1_FetchSnapshotResponse.with {
            $0.snapshotID = request.snapshotID
            $0.data = Data(data)
        }.serializedBytes()
    }
}
