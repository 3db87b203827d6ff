import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf

/// The operator's methods, for a store whose credential is an operator credential
/// (`hl1:_operator:<id>:<secret>`, from `healthledger admin issue-operator-credential`):
/// ledgers and their credentials, never health data.
extension HealthStore {
    /// Creates a ledger; a random id when `id` is nil. Returns its id.
    public func createLedger(id: String? = nil, displayName: String = "") async throws -> String {
        let request = Healthledger_V1_CreateLedgerRequest.with {
            $0.ledgerID = id ?? ""
            $0.displayName = displayName
        }
        return try Self.decode(Healthledger_V1_LedgerList.self, try await unary(.createLedger, request)).ledgerIds.first ?? ""
    }

    /// Erases ledger `id` whole, for a person who leaves: its streams end, and once its calls
    /// are done its data is overwritten and removed, on the server and its followers; `reason`
    /// (at most 1,000 bytes) is kept in the server's erasure journal. The id is not used again.
    ///
    /// - Throws: ``RPCError`` `notFound`; `failedPrecondition` under a legal hold; `unavailable`
    ///   when the ledger was still in use after ten seconds (nothing was erased).
    public func eraseLedger(_ id: String, reason: String = "") async throws {
        let request = Healthledger_V1_EraseLedgerRequest.with {
            $0.ledgerID = id
            $0.reason = reason
        }
        _ = try await unary(.eraseLedger, request)
    }

    /// The ids of the server's ledgers, sorted.
    public func ledgers() async throws -> [String] {
        try Self.decode(Healthledger_V1_LedgerList.self, try await unary(.listLedgers, Healthledger_V1_Empty())).ledgerIds
    }

    /// Issues the owner (`.owner`) or an app (`.app(source)`) of `ledger` a credential,
    /// returned once: only its hash is kept.
    ///
    /// - Parameter lifetime: how long it authenticates (at most ten years, rounded down to
    ///   whole seconds); after it, its calls are refused with `UNAUTHENTICATED` "credential expired".
    public func issueCredential(ledger: String, for principal: Principal, label: String = "", lifetime: CredentialLifetime = .unlimited) async throws -> String {
        let request = Healthledger_V1_IssueCredentialRequest.with {
            $0.ledgerID = ledger
            $0.principal = principal.schema
            $0.label = label
            $0.expiresInSeconds = Self.seconds(lifetime)
        }
        return try Self.decode(Healthledger_V1_IssuedCredential.self, try await unary(.issueCredential, request)).credential
    }

    /// Rotates a credential of `ledger`: a new credential for the same principal, returned
    /// once; the old one keeps working for `grace` (whole seconds, at most a year), then is refused.
    ///
    /// - Parameter lifetime: the new credential's; nil: the old one's lifetime.
    public func rotateCredential(ledger: String, id: String, grace: Duration, lifetime: CredentialLifetime? = nil) async throws -> String {
        let request = Healthledger_V1_RotateCredentialRequest.with {
            $0.ledgerID = ledger
            $0.credentialID = id
            $0.graceSeconds = Self.wholeSeconds(grace)
            if let lifetime { $0.expiresInSeconds = Self.seconds(lifetime) }
        }
        return try Self.decode(Healthledger_V1_IssuedCredential.self, try await unary(.rotateCredential, request)).credential
    }

    /// Revokes a credential of `ledger` by id: its next call is refused and its streams end
    /// (after `effectiveIn`, whole seconds up to a year, when given: it works until then).
    public func revokeCredential(ledger: String, id: String, effectiveIn: Duration = .zero) async throws {
        _ = try await unary(.revokeCredential, Healthledger_V1_LedgerCredentialRequest.with {
            $0.ledgerID = ledger
            $0.credentialID = id
            $0.effectiveInSeconds = Self.wholeSeconds(effectiveIn)
        })
    }

    /// The credentials of `ledger`, in id order.
    public func credentials(ledger: String) async throws -> [CredentialInfo] {
        Self.credentials(try Self.decode(
            Healthledger_V1_CredentialList.self, try await unary(.listCredentials, Healthledger_V1_LedgerCredentialRequest.with { $0.ledgerID = ledger })))
    }

