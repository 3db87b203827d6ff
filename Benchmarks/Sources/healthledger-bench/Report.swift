import Foundation

/// Repeated measurements of one figure: the median is what the report quotes.
struct Figure: Sendable {
    var values: [Double]

    init(_ values: [Double]) { self.values = values }
    init(_ value: Double) { values = [value] }

    var median: Double { Bench.median(values) }
    var minimum: Double { values.min() ?? 0 }
    var maximum: Double { values.max() ?? 0 }
}

/// Whether a scenario's figure is a rate (higher is better) or a time (lower is better).
enum Direction: Sendable {
    case higherIsBetter
    case lowerIsBetter
}

/// One scenario of TARGETS.md: HealthLedger's figure, its target, and the references measured
/// in the same run.
struct ScenarioResult: Sendable {
    var name: String
    var unit: String
    var direction: Direction
    var target: Double?
    var targetText: String
    var healthLedger: Figure?
    var references: [(name: String, figure: Figure)] = []
    var notes: [String] = []

    var met: Bool? {
        guard let target, let value = healthLedger?.median else { return nil }
        return direction == .higherIsBetter ? value >= target : value <= target
    }

    /// How many times better HealthLedger is than `reference` (below 1: worse).
    func advantage(over reference: Figure) -> Double? {
        guard let value = healthLedger?.median, value > 0, reference.median > 0 else { return nil }
        return direction == .higherIsBetter ? value / reference.median : reference.median / value
    }

    func figure(named prefix: String) -> Figure? { references.first { $0.name.hasPrefix(prefix) }?.figure }
}

/// The report: printed as each scenario ends, and written as Markdown with an SVG plot.
final class BenchReport: @unchecked Sendable {
    private(set) var results: [ScenarioResult] = []
    var machine = ""
    var referenceOutput = ""
    var mode = ""
    /// How long the run took, from the reference to the last scenario (builds not counted).
    var runTime: Duration = .zero

    func add(_ result: ScenarioResult) {
        results.append(result)
        print(Self.line(result))
    }

    static func format(_ value: Double, _ unit: String) -> String {
        switch unit {
        case "µs", "ms": return value >= 100 ? String(format: "%.0f %@", value, unit) : String(format: "%.2f %@", value, unit)
        case _ where unit.hasPrefix("%"): return String(format: "%.1f %@", value, unit)
        default: return "\(Int(value.rounded()).formatted(.number.grouping(.automatic))) \(unit)"
        }
    }

    static func line(_ result: ScenarioResult) -> String {
        var text = "RESULT \(result.name):"
        if let figure = result.healthLedger {
            text += " median \(format(figure.median, result.unit)) (\(format(figure.minimum, result.unit))–\(format(figure.maximum, result.unit)), \(figure.values.count) rounds)"
        }
        if let met = result.met { text += " | target \(result.targetText): \(met ? "met" : "NOT met")" }
        for (name, figure) in result.references {
            text += " | \(name) \(format(figure.median, result.unit))"
            if let advantage = result.advantage(over: figure) { text += String(format: " (×%.2f)", advantage) }
        }
        for note in result.notes { text += " | \(note)" }
        return text
    }

    /// The report as Markdown: one table row per scenario, then the notes and the reference output.
    func markdown(plot: String?) -> String {
        var text = """
            | scenario | HealthLedger median (min–max) | target | met | references, same run (HealthLedger's advantage ×) |
            |---|---|---|---|---|

            """
        for result in results {
            let figure = result.healthLedger.map {
                "**\(Self.format($0.median, result.unit))** (\(Self.format($0.minimum, result.unit))–\(Self.format($0.maximum, result.unit)))"
            } ?? "–"
            let references = result.references.map { name, figure in
                "\(name): \(Self.format(figure.median, result.unit))" + (result.advantage(over: figure).map { String(format: " (×%.2f)", $0) } ?? "")
            }.joined(separator: "; ")
            let met = result.met.map { $0 ? "yes" : "**no**" } ?? "–"
            text += "| \(result.name) | \(figure) | \(result.targetText) | \(met) | \(references) |\n"
        }
        let notes = results.flatMap { result in result.notes.map { "- \(result.name): \($0)" } }
        if !notes.isEmpty { text += "\nNotes:\n" + notes.joined(separator: "\n") + "\n" }
        if let plot { text += "\n![Ingest throughput and query latency against the peers](\(plot))\n" }
        text += "\nThe raw reference (`../shared/tools/limits.sh`), same run:\n\n```\n\(referenceOutput)\n```\n"
        return text
    }

    /// Two bar charts: ingest throughput (higher is better) and query latency (lower is better),
    /// HealthLedger next to each peer measured in the same run.
    func svg() -> String {
        let systems = ["HealthLedger", "PostgreSQL", "SQLite"]
        let colours = ["HealthLedger": "#2f7d4f", "PostgreSQL": "#336791", "SQLite": "#b0822a"]
        func value(_ result: ScenarioResult, _ system: String) -> Double? {
            system == "HealthLedger" ? result.healthLedger?.median : result.figure(named: system)?.median
        }
        let panels: [(title: String, scenarios: [ScenarioResult])] = [
            ("Durable writes and replay (per second, higher is better)", results.filter { $0.direction == .higherIsBetter && $0.references.contains { $0.name.hasPrefix("PostgreSQL") } }),
            ("Queries over RPC (milliseconds, lower is better)", results.filter { $0.direction == .lowerIsBetter && $0.unit == "ms" && $0.references.contains { $0.name.hasPrefix("PostgreSQL") } }),
        ]
        let width = 900.0
        let rowHeight = 16.0
        var y = 30.0
        var body = ""
        for panel in panels where !panel.scenarios.isEmpty {
            body += "<text x=\"10\" y=\"\(y)\" font-size=\"15\" font-weight=\"bold\">\(escape(panel.title))</text>\n"
            y += 12
            for result in panel.scenarios {
                let largest = systems.compactMap { value(result, $0) }.max() ?? 1
                y += 18
                body += "<text x=\"10\" y=\"\(y)\" font-size=\"12\">\(escape(result.name))</text>\n"
                y += 4
                for system in systems {
                    guard let figure = value(result, system) else { continue }
                    let length = max(1, (width - 420) * figure / largest)
                    body += "<rect x=\"140\" y=\"\(y)\" width=\"\(String(format: "%.1f", length))\" height=\"\(rowHeight - 3)\" fill=\"\(colours[system]!)\"/>\n"
                    body += "<text x=\"\(String(format: "%.1f", 146 + length))\" y=\"\(y + rowHeight - 5)\" font-size=\"11\">\(system) \(escape(Self.format(figure, result.unit)))</text>\n"
                    y += rowHeight
                }
            }
            y += 24
        }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(y))" font-family="sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \(body)</svg>

            """
    }

    private func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}

/// Namespaced so that `Figure.median` can call the free function.
enum Bench {
    static func median(_ values: [Double]) -> Double { healthledger_bench.median(values) }
}
