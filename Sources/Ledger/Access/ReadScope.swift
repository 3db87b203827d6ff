import HealthModel
import LMDB

/// What one principal may read of one type, decided on a read's snapshot (docs/SEMANTICS.md §6).
///
/// The owner reads everything. An app reads everything of a type the owner let it read;
/// otherwise only its own objects, plus, for per-object types (vision prescriptions), the
/// objects the owner selected for it. Every read path filters through a scope, so an
/// object outside it is indistinguishable from one that does not exist.
public struct ReadScope: Sendable, Hashable {
    /// The type's catalogue code.
    let type: UInt32
    /// Every object of the type.
    var all: Bool
    /// The reader's own source code (0 when it never saved).
    var ownSource: UInt32
    /// UUIDs the owner selected for the reader (per-object types).
    var selected: Set<[UInt8]>

    static let operatorDenied = HealthError(.authorizationDenied, "the operator manages ledgers and reads no health data")

    /// While a point-in-time view is read, what the caller may read of a type today: an app
    /// then sees of the past only what it could read then *and* may read now, so a grant
    /// given later does not open the past, and a revocation reaches it too.
    @TaskLocal public static var present: (@Sendable (ObjectType) throws -> ReadScope)?

    init(_ principal: Principal, type: ObjectType, in snapshot: LedgerSnapshot) throws {
        switch principal {
        case .owner, .system:
            self.init(type: type.code, all: true, ownSource: 0, selected: [])
        case .operator:
            throw Self.operatorDenied
        case .app(let source):
            let app = source.bundleIdentifier
            let code = try SourceRegistry.code(of: app, in: snapshot) ?? 0
            if type.family == .correlation {
                // A correlation is read through its member types: with any of them readable,
                // every correlation of the type, showing only the readable members.
                var any = false
                for member in TypeCatalogue.correlationTypes[type.identifier] ?? [] where !any {
                    let record = try AuthorizationRecord.load(app: app, direction: .read, type: TypeCatalogue.code(of: member), in: snapshot)
                    any = record.decision == .granted
                }
                self.init(type: type.code, all: any, ownSource: code, selected: [])
            } else if type.isReadPerObject {
                let selected = Set(try AuthorizationRecord.selection(app: app, type: type.code, in: snapshot))
                self.init(type: type.code, all: false, ownSource: code, selected: selected)
            } else {
                let record = try AuthorizationRecord.load(app: app, direction: .read, type: type.code, in: snapshot)
                self.init(type: type.code, all: record.decision == .granted, ownSource: code, selected: [])
            }
            if let present = Self.present {
                let now = try Self.$present.withValue(nil) { try present(type) }
                all = all && now.all
                selected.formIntersection(now.selected)
            }
        }
    }

    /// Only the objects of source `code` (0: none): what an app may change.
    static func own(_ code: UInt32) -> ReadScope { ReadScope(type: 0, all: false, ownSource: code, selected: []) }
    /// Every object: what the owner may change.
    static let everything = ReadScope(type: 0, all: true, ownSource: 0, selected: [])

    private init(type: UInt32, all: Bool, ownSource: UInt32, selected: Set<[UInt8]>) {
        self.type = type
        self.all = all
        self.ownSource = ownSource
        self.selected = selected
    }

    /// Whether an object (its source code and UUID, as the projections hold them) is readable.
    func allows(sourceCode: UInt32, uuid: [UInt8]) -> Bool {
        all || (ownSource != 0 && sourceCode == ownSource) || (!selected.isEmpty && selected.contains(uuid))
    }

    /// The catalogue code of the type the scope is of.
    public var typeCode: UInt32 { type }

    /// Whether `newer` takes away something this scope allowed: a revoked read grant, or a
    /// selected object no longer selected.
    public func isNarrowed(by newer: ReadScope) -> Bool {
        (all && !newer.all) || !selected.isSubset(of: newer.selected)
    }
}
