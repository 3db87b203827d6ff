import Foundation
import LedgerSchema
import SwiftProtobuf

/// The owner's characteristics, as HealthKit's `HKHealthStore` reads them. An app needs
/// read authorization for each characteristic type; without it, the answer is the same as
/// when nothing is set.
extension HealthStore {
    /// The characteristics of `types`, in that order; nil where not set (or not readable).
    public func characteristics(_ types: [ObjectType]) async throws -> [Characteristic?] {
        let request = Healthledger_V1_CharacteristicsRequest.with { $0.types = types.map(\.identifier) }
        let response = try Self.decode(Healthledger_V1_CharacteristicsResponse.self, try await unary(.characteristics, request))
        guard response.characteristics.count == types.count else { throw RPCError(.internalError, "the server answered for other characteristics") }
        return try response.characteristics.map { message in
            do { return try message.model() } catch { throw RPCError(.internalError, "the server sent an invalid characteristic: \(error)") }
        }
    }

    /// The date of birth as calendar components (HealthKit's `dateOfBirthComponents()`).
    public func dateOfBirthComponents() async throws -> DateComponents? {
        guard case .dateOfBirth(let year, let month, let day)? = try await characteristics([.dateOfBirth])[0] else { return nil }
        return DateComponents(calendar: Calendar(identifier: .gregorian), year: year, month: month, day: day)
    }

    public func biologicalSex() async throws -> BiologicalSex {
        guard case .biologicalSex(let value)? = try await characteristics([.biologicalSex])[0] else { return .notSet }
        return value
    }

    public func bloodType() async throws -> BloodType {
        guard case .bloodType(let value)? = try await characteristics([.bloodType])[0] else { return .notSet }
        return value
    }

    public func fitzpatrickSkinType() async throws -> FitzpatrickSkinType {
        guard case .fitzpatrickSkinType(let value)? = try await characteristics([.fitzpatrickSkinType])[0] else { return .notSet }
        return value
    }

    public func wheelchairUse() async throws -> WheelchairUse {
        guard case .wheelchairUse(let value)? = try await characteristics([.wheelchairUse])[0] else { return .notSet }
        return value
    }

    public func activityMoveMode() async throws -> ActivityMoveMode {
        guard case .activityMoveMode(let value)? = try await characteristics([.activityMoveMode])[0] else { return .notSet }
        return value
    }

    /// The medications that limit the owner's heart rate (HealthKit's
    /// `cardioFitnessMedicationsUse()`); `none` when not set.
    public func cardioFitnessMedicationsUse() async throws -> CardioFitnessMedicationsUse {
        guard case .cardioFitnessMedicationsUse(let value)? = try await characteristics([.cardioFitnessMedicationsUse])[0] else { return .none }
        return value
    }

    /// Sets (or, with nil, clears) one of the owner's characteristics (owner only; an event).
    ///
    /// ```swift
    /// try await store.setCharacteristic(of: .dateOfBirth, to: .dateOfBirth(year: 1984, month: 3, day: 2))
    /// ```
    public func setCharacteristic(of type: ObjectType, to characteristic: Characteristic?) async throws {
        let request = characteristic.map(Healthledger_V1_Characteristic.init) ?? .notSet(type)
        guard request.type == type.identifier else {
            throw RPCError(.invalidArgument, "a \(request.type) value given for \(type.identifier)", healthErrorCode: .invalidArgument)
        }
        _ = try await unary(.setCharacteristic, request)
    }
}
