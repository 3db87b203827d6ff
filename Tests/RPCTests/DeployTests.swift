import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger
import Testing

extension ClusterTests {
    /// The environment of the `healthledgerd` container of the cluster's StatefulSet
    /// (Deploy/kubernetes/healthledger-cluster.yaml), as written there: `NAME: value` for each
    /// `- {name: HEALTHLEDGER_…, value: …}` (the node id, from the pod's name, is not among them).
    static func clusterManifestEnvironment() throws -> [String: String] {
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appending(path: "Deploy/kubernetes/healthledger-cluster.yaml"), encoding: .utf8)
        var environment: [String: String] = [:]
        for match in text.matches(of: /- \{name: (HEALTHLEDGER_[A-Z_]+), value: "?([^"}]*)"?\}/) {
            environment[String(match.1)] = String(match.2).trimmingCharacters(in: .whitespaces)
        }
        return environment
    }

    @Test("the cluster StatefulSet's settings on loopback: its environment, its secrets' files as Kubernetes mounts them (0440, owned by root, for the pod's group), three members ready, saves and reads over TLS through any member, the web app signs in")
    func kubernetesSettings() async throws {
        let base = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-deploy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let manifest = try Self.clusterManifestEnvironment()
        let tls = try TLSFiles.make(in: base.appending(path: "tls"))
        let etcd = try await EtcdMembers(count: 1, directory: base.appending(path: "etcd"))
        defer { etcd.stop() }

        // The Secrets' files: the manifest's defaultMode 0400 plus the group's read that
        // Kubernetes adds for the pod's fsGroup, owned by root (when the tests run as root).
        let secrets = base.appending(path: "secrets")
        try FileManager.default.createDirectory(at: secrets, withIntermediateDirectories: true)
        let key = try MasterKey.create(at: secrets.appending(path: "master.key").path)
        var encrypted = LedgerConfiguration()
        encrypted.masterKey = key
        let operatorCredential = try LedgerStore(directory: base.appending(path: "healthledgerd-0"), configuration: encrypted).issueOperatorCredential(label: "cluster")
        let credentialFile = secrets.appending(path: "cluster-operator")
        try operatorCredential.write(to: credentialFile, atomically: true, encoding: .utf8)
        for file in [key.path, credentialFile.path, tls.serverKey.path] {
            if getuid() == 0 {
                chmod(file, 0o440)
                chown(file, 0, 999)
            } else {
                // Not root, the tests cannot give root a file: the key stays the user's own.
                chmod(file, 0o400)
            }
        }
        let files = [
            "/etc/healthledger/tls/tls.crt": tls.serverCertificate.path, "/etc/healthledger/tls/tls.key": tls.serverKey.path,
            "/etc/healthledger/tls/ca.crt": tls.ca.path, "/etc/healthledger/master-key/master.key": key.path,
            "/etc/healthledger/cluster/cluster-operator": credentialFile.path,
        ]
        #expect(Set(manifest.values).isSuperset(of: files.keys), "the manifest names \(manifest)")
        var environment = manifest.mapValues { files[$0] ?? $0 }
        // What only pods have: etcd's and the members' names. The data directory is each
        // member's own (--data-dir, which comes before HEALTHLEDGER_DATA_DIR).
        environment["HEALTHLEDGER_ETCD"] = etcd.endpoints
        environment["HEALTHLEDGER_ADVERTISE"] = "127.0.0.1:0"

        var members: [DaemonProcess] = []
        defer { for member in members { member.stop() } }
        for index in 0..<3 {
            var own = environment
            own["HEALTHLEDGER_NODE_ID"] = "healthledgerd-\(index)"
            let member = try await DaemonProcess(
                dataDirectory: base.appending(path: "healthledgerd-\(index)"), environment: own, metrics: true, web: index == 0)
            member.keepLog(in: base.appending(path: "healthledgerd-\(index).log"))
            members.append(member)
        }
        // Ready, as the readiness probe asks: joined, every group led, caught up.
        for (index, member) in members.enumerated() {
            var answer: HTTPGet.Response?
            for _ in 0..<3_000 {
                answer = try? await HTTPGet.fetch(port: try #require(member.metricsPort), path: "/readyz")
                if answer?.status == 200 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(answer?.status == 200, "healthledgerd-\(index): \(answer?.body ?? "no answer")")
        }

        // Through any member over TLS, checked against the CA: a save goes to its primary.
        func client(_ credential: String, first: Int) -> HealthStoreConfiguration {
            HealthStoreConfiguration(
                port: members[first].port, credential: credential, timeout: .seconds(60), tls: .init(trustRoots: tls.ca.path),
                otherServers: members.indices.filter { $0 != first }.map { "127.0.0.1:\(members[$0].port)" })
        }
        let admin = HealthStore(configuration: client(operatorCredential, first: 1))
        #expect(try await admin.createLedger(id: "alice") == "alice")
        let ownerCredential = try await admin.issueCredential(ledger: "alice", for: .owner)
        await admin.close()
        let owner = HealthStore(configuration: client(ownerCredential, first: 2))
        try await owner.save(Samples.heartRate(72, at: 0))
        #expect(try await owner.result(for: SampleQueryDescriptor(type: Samples.heartRate.objectType)).count == 1)
        await owner.close()

        // The web app's own call over TLS verifies the certificate against the cluster's CA.
        let signedIn = try await WebEndpointTests.curl([
            "--cacert", tls.ca.path, "--data-urlencode", "credential=\(ownerCredential)", "https://127.0.0.1:\(try #require(members[0].webPort))/sign-in",
        ])
        #expect(signedIn.status == 303, "\(signedIn.status) \(signedIn.body)")
    }
}
