import ArgumentParser
import Foundation
import HealthLedgerSDK

struct CharacteristicsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "characteristics",
        abstract: "Show the owner's characteristics, or set them (owner).",
        discussion: """
            Types: DateOfBirth, BiologicalSex, BloodType, FitzpatrickSkinType, WheelchairUse, ActivityMoveMode, \
            CardioFitnessMedicationsUse. Values are names (DateOfBirth=1984-03-02, BiologicalSex=female, \
            BloodType=oNegative, FitzpatrickSkinType=III, WheelchairUse=no, ActivityMoveMode=activeEnergy, \
            CardioFitnessMedicationsUse=calciumChannelBlocker+betaBlocker) or HealthKit's raw numbers; notSet \
            clears one (for CardioFitnessMedicationsUse, so does none). An app sees only the characteristics it may read; the others \
            show as not set.
            """)
    @OptionGroup var connection: ConnectionOptions
    @Option(help: "Show only these types (all by default).") var type: [String] = []
    @Option(help: "Set TYPE=VALUE (repeatable; owner only).") var set: [String] = []

    static let all: [ObjectType] = [
        .dateOfBirth, .biologicalSex, .bloodType, .fitzpatrickSkinType, .wheelchairUse, .activityMoveMode, .cardioFitnessMedicationsUse,
    ]

    func run() async throws {
        let changes: [(ObjectType, Characteristic?)]
        let shown: [ObjectType]
        do {
            changes = try set.map(Self.parse)
            shown = try type.isEmpty ? Self.all : type.map { name in
                let resolved = try resolveType(name)
                guard resolved.family == .characteristic else { throw ValidationErrorExit("\(name) is not a characteristic type") }
                return resolved
            }
        } catch { throw fail(error) }
        try await connection.withStore { store in
            for (type, value) in changes { try await store.setCharacteristic(of: type, to: value) }
            let values = try await store.characteristics(shown)
            let rows = zip(shown, values).map { type, value in
                (type.identifier.replacingOccurrences(of: "HKCharacteristicTypeIdentifier", with: ""), value.map(Self.describe) ?? "notSet")
            }
            if connection.json {
                printJSON(Dictionary(uniqueKeysWithValues: rows))
            } else {
                for (name, value) in rows { print("\(name)\t\(value)") }
            }
        }
    }

    static func describe(_ characteristic: Characteristic) -> String {
        switch characteristic {
        case .dateOfBirth(let year, let month, let day): String(format: "%04d-%02d-%02d", year, month, day)
        case .biologicalSex(let value): "\(value)"
        case .bloodType(let value): "\(value)"
        case .fitzpatrickSkinType(let value): "\(value)"
        case .wheelchairUse(let value): "\(value)"
        case .activityMoveMode(let value): "\(value)"
        case .cardioFitnessMedicationsUse(let value): "\(value)"
        }
    }

    /// `TYPE=VALUE` → the type and its value (nil: clear).
    static func parse(_ assignment: String) throws -> (ObjectType, Characteristic?) {
        let parts = assignment.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { throw ValidationErrorExit("--set takes TYPE=VALUE, got '\(assignment)'") }
        let type = try resolveType(parts[0])
        guard type.family == .characteristic else { throw ValidationErrorExit("\(parts[0]) is not a characteristic type") }
        let text = parts[1]
        if text == "notSet" { return (type, nil) }
        if type == .dateOfBirth {
            let fields = text.split(separator: "-").map { Int($0) }
            guard fields.count == 3, let year = fields[0], let month = fields[1], let day = fields[2] else {
                throw ValidationErrorExit("DateOfBirth takes YYYY-MM-DD, got '\(text)'")
            }
            let value = Characteristic.dateOfBirth(year: year, month: month, day: day)
            try value.validate()
            return (type, value)
        }
        if let raw = Int(text) { return (type, try Characteristic(type, rawValue: raw)) }
        func named<E: CaseIterable & RawRepresentable<Int>>(_: E.Type) -> Int? { E.allCases.first { "\($0)" == text }?.rawValue }
        let raw: Int? =
            switch type {
            case .biologicalSex: named(BiologicalSex.self)
            case .bloodType: named(BloodType.self)
            case .fitzpatrickSkinType: named(FitzpatrickSkinType.self)
            case .wheelchairUse: named(WheelchairUse.self)
            case .cardioFitnessMedicationsUse:
                text == "none" ? 0 : text.split(separator: "+").reduce(Optional(0)) { raw, name in
                    CardioFitnessMedicationsUse.named.first { $0.name == name }.flatMap { medication in raw.map { $0 | medication.value.rawValue } }
                }
            default: named(ActivityMoveMode.self)
            }
        guard let raw else { throw ValidationErrorExit("'\(text)' is not a value of \(parts[0])") }
        return (type, try Characteristic(type, rawValue: raw))
    }
}
