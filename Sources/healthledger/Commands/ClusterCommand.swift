import ArgumentParser
import Foundation
import HealthLedgerSDK

/// `healthledger cluster status`: a cluster on etcd, from any member, with an operator credential.
struct ClusterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster", abstract: "A cluster of servers on etcd (with an operator --credential).",
        subcommands: [Status.self])

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show the cluster: its members, the leader and its epoch, the synchronous standby, and the ledgers in use with their followers.",
            discussion: """
                Asks the server given (any member; --other-server for more), then the leader it names, whose view has the \
                followers' progress: whether each watches the leader's ledgers and how many changes it has not applied yet, \
                and for each ledger open on the leader (in use lately), how far each follower has it durable (lag, in events) \
                and whether it is connected.
                """)
        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            try await connection.withStore { store in
                var status = try await store.clusterStatus()
                if status.role != "leader", let address = status.leaderAddress, let (host, port) = HealthStoreConfiguration.address(address) {
                    print("asked \(status.node), a \(status.role); the leader's view:")
                    var configuration = try connection.configuration()
                    (configuration.host, configuration.port, configuration.otherServers) = (host, port, [])
                    let leader = HealthStore(configuration: configuration)
                    defer { Task { await leader.close() } }
                    status = try await leader.clusterStatus()
                }
                for line in Self.lines(status) { print(line) }
            }
        }

        static func lines(_ status: ClusterStatus) -> [String] {
            var lines = [
                "cluster \(status.cluster)",
                "leader  \(status.leader.map { "\($0) at \(status.leaderAddress ?? "?")" } ?? "none (electing)")  epoch \(status.epoch)",
                "standby \(status.standby ?? "none")" + (status.pendingStandby.map { "  (making \($0) the standby)" } ?? ""),
                "members",
            ]
            let leading = status.role == "leader"
            for member in status.members {
                let role = member.node == status.leader ? "leader" : member.node == status.standby ? "standby" : "follower"
                let progress =
                    !leading || role == "leader" ? ""
                    : member.watching ? "\t\(member.changesBehind) change\(member.changesBehind == 1 ? "" : "s") behind" : "\tnot watching"
                lines.append("  \(member.node)\t\(member.address)\t\(role)\(progress)")
            }
            lines.append("ledgers \(status.ledgerCount), \(status.ledgers.count) in use")
            for ledger in status.ledgers {
                let followers = ledger.followers.map { follower in
                    let lag = ledger.headSequence > follower.acknowledgedSequence ? ledger.headSequence - follower.acknowledgedSequence : 0
                    return "\(follower.node) lag \(lag)\(follower.connected ? "" : " (not connected)")"
                }
                lines.append("  \(ledger.id)\thead \(ledger.headSequence)" + (followers.isEmpty ? "" : "\t" + followers.joined(separator: ", ")))
            }
            return lines
        }
    }
}
