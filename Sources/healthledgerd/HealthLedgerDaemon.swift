import ArgumentParser
import Foundation
import HealthLedgerCluster
import HealthLedgerGRPC
import HealthLedgerReplica
import HealthLedgerSDK
import HealthLedgerServer
import HealthLedgerWeb
import Ledger
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle
import UnixSignals

/// The HealthLedger server.
@main
struct HealthLedgerDaemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthledgerd",
        abstract: "The HealthLedger server: ledgers in LMDB under a data directory, served over the HealthLedger RPC protocol and as standard gRPC.",
        discussion: "Every option can also be set with an environment variable (shown in brackets).")

    @Option(help: "Address to listen on [HEALTHLEDGER_HOST].") var host: String?
    @Option(help: "Port to listen on, 0 for any [HEALTHLEDGER_PORT].") var port: Int?
    @Option(name: .customLong("unix-socket"), help: "Also listen on a Unix domain socket at this path, for clients on this host (`unix:PATH` in the SDK, the CLI's --host and the C client); no TLS on it [HEALTHLEDGER_UNIX_SOCKET].") var unixSocket: String?
    @Option(name: .customLong("unix-socket-mode"), help: "Permission bits of the --unix-socket file, octal [HEALTHLEDGER_UNIX_SOCKET_MODE] (default 660: its owner and group may connect).") var unixSocketMode: String?
    @Option(name: .customLong("web-port"), help: "Port of the owners' web app, on the listen address with the same TLS; 0 for any, --web-port=-1 disables it [HEALTHLEDGER_WEB_PORT] (default 7413).") var webPort: Int?
    @Option(name: .customLong("grpc-port"), help: "Port of the same methods as standard gRPC over HTTP/2 (with health and reflection), on the listen address with the same TLS; 0 for any, --grpc-port=-1 disables it [HEALTHLEDGER_GRPC_PORT] (default 7412).") var grpcPort: Int?
    @Option(name: .customLong("data-dir"), help: "The data directory [HEALTHLEDGER_DATA_DIR] (default ./data).") var dataDirectory: String?
    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain; enables TLS with --tls-key [HEALTHLEDGER_TLS_CERT].") var tlsCertificate: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key [HEALTHLEDGER_TLS_KEY].") var tlsKey: String?
    @Option(name: .customLong("tls-ca"), help: "PEM roots --tls-cert chains to, when that file holds no CA: the web app's calls to this server verify against them (default: in a cluster --follow-tls-ca, else the certificate itself) [HEALTHLEDGER_TLS_CA].") var tlsAuthority: String?
    @Option(name: .customLong("max-frame-size"), help: "Largest frame in bytes [HEALTHLEDGER_MAX_FRAME_SIZE] (default 4 MiB).") var maximumFrameSize: Int?
    @Option(name: .customLong("max-calls"), help: "Concurrent calls per connection [HEALTHLEDGER_MAX_CALLS] (default 128).") var maximumCalls: Int?
    @Option(name: .customLong("max-calls-per-credential"), help: "Calls one credential may have running at once, over all its connections [HEALTHLEDGER_MAX_CALLS_PER_CREDENTIAL] (default 512).") var maximumCallsPerCredential: Int?
    @Option(name: .customLong("max-writes-per-second"), help: "Write calls (saves, deletes, …) one credential may make per second, 0 for no limit [HEALTHLEDGER_MAX_WRITES_PER_SECOND] (default 0).") var maximumWritesPerSecond: Int?
    @Option(name: .customLong("idle-timeout"), help: "Seconds before an idle connection is closed [HEALTHLEDGER_IDLE_TIMEOUT] (default 300).") var idleTimeout: Int?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error [HEALTHLEDGER_LOG_LEVEL] (default info).") var logLevel: String?
    @Option(name: .customLong("master-key-file"), help: "The master key that encrypts the ledgers at rest: a file of 64 hex digits, readable by its owner only (`healthledger admin new-master-key` makes one) [HEALTHLEDGER_MASTER_KEY_FILE]; without one, ledgers are stored clear.") var masterKeyFile: String?
    @Option(name: .customLong("access-retention-days"), help: "Days the access records (who read what) are kept [HEALTHLEDGER_ACCESS_RETENTION_DAYS] (default 2192, six years).") var accessRetentionDays: Int?
    @Option(name: .customLong("max-open-ledgers"), help: "Most ledgers open at once, about four descriptors and 90 KiB each; past it the least recently used close [HEALTHLEDGER_MAX_OPEN_LEDGERS] (default 8192, fewer when the descriptor limit is below 36,864).") var maximumOpenLedgers: Int?
    @Option(name: .customLong("ledger-idle-timeout"), help: "Seconds before an unused ledger is closed (it opens again on its next call) [HEALTHLEDGER_LEDGER_IDLE_TIMEOUT] (default 60).") var ledgerIdleTimeout: Int?
    @Option(name: .customLong("metrics-port"), help: "Port of the Prometheus /metrics endpoint, with /healthz (live) and /readyz (ready), on the listen address; --metrics-port=-1 disables it [HEALTHLEDGER_METRICS_PORT] (default 9411).") var metricsPort: Int?

    @Option(name: .customLong("follow"), help: "Follow every ledger of the primary at HOST:PORT (its RPC port): copy each from a snapshot, tail its log, serve reads and refuse writes naming the primary [HEALTHLEDGER_FOLLOW]; needs --follow-credential-file.") var follow: String?
    @Option(name: .customLong("follow-credential-file"), help: "A file holding an operator credential of the primary, for --follow [HEALTHLEDGER_FOLLOW_CREDENTIAL_FILE].") var followCredentialFile: String?
    @Option(name: .customLong("follow-tls-ca"), help: "PEM roots to verify the primary's (or, in a cluster, the other members') TLS certificate with; without it the connection is plain TCP [HEALTHLEDGER_FOLLOW_TLS_CA].") var followTLSCA: String?
    @Option(name: [.customLong("node-id"), .customLong("node-name")], help: "This server's name, unique in its cluster, as its primary's acknowledgements know it [HEALTHLEDGER_NODE_ID] (default: the host name).") var nodeName: String?

    @Option(name: .customLong("etcd"), help: "Join a cluster on etcd, http://HOST:PORT[,…] or, over TLS, https://HOST:PORT[,…]: the ledgers' 16 placement groups are shared out over the members, each group's primary takes its writes and the others follow it, and the group's synchronous standby takes over when its primary fails [HEALTHLEDGER_ETCD]; needs --cluster-credential-file and --advertise.") var etcd: String?
    @Option(name: .customLong("etcd-ca"), help: "PEM: the CA etcd's server certificate chains to, for https:// endpoints (default: the system's trust roots) [HEALTHLEDGER_ETCD_CA].") var etcdCA: String?
    @Option(name: .customLong("etcd-cert"), help: "PEM: this member's client certificate for etcd (its --client-cert-auth), with --etcd-key [HEALTHLEDGER_ETCD_CERT].") var etcdCertificate: String?
    @Option(name: .customLong("etcd-key"), help: "PEM: the private key of --etcd-cert [HEALTHLEDGER_ETCD_KEY].") var etcdKey: String?
    @Option(name: .customLong("cluster"), help: "The cluster's name: its keys on etcd are under /healthledger/NAME/ [HEALTHLEDGER_CLUSTER] (default healthledger).") var cluster: String?
    @Option(name: .customLong("advertise"), help: "HOST:PORT where clients and the other members reach this server's RPC port, for --etcd; HOST:0 names the port it listens on [HEALTHLEDGER_ADVERTISE].") var advertise: String?
    @Option(name: .customLong("cluster-credential-file"), help: "A file holding an operator credential shared by every member of the cluster, with which they fetch from each other; this server accepts it too [HEALTHLEDGER_CLUSTER_CREDENTIAL_FILE].") var clusterCredentialFile: String?
    @Option(name: .customLong("lease-seconds"), help: "Time to live of this member's lease on etcd: a failed leader is replaced about this long after it stopped [HEALTHLEDGER_LEASE_SECONDS] (default 5).") var leaseSeconds: Int?
    @Option(name: .customLong("replicas"), help: "How many members of the cluster keep each ledger, its primary included (every member when there are no more); the members use the largest any of them gives [HEALTHLEDGER_REPLICAS] (default 3).") var replicas: Int?
    @Option(name: .customLong("replication-acks"), help: "When a durable write on a ledger with a connected follower is answered: semi-sync (once a follower has it durable too) or async (once the primary has) [HEALTHLEDGER_REPLICATION_ACKS] (default semi-sync).") var replicationAcks: String?
    @Option(name: .customLong("follower-window"), help: "Seconds a follower counts as connected after its last fetch, and the longest a semi-synchronous write waits for one [HEALTHLEDGER_FOLLOWER_WINDOW] (default 5).") var followerWindow: Int?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        func setting(_ flag: String?, _ name: String) -> String? { flag ?? environment["HEALTHLEDGER_\(name)"] }
        func number(_ flag: Int?, _ name: String) throws -> Int? {
            if let flag { return flag }
            guard let text = environment["HEALTHLEDGER_\(name)"] else { return nil }
            guard let value = Int(text) else { throw ValidationError("HEALTHLEDGER_\(name) must be a number, got '\(text)'") }
            return value
        }
        /// A port flag's value: 0 to 65535 (0: any free port), or -1 where `disables` says what -1 turns off.
        func portNumber(_ flag: Int?, _ name: String, option: String, default value: Int, disables: String? = nil) throws -> Int {
            let port = try number(flag, name) ?? value
            guard (0...65_535).contains(port) || (port == -1 && disables != nil) else {
                throw ValidationError("\(option) must be a port number (0 to 65535)\(disables.map { ", or -1 to disable \($0)" } ?? ""), not \(port)")
            }
            return port
        }

        let levelName = setting(logLevel, "LOG_LEVEL") ?? "info"
        guard let level = Logger.Level(rawValue: levelName) else {
            throw ValidationError("--log-level '\(levelName.prefix(40))' is not one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        LoggingSystem.bootstrap { label in BufferedLogHandler(label: label, level: level) }
        defer { LogSink.shared.flush() }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(Self.metricsFactory(registry))
        let logger = Logger(label: "healthledgerd")

        var configuration = ServerConfiguration()
        configuration.callLineWriter = { BufferedLogHandler.write($0) }
        configuration.host = setting(host, "HOST") ?? configuration.host
        configuration.port = try portNumber(port, "PORT", option: "--port", default: configuration.port)
        configuration.maximumFrameSize = try number(maximumFrameSize, "MAX_FRAME_SIZE") ?? configuration.maximumFrameSize
        configuration.maximumConcurrentCalls = try number(maximumCalls, "MAX_CALLS") ?? configuration.maximumConcurrentCalls
        configuration.maximumCallsPerCredential = try number(maximumCallsPerCredential, "MAX_CALLS_PER_CREDENTIAL") ?? configuration.maximumCallsPerCredential
        configuration.maximumWritesPerSecond = try number(maximumWritesPerSecond, "MAX_WRITES_PER_SECOND") ?? configuration.maximumWritesPerSecond
        guard configuration.maximumCallsPerCredential >= 1, configuration.maximumWritesPerSecond >= 0 else {
            throw ValidationError("--max-calls-per-credential must be at least 1 and --max-writes-per-second at least 0")
        }
        if let path = setting(unixSocket, "UNIX_SOCKET"), !path.isEmpty {
            let modeText = setting(unixSocketMode, "UNIX_SOCKET_MODE") ?? "660"
            guard let mode = UInt16(modeText, radix: 8), mode <= 0o777 else {
                throw ValidationError("--unix-socket-mode takes permission bits in octal, 0 to 777, like 660; got '\(modeText.prefix(20))'")
            }
            configuration.unixSocket = .init(path: path, mode: mode)
        } else if setting(unixSocketMode, "UNIX_SOCKET_MODE") != nil {
            throw ValidationError("--unix-socket-mode goes with --unix-socket")
        }
        let idleSeconds = try number(idleTimeout, "IDLE_TIMEOUT") ?? 300
        configuration.idleTimeout = .seconds(idleSeconds)
        switch (setting(tlsCertificate, "TLS_CERT"), setting(tlsKey, "TLS_KEY")) {
        case (let certificate?, let key?):
            // In a cluster, the CA the members check each other with issued this one's too (a
            // follower's --follow-tls-ca is its primary's, which may be another).
            let clustered = !(setting(etcd, "ETCD") ?? "").isEmpty
            let authority = setting(tlsAuthority, "TLS_CA").map { ($0, "--tls-ca") }
                ?? (clustered ? setting(followTLSCA, "FOLLOW_TLS_CA").map { ($0, "--follow-tls-ca") } : nil)
            if let (file, flag) = authority, !FileManager.default.isReadableFile(atPath: file) {
                throw ValidationError("\(flag) \(file) cannot be read")
            }
            configuration.tls = .init(certificateChain: certificate, privateKey: key, authority: authority?.0)
        case (nil, nil):
            guard setting(tlsAuthority, "TLS_CA") == nil else { throw ValidationError("--tls-ca goes with --tls-cert and --tls-key") }
        default: throw ValidationError("TLS needs both --tls-cert and --tls-key")
        }
        guard configuration.maximumFrameSize >= 1024, configuration.maximumConcurrentCalls >= 1, idleSeconds >= 1 else {
            throw ValidationError("--max-frame-size must be at least 1024, --max-calls at least 1 and --idle-timeout at least 1 (seconds)")
        }

        let acknowledgement = setting(replicationAcks, "REPLICATION_ACKS") ?? ServerConfiguration.ReplicationAcknowledgement.semiSynchronous.rawValue
        guard let acknowledgementValue = ServerConfiguration.ReplicationAcknowledgement(rawValue: acknowledgement) else {
            throw ValidationError("--replication-acks is semi-sync or async, got '\(acknowledgement.prefix(40))'")
        }
        configuration.replicationAcknowledgement = acknowledgementValue
        let windowSeconds = try number(followerWindow, "FOLLOWER_WINDOW") ?? 5
        guard windowSeconds >= 1 else { throw ValidationError("--follower-window must be at least 1 (seconds)") }
        configuration.followerWindow = .seconds(windowSeconds)
        let trustRoots = setting(followTLSCA, "FOLLOW_TLS_CA")
        let primary = try Self.primary(
            address: setting(follow, "FOLLOW"), credentialFile: setting(followCredentialFile, "FOLLOW_CREDENTIAL_FILE"), trustRoots: trustRoots)
        configuration.primaryAddress = primary.map { "\($0.host):\($0.port)" }
        let nodeID = setting(nodeName, "NODE_ID") ?? environment["HEALTHLEDGER_NODE_NAME"] ?? ProcessInfo.processInfo.hostName
        let membership = try Self.membership(
            etcd: setting(etcd, "ETCD"), cluster: setting(cluster, "CLUSTER"), node: nodeID, advertise: setting(advertise, "ADVERTISE"),
            credentialFile: setting(clusterCredentialFile, "CLUSTER_CREDENTIAL_FILE"), leaseSeconds: try number(leaseSeconds, "LEASE_SECONDS"),
            replicas: try number(replicas, "REPLICAS"), tls: EtcdTLS(caFile: setting(etcdCA, "ETCD_CA"), certificateFile: setting(etcdCertificate, "ETCD_CERT"), keyFile: setting(etcdKey, "ETCD_KEY")))
        if let membership {
            guard primary == nil else { throw ValidationError("--etcd and --follow exclude each other: in a cluster, members follow its leader") }
            guard configuration.tls == nil || trustRoots != nil else {
                throw ValidationError("a cluster over TLS (--tls-cert) needs --follow-tls-ca: the CA its members check each other's certificates with")
            }
            guard acknowledgementValue == .semiSynchronous else {
                throw ValidationError("a cluster answers writes semi-synchronously (its standby must have them to take over): leave --replication-acks out")
            }
            configuration.cluster = ClusterRole(node: nodeID, cluster: membership.configuration.cluster, followerWindow: configuration.followerWindow)
        }

        let grpcPortValue = try portNumber(grpcPort, "GRPC_PORT", option: "--grpc-port", default: GRPCEndpoint.defaultPort, disables: "gRPC")
        let webPortValue = try portNumber(webPort, "WEB_PORT", option: "--web-port", default: WebEndpoint.defaultPort, disables: "the web app")
        let metricsPortValue = try portNumber(metricsPort, "METRICS_PORT", option: "--metrics-port", default: 9411, disables: "metrics")

        let path = setting(dataDirectory, "DATA_DIR") ?? "data"
        let commitBatch = Recorder(label: "healthledger_group_commit_requests")
        let commitTime = Timer(label: "healthledger_group_commit_seconds")
        var ledgerConfiguration = LedgerConfiguration(onCommit: { requests, duration in
            commitBatch.record(requests)
            commitTime.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
        })
        let retentionDays = try number(accessRetentionDays, "ACCESS_RETENTION_DAYS") ?? 2192
        guard retentionDays >= 1 else { throw ValidationError("--access-retention-days must be at least 1") }
        ledgerConfiguration.accessRetention = Double(retentionDays) * 86_400
        ledgerConfiguration.maximumOpenLedgers = try number(maximumOpenLedgers, "MAX_OPEN_LEDGERS") ?? Self.openLedgersTheDescriptorsAllow()
        let ledgerIdleSeconds = try number(ledgerIdleTimeout, "LEDGER_IDLE_TIMEOUT") ?? 60
        guard ledgerConfiguration.maximumOpenLedgers >= 1, ledgerIdleSeconds >= 1 else {
            throw ValidationError("--max-open-ledgers and --ledger-idle-timeout must be at least 1")
        }
        ledgerConfiguration.ledgerIdleLifetime = .seconds(ledgerIdleSeconds)
        let store: LedgerStore
        do {
            // An empty setting is no setting (as an unset variable).
            ledgerConfiguration.masterKey = try setting(masterKeyFile, "MASTER_KEY_FILE").flatMap { $0.isEmpty ? nil : $0 }.map(MasterKey.load(from:))
            store = try LedgerStore(directory: URL(filePath: path, directoryHint: .isDirectory), configuration: ledgerConfiguration, logger: logger)
        } catch let failure as LedgerFailure {
            throw ValidationError(failure.message)
        }
        // Backups taken here name this server (and its cluster).
        do {
            try NodeIdentity(node: nodeID, cluster: membership?.configuration.cluster).write(to: store.directory)
        } catch let failure as LedgerFailure {
            throw ValidationError(failure.message)
        }
        let ledgers = try store.ledgerIDs().count
        logger.info("data directory", metadata: ["path": "\(store.directory.path)", "ledgers": "\(ledgers)"])
        if let masterKey = ledgerConfiguration.masterKey {
            logger.info("encryption at rest: on", metadata: ["master_key_file": "\(masterKey.path)", "master_key_id": "\(masterKey.id)"])
        } else {
            logger.warning("encryption at rest: off (no --master-key-file): health data is stored clear")
        }
        // Made before the server answers: from then on its reads are on the record on the primary too.
        let follower = primary.map { primary in PrimaryFollower(store: store, primary: primary, name: nodeID, logger: logger) }
        let rpc = RPCServer(store: store, configuration: configuration, logger: logger)
        // Bound first: the web app's calls reach this port (the bound one, when it is 0).
        let rpcAddress = try await rpc.start()
        var services: [any Service] = [rpc]
        if grpcPortValue >= 0 {
            services.append(GRPCEndpoint(store: store, configuration: configuration, port: grpcPortValue, logger: logger))
        }
        var joining: ClusterMember?
        if let membership, let role = configuration.cluster {
            var memberConfiguration = membership.configuration
            memberConfiguration.followerWindow = configuration.followerWindow
            // HOST:0 advertises the port the server bound.
            if memberConfiguration.advertise.hasSuffix(":0") {
                memberConfiguration.advertise = "\(memberConfiguration.advertise.dropLast())\(rpcAddress.port ?? configuration.port)"
            }
            do {
                try store.trustOperatorCredential(membership.credential, label: "cluster \(memberConfiguration.cluster)")
                joining = try ClusterMember(
                    configuration: memberConfiguration, store: store, role: role, logger: logger,
                    peer: { address in Self.peer(address, credential: membership.credential, trustRoots: trustRoots) })
            } catch {
                throw ValidationError("cannot join the cluster: \(error)")
            }
        }
        let member = joining
        if metricsPortValue >= 0 {
            services.append(
                MetricsEndpoint(
                    host: configuration.host, port: metricsPortValue, registry: registry, store: store, unreadiness: { follower?.unreadiness ?? member?.unreadiness },
                    logger: logger))
        }
        // Last, so that it stops first (a service group stops its services in reverse order).
        if webPortValue >= 0 {
            services.append(WebEndpoint(configuration: configuration, rpcPort: rpcAddress.port ?? configuration.port, port: webPortValue, logger: logger))
        }
        if let primary, let follower {
            logger.info("following a primary", metadata: ["primary": "\(primary.host):\(primary.port)"])
            services.append(follower)
        }
        if let member {
            logger.info("joining a cluster", metadata: ["etcd": "\(membership?.configuration.etcd ?? "")", "node": "\(nodeID)"])
            services.append(member)
        }
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        // The calls have drained: what they noted of reads is written before the process ends,
        // and the ledgers close (each syncs its data file and removes its commit journal).
        store.flushAccessRecords()
        store.closeAllLedgers()
    }

    /// Where `--follow` points, with the operator credential read from its file; nil without `--follow`.
    static func primary(address: String?, credentialFile: String?, trustRoots: String?) throws -> HealthStoreConfiguration? {
        guard let address, !address.isEmpty else {
            guard credentialFile == nil else { throw ValidationError("--follow-credential-file is for --follow, which is not set") }
            return nil
        }
        guard let (host, port) = HealthStoreConfiguration.address(address) else {
            throw ValidationError("--follow takes the primary's HOST:PORT, got '\(address.prefix(100))'")
        }
        guard let credentialFile else { throw ValidationError("--follow needs --follow-credential-file: an operator credential of the primary") }
        let credential = try operatorCredential(in: credentialFile, flag: "--follow-credential-file")
        return peer("\(host):\(port)", credential: credential, trustRoots: trustRoots)
    }

    /// How this server reaches another's RPC to follow it: a fetch waits up to 10 s there,
    /// and the call's deadline is well past it.
    static func peer(_ address: String, credential: String, trustRoots: String?) -> HealthStoreConfiguration {
        let (host, port) = HealthStoreConfiguration.address(address) ?? (address, 0)
        return HealthStoreConfiguration(
            host: host, port: port, credential: credential, timeout: .seconds(60), tls: trustRoots.map { .init(trustRoots: $0) },
            keepaliveInterval: .seconds(10))
    }

    static func operatorCredential(in file: String, flag: String) throws -> String {
        let credential: String
        do {
            credential = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            throw ValidationError("cannot read \(flag) \(file): \(error.localizedDescription)")
        }
        guard credential.hasPrefix("hl1:_operator:") else {
            throw ValidationError("\(flag) \(file) does not hold an operator credential (hl1:_operator:…)")
        }
        return credential
    }

    /// The cluster this server joins with `--etcd`, and the credential its members share; nil without `--etcd`.
    static func membership(
        etcd: String?, cluster: String?, node: String, advertise: String?, credentialFile: String?, leaseSeconds: Int?, replicas: Int? = nil,
        tls: EtcdTLS = EtcdTLS()
    ) throws -> (configuration: ClusterMember.Configuration, credential: String)? {
        guard let etcd, !etcd.isEmpty else {
            guard cluster == nil, advertise == nil, credentialFile == nil, leaseSeconds == nil, replicas == nil, tls == EtcdTLS() else {
                throw ValidationError(
                    "--cluster, --advertise, --cluster-credential-file, --lease-seconds, --replicas, --etcd-ca, --etcd-cert and --etcd-key are for --etcd, which is not set")
            }
            return nil
        }
        // The endpoints and TLS files checked now, with the flags' names.
        do {
            let secure = try Etcd.parse(etcd).contains(where: \.secure)
            if tls != EtcdTLS() {
                guard secure else { throw ValidationError("--etcd-ca, --etcd-cert and --etcd-key are for https:// endpoints, not '\(etcd.prefix(200))'") }
                _ = try tls.configuration()
            }
        } catch let failure as ClusterFailure {
            throw ValidationError(failure.description)
        }
        guard let advertise else { throw ValidationError("--etcd needs --advertise HOST:PORT: where clients and the other members reach this server") }
        // HOST:0: the port it binds.
        guard HealthStoreConfiguration.address(advertise.hasSuffix(":0") ? "\(advertise.dropLast())1" : advertise) != nil else {
            throw ValidationError("--advertise takes HOST:PORT, got '\(advertise.prefix(100))'")
        }
        guard let credentialFile else {
            throw ValidationError("--etcd needs --cluster-credential-file: an operator credential the members share (healthledger admin issue-operator-credential makes one)")
        }
        let credential = try operatorCredential(in: credentialFile, flag: "--cluster-credential-file")
        var configuration = ClusterMember.Configuration(etcd: etcd, node: node, advertise: advertise)
        (configuration.etcdCAFile, configuration.etcdCertificateFile, configuration.etcdKeyFile) = (tls.caFile, tls.certificateFile, tls.keyFile)
        if let cluster {
            guard !cluster.isEmpty, cluster.utf8.count <= 64, cluster.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                throw ValidationError("--cluster is 1–64 letters, digits, '-' or '_', got '\(cluster.prefix(70))'")
            }
            configuration.cluster = cluster
        }
        if let leaseSeconds {
            guard (2...600).contains(leaseSeconds) else { throw ValidationError("--lease-seconds is 2 to 600, got \(leaseSeconds)") }
            configuration.leaseSeconds = Int64(leaseSeconds)
        }
        if let replicas {
            // A failover needs a standby: a copy besides the primary's.
            guard (2...16).contains(replicas) else { throw ValidationError("--replicas is 2 to 16 (a primary and at least one standby), got \(replicas)") }
            configuration.replicas = replicas
        }
        return (configuration, credential)
    }

    /// The default bound on open ledgers: 8,192, or fewer when the process may not open
    /// enough descriptors for them (four each: `data.mdb` twice, `lock.mdb`, `commits.journal`)
    /// and 4,096 more for connections and files.
    /// The soft descriptor limit is raised to the hard one first.
    static func openLedgersTheDescriptorsAllow() -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 8_192 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let descriptors = Int(clamping: limit.rlim_cur)
        return min(8_192, max(16, (descriptors - 4_096) / 4))
    }

    /// The Prometheus factory with buckets fit for what is measured: a call takes from tens of
    /// microseconds (a ping) to seconds (a large import batch), a group commit about a
    /// millisecond, and a commit takes from one request to hundreds (the library's defaults
    /// start at 5 ms and at 5 requests).
    static func metricsFactory(_ registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        factory.valueHistogramBuckets["healthledger_group_commit_requests"] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
        return factory
    }
}
