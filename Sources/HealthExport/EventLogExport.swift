import Crypto
import Foundation
import HealthModel
import HealthLedgerSDK
import LedgerSchema
import SwiftProtobuf

/// A ledger's raw event log as JSON Lines (docs/EXPORT.md §4): every event's stored bytes
/// and hash, then the head, so that a copy can be verified anywhere without the server.
///
/// ```
/// {"exportedAt":"…","format":"healthledger-events","ledger":"alice","version":1}
/// {"hash":"9f…","sequence":1,"stored":"CiAAAA…"}
/// …
/// {"end":true,"events":1234,"headHash":"4b…","headSequence":1234}
/// ```
public enum EventLogExport {
    public static let format = "healthledger-events"
    public static let version = 1

    /// Writes the owner's ledger's events, 1 to the head as the server found it.
    /// - Returns: the head written (sequence and hash of the last event).
    public static func export(from store: HealthStore, ledgerID: String, to output: LineWriter) async throws -> (sequence: UInt64, hash: [UInt8]) {
        try output.json(["format": format, "version": version, "ledger": ledgerID, "exportedAt": Date().formatted(.iso8601)])
        var head: (sequence: UInt64, hash: [UInt8]) = (0, [])
        for try await batch in try await store.audit(includeStored: true, batchSize: 1_000) {
            for event in batch.events {
                guard let stored = event.stored else { throw EventLogError(line: 0, message: "the server sent event \(event.sequence) without its bytes") }
                try output.json(["sequence": event.sequence, "hash": event.hash.hexString, "stored": Data(stored).base64EncodedString()])
                head = (event.sequence, event.hash)
            }
        }
        try output.json(["end": true, "events": head.sequence, "headSequence": head.sequence, "headHash": head.hash.hexString])
        try output.flush()
        return head
    }

    /// What ``verify(_:)`` found.
    public struct Verification: Sendable {
        public var ledgerID: String
        public var events: UInt64
        public var headHash: [UInt8]
    }

    /// Checks an export on its own: the events run 1, 2, 3, … without gaps; each one's
    /// stored bytes hash to its hash (by its format: docs/LEDGER.md) and decode to its
    /// sequence; a body is the one its header commits to, and an erased one is named by a later
    /// erasure event; each one's previous hash is the hash of the one before (zeros for the
    /// first); the end line names the last.
    /// - Parameter eachEvent: called with each event's sequence and hash once it checked.
    /// - Throws: ``EventLogError`` naming the first line at fault.
    public static func verify(_ url: URL, eachEvent: (UInt64, [UInt8]) throws -> Void = { _, _ in }) async throws -> Verification {
        var lineNumber = 0
        var ledgerID: String?
        var previous = [UInt8](repeating: 0, count: 32)
        var sequence: UInt64 = 0
        var ended = false
        var erasures = ErasureAccount()
        for try await read in LineReader(url: url) {
            lineNumber += 1
            func fail(_ message: String) -> EventLogError { EventLogError(line: lineNumber, message: message) }
            guard !ended else { throw fail("a line follows the end line") }
            guard case .text(let line) = read else { throw fail("the line is longer than \(LineReader.maximumLength >> 20) MiB") }
            if line.isEmpty { continue }
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { throw fail("not a JSON object") }
            if ledgerID == nil {
                guard object["format"] as? String == format, object["version"] as? Int == version, let id = object["ledger"] as? String else {
                    throw fail("not a \(format) version \(version) export")
                }
                ledgerID = id
                continue
            }
            if object["end"] as? Bool == true {
                guard (object["headSequence"] as? NSNumber)?.uint64Value == sequence, object["headHash"] as? String == previous.hexString else {
                    throw fail("the end line names head \(object["headSequence"] ?? "?"):\(object["headHash"] ?? "?"), but the events end at \(sequence):\(previous.hexString)")
                }
                ended = true
                continue
            }
            guard let number = (object["sequence"] as? NSNumber)?.uint64Value, let hash = (object["hash"] as? String).flatMap({ [UInt8](hexString: $0) }),
                let encoded = object["stored"] as? String, let stored = Data(base64Encoded: encoded)
            else { throw fail("an event line needs sequence, hash and stored") }
            guard number == sequence + 1 else { throw fail("event \(number) follows event \(sequence)") }
            let checked: (hash: [UInt8], problem: String?)? = stored.withUnsafeBytes { bytes in
                (try? EventLayout(stored: bytes)).map { ($0.hash(of: bytes), erasures.note($0, stored: bytes, sequence: number)) }
            }
            guard let checked else { throw fail("event \(number): its bytes are not an event of a known format") }
            guard checked.hash == hash else { throw fail("event \(number): its bytes do not hash to \(hash.hexString)") }
            if let problem = checked.problem { throw fail("event \(number): \(problem)") }
            let event: Healthledger_V1_LedgerEvent
            do { event = try Healthledger_V1_LedgerEvent(serializedBytes: stored) } catch { throw fail("event \(number): its bytes are not a LedgerEvent") }
            guard event.sequence == number else { throw fail("event \(number): its bytes say sequence \(event.sequence)") }
            guard Array(event.previousHash) == previous else {
                throw fail("event \(number): its previous hash is not event \(sequence)'s hash: the chain is broken")
            }
            previous = hash
            sequence = number
            try eachEvent(number, hash)
        }
        guard let ledgerID else { throw EventLogError(line: 0, message: "the file is empty") }
        guard ended else { throw EventLogError(line: lineNumber, message: "the end line is missing: the file was cut short") }
        if let (erased, reason) = erasures.firstUnaccounted { throw EventLogError(line: 0, message: "event \(erased): \(reason)") }
        return Verification(ledgerID: ledgerID, events: sequence, headHash: previous)
    }
}

/// Why an event-log export does not verify: the line at fault and what is wrong.
public struct EventLogError: Error, CustomStringConvertible, Sendable {
    public var line: Int
    public var message: String
    public var description: String { line > 0 ? "line \(line): \(message)" : message }
}
