import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LMDB
import Synchronization

/// Full disks, as writes meet them: which ledgers' last commit failed for want of space
/// (until one of theirs succeeds again), and how many commits failed so, for readiness and
/// metrics. Commits resume by themselves once space returns.
public enum DiskSpace {
    private static let full = Mutex<Set<String>>([])
    private static let failures = Atomic<Int>(0)

    /// The ledgers whose last commit failed because their disk is full, sorted.
    public static var ledgersOnFullDisk: [String] { full.withLock { $0.sorted() } }

    /// Commits that failed because a disk was full, since the process started.
    public static var fullDiskFailures: Int { failures.load(ordering: .relaxed) }

    /// Bytes an unprivileged writer may still use on the file system holding `path`.
    public static func available(at path: String) -> Int? {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        return Int(stats.f_bavail) * Int(stats.f_frsize)
    }

    /// Below this much free space, an I/O error of a write is the disk being full: LMDB
    /// reports a short write as EIO, which is what a nearly full disk gives.
    static let nearlyFull = 8 << 20

    /// The failure a storage error of ledger `ledger` (in `directory`) is, naming a full disk
    /// as one, and whether it is one (recorded until ``recovered(_:)``).
    static func failure(_ error: LMDBError, ledger: String, directory: String) -> (failure: LedgerFailure, diskFull: Bool) {
        if error.code == .mapFull {
            return (LedgerFailure(.storage, "ledger '\(ledger)' reached its maximum size; nothing was written", cause: error), false)
        }
        let free = available(at: directory)
        guard error.code == .noSpace || (free ?? .max) < nearlyFull else {
            return (LedgerFailure(.storage, "storage failed (\(error)); nothing was written", cause: error), false)
        }
        failures.add(1, ordering: .relaxed)
        full.withLock { _ = $0.insert(ledger) }
        let left = free.map { ", \($0 < 1 << 20 ? "\($0) bytes" : "\($0 >> 20) MiB") free" } ?? ""
        return (LedgerFailure(.storage, "the disk holding ledger '\(ledger)' (\(directory)) is full\(left); nothing was written", cause: error), true)
    }

    /// A commit of `ledger` succeeded: its disk has room again.
    static func recovered(_ ledger: String) {
        full.withLock { _ = $0.remove(ledger) }
    }
}
