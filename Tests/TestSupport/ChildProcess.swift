import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, its output read through pipes.
///
/// Tests start children with this rather than Foundation's `Process`: on Linux,
/// `Process.run()` scans `/proc/self/fd` with a read past the end of each directory entry
/// and crashes now and then in a process with many descriptors open, as a test process
/// running servers in parallel has (swift-corelibs-foundation PR 5472).
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    /// Read ends of the child's standard output and error (-1 when not captured).
    public let output: Int32
    public let error: Int32
    private let exit = NSLock()
    private var status: Int32?
    private static let spawning = NSLock()

    public struct SpawnFailure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts `executable` with `arguments`; its standard input is `/dev/null`.
    /// - Parameters:
    ///   - captureOutput: read the child's standard output through ``output`` (else discarded).
    ///   - captureError: read its standard error through ``error`` (else discarded).
    ///   - environment: variables set for the child on top of this process's own.
    public init(
        _ executable: URL, _ arguments: [String], captureOutput: Bool = true, captureError: Bool = true, environment: [String: String] = [:]
    ) throws {
        // Pipes are made and marked close-on-exec under the lock every spawn takes, so that
        // no child started meanwhile inherits another's pipe.
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var readEnds: [Int32] = []
        var writeEnds: [Int32] = []
        for (capture, target) in [(captureOutput, Int32(1)), (captureError, Int32(2))] {
            if capture {
                // Close-on-exec, so that no other child holds the write end open.
                var fds: [Int32] = [0, 0]
                guard pipe(&fds) == 0 else { throw SpawnFailure(description: "pipe failed: errno \(errno)") }
                for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                readEnds.append(fds[0])
                writeEnds.append(fds[1])
                posix_spawn_file_actions_adddup2(&actions, fds[1], target)
            } else {
                readEnds.append(-1)
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            }
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable.path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable.path, &actions, nil, argv, envp)
        for fd in writeEnds { close(fd) }
        guard result == 0 else {
            for fd in readEnds where fd >= 0 { close(fd) }
            throw SpawnFailure(description: "cannot start \(executable.path): errno \(result)")
        }
        self.pid = pid
        output = readEnds[0]
        error = readEnds[1]
    }

    deinit {
        if output >= 0 { close(output) }
        if error >= 0 { close(error) }
    }

    /// Sends `signal` (SIGTERM by default) unless the child has been waited for.
    public func terminate(_ signal: Int32 = SIGTERM) {
        exit.lock()
        defer { exit.unlock() }
        if status == nil { kill(pid, signal) }
    }

    /// Waits for the child to end: its exit code, or 128 + the signal that ended it.
    @discardableResult
    public func wait() -> Int32 {
        exit.lock()
        defer { exit.unlock() }
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0, errno == EINTR {}
        let code = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
        status = code
        return code
    }

    /// Reads `fd` to its end.
    public static func readAll(_ fd: Int32) -> Data {
        guard fd >= 0 else { return Data() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count < 0, errno == EINTR {
                continue
            } else {
                return data
            }
        }
    }

    /// Reads what is available on `fd`, blocking until something is: empty at its end.
    public static func readSome(_ fd: Int32) -> Data {
        guard fd >= 0 else { return Data() }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count >= 0 { return Data(buffer[0..<count]) }
            if errno != EINTR { return Data() }
        }
    }
}
