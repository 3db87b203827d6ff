import HealthLedgerRPC
import HealthLedgerSDK
import HealthLedgerServer
import HealthModel
import Ledger
import LedgerSchema
import Logging
import Synchronization
import Testing

/// The one place an error becomes a call's status (`RPCError(mapping:)`), and the cause each
/// status keeps for the server's log.
@Suite("Error mapping")
struct ErrorMappingTests {
    struct Unexpected: Error {}

    @Test("each method is found by its full name, and hashed and compared by its position among all methods")
    func methodsByName() {
        #expect(RPCMethod.allCases.enumerated().allSatisfy { index, method in method.ordinal == index && RPCMethod(named: method.rawValue) == method })
        #expect(Set(RPCMethod.allCases).count == RPCMethod.allCases.count)
        #expect(RPCMethod(named: "healthledger.v1.Ledger/Nothing") == nil && RPCMethod(named: "") == nil)
        #expect(RPCMethod.save != RPCMethod.ping && RPCMethod.save.hashValue == RPCMethod.allCases[1].hashValue)
    }

    @Test("a HealthError keeps its code and message, and is the status's cause")
    func healthError() {
        let status = RPCError(mapping: HealthError(.authorizationDenied, "no sharing of that type"))
        #expect(status.code == .permissionDenied && status.message == "no sharing of that type")
        #expect(status.healthErrorCode == .authorizationDenied)
        #expect((status.cause as? HealthError)?.code == .authorizationDenied)
    }

    @Test("each of HealthKit's codes maps to the status of docs/PROTOCOL.md §8.2; a status number the client does not know reads as unknown")
    func healthCodeTable() {
        let table: [HealthError.Code: RPCStatusCode] = [
            .healthDataUnavailable: .unavailable, .healthDataRestricted: .failedPrecondition, .invalidArgument: .invalidArgument,
            .authorizationDenied: .permissionDenied, .authorizationNotDetermined: .permissionDenied, .databaseInaccessible: .unavailable,
            .userCanceled: .cancelled, .anotherWorkoutSessionStarted: .failedPrecondition, .userExitedWorkoutSession: .failedPrecondition,
            .requiredAuthorizationDenied: .permissionDenied, .noData: .notFound, .workoutActivityNotAllowed: .failedPrecondition,
            .dataSizeExceeded: .resourceExhausted, .backgroundWorkoutSessionNotAllowed: .failedPrecondition,
            .notPermissibleForGuestUserMode: .failedPrecondition,
        ]
        #expect(table.count == 15)
        for (code, status) in table {
            let mapped = RPCError(mapping: HealthError(code, "m"))
            #expect(mapped.code == status && mapped.healthErrorCode == code, "\(code)")
            // On the wire and back, as the SDK reads a status.
            let wire = Healthledger_V1_Frame.status(id: 1, mapped).status
            #expect(wire.healthErrorCode == Int32(code.rawValue) && RPCError(wire) == mapped, "\(code)")
        }
        var unknown = Healthledger_V1_CallStatus()
        unknown.code = .UNRECOGNIZED(99)
        unknown.message = "from a later server"
        #expect(RPCError(unknown)?.code == .unknown && RPCError(unknown)?.message == "from a later server")
    }

    @Test("a ledger failure maps by kind, and keeps the storage error beneath it")
    func ledgerFailure() throws {
        // docs/PROTOCOL.md §8.2, the store's failures.
        let cases: [(LedgerFailure.Kind, RPCStatusCode, HealthError.Code?)] = [
            (.notFound, .notFound, nil), (.alreadyExists, .alreadyExists, nil), (.invalidArgument, .invalidArgument, .invalidArgument),
            (.corrupted, .dataLoss, .databaseInaccessible), (.storage, .unavailable, .databaseInaccessible),
        ]
        for (kind, code, health) in cases {
            let status = RPCError(mapping: LedgerFailure(kind, "what happened"))
            #expect(status.code == code && status.message == "what happened" && status.healthErrorCode == health, "\(kind)")
        }
        let full = LedgerFailure(.storage, "storage failed; nothing was written", cause: Unexpected())
        let status = RPCError(mapping: full)
        #expect(status.healthErrorCode == .databaseInaccessible)
        let cause = try #require(status.cause as? LedgerFailure)
        #expect(cause.cause is Unexpected)
    }

    @Test("anything else is internal and tells the client nothing more; cancellation is cancelled; an RPCError stays as it is")
    func others() {
        let internalError = RPCError(mapping: Unexpected())
        #expect(internalError.code == .internalError && internalError.message == "internal error")
        #expect(internalError.cause is Unexpected)
        #expect(RPCError(mapping: CancellationError()).code == .cancelled)
        let original = RPCError(.resourceExhausted, "too many calls")
        let mapped = RPCError(mapping: original)
        #expect(mapped == original && mapped.cause == nil)
    }

    @Test("two statuses are equal by code, message and HealthKit code, whatever their causes")
    func equality() {
        let left = RPCError(.unavailable, "storage failed", cause: Unexpected())
        let right = RPCError(.unavailable, "storage failed")
        #expect(left == right && left.hashValue == right.hashValue)
        #expect(left != RPCError(.unavailable, "storage failed", healthErrorCode: .databaseInaccessible))
    }

    @Test("a save the disk cannot hold answers UNAVAILABLE with the message only; the server logs the storage error beneath it")
    func storageFailureIsLoggedWithItsCause() async throws {
        let log = CapturedLog()
        let logger = Logger(label: "test") { _ in log }
        try await withTestServer(ledgers: LedgerConfiguration(initialMapSize: 1 << 20, maximumMapSize: 2 << 20), logger: logger) { server in
            let owner = server.client()
            var refusal: RPCError?
            for round in 0..<50 where refusal == nil {
                do {
                    _ = try await owner.save((0..<1000).map { Samples.heartRate(60, at: Double(round * 1000 + $0)) })
                } catch let error as RPCError {
                    refusal = error
                }
            }
            let status = try #require(refusal)
            #expect(status.code == .unavailable && status.healthErrorCode == .databaseInaccessible)
            #expect(status.message == "ledger 'alice' reached its maximum size; nothing was written")
            let line = try #require(log.lines.first { $0.message == "call failed" })
            #expect(line.metadata["rpc.method"] == RPCMethod.save.rawValue)
            #expect(line.metadata["error"]?.contains("MDB_MAP_FULL") == true, "\(line.metadata)")
            await owner.close()
        }
    }
}

/// Log lines kept for a test to read.
final class CapturedLog: LogHandler, @unchecked Sendable {
    struct Line: Sendable {
        var message: String
        var metadata: [String: String]
    }

    private let storage = Mutex<[Line]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    var lines: [Line] { storage.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let line = Line(message: "\(event.message)", metadata: (event.metadata ?? [:]).mapValues { "\($0)" })
        storage.withLock { $0.append(line) }
    }
}
