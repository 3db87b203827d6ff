import Foundation

/// Pings on one connection from a client written from docs/PROTOCOL.md alone (§3 framing,
/// §7.1 Ping) on a blocking socket, as libpq is PostgreSQL's: one at a time (``ping()``), or
/// pipelined as libpq pipelines its queries (``ping(_:depth:)``: `depth` request frames
/// written at once, then their answers read, over and over). Beside libpq's figures, the
/// server's cost per call, without the SDK's.
final class ProtocolPinger {
    private let socket: Int32
    /// `method` and `credential` of a Ping's `CallRequest`, encoded once.
    private let requestFields: [UInt8]
    private var nextID: UInt64 = 1
    private var input: [UInt8] = []
    private var consumed = 0
    /// What each read fills, allocated once.
    private var chunk = [UInt8](repeating: 0, count: 65_536)
    /// The request frames of a batch, reused.
    private var output: [UInt8] = []

    /// Connects to the server's Unix domain socket when given, else to its TCP port on 127.0.0.1.
    init(tcpPort: Int? = nil, unixSocket: String? = nil, credential: String) throws {
        if let unixSocket {
            let socket = Foundation.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            self.socket = socket
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = Array(unixSocket.utf8)
            guard path.count < MemoryLayout.size(ofValue: address.sun_path) else { throw BenchFailure("socket path too long: \(unixSocket)") }
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard connected == 0 else { throw BenchFailure("cannot connect to \(unixSocket): errno \(errno)") }
        } else {
            let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.socket = socket
            var noDelay: Int32 = 1
            setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(tcpPort ?? 0).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { throw BenchFailure("cannot connect to 127.0.0.1:\(tcpPort ?? 0): errno \(errno)") }
        }
        var fields: [UInt8] = []
        Self.appendField(1, Array("healthledger.v1.Ledger/Ping".utf8), to: &fields)
        Self.appendField(2, Array(credential.utf8), to: &fields)
        requestFields = fields
    }

    deinit { close(socket) }

    /// One ping, answered.
    func ping() throws { try ping(1, depth: 1) }

    /// Sends `count` pings, `depth` at a time, each batch written at once and all its
    /// answers read before the next.
    func ping(_ count: Int, depth: Int = 64) throws {
        var done = 0
        while done < count {
            let batch = min(depth, count - done)
            output.removeAll(keepingCapacity: true)
            for _ in 0..<batch {
                var body: [UInt8] = [0x08]
                Self.appendVarint(nextID, to: &body)
                nextID += 1
                Self.appendField(2, requestFields, to: &body)
                output.append(0)
                output.append(contentsOf: withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init))
                output.append(contentsOf: body)
            }
            try output.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = send(socket, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                    guard written > 0 else { throw BenchFailure("write failed: errno \(errno)") }
                    offset += written
                }
            }
            var ended = 0
            while ended < batch {
                let body = try nextFrame()
                // A frame of call 0 (no call id: its first field is its kind) ends no call (§4.8).
                guard body.first == 0x08 else { throw BenchFailure("the server answered on call 0: \(Array(body.prefix(80)))") }
                if let code = try Self.statusCode(body) {
                    guard code == 0 else { throw BenchFailure("a ping ended with status \(code)") }
                    ended += 1
                }
            }
            done += batch
        }
    }

    /// The next frame's body, reading from the socket as needed.
    private func nextFrame() throws -> ArraySlice<UInt8> {
        while true {
            let available = input.count - consumed
            if available >= 5 {
                let length = input[(consumed + 1)..<(consumed + 5)].reduce(0) { $0 << 8 | Int($1) }
                if available >= 5 + length {
                    let body = input[(consumed + 5)..<(consumed + 5 + length)]
                    consumed += 5 + length
                    return body
                }
            }
            if consumed > 0 {
                input.removeFirst(consumed)
                consumed = 0
            }
            let read = chunk.withUnsafeMutableBytes { Foundation.read(socket, $0.baseAddress, $0.count) }
            guard read > 0 else { throw BenchFailure("the server closed the connection") }
            input.append(contentsOf: chunk[..<read])
        }
    }

    /// A frame's `status` code (field 4's `CallStatus.code`), or nil when it holds no status.
    private static func statusCode(_ body: ArraySlice<UInt8>) throws -> UInt64? {
        var index = body.startIndex
        func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < body.endIndex {
                let byte = body[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            throw BenchFailure("a truncated varint in a frame")
        }
        while index < body.endIndex {
            let tag = try varint()
            switch tag & 7 {
            case 0: _ = try varint()
            case 2:
                let length = Int(try varint())
                if tag >> 3 == 4 {
                    // CallStatus: its code is field 1, written first, absent when OK.
                    guard length > 0, body[index] == 0x08 else { return 0 }
                    index += 1
                    return try varint()
                }
                index += length
            default: throw BenchFailure("an unexpected wire type in a frame")
            }
        }
        return nil
    }

    private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private static func appendField(_ number: UInt64, _ value: [UInt8], to bytes: inout [UInt8]) {
        appendVarint(number << 3 | 2, to: &bytes)
        appendVarint(UInt64(value.count), to: &bytes)
        bytes.append(contentsOf: value)
    }
}
