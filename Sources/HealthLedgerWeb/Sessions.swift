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

    package init(lifetime: TimeInterval = 12 * 3600, idleLimit: TimeInterval = 30 * 60) {
        self.lifetime = lifetime
        self.idleLimit = idleLimit
    }

    /// A new session for `store`, signed in to `ledger`.
    package func begin(ledger: String, store: HealthStore, at now: Date = Date()) -> WebSession {
        let session = WebSession(id: Self.token(), ledger: ledger, csrfToken: Self.token(), store: store, started: now, lastSeen: now)
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

    /// Whether `address` may try to sign in now (fewer than ``failuresAllowed`` failures in
    /// the last ``throttleWindow``).
    package func maySignIn(from address: String, at now: Date = Date()) -> Bool {
        failures.withLock { failures in
            let recent = (failures[address] ?? []).filter { now.timeIntervalSince($0) < Self.throttleWindow }
            failures[address] = recent.isEmpty ? nil : recent
            return recent.count < Self.failuresAllowed
        }
    }

    package func failedSignIn(from address: String, at now: Date = Date()) {
        failures.withLock { $0[address, default: []].append(now) }
    }

    private static func removeExpired(_ sessions: inout [String: WebSession], now: Date, lifetime: TimeInterval, idleLimit: TimeInterval) -> [WebSession] {
        let expired = sessions.values.filter { now.timeIntervalSince($0.started) >= lifetime || now.timeIntervalSince($0.lastSeen) >= idleLimit }
        for session in expired { sessions.removeValue(forKey: session.id) }
        return expired
    }

    private func close(_ ended: [WebSession]) {
        guard !ended.isEmpty else { return }
        Task { for session in ended { await session.store.close() } }
    }

    /// 32 random bytes, base64url: a session id or a CSRF token.
    static func token() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
