import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import LedgerSchema
import Logging
import Metrics
import ServiceLifecycle
import SwiftProtobuf
import Synchronization

/// Keeps this server's store a copy of a primary's: it watches which of the primary's
/// ledgers change (`WatchLedgers`), fetches a snapshot of a ledger this store has none of,
/// and tails the log of each ledger in use, event by event, applying each with the code
/// replay uses (docs/PROTOCOL.md §7.18). Each fetch tells the primary how far this copy is
/// durable, which is what a semi-synchronous write on the primary waits for. A ledger's
/// tail stops once it has fetched nothing for `idleAfter`, so that the primary can close
/// ledgers nobody uses; a change to it starts the tail again.
///
/// In a cluster it follows the placement groups the primary leads, each on its own cursor
/// (§7.19): a group the primary takes over is listed whole and checked ledger by ledger, one
/// it gives up stops being tailed, and the groups kept go on from where they were.
///
/// The server running beside it refuses writes, naming the primary
/// (``HealthLedgerServer/ServerConfiguration/primaryAddress``), and serves reads, as stale
/// as the replication lag (`healthledger_replication_lag_events`).
public final class PrimaryFollower: Service, Sendable {
    private let store: LedgerStore
    private let primary: HealthStoreConfiguration
    private let name: String
    private let logger: Logger
    private let wait: Duration
    private let idleAfter: Duration
    /// How often the access records of the reads this copy answered go to the primary.
    private let forwardInterval: Duration
    /// Whether it follows placement groups of a cluster rather than every ledger.
    private let inCluster: Bool
    private let lag = Gauge(label: "healthledger_replication_lag_events")
    /// Ledgers whose access records could not go to the primary at the last turn.
    private let accessRecordsWaiting = Gauge(label: "healthledger_access_records_unforwarded_ledgers")
    /// The ledgers the primary named, and how far behind each was after its last fetch.
    private let progress = Mutex<(followed: Set<String>, lags: [String: UInt64])>(([], [:]))
    /// Ledgers a watch named since their access records were last copied from the primary.
    private let accessRecordsToCopy = Mutex<Set<String>>([])
    private let tails: Mutex<Tails>

    /// A watch's answer: the ledgers changed with their heads, those listed, those erased
    /// whole, and its cursor.
    private typealias WatchAnswer = (changed: [(id: String, head: UInt64)], listed: [String], erased: [String], cursor: [UInt8])

    /// One scope followed: every ledger, or a placement group under its primary's epoch.
    private struct Scope {
        /// The fencing epoch its fetches and watches carry (0 outside a cluster).
        var epoch: UInt64
        /// Tells this following of the scope from an earlier one (dropped, then taken again).
        var following: UInt64
        /// The cursor of the last answer to a watch that named it (empty: none yet).
        var cursor: [UInt8] = []
        /// Whether an answer listed its ledgers (or named its changes since one that did).
        var listed = false
        /// Answers not yet applied in full, oldest first: their cursor and generation, and the
        /// scope's ledgers they named with their heads then (nil: to be fetched after it;
        /// ``erasedHead``: erased, its copy here to be erased).
        var unapplied: [(cursor: [UInt8], generation: UInt64, ledgers: [(id: String, head: UInt64?)])] = []
        /// The last answer applied in full (every ledger of the scope it named caught up since).
        var applied: [UInt8] = []
        /// How many of the first unapplied answer's ledgers caught up since (they stay so).
        var settledLedgers = 0

        init(epoch: UInt64, following: UInt64) { (self.epoch, self.following) = (epoch, following) }
    }

