import Foundation
import HealthModel

/// A `SaveResponse` written and read without the generated messages.
///
/// A save of an import's batch answers thousands of outcomes, and the server writes the
/// answer on the thread that commits (the next commit waits for it): through SwiftProtobuf,
/// a message per outcome and two `Data` UUIDs each, that took 4 % of that thread. The bytes
/// are the ones SwiftProtobuf writes, and the reader takes what SwiftProtobuf takes and answers
/// as `Healthledger_V1_SaveOutcome.model()` does (`SaveResponseCodingTests` holds both so).
public enum SaveResponseCoding {
    /// The `SaveResponse` holding `results`, one outcome each, in order.
    public static func encoded(_ results: [SaveResult]) -> [UInt8] {
        // An outcome is at most 2 + 16, 2, 2 + 16 bytes, behind its tag and a one-byte length.
        var writer = ProtoWriter(capacity: results.count * 40)
        for result in results {
            writer.message(field: SaveResponseField.outcomes.rawValue) { outcome in
                withUnsafeBytes(of: result.uuid.uuid) { outcome.bytes(field: SaveOutcomeField.uuid.rawValue, $0) }
                let (disposition, other): (Healthledger_V1_SaveOutcome.Disposition, UUID?) =
                    switch result.disposition {
                    case .saved: (.saved, nil)
                    case .replaced(let previous): (.replaced, previous)
                    case .ignored(let existing): (.ignored, existing)
                    }
                outcome.varint(field: SaveOutcomeField.disposition.rawValue, UInt64(disposition.rawValue))
                if let other { withUnsafeBytes(of: other.uuid) { outcome.bytes(field: SaveOutcomeField.otherUuid.rawValue, $0) } }
            }
        }
        return writer.buffer
    }

    /// The outcomes of the `SaveResponse` in `bytes`, in order.
    ///
    /// - Throws: ``ProtoReader/Malformed`` for bytes that are not a `SaveResponse`;
    ///   ``HealthError`` (`invalidArgument`) for an outcome whose UUID is not 16 bytes.
    public static func results(in bytes: [UInt8]) throws -> [SaveResult] {
        try bytes.withUnsafeBytes { buffer in
            var reader = ProtoReader(buffer)
            var results: [SaveResult] = []
            while let (field, wireType) = try reader.next() {
                guard field == SaveResponseField.outcomes.rawValue, wireType == .lengthDelimited else {
                    try reader.skip(wireType)
                    continue
                }
                results.append(try result(in: try reader.bytes()))
            }
            return results
        }
    }

    private static func result(in bytes: UnsafeRawBufferPointer) throws -> SaveResult {
        var reader = ProtoReader(bytes)
        var uuid: UnsafeRawBufferPointer?
        var other: UnsafeRawBufferPointer?
        var disposition: UInt64 = 0
        while let (field, wireType) = try reader.next() {
            switch (SaveOutcomeField(rawValue: field), wireType) {
            case (.uuid, .lengthDelimited): uuid = try reader.bytes()
            case (.disposition, .varint): disposition = try reader.varint()
            case (.otherUuid, .lengthDelimited): other = try reader.bytes()
            default: try reader.skip(wireType)
            }
        }
        guard let uuid = uuid.flatMap({ UUID(bytes: $0) }) else {
            throw HealthError.invalidArgument("uuid must be 16 bytes", field: "uuid")
        }
        // As the generated enum reads it: the value's low 32 bits.
        switch (Healthledger_V1_SaveOutcome.Disposition(rawValue: Int(Int32(truncatingIfNeeded: disposition))), other.flatMap { UUID(bytes: $0) }) {
        case (.replaced, let previous?): return SaveResult(uuid: uuid, disposition: .replaced(previous: previous))
        case (.ignored, let existing?): return SaveResult(uuid: uuid, disposition: .ignored(existing: existing))
        default: return SaveResult(uuid: uuid, disposition: .saved)
        }
    }
}
