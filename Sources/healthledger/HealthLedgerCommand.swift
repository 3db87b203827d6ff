import ArgumentParser
import Foundation
import HealthModel
import Ledger

@main
struct HealthLedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthledger",
        abstract: "Manage HealthLedger ledgers: create, verify, replay, convert units, benchmark.",
        subcommands: [
            LedgerCommand.self, AdminCommand.self, AuthCommand.self, PingCommand.self, SaveCommand.self, QueryCommand.self, ChangesCommand.self, WatchCommand.self, StatsCommand.self, CharacteristicsCommand.self, AttachmentCommand.self, WorkoutCommand.self, VerifyCommand.self, ReplayCommand.self, LogCommand.self, UnitCommand.self,
            BenchCommand.self, DebugCommand.self,
        ])
}

/// Options shared by commands that work on a data directory.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "The data directory (default: $HEALTHLEDGER_DATA_DIR or ./data).")
    var dataDirectory: String?

    var directory: URL {
        let path = dataDirectory ?? ProcessInfo.processInfo.environment["HEALTHLEDGER_DATA_DIR"] ?? "data"
        return URL(filePath: path, directoryHint: .isDirectory)
    }

    func openStore() throws -> LedgerStore {
        try LedgerStore(directory: directory)
    }
}

/// Prints one clear line to standard error and exits non-zero.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) { self.description = description }

    init(_ error: any Error) {
        switch error {
        case let error as HealthError: description = error.message
        case let error as LedgerFailure: description = error.message
        default: description = "\(error)"
        }
    }
}

func fail(_ error: any Error) -> any Error {
    if error is ExitCode || error is CommandFailure { return error }
    return ValidationErrorExit(CommandFailure(error).description)
}

/// An error ArgumentParser prints as `Error: <message>` with exit code 1.
struct ValidationErrorExit: LocalizedError, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
    var errorDescription: String? { message }
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