    /// The scopes followed, the ledgers tailed, and which watch answers each has caught up with.
    private struct Tails {
        var scopes: [WatchScope: Scope] = [:]
        /// Scopes followed since the follower began (each following of one numbered).
        var followings: UInt64 = 0
        /// The watch in flight: cancelled when the scopes change, to ask again at once.
        var watch: Task<WatchAnswer, any Error>?
        /// The watch in flight was cancelled to tell the primary at once what was applied.
        var reporting = false
        /// The ledgers with a tail running, each with its task and a token of its own.
        var running: [String: (token: UInt64, task: Task<Void, Never>)] = [:]
        /// Tails of groups no longer followed, cancelled and not yet ended: a new tail of the
        /// same ledger waits for its end, so that two never write one ledger.
        var retiring: [String: (token: UInt64, task: Task<Void, Never>)] = [:]
        var tokens: UInt64 = 0
        /// Ledgers to check, every one of an answer listing them, with the following of their
        /// scope then, and the sweepers checking them (``concurrentChecks`` at most).
        var unchecked: [(id: String, following: UInt64)] = []
        var sweepers = 0
        /// Ledgers a watch named since their tail's last fetch began: it goes on.
        var named = Set<String>()
        /// Watch answers received.
        var generation: UInt64 = 0
        /// Per ledger, the last answer that listed it without its head.
        var wanted: [String: UInt64] = [:]
        /// Per ledger, the answers it has caught up with: the generation when its last fetch
        /// that ended with every event of the primary's began.
        var caughtUp: [String: UInt64] = [:]
        /// Per ledger, the head of this store's copy, durable.
        var reached: [String: UInt64] = [:]
        /// Ledgers erased whole on the primary whose copy here is being erased.
        var erasing = Set<String>()

        /// Stops tracking ledger `id`; returns its tails, running and retiring, to end.
        mutating func forget(_ id: String) -> [Task<Void, Never>] {
            let tasks = [running.removeValue(forKey: id)?.task, retiring.removeValue(forKey: id)?.task].compactMap { $0 }
            unchecked.removeAll { $0.id == id }
            named.remove(id)
            (wanted[id], caughtUp[id], reached[id]) = (nil, nil, nil)
            return tasks
        }

        /// Follows `key` anew under `epoch`: no cursor yet, so the next watch lists its ledgers.
        mutating func follow(_ key: WatchScope, epoch: UInt64) {
            followings += 1
            scopes[key] = Scope(epoch: epoch, following: followings)
        }

        /// Moves the scope's ``Scope/applied`` past the answers whose ledgers all caught up since.
        mutating func settle(_ key: WatchScope) {
            guard var scope = scopes[key] else { return }
            while let first = scope.unapplied.first {
                while scope.settledLedgers < first.ledgers.count, isCaughtUp(first.ledgers[scope.settledLedgers], since: first.generation) {
                    scope.settledLedgers += 1
                }
                guard scope.settledLedgers == first.ledgers.count else { break }
                scope.applied = first.cursor
                scope.unapplied.removeFirst()
                scope.settledLedgers = 0
            }
            scopes[key] = scope
        }

        func isCaughtUp(_ ledger: (id: String, head: UInt64?), since generation: UInt64) -> Bool {
            // Erased here since: nothing of it is left to catch up with, whatever an answer said.
            if reached[ledger.id] == PrimaryFollower.erasedHead { return true }
            if let head = ledger.head { return (reached[ledger.id] ?? 0) >= head }
            return (caughtUp[ledger.id] ?? 0) >= generation
        }
    }

    /// The head an erased ledger stands for in an answer to apply, and its copy reaches once
    /// erased: no copy reaches it by fetching.
    static let erasedHead = UInt64.max

    /// Events a ledger may be behind for this copy to count as caught up (one fetch's worth).
    static let caughtUpLag: UInt64 = 10_000

    /// The most events one fetch asks for: the protocol's most, so that a follower behind
    /// catches up in as few commits as it can.
    static let eventsPerFetch = 10_000

    /// Ledgers checked at once when the primary lists them (a first watch, a restart, a group
    /// taken over): most have nothing new, and their tails stop after one fetch.
    static let concurrentChecks = 16

