import Foundation
import HealthLedgerServer
import Logging
import Synchronization

/// The server's log: lines in the format of swift-log's `StreamLogHandler` (time, level,
/// label, sorted metadata, `[source]`, message), on standard error, written in batches.
///
/// At `info` the server logs a line per call; written one `write(2)` each, with the
/// time formatted through `localtime` each time, the lines cost a read-heavy server about a
/// third of its calls (BENCHMARKS.md, "Access records"). Here lines gather in memory and a
/// thread of their own writes them every 50 ms, or at once for a warning or worse; a crash
/// may lose the last 50 ms of `info` lines, never an error's.
struct BufferedLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // A call's line brings all its metadata: no merge, no copy.
        var merged = metadata.isEmpty ? event.metadata ?? [:] : metadata.merging(event.metadata ?? [:]) { $1 }
        if let error = event.error { merged["error.message"] = "\(error)" }
        var line = LogSink.shared.timestamp()
        line.reserveCapacity(256)
        line += " \(event.level) \(label):"
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        line += " [\(event.source)] \(event.message)\n"
        LogSink.shared.append(line, urgent: event.level >= .warning)
    }

    /// What ends every call's line: its source and message.
    private static let callLineEnd = Array(" [\(CallLine.source)] \(CallLine.message)\n".utf8)

    /// A call's line, as ``log(event:)`` writes it from the line's metadata (its fields
    /// already in the order of their names), written straight into the pending bytes: the
    /// server's calls write it through ``ServerConfiguration/callLineWriter``, a line per call.
    static func write(_ call: CallLine) {
        LogSink.shared.appendLine(urgent: call.level >= .warning) { line in
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: call.level.rawValue.utf8)
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: call.label.utf8)
            line.append(UInt8(ascii: ":"))
            call.write(fieldsTo: &line)
            line.append(contentsOf: Self.callLineEnd)
        }
    }
}

/// Standard error, written in batches by a thread of its own (``BufferedLogHandler``).
final class LogSink: Sendable {
    static let shared = LogSink()

    private struct State {
        var pending: [UInt8] = []
        var second: Int = -1
        var stamp = ""

        mutating func stamp(at now: Int) -> String {
            if second != now {
                second = now
                stamp = Date(timeIntervalSince1970: Double(now)).formatted(.iso8601)
            }
            return stamp
        }
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    static let interval = DispatchTimeInterval.milliseconds(50)

    private init() {
        Thread.detachNewThread { [self] in
            while true {
                _ = wake.wait(timeout: .now() + Self.interval)
                flush()
            }
        }
    }

    /// The time, to the second, in UTC: formatted once a second.
    func timestamp() -> String {
        let now = Int(Date().timeIntervalSince1970)
        return state.withLock { state in state.stamp(at: now) }
    }

    /// Appends a line that starts with the time and goes on with what `rest` appends, in one
    /// hold of the lock.
    func appendLine(urgent: Bool, _ rest: (inout [UInt8]) -> Void) {
        let now = Int(Date().timeIntervalSince1970)
        state.withLock { state in
            state.pending.append(contentsOf: state.stamp(at: now).utf8)
            rest(&state.pending)
        }
        if urgent { flush() }
    }

    func append(_ line: String, urgent: Bool) {
        state.withLock { $0.pending.append(contentsOf: line.utf8) }
        if urgent { flush() }
    }

    /// Writes what has gathered.
    func flush() {
        let bytes = state.withLock { state in
            defer { state.pending.removeAll(keepingCapacity: true) }
            return state.pending
        }
        guard !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }
}
