import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// The `healthledger.v1.Ledger` methods for one authenticated call: decode the request,
/// run it on the ledger as the caller, encode the response.
struct LedgerCall: Sendable {
    let ledger: Ledger
    let principal: Principal
    let payload: [UInt8]

    private func decode<M: SwiftProtobuf.Message>(_ type: M.Type) throws -> M {
        do {
            return try M(serializedBytes: payload)
        } catch {
            throw RPCError(.invalidArgument, "the request is not a valid \(M.protoMessageName)", healthErrorCode: .invalidArgument)
        }
    }

    func ping() async throws -> [UInt8] {
        let request = try decode(Healthledger_V1_PingRequest.self)
        var response = Healthledger_V1_PingResponse()
        response.data = request.data
        response.ledgerID = ledger.id
        response.principal = "\(principal)"
        return try response.serializedBytes()
    }

    func save() async throws -> [UInt8] {
        let request = try decode(Healthledger_V1_SaveRequest.self)
        let objects = try request.objects.enumerated().map { index, object in
            do {
                return try object.model()
            } catch var error as HealthError {
                error.message = "object \(index): \(error.message)"
                throw error
            }
        }
        let results = try await ledger.save(objects, by: principal)
        var response = Healthledger_V1_SaveResponse()
        response.outcomes = results.map(Healthledger_V1_SaveOutcome.init)
        return try response.serializedBytes()
    }

    func delete() async throws -> [UInt8] {
        let request = try decode(Healthledger_V1_DeleteRequest.self)
        let uuids = try request.uuids.map { bytes in
            guard let uuid = UUID(bytes: bytes) else { throw HealthError.invalidArgument("a UUID must be 16 bytes", field: "uuids") }
            return uuid
        }
        var response = Healthledger_V1_DeleteResponse()
        response.deleted = UInt64(try await ledger.delete(uuids, by: principal))
        return try response.serializedBytes()
    }

    func deleteObjects() async throws -> [UInt8] {
        let request = try decode(Healthledger_V1_DeleteObjectsRequest.self)
        let type = try ObjectType(request.type)
        let interval = try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil)
        var response = Healthledger_V1_DeleteResponse()
        response.deleted = UInt64(try await ledger.deleteObjects(of: type, overlapping: interval, by: principal))
        return try response.serializedBytes()
    }

    func fetch() throws -> [UInt8] {
        let request = try decode(Healthledger_V1_FetchRequest.self)
        guard let uuid = UUID(bytes: request.uuid) else { throw HealthError.invalidArgument("a UUID must be 16 bytes", field: "uuid") }
        var response = Healthledger_V1_FetchResponse()
        if let object = try ledger.object(with: uuid) { response.object = .init(object) }
        return try response.serializedBytes()
    }

    /// Streams the matching samples in batches of at most `batch_size` objects and 1 MiB.
    func querySamples(_ emit: (_ batch: [UInt8]) async throws -> Void) async throws {
        let request = try decode(Healthledger_V1_SampleQueryRequest.self)
        let query = SampleQuery(
            type: try ObjectType(request.type),
            interval: try Self.interval(start: request.hasStartUs ? request.startUs : nil, end: request.hasEndUs ? request.endUs : nil),
            limit: Int(request.limit), sort: request.sort.model)
        let batchSize = request.batchSize == 0 ? 500 : Int(min(request.batchSize, 10_000))
        // SampleBatch { repeated HealthObject objects = 1; } written directly.
        var batch = ProtoWriter(capacity: 64 << 10)
        var count = 0
        // Objects go out as the log stores them: no decode and re-encode.
        for object in try ledger.encodedSamples(query) {
            try Task.checkCancellation()
            batch.message(field: 1, object)
            count += 1
            if count >= batchSize || batch.buffer.count >= 1 << 20 {
                try await emit(batch.buffer)
                batch = ProtoWriter(capacity: 64 << 10)
                count = 0
            }
        }
        if count > 0 { try await emit(batch.buffer) }
    }

    static func interval(start: Int64?, end: Int64?) throws -> DateInterval? {
        guard start != nil || end != nil else { return nil }
        let from = start.map { date(microseconds: $0) } ?? .distantPast
        let to = end.map { date(microseconds: $0) } ?? .distantFuture
        guard from <= to else { throw HealthError.invalidArgument("the interval ends before it starts", field: "end_us") }
        return DateInterval(start: from, end: to)
    }
}