    /// - Parameters:
    ///   - primary: where the primary listens, with an operator credential of the primary
    ///     (its timeout must be longer than `wait`).
    ///   - name: this follower's name, as the primary's acknowledgements know it.
    ///   - wait: how long one fetch or watch waits on the primary for something new.
    ///   - idleAfter: a ledger's tail that fetched nothing for this long stops (at least one
    ///     `wait`).
    ///   - groups: in a cluster, the placement groups to follow (those the primary leads),
    ///     each with the fencing epoch it leads the group under (its calls carry it); empty:
    ///     every ledger of the primary. ``follow(groups:)`` changes them.
    ///   - forwardInterval: how often the access records of the reads this copy answered are
    ///     handed to the primary (those the store's ``LedgerStore/accessForwarding`` names in
    ///     the outbox: set its rule), and those the primary holds of the ledgers a watch named
    ///     since are copied.
    public init(
        store: LedgerStore, primary: HealthStoreConfiguration, name: String, logger: Logger, wait: Duration = .seconds(10),
        idleAfter: Duration = .seconds(30), groups: [Int: UInt64] = [:], forwardInterval: Duration = .seconds(1)
    ) {
        self.store = store
        self.primary = primary
        self.name = name
        self.logger = logger
        self.wait = wait
        self.idleAfter = idleAfter
        self.forwardInterval = forwardInterval
        self.inCluster = !groups.isEmpty
        // A copy's reads are on the record on its primary too (a cluster member's rule is its own).
        if groups.isEmpty { store.accessForwarding.forward(.everyLedger) }
        var tails = Tails()
        if groups.isEmpty {
            tails.follow(.everyLedger, epoch: 0)
        } else {
            for (group, epoch) in groups { tails.follow(.group(group), epoch: epoch) }
        }
        self.tails = Mutex(tails)
    }

