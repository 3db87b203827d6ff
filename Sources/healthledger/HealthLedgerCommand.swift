import ArgumentParser
import Foundation
import HealthModel
import Ledger

@main
struct HealthLedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthledger",
        abstract: "Manage HealthLedger ledgers: create, verify, replay, back up and restore; import and export; query and save through the server.",
        subcommands: [
            LedgerCommand.self, AdminCommand.self, ClusterCommand.self, AuthCommand.self, PingCommand.self, SaveCommand.self, QueryCommand.self, SourcesCommand.self, ActivityCommand.self, DeleteCommand.self, EraseCommand.self, CorrelationCommand.self, ImportCommand.self, ExportCommand.self, ChangesCommand.self, WatchCommand.self, StatsCommand.self, CharacteristicsCommand.self, AttachmentCommand.self, WorkoutCommand.self, VerifyCommand.self, ReplayCommand.self, BackupCommand.self, RestoreCommand.self, LogCommand.self, AuditCommand.self, ProofCommand.self, UnitCommand.self, TypesCommand.self,
            DebugCommand.self,
        ])
}

/// Options shared by commands that work on a data directory.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "The data directory (default: $HEALTHLEDGER_DATA_DIR or ./data).")
    var dataDirectory: String?
    @Option(name: .customLong("master-key-file"), help: "The master key of an encrypted data directory (default: $HEALTHLEDGER_MASTER_KEY_FILE).")
    var masterKeyFile: String?

    var directory: URL {
        let path = dataDirectory ?? ProcessInfo.processInfo.environment["HEALTHLEDGER_DATA_DIR"] ?? "data"
        return URL(filePath: path, directoryHint: .isDirectory)
    }

    /// The store of an existing data directory: a command that reads or changes ledgers
    /// never makes one where a path was mistyped.
    func openStore(adjusting adjust: (inout LedgerConfiguration) -> Void = { _ in }) throws -> LedgerStore {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ValidationErrorExit(
                "no data directory at \(directory.path) (give --data-dir or HEALTHLEDGER_DATA_DIR; `healthledger admin create-ledger` makes one)")
        }
        var configuration = try configuration()
        adjust(&configuration)
        return try LedgerStore(directory: directory, configuration: configuration)
    }

    /// The master key file given, if any.
    var masterKeyPath: String? {
        (masterKeyFile ?? ProcessInfo.processInfo.environment["HEALTHLEDGER_MASTER_KEY_FILE"]).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The ledgers' settings for these options: the master key, when given.
    func configuration() throws -> LedgerConfiguration {
        var configuration = LedgerConfiguration()
        configuration.masterKey = try masterKeyPath.map(MasterKey.load(from:))
        return configuration
    }

    /// The store of the data directory, made when missing: for the commands that create
    /// (a ledger, an operator credential, a restored ledger).
    func createStore() throws -> LedgerStore {
        try LedgerStore(directory: directory, configuration: configuration())
    }

    /// Whether the data directory exists.
    var exists: Bool { FileManager.default.fileExists(atPath: directory.path) }
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

/// The regular file at `path`, to read: a clear error when there is none, or a directory
/// or something else is there.
func inputFile(_ path: String) throws -> URL {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { throw ValidationErrorExit("no file at \(path)") }
    guard !isDirectory.boolValue else { throw ValidationErrorExit("\(path) is a directory, not a file") }
    guard FileManager.default.isReadableFile(atPath: path) else { throw ValidationErrorExit("cannot read \(path): permission denied") }
    return URL(filePath: path)
}

/// Writes `data` to a new file at `path`: an existing file is never replaced (a pinned tree
/// head, an earlier copy), and a failed write leaves no file behind.
func writeNewFile(_ data: Data, to path: String) throws {
    guard !FileManager.default.fileExists(atPath: path) else { throw ValidationErrorExit("\(path) exists: choose a new file") }
    do {
        try data.write(to: URL(filePath: path), options: .withoutOverwriting)
    } catch {
        throw ValidationErrorExit("cannot write \(path): \(error.localizedDescription)")
    }
}

/// The JSON value in `input`, a file or `-` for standard input: an error naming the input
/// and where its JSON breaks when it is not JSON.
func jsonInput(_ input: String) throws -> Any {
    let data: Data
    if input == "-" {
        data = FileHandle.standardInput.readDataToEndOfFile()
    } else {
        do { data = try Data(contentsOf: try inputFile(input)) } catch let error as ValidationErrorExit { throw error } catch {
            throw ValidationErrorExit("cannot read \(input): \(error.localizedDescription)")
        }
    }
    do {
        return try JSONSerialization.jsonObject(with: data)
    } catch {
        let detail = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String).map { " (\($0))" } ?? ""
        throw ValidationErrorExit("\(input == "-" ? "standard input" : input) is not JSON\(detail)")
    }
}

