import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import GRPCProtobuf
import NIOCore
import SwiftProtobuf
import Synchronization

/// The part of etcd's v3 API that cluster membership uses, over etcd's own gRPC
/// (`etcdserverpb.KV` and `etcdserverpb.Lease`; the messages in Protos/etcd): keys read and
/// written, compare-and-swap transactions, and leases kept alive.
///
/// Every call has a deadline, so that an unreachable etcd is an error within seconds, never
/// a hang; a call an endpoint fails is tried on the next, and the one that answered is
/// asked first from then on.
package final class Etcd: Sendable {
    private let clients: [GRPCClient<HTTP2ClientTransport.Posix>]
    /// The client asked first: the last that answered.
    private let preferred = Mutex(0)
    private let timeout: Duration
    /// The endpoints as given, for messages.
    let endpoints: String

    /// A key and what etcd keeps with it.
    struct Entry: Sendable, Hashable {
        var key: String
        var value: Data
        /// The store's revision when the key was created: a leader key's fencing epoch.
        var createRevision: Int64
        /// The store's revision when it was last written (0: it does not exist).
        var modRevision: Int64
        /// The lease it is attached to (0: none).
        var lease: Int64
    }

    /// - Parameters:
    ///   - endpoints: `http://HOST:PORT` (or `HOST:PORT`) or, for TLS, `https://HOST:PORT`,
    ///     comma-separated, all of one scheme.
    ///   - tls: the files TLS uses (https only); nil: the system's trust roots, no client certificate.
    /// - Throws: ``ClusterFailure`` for an endpoint that does not parse, schemes mixed, TLS
    ///   files given for http, or a TLS file that cannot be read.
    package init(endpoints: String, tls: EtcdTLS? = nil, timeout: Duration = .seconds(3)) throws {
        let parsed = try Self.parse(endpoints)
        let secure = parsed.contains { $0.secure }
        guard parsed.allSatisfy({ $0.secure == secure }) else {
            throw ClusterFailure("etcd endpoints '\(endpoints)' mix http:// and https://: name them all with one scheme")
        }
        if tls != nil, !secure { throw ClusterFailure("TLS files for etcd (--etcd-ca, --etcd-cert, --etcd-key) need https:// endpoints, not '\(endpoints)'") }
        let security: HTTP2ClientTransport.Posix.TransportSecurity = secure ? .tls(try (tls ?? EtcdTLS()).configuration()) : .plaintext
        clients = try parsed.map { endpoint in
            // An address as it is; a name resolved when connecting (and again on reconnecting),
            // and the name the server's certificate must carry.
            let isAddress = (try? SocketAddress(ipAddress: endpoint.host, port: endpoint.port)) != nil
            let target: any ResolvableTarget =
                isAddress ? .ipv4(address: endpoint.host, port: endpoint.port) : .dns(host: endpoint.host, port: endpoint.port)
            return GRPCClient(transport: try HTTP2ClientTransport.Posix(target: target, transportSecurity: security))
        }
        self.timeout = timeout
        self.endpoints = endpoints
    }

    /// Runs the clients' connections until ``close()``.
    package func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { try await client.runConnections() } }
            try await group.waitForAll()
        }
    }

    package func close() {
        for client in clients { client.beginGracefulShutdown() }
    }

    /// Runs `call` with the preferred endpoint's client, then with each other one while
    /// they fail (each within the deadline).
    private func withClient<R>(
        _ method: String,
        _ call: (GRPCClient<HTTP2ClientTransport.Posix>, CallOptions) async throws -> R
    ) async throws -> R {
        var options = CallOptions.defaults
        options.timeout = timeout
        let first = preferred.withLock { $0 }
        var failures: [String] = []
        for offset in clients.indices {
            let index = (first + offset) % clients.count
            do {
                let result = try await call(clients[index], options)
                if offset > 0 { preferred.withLock { $0 = index } }
                return result
            } catch let error as RPCError {
                failures.append("\(error.code), \(error.message)")
            } catch let failure as ClusterFailure {
                failures.append(failure.description)
            }
        }
        throw ClusterFailure(
            "etcd at \(endpoints) failed \(method): \(failures.joined(separator: "; "))")
    }

    /// `http://127.0.0.1:2379,etcd-1.etcd:2379` as hosts and ports (a name is resolved when
    /// connecting, and again when reconnecting).
    package static func parse(_ endpoints: String) throws -> [(host: String, port: Int, secure: Bool)] {
        let listed = endpoints.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !listed.isEmpty else { throw ClusterFailure("name etcd's endpoints: http://HOST:PORT[,…] or https://HOST:PORT[,…]") }
        return try listed.map { endpoint in
            let secure = endpoint.hasPrefix("https://")
            let address = secure ? String(endpoint.dropFirst("https://".count)) : endpoint.hasPrefix("http://") ? String(endpoint.dropFirst("http://".count)) : endpoint
            let parts = address.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port) else {
                throw ClusterFailure("etcd endpoint '\(endpoint)' is not http://HOST:PORT or https://HOST:PORT")
            }
            return (String(parts[0]), port, secure)
        }
    }

    // MARK: Keys

    /// Every key beginning with `prefix`, in key order.
    func entries(under prefix: String) async throws -> [Entry] {
        try await range(
            .with {
                $0.key = Data(prefix.utf8)
                $0.rangeEnd = Self.end(of: prefix)
            })
    }

    private func range(_ request: Etcdserverpb_RangeRequest) async throws -> [Entry] {
        let response: Etcdserverpb_RangeResponse = try await call("KV", "Range", request)
        return response.kvs.map(Entry.init)
    }

    /// Writes `value` under `key`, attached to `lease` (0: none).
    package func put(_ key: String, _ value: Data, lease: Int64 = 0) async throws {
        let _: Etcdserverpb_PutResponse = try await call(
            "KV", "Put", Self.put(key, value, lease: lease))
    }

    /// Creates `key` with `value` and `lease` when no such key exists and `unchanged` was
    /// last written at `revision` (0: it does not exist): its create revision when it did,
    /// nil when either was not so.
    func create(_ key: String, _ value: Data, lease: Int64, while unchanged: String, modifiedAt revision: Int64) async throws -> Int64? {
        let response = try await transaction(
            .with {
                $0.compare = [
                    Self.created(key, at: 0),
                    .with {
                        $0.key = Data(unchanged.utf8)
                        $0.target = .mod
                        $0.result = .equal
                        $0.modRevision = revision
                    },
                ]
                $0.success = [.with { $0.requestPut = Self.put(key, value, lease: lease) }]
            })
        return response.succeeded ? response.header.revision : nil
    }

    /// Creates `key` with `value` and `lease` when no such key exists: false when it was there.
    func create(_ key: String, _ value: Data, lease: Int64) async throws -> Bool {
        try await transaction(
            .with {
                $0.compare = [
                    Self.created(key, at: 0)
                ]
                $0.success = [.with { $0.requestPut = Self.put(key, value, lease: lease) }]
            }
        ).succeeded
    }

    /// Writes `value` under `key` only while `guardKey` is the one created at `revision`
    /// (a leader's writes, fenced by its leader key): false when it is not.
    func put(_ key: String, _ value: Data, whileCreatedAt revision: Int64, guardKey: String)
        async throws -> Bool
    {
        try await transaction(
            .with {
                $0.compare = [
                    Self.created(guardKey, at: revision)
                ]
                $0.success = [.with { $0.requestPut = Self.put(key, value, lease: 0) }]
            }
        ).succeeded
    }

    /// Deletes `key` only while it is the one created at `revision` (a leader giving its
    /// leadership up): false when it is not.
    func delete(_ key: String, whileCreatedAt revision: Int64) async throws -> Bool {
        try await transaction(
            .with {
                $0.compare = [Self.created(key, at: revision)]
                $0.success = [.with { $0.requestDeleteRange = .with { $0.key = Data(key.utf8) } }]
            }
        ).succeeded
    }

    private func transaction(_ request: Etcdserverpb_TxnRequest) async throws
        -> Etcdserverpb_TxnResponse
    {
        try await call("KV", "Txn", request)
    }

    /// A comparison that holds when `key` was created at `revision` (0: it does not exist).
    private static func created(_ key: String, at revision: Int64) -> Etcdserverpb_Compare {
        .with {
            $0.key = Data(key.utf8)
            $0.target = .create
            $0.result = .equal
            $0.createRevision = revision
        }
    }

    private static func put(_ key: String, _ value: Data, lease: Int64) -> Etcdserverpb_PutRequest {
        .with {
            $0.key = Data(key.utf8)
            $0.value = value
            $0.lease = lease
        }
    }

    /// The end of the range of keys beginning with `prefix`: its last byte plus one.
    static func end(of prefix: String) -> Data {
        var bytes = Array(prefix.utf8)
        while let last = bytes.last, last == 0xFF { bytes.removeLast() }
        guard !bytes.isEmpty else { return Data([0]) }
        bytes[bytes.count - 1] += 1
        return Data(bytes)
    }

    // MARK: Leases

    /// A new lease of `seconds`: its id and the time to live etcd granted.
    func grantLease(seconds: Int64) async throws -> (id: Int64, seconds: Int64) {
        let response: Etcdserverpb_LeaseGrantResponse = try await call(
            "Lease", "LeaseGrant", Etcdserverpb_LeaseGrantRequest.with { $0.ttl = seconds })
        guard response.error.isEmpty, response.id != 0 else {
            throw ClusterFailure("etcd granted no lease: \(response.error)")
        }
        return (response.id, response.ttl)
    }

    /// Renews lease `id`: the seconds it now has, 0 when it no longer exists.
    func keepAlive(_ id: Int64) async throws -> Int64 {
        try await withClient("LeaseKeepAlive") { client, options in
            try await client.bidirectionalStreaming(
                request: StreamingClientRequest(of: Etcdserverpb_LeaseKeepAliveRequest.self) { writer in
                    try await writer.write(.with { $0.id = id })
                },
                descriptor: MethodDescriptor(
                    fullyQualifiedService: "etcdserverpb.Lease", method: "LeaseKeepAlive"),
                serializer: ProtobufSerializer(),
                deserializer: ProtobufDeserializer<Etcdserverpb_LeaseKeepAliveResponse>(), options: options
            ) { response in
                for try await answer in response.messages { return max(answer.ttl, 0) }
                throw ClusterFailure("etcd ended the keep-alive of lease \(id) without an answer")
            }
        }
    }

    /// Ends lease `id` now, deleting the keys attached to it.
    func revokeLease(_ id: Int64) async throws {
        let _: Etcdserverpb_LeaseRevokeResponse = try await call(
            "Lease", "LeaseRevoke", Etcdserverpb_LeaseRevokeRequest.with { $0.id = id })
    }

    private func call<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>(
        _ service: String, _ method: String, _ request: Request
    ) async throws -> Response {
        try await withClient(method) { client, options in
            try await client.unary(
                request: ClientRequest(message: request),
                descriptor: MethodDescriptor(
                    fullyQualifiedService: "etcdserverpb.\(service)", method: method),
                serializer: ProtobufSerializer(), deserializer: ProtobufDeserializer<Response>(),
                options: options
            ) { try $0.message }
        }
    }
}

