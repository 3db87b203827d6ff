import Foundation
import LedgerSchema

/// A deterministic random generator (SplitMix64), so property-test failures reproduce.
public struct SplitMix: RandomNumberGenerator {
    public var state: UInt64

    public init(state: UInt64) { self.state = state }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What a finished child process printed and how it exited.
public struct ProcessRun: Sendable {
    public var status: Int32
    public var output: String
    public var error: String
}

/// Runs `executable` with `arguments` (and `environment` on top of this process's) to its
/// end, capturing its output.
public func runProcess(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws -> ProcessRun {
    let child = try ChildProcess(executable, arguments, environment: environment)
    // Standard error is drained alongside, so that a child filling one pipe never blocks.
    let error = LockedData()
    let drained = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        error.set(ChildProcess.readAll(child.error))
        drained.signal()
    }
    let out = ChildProcess.readAll(child.output)
    drained.wait()
    let status = child.wait()
    return ProcessRun(status: status, output: String(decoding: out, as: UTF8.self), error: String(decoding: error.get(), as: UTF8.self))
}

private final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ value: Data) { lock.withLock { data = value } }
    func get() -> Data { lock.withLock { data } }
}

/// ``runProcess(_:_:environment:)`` for async tests: the wait happens on a thread of its own, not on
/// the cooperative pool (which on a 2-core machine has 2 threads that in-process servers
/// need to answer the child).
public func runProcess(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessRun {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result { try runProcess(executable, arguments, environment: environment) as ProcessRun })
        }
    }
}

/// An event's hash from its stored bytes, by the rule of its format (`EventLayout`).
public func eventHash(_ stored: some ContiguousBytes) -> [UInt8] {
    stored.withUnsafeBytes { bytes in (try? EventLayout(stored: bytes)).map { $0.hash(of: bytes) } ?? [] }
}
