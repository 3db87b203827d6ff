import Foundation
import GRPCCore
import HealthLedgerRPC
import HealthModel
import LedgerSchema

/// A gRPC call's metadata and message as the `CallRequest` our framing would have carried,
/// so that both transports hand the dispatcher the same thing (docs/PROTOCOL.md §12.2).
enum GRPCCallRequest {
    /// The metadata key of a point-in-time read's sequence (docs/PROTOCOL.md §4.10).
    static let asOfSequenceKey = "healthledger-as-of-sequence"
    /// The metadata key of a point-in-time read's time, in microseconds since 1970.
    static let asOfTimeKey = "healthledger-as-of-time-us"

    /// - Throws: ``HealthLedgerRPC/RPCError`` `invalidArgument` for metadata that does not parse.
    static func make(method: RPCMethod, metadata: GRPCCore.Metadata, payload: [UInt8]) throws -> Healthledger_V1_CallRequest {
        var request = Healthledger_V1_CallRequest()
        request.method = method.rawValue
        request.payload = Data(payload)
        // One pass over the metadata (HTTP/2 sends its names in lowercase); the first value of
        // each name counts.
        var seen: Set<String> = []
        for (key, value) in metadata {
            guard case .string(let text) = value, seen.insert(key).inserted else { continue }
            switch key {
            case "authorization": request.credential = try credential(text)
            case "grpc-timeout": request.timeoutMs = try timeoutMilliseconds(text)
            case asOfSequenceKey:
                guard let sequence = UInt64(text), sequence > 0 else {
                    throw RPCError(.invalidArgument, "\(asOfSequenceKey) must be an event sequence number (1 or more), not '\(text.prefix(40))'")
                }
                request.asOfSequence = sequence
            case asOfTimeKey:
                guard let microseconds = Int64(text) else {
                    throw RPCError(.invalidArgument, "\(asOfTimeKey) must be microseconds since 1970 (a whole number), not '\(text.prefix(40))'")
                }
                request.asOfTimeUs = microseconds
            default: continue
            }
        }
        return request
    }

    /// The credential of `authorization: Bearer <credential>` (without it, the credential is
    /// empty, which the dispatcher refuses as it refuses an empty one over our framing).
    private static func credential(_ value: String) throws -> String {
        if value.hasPrefix("Bearer ") { return String(value.dropFirst(7)) }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw RPCError(.unauthenticated, "the authorization metadata must be 'Bearer <credential>'")
        }
        return String(parts[1]).trimmingCharacters(in: .whitespaces)
    }

    /// `grpc-timeout` in milliseconds (at least 1 for any timeout; 0 when there is none), as
    /// gRPC over HTTP/2 defines it: up to 8 digits and a unit, H M S m u n.
    static func timeoutMilliseconds(_ text: String) throws -> UInt32 {
        guard let unit = text.last, let amount = UInt64(text.dropLast()), text.count >= 2, text.count <= 9 else {
            throw RPCError(.invalidArgument, "grpc-timeout '\(text.prefix(20))' is not up to 8 digits and a unit (H M S m u n)")
        }
        let nanoseconds: UInt64 = switch unit {
        case "H": 3_600_000_000_000
        case "M": 60_000_000_000
        case "S": 1_000_000_000
        case "m": 1_000_000
        case "u": 1_000
        case "n": 1
        default: 0
        }
        guard nanoseconds > 0 else { throw RPCError(.invalidArgument, "grpc-timeout '\(text.prefix(20))' has an unknown unit '\(unit)'") }
        let (total, overflow) = amount.multipliedReportingOverflow(by: nanoseconds)
        let milliseconds = overflow ? UInt64.max : (total + 999_999) / 1_000_000
        return UInt32(clamping: max(milliseconds, 1))
    }
}

/// Our statuses as gRPC's: the same codes (docs/PROTOCOL.md §8), the message, and the
/// HealthKit error code in the trailing metadata's `healthledger-error-code`.
enum GRPCStatus {
    static let healthErrorCodeKey = "healthledger-error-code"
    /// A follower's refusal of a write: where its primary is.
    static let primaryKey = "healthledger-primary"
    /// The server did nothing with the call.
    static let unprocessedKey = "healthledger-unprocessed"

    static func error(_ failure: HealthLedgerRPC.RPCError?) -> GRPCCore.RPCError {
        guard let failure else { return GRPCCore.RPCError(code: .internalError, message: "the call ended with neither a response nor a status") }
        var metadata: GRPCCore.Metadata = [:]
        if let code = failure.healthErrorCode { metadata.addString(String(code.rawValue), forKey: healthErrorCodeKey) }
        if let primary = failure.primary { metadata.addString(primary, forKey: primaryKey) }
        if failure.unprocessed { metadata.addString("1", forKey: unprocessedKey) }
        let code = Status.Code(rawValue: failure.code.rawValue).flatMap { GRPCCore.RPCError.Code($0) } ?? .unknown
        return GRPCCore.RPCError(code: code, message: shortened(failure.message), metadata: metadata)
    }

    /// The longest status message sent: it travels in a header (`grpc-message`, percent-encoded,
    /// up to three bytes a byte), and a client refuses headers past 16 KiB — the real error would
    /// then arrive as `RESOURCE_EXHAUSTED`.
    static let longestMessage = 2_048

    /// `message`, cut at a character boundary to at most ``longestMessage`` bytes of UTF-8.
    static func shortened(_ message: String) -> String {
        guard message.utf8.count > longestMessage else { return message }
        var cut = ""
        for character in message {
            guard cut.utf8.count + character.utf8.count <= longestMessage - 4 else { break }
            cut.append(character)
        }
        return cut + " …"
    }
}
