import Foundation

/// A bearer credential's public part, as listed to the owner or operator.
public struct CredentialInfo: Sendable, Hashable {
    /// 16 hex digits; also inside the credential string.
    public var id: String
    public var principal: Principal
    public var label: String = ""
    /// Nil for credentials issued before issue times were kept.
    public var issued: Date?
    /// Nil: it does not expire.
    public var expires: Date?
    /// When its revocation took or takes effect (a rotated credential's grace period ends
    /// then); nil: not revoked. `Date.distantPast` for a revocation from before revocations
    /// had times.
    public var revocation: Date?
    /// A rotated credential: the id of the one that replaced it.
    public var replacedBy: String = ""

    public init(
        id: String, principal: Principal, label: String = "", issued: Date? = nil, expires: Date? = nil, revocation: Date? = nil,
        replacedBy: String = ""
    ) {
        self.id = id
        self.principal = principal
        self.label = label
        self.issued = issued
        self.expires = expires
        self.revocation = revocation
        self.replacedBy = replacedBy
    }

    /// Why it is refused at `now`, or nil while it authenticates.
    public func refusal(at now: Date = Date()) -> CredentialRefusal? {
        if let revocation, revocation <= now, revocation <= expires ?? .distantFuture {
            return .revoked(at: revocation == .distantPast ? nil : revocation, replacedBy: replacedBy)
        }
        if let expires, expires <= now { return .expired(at: expires) }
        return nil
    }

    /// When it stops authenticating (its expiry or its revocation, whichever comes first);
    /// nil when neither is set.
    public var end: Date? {
        switch (expires, revocation) {
        case (let expires?, let revocation?): min(expires, revocation)
        case (let expires, let revocation): expires ?? revocation
        }
    }
}

/// Why a credential string does not authenticate. Only the holder of the secret learns
/// more than ``unknown``: a wrong secret, an unknown id and an unknown ledger all read
/// the same.
public enum CredentialRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not a credential string, an unknown ledger or id, or a wrong secret.
    case unknown
    case expired(at: Date)
    /// `at` is nil for a revocation from before revocations had times; `replacedBy` names
    /// the credential of a rotation (empty for a plain revocation).
    case revoked(at: Date?, replacedBy: String)

    public var description: String {
        switch self {
        case .unknown:
            return "the credential is invalid or unknown"
        case .expired(let time):
            return "credential expired at \(Self.format(time)); ask the operator for a new one"
        case .revoked(let time, let replacedBy) where !replacedBy.isEmpty:
            return "credential was rotated (replaced by \(replacedBy)) and is refused since \(time.map(Self.format) ?? "its grace period ended")"
        case .revoked(let time, _):
            return "credential revoked\(time.map { " at \(Self.format($0))" } ?? "")"
        }
    }

    private static func format(_ date: Date) -> String { date.formatted(.iso8601) }
}

/// How long a credential authenticates.
public enum CredentialLifetime: Sendable, Hashable {
    case unlimited
    /// At most ``CredentialLifetime/maximum``.
    case expiring(after: Duration)

    /// The longest lifetime a credential may be given: ten years.
    public static let maximum = Duration.seconds(3650 * 86_400)
    /// The longest grace period of a rotation: a year.
    public static let maximumGrace = Duration.seconds(365 * 86_400)

    /// Microseconds; 0 for unlimited.
    package func microseconds(field: String) throws -> Int64 {
        guard case .expiring(let duration) = self else { return 0 }
        guard duration > .zero, duration <= Self.maximum else {
            throw HealthError.invalidArgument("a credential's lifetime is more than 0 s and at most 3650 days, got \(duration)", field: field)
        }
        return duration.microseconds
    }
}

extension Duration {
    /// Whole microseconds, rounded down.
    package var microseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }
}

extension CredentialInfo {
    /// The label of an owner credential made for a one-time sign-in link to the web app
    /// (`healthledger admin sign-in-link`): the web app signs in with it once, and revokes it
    /// when that session ends.
    public static let webSignInLinkLabel = "web sign-in link"
}
