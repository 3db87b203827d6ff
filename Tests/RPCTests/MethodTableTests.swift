import Foundation
import HealthLedgerRPC
import HealthLedgerServer
import Testing

/// The server's method table and what clients are told about each method.
@Suite("Method table")
struct MethodTableTests {
    @Test("every method is registered, and the long-running ones are exactly those the SDK sends without a deadline")
    func longRunningKindsMatchTheProtocol() {
        for method in RPCMethod.allCases {
            let kind = MethodTable.kind(of: method)
            #expect(kind != nil, "\(method) is not registered")
            #expect((kind == .longRunning) == method.isLongRunning, "\(method): \(String(describing: kind))")
        }
    }

    /// docs/PROTOCOL.md, read from the repository.
    static func protocolDocument() throws -> String {
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appending(path: "docs/PROTOCOL.md"), encoding: .utf8)
    }

    static func documentedKind(_ kind: MethodKind?) -> String {
        switch kind {
        case .serverStreaming?: "server streaming"
        case .longRunning?: "long-running"
        default: "unary"
        }
    }

    @Test("docs/PROTOCOL.md's method table (§7) lists every method with the kind the server registers, and §4.3 names exactly the streaming ones")
    func documentedKinds() throws {
        let document = try Self.protocolDocument()
        var table: [String: String] = [:]
        for line in document.split(separator: "\n") where line.hasPrefix("| `healthledger.v1.Ledger/") || line.hasPrefix("| `healthledger.v1.Replication/") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let name = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            table[name] = cells[1].split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        #expect(Set(table.keys) == Set(RPCMethod.allCases.map(\.rawValue)))
        for method in RPCMethod.allCases {
            #expect(table[method.rawValue] == Self.documentedKind(MethodTable.kind(of: method)), "\(method.rawValue)")
        }

        // §4.3: "- **Streaming methods** (`QuerySamples`, …, `WatchAudit`): zero or more …"
        let listed = try Self.quotedNames(in: document, from: "- **Streaming methods** (", to: "):")
        let streaming = Set(RPCMethod.allCases.filter { MethodTable.kind(of: $0)?.isStreaming == true }.map {
            String($0.rawValue.dropFirst("healthledger.v1.Ledger/".count))
        })
        #expect(listed == streaming)
    }

    /// The names in backticks between `start` and `end` in the document.
    static func quotedNames(in document: String, from start: String, to end: String) throws -> Set<String> {
        let from = try #require(document.range(of: start))
        let to = try #require(document.range(of: end, range: from.upperBound..<document.endIndex))
        let text = document[from.upperBound..<to.lowerBound].replacingOccurrences(of: "\n", with: " ")
        return Set(text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
    }

    @Test("§4.10 names exactly the methods a point-in-time view answers")
    func documentedPointInTimeReads() throws {
        let listed = try Self.quotedNames(in: try Self.protocolDocument(), from: "- **Which methods.** ", to: "Any other method")
        let answered = Set(RPCMethod.allCases.filter(MethodTable.answersAsOf).map { String($0.rawValue.dropFirst("healthledger.v1.Ledger/".count)) })
        #expect(listed == answered)
        #expect(answered.contains("Audit") && !answered.contains("WatchChanges") && !answered.contains("Save"))
    }

    @Test("§4.4 names exactly the methods the server runs as writes, which no cancel or deadline stops")
    func documentedWrites() throws {
        let listed = try Self.quotedNames(in: try Self.protocolDocument(), from: "**Writes are not stopped by a deadline or a cancel.** A write —", to: "— is handed")
        let writes = Set(RPCMethod.allCases.filter(MethodTable.writes).map { String($0.rawValue.dropFirst("healthledger.v1.Ledger/".count)) })
        #expect(listed == writes)
        #expect(writes.contains("Save") && writes.contains("RevokeCredential") && !writes.contains("Statistics"))
        // The clients' view (what a failover may send again) is the server's.
        #expect(RPCMethod.allCases.filter(\.isWrite) == RPCMethod.allCases.filter(MethodTable.writes))
    }
}