    /// A lifetime in a request's whole seconds (0: unlimited; a lifetime under a second is one).
    private static func seconds(_ lifetime: CredentialLifetime) -> UInt64 {
        guard case .expiring(let duration) = lifetime else { return 0 }
        return UInt64(max(duration.components.seconds, 1))
    }

    static func credentials(_ list: Healthledger_V1_CredentialList) -> [CredentialInfo] {
        func date(_ microseconds: Int64) -> Date? { microseconds == 0 ? nil : Date(timeIntervalSince1970: Double(microseconds) / 1e6) }
        return list.credentials.map { entry in
            CredentialInfo(
                id: entry.id, principal: Principal(entry.principal), label: entry.label, issued: date(entry.issuedUs), expires: date(entry.expiresUs),
                revocation: entry.revoked || entry.revokedUs != 0 ? date(entry.revokedUs) ?? .distantPast : nil, replacedBy: entry.replacedBy)
        }
    }
}

/// The owner's view of the ledger's credentials.
extension HealthStore {
    /// Every credential of the owner's ledger: the owner's and the apps', with their labels,
    /// issue and expiry times and revocations (owner only).
    public func credentials() async throws -> [CredentialInfo] {
        Self.credentials(try Self.decode(Healthledger_V1_CredentialList.self, try await unary(.ledgerCredentials, Healthledger_V1_Empty())))
    }

    /// Revokes one of the ledger's credentials by id (owner only): its next call is
    /// refused and its streams end; recorded in the audit trail as the owner's.
    ///
    /// - Parameter effectiveIn: when the revocation takes effect (whole seconds, at most a
    ///   year; zero: at once): the credential works until then, and ``credentials()`` shows
    ///   the time it will be refused from.
    public func revokeCredential(id: String, effectiveIn: Duration = .zero) async throws {
        _ = try await unary(
            .revokeLedgerCredential,
            Healthledger_V1_LedgerCredentialRequest.with {
                $0.credentialID = id
                $0.effectiveInSeconds = Self.wholeSeconds(effectiveIn)
            })
    }

    /// `duration` in whole seconds, a part of one counting as one (never less than asked).
    static func wholeSeconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) + (attoseconds > 0 ? 1 : 0)
    }
}

