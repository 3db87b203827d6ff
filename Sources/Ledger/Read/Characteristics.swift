import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

extension Ledger {
    /// Sets one of the owner's characteristics, or clears it (nil, or a "not set" value).
    /// Each change is a `characteristicSet` event; setting the current value again records
    /// nothing.
    ///
    /// ```swift
    /// try await ledger.setCharacteristic(of: .bloodType, to: .bloodType(.oNegative), by: .owner)
    /// ```
    ///
    /// - Throws: ``HealthError`` `authorizationDenied` for anyone but the owner;
    ///   `invalidArgument` for a type that is no characteristic, a value of another type, or a
    ///   date that is no date of birth.
    public func setCharacteristic(of type: ObjectType, to characteristic: Characteristic?, by principal: Principal) async throws {
        if case .app = principal { throw RoleRefusal.settingCharacteristics }
        try Self.requireOwner(principal)
        guard type.family == .characteristic else { throw HealthError.invalidArgument("\(type.identifier) is not a characteristic type", field: "type") }
        let value = characteristic?.isNotSet == true ? nil : characteristic
        if let value {
            guard value.objectType == type else {
                throw HealthError.invalidArgument("a \(value.objectType.identifier) value given for \(type.identifier)", field: "type")
            }
            try value.validate()
        }
        let body: [UInt8] = try (value.map(Healthledger_V1_Characteristic.init) ?? .notSet(type)).serializedBytes()
        try await committer.submit { context in
            let key = KeyEncoding.typeKey(type.code)
            let stored = try context.txn.get(key, in: context.databases.characteristics).map { stored in
                try key.withUnsafeBytes { key in Array(try context.databases.clear(stored, domain: .characteristic, key: key, in: context.txn)) }
            }
            guard stored != (value == nil ? nil : body) else { return }
            try context.append(
                kind: .characteristicSet, actor: principal, objectType: type.identifier, objectUUID: nil, body: body,
                change: try Projector.change(kind: .characteristicSet, actor: principal, body: body))
        }
    }

    /// The characteristics of `types`, in that order, as `principal` may see them: the
    /// owner sees what is set; an app sees a characteristic only with read authorization for
    /// its type, and otherwise gets nil, exactly as if it were not set.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` for a type that is no characteristic or
    ///   more than 16 types; `authorizationDenied` for the operator.
    public func characteristics(_ types: [ObjectType], as principal: Principal) throws -> [Characteristic?] {
        guard types.count <= 16 else { throw HealthError.invalidArgument("ask for at most 16 characteristics", field: "types") }
        for type in types where type.family != .characteristic {
            throw HealthError.invalidArgument("\(type.identifier) is not a characteristic type", field: "types")
        }
        return try read { snapshot in
            try types.map { type in
                let scope = try ReadScope(principal, type: type, in: snapshot)
                // Read whether or not it is shown, so both answers cost the same.
                let key = KeyEncoding.typeKey(type.code)
                let stored = try snapshot.get(key, in: snapshot.databases.characteristics).map { stored in
                    try key.withUnsafeBytes { key in Array(try snapshot.databases.clear(stored, domain: .characteristic, key: key, in: snapshot.txn)) }
                }
                guard scope.all, let stored else { return nil }
                guard let characteristic = try? Healthledger_V1_Characteristic(serializedBytes: stored).model() else {
                    throw LedgerFailure.corrupted("the stored \(type.identifier) is damaged: replay the ledger")
                }
                return characteristic
            }
        }
    }
}
