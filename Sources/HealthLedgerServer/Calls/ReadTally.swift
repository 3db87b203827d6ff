import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import Synchronization

/// What a call read, for its access record (docs/PROTOCOL.md §7.15a): the types and how many
/// objects it has returned so far. A long-running call's tally is written out and started
/// again with each message it delivers.
final class ReadTally: Sendable {
    private struct State {
        var types: [String] = []
        var objects: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Notes `objects` more objects (of `type`, when given).
    func add(_ type: String? = nil, objects: Int) {
        state.withLock { state in
            if let type, !state.types.contains(type) { state.types.append(type) }
            state.objects += UInt64(max(objects, 0))
        }
    }

    /// Notes the types a stream reads (its registration's).
    func add(types: [ObjectType]) {
        state.withLock { state in
            for type in types where !state.types.contains(type.identifier) { state.types.append(type.identifier) }
        }
    }

    /// The types and objects noted; with `reset`, the objects start from 0 again.
    func taken(reset: Bool) -> (types: [String], objects: UInt64) {
        state.withLock { state in
            defer { if reset { state.objects = 0 } }
            return (state.types, state.objects)
        }
    }
}
