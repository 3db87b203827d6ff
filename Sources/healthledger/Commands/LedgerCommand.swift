import ArgumentParser
import Foundation
import HealthExport
import HealthModel
import Ledger

struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger", abstract: "Create and list ledgers.", subcommands: [Create.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a ledger (one person's health store).")

        @OptionGroup var store: StoreOptions
        @Argument(help: "The ledger id (a-z, 0-9, '.', '_', '-'); a random UUID when omitted.")
        var id: String?
        @Option(help: "A display name recorded in the creation event.")
        var name: String = ""

        func run() async throws {
            do {
                let ledger = try store.openStore().createLedger(id: id, displayName: name)
                print(ledger.id)
            } catch { throw fail(error) }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the ledgers with their event counts.")

        @OptionGroup var store: StoreOptions

        func run() async throws {
            do {
                let store = try store.openStore()
                let ids = try store.ledgerIDs()
                if ids.isEmpty {
                    print("no ledgers in \(store.directory.path)")
                    return
                }
                print("LEDGER".padding(toLength: 38, withPad: " ", startingAt: 0) + "EVENTS")
                for id in ids {
                    let events = (try? store.ledger(id).head().sequence).map(String.init) ?? "unreadable"
                    print(id.padding(toLength: max(38, id.count + 2), withPad: " ", startingAt: 0) + events)
                }
            } catch { throw fail(error) }
        }
    }
}

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Recompute a ledger's hash chain and report the first bad event.",
        discussion: "With --events FILE, checks an event-log export (`healthledger export --events`) instead, without any ledger.")

    @OptionGroup var store: StoreOptions
    @Argument(help: "The ledger id.") var ledger: String?
    @Option(help: "An event-log export to check on its own.") var events: String?

    func validate() throws {
        if (ledger == nil) == (events == nil) { throw ValidationError("give a ledger id, or --events FILE") }
    }

    func run() async throws {
        if let events {
            do {
                let result = try await EventLogExport.verify(URL(filePath: events))
                print("OK: \(result.events) events of ledger \(result.ledgerID), hash chain intact, head \(result.events):\(result.headHash.map { String(format: "%02x", $0) }.joined())")
            } catch let error as EventLogError {
                print("FAILED: \(error)")
                throw ExitCode(2)
            } catch { throw fail(error) }
            return
        }
        let report: VerifyReport
        do {
            report = try store.openStore().ledger(ledger!).verify { count in
                FileHandle.standardError.write(Data("  verified \(count) events\n".utf8))
            }
        } catch let failure as LedgerFailure where failure.kind == .corrupted {
            print("FAILED: \(failure.message)")
            throw ExitCode(2)
        } catch { throw fail(error) }
        let seconds = Double(report.duration.components.seconds) + Double(report.duration.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Int(Double(report.eventsChecked) / seconds) : 0
        if let problem = report.problem {
            print("FAILED: \(problem)")
            print("checked \(report.eventsChecked) of \(report.headSequence) events")
            throw ExitCode(2)
        }
        print("OK: \(report.eventsChecked) events, hash chain intact, projections at the head (\(rate) events/s)")
    }
}

struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Rebuild a ledger's projections from its log and compare them with the live ones.")

    @OptionGroup var store: StoreOptions
    @Argument(help: "The ledger id.") var ledger: String
    @Flag(help: "Replace the live projections with the rebuilt ones when they differ.")
    var install = false

    func run() async throws {
        let report: ReplayReport
        do {
            report = try store.openStore().ledger(ledger).replay(install: install) { count in
                print("  replayed \(count) events")
            }
        } catch { throw fail(error) }
        let seconds = Double(report.duration.components.seconds) + Double(report.duration.components.attoseconds) / 1e18
        let rebuild = Double(report.rebuildDuration.components.seconds) + Double(report.rebuildDuration.components.attoseconds) / 1e18
        print("replayed \(report.events) events into fresh projections in \(String(format: "%.3f", rebuild)) s (\(rebuild > 0 ? Int(Double(report.events) / rebuild) : 0) events/s); with digests \(String(format: "%.3f", seconds)) s")
        print("objects:         \(report.objects)")
        print("live digest:     \(hex(report.liveDigest))")
        print("rebuilt digest:  \(hex(report.rebuiltDigest))")
        if report.identical {
            print("IDENTICAL: the live projections equal a fresh replay")
        } else if report.installed {
            print("REPAIRED: the projections differed; the rebuilt ones are now live")
        } else {
            print("DIFFERENT: the live projections do not match the log; run again with --install to repair")
            throw ExitCode(2)
        }
    }
}

struct LogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log", abstract: "Print a ledger's events, one per line (see `healthledger audit` for filters).")

    @OptionGroup var store: StoreOptions
    @Argument(help: "The ledger id.") var ledger: String
    @Option(help: "First sequence number.") var from: UInt64 = 1
    @Option(help: "Most events to print.") var limit: Int = 50

    func run() async throws {
        do {
            let ledger = try store.openStore().ledger(ledger)
            let page = try ledger.audit(AuditFilter(fromSequence: from), limit: max(1, min(limit, Ledger.maximumAuditPage)), as: .operator)
            for event in page.events {
                print("\(event.sequence)\t\(event.time.formatted(.iso8601))\t\(event.actor)\t\(event.kind)\t\(event.sentence)")
            }
        } catch { throw fail(error) }
    }
}
