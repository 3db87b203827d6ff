import Foundation

/// A calendar date of the Gregorian calendar, in no time zone: the day an activity summary
/// is for (HealthKit's `dateComponents` of an `HKActivitySummary`: era, year, month, day).
public struct CalendarDay: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    /// A date of years 0001–9999.
    /// - Throws: ``HealthError`` `invalidArgument` for a day that is not one (February 30th).
    public init(year: Int, month: Int, day: Int) throws {
        (self.year, self.month, self.day) = (year, month, day)
        guard (1...9999).contains(year), (1...12).contains(month), (1...Self.days(inMonth: month, of: year)).contains(day) else {
            throw HealthError.invalidArgument("\(description) is not a calendar date of years 0001–9999", field: "date")
        }
    }

    /// The day `yyyy-MM-dd` names; nil when it names none.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
            let valid = try? CalendarDay(year: year, month: month, day: day)
        else { return nil }
        self = valid
    }

    /// The day `date` falls on in UTC.
    public init(containing date: Date) {
        let days = Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
        // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// 00:00 UTC of the day: where a summary of it stands in time-ordered indexes.
    public var start: Date {
        // Days from 1970-01-01 to the civil date (the inverse of init(containing:)).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return Date(timeIntervalSince1970: Double(era * 146_097 + dayOfEra - 719_468) * 86_400)
    }

    /// `yyyy-MM-dd`.
    public var description: String {
        func padded(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(padded(year, 4))-\(padded(month, 2))-\(padded(day, 2))"
    }

    public static func < (left: CalendarDay, right: CalendarDay) -> Bool { (left.year, left.month, left.day) < (right.year, right.month, right.day) }

    static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}

/// A day's activity rings and their goals (HealthKit's `HKActivitySummary`): move (active
/// energy, or move time for those whose move mode is time), exercise and stand.
///
/// It stands for its calendar ``day`` in no time zone; its span is that day in UTC (00:00 to
/// 24:00), so that a query by days selects exactly the days asked. Apps read summaries with a
/// read grant of ``ObjectType/activitySummary``; none may save one (HealthKit's summaries are
/// the system's): the owner's import, or the owner, does.
///
/// ```swift
/// let summary = ActivitySummary(
///     day: try CalendarDay(year: 2025, month: 5, day: 18),
///     activeEnergyBurned: try Quantity(512, "kcal"), activeEnergyBurnedGoal: try Quantity(500, "kcal"),
///     exerciseTime: try Quantity(42, "min"), exerciseTimeGoal: try Quantity(30, "min"),
///     standHours: try Quantity(11, "count"), standHoursGoal: try Quantity(12, "count"))
/// ```
public struct ActivitySummary: HealthSample {
    public var uuid: UUID
    public var day: CalendarDay
    /// Whether the move ring counts active energy or move time (HealthKit's `activityMoveMode`).
    public var moveMode: ActivityMoveMode
    /// Energy (`kcal`).
    public var activeEnergyBurned: Quantity
    public var activeEnergyBurnedGoal: Quantity
    /// Time (`min`), for the move mode `appleMoveTime`.
    public var moveTime: Quantity
    public var moveTimeGoal: Quantity
    /// Time (`min`).
    public var exerciseTime: Quantity
    public var exerciseTimeGoal: Quantity
    /// Hours stood in, a count.
    public var standHours: Quantity
    public var standHoursGoal: Quantity
    /// The rings were paused that day.
    public var isPaused: Bool
    public var sourceRevision: SourceRevision
    public var device: Device?
    public var metadata: Metadata

    public init(
        day: CalendarDay, moveMode: ActivityMoveMode = .activeEnergy, activeEnergyBurned: Quantity = .zero("kcal"),
        activeEnergyBurnedGoal: Quantity = .zero("kcal"), moveTime: Quantity = .zero("min"), moveTimeGoal: Quantity = .zero("min"),
        exerciseTime: Quantity = .zero("min"), exerciseTimeGoal: Quantity = .zero("min"), standHours: Quantity = .zero("count"),
        standHoursGoal: Quantity = .zero("count"), isPaused: Bool = false, device: Device? = nil, metadata: Metadata = [:],
        uuid: UUID = .timeOrdered(), sourceRevision: SourceRevision = SourceRevision(source: .owner)
    ) {
        self.uuid = uuid
        self.day = day
        self.moveMode = moveMode
        self.activeEnergyBurned = activeEnergyBurned
        self.activeEnergyBurnedGoal = activeEnergyBurnedGoal
        self.moveTime = moveTime
        self.moveTimeGoal = moveTimeGoal
        self.exerciseTime = exerciseTime
        self.exerciseTimeGoal = exerciseTimeGoal
        self.standHours = standHours
        self.standHoursGoal = standHoursGoal
        self.isPaused = isPaused
        self.sourceRevision = sourceRevision
        self.device = device
        self.metadata = metadata
    }

    public var objectType: ObjectType { .activitySummary }
    /// 00:00 UTC of its day.
    public var startDate: Date { day.start }
    /// 24 hours after its start.
    public var endDate: Date { day.start.addingTimeInterval(86_400) }

    /// Each quantity with its field's name and the unit it must be compatible with.
    public var quantities: [(field: String, quantity: Quantity, unit: String)] {
        [
            ("activeEnergyBurned", activeEnergyBurned, "kcal"), ("activeEnergyBurnedGoal", activeEnergyBurnedGoal, "kcal"),
            ("moveTime", moveTime, "min"), ("moveTimeGoal", moveTimeGoal, "min"), ("exerciseTime", exerciseTime, "min"),
            ("exerciseTimeGoal", exerciseTimeGoal, "min"), ("standHours", standHours, "count"), ("standHoursGoal", standHoursGoal, "count"),
        ]
    }
}

extension Quantity {
    /// Zero in `unit`, one of the units HealthModel knows.
    public static func zero(_ unit: String) -> Quantity { try! Quantity(0, unit) }
}

extension ObjectType {
    /// HealthKit's `HKActivitySummaryType`: the days' activity rings.
    public static let activitySummary = ObjectType(identifier: "HKActivitySummaryTypeIdentifier", family: .activitySummary)

    /// Types apps may read but never save: characteristics, activity summaries, clinical
    /// records, electrocardiograms, medications and their dose events.
    public var isReadOnlyForApps: Bool {
        switch family {
        case .characteristic, .activitySummary, .clinicalRecord, .electrocardiogram, .userAnnotatedMedication, .medicationDoseEvent: true
        default: false
        }
    }
}
