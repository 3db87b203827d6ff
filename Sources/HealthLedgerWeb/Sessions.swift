import Foundation
import HealthLedgerSDK
import Synchronization

/// A signed-in owner: the ledger, the credential's store (an SDK client of the RPC server,
/// so that every page reads and writes through the same calls as any app), and the token that
/// every form of the session must carry (CSRF).
package struct WebSession: Sendable {
    package let id: String
    package let ledger: String
    package let csrfToken: String
    package let store: HealthStore
    package let started: Date
    package var lastSeen: Date
    /// The id of the sign-in link's credential the session began with: revoked when it ends.
    package var linkCredentialID: String? = nil
}

/// The sessions of the web app, in memory (a restart signs everyone out), and the sign-in
/// throttle. A session ends when its owner signs out, after ``idleLimit`` without a request,
/// or ``lifetime`` after it began, whichever comes first.
package final class WebSessions: Sendable {
    /// How long a session lasts at most.
    package let lifetime: TimeInterval
    /// How long a session lasts without a request.
    package let idleLimit: TimeInterval
    /// Failed sign-ins allowed from one address per ``throttleWindow``.
    package static let failuresAllowed = 5
    package static let throttleWindow: TimeInterval = 60

    private let sessions = Mutex<[String: WebSession]>([:])
    private let failures = Mutex<[String: [Date]]>([:])
    /// What the next page of a session says first (the outcome of the form it posted).
    private let notices = Mutex<[String: String]>([:])
    /// The progress of each session's running import: the fraction of the export read, and
    /// the records read so far.
    private let imports = Mutex<[String: (fraction: Double, records: Int)]>([:])
    /// The sign-in links' credentials used once (by ledger and id).
    private let redeemedLinks = Mutex<Set<String>>([])

    package init(lifetime: TimeInterval = 12 * 3600, idleLimit: TimeInterval = 30 * 60) {
        self.lifetime = lifetime
        self.idleLimit = idleLimit
    }

    /// A new session for `store`, signed in to `ledger` (with a sign-in link's credential,
    /// `linkCredentialID`, revoked when the session ends).
    package func begin(ledger: String, store: HealthStore, linkCredentialID: String? = nil, at now: Date = Date()) -> WebSession {
        var session = WebSession(id: Self.token(), ledger: ledger, csrfToken: Self.token(), store: store, started: now, lastSeen: now)
        session.linkCredentialID = linkCredentialID
        let ended = sessions.withLock { sessions in
            sessions[session.id] = session
            return Self.removeExpired(&sessions, now: now, lifetime: lifetime, idleLimit: idleLimit)
        }
        close(ended)
        return session
    }

    /// The live session with this id, its last request now; nil (and the session ended) when
    /// it expired.
    package func session(_ id: String?, at now: Date = Date()) -> WebSession? {
        guard let id else { return nil }
        let (found, ended): (WebSession?, [WebSession]) = sessions.withLock { sessions in
            let ended = Self.removeExpired(&sessions, now: now, lifetime: lifetime, idleLimit: idleLimit)
            sessions[id]?.lastSeen = now
            return (sessions[id], ended)
        }
        close(ended)
        return found
    }

    /// Ends the session (signing out).
    package func end(_ id: String) {
        close(sessions.withLock { $0.removeValue(forKey: id) }.map { [$0] } ?? [])
    }

    /// Ends every session (the server stops).
    package func endAll() {
        close(sessions.withLock { sessions in
            defer { sessions = [:] }
            return Array(sessions.values)
        })
    }

    package var count: Int { sessions.withLock { $0.count } }

    /// Starts a sign-in attempt from `address`, counted as failed until ``signedIn(from:)``
    /// says otherwise (so that attempts made at once cannot pass the limit together); false
    /// when the address already failed ``failuresAllowed`` times in the last ``throttleWindow``.
    package func beginSignIn(from address: String, at now: Date = Date()) -> Bool {
        failures.withLock { failures in
            // Addresses that stopped trying are forgotten, so the table stays small.
            if failures.count > 10_000 { failures = failures.filter { $0.value.contains { now.timeIntervalSince($0) < Self.throttleWindow } } }
            let recent = (failures[address] ?? []).filter { now.timeIntervalSince($0) < Self.throttleWindow }
            guard recent.count < Self.failuresAllowed else {
                failures[address] = recent
                return false
            }
            failures[address] = recent + [now]
            return true
        }
    }

    /// The attempt begun by ``beginSignIn(from:at:)`` succeeded: it is not a failure.
    package func signedIn(from address: String) {
        failures.withLock { failures in
            failures[address]?.removeLast()
            if failures[address]?.isEmpty == true { failures[address] = nil }
        }
    }

    /// Takes a sign-in link's credential: true the first time, false ever after.
    func redeemLink(ledger: String, credentialID: String) -> Bool {
        redeemedLinks.withLock { $0.insert("\(ledger)\u{0}\(credentialID)").inserted }
    }

    /// Takes back ``redeemLink(ledger:credentialID:)`` when the link's use could not be recorded.
    func forgetLink(ledger: String, credentialID: String) {
        _ = redeemedLinks.withLock { $0.remove("\(ledger)\u{0}\(credentialID)") }
    }

    /// Notes how far the session's import got (nil: it ended).
    func setImportProgress(_ progress: (fraction: Double, records: Int)?, for session: WebSession) {
        imports.withLock { $0[session.id] = progress }
    }

    func importProgress(for session: WebSession) -> (fraction: Double, records: Int)? { imports.withLock { $0[session.id] } }

    /// Sets what the session's next page says first.
    func setNotice(_ text: String, for session: WebSession) { notices.withLock { $0[session.id] = text } }

    /// Takes the session's notice (once).
    func takeNotice(for session: WebSession) -> String? { notices.withLock { $0.removeValue(forKey: session.id) } }

    private static func removeExpired(_ sessions: inout [String: WebSession], now: Date, lifetime: TimeInterval, idleLimit: TimeInterval) -> [WebSession] {
        let expired = sessions.values.filter { now.timeIntervalSince($0.started) >= lifetime || now.timeIntervalSince($0.lastSeen) >= idleLimit }
        for session in expired { sessions.removeValue(forKey: session.id) }
        return expired
    }

    private func close(_ ended: [WebSession]) {
        guard !ended.isEmpty else { return }
        notices.withLock { notices in for session in ended { notices.removeValue(forKey: session.id) } }
        Task {
            for session in ended {
                // A sign-in link works for one session: its credential goes with it.
                if let id = session.linkCredentialID { try? await session.store.revokeCredential(id: id) }
                await session.store.close()
            }
        }
    }

    /// 32 random bytes, base64url: a session id or a CSRF token.
    static func token() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