extension Etcd.Entry {
    init(_ kv: Mvccpb_KeyValue) {
        self.init(
            key: String(decoding: kv.key, as: UTF8.self), value: kv.value,
            createRevision: kv.createRevision, modRevision: kv.modRevision, lease: kv.lease)
    }
}

/// Why cluster membership cannot do what it was asked, said plainly.
public struct ClusterFailure: Error, CustomStringConvertible, Sendable {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The files a member's TLS connections to etcd use (etcd's `--trusted-ca-file`,
/// `--cert-file` and `--key-file` on the other side): PEM, each read when the member starts.
package struct EtcdTLS: Sendable, Hashable {
    /// The certificate authority etcd's server certificate must chain to; nil: the system's
    /// trust roots.
    package var caFile: String?
    /// This member's client certificate (chain), for etcd's `--client-cert-auth`; with ``keyFile``.
    package var certificateFile: String?
    package var keyFile: String?

    package init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }

    /// The transport's TLS: etcd's certificate verified in full (its chain, and the name or
    /// address the endpoint gives), this member's certificate offered when given.
    /// - Throws: ``ClusterFailure`` naming a file that cannot be read or does not hold PEM, or
    ///   a certificate without its key (or a key without its certificate).
    package func configuration() throws -> HTTP2ClientTransport.Posix.TransportSecurity.TLS {
        guard (certificateFile == nil) == (keyFile == nil) else {
            throw ClusterFailure("a client certificate for etcd needs its key: give --etcd-cert and --etcd-key together")
        }
        for (flag, path) in [("--etcd-ca", caFile), ("--etcd-cert", certificateFile), ("--etcd-key", keyFile)] {
            guard let path else { continue }
            guard let data = FileManager.default.contents(atPath: path) else { throw ClusterFailure("\(flag) \(path): the file cannot be read") }
            guard String(decoding: data, as: UTF8.self).contains("-----BEGIN ") else { throw ClusterFailure("\(flag) \(path): not a PEM file") }
        }
        return .init(
            certificateChain: certificateFile.map { [.file(path: $0, format: .pem)] } ?? [],
            privateKey: keyFile.map { .file(path: $0, format: .pem) },
            serverCertificateVerification: .fullVerification,
            trustRoots: caFile.map { .certificates([.file(path: $0, format: .pem)]) } ?? .systemDefault)
    }
}
