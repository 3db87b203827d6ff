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
        // A cluster's leader serves only fetches under its epoch: a follower of a newer leader
        // acknowledges nothing to an old one.
        if let cluster, let refusal = cluster.fetchRefusal(epoch: request.epoch, group: Placement.group(of: request.ledgerID)) { throw refusal }
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

    func watchLedgers(_ request: Healthledger_V1_WatchLedgersRequest) async throws -> [UInt8] {
        guard (1...128).contains(request.followerID.utf8.count) else {
            throw HealthError.invalidArgument("name the follower: 1–128 bytes, got \(request.followerID.utf8.count)", field: "follower_id")
        }
        guard request.waitMs <= Self.maximumFetchWait else {
            throw HealthError.invalidArgument("a watch waits at most \(Self.maximumFetchWait) ms, got \(request.waitMs)", field: "wait_ms")
        }
        let cursor = LedgerChanges.Cursor(bytes: Array(request.cursor))
        let applied = LedgerChanges.Cursor(bytes: Array(request.applied))
        guard request.cursor.isEmpty || cursor != nil else {
            throw HealthError.invalidArgument("a cursor is 16 bytes, got \(request.cursor.count)", field: "cursor")
        }
        guard request.applied.isEmpty || applied != nil else {
            throw HealthError.invalidArgument("a cursor is 16 bytes, got \(request.applied.count)", field: "applied")
        }
        let groups = try watchedGroups(request.groups)
        let (changes, store, follower) = (store.changes, store, request.followerID)
        /// Whether ledger `id` is one the follower watches.
        func watched(_ id: String) -> Bool { groups.map { $0.contains(Placement.group(of: id)) } ?? true }
        let deadline = ContinuousClock.now + .milliseconds(Int64(request.waitMs))
        /// Whether the follower has a fetch of `id` in progress: it hears of the change from that.
        func tailed(_ id: String) -> Bool { (try? store.ledger(id).followers.isFetching(follower)) ?? false }
        let answer = await store.watchers.watching(by: follower, applied: applied, groups: groups) { () -> LedgerChanges.Answer in
            var answer = changes.changes(after: cursor)
            // Waits while nothing changed, or only ledgers the follower tails or does not
            // watch: a watch answered for each of their commits would only cost both sides.
            while case .changed(let ledgers, let now) = answer, ledgers.filter(watched).allSatisfy(tailed), ContinuousClock.now < deadline,
                !Task.isCancelled
            {
                await changes.wait(after: now, timeout: deadline - ContinuousClock.now)
                answer = changes.changes(after: cursor)
            }
            return answer
        }
        var response = Healthledger_V1_WatchLedgersResponse()
        switch answer {
        case .changed(let ledgers, let now):
            // Heads read after the changes were noted: each at least the one the change left.
            var heads: [(String, UInt64)] = []
            for id in ledgers where watched(id) {
                guard let head = try? store.ledger(id).head().sequence else { continue }
                heads.append((id, head))
            }
            (response.ledgerIds, response.headSequences, response.cursor) = (heads.map(\.0), heads.map(\.1), Data(now.bytes))
        case .everything(let now):
            (response.ledgerIds, response.cursor, response.everything) = (try store.ledgerIDs().filter(watched), Data(now.bytes), true)
        }
        return try response.serializedBytes()
    }

    /// The placement groups a watch asks for (nil: every ledger, outside a cluster), each
    /// checked to be led here under the epoch the follower knows.
    private func watchedGroups(_ requested: [Healthledger_V1_WatchedGroup]) throws -> Set<Int>? {
        guard let cluster else {
            guard requested.isEmpty else {
                throw HealthError.invalidArgument("this server is not a member of a cluster: watch every ledger (no groups)", field: "groups")
            }
            return nil
        }
        guard !requested.isEmpty else {
            throw HealthError.invalidArgument("a cluster's member watches placement groups: name them with their epochs", field: "groups")
        }
        var groups = Set<Int>()
        for watched in requested {
            guard watched.group < Placement.groups, groups.insert(Int(watched.group)).inserted else {
                throw HealthError.invalidArgument(
                    "placement group \(watched.group) is not one of 0–\(Placement.groups - 1), or named twice", field: "groups")
            }
            if let refusal = cluster.fetchRefusal(epoch: watched.epoch, group: Int(watched.group)) { throw refusal }
        }
        return groups
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

    func clusterStatus(_: Healthledger_V1_Empty) throws -> [UInt8] {
        guard let cluster else {
            throw HealthError(.invalidArgument, "this server is not a member of a cluster (it was started without --etcd)")
        }
        let (standings, view) = (cluster.standings, cluster.view)
        var status = Healthledger_V1_ClusterStatusResponse()
        status.cluster = cluster.cluster
        status.node = cluster.node
        let led = Set(standings.indices.filter { if case .leader = standings[$0] { true } else { false } })
        let known = standings.contains { if case .electing = $0 { false } else { true } }
        status.role = led.count == standings.count ? "leader" : !led.isEmpty ? "primary" : known ? "follower" : "electing"
        let ids = try store.ledgerIDs()
        var counts = Array(repeating: UInt64(0), count: Placement.groups)
        for id in ids { counts[Placement.group(of: id)] += 1 }
        status.groups = view.groups.enumerated().map { group, seen in
            .with {
                $0.group = UInt32(group)
                if let leader = seen.leader { ($0.leader, $0.leaderAddress, $0.epoch) = (leader.node, leader.address, leader.epoch) }
                $0.standby = seen.standby ?? ""
                $0.pendingStandby = seen.pendingStandby ?? ""
                $0.placedOn = seen.placedOn ?? ""
                $0.ledgerCount = counts[group]
            }
        }
        let window = cluster.followerWindow
        let (present, now) = (store.watchers.present(within: window), store.changes.cursor)
        status.members = view.members.map { member in
            .with {
                ($0.node, $0.address) = (member.node, member.address)
                $0.leads = view.groups.indices.filter { view.groups[$0].leader?.node == member.node }.map(UInt32.init)
                guard !led.isEmpty, member.node != cluster.node else { return }
                let applied = store.watchers.applied(by: member.node).flatMap { $0.life == now.life ? $0.position : nil } ?? 0
                ($0.watching, $0.changesBehind) = (present.contains(member.node), now.position - min(applied, now.position))
            }
        }
        status.ledgerCount = UInt64(ids.count)
        // Only the open ones: opening every ledger of a large store would take minutes.
        status.ledgers = try store.openLedgers.sorted { $0.id < $1.id }.map { ledger in
            var ledgerStatus = Healthledger_V1_LedgerReplicaStatus()
            ledgerStatus.ledgerID = ledger.id
            ledgerStatus.headSequence = try ledger.head().sequence
            if led.contains(Placement.group(of: ledger.id)) {
                let connected = Set(ledger.followers.connected(within: window).map(\.follower))
                ledgerStatus.followers = ledger.followers.all.map { follower in
                    .with {
                        $0.node = follower.follower
                        $0.acknowledgedSequence = follower.sequence
                        $0.connected = connected.contains(follower.follower)
                    }
                }
            }
            return ledgerStatus
        }
        return try status.serializedBytes()
    }
}
