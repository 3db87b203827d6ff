import ArgumentParser

/// The benchmarks: the TARGETS report against a separate server and the peers, the ledger
/// in process, and the Apple Health import.
@main
struct HealthLedgerBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthledger-bench",
        abstract: "HealthLedger's benchmarks (build with -c release; tools/bench.sh builds and runs them).",
        subcommands: [ReportCommand.self, LedgerBenchCommand.self, ImportBenchCommand.self, GRPCBenchCommand.self, WebBenchCommand.self, ManyLedgersBenchCommand.self, ReplicationBenchCommand.self, FailoverBenchCommand.self, SeriesBenchCommand.self],
        defaultSubcommand: ReportCommand.self)
}
