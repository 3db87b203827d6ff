import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Why the server could not listen where it was asked to.
public struct ListenerFailure: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) { self.description = description }

    init(socket path: String, _ error: any Error) {
        description = "cannot listen on the Unix domain socket \(path): \(error)"
    }
}

/// The socket file of a Unix domain socket listener: checked and cleared before the bind,
/// given its permissions after, removed when the server stops.
enum UnixSocketListener {
    /// Makes `socket.path` ready to bind: a socket file nobody listens on (left by a server
    /// that stopped, or was killed) is removed; another server listening there, or a file
    /// that is not a socket, is an error, and left alone.
    static func prepare(_ socket: ServerConfiguration.UnixSocket) throws {
        let path = socket.path
        guard !path.isEmpty, !path.utf8.contains(0) else { throw ListenerFailure("the Unix domain socket path is empty or holds a NUL byte") }
        guard path.utf8.count <= ServerConfiguration.UnixSocket.maximumPathLength else {
            throw ListenerFailure(
                "the Unix domain socket path \(path) is \(path.utf8.count) bytes long; at most \(ServerConfiguration.UnixSocket.maximumPathLength) fit in a socket address")
        }
        guard socket.mode <= 0o777 else { throw ListenerFailure("the Unix domain socket's mode \(String(socket.mode, radix: 8)) is not permission bits (0 to 777, octal)") }
        let directory = URL(filePath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ListenerFailure("cannot listen on the Unix domain socket \(path): the directory \(directory) does not exist")
        }
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw ListenerFailure("cannot listen on the Unix domain socket \(path): a file that is not a socket is there (not replaced)")
        }
        // Replaced only when a connection is refused: nobody listens there any more.
        switch probe(path) {
        case ECONNREFUSED: break
        case 0, EAGAIN, EINPROGRESS:
            throw ListenerFailure("cannot listen on the Unix domain socket \(path): another server listens on it")
        case let error:
            throw ListenerFailure(
                "cannot listen on the Unix domain socket \(path): whether a server listens on it is unknown (\(String(cString: strerror(error)))), so it is not replaced")
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw ListenerFailure("cannot remove the stale Unix domain socket \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Gives the bound socket file its permission bits (it is not followed if a link).
    ///
    /// - Returns: the file's identity, for ``remove(_:bound:)``.
    static func permit(_ socket: ServerConfiguration.UnixSocket) throws -> (device: UInt64, inode: UInt64) {
        var status = stat()
        guard lstat(socket.path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else {
            throw ListenerFailure("the Unix domain socket \(socket.path) is not there after it was bound")
        }
        guard fchmodat(AT_FDCWD, socket.path, mode_t(socket.mode), 0) == 0 else {
            throw ListenerFailure("cannot set the permissions of the Unix domain socket \(socket.path): \(String(cString: strerror(errno)))")
        }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }

    /// Removes the socket file this server bound (`bound`, its identity), unless another
    /// has replaced it since.
    static func remove(_ socket: ServerConfiguration.UnixSocket, bound: (device: UInt64, inode: UInt64)?) {
        var status = stat()
        guard lstat(socket.path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return }
        if let bound, (UInt64(status.st_dev), UInt64(status.st_ino)) != bound { return }
        unlink(socket.path)
    }

    /// Tries to connect to the socket file at `path` without waiting: 0 or `EAGAIN` (its
    /// queue is full) when a server listens, `ECONNREFUSED` when none does, else the error.
    private static func probe(_ path: String) -> Int32 {
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() where index < buffer.count - 1 { buffer[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return connected == 0 ? 0 : errno
    }
}
