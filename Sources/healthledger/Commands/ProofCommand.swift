import ArgumentParser
import Foundation
import HealthLedgerSDK

/// `healthledger proof`: signed tree heads and Merkle proofs, as JSON files anyone can check.
struct ProofCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proof",
        abstract: "Signed tree heads and Merkle proofs of a ledger's history (owner), checkable offline.",
        discussion: """
            tree-head fetches the ledger's signed tree head; inclusion proves an event is in a tree head; \
            consistency proves today's tree extends an earlier head; check verifies any of these files with \
            nothing but the file (and, with --public-key, the ledger's key). docs/LEDGER.md describes the tree.
            """,
        subcommands: [TreeHead.self, Inclusion.self, Consistency.self, Check.self])

    struct TreeHead: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "tree-head", abstract: "The ledger's signed tree head now.")
        @OptionGroup var connection: ConnectionOptions
        @Option(name: .shortAndLong, help: "Write it to this new file (an existing one is not replaced; default: standard output).") var output: String?

        func run() async throws {
            try await connection.withStore { store in
                let head = try await store.treeHead()
                try ProofCommand.write(["kind": "tree-head", "treeHead": ProofCommand.json(head)], to: output)
            }
        }
    }

    struct Inclusion: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "inclusion", abstract: "Prove that an event is in a tree head.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The event's sequence number.") var sequence: UInt64
        @Option(name: .customLong("tree-head"), help: "A tree head file (from tree-head); default: the head now.") var treeHead: String?
        @Option(name: .shortAndLong, help: "Write the proof to this new file (an existing one is not replaced; default: standard output).") var output: String?

        func run() async throws {
            let given = try treeHead.map { try ProofCommand.treeHead(from: ProofCommand.read($0), key: "treeHead") }
            try await connection.withStore { store in
                let head: SignedTreeHead
                if let given { head = given } else { head = try await store.treeHead() }
                let proof = try await store.inclusionProof(of: sequence, in: head)
                try ProofCommand.write(
                    [
                        "kind": "inclusion", "treeHead": ProofCommand.json(head), "sequence": proof.sequence, "eventHash": hex(proof.eventHash),
                        "path": proof.path.map(hex),
                    ], to: output)
            }
        }
    }

    struct Consistency: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "consistency", abstract: "Prove that the tree now extends an earlier tree head.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The earlier tree head file (from tree-head).") var from: String
        @Option(name: .shortAndLong, help: "Write the proof to this new file (an existing one is not replaced; default: standard output).") var output: String?

        func run() async throws {
            let first = try ProofCommand.treeHead(from: ProofCommand.read(from), key: "treeHead")
            try await connection.withStore { store in
                let second = try await store.treeHead()
                let proof = try await store.consistencyProof(from: first, to: second)
                try ProofCommand.write(
                    ["kind": "consistency", "first": ProofCommand.json(first), "second": ProofCommand.json(second), "path": proof.path.map(hex)],
                    to: output)
            }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check", abstract: "Verify a tree head, inclusion or consistency file offline. Exits 2 when it does not hold.")
        @Argument(help: "The file.") var file: String
        @Option(name: .customLong("public-key"), help: "The ledger's public key (64 hex digits): the heads must be signed with it.")
        var publicKey: String?

        func run() async throws {
            let key = try publicKey.map { text in
                guard let bytes = [UInt8](hexString: text), bytes.count == 32 else { throw ValidationErrorExit("--public-key needs 64 hex digits") }
                return bytes
            }
            let object = try ProofCommand.read(file)
            do {
                switch object["kind"] as? String {
                case "tree-head":
                    let head = try ProofCommand.treeHead(from: object, key: "treeHead")
                    try TreeProofs.verify(head, publicKey: key)
                    print("OK: tree head of ledger \(head.ledgerID), \(head.size) events, root \(hex(head.rootHash)), signed by \(hex(head.publicKey))")
                case "inclusion":
                    let head = try ProofCommand.treeHead(from: object, key: "treeHead")
                    try TreeProofs.verify(head, publicKey: key)
                    guard let sequence = (object["sequence"] as? NSNumber)?.uint64Value, let eventHash = (object["eventHash"] as? String).flatMap({ [UInt8](hexString: $0) })
                    else { throw ValidationErrorExit("\(file): an inclusion proof needs sequence and eventHash") }
                    try TreeProofs.verify(InclusionProof(sequence: sequence, treeSize: head.size, eventHash: eventHash, path: try ProofCommand.path(object)), root: head.rootHash)
                    print("OK: event \(sequence) (hash \(hex(eventHash))) is in the tree of \(head.size) events of ledger \(head.ledgerID)")
                case "consistency":
                    let first = try ProofCommand.treeHead(from: object, key: "first")
                    let second = try ProofCommand.treeHead(from: object, key: "second")
                    try TreeProofs.verify(first, publicKey: key ?? second.publicKey)
                    try TreeProofs.verify(second, publicKey: key ?? first.publicKey)
                    guard first.ledgerID == second.ledgerID else { throw TreeProofs.Failure(description: "the heads are of two ledgers") }
                    try TreeProofs.verify(
                        ConsistencyProof(firstSize: first.size, secondSize: second.size, path: try ProofCommand.path(object)),
                        firstRoot: first.rootHash, secondRoot: second.rootHash)
                    print("OK: the tree of \(second.size) events extends the tree of \(first.size) events of ledger \(first.ledgerID)")
                default:
                    throw ValidationErrorExit("\(file) is not a tree head, inclusion or consistency file")
                }
            } catch let failure as TreeProofs.Failure {
                print("FAILED: \(failure)")
                throw ExitCode(2)
            }
        }
    }

    static func json(_ head: SignedTreeHead) -> [String: Any] {
        [
            "ledger": head.ledgerID, "size": head.size, "root": hex(head.rootHash), "timestampUs": head.timestampUs,
            "signature": hex(head.signature), "publicKey": hex(head.publicKey),
        ]
    }

    static func treeHead(from object: [String: Any], key: String) throws -> SignedTreeHead {
        guard let head = object[key] as? [String: Any], let ledger = head["ledger"] as? String, let size = (head["size"] as? NSNumber)?.uint64Value,
            let root = (head["root"] as? String).flatMap({ [UInt8](hexString: $0) }), let time = (head["timestampUs"] as? NSNumber)?.int64Value,
            let signature = (head["signature"] as? String).flatMap({ [UInt8](hexString: $0) }),
            let publicKey = (head["publicKey"] as? String).flatMap({ [UInt8](hexString: $0) })
        else { throw ValidationErrorExit("the file's \(key) is not a tree head (ledger, size, root, timestampUs, signature, publicKey)") }
        return SignedTreeHead(ledgerID: ledger, size: size, rootHash: root, timestampUs: time, signature: signature, publicKey: publicKey)
    }

    static func path(_ object: [String: Any]) throws -> [[UInt8]] {
        guard let path = object["path"] as? [String] else { throw ValidationErrorExit("the proof has no path") }
        return try path.map { element in
            guard let bytes = [UInt8](hexString: element), bytes.count == 32 else { throw ValidationErrorExit("a path element is not 32 bytes of hex") }
            return bytes
        }
    }

    static func read(_ path: String) throws -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationErrorExit("cannot read \(path)") }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { throw ValidationErrorExit("\(path) is not a JSON object") }
        return object
    }

    static func write(_ object: [String: Any], to path: String?) throws {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted]) + Data("\n".utf8)
        if let path {
            try writeNewFile(data, to: path)
        } else {
            FileHandle.standardOutput.write(data)
        }
    }
}
