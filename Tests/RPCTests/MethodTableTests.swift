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
}
