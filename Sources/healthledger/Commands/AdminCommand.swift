import ArgumentParser
import Foundation
import HealthModel
import Ledger

/// Operator commands working directly on the data directory (safe while the server runs:
/// LMDB serializes writers across processes).
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin", abstract: "Operator commands: ledgers and credentials (on the data directory).",
        subcommands: [CreateLedger.self, IssueOwnerCredential.self, IssueAppCredential.self, RevokeCredential.self, ListCredentials.self])

    struct CreateLedger: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create-ledger", abstract: "Create a ledger.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id; a random UUID when omitted.") var id: String?
        @Option(help: "A display name.") var name = ""

        func run() async throws {
            do { print(try store.openStore().createLedger(id: id, displayName: name).id) } catch { throw fail(error) }
        }
    }

    struct IssueOwnerCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-owner-credential", abstract: "Issue the owner a credential (printed once; only its hash is kept).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id.") var ledger: String
        @Option(help: "A note to tell credentials apart.") var label = ""

        func run() async throws {
            do { print(try await store.openStore().ledger(ledger).issueCredential(for: .owner, label: label)) } catch { throw fail(error) }
        }
    }

    struct IssueAppCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-app-credential", abstract: "Issue an app (a source) a credential (printed once).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id.") var ledger: String
        @Option(name: .customLong("bundle-id"), help: "The app's bundle identifier, e.g. com.example.walk.") var bundleID: String
        @Option(help: "The app's name.") var name: String
        @Option(help: "A note to tell credentials apart.") var label = ""

        func run() async throws {
            do {
                let source = Source(bundleIdentifier: bundleID, name: name)
                print(try await store.openStore().ledger(ledger).issueCredential(for: .app(source), label: label))
            } catch { throw fail(error) }
        }
    }

    struct RevokeCredential: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke-credential", abstract: "Revoke a credential by id.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id.") var ledger: String
        @Argument(help: "The credential id (the third part of the credential string).") var id: String

        func run() async throws {
            do {
                try await store.openStore().ledger(ledger).revokeCredential(id: id)
                print("revoked \(id)")
            } catch { throw fail(error) }
        }
    }

    struct ListCredentials: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "credentials", abstract: "List a ledger's credentials.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id.") var ledger: String

        func run() async throws {
            do {
                for credential in try store.openStore().ledger(ledger).credentials() {
                    print("\(credential.id)\t\(credential.principal)\t\(credential.revoked ? "revoked" : "active")")
                }
            } catch { throw fail(error) }
        }
    }
}
