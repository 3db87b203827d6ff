import ArgumentParser
import Foundation
import HealthLedgerSDK

/// Authorization through the server, as the owner (decisions) or as an app (requests).
struct AuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth",
        abstract: "Authorization: apps ask, the owner decides (through the server).",
        discussion: """
            With an app's credential:    request, status
            With the owner's credential: pending, grant, deny, revoke, show, select, priority, credentials, revoke-credential
            Types are HealthKit identifiers or their short names (HeartRate, SleepAnalysis, VisionPrescription).
            Example session:
              HEALTHLEDGER_CREDENTIAL=$APP   healthledger auth request --share StepCount --read StepCount --read HeartRate
              HEALTHLEDGER_CREDENTIAL=$OWNER healthledger auth pending
              HEALTHLEDGER_CREDENTIAL=$OWNER healthledger auth grant --app com.example.walk --type StepCount --direction share
              HEALTHLEDGER_CREDENTIAL=$OWNER healthledger auth deny --app com.example.walk --type HeartRate --direction read
              HEALTHLEDGER_CREDENTIAL=$OWNER healthledger auth show --app com.example.walk --history
            """,
        subcommands: [
            Request.self, Status.self, Pending.self, Grant.self, Deny.self, Revoke.self, Show.self, Select.self, Priority.self, Credentials.self,
            RevokeCredential.self,
        ])

    struct Request: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "As an app: ask to share and read types (or, with --objects, to read some vision prescriptions).")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "A type to share (save); repeatable.") var share: [String] = []
        @Option(help: "A type to read; repeatable.") var read: [String] = []
        @Option(help: "Ask to read objects of this per-object type (VisionPrescription).") var objects: String?
        @Option(help: "With --objects: only those overlapping from this date (ISO 8601).") var from: String?
        @Option(help: "With --objects: only those overlapping until this date (ISO 8601).") var to: String?

        func run() async throws {
            let share = try Set(self.share.map(resolveType))
            let read = try Set(self.read.map(resolveType))
            let objectType = try objects.map(resolveType)
            let interval = try dateInterval(from: from, to: to)
            try await connection.withStore { store in
                if let objectType {
                    try await store.requestPerObjectReadAuthorization(for: objectType, overlapping: interval)
                    print("asked the owner to select \(objectType.identifier) objects")
                }
                if !share.isEmpty || !read.isEmpty || objectType == nil {
                    let count = try await store.requestAuthorization(toShare: share, read: read)
                    print("\(count) new request(s) for the owner")
                }
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "As an app: share status per type, and whether sharing and reading it were asked for (read status is never told).")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "A type; repeatable.") var type: [String]

        func run() async throws {
            let types = try type.map(resolveType)
            guard !types.isEmpty else { throw ValidationErrorExit("name at least one --type") }
            try await connection.withStore { store in
                func asked(share: Set<ObjectType>, read: Set<ObjectType>) async throws -> String {
                    try await store.getRequestStatusForAuthorization(toShare: share, read: read) == .unnecessary ? "unnecessary" : "shouldRequest"
                }
                var rows: [[String: Any]] = []
                for type in types {
                    let status = try await store.authorizationStatus(for: type)
                    // Characteristics are never shared; vision prescriptions are read per object.
                    let shareRequest = type.family == .characteristic ? "readOnly" : try await asked(share: [type], read: [])
                    let readRequest = type.isReadPerObject ? "perObject" : try await asked(share: [], read: [type])
                    rows.append(["type": type.identifier, "sharing": "\(status)", "shareRequest": shareRequest, "readRequest": readRequest])
                }
                if connection.json { return printJSON(rows) }
                for row in rows {
                    print("\(row["type"]!)\tsharing \(row["sharing"]!)\tshare request \(row["shareRequest"]!)\tread request \(row["readRequest"]!)")
                }
            }
        }
    }

    struct Pending: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "As the owner: the requests waiting for a decision.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "Only this app (bundle id).") var app: String?

        func run() async throws {
            try await connection.withStore { store in
                let entries = try await store.pendingAuthorizations(app: app)
                if connection.json { return printJSON(entries.map(json)) }
                if entries.isEmpty { print("no pending requests") }
                for entry in entries { print(line(entry)) }
            }
        }
    }

    /// Options naming the (app, type, direction) pairs of a decision.
    struct DecisionOptions: ParsableArguments {
        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "A type; repeatable.") var type: [String]
        @Option(help: "share, read or both.") var direction: String = "both"

        func pairs() throws -> [(ObjectType, AuthorizationDirection)] {
            let directions: [AuthorizationDirection]
            switch direction {
            case "share": directions = [.share]
            case "read": directions = [.read]
            case "both": directions = [.share, .read]
            default: throw ValidationErrorExit("--direction is share, read or both, not '\(direction)'")
            }
            let types = try type.map(resolveType)
            guard !types.isEmpty else { throw ValidationErrorExit("name at least one --type") }
            return types.flatMap { type in directions.map { (type, $0) } }
        }

        func decide(_ decision: AuthorizationDecision, _ connection: ConnectionOptions) async throws {
            let pairs = try pairs()
            try await connection.withStore { store in
                for (type, direction) in pairs {
                    try await store.decideAuthorization(app: app, type: type, direction: direction, decision: decision)
                    print("\(decision) \(direction) of \(type.identifier) to \(app)")
                }
            }
        }
    }

    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "As the owner: let an app share or read types.")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var decision: DecisionOptions
        func run() async throws { try await decision.decide(.granted, connection) }
    }

    struct Deny: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "As the owner: refuse an app sharing or reading types.")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var decision: DecisionOptions
        func run() async throws { try await decision.decide(.denied, connection) }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "As the owner: take back a grant (the app's streams relying on it end now).")
        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var decision: DecisionOptions
        func run() async throws { try await decision.decide(.revoked, connection) }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "As the owner: every app's authorization, and with --history the audit trail.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "Only this app (bundle id).") var app: String?
        @Flag(help: "Also list every request, decision and selection, oldest first.") var history = false

        func run() async throws {
            try await connection.withStore { store in
                let entries = try await store.authorizations(app: app)
                let events = history ? try await store.authorizationHistory(app: app) : []
                if connection.json {
                    return printJSON(["authorizations": entries.map(json), "history": events.map(json)])
                }
                if entries.isEmpty { print("no authorizations") }
                for entry in entries { print(line(entry)) }
                if history {
                    print("history:")
                    for event in events { print("  #\(event.sequence)\t\(iso(event.time))\t\(event.actor)\t\(event.app)\t\(event.action)") }
                }
            }
        }
    }

    struct Select: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "As the owner: the vision prescriptions an app may read (replaces the selection).")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The app's bundle id.") var app: String
        @Option(help: "The per-object type.") var type: String = "HKVisionPrescriptionTypeIdentifier"
        @Option(help: "A UUID to select; repeatable. None selects nothing.") var uuid: [String] = []

        func run() async throws {
            let type = try resolveType(type)
            let uuids = try uuid.map { try parseUUID($0, "--uuid") }
            try await connection.withStore { store in
                try await store.setObjectReadSelection(app: app, type: type, objects: uuids)
                print("\(app) may read \(uuids.count) selected \(type.identifier) object(s)")
            }
        }
    }

    struct Priority: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "As the owner: show or set the source order of a type (highest first).")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The type.") var type: String
        @Option(help: "Set the order: bundle ids, comma-separated (empty restores the default).") var set: String?

        func run() async throws {
            let type = try resolveType(type)
            try await connection.withStore { store in
                if let set {
                    try await store.setSourcePriority(for: type, order: set.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                }
                let sources = try await store.sourcePriority(for: type)
                if connection.json { return printJSON(sources.map { ["bundleIdentifier": $0.bundleIdentifier, "name": $0.name] }) }
                for (rank, source) in sources.enumerated() { print("\(rank + 1)\t\(source.bundleIdentifier)\t\(source.name)") }
            }
        }
    }
}