/// An error ArgumentParser prints as `Error: <message>` with exit code 1.
struct ValidationErrorExit: LocalizedError, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
    var errorDescription: String? { message }
}

/// The UUID `text` names; `option` names the flag or argument in the error.
func parseUUID(_ text: String, _ option: String) throws -> UUID {
    guard let uuid = UUID(uuidString: text) else { throw ValidationErrorExit("\(option) is not a UUID: '\(text)'") }
    return uuid
}

/// The interval from `start` to `end`, open-ended on a missing side; nil when both are.
/// - Throws: ``ValidationErrorExit`` when `start` is after `end`.
func dateInterval(_ start: Date?, _ end: Date?) throws -> DateInterval? {
    guard start != nil || end != nil else { return nil }
    let (from, to) = (start ?? .distantPast, end ?? .distantFuture)
    guard from <= to else { throw ValidationErrorExit("--from is after --to") }
    return DateInterval(start: from, end: to)
}

/// The interval of `--from` and `--to` (ISO 8601).
func dateInterval(from: String?, to: String?) throws -> DateInterval? {
    try dateInterval(try SampleInput.date(from, "--from"), try SampleInput.date(to, "--to"))
}

func hex(_ bytes: [UInt8]) -> String { bytes.hexString }

/// An ISO 8601 date and time, or a date (midnight UTC), given as option `name`.
func parseTime(_ text: String?, _ name: String) throws -> Date? {
    guard let text else { return nil }
    if let date = parseISO8601(text, dateOnly: true) { return date }
    throw ValidationErrorExit("\(name) '\(text)' is not an ISO 8601 date or date and time")
}

/// An ISO 8601 date and time (with `dateOnly`, also a date alone: midnight UTC); nil for text
/// that is not one, including a day, hour, minute or second that does not exist, which
/// Foundation's parser would roll over (2026-02-30 into 2026-03-02, 25:00 into the next day).
func parseISO8601(_ text: String, dateOnly: Bool = false) -> Date? {
    guard calendarFieldsExist(text) else { return nil }
    if let date = try? Date(text, strategy: .iso8601) { return date }
    if dateOnly, let date = try? Date(text, strategy: .iso8601.year().month().day()) { return date }
    return nil
}

/// Whether the month, day, hour, minute and second written at the start of `text`
/// (`YYYY-MM-DD`, then `THH:MM:SS`) exist, in the proleptic Gregorian calendar. Text of
/// another shape is left to the parser.
private func calendarFieldsExist(_ text: String) -> Bool {
    let bytes = Array(text.utf8.prefix(19))
    func number(_ range: Range<Int>) -> Int? {
        guard range.upperBound <= bytes.count, range.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[$0]) }) else { return nil }
        return range.reduce(0) { $0 * 10 + Int(bytes[$1] - UInt8(ascii: "0")) }
    }
    guard bytes.count >= 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), let year = number(0..<4), let month = number(5..<7),
        let day = number(8..<10)
    else { return true }
    guard (1...12).contains(month) else { return false }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    guard (1...[31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]).contains(day) else { return false }
    guard bytes.count >= 19, bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), let hour = number(11..<13), let minute = number(14..<16),
        let second = number(17..<19)
    else { return true }
    return hour <= 23 && minute <= 59 && second <= 59
}
