import Foundation
import HealthLedgerRPC

/// How `healthledgerd` listens and what it allows.
public struct ServerConfiguration: Sendable {
    /// The default port: 7411.
    public static let defaultPort = 7411

    public var host: String
    /// 0 picks a free port (tests); read the bound one from ``RPCServer/start()``.
    public var port: Int
    /// Frames above this size are refused when their header arrives.
    public var maximumFrameSize: Int
    /// Calls one connection may have open at once.
    public var maximumConcurrentCalls: Int
    /// The deadline of calls that do not set one.
    public var defaultTimeout: Duration
    /// The longest deadline a call may ask for.
    public var maximumTimeout: Duration
    /// A connection with no calls and no traffic for this long is closed.
    public var idleTimeout: Duration
    /// How long a graceful shutdown waits for calls in flight.
    public var drainTimeout: Duration
    /// PEM files for TLS; plain TCP when nil.
    public var tls: TLSFiles?
    /// A Unix domain socket to listen on as well, for clients on this host (nil: none). Its
    /// connections speak the same protocol, without TLS: the file's permissions decide who
    /// may connect, the credential what a call may do.
    public var unixSocket: UnixSocket?
    /// Calls one credential may have running at once, over all its connections and both
    /// transports; past it a call is refused with `RESOURCE_EXHAUSTED`.
    public var maximumCallsPerCredential = 512
    /// Write calls (saves, deletes, erasures, attachments, routes, decisions) one credential
    /// may make per second, in bursts of up to as many; 0: no limit.
    public var maximumWritesPerSecond = 0
    /// When a durable write is answered on a ledger that has followers (docs/PROTOCOL.md §7.18).
    public var replicationAcknowledgement = ReplicationAcknowledgement.semiSynchronous
    /// How long a follower counts as connected after its last fetch: a semi-synchronous write
    /// waits for a connected follower, at most this long.
    public var followerWindow: Duration = .seconds(5)
    /// The address of this server's primary, when it is a follower of every ledger of
    /// another server (`healthledgerd --follow`): writes are refused naming it.
    public var primaryAddress: String?
    /// This server's standing in a cluster on etcd (`healthledgerd --etcd`), which its
    /// membership keeps current: it takes writes only while it leads, and answers them once
    /// the cluster's synchronous standby has them; nil for a single server.
    public var cluster: ClusterRole?
    /// Writes each call's log line in place of the server's `Logger` (`healthledgerd`: straight
    /// to its buffered standard error, in its log handler's format, without building a metadata
    /// dictionary for every call); nil: through the logger.
    public var callLineWriter: (@Sendable (CallLine) -> Void)?

    /// When a durable write is answered.
    public enum ReplicationAcknowledgement: String, Sendable, CaseIterable {
        /// Once a follower also has it durable, when one is connected (else as asynchronous).
        case semiSynchronous = "semi-sync"
        /// Once the primary's own commit is durable: a failover may lose what the followers
        /// had not fetched yet (the replication lag).
        case asynchronous = "async"
    }

    /// Where a Unix domain socket listener is, and who may connect to it.
    public struct UnixSocket: Sendable, Hashable {
        /// The socket file's path: at most ``maximumPathLength`` bytes, in a directory that
        /// exists. A socket file left there by a server that stopped is replaced; another
        /// server listening there, or a file that is not a socket, is an error.
        public var path: String
        /// The socket file's permission bits (`chmod`), 0o660 by default: its owner and group.
        public var mode: UInt16

        /// The longest path a Unix domain socket address holds (`sun_path`, less its NUL).
        public static let maximumPathLength = 107

        public init(path: String, mode: UInt16 = 0o660) {
            self.path = path
            self.mode = mode
        }
    }

    public struct TLSFiles: Sendable {
        public var certificateChain: String
        public var privateKey: String
        /// PEM roots the server's certificate chains to, when ``certificateChain`` holds no CA
        /// (a certificate an authority issued): the web app's calls to this server verify
        /// against them. Nil: against the chain itself (a self-signed certificate, or a chain
        /// that ends with its CA).
        public var authority: String?

        public init(certificateChain: String, privateKey: String, authority: String? = nil) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
            self.authority = authority
        }
    }

    public init(
        host: String = "127.0.0.1", port: Int = ServerConfiguration.defaultPort,
        maximumFrameSize: Int = FrameLayout.defaultMaximumFrameSize, maximumConcurrentCalls: Int = 128,
        defaultTimeout: Duration = .seconds(30), maximumTimeout: Duration = .seconds(600), idleTimeout: Duration = .seconds(300),
        drainTimeout: Duration = .seconds(10), tls: TLSFiles? = nil
    ) {
        self.host = host
        self.port = port
        self.maximumFrameSize = maximumFrameSize
        self.maximumConcurrentCalls = maximumConcurrentCalls
        self.defaultTimeout = defaultTimeout
        self.maximumTimeout = maximumTimeout
        self.idleTimeout = idleTimeout
        self.drainTimeout = drainTimeout
        self.tls = tls
    }
}