    /// Follows the primary's ledgers until cancelled (or the service group shuts down), over
    /// a connection of its own.
    public func run() async throws {
        let primary = HealthStore(configuration: primary)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.exchangeAccessRecords(with: primary) }
            var lastFailure: String?
            while !Task.isCancelled, !Task.isShuttingDownGracefully {
                let asked = tails.withLock { tails in
                    for scope in tails.scopes.keys { tails.settle(scope) }
                    tails.reporting = false
                    return tails.scopes
                }
                let call = Task {
                    if inCluster {
                        let groups = asked.sorted { $0.key < $1.key }.compactMap { key, scope -> HealthStore.WatchedGroup? in
                            guard case .group(let group) = key else { return nil }
                            return HealthStore.WatchedGroup(group: group, epoch: scope.epoch, cursor: scope.cursor, applied: scope.applied)
                        }
                        return try await primary.watchLedgers(wait: wait, follower: name, groups: groups)
                    }
                    let scope = asked[.everyLedger]
                    return try await primary.watchLedgers(cursor: scope?.cursor ?? [], applied: scope?.applied ?? [], wait: wait, follower: name)
                }
                /// Whether the watch is to be asked again at once: the scopes changed since it was
                /// asked for (it no longer fits them), or what was applied since is to be told.
                func outdated(_ tails: Tails) -> Bool { tails.reporting || tails.scopes.mapValues(\.following) != asked.mapValues(\.following) }
                if tails.withLock({ tails in
                    tails.watch = call
                    return outdated(tails)
                }) {
                    call.cancel()
                }
                do {
                    let answer = try await withTaskCancellationHandler { try await call.value } onCancel: { call.cancel() }
                    let (started, sweepers, erased) = take(answer, asked: asked)
                    for (id, following) in started { startTail(of: id, following: following, on: primary) }
                    for _ in 0..<sweepers { group.addTask { await self.sweep(on: primary) } }
                    for id in erased { group.addTask { await self.eraseCopy(of: id) } }
                    lastFailure = nil
                } catch {
                    // Stopped (a cluster member no longer following this primary): nothing to say.
                    if Task.isCancelled { break }
                    // The groups followed changed meanwhile, or an erasure is to be told: asked again at once.
                    if tails.withLock({ outdated($0) }) { continue }
                    // Said once per kind of failure, not every few seconds.
                    let failure = "\(error)"
                    if failure != lastFailure { logger.warning("cannot watch the primary's ledgers", metadata: ["error": "\(failure)"]) }
                    lastFailure = failure
                    try? await Task.sleep(for: .seconds(1))
                }
            }
            let running = tails.withLock { tails in
                defer { tails.running = [:] }
                return tails.running.values.map(\.task) + tails.retiring.values.map(\.task)
            }
            for task in running { task.cancel() }
            group.cancelAll()
            for task in running { await task.value }
        }
        await primary.close()
    }

    /// Takes a watch's answer for the scopes it was `asked` for and still followed as then:
    /// each gets an answer to apply, the ledgers changed are tailed (the ones returned start
    /// now), those listed are left to the sweepers (how many to start), and the copies of
    /// those erased are to be erased (the ones returned, not being erased already).
    private func take(
        _ answer: WatchAnswer, asked: [WatchScope: Scope]
    ) -> (started: [(id: String, following: UInt64)], sweepers: Int, erased: [String]) {
        tails.withLock { tails in
            tails.generation += 1
            let generation = tails.generation
            var named: [WatchScope: [(id: String, head: UInt64?)]] = [:]
            for (id, head) in answer.changed { named[scope(of: id), default: []].append((id, head)) }
            for id in answer.listed { named[scope(of: id), default: []].append((id, nil)) }
            var erasedNamed: [WatchScope: [(id: String, head: UInt64?)]] = [:]
            for id in answer.erased { erasedNamed[scope(of: id), default: []].append((id, Self.erasedHead)) }
            var started: [(id: String, following: UInt64)] = []
            var followed: [String] = []
            for (key, was) in asked {
                guard var scope = tails.scopes[key], scope.following == was.following else { continue }
                let ledgers = named[key] ?? []
                // Applied once its erased ledgers' copies are erased too.
                scope.unapplied.append((answer.cursor, generation, ledgers + (erasedNamed[key] ?? [])))
                scope.cursor = answer.cursor
                scope.listed = true
                tails.scopes[key] = scope
                for (id, head) in ledgers {
                    followed.append(id)
                    if head == nil { tails.wanted[id] = generation }
                    if tails.running[id] != nil {
                        tails.named.insert(id)
                    } else if head == nil {
                        tails.unchecked.append((id, scope.following))
                    } else {
                        started.append((id, scope.following))
                    }
                }
            }
            progress.withLock { $0.followed.formUnion(followed) }
            accessRecordsToCopy.withLock { $0.formUnion(followed) }
            let sweepers = max(0, min(Self.concurrentChecks - tails.sweepers, tails.unchecked.count))
            tails.sweepers += sweepers
            let erased = answer.erased.filter { id in
                guard let was = asked[scope(of: id)], tails.scopes[scope(of: id)]?.following == was.following else { return false }
                return tails.erasing.insert(id).inserted
            }
            return (started, sweepers, erased)
        }
    }

    /// Follows `groups` of the primary from now on (each with the epoch it leads it under):
    /// a group it no longer leads, or leads under another epoch, stops being tailed; a group
    /// new to it is listed whole by the next watch, asked at once.
    ///
    /// - Returns: a task that ends once the tails of the groups no longer followed stopped
    ///   (every fetch under way applied or abandoned).
    @discardableResult
    public func follow(groups: [Int: UInt64]) -> Task<Void, Never> {
        let wanted = Dictionary(uniqueKeysWithValues: groups.map { (WatchScope.group($0.key), $0.value) })
        let (stopped, dropped, watch) = tails.withLock { tails -> ([Task<Void, Never>], Set<WatchScope>, Task<WatchAnswer, any Error>?) in
            let dropped = Set(tails.scopes.filter { wanted[$0.key] != $0.value.epoch }.keys)
            let added = wanted.filter { tails.scopes[$0.key]?.epoch != $0.value }
            guard !dropped.isEmpty || !added.isEmpty else { return ([], [], nil) }
            for key in dropped { tails.scopes[key] = nil }
            for (key, epoch) in added { tails.follow(key, epoch: epoch) }
            let isDropped = { (id: String) in dropped.contains(self.scope(of: id)) }
            let stopped = tails.running.filter { isDropped($0.key) }
            for (id, tail) in stopped {
                tails.running[id] = nil
                tails.retiring[id] = tail
            }
            tails.unchecked.removeAll { isDropped($0.id) }
            tails.named = tails.named.filter { !isDropped($0) }
            tails.wanted = tails.wanted.filter { !isDropped($0.key) }
            tails.caughtUp = tails.caughtUp.filter { !isDropped($0.key) }
            tails.reached = tails.reached.filter { !isDropped($0.key) }
            return (stopped.values.map(\.task), dropped, tails.watch)
        }
        if !dropped.isEmpty {
            let worst = progress.withLock { progress in
                progress.followed = progress.followed.filter { !dropped.contains(scope(of: $0)) }
                progress.lags = progress.lags.filter { !dropped.contains(scope(of: $0.key)) }
                return progress.lags.values.max() ?? 0
            }
            lag.record(Int64(clamping: worst))
        }
        watch?.cancel()
        for task in stopped { task.cancel() }
        return Task { for task in stopped { await task.value } }
    }

    /// The scope ledger `id` is followed in.
    private func scope(of id: String) -> WatchScope { inCluster ? .group(Placement.group(of: id)) : .everyLedger }

    /// Whether ledger `id` is among those followed.
    private func follows(_ id: String) -> Bool { tails.withLock { $0.scopes[scope(of: id)] != nil } }

    /// Every ``forwardInterval`` until cancelled, ledger by ledger: hands the primary the
    /// access records this server's copies wrote since, then copies those the primary holds
    /// of the ledgers a watch named since (docs/LEDGER.md, "Access records"). A ledger whose
    /// exchange failed, or that has no copy here yet, is tried again at the next turn.
    private func exchangeAccessRecords(with primary: HealthStore) async {
        let forwarding = store.accessForwarding
        var lastFailure: String?
        /// Logs a failure once per kind, not every second.
        func failed(_ error: any Error, _ id: String, _ message: Logger.Message) {
            let failure = "\(error)"
            if failure != lastFailure { logger.warning(message, metadata: ["ledger.id": "\(id)", "error": "\(failure)"]) }
            lastFailure = failure
        }
        while !Task.isCancelled {
            try? await Task.sleep(for: forwardInterval)
            var unforwarded = 0
            defer { accessRecordsWaiting.record(unforwarded) }
            for id in forwarding.takePending(where: follows) {
                do {
                    let ledger = try store.ledger(id)
                    while !Task.isCancelled {
                        let (records, keys) = try ledger.forwardableAccessRecords()
                        if keys.isEmpty { break }
                        do {
                            if !records.isEmpty { _ = try await primary.forwardAccessRecords(ledger: id, records, follower: name, epoch: epoch(of: id)) }
                        } catch let refusal as RPCError where refusal.code == .invalidArgument {
                            // Records the primary will never take (a clock far ahead of its
                            // own): sending them again would hold up every later one.
                            logger.error(
                                "the primary refused access records; they stay on this server only",
                                metadata: ["ledger.id": "\(id)", "records": "\(records.count)", "error": "\(refusal.message)"])
                        }
                        try ledger.forwarded(keys)
                    }
                } catch let failure as LedgerFailure where failure.kind == .notFound {
                    // Erased whole here: nothing is left to send.
                    continue
                } catch {
                    forwarding.note(id)
                    unforwarded += 1
                    if Task.isCancelled { return }
                    failed(error, id, "cannot hand the access records to the primary")
                }
            }
            // Taken out of the set first: which ledgers this follows is asked under another lock.
            let named = accessRecordsToCopy.withLock { named in
                defer { named.removeAll() }
                return named
            }.filter(follows).sorted()
            for id in named {
                do {
                    let ledger: Ledger
                    do { ledger = try store.ledger(id) } catch let failure as LedgerFailure where failure.kind == .notFound {
                        // Its copy is not made yet (or it was erased whole): next turn, or never.
                        if try !store.wasErasedWhole(id) { _ = accessRecordsToCopy.withLock { $0.insert(id) } }
                        continue
                    }
                    var position = try ledger.copiedAccessPosition()
                    while !Task.isCancelled {
                        let page = try await primary.fetchAccessRecords(
                            ledger: id, after: position.after, afterKey: position.key, follower: name, epoch: epoch(of: id))
                        let kept = try ledger.keepCopiedAccessRecords(page)
                        if kept.refused > 0 {
                            logger.error(
                                "the primary holds access records this copy cannot keep; passed over",
                                metadata: ["ledger.id": "\(id)", "records": "\(kept.refused)"])
                        }
                        if page.next > 0 { position = (page.next, page.nextKey) }
                        if !page.hasMore { break }
                    }
                } catch {
                    _ = accessRecordsToCopy.withLock { $0.insert(id) }
                    if Task.isCancelled { return }
                    failed(error, id, "cannot copy the primary's access records")
                }
            }
        }
    }

    /// The fencing epoch a fetch of ledger `id` carries (0 outside a cluster or for a group
    /// no longer followed).
    private func epoch(of id: String) -> UInt64 { tails.withLock { $0.scopes[scope(of: id)]?.epoch ?? 0 } }

    /// Starts tailing ledger `id` unless a tail of it runs, or its scope is no longer followed
    /// as it was when the ledger was named (`following`); returns the tail's task. A tail of
    /// it retiring (its group given up before) ends first.
    @discardableResult
    private func startTail(of id: String, following: UInt64, on primary: HealthStore) -> Task<Void, Never>? {
        tails.withLock { tails in
            guard tails.running[id] == nil, !tails.erasing.contains(id), tails.scopes[scope(of: id)]?.following == following else { return nil }
            tails.tokens += 1
            let token = tails.tokens
            let retiring = tails.retiring[id]?.task
            let task = Task {
                await retiring?.value
                await self.tail(id, token: token, on: primary)
            }
            tails.running[id] = (token, task)
            return task
        }
    }

    /// Tails the ledgers of ``Tails/unchecked`` one after another, each until it stops.
    private func sweep(on primary: HealthStore) async {
        while !Task.isCancelled {
            let next = tails.withLock { tails -> (id: String, following: UInt64)? in
                while let next = tails.unchecked.popLast() {
                    if tails.running[next.id] == nil { return next }
                }
                tails.sweepers -= 1
                return nil
            }
            guard let next else { return }
            guard let task = startTail(of: next.id, following: next.following, on: primary) else { continue }
            await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
        }
        tails.withLock { $0.sweepers -= 1 }
    }

    /// Tails one ledger's log, fetching a snapshot first when this store has none of it,
    /// until cancelled, or until a fetch brings nothing new, no watch named the ledger
    /// meanwhile, and its last events came `idleAfter` ago or more (or never, since the tail
    /// began); after a failure, again a second later.
    private func tail(_ id: String, token: UInt64, on primary: HealthStore) async {
        defer {
            tails.withLock { tails in
                if tails.running[id]?.token == token { tails.running[id] = nil }
                if tails.retiring[id]?.token == token { tails.retiring[id] = nil }
            }
        }
        /// Whether this tail is still the ledger's (its group followed as when it began).
        func current(_ tails: Tails) -> Bool { tails.running[id]?.token == token }
        var logger = logger
        logger[metadataKey: "ledger.id"] = "\(id)"
        var lastFailure: String?
        var lastEvents: ContinuousClock.Instant?
        while !Task.isCancelled {
            do {
                guard tails.withLock({ current($0) }) else { return }
                let ledger = try await local(id, from: primary, logger: logger)
                let start = try ledger.head().sequence
                guard tails.withLock({ tails in
                    guard current(tails) else { return false }
                    tails.reached[id] = start
                    return true
                }) else { return }
                while !Task.isCancelled {
                    let head = try ledger.head()
                    // A watch answer waiting for this ledger to catch up: no waiting on the primary.
                    let asked = tails.withLock { tails -> (generation: UInt64, confirming: Bool)? in
                        guard current(tails) else { return nil }
                        tails.named.remove(id)
                        return (tails.generation, (tails.wanted[id] ?? 0) > (tails.caughtUp[id] ?? 0))
                    }
                    guard let (generation, confirming) = asked else { return }
                    let fetched: (events: [[UInt8]], headSequence: UInt64, legalHold: String?)
                    do {
                        fetched = try await primary.fetchLog(
                            ledger: id, after: head.sequence, hash: head.hash, maximumEvents: Self.eventsPerFetch, wait: confirming ? .zero : wait,
                            follower: name, epoch: epoch(of: id))
                    } catch let refusal as RPCError where refusal.code == .outOfRange {
                        // This copy holds events the primary does not: back to the last event both have.
                        let common = try await commonPrefix(of: ledger, below: head.sequence, on: primary)
                        logger.warning("this copy's log diverged from the primary's", metadata: ["ledger.head": "\(head.sequence)", "ledger.common": "\(common)"])
                        try await ledger.discardTail(after: common)
                        tails.withLock { tails in
                            if current(tails) { tails.reached[id] = common }
                        }
                        continue
                    }
                    let reached = fetched.events.isEmpty ? head.sequence : try await ledger.applyShipped(fetched.events)
                    // A fetch also ends when the primary wrote access records: copied at the next turn.
                    _ = accessRecordsToCopy.withLock { $0.insert(id) }
                    // The legal hold is not an event: it comes with every fetch.
                    if try ledger.legalHold() != fetched.legalHold { try ledger.setLegalHold(reason: fetched.legalHold) }
                    lastFailure = nil
                    if !fetched.events.isEmpty { lastEvents = .now }
                    let idle = fetched.events.isEmpty && lastEvents.map { ContinuousClock.now - $0 >= idleAfter } ?? true
                    let stopping = tails.withLock { tails -> Bool in
                        // Its group no longer followed: what it applied is the old primary's.
                        guard current(tails) else { return true }
                        tails.reached[id] = reached
                        if reached >= fetched.headSequence { tails.caughtUp[id] = max(tails.caughtUp[id] ?? 0, generation) }
                        record(lag: fetched.headSequence > reached ? fetched.headSequence - reached : 0, of: id)
                        // Named by a watch since this fetch began: the next fetch covers it.
                        guard idle, !tails.named.contains(id) else { return false }
                        tails.running[id] = nil
                        return true
                    }
                    if stopping { return }
                }
            } catch {
                if Task.isCancelled || !tails.withLock({ current($0) }) { return }
                // Erased whole meanwhile (here, as on the primary): nothing is left to follow.
                if (try? store.wasErasedWhole(id)) == true { return }
                let failure = "\(error)"
                if failure != lastFailure { logger.error("cannot follow the primary's ledger", metadata: ["error": "\(failure)"]) }
                lastFailure = failure
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Erases this store's copy of ledger `id`, erased whole on the primary: its tail ends
    /// first, then the copy goes as the primary's did (or, with no copy here, the erasure is
    /// only journaled), so that no snapshot or backup of it is installed here afterwards.
    /// After a failure (the copy still in use), again a second later.
    private func eraseCopy(of id: String) async {
        defer { _ = tails.withLock { $0.erasing.remove(id) } }
        let tasks = tails.withLock { $0.forget(id) }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        let worst = progress.withLock { progress in
            progress.followed.remove(id)
            progress.lags[id] = nil
            return progress.lags.values.max() ?? 0
        }
        lag.record(Int64(clamping: worst))
        let reason = "erased whole on the primary"
        var lastFailure: String?
        while !Task.isCancelled {
            do {
                if try store.ledgerIDs().contains(id) {
                    // The primary erased it: a legal hold copied here before it was lifted there holds nothing.
                    try await store.eraseLedger(id, reason: reason, waitingUpTo: LedgerStore.erasureDrain, ignoringHold: true)
                    logger.notice("erased this copy of a ledger erased on the primary", metadata: ["ledger.id": "\(id)"])
                } else {
                    try store.recordErasure(ofAbsentLedger: id, reason: reason)
                }
                // The primary may be waiting to hear of it (a semi-synchronous erasure): the
                // watch in flight makes way for one that says so.
                let watch = tails.withLock { tails in
                    tails.reached[id] = Self.erasedHead
                    tails.reporting = true
                    return tails.watch
                }
                watch?.cancel()
                return
            } catch {
                let failure = "\(error)"
                if failure != lastFailure {
                    logger.error("cannot erase this copy of a ledger erased on the primary", metadata: ["ledger.id": "\(id)", "error": "\(failure)"])
                }
                lastFailure = failure
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// The last event `ledger` shares with the primary's log (0 when none): a binary search
    /// over the follower's events, asking the primary whether each is in its log (a fetch of
    /// nothing after it). Since every event's hash covers its predecessor's, the events both
    /// have are a prefix of each.
    private func commonPrefix(of ledger: Ledger, below head: UInt64, on primary: HealthStore) async throws -> UInt64 {
        var (shared, differs) = (UInt64(0), head)
        while differs - shared > 1 {
            let middle = shared + (differs - shared) / 2
            guard let hash = try ledger.eventHashes(from: middle, limit: 1).first else { throw LedgerFailure(.corrupted, "event \(middle) is missing") }
            do {
                _ = try await primary.fetchLog(ledger: ledger.id, after: middle, hash: hash, maximumEvents: 1, wait: .zero, follower: name, epoch: epoch(of: ledger.id))
                shared = middle
            } catch let refusal as RPCError where refusal.code == .outOfRange {
                differs = middle
            }
        }
        return shared
    }

    /// This store's copy of ledger `id`, installed from a snapshot of the primary's when missing.
    private func local(_ id: String, from primary: HealthStore, logger: Logger) async throws -> Ledger {
        do {
            return try store.ledger(id)
        } catch let failure as LedgerFailure where failure.kind == .notFound {
            try await installSnapshot(of: id, from: primary, logger: logger)
            return try store.ledger(id)
        }
    }

    /// Fetches a snapshot of the primary's ledger `id` into a staging directory beside the
    /// store's ledgers, and restores it as this store's (verified first).
    private func installSnapshot(of id: String, from primary: HealthStore, logger: Logger) async throws {
        let taken = try await primary.fetchSnapshot(.with { $0.ledgerID = id })
        defer {
            let snapshot = taken.snapshotID
            Task { [primary] in _ = try? await primary.fetchSnapshot(.with { $0.ledgerID = id; $0.snapshotID = snapshot; $0.release = true }) }
        }
        let staging = store.directory.appending(path: ".following-\(id)-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: staging) }
        var bytes: UInt64 = 0
        for file in taken.files {
            guard !file.name.isEmpty, !file.name.contains("/"), file.name != ".", file.name != ".." else {
                throw LedgerFailure(.invalidArgument, "the primary's snapshot names a file '\(file.name.prefix(100))', which is not a plain name")
            }
            let url = staging.appending(path: file.name)
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw LedgerFailure(.storage, "cannot create \(url.path)")
            }
            let handle = try FileHandle(forWritingTo: url)
            defer { try? handle.close() }
            var offset: UInt64 = 0
            while offset < file.size {
                let chunk = try await primary.fetchSnapshot(.with {
                    $0.ledgerID = id
                    $0.snapshotID = taken.snapshotID
                    $0.file = file.name
                    $0.offset = offset
                }).data
                guard !chunk.isEmpty else {
                    throw LedgerFailure(.corrupted, "the primary's snapshot file \(file.name) ended at \(offset) of its \(file.size) bytes")
                }
                try handle.write(contentsOf: chunk)
                offset += UInt64(chunk.count)
            }
            try handle.synchronize()
            bytes += offset
        }
        let store = self.store
        let verification = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .utility).async { continuation.resume(with: Result { try store.restore(from: staging, as: id) }) }
        }
        logger.notice(
            "installed a snapshot of the primary's ledger",
            metadata: ["ledger.head": "\(verification.manifest?.headSequence ?? 0)", "bytes": "\(bytes)"])
    }

    private func record(lag events: UInt64, of id: String) {
        let worst = progress.withLock { progress in
            progress.lags[id] = events
            return progress.lags.values.max() ?? 0
        }
        lag.record(Int64(clamping: worst))
    }

    /// Why this copy should get no reads yet (`/readyz`); nil once it has read the primary's
    /// list of ledgers and every ledger on it is at most ``caughtUpLag`` events behind.
    public var unreadiness: String? {
        let listed = tails.withLock { $0.scopes.values.allSatisfy(\.listed) }
        let (followed, lags) = progress.withLock { $0 }
        guard listed else { return "the primary's list of ledgers was not read yet" }
        let behind = followed.filter { (lags[$0] ?? .max) > Self.caughtUpLag }.sorted()
        guard let first = behind.first else { return nil }
        let how = lags[first].map { "\($0) events behind" } ?? "not copied yet"
        return "\(behind.count) ledger\(behind.count == 1 ? " is" : "s are") not caught up with the primary (the first, '\(first)', \(how))"
    }
}
