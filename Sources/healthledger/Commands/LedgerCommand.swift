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
                let ledger = try store.createStore().createLedger(id: id, displayName: name)
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
        commandName: "verify", abstract: "Check a ledger: its hash chain, projections and attachments; print its head.",
        discussion: """
            Recomputes the hash chain and names the first bad event; compares the live projections with a \
            fresh replay of the log; checks every attachment against the event that added it; prints the \
            head (sequence:SHA-256), which --expect-head takes later to prove the ledger still extends it. \
            --against FILE compares the ledger with an earlier event-log export and names the first event \
            that differs. \
            With --events FILE, checks an event-log export (`healthledger export --events`) instead, \
            without any ledger. Exits 2 when something is wrong.
            """)

    @OptionGroup var store: StoreOptions
    @Argument(help: "The ledger id.") var ledger: String?
    @Option(help: "An event-log export to check on its own.") var events: String?
    @Option(name: .customLong("expect-head"), help: "A head printed earlier, SEQ:HASH: the ledger must still hold event SEQ with that hash.")
    var expectHead: String?
    @Option(help: "An earlier event-log export of this ledger: the ledger must still hold every event in it.") var against: String?
    @Flag(help: "Check the hash chain (and --expect-head, --against) only: no replay, no attachments.") var quick = false

    func validate() throws {
        if (ledger == nil) == (events == nil) { throw ValidationError("give a ledger id, or --events FILE") }
        if expectHead != nil || against != nil, events != nil { throw ValidationError("--expect-head and --against check a ledger, not --events") }
    }

    /// The first event of the export whose hash the ledger does not hold: the first divergence.
    static func compare(_ ledger: Ledger, with export: URL) async throws -> String? {
        var divergence: String?
        var window: (start: UInt64, hashes: [[UInt8]]) = (1, [])
        let verified = try await EventLogExport.verify(export) { sequence, hash in
            guard divergence == nil else { return }
            if sequence >= window.start + UInt64(window.hashes.count) {
                window = (sequence, try ledger.eventHashes(from: sequence, limit: 10_000))
            }
            let index = Int(sequence - window.start)
            guard index < window.hashes.count else {
                divergence = "event \(sequence): the export holds it, the ledger ends before it"
                return
            }
            if window.hashes[index] != hash {
                divergence = "event \(sequence): its hash is \(hex(window.hashes[index])), the export's is \(hex(hash)): the history was rewritten from here"
            }
        }
        // Another ledger's export differs from the first event on: say so rather than "rewritten".
        guard verified.ledgerID == ledger.id else { return "the export is of ledger '\(verified.ledgerID)', not '\(ledger.id)'" }
        return divergence
    }

    /// SEQ:HASH, the hash in 64 hex digits.
    static func head(_ text: String) throws -> (sequence: UInt64, hash: [UInt8]) {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let sequence = UInt64(parts[0]), parts[1].count == 64,
            let hash = [UInt8](hexString: String(parts[1]))
        else { throw ValidationErrorExit("--expect-head '\(text)' is not SEQ:HASH (a sequence number and 64 hex digits)") }
        return (sequence, hash)
    }

    func run() async throws {
        if let events {
            do {
                let result = try await EventLogExport.verify(try inputFile(events))
                print("OK: \(result.events) events of ledger \(result.ledgerID), hash chain intact, head \(result.events):\(hex(result.headHash))")
            } catch let error as EventLogError {
                print("FAILED: \(error)")
                throw ExitCode(2)
            } catch { throw fail(error) }
            return
        }
        let pinned = try expectHead.map(Self.head)
        do {
            let ledger = try store.openStore().ledger(ledger!)
            let report = try ledger.verify(expectedHead: pinned) { count in
                FileHandle.standardError.write(Data("  verified \(count) events\n".utf8))
            }
            print("head \(report.headSequence):\(hex(report.headHash))")
            let seconds = Double(report.duration.components.seconds) + Double(report.duration.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Int(Double(report.eventsChecked) / seconds) : 0
            if let problem = report.problem {
                print("FAILED: \(problem)")
                print("checked \(report.eventsChecked) of \(report.headSequence) events")
                throw ExitCode(2)
            }
            var findings = ["\(report.eventsChecked) events, hash chain intact (\(rate) events/s)"]
            if let pinned { findings.append("extends the pinned head \(pinned.sequence)") }
            if let against {
                do {
                    if let divergence = try await Self.compare(ledger, with: try inputFile(against)) {
                        print("FAILED: \(divergence)")
                        throw ExitCode(2)
                    }
                } catch let error as EventLogError {
                    print("FAILED: the export \(against) does not verify: \(error)")
                    throw ExitCode(2)
                }
                findings.append("extends the history in \(against)")
            }
            if !quick {
                let replay = try ledger.replay()
                guard replay.identical else {
                    print("FAILED: the live projections differ from a fresh replay of the log (digest \(hex(replay.liveDigest)), not \(hex(replay.rebuiltDigest))): run `healthledger replay --install`")
                    throw ExitCode(2)
                }
                findings.append("projections equal a fresh replay")
                let attachments = try ledger.verifyAttachments()
                if let problem = attachments.problem {
                    print("FAILED: \(problem)")
                    throw ExitCode(2)
                }
                findings.append("\(attachments.checked) attachment\(attachments.checked == 1 ? "" : "s") match their events")
            }
            print("OK: " + findings.joined(separator: "; "))
        } catch let failure as LedgerFailure where failure.kind == .corrupted {
            print("FAILED: \(failure.message)")
            throw ExitCode(2)
        } catch let exit as ExitCode {
            throw exit
        } catch { throw fail(error) }
    }
}


struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Rebuild a ledger's projections from its log and compare them with the live ones.",
        discussion: """
            With --until SEQ|TIME --output DIR, writes the ledger as it stood then instead: its log up to that \
            event and the projections rebuilt from it, as DIR/ledgers/<id>/, a data directory of its own. \
            `healthledgerd --data-dir DIR` serves it (query it, export it), and the operator commands \
            (audit, log, verify, backup) read it.
            """)

    @OptionGroup var store: StoreOptions
    @Argument(help: "The ledger id.") var ledger: String
    @Flag(help: "Replace the live projections with the rebuilt ones when they differ.")
    var install = false
    @Option(help: "Write the ledger as it stood after this event (a sequence number) or at this time (ISO 8601).") var until: String?
    @Option(help: "The new data directory for --until.") var output: String?

    func validate() throws {
        if (until == nil) != (output == nil) { throw ValidationError("--until and --output go together") }
        if until != nil, install { throw ValidationError("--install repairs the ledger itself: not with --until") }
    }

    func run() async throws {
        if let until, let output {
            let point = try ConnectionOptions.pointInTime(until, flag: "--until")
            do {
                let source = try store.openStore().ledger(ledger)
                let sequence = try source.sequence(at: point)
                let destination = URL(filePath: output, directoryHint: .isDirectory)
                let ledgers = destination.appending(path: "ledgers", directoryHint: .isDirectory)
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: destination.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                    throw ValidationErrorExit("--output \(destination.path) is a file, not a directory: name a new data directory")
                }
                do { try FileManager.default.createDirectory(at: ledgers, withIntermediateDirectories: true) } catch {
                    throw ValidationErrorExit("cannot make the data directory \(ledgers.path): \((error as NSError).localizedFailureReason ?? (error as NSError).localizedDescription)")
                }
                try source.materialize(upTo: sequence, at: ledgers.appending(path: ledger, directoryHint: .isDirectory))
                let head = try LedgerStore(directory: destination, configuration: try store.configuration()).ledger(ledger).head()
                print("wrote \(ledger) as of event \(sequence) (head \(head.sequence):\(hex(head.hash))) to \(ledgers.appending(path: ledger).path)")
            } catch { throw fail(error) }
            return
        }
        let report: ReplayReport
        do {
            report = try store.openStore().ledger(ledger).replay(install: install) { count in
                print("  replayed \(count) events")
            }
        } catch let failure as LedgerFailure where failure.kind == .corrupted {
            // Damage is exit status 2, as for verify.
            print("FAILED: \(failure.message)")
            throw ExitCode(2)
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
