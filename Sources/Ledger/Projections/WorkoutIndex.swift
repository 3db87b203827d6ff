import HealthModel
import LMDB

/// A sample associated with a workout, or one of its routes, as `workout_members` holds it:
/// enough to filter it by scope and date and to add it to statistics without loading it.
struct WorkoutMember: Sendable {
    var type: UInt32
    var uuid: [UInt8]
    var startUs: Int64
    var endUs: Int64
    var sequence: UInt64
    /// In the type's canonical unit (0 for routes).
    var value: Double
    var source: UInt32
    /// A quantity series sample, whose values statistics count one by one.
    var isSeries = false

    var indexEntry: IndexEntry {
        IndexEntry(uuid: uuid, startUs: startUs, endUs: endUs, sequence: sequence, source: source, value: value, isSeries: isSeries)
    }

    /// start(8) end(8) sequence(8, its top bit marking a series sample as in ``StartIndexRow``) value(8, masked in an
    /// encrypted ledger as in ``StartIndexRow``); the source is in the key.
    func encodedValue(_ cipher: LedgerCipher?) -> [UInt8] {
        var value: [UInt8] = []
        value.reserveCapacity(32)
        KeyEncoding.appendTime(startUs, to: &value)
        KeyEncoding.appendTime(endUs, to: &value)
        KeyEncoding.append(isSeries ? sequence | StartIndexRow.seriesFlag : sequence, to: &value)
        KeyEncoding.append(LedgerCipher.masked(self.value.bitPattern, sequence: sequence, by: cipher), to: &value)
        return value
    }
}

/// The workout projections: `workout_members`, `member_workouts` and `route_data`.
enum WorkoutIndex {
    /// workout(16) type(4) source(4) member(16): by type, then by source, so a reader who may
    /// see only its own source's members seeks to them and never visits the others'.
    static func memberKey(workout: [UInt8], type: UInt32, source: UInt32, member: [UInt8]) -> [UInt8] {
        var key = workout
        key.reserveCapacity(40)
        KeyEncoding.append(type, to: &key)
        KeyEncoding.append(source, to: &key)
        key.append(contentsOf: member)
        return key
    }

    /// The members of `workout` (of `type` only, when given), by type, source, then UUID.
    static func members(of workout: [UInt8], type: UInt32? = nil, in snapshot: LedgerSnapshot) throws -> [WorkoutMember] {
        var prefix = workout
        if let type { KeyEncoding.append(type, to: &prefix) }
        var members: [WorkoutMember] = []
        try snapshot.forEach(prefix: prefix, keyLength: 40, in: snapshot.databases.workoutMembers) { key, value in
            members.append(try member(key, value, snapshot.databases.cipher))
            return true
        }
        return members
    }

    /// The members of `workout` (of `type` only, when given) that readers with these scopes
    /// may see. For a type the reader may not read whole, only its own source's members are
    /// visited (one seek per type): the work done does not depend on what it may not see.
    static func visibleMembers(
        of workout: [UInt8], type: UInt32? = nil, scope: (UInt32) throws -> ReadScope?, in snapshot: LedgerSnapshot
    ) throws -> [WorkoutMember] {
        var members: [WorkoutMember] = []
        try snapshot.withCursor(on: snapshot.databases.workoutMembers) { cursor in
            var prefix = workout
            if let type { KeyEncoding.append(type, to: &prefix) }
            var entry = try cursor.seek(atLeast: prefix)
            while let current = entry, current.key.count == 40, current.key.starts(with: prefix) {
                let memberType = KeyEncoding.uint32(current.key, at: 16)
                var typePrefix = workout
                KeyEncoding.append(memberType, to: &typePrefix)
                let readable = try scope(memberType)
                if let readable, readable.all {
                    while let current = entry, current.key.count == 40, current.key.starts(with: typePrefix) {
                        members.append(try member(current.key, current.value, snapshot.databases.cipher))
                        entry = try cursor.next()
                    }
                    continue  // the cursor stands on the next type already
                }
                if let readable, readable.ownSource != 0 {
                    var ownPrefix = typePrefix
                    KeyEncoding.append(readable.ownSource, to: &ownPrefix)
                    entry = try cursor.seek(atLeast: ownPrefix)
                    while let current = entry, current.key.count == 40, current.key.starts(with: ownPrefix) {
                        members.append(try member(current.key, current.value, snapshot.databases.cipher))
                        entry = try cursor.next()
                    }
                }
                // On to the next type.
                guard memberType < UInt32.max else { break }
                var next = workout
                KeyEncoding.append(memberType + 1, to: &next)
                entry = try cursor.seek(atLeast: next)
            }
        }
        return members
    }

