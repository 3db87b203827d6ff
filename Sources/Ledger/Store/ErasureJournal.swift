import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The store's record of what was erased, kept outside every ledger's directory and so
/// outside its backups: `<data-dir>/erasures/<ledger>.jsonl`, one JSON object a line, synced
/// before an erasure is answered. It holds UUIDs, times and reasons, never a value.
///
/// A restore applies it: a backup taken before an erasure gets the same objects erased
/// before it becomes the ledger, and a backup of a ledger erased whole is refused
/// (Deploy/README.md, "Erasure and backups").
struct ErasureJournal: Sendable {
    /// One erasure: the objects it named (its correlations' members and workouts' routes are
    /// found again from them), or the whole ledger.
    struct Entry: Codable, Sendable, Hashable {
        var time: Date
        /// The erasure's last event in the ledger (0 for a whole ledger).
        var sequence: UInt64
        var objects: [UUID]
        var reason: String
        /// The ledger itself was erased (`admin erase-ledger`).
        var ledgerErased: Bool?
        /// The types of the characteristics whose values set before `sequence` were erased.
        var characteristics: [String]?
    }

    let directory: URL

    init(store: URL) { directory = store.appending(path: "erasures", directoryHint: .isDirectory) }

    private func file(of ledger: String) -> URL { directory.appending(path: "\(ledger).jsonl") }

    /// Appends `entry` for `ledger` and syncs it (and the directory, when the file is new).
    func append(_ entry: Entry, ledger: String) throws {
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            encoder.outputFormatting = [.sortedKeys]
            let line = try encoder.encode(entry) + Data("\n".utf8)
            let path = file(of: ledger).path
            let existed = FileManager.default.fileExists(atPath: path)
            let descriptor = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT, 0o600)
            guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            defer { Glibc.close(descriptor) }
            let written = line.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard written == line.count, fsync(descriptor) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            if !existed { try LedgerStore.syncDirectory(directory) }
        } catch {
            throw LedgerFailure(
                .storage,
                "the erasure of ledger '\(ledger)' is done, but its erasure journal (\(file(of: ledger).path)) could not be written, so a restored older backup would bring the values back: \(error)",
                cause: error)
        }
    }

    /// The entries of `ledger`, oldest first (none when it has no journal).
    func entries(of ledger: String) throws -> [Entry] {
        let url = file(of: ledger)
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map { try decoder.decode(Entry.self, from: Data($0.utf8)) }
        } catch {
            throw LedgerFailure(.corrupted, "the erasure journal \(url.path) does not read: \(error)", cause: error)
        }
    }
}

extension LedgerStore {
    /// Erases a whole ledger, for a person who leaves: journals it (so that no backup of it is
    /// ever restored into this store), overwrites its data file with zeros and removes its
    /// directory.
    ///
    /// - Throws: ``LedgerFailure`` `notFound`; `storage` when the ledger is open in this
    ///   process or another one (stop the server first); `failedPrecondition` under a legal hold.
    public func eraseLedger(_ id: String, reason: String) throws {
        try Self.validate(id: id)
        let target = directory(of: id)
        guard FileManager.default.fileExists(atPath: target.appending(path: "data.mdb").path) else {
            throw LedgerFailure(.notFound, "no ledger '\(id)' in \(directory.path)")
        }
        try reserving(id) {
            guard !isOpenInProcess(id) else { throw LedgerFailure(.storage, "ledger '\(id)' is open in this process: it cannot be erased while in use") }
            guard !Self.isOpenByAnotherProcess(target) else {
                throw LedgerFailure(.storage, "ledger '\(id)' is open in another process (is healthledgerd running?): stop it before erasing the ledger")
            }
            let hold = try {
                let ledger = try Ledger(id: id, directory: target, configuration: configuration.maintenance, logger: logger)
                return try ledger.legalHold()
            }()
            if let hold { throw Ledger.heldRefusal(ledger: id, reason: hold) }
            try erasureJournal.append(ErasureJournal.Entry(time: Date(), sequence: 0, objects: [], reason: reason, ledgerErased: true), ledger: id)
            views.discard(ledgerID: id)
            // The file's bytes first: removing it alone leaves them on the disk.
            let file = target.appending(path: "data.mdb").path
            let descriptor = Glibc.open(file, O_WRONLY)
            if descriptor >= 0 {
                defer { Glibc.close(descriptor) }
                var remaining = Int(lseek(descriptor, 0, SEEK_END))
                let zeros = [UInt8](repeating: 0, count: 1 << 20)
                var offset = 0
                while remaining > 0 {
                    let length = min(remaining, zeros.count)
                    guard zeros.withUnsafeBytes({ pwrite(descriptor, $0.baseAddress, length, off_t(offset)) }) == length else {
                        throw LedgerFailure(.storage, "cannot overwrite \(file): \(String(cString: strerror(errno)))")
                    }
                    offset += length
                    remaining -= length
                }
                guard fsync(descriptor) == 0 else { throw LedgerFailure(.storage, "cannot sync \(file): \(String(cString: strerror(errno)))") }
            }
            do {
                try FileManager.default.removeItem(at: target)
                try Self.syncDirectory(ledgersDirectory)
            } catch {
                throw LedgerFailure(.storage, "ledger '\(id)' was overwritten but its directory could not be removed: \(error)", cause: error)
            }
        }
    }
}
