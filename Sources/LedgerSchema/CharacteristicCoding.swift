import HealthModel
import SwiftProtobuf

extension Healthledger_V1_Characteristic {
    public init(_ characteristic: Characteristic) {
        self.init()
        type = characteristic.objectType.identifier
        switch characteristic {
        case .dateOfBirth(let year, let month, let day):
            self.year = Int32(clamping: year)
            self.month = Int32(clamping: month)
            self.day = Int32(clamping: day)
        default:
            value = Int64(characteristic.rawValue ?? 0)
        }
    }

    /// A characteristic of `type` that is not set.
    public static func notSet(_ type: ObjectType) -> Healthledger_V1_Characteristic {
        .with { $0.type = type.identifier }
    }

    /// The characteristic, or nil when it is not set.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` for an unknown type, a value outside its
    ///   enumeration, or a date that is no date of birth.
    public func model() throws -> Characteristic? {
        let objectType = try ObjectType(type)
        guard objectType.family == .characteristic else {
            throw HealthError.invalidArgument("\(type) is not a characteristic type", field: "type")
        }
        if objectType == .dateOfBirth {
            guard value == 0 else { throw HealthError.invalidArgument("the date of birth takes year, month and day, not a value", field: "value") }
            if year == 0 && month == 0 && day == 0 { return nil }
            let characteristic = Characteristic.dateOfBirth(year: Int(year), month: Int(month), day: Int(day))
            try characteristic.validate()
            return characteristic
        }
        guard year == 0 && month == 0 && day == 0 else {
            throw HealthError.invalidArgument("only the date of birth takes a date", field: "year")
        }
        guard let raw = Int(exactly: value) else { throw HealthError.invalidArgument("\(value) is out of range", field: "value") }
        let characteristic = try Characteristic(objectType, rawValue: raw)
        return characteristic.isNotSet ? nil : characteristic
    }
}
