import Foundation
import HealthModel

/// A copy of a ledger taken for a new or lagging follower: a backup (``Ledger/backup(to:)``)
/// kept in the store's `replication-snapshots` directory until the follower releases it, or
/// for an hour.
public struct ReplicationSnapshot: Sendable, Hashable {
    public struct File: Sendable, Hashable {
        public var name: String
        public var size: UInt64

        public init(name: String, size: UInt64) {
            self.name = name
            self.size = size
        }
    }

    public var id: String
    /// The backup's manifest file's bytes (``BackupManifest/fileName``).
    public var manifest: [UInt8]
    /// Its files, the manifest's own among them.
    public var files: [File]
}

extension LedgerStore {
    /// The most bytes one ``snapshotChunk(_:file:offset:)`` returns.
    public static let snapshotChunkSize = 4 << 20
    /// How long a snapshot no one released is kept.
    static let snapshotLifetime: TimeInterval = 3600

    private var snapshotsDirectory: URL { directory.appending(path: "replication-snapshots", directoryHint: .isDirectory) }

    /// Takes a snapshot of ledger `id` for a follower: a backup, consistent as of one
    /// moment, taken while the ledger keeps serving. Snapshots older than an hour go first.
    /// - Throws: ``LedgerFailure`` `notFound` for an unknown ledger, `storage` when the copy fails.
    public func takeSnapshot(of id: String) throws -> ReplicationSnapshot {
        let ledger = try ledger(id)
        removeStaleSnapshots()
        let snapshot = UUID().uuidString.lowercased()
        let target = snapshotsDirectory.appending(path: snapshot, directoryHint: .isDirectory)
        do {
            try FileManager.default.createDirectory(at: snapshotsDirectory, withIntermediateDirectories: true)
        } catch {
            throw LedgerFailure(.storage, "cannot create \(snapshotsDirectory.path): \(error.localizedDescription)", cause: error)
        }
        let manifest = try ledger.backup(to: target)
        let names = manifest.files + [BackupManifest.fileName]
        let files = try names.map { name in
            ReplicationSnapshot.File(name: name, size: try Self.size(of: target.appending(path: name)))
        }
        let manifestBytes = try Data(contentsOf: target.appending(path: BackupManifest.fileName))
        return ReplicationSnapshot(id: snapshot, manifest: Array(manifestBytes), files: files)
    }

    /// Up to ``snapshotChunkSize`` bytes of a snapshot's file from `offset` (none at its end).
    /// - Throws: ``LedgerFailure`` `notFound` for an unknown or released snapshot or a file it
    ///   does not hold, `invalidArgument` for an offset past the file's end.
    public func snapshotChunk(_ snapshot: String, file: String, offset: UInt64) throws -> [UInt8] {
        let directory = try snapshotDirectory(snapshot)
        let manifest = try BackupManifest.read(from: directory)
        guard file == BackupManifest.fileName || manifest.files.contains(file) else {
            throw LedgerFailure(.notFound, "snapshot \(snapshot) holds no file '\(file.prefix(200))'")
        }
        let url = directory.appending(path: file)
        let size = try Self.size(of: url)
        guard offset <= size else { throw LedgerFailure(.invalidArgument, "offset \(offset) is past the end of '\(file)' (\(size) bytes)") }
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            try handle.seek(toOffset: offset)
            return Array(try handle.read(upToCount: Self.snapshotChunkSize) ?? Data())
        } catch {
            throw LedgerFailure(.storage, "cannot read \(url.path): \(error.localizedDescription)", cause: error)
        }
    }

    /// Deletes a snapshot its follower is done with.
    public func releaseSnapshot(_ snapshot: String) throws {
        try? FileManager.default.removeItem(at: try snapshotDirectory(snapshot))
    }

    private func snapshotDirectory(_ snapshot: String) throws -> URL {
        guard UUID(uuidString: snapshot) != nil else { throw LedgerFailure(.invalidArgument, "'\(snapshot.prefix(100))' is not a snapshot id") }
        let directory = snapshotsDirectory.appending(path: snapshot.lowercased(), directoryHint: .isDirectory)
        guard FileManager.default.fileExists(atPath: directory.path) else {
            throw LedgerFailure(.notFound, "no snapshot \(snapshot): it was released, or kept past its hour")
        }
        return directory
    }

    /// Deletes the snapshots of ledger `id`: an erasure leaves none holding what it erased.
    func removeSnapshots(of id: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory.path)) ?? []
        for name in names {
            let url = snapshotsDirectory.appending(path: name, directoryHint: .isDirectory)
            // A snapshot still being taken has no manifest yet: its ledger is unknown, so it goes too.
            if (try? BackupManifest.read(from: url))?.ledgerID ?? id == id { try? FileManager.default.removeItem(at: url) }
        }
    }

    private func removeStaleSnapshots() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: snapshotsDirectory.path)) ?? []
        let cutoff = Date().addingTimeInterval(-Self.snapshotLifetime)
        for name in names {
            let url = snapshotsDirectory.appending(path: name)
            let created = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date
            if let created, created < cutoff { try? FileManager.default.removeItem(at: url) }
        }
    }

    private static func size(of url: URL) throws -> UInt64 {
        do {
            return ((try FileManager.default.attributesOfItem(atPath: url.path))[.size] as? NSNumber)?.uint64Value ?? 0
        } catch {
            throw LedgerFailure(.storage, "cannot read the size of \(url.path): \(error.localizedDescription)", cause: error)
        }
    }
}
