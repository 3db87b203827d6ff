import HealthLedgerRPC
import Synchronization

/// What one credential may use at once, so that one app cannot starve the others: calls
/// running together (over every connection and both transports) and writes per second.
/// Counted per process, by credential id.
final class CredentialLimits: Sendable {
    /// The one table of the process: a credential's calls count together whichever
    /// transport and connection carries them.
    static let shared = CredentialLimits()

    private struct Usage {
        var running = 0
        /// Writes it may still make now (a bucket refilled at the limit's rate, holding a
        /// second's worth at most).
        var tokens: Double
        var refilled: ContinuousClock.Instant
    }

    private let usage = Mutex<[String: Usage]>([:])

    /// Admits a call of `credential` (a ledger id and a credential id), or refuses it with
    /// `resourceExhausted` naming the limit it would pass. Every admitted call is ended with
    /// ``end(_:)``.
    func admit(_ credential: String, writes: Bool, configuration: ServerConfiguration) throws {
        let calls = configuration.maximumCallsPerCredential
        let rate = configuration.maximumWritesPerSecond
        try usage.withLock { table in
            // Changed in place: one look-up of the key.
            try Self.admit(&table[credential, default: Usage(tokens: Double(rate), refilled: .now)], calls: calls, rate: rate, writes: writes)
        }
    }

    /// Counts a call in `entry`, or throws why not (a refused write still refills the bucket).
    private static func admit(_ entry: inout Usage, calls: Int, rate: Int, writes: Bool) throws {
        guard entry.running < calls else {
            throw RPCError(
                .resourceExhausted,
                "this credential has \(calls) calls running, its limit (--max-calls-per-credential): wait for one to end")
        }
        if writes, rate > 0 {
            let now = ContinuousClock.now
            let elapsed = now - entry.refilled
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            entry.tokens = min(Double(rate), entry.tokens + seconds * Double(rate))
            entry.refilled = now
            guard entry.tokens >= 1 else {
                let wait = Int(((1 - entry.tokens) / Double(rate) * 1000).rounded(.up))
                throw RPCError(
                    .resourceExhausted,
                    "this credential made \(rate == 1 ? "1 write" : "\(rate) writes") in the last second, its limit (--max-writes-per-second): retry in \(wait) ms")
            }
            entry.tokens -= 1
        }
        entry.running += 1
    }

    /// Ends a call ``admit(_:writes:configuration:)`` admitted.
    func end(_ credential: String) {
        usage.withLock { table in
            guard let index = table.index(forKey: credential) else { return }
            table.values[index].running -= 1
            // Idle, its bucket is as good as full again after a second: forget it.
            if table.values[index].running == 0, ContinuousClock.now - table.values[index].refilled > .seconds(1) { table.remove(at: index) }
        }
    }
}
