import Foundation
import HealthLedgerSDK
import HealthModel

/// The Browse page: one type's samples, newest first, 50 a page, with source, device and
/// metadata, and a delete button each; for a quantity type, its statistics per day, week or
/// month with a chart. All through the SDK with the owner's credential.
struct BrowsePage {
    let store: HealthStore
    let session: WebSession
    let calendar: Calendar
    let now: Date

    static let pageSize = 50

    /// How the statistics group: the interval, how many of them back from now.
    enum Grouping: String, CaseIterable {
        case day, week, month

        var component: Calendar.Component {
            switch self {
            case .day: .day
            case .week: .weekOfYear
            case .month: .month
            }
        }
        var intervalUnit: StatisticsIntervals.Unit {
            switch self {
            case .day: .day
            case .week: .week
            case .month: .month
            }
        }
        var count: Int {
            switch self {
            case .day: 30
            case .week: 26
            case .month: 12
            }
        }
    }

    init(store: HealthStore, session: WebSession, now: Date = Date(), timeZone: TimeZone = .current) {
        self.store = store
        self.session = session
        self.now = now
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        self.calendar = calendar
    }

    /// The types one can browse, by name: every kind of object (a route is seen with its
    /// workout, a characteristic on the summary).
    static let types: [(identifier: String, name: String)] = TypeCatalogue.allIdentifiers
        .filter { TypeCatalogue.family(of: $0).map { ![.characteristic, .workoutRoute].contains($0) } ?? false }
        .map { ($0, WebText.typeName($0)) }
        .sorted { $0.name < $1.name }

    /// - Parameters:
    ///   - before: show samples that start before this instant (the page after one that ended there).
    func render(type identifier: String?, grouping: Grouping, before: Date?) async throws -> String {
        let options = Self.types.map { type in
            "<option value=\"\(HTML.escape(type.identifier))\"\(type.identifier == identifier ? " selected" : "")>\(HTML.escape(type.name))</option>"
        }.joined()
        let picker = """
            <form method="get" action="/browse" class="picker">
            <label for="type">Kind of data</label>
            <select id="type" name="type">\(options)</select>
            <label for="by">Statistics per</label>
            <select id="by" name="by">\(Grouping.allCases.map { "<option value=\"\($0.rawValue)\"\($0 == grouping ? " selected" : "")>\($0.rawValue)</option>" }.joined())</select>
            <button type="submit">Show</button>
            </form>
            """
        guard let identifier else { return picker + "<p>Choose a kind of data to see its samples.</p>" }
        let type = try ObjectType(identifier)
        var statistics = ""
        if let quantityType = try? QuantityType(identifier) { statistics = try await self.statistics(quantityType, grouping: grouping) }
        return picker + statistics + (try await samples(type, before: before))
    }

    private func statistics(_ type: QuantityType, grouping: Grouping) async throws -> String {
        let cumulative = type.aggregationStyle == .cumulative
        let current = calendar.dateInterval(of: grouping.component, for: now)?.start ?? calendar.startOfDay(for: now)
        guard let first = calendar.date(byAdding: grouping.component, value: -(grouping.count - 1), to: current),
            let end = calendar.date(byAdding: grouping.component, value: 1, to: current)
        else { return "" }
        let collection = try await store.statisticsCollection(
            for: StatisticsCollectionQueryDescriptor(
                type: type, range: DateInterval(start: first, end: end),
                intervals: try StatisticsIntervals(anchor: first, every: 1, grouping.intervalUnit, timeZone: calendar.timeZone),
                options: cumulative ? .cumulativeSum : .discreteAverage))
        let unit = WebText.displayUnit(type)
        let bars = try collection.enumerateStatistics(from: first, to: end).map { statistics in
            (label: label(statistics.startDate, grouping),
             value: try (cumulative ? statistics.sumQuantity() : statistics.averageQuantity())?.doubleValue(for: unit) ?? 0)
        }
        let what = cumulative ? "Total" : "Average"
        return """
            <section aria-labelledby="statistics-heading">
            <h2 id="statistics-heading">\(what) per \(grouping.rawValue)</h2>
            \(HTML.barChart(id: "browse-statistics", caption: "\(what) \(WebText.typeName(type.identifier).lowercased()) per \(grouping.rawValue), in \(unit)", bars: bars, unit: "\(unit)"))
            </section>
            """
    }

    private func samples(_ type: ObjectType, before: Date?) async throws -> String {
        let interval = before.map { DateInterval(start: .distantPast, end: $0) }
        let found = try await store.result(
            for: SampleQueryDescriptor(type: type, interval: interval, limit: Self.pageSize + 1, sort: .startDate(ascending: false)))
        let page = found.prefix(Self.pageSize)
        let rows = page.map { object in
            let sample = object.object
            let metadata = sample.metadata.map { "\($0.key) = \($0.value)" }.sorted().joined(separator: "; ")
            let device = sample.device.map { [$0.name, $0.manufacturer, $0.model].compactMap { $0 }.joined(separator: " ") } ?? ""
            return """
                <tr><td><time datetime="\(WebText.iso(sample.startDate))">\(WebText.iso(sample.startDate))</time>\(sample.endDate != sample.startDate ? "<br><small>to \(WebText.iso(sample.endDate))</small>" : "")</td>
                <td>\(HTML.escape(WebText.value(of: object)))</td>
                <td>\(HTML.escape(sample.sourceRevision.source.name)) <small>(\(HTML.escape(sample.sourceRevision.source.bundleIdentifier)))</small></td>
                <td>\(HTML.escape(device))</td><td><small>\(HTML.escape(metadata))</small></td>
                <td>\(HTML.form(action: "/browse/delete", session: session, fields: [("uuid", sample.uuid.uuidString), ("type", type.identifier)], button: "Delete", label: "Delete the sample of \(WebText.iso(sample.startDate))", style: "deny"))</td></tr>
                """
        }.joined()
        var older = ""
        if found.count > Self.pageSize, let last = page.last?.object.startDate {
            let query = "type=\(type.identifier)&before=\(Int64((last.timeIntervalSince1970 * 1_000_000).rounded()))"
            older = "<p><a href=\"/browse?\(HTML.escape(query))\" rel=\"next\">Older samples</a></p>"
        }
        return """
            <section aria-labelledby="samples-heading">
            <h2 id="samples-heading">Samples\(before == nil ? ", newest first" : " before \(WebText.iso(before!))")</h2>
            \(page.isEmpty ? "<p>No samples.</p>" : """
            <div class="scroll"><table id="samples"><thead><tr><th scope="col">When</th><th scope="col">Value</th><th scope="col">Source</th><th scope="col">Device</th><th scope="col">Metadata</th><th scope="col"><span class="visually-hidden">Delete</span></th></tr></thead>
            <tbody>\(rows)</tbody></table></div>
            """)
            \(older)
            </section>
            """
    }

    private func label(_ date: Date, _ grouping: Grouping) -> String {
        let components = calendar.dateComponents([.year, .month, .day], from: date)
        switch grouping {
        case .day, .week: return "\(components.month ?? 0)/\(components.day ?? 0)"
        case .month: return "\(components.year ?? 0)-\(String(format: "%02d", components.month ?? 0))"
        }
    }
}
