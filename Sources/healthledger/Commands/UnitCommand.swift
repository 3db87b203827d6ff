import ArgumentParser
import Foundation
import HealthModel

struct UnitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unit", abstract: "Work with HealthKit units.", subcommands: [Convert.self])

    struct Convert: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Convert a value between units, e.g. `healthledger unit convert 150 lb kg`.")

        @Argument(help: "The value.") var value: String
        @Argument(help: "The unit it is in (HealthKit grammar, e.g. mg/dL).") var from: String
        @Argument(help: "The unit to convert to.") var to: String

        func run() throws {
            guard let number = Double(value), number.isFinite else {
                throw ValidationErrorExit("'\(value)' is not a number")
            }
            do {
                let result = try HealthUnit(from).convert(number, to: HealthUnit(to))
                print(format(result))
            } catch { throw fail(error) }
        }

        /// Up to 12 significant digits, without float noise (68.0388, not 68.03880000000001).
        private func format(_ value: Double) -> String {
            let text = String(format: "%.12g", value)
            return text
        }
    }
}