extension AuthCommand {
    struct Credentials: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "As the owner: every credential of your ledger (yours and your apps'): id, principal, state, label.")
        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            try await connection.withStore { store in
                let credentials = try await store.credentials()
                if connection.json {
                    return printJSON(
                        credentials.map { credential in
                            var row: [String: Any] = [
                                "id": credential.id, "principal": "\(credential.principal)", "label": credential.label,
                                "state": CredentialText.state(of: credential, now: Date()), "active": credential.refusal() == nil,
                            ]
                            if let issued = credential.issued { row["issued"] = iso(issued) }
                            if let expires = credential.expires { row["expires"] = iso(expires) }
                            if let revocation = credential.revocation, revocation != .distantPast { row["revoked"] = iso(revocation) }
                            if !credential.replacedBy.isEmpty { row["replacedBy"] = credential.replacedBy }
                            return row
                        })
                }
                for line in CredentialText.lines(credentials) { print(line) }
            }
        }
    }

    struct RevokeCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-credential",
            abstract: "As the owner: revoke a credential of your ledger (an app's, or one of yours): its next call is refused, its streams end.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The credential id (from `auth credentials`).") var id: String
        @Option(name: .customLong("after"), help: "Take effect this long from now (30m, 12h, at most 365d): it works until then.") var after: String?

        func run() async throws {
            let delay: Duration
            do { delay = try after.map { try CredentialText.duration($0, "--after") } ?? .zero } catch { throw fail(error) }
            try await connection.withStore { store in
                try await store.revokeCredential(id: id, effectiveIn: delay)
                try CredentialText.printRevoked(id, delay: delay, in: delay == .zero ? [] : try await store.credentials())
            }
        }
    }
}