/// Replication (docs/PROTOCOL.md §7.18), for a follower: its primary's log and snapshots,
/// with an operator credential of the primary.
extension HealthStore {
    /// The events of `ledger` after the follower's head (`sequence`, `hash`), waiting up to
    /// `wait` for one when there is none yet; the call acknowledges the head as durable.
    package func fetchLog(
        ledger: String, after sequence: UInt64, hash: [UInt8], maximumEvents: Int = 0, wait: Duration, follower: String, epoch: UInt64 = 0
    ) async throws -> (events: [[UInt8]], headSequence: UInt64, legalHold: String?) {
        let request = Healthledger_V1_FetchLogRequest.with {
            $0.ledgerID = ledger
            $0.afterSequence = sequence
            $0.afterHash = Data(hash)
            $0.maxEvents = UInt32(clamping: maximumEvents)
            $0.waitMs = UInt32(clamping: wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
            $0.followerID = follower
            $0.epoch = epoch
        }
        let response = try Self.decode(Healthledger_V1_FetchLogResponse.self, try await unary(.fetchLog, request))
        return (response.events.map { Array($0) }, response.headSequence, response.legalHold ? response.legalHoldReason : nil)
    }

    /// Hands the primary the access records of the reads this follower answered on `ledger`
    /// (at most ``Ledger/maximumForwardedAccessRecords``); returns how many were new to it.
    package func forwardAccessRecords(ledger: String, _ records: [ForwardedAccessRecord], follower: String, epoch: UInt64 = 0) async throws -> Int {
        let request = Healthledger_V1_ForwardAccessRecordsRequest.with {
            $0.ledgerID = ledger
            $0.followerID = follower
            $0.epoch = epoch
            $0.records = records.map(Healthledger_V1_ForwardedAccessRecord.init)
        }
        return Int(try Self.decode(Healthledger_V1_ForwardAccessRecordsResponse.self, try await unary(.forwardAccessRecords, request)).kept)
    }

    /// The access records the primary holds of `ledger` in their order of arrival there,
    /// after place `after` holding `afterKey` (the last page's end; 0 and empty: from the first).
    package func fetchAccessRecords(
        ledger: String, after: UInt64, afterKey: [UInt8], limit: Int = 0, follower: String, epoch: UInt64 = 0
    ) async throws -> AccessFeedPage {
        let request = Healthledger_V1_FetchAccessRecordsRequest.with {
            $0.ledgerID = ledger
            $0.followerID = follower
            $0.epoch = epoch
            $0.after = after
            $0.afterKey = Data(afterKey)
            $0.limit = UInt32(clamping: max(limit, 0))
        }
        let response = try Self.decode(Healthledger_V1_FetchAccessRecordsResponse.self, try await unary(.fetchAccessRecords, request))
        return AccessFeedPage(
            records: response.records.map(ForwardedAccessRecord.init), next: response.next, nextKey: Array(response.nextKey),
            hasMore: response.hasMore_p, restarted: response.restarted)
    }

    /// A placement group a cluster's follower watches (docs/PROTOCOL.md §7.19): the epoch of
    /// its primary, the cursor of the last answer that named it (empty: none, the answer lists
    /// every ledger of it), and the last such answer the follower applied in full.
    package struct WatchedGroup: Sendable, Hashable {
        package var group: Int
        package var epoch: UInt64
        package var cursor: [UInt8]
        package var applied: [UInt8]

        package init(group: Int, epoch: UInt64, cursor: [UInt8] = [], applied: [UInt8] = []) {
            (self.group, self.epoch, self.cursor, self.applied) = (group, epoch, cursor, applied)
        }
    }

    /// Which of the primary's ledgers changed after `cursor` (empty: every one), waiting up
    /// to `wait` for a change when there is none yet; `applied` is the last answer's cursor
    /// whose every ledger the follower has fetched since. In a cluster, `cursor` and `applied`
    /// are empty and each of `groups` carries its own.
    ///
    /// - Returns: the ledgers changed, each with its head then; those listed, to be checked
    ///   one by one (every ledger, or every one of a group whose cursor was of no use); those
    ///   erased whole, changed or among those listed; and the answer's cursor.
    package func watchLedgers(
        cursor: [UInt8] = [], applied: [UInt8] = [], wait: Duration, follower: String, groups: [WatchedGroup] = []
    ) async throws -> (changed: [(id: String, head: UInt64)], listed: [String], erased: [String], cursor: [UInt8]) {
        let request = Healthledger_V1_WatchLedgersRequest.with {
            $0.followerID = follower
            $0.cursor = Data(cursor)
            $0.applied = Data(applied)
            $0.waitMs = UInt32(clamping: wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
            $0.groups = groups.map { watched in
                .with {
                    ($0.group, $0.epoch) = (UInt32(watched.group), watched.epoch)
                    ($0.cursor, $0.applied) = (Data(watched.cursor), Data(watched.applied))
                }
            }
        }
        let response = try Self.decode(Healthledger_V1_WatchLedgersResponse.self, try await unary(.watchLedgers, request))
        if response.everything { return ([], response.ledgerIds, response.erasedLedgerIds, Array(response.cursor)) }
        guard response.headSequences.count == response.ledgerIds.count else {
            throw RPCError(.internalError, "the primary's watch answer has \(response.ledgerIds.count) ledgers and \(response.headSequences.count) heads")
        }
        return (
            Array(zip(response.ledgerIds, response.headSequences).map { ($0, $1) }), response.listedLedgerIds, response.erasedLedgerIds,
            Array(response.cursor)
        )
    }

    /// The cluster on etcd as the member the store is connected to sees it (an operator's
    /// call): its standing, each placement group's primary, epoch and synchronous standby,
    /// the members and the groups each leads, and each open ledger's head there (on its
    /// primary, with each follower's progress).
    ///
    /// - Throws: ``RPCError`` `invalidArgument` from a server outside any cluster.
    public func clusterStatus() async throws -> ClusterStatus {
        ClusterStatus(try Self.decode(Healthledger_V1_ClusterStatusResponse.self, try await unary(.clusterStatus, Healthledger_V1_Empty())))
    }

    /// Takes a snapshot of `ledger`, reads a file of one, or releases one.
    package func fetchSnapshot(_ request: Healthledger_V1_FetchSnapshotRequest) async throws -> Healthledger_V1_FetchSnapshotResponse {
        try Self.decode(Healthledger_V1_FetchSnapshotResponse.self, try await unary(.fetchSnapshot, request))
    }
}

/// A cluster on etcd as one member sees it (``HealthStore/clusterStatus()``).
public struct ClusterStatus: Sendable, Hashable {
    public struct Member: Sendable, Hashable {
        public var node: String
        /// Where its RPC port is reached, `HOST:PORT`.
        public var address: String
        /// The placement groups it leads.
        public var leads: [Int]
        /// On a primary, for a follower: whether it watches the primary's ledgers, and how
        /// many of the primary's changes it has not applied in full yet.
        public var watching: Bool
        public var changesBehind: UInt64
    }

    /// A placement group: the ledgers whose ids hash to it share a primary.
    public struct Group: Sendable, Hashable {
        public var group: Int
        /// Its primary (nil while one is elected), its address and fencing epoch.
        public var leader: String?
        public var leaderAddress: String?
        public var epoch: UInt64
        /// The synchronous standby named on etcd, and one being made it.
        public var standby: String?
        public var pendingStandby: String?
        /// The member the placement gives it to.
        public var placedOn: String?
        /// The members that keep its ledgers (``placedOn`` first): they follow its primary.
        public var keepers: [String]
        /// Its ledgers on the member answering.
        public var ledgerCount: UInt64
    }

    /// A follower of a ledger, as its primary knows it.
    public struct Follower: Sendable, Hashable {
        public var node: String
        /// Every event up to this one is durable on it.
        public var acknowledgedSequence: UInt64
        /// Fetching, or heard from within the follower window.
        public var connected: Bool
    }

    public struct LedgerStatus: Sendable, Hashable {
        public var id: String
        /// Its last event on the member answering.
        public var headSequence: UInt64
        /// On its primary: each of its followers.
        public var followers: [Follower]
    }

    public var cluster: String
    /// The member answering, and its standing: `leader` (it leads every placement group),
    /// `primary` (some), `follower` (none) or `electing` (it knows no group's primary).
    public var node: String
    public var role: String
    /// Every placement group, in order.
    public var groups: [Group]
    public var members: [Member]
    /// The ledgers open on the member answering (in use lately).
    public var ledgers: [LedgerStatus]
    /// Every ledger the member holds.
    public var ledgerCount: UInt64

    /// The placement group of ledger `id` (its primary, standby and epoch).
    public func group(of id: String) -> Group { groups[Placement.group(of: id)] }

    init(_ status: Healthledger_V1_ClusterStatusResponse) {
        func present(_ text: String) -> String? { text.isEmpty ? nil : text }
        cluster = status.cluster
        node = status.node
        role = status.role
        groups = status.groups.map {
            Group(
                group: Int($0.group), leader: present($0.leader), leaderAddress: present($0.leaderAddress), epoch: $0.epoch,
                standby: present($0.standby), pendingStandby: present($0.pendingStandby), placedOn: present($0.placedOn), keepers: $0.keepers,
                ledgerCount: $0.ledgerCount)
        }
        members = status.members.map {
            Member(node: $0.node, address: $0.address, leads: $0.leads.map(Int.init), watching: $0.watching, changesBehind: $0.changesBehind)
        }
        ledgerCount = status.ledgerCount
        ledgers = status.ledgers.map { ledger in
            LedgerStatus(
                id: ledger.ledgerID, headSequence: ledger.headSequence,
                followers: ledger.followers.map { Follower(node: $0.node, acknowledgedSequence: $0.acknowledgedSequence, connected: $0.connected) })
        }
    }
}
