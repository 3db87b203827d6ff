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
            abstract:
                "Show the cluster: its members, each placement group's primary, epoch and synchronous standby, and the ledgers in use with their followers.",
            discussion: """
                A cluster spreads its ledgers over 16 placement groups (by a hash of the ledger's id); each group has one primary, \
                and the members share the groups out evenly. Asks the server given (any member; --other-server for more): its \
                view of every group, and of the followers' progress on the groups it leads (whether each watches its ledgers and \
                how many changes it has not applied yet), and for each ledger open on it (in use lately), how far each follower \
                has it durable (lag, in events) and whether it is connected. With --ledger ID, also where that ledger's group is.
                """)
        @OptionGroup var connection: ConnectionOptions
        @Option(name: .customLong("ledger"), help: "Say which placement group holds this ledger, and its primary.") var ledger: String?

        func run() async throws {
            try await connection.withStore { store in
                let status = try await store.clusterStatus()
                for line in Self.lines(status) { print(line) }
                if let ledger {
                    let group = status.group(of: ledger)
                    print(
                        "ledger \(ledger): placement group \(group.group), primary \(group.leader.map { "\($0) at \(group.leaderAddress ?? "?")" } ?? "none (electing)")"
                            + (group.keepers.isEmpty ? "" : ", kept on \(group.keepers.joined(separator: ","))")
                    )
                }
            }
        }

        static func lines(_ status: ClusterStatus) -> [String] {
            var lines = ["cluster \(status.cluster), asked \(status.node) (\(status.role))", "members"]
            for member in status.members {
                let progress =
                    member.node == status.node || member.leads.count == status.groups.count ? ""
                    : member.watching ? "\t\(member.changesBehind) change\(member.changesBehind == 1 ? "" : "s") behind"
                    : status.role == "follower" || status.role == "electing" ? "" : "\tnot watching"
                lines.append("  \(member.node)\t\(member.address)\tleads \(member.leads.count) group\(member.leads.count == 1 ? "" : "s")\(progress)")
            }
            lines.append("groups  (group: primary, epoch, standby, placed on, kept on, ledgers here)")
            for group in status.groups {
                let standby = (group.standby ?? "none") + (group.pendingStandby.map { " (making \($0) the standby)" } ?? "")
                let placed = group.placedOn.map { $0 == group.leader ? "" : "\tplaced on \($0)" } ?? ""
                let kept = group.keepers.isEmpty ? "" : "\tkept on \(group.keepers.joined(separator: ","))"
                lines.append(
                    "  \(group.group)\t\(group.leader ?? "none (electing)")\tepoch \(group.epoch)\tstandby \(standby)\(placed)\(kept)\t\(group.ledgerCount) ledger\(group.ledgerCount == 1 ? "" : "s")")
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
