import ArgumentParser
import Foundation
import HealthLedgerSDK
import HealthModel
import Ledger

/// Operator commands: on the data directory (bootstrap and recovery; safe while the server
/// runs, LMDB serializes writers across processes), or with `--server` through the
/// server's operator RPCs, with an operator credential.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin", abstract: "Operator commands: ledgers and credentials (on the data directory, or --server).",
        discussion: """
            Without --server, works on the data directory (--data-dir). With --server, calls the running server \
            (--host, --port) with an operator credential (--credential), made once on the data directory with \
            issue-operator-credential. The operator manages ledgers and credentials and reads no health data.
            """,
        subcommands: [
            CreateLedger.self, ListLedgers.self, IssueOwnerCredential.self, SignInLink.self, IssueAppCredential.self, RotateCredential.self, RevokeCredential.self,
            ListCredentials.self,
            IssueOperatorCredential.self, RevokeOperatorCredential.self, ListOperatorCredentials.self, Hold.self, ReleaseHold.self, EraseLedger.self,
            NewMasterKey.self, RotateMasterKey.self,
        ])

    /// Where an admin command acts: the data directory, or the server.
    struct Target: ParsableArguments {
        @OptionGroup var store: StoreOptions
        @OptionGroup var connection: ConnectionOptions
        @Flag(help: "Call the running server's operator methods (with an operator --credential) instead of the data directory.")
        var server = false

        /// Runs `onDisk` on the store (made first when `creating` and missing), or `remote` on
        /// a connection to the server.
        func run(creating: Bool = false, onDisk: (LedgerStore) async throws -> Void, remote: (HealthStore) async throws -> Void) async throws {
            if server {
                try await connection.withStore(remote)
            } else {
                do { try await onDisk(try creating ? store.createStore() : store.openStore()) } catch { throw fail(error) }
            }
        }
    }

    struct CreateLedger: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create-ledger", abstract: "Create a ledger.")
        @OptionGroup var target: Target
        @Argument(help: "The ledger id; a random UUID when omitted.") var id: String?
        @Option(help: "A display name.") var name = ""

        func run() async throws {
            try await target.run(
                creating: true,
                onDisk: { print(try $0.createLedger(id: id, displayName: name).id) },
                remote: { print(try await $0.createLedger(id: id, displayName: name)) })
        }
    }

    struct ListLedgers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ledgers", abstract: "List the ledgers.")
        @OptionGroup var target: Target

        func run() async throws {
            try await target.run(onDisk: { for id in try $0.ledgerIDs() { print(id) } }, remote: { for id in try await $0.ledgers() { print(id) } })
        }
    }

    struct IssueOwnerCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-owner-credential", abstract: "Issue the owner a credential (printed once; only its hash is kept).")
        @OptionGroup var target: Target
        @Argument(help: "The ledger id.") var ledger: String
        @Option(help: "A note to tell credentials apart.") var label = ""
        @Option(name: .customLong("expires-in"), help: "How long it works: 90d, 12h, 30m, 2w, or never (the default).") var expiresIn: String?

        func run() async throws {
            let lifetime = try CredentialText.lifetime(expiresIn) ?? .unlimited
            try await target.run(
                onDisk: { print(try await $0.ledger(ledger).issueCredential(for: .owner, label: label, lifetime: lifetime)) },
                remote: { print(try await $0.issueCredential(ledger: ledger, for: .owner, label: label, lifetime: lifetime)) })
        }
    }

    struct SignInLink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign-in-link", abstract: "Print a one-time link that signs the ledger's owner in to the web app.",
            discussion: """
                The link carries a new owner credential (labelled "\(CredentialInfo.webSignInLinkLabel)") after '#', which \
                browsers never send to a server nor put in a Referer. It signs in once; the session it starts lasts until \
                its owner signs out or --expires-in passes, and the credential is revoked when it ends. Send it to the \
                person alone: until it is used, it is their key.
                """)
        @OptionGroup var target: Target
        @Argument(help: "The ledger id.") var ledger: String
        @Option(help: "The web app's address, as the person's browser reaches it.") var url = "http://127.0.0.1:7413"
        @Option(name: .customLong("expires-in"), help: "How long the link (and the session it starts) works: 12h (the default), 30m, 1d…") var expiresIn = "12h"

        func run() async throws {
            guard let lifetime = try CredentialText.lifetime(expiresIn), lifetime != .unlimited else {
                throw ValidationErrorExit("--expires-in must be a duration (30m, 12h, 1d): a sign-in link never lasts forever")
            }
            let base = url.hasSuffix("/") ? String(url.dropLast()) : url
            guard let parsed = URL(string: base), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw ValidationErrorExit("--url must be the web app's http:// or https:// address, not '\(url.prefix(80))'")
            }
            let label = CredentialInfo.webSignInLinkLabel
            try await target.run(
                onDisk: { print("\(base)/sign-in/link#\(try await $0.ledger(ledger).issueCredential(for: .owner, label: label, lifetime: lifetime))") },
                remote: { print("\(base)/sign-in/link#\(try await $0.issueCredential(ledger: ledger, for: .owner, label: label, lifetime: lifetime))") })
        }
    }

    struct IssueAppCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-app-credential", abstract: "Issue an app (a source) a credential (printed once).")
        @OptionGroup var target: Target
        @Argument(help: "The ledger id.") var ledger: String
        @Option(name: .customLong("bundle-id"), help: "The app's bundle identifier, e.g. com.example.walk.") var bundleID: String
        @Option(help: "The app's name.") var name: String
        @Option(help: "A note to tell credentials apart.") var label = ""
        @Option(name: .customLong("expires-in"), help: "How long it works: 90d, 12h, 30m, 2w, or never (the default).") var expiresIn: String?

        func run() async throws {
            let principal = Principal.app(Source(bundleIdentifier: bundleID, name: name))
            let lifetime = try CredentialText.lifetime(expiresIn) ?? .unlimited
            try await target.run(
                onDisk: { print(try await $0.ledger(ledger).issueCredential(for: principal, label: label, lifetime: lifetime)) },
                remote: { print(try await $0.issueCredential(ledger: ledger, for: principal, label: label, lifetime: lifetime)) })
        }
    }

    struct RotateCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-credential",
            abstract: "Replace a credential: prints a new one for the same principal; the old one works until its grace period ends.",
            discussion: """
                The new credential keeps the old one's label and, unless --expires-in says otherwise, its lifetime \
                (counted from now). The old one keeps working for --grace (default 24h), so that the app or \
                person can switch, then is refused ("credential was rotated (replaced by …) and is refused since …") and \
                its streams end. `revoke-credential` on the old id ends the grace period at once.
                """)
        @OptionGroup var target: Target
        @Argument(help: "The ledger id.") var ledger: String
        @Argument(help: "The credential id (the third part of the credential string).") var id: String
        @Option(help: "How long the old credential keeps working: 24h (the default), 7d, 0 (not at all); at most 365d.") var grace = "24h"
        @Option(name: .customLong("expires-in"), help: "The new credential's lifetime: 90d, 12h, never; default: the old one's.") var expiresIn: String?

        func run() async throws {
            let grace = try CredentialText.duration(grace, "--grace")
            guard grace <= CredentialLifetime.maximumGrace else { throw ValidationErrorExit("--grace is at most 365d, got \(self.grace)") }
            let lifetime = try CredentialText.lifetime(expiresIn)
            try await target.run(
                onDisk: { print(try await $0.ledger(ledger).rotateCredential(id: id, grace: grace, lifetime: lifetime)) },
                remote: { print(try await $0.rotateCredential(ledger: ledger, id: id, grace: grace, lifetime: lifetime)) })
            FileHandle.standardError.write(Data("the old credential \(id) works for \(self.grace == "0" ? "no longer" : self.grace) more\n".utf8))
        }
    }

    struct RevokeCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-credential", abstract: "Revoke a credential by id: its next call is refused, its streams end.")
        @OptionGroup var target: Target
        @Argument(help: "The ledger id.") var ledger: String
        @Argument(help: "The credential id (the third part of the credential string).") var id: String
        @Option(name: .customLong("after"), help: "Take effect this long from now (30m, 12h, at most 365d): it works until then.") var after: String?

        func run() async throws {
            let delay = try after.map { try CredentialText.duration($0, "--after") } ?? .zero
            try await target.run(
                onDisk: {
                    let ledger = try $0.ledger(ledger)
                    try await ledger.revokeCredential(id: id, effectiveAfter: delay)
                    try CredentialText.printRevoked(id, delay: delay, in: try ledger.credentials())
                },
                remote: {
                    try await $0.revokeCredential(ledger: ledger, id: id, effectiveIn: delay)
                    try CredentialText.printRevoked(id, delay: delay, in: delay == .zero ? [] : try await $0.credentials(ledger: ledger))
                })
        }
    }

    struct ListCredentials: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "credentials", abstract: "List a ledger's credentials: id, principal, state (active, until when, expired, revoked, rotated), label.")
        @OptionGroup var target: Target
        @Argument(help: "The ledger id.") var ledger: String

        func run() async throws {
            try await target.run(
                onDisk: { for line in CredentialText.lines(try $0.ledger(ledger).credentials()) { print(line) } },
                remote: { for line in CredentialText.lines(try await $0.credentials(ledger: ledger)) { print(line) } })
        }
    }

    struct Hold: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "hold",
            abstract: "Place a legal hold on a ledger: erasure is refused until it is released (on the data directory).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id.") var ledger: String
        @Option(help: "Why the records must be kept.") var reason: String

        func run() async throws {
            let earlier: String?
            do {
                guard !reason.isEmpty else { throw ValidationErrorExit("--reason must say why the records must be kept") }
                let held = try store.openStore().ledger(ledger)
                earlier = try held.legalHold()
                try held.setLegalHold(reason: reason)
            } catch { throw fail(error) }
            print("held \(ledger): \(reason)" + (earlier.map { $0 == reason ? " (already held so)" : " (replacing the hold: \($0))" } ?? ""))
        }
    }

    struct ReleaseHold: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "release-hold", abstract: "Lift a ledger's legal hold (on the data directory).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id.") var ledger: String

        func run() async throws {
            let lifted: String
            do {
                let held = try store.openStore().ledger(ledger)
                guard let reason = try held.legalHold() else { throw ValidationErrorExit("ledger '\(ledger)' is under no legal hold: nothing to release") }
                try held.setLegalHold(reason: nil)
                lifted = reason
            } catch { throw fail(error) }
            print("released \(ledger) (held: \(lifted))")
        }
    }

    struct EraseLedger: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "erase-ledger",
            abstract: "Erase a whole ledger, for a person who leaves (--server: through the running server and its followers).",
            discussion: """
                The ledger's data file is overwritten with zeros and its directory removed. The \
                erasure is recorded in the data directory's erasure journal (erasures/LEDGER.jsonl), \
                so that `healthledger restore` refuses every backup of it, and the id is not used \
                again. Backups elsewhere still hold it: see Deploy/README.md, "Erasure and backups".

                With --server, the running server erases it: the ledger's streams end, its calls \
                finish (at most ten seconds, else nothing is erased), and its followers (a \
                cluster's members) erase their copies. Without it, on the data directory, the \
                server must be stopped.
                """)
        @OptionGroup var target: Target
        @Argument(help: "The ledger id.") var ledger: String
        @Option(help: "Why (recorded in the erasure journal; at most 1,000 bytes).") var reason = ""

        func run() async throws {
            try await target.run(
                onDisk: { try $0.eraseLedger(ledger, reason: reason) },
                remote: { try await $0.eraseLedger(ledger, reason: reason) })
            print("erased ledger \(ledger)")
        }
    }

    struct NewMasterKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "new-master-key",
            abstract: "Make a master key file (32 random bytes, readable by its owner only); keep it outside the data directory and its backups.")
        @Argument(help: "Where to write it (an existing file is not replaced).") var file: String

        func run() async throws {
            do {
                let key = try MasterKey.create(at: file)
                print("made master key \(key.id) in \(file)")
            } catch { throw fail(error) }
        }
    }

    struct RotateMasterKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-master-key",
            abstract: "Re-wrap every ledger's data key under a new master key (on the data directory, with the server stopped).",
            discussion: """
                The data is not rewritten: each ledger's data key is wrapped again, and the data directory \
                records the new key's id. Start the server with the new key afterwards. Backups taken before \
                still need the old key: keep it as long as them. Interrupted, run it again.
                """)
        @OptionGroup var store: StoreOptions
        @Option(name: .customLong("new-key-file"), help: "The new master key (make it with new-master-key).") var newKeyFile: String

        func run() async throws {
            do {
                guard let oldPath = store.masterKeyPath else {
                    throw ValidationErrorExit("give the current key with --master-key-file (or HEALTHLEDGER_MASTER_KEY_FILE)")
                }
                let (oldKey, newKey) = (try MasterKey.load(from: oldPath), try MasterKey.load(from: newKeyFile))
                guard oldKey.id != newKey.id else { throw ValidationErrorExit("the new key is the current key") }
                let rotated = try LedgerStore.rotateMasterKey(directory: store.directory, from: oldKey, to: newKey)
                print("re-wrapped \(rotated.count) ledger\(rotated.count == 1 ? "" : "s")' data keys under master key \(newKey.id)")
            } catch { throw fail(error) }
        }
    }

    struct IssueOperatorCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-operator-credential",
            abstract: "Issue an operator credential for the operator RPCs (on the data directory; printed once).")
        @OptionGroup var store: StoreOptions
        @Option(help: "A note to tell credentials apart.") var label = ""
        @Option(name: .customLong("expires-in"), help: "How long it works: 90d, 12h, 30m, 2w, or never (the default).") var expiresIn: String?

        func run() async throws {
            let lifetime = try CredentialText.lifetime(expiresIn) ?? .unlimited
            do { print(try store.createStore().issueOperatorCredential(label: label, lifetime: lifetime)) } catch { throw fail(error) }
        }
    }

    struct RevokeOperatorCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-operator-credential", abstract: "Revoke an operator credential by id (on the data directory).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The credential id (the third part of the credential string).") var id: String

        func run() async throws {
            do {
                try store.openStore().revokeOperatorCredential(id: id)
                print("revoked \(id)")
            } catch { throw fail(error) }
        }
    }

    struct ListOperatorCredentials: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "operator-credentials", abstract: "List the operator credentials (on the data directory).")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            do {
                for line in CredentialText.lines(try store.openStore().operatorCredentials()) { print(line) }
            } catch { throw fail(error) }
        }
    }
}
