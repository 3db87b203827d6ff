import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf
import Testing

/// The hand-written `SaveResponse` codec against the generated messages.
@Suite("SaveResponse written and read by hand")
struct SaveResponseCodingTests {
    static func randomResults(_ count: Int) -> [SaveResult] {
        (0..<count).map { index in
            switch index % 3 {
            case 0: SaveResult(uuid: UUID(), disposition: .saved)
            case 1: SaveResult(uuid: UUID(), disposition: .replaced(previous: UUID()))
            default: SaveResult(uuid: UUID(), disposition: .ignored(existing: UUID()))
            }
        }
    }

    static func generated(_ results: [SaveResult]) throws -> [UInt8] {
        var response = Healthledger_V1_SaveResponse()
        response.outcomes = results.map(Healthledger_V1_SaveOutcome.init)
        return try response.serializedBytes()
    }

    @Test("the bytes are SwiftProtobuf's, and read back as written", arguments: [0, 1, 2, 3, 10, 5000])
    func roundTrip(count: Int) throws {
        let results = Self.randomResults(count)
        let bytes = SaveResponseCoding.encoded(results)
        #expect(bytes == (try Self.generated(results)))
        #expect(try SaveResponseCoding.results(in: bytes) == results)
    }

    @Test("odd outcomes read as the generated message reads them")
    func oddOutcomes() throws {
        let uuid = UUID()
        var outcomes: [Healthledger_V1_SaveOutcome] = []
        // Replaced or ignored without the other UUID, an unknown disposition, no disposition:
        // saved, as SaveOutcome.model() says.
        for disposition in [Healthledger_V1_SaveOutcome.Disposition.replaced, .ignored, .UNRECOGNIZED(9), .unspecified] {
            var outcome = Healthledger_V1_SaveOutcome()
            outcome.uuid = Data(uuid.bytes)
            outcome.disposition = disposition
            outcomes.append(outcome)
        }
        // A saved outcome carrying another UUID anyway, and an unknown field.
        var extra = Healthledger_V1_SaveOutcome(SaveResult(uuid: uuid, disposition: .saved))
        extra.otherUuid = Data(UUID().bytes)
        try extra.merge(serializedBytes: [0x78, 0x05])  // field 15, varint 5
        outcomes.append(extra)
        var response = Healthledger_V1_SaveResponse()
        response.outcomes = outcomes
        let bytes: [UInt8] = try response.serializedBytes()
        let expected = try outcomes.map { try $0.model() }
        #expect(expected.allSatisfy { $0 == SaveResult(uuid: uuid, disposition: .saved) })
        #expect(try SaveResponseCoding.results(in: bytes) == expected)
    }

    @Test("a UUID of another length is a HealthError; bytes that are not a message are refused")
    func refusals() throws {
        var outcome = Healthledger_V1_SaveOutcome()
        outcome.uuid = Data([1, 2, 3])
        outcome.disposition = .saved
        var response = Healthledger_V1_SaveResponse()
        response.outcomes = [outcome]
        #expect(throws: HealthError.self) { try SaveResponseCoding.results(in: try response.serializedBytes()) }
        // A length running past the end.
        #expect(throws: (any Error).self) { try SaveResponseCoding.results(in: [0x0A, 0x20, 0x0A]) }
        #expect(throws: (any Error).self) { try Healthledger_V1_SaveResponse(serializedBytes: [0x0A, 0x20, 0x0A] as [UInt8]) }
    }
}
