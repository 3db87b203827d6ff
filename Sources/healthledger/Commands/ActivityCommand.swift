import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel

/// `healthledger activity`: the days' activity rings and goals (HealthKit's activity summary
/// query), through the server.
struct ActivityCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activity", abstract: "The days' activity rings and their goals (activity summaries).",
        discussion: """
            One line per day: move (kcal, or minutes for those whose move ring counts time), \
            exercise (minutes) and stand (hours), each with its goal. With --watch, prints the days \
            as they are, then each change as it commits (one JSON object per line), until interrupted.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "The first day (yyyy-MM-dd).") var from: String?
    @Option(help: "The last day (yyyy-MM-dd), included.") var to: String?
    @Flag(help: "Follow the days' changes as they commit.") var watch = false

    func run() async throws {
        let query: ActivitySummaryQueryDescriptor
        do {
            func day(_ text: String?, _ option: String) throws -> CalendarDay? {
                guard let text else { return nil }
                guard let day = CalendarDay(text) else { throw ValidationErrorExit("\(option) takes a day as yyyy-MM-dd, not '\(text.prefix(40))'") }
                return day
            }
            query = ActivitySummaryQueryDescriptor(from: try day(from, "--from"), to: try day(to, "--to"))
            _ = try query.interval()
        } catch { throw fail(error) }
        try await connection.withStore { store in
            if watch {
                for try await update in try await query.updates(for: store) {
                    WatchCommand.line(["summaries": update.summaries.map(activityRow), "removed": update.removed.map(\.uuidString)])
                }
                return
            }
            let rows = try await query.result(for: store).map(activityRow)
            if connection.json { return printJSON(rows) }
            print(["DAY", "MOVE", "EXERCISE", "STAND"].joined(separator: "\t"))
            for row in rows {
                func ring(_ name: String, _ unit: String) -> String { "\(text(row[name]))/\(text(row[name + "Goal"])) \(unit)" }
                print([row["day"] as? String ?? "", ring("move", row["moveUnit"] as? String ?? "kcal"), ring("exercise", "min"), ring("stand", "h")]
                    .joined(separator: "\t") + ((row["paused"] as? Bool) == true ? "\tpaused" : ""))
            }
        }
    }

    private func text(_ value: Any?) -> String {
        guard let number = value as? Double else { return "" }
        return number == number.rounded() ? String(Int(number)) : String(number)
    }
}