/// A type from its HealthKit identifier or short name (`HeartRate`, `SleepAnalysis`, `VisionPrescription`).
func resolveType(_ name: String) throws -> ObjectType {
    if let type = try? ObjectType(name) { return type }
    let candidates = [
        "HKQuantityTypeIdentifier\(name)", "HKCategoryTypeIdentifier\(name)", "HKCharacteristicTypeIdentifier\(name)",
        "HKCorrelationTypeIdentifier\(name)", "HK\(name)TypeIdentifier",
    ]
    for candidate in candidates { if let type = try? ObjectType(candidate) { return type } }
    throw ValidationErrorExit("unknown type '\(name)'")
}

private func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }

private func state(_ entry: AuthorizationEntry) -> String {
    if let decision = entry.decision { return entry.direction == .objectRead ? "selected" : "\(decision)" }
    return entry.requested ? "pending" : "not requested"
}

private func line(_ entry: AuthorizationEntry) -> String {
    var text = "\(entry.app.bundleIdentifier)\t\(entry.type.identifier)\t\(entry.direction)\t\(state(entry))"
    if let at = entry.decidedAt ?? entry.requestedAt { text += "\t\(iso(at))" }
    if entry.direction == .objectRead {
        text += "\tselected [\(entry.selected.map(\.uuidString).joined(separator: " "))]"
        if entry.isPending { text += "\tmatching [\(entry.matching.map(\.uuidString).joined(separator: " "))]" }
    }
    return text
}

private func json(_ entry: AuthorizationEntry) -> [String: Any] {
    var object: [String: Any] = [
        "app": entry.app.bundleIdentifier, "appName": entry.app.name, "type": entry.type.identifier, "direction": "\(entry.direction)",
        "state": state(entry),
    ]
    if let at = entry.requestedAt { object["requestedAt"] = iso(at) }
    if let at = entry.decidedAt { object["decidedAt"] = iso(at) }
    if entry.direction == .objectRead {
        object["selected"] = entry.selected.map(\.uuidString)
        object["matching"] = entry.matching.map(\.uuidString)
        if let start = entry.rangeStart { object["from"] = iso(start) }
        if let end = entry.rangeEnd { object["to"] = iso(end) }
    }
    return object
}

private func json(_ event: AuthorizationEvent) -> [String: Any] {
    ["sequence": event.sequence, "time": iso(event.time), "actor": event.actor, "app": event.app, "action": "\(event.action)"]
}
