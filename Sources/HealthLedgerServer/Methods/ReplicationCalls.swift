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

    /// Keeps the access records of the reads a follower answered beside this primary's own.
    func forwardAccessRecords(_ request: Healthledger_V1_ForwardAccessRecordsRequest) throws -> [UInt8] {
        guard (1...128).contains(request.followerID.utf8.count) else {
            throw HealthError.invalidArgument("name the follower: 1–128 bytes, got \(request.followerID.utf8.count)", field: "follower_id")
        }
        guard (1...Ledger.maximumForwardedAccessRecords).contains(request.records.count) else {
            throw HealthError.invalidArgument(
                "forward 1–\(Ledger.maximumForwardedAccessRecords) access records at a time, got \(request.records.count)", field: "records")
        }
        // Like a fetch: only the leader of the follower's epoch keeps them (a paused old one
        // would keep them where no one reads them).
        if let cluster, let refusal = cluster.fetchRefusal(epoch: request.epoch, group: Placement.group(of: request.ledgerID)) { throw refusal }
        let ledger = try store.ledger(request.ledgerID)
        let kept = try ledger.keepForwardedAccessRecords(request.records.map(ForwardedAccessRecord.init))
        return try Healthledger_V1_ForwardAccessRecordsResponse.with { $0.kept = UInt32(kept) }.serializedBytes()
    }

    /// The access records this primary holds of a ledger, in their order of arrival, for a follower's copy.
    func fetchAccessRecords(_ request: Healthledger_V1_FetchAccessRecordsRequest) throws -> [UInt8] {
        guard (1...128).contains(request.followerID.utf8.count) else {
            throw HealthError.invalidArgument("name the follower: 1–128 bytes, got \(request.followerID.utf8.count)", field: "follower_id")
        }
        guard request.afterKey.isEmpty || request.afterKey.count == 16 else {
            throw HealthError.invalidArgument("a place in the access records names a key of 16 bytes, got \(request.afterKey.count)", field: "after_key")
        }
        guard request.limit <= Ledger.maximumForwardedAccessRecords else {
            throw HealthError.invalidArgument(
                "a fetch asks for at most \(Ledger.maximumForwardedAccessRecords) access records, got \(request.limit)", field: "limit")
        }
        if let cluster, let refusal = cluster.fetchRefusal(epoch: request.epoch, group: Placement.group(of: request.ledgerID)) { throw refusal }
        let page = try store.ledger(request.ledgerID).accessFeed(after: request.after, afterKey: Array(request.afterKey), limit: Int(request.limit))
        return try Healthledger_V1_FetchAccessRecordsResponse.with {
            $0.records = page.records.map(Healthledger_V1_ForwardedAccessRecord.init)
            $0.next = page.next
            $0.nextKey = Data(page.nextKey)
            $0.hasMore_p = page.hasMore
            $0.restarted = page.restarted
        }.serializedBytes()
    }

    func watchLedgers(_ request: Healthledger_V1_WatchLedgersRequest) async throws -> [UInt8] {
        guard (1...128).contains(request.followerID.utf8.count) else {
            throw HealthError.invalidArgument("name the follower: 1–128 bytes, got \(request.followerID.utf8.count)", field: "follower_id")
        }
        guard request.waitMs <= Self.maximumFetchWait else {
            throw HealthError.invalidArgument("a watch waits at most \(Self.maximumFetchWait) ms, got \(request.waitMs)", field: "wait_ms")
        }
        let scopes = try watchedScopes(request)
        let (changes, store, follower) = (store.changes, store, request.followerID)
        let deadline = ContinuousClock.now + .milliseconds(Int64(request.waitMs))
        /// Whether the follower has a fetch of `id` in progress: it hears of the change from that.
        func tailed(_ id: String) -> Bool { (try? store.ledger(id).followers.isFetching(follower)) ?? false }
        let answer = await store.watchers.watching(by: follower, applied: scopes.mapValues(\.applied)) { () -> WatchAnswer in
            var answer = WatchAnswer(changes, scopes: scopes.mapValues(\.cursor))
            // Waits while nothing changed, or only ledgers the follower tails: a watch answered
            // for each of their commits would only cost both sides.
            while answer.listed.isEmpty, answer.changed.allSatisfy(tailed), ContinuousClock.now < deadline, !Task.isCancelled {
                await changes.wait(after: answer.now, timeout: deadline - ContinuousClock.now)
                answer = WatchAnswer(changes, scopes: scopes.mapValues(\.cursor))
            }
            return answer
        }
        var response = Healthledger_V1_WatchLedgersResponse()
        response.cursor = Data(answer.now.bytes)
        // Heads read after the changes were noted: each at least the one the change left. A
        // ledger erased whole since is named as erased; one that cannot be read (one being
        // erased among them, whose erasure may yet fail) fails the watch, so that the follower
        // never counts it as applied.
        for id in answer.changed {
            let head: UInt64
            do { head = try store.ledger(id).head().sequence } catch let failure as LedgerFailure where failure.kind == .notFound {
                guard try store.wasErasedWhole(id) else { throw failure }
                response.erasedLedgerIds.append(id)
                continue
            }
            response.ledgerIds.append(id)
            response.headSequences.append(head)
        }
        if !answer.listed.isEmpty {
            func isListed(_ id: String) -> Bool { answer.listed.contains { $0.contains(group: Placement.group(of: id)) } }
            let listed = try store.ledgerIDs().filter(isListed)
            if request.groups.isEmpty {
                (response.everything, response.ledgerIds, response.headSequences) = (true, listed, [])
            } else {
                response.listedLedgerIds = listed
            }
            let erased = Set(response.erasedLedgerIds)
            response.erasedLedgerIds += store.erasedLedgerIDs().filter { isListed($0) && !erased.contains($0) }
        }
        return try response.serializedBytes()
    }

    /// What a watch answers: the ledgers changed after the cursor of their scope, and the
    /// scopes whose cursor is of no use (none, another run's, too old), every ledger of which
    /// is to be listed.
    private struct WatchAnswer {
        var changed: [String] = []
        var listed: [WatchScope] = []
        var now: LedgerChanges.Cursor

        init(_ changes: LedgerChanges, scopes: [WatchScope: LedgerChanges.Cursor?]) {
            let usable = scopes.compactMapValues { $0.flatMap { changes.isUsable($0) ? $0 : nil } }
            let (changed, now) = changes.lastChanges(after: usable.values.min())
            self.now = now
            guard let changed else {
                listed = scopes.keys.sorted()
                return
            }
            listed = scopes.keys.filter { usable[$0] == nil }.sorted()
            let single = scopes.keys.first == .everyLedger
            for (ledger, position) in changed {
                let scope = single ? WatchScope.everyLedger : .group(Placement.group(of: ledger))
                if let cursor = usable[scope], position > cursor.position { self.changed.append(ledger) }
            }
        }
    }

    /// The scopes a watch asks for, each with its cursor and applied answer: every ledger
    /// outside a cluster; in a cluster the placement groups named, each checked to be led
    /// here under the epoch the follower knows.
    private func watchedScopes(
        _ request: Healthledger_V1_WatchLedgersRequest
    ) throws -> [WatchScope: (cursor: LedgerChanges.Cursor?, applied: LedgerChanges.Cursor?)] {
        func cursor(_ bytes: Data, field: String) throws -> LedgerChanges.Cursor? {
            guard !bytes.isEmpty else { return nil }
            guard let cursor = LedgerChanges.Cursor(bytes: Array(bytes)) else {
                throw HealthError.invalidArgument("a cursor is 16 bytes, got \(bytes.count)", field: field)
            }
            return cursor
        }
        guard let cluster else {
            guard request.groups.isEmpty else {
                throw HealthError.invalidArgument("this server is not a member of a cluster: watch every ledger (no groups)", field: "groups")
            }
            return [.everyLedger: (try cursor(request.cursor, field: "cursor"), try cursor(request.applied, field: "applied"))]
        }
        guard !request.groups.isEmpty else {
            throw HealthError.invalidArgument("a cluster's member watches placement groups: name them with their epochs", field: "groups")
        }
        guard request.cursor.isEmpty, request.applied.isEmpty else {
            throw HealthError.invalidArgument("in a cluster each watched group carries its own cursor and applied answer", field: "cursor")
        }
        var scopes: [WatchScope: (cursor: LedgerChanges.Cursor?, applied: LedgerChanges.Cursor?)] = [:]
        for watched in request.groups {
            guard watched.group < Placement.groups, scopes[.group(Int(watched.group))] == nil else {
                throw HealthError.invalidArgument(
                    "placement group \(watched.group) is not one of 0–\(Placement.groups - 1), or named twice", field: "groups")
            }
            if let refusal = cluster.fetchRefusal(epoch: watched.epoch, group: Int(watched.group)) { throw refusal }
            scopes[.group(Int(watched.group))] = (try cursor(watched.cursor, field: "groups.cursor"), try cursor(watched.applied, field: "groups.applied"))
        }
        return scopes
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
                $0.keepers = seen.keepers
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