    private static func member(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ cipher: LedgerCipher?) throws -> WorkoutMember {
        guard value.count == 32 else { throw LedgerFailure.corrupted("a workout_members entry is \(value.count) bytes, not 32: replay the ledger") }
        let stored = KeyEncoding.uint64(value, at: 16)
        let sequence = stored & ~StartIndexRow.seriesFlag
        return WorkoutMember(
            type: KeyEncoding.uint32(key, at: 16), uuid: Array(key[24..<40]), startUs: KeyEncoding.time(value, at: 0),
            endUs: KeyEncoding.time(value, at: 8), sequence: sequence,
            value: Double(bitPattern: LedgerCipher.masked(KeyEncoding.uint64(value, at: 24), sequence: sequence, by: cipher)),
            source: KeyEncoding.uint32(key, at: 20), isSeries: stored & StartIndexRow.seriesFlag != 0)
    }

    /// The workouts `member` belongs to.
    static func workouts(of member: [UInt8], in snapshot: LedgerSnapshot) throws -> [[UInt8]] {
        var workouts: [[UInt8]] = []
        try snapshot.forEach(prefix: member, keyLength: 32, in: snapshot.databases.memberWorkouts) { key, _ in
            workouts.append(Array(key[16..<32]))
            return true
        }
        return workouts
    }

    /// The sequences of a route's location chunks, in chunk (time) order.
    static func routeChunks(of route: [UInt8], in snapshot: LedgerSnapshot) throws -> [UInt64] {
        var chunks: [UInt64] = []
        try snapshot.forEach(prefix: route, keyLength: 20, in: snapshot.databases.routeData) { _, value in
            guard value.count == 8 else { throw LedgerFailure.corrupted("a route_data entry is not 8 bytes: replay the ledger") }
            chunks.append(KeyEncoding.uint64(value, at: 0))
            return true
        }
        return chunks
    }

    static func add(_ member: WorkoutMember, to workout: [UInt8], in txn: Transaction, _ databases: LedgerDatabases) throws {
        try txn.put(member.encodedValue(databases.cipher), forKey: memberKey(workout: workout, type: member.type, source: member.source, member: member.uuid), in: databases.workoutMembers)
        try txn.put([], forKey: member.uuid + workout, in: databases.memberWorkouts)
    }

    /// A newly saved object joins the workouts it belongs to: a route its workout; an object
    /// that replaced a member (by sync version) the workouts promised to it when that member
    /// was deleted, just before. Only routes and objects with a sync identifier get here.
    static func objectSaved(_ member: WorkoutMember, routeOf workout: [UInt8]?, in txn: Transaction, _ databases: LedgerDatabases) throws {
        if let workout { return try add(member, to: workout, in: txn, databases) }
        for workout in try workouts(of: member.uuid, in: LedgerSnapshot(txn, databases)) {
            try txn.put(
                member.encodedValue(databases.cipher), forKey: memberKey(workout: workout, type: member.type, source: member.source, member: member.uuid),
                in: databases.workoutMembers)
        }
    }

    /// A deleted object leaves its workouts, a deleted workout loses its members, a deleted
    /// route its chunks. With `replacedBy`, the new object takes the memberships over: its
    /// own are written when it is saved (next in the log), a workout's members move now.
    static func objectDeleted(
        _ uuid: [UInt8], type: UInt32, source: UInt32, replacedBy: [UInt8]?, in txn: Transaction, _ databases: LedgerDatabases
    ) throws {
        let snapshot = LedgerSnapshot(txn, databases)
        for workout in try workouts(of: uuid, in: snapshot) {
            try txn.delete(memberKey(workout: workout, type: type, source: source, member: uuid), in: databases.workoutMembers)
            try txn.delete(uuid + workout, in: databases.memberWorkouts)
            if let replacedBy { try txn.put([], forKey: replacedBy + workout, in: databases.memberWorkouts) }
        }
        if type == ObjectType.workout.code {
            for member in try members(of: uuid, in: snapshot) {
                try txn.delete(memberKey(workout: uuid, type: member.type, source: member.source, member: member.uuid), in: databases.workoutMembers)
                try txn.delete(member.uuid + uuid, in: databases.memberWorkouts)
                if let replacedBy { try add(member, to: replacedBy, in: txn, databases) }
            }
        }
        guard type == ObjectType.workoutRoute.code else { return }
        try snapshot.withCursor(on: snapshot.databases.routeData) { cursor in
            var entry = try cursor.seek(atLeast: uuid)
            while let current = entry, current.key.count == 20, current.key.starts(with: uuid) {
                try cursor.deleteCurrent()
                entry = try cursor.seek(atLeast: uuid)
            }
        }
    }
}
