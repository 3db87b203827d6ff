import HealthLedgerServer
import Synchronization
import Testing

/// A streaming call's wait for its connection's socket to take bytes again
/// (``WritableGate``): it lets writes through while the socket is writable, holds them while
/// it is not, and ends them when the connection closes or the call is cancelled.
@Suite("A stream's wait for a writable socket", .timeLimit(.minutes(1)))
struct WritableGateTests {
    final class Passed: Sendable {
        let count = Mutex(0)
    }

    @Test("a wait returns at once while writable, waits while not, and goes on when writable again")
    func waits() async throws {
        let gate = WritableGate()
        try await gate.wait()
        gate.set(writable: false)
        let passed = Passed()
        let waiters = (0..<3).map { _ in
            Task {
                try await gate.wait()
                passed.count.withLock { $0 += 1 }
            }
        }
        // The waiters are held: nothing passes until the socket is writable (each waiter
        // checks the gate when it runs; yielding lets them reach it).
        for _ in 0..<100 { await Task.yield() }
        #expect(passed.count.withLock { $0 } == 0)
        gate.set(writable: true)
        for waiter in waiters { try await waiter.value }
        #expect(passed.count.withLock { $0 } == 3)
    }

    @Test("a closed connection ends every wait, and a cancelled call ends its own")
    func closesAndCancels() async throws {
        let gate = WritableGate()
        gate.set(writable: false)
        let cancelled = Task { try await gate.wait() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        let waiting = Task { try await gate.wait() }
        for _ in 0..<100 { await Task.yield() }
        gate.close()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        await #expect(throws: CancellationError.self) { try await gate.wait() }
    }
}
