import Foundation

/// The server that serves a data directory, as the directory's `node.json` names it:
/// `healthledgerd` writes it when it starts, and backups taken there name it
/// (``BackupManifest/node``), so that an operator with backups of several cluster members
/// knows which member each came from.
public struct NodeIdentity: Codable, Sendable, Hashable {
    /// The file's name in the data directory.
    public static let fileName = "node.json"

    /// The server's name (`--node-id`; the host name by default).
    public var node: String
    /// Its cluster's name, when it is a member of one (`--cluster`).
    public var cluster: String?

    public init(node: String, cluster: String? = nil) {
        self.node = node
        self.cluster = cluster
    }

    /// Writes `node.json` into `dataDirectory`, replacing the one there atomically.
    /// - Throws: ``LedgerFailure`` `storage` when it cannot be written.
    public func write(to dataDirectory: URL) throws {
        let file = dataDirectory.appending(path: Self.fileName)
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(self).write(to: file, options: .atomic)
        } catch {
            throw LedgerFailure(.storage, "cannot write \(file.path): \(error.localizedDescription)", cause: error)
        }
    }

    /// The identity `dataDirectory`'s `node.json` holds; nil when there is none, or it does not decode.
    public static func read(from dataDirectory: URL) -> NodeIdentity? {
        guard let data = try? Data(contentsOf: dataDirectory.appending(path: fileName)) else { return nil }
        return try? JSONDecoder().decode(NodeIdentity.self, from: data)
    }
}
