import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import Synchronization

/// Ends a stream with `permissionDenied` the moment its caller loses access the stream
/// relied on: a read grant revoked, a selected object deselected, or the credential
/// revoked (docs/SEMANTICS.md §6: revocation is immediate); with `unauthenticated` when
/// its credential expires; and with `notFound` when the ledger is erased whole.
///
/// The reference is the scope the stream's read actually ran with, so a grant given and
/// taken back while the stream starts cannot slip through. Streams that read only the
/// caller's own objects rely on no grant and keep running.
final class StreamAccess: Sendable {
    private struct State {
        /// The scope of each type the stream's snapshot read, once the read took it.
        var used: [ObjectType: ReadScope] = [:]
        /// An authorization change for this app arrived that no read has checked yet.
        var changed = false
        var revoked = false
        /// The ledger is being erased whole.
        var erased = false
        /// This server's copy of the ledger is being removed (others keep it).
        var released = false
        /// Why the credential stopped authenticating, when that ended the stream.
        var refusal: CredentialRefusal?
        var task: Task<Void, any Error>?
        /// Wakes when the credential's expiry or rotation grace period ends.
        var credentialTimer: Task<Void, any Error>?
    }

    private let ledger: Ledger
    private let principal: Principal
    private let types: [ObjectType]
    private let credentialID: String
    /// When the credential stopped authenticating as the call began (nil: not before a revocation).
    private let credentialEnd: Date?
    private let state = Mutex(State())

    /// - Parameter live: the ledger itself, whose changes the stream answers to (the call may
    ///   read a point-in-time view of it, which an app reads as it may read the ledger now).
    init(_ call: LedgerCall, live: Ledger, types: [ObjectType]) {
        ledger = live
        principal = call.principal
        self.types = types
        credentialID = call.credentialID
        credentialEnd = call.credentialEnd
    }

    /// Runs `body` in a task of its own that a revocation cancels; then throws
    /// `permissionDenied` if that is why it ended.
    func run(_ body: @escaping @Sendable () async throws -> Void) async throws {
        let token = ledger.accessWatchers.add { [self] change in changed(change) }
        defer { ledger.accessWatchers.remove(token) }
        // Begun after the erasure was announced: it ends at once.
        if ledger.isBeingErased { changed(ledger.isBeingReleased ? .copyReleased : .ledgerErased) }
        let work = Task { try await body() }
        let revokedAlready = state.withLock { state in
            state.task = work
            return state.revoked
        }
        if revokedAlready { work.cancel() }
        if let credentialEnd { wake(at: credentialEnd) }
        defer { state.withLock { $0.credentialTimer }?.cancel() }
        do {
            try await withTaskCancellationHandler { try await work.value } onCancel: { work.cancel() }
        } catch {
            // A stream that had sent everything before a revocation ends normally.
            let (revoked, refusal, erased, released) = state.withLock { ($0.revoked, $0.refusal, $0.erased, $0.released) }
            if released {
                throw RPCError(
                    .unavailable, "this server no longer keeps ledger '\(ledger.id)' (other members of the cluster do): open the stream again")
            }
            if erased { throw RPCError(.notFound, "ledger '\(ledger.id)' is being erased") }
            if let refusal, case .expired = refusal { throw RPCError(.unauthenticated, refusal.description) }
            if revoked {
                throw RPCError(
                    .permissionDenied, "access to \(types.map(\.identifier).joined(separator: ", ")) was revoked", healthErrorCode: .authorizationDenied)
            }
            throw error
        }
    }

    /// Ends the stream if its credential no longer authenticates, or wakes when it stops:
    /// at its expiry, or when a rotation's grace period ends.
    private func watchCredential() {
        guard let credential = try? ledger.credential(id: credentialID) else { return }
        if let refusal = credential.refusal() {
            state.withLock { $0.refusal = refusal }
            return revoke()
        }
        if let end = credential.end { wake(at: end) }
    }

    /// Checks the credential again at `end`.
    private func wake(at end: Date) {
        let timer = Task { [self] in
            try await Task.sleep(for: .milliseconds(max(Int64(end.timeIntervalSinceNow * 1000), 0) + 1))
            watchCredential()
        }
        state.withLock { state in
            state.credentialTimer?.cancel()
            state.credentialTimer = timer
        }
    }

    /// Called by each read of the stream with the scope of its snapshot. A long-running
    /// stream reads again and again: one that read with a grant and now reads without it
    /// ends, even if its read saw the narrower scope before the change was announced.
    @Sendable func scanned(with scope: ReadScope) {
        guard let type = types.first(where: { $0.code == scope.typeCode }) else { return }
        let (recheck, narrowed) = state.withLock { state in
            let narrowed = state.used[type]?.isNarrowed(by: scope) ?? false
            if !narrowed { state.used[type] = scope }
            // A change announced before this read is checked once; later ones check themselves.
            defer { state.changed = false }
            return (state.changed, narrowed)
        }
        if narrowed { return revoke() }
        if recheck { check() }
    }

    private func changed(_ change: AccessChange) {
        switch change {
        case .ledgerErased:
            state.withLock { $0.erased = true }
            revoke()
        case .copyReleased:
            state.withLock { $0.released = true }
            revoke()
        case .credentialRevoked(let id):
            // A rotation's revocation takes effect when its grace period ends.
            if id == credentialID { watchCredential() }
        case .authorization(let app):
            guard case .app(let source) = principal, source.bundleIdentifier == app else { return }
            let ready = state.withLock { state in
                state.changed = true
                return !state.used.isEmpty
            }
            if ready { check() }
        }
    }

    /// Compares the scopes the stream used with the current ones.
    private func check() {
        for (type, used) in state.withLock({ $0.used }) {
            guard let current = try? ledger.readScope(of: type, for: principal) else { return revoke() }
            if used.isNarrowed(by: current) { return revoke() }
        }
    }

    private func revoke() {
        let task = state.withLock { state in
            state.revoked = true
            return state.task
        }
        task?.cancel()
    }
}
