import Foundation
import HealthModel

/// Credential lifetimes and listings, shared by `admin` (the operator) and `auth` (the owner).
enum CredentialText {
    /// A duration written `<n><unit>`, unit `s`, `m`, `h`, `d` or `w` (`90d`, `12h`); `0` alone is zero.
    static func duration(_ text: String, _ option: String) throws -> Duration {
        if text == "0" { return .zero }
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        guard let unit = text.last.flatMap({ units[$0] }), text.dropLast().allSatisfy(\.isASCII), text.dropLast().allSatisfy(\.isNumber), !text.dropLast().isEmpty else {
            throw ValidationErrorExit("\(option) '\(text)' is not a duration: a whole number and s, m, h, d or w (90d, 12h, 30m)")
        }
        guard let count = Int64(text.dropLast()), count <= 100_000 * 86_400 / unit else {
            throw ValidationErrorExit("\(option) '\(text)' is longer than 100,000 days")
        }
        return .seconds(count * unit)
    }

    /// `--expires-in`: a duration, or `never`.
    static func lifetime(_ text: String?, _ option: String = "--expires-in") throws -> CredentialLifetime? {
        guard let text else { return nil }
        if text == "never" { return .unlimited }
        let duration = try duration(text, option)
        guard duration > .zero else { throw ValidationErrorExit("\(option) must be longer than 0 s (or 'never')") }
        guard duration <= CredentialLifetime.maximum else { throw ValidationErrorExit("\(option) is at most 3650d, got \(text)") }
        return .expiring(after: duration)
    }

    /// One line per credential: id, principal, state, label.
    static func lines(_ credentials: [CredentialInfo], now: Date = Date()) -> [String] {
        credentials.map { credential in
            var line = "\(credential.id)\t\(credential.principal)\t\(state(of: credential, now: now))"
            if !credential.label.isEmpty { line += "\t\(credential.label)" }
            return line
        }
    }

    /// Prints that `id` was revoked, and with a `delay` the time it is refused from, as the
    /// ledger's listing (`credentials`) records it.
    /// - Throws: when a delay was asked and the credential is refused already (a server from
    ///   before delayed revocations revokes at once).
    static func printRevoked(_ id: String, delay: Duration, in credentials: [CredentialInfo]) throws {
        guard delay > .zero else { return print("revoked \(id)") }
        guard let from = credentials.first(where: { $0.id == id })?.revocation, from > Date() else {
            throw ValidationErrorExit("credential \(id) was revoked at once: the server does not know --after (a version before it)")
        }
        print("revoked \(id), from \(from.formatted(.iso8601))")
    }

    /// "active", "active until T", "expired T", "revoked T", "rotated: works until T (then X)", …
    static func state(of credential: CredentialInfo, now: Date) -> String {
        func time(_ date: Date) -> String { date.formatted(.iso8601) }
        switch credential.refusal(at: now) {
        case .expired(let at)?: return "expired \(time(at))"
        case .revoked(let at, let replacedBy)?:
            let when = at.map { " \(time($0))" } ?? ""
            return replacedBy.isEmpty ? "revoked\(when)" : "rotated\(when) (replaced by \(replacedBy))"
        case .unknown?: return "unknown"
        case nil:
            if let revocation = credential.revocation {
                let end = credential.expires.map { min($0, revocation) } ?? revocation
                return credential.replacedBy.isEmpty
                    ? "active until \(time(end)) (revocation recorded for \(time(revocation)))"
                    : "active until \(time(end)) (rotated: replaced by \(credential.replacedBy))"
            }
            return credential.expires.map { "active until \(time($0))" } ?? "active"
        }
    }
}
