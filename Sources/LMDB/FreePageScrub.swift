import CLMDB
import Foundation

/// What ``Environment/scrubFreePages()`` did.
public struct ScrubReport: Sendable, Hashable {
    /// Free pages overwritten with zeros.
    public var scrubbed: Int
    /// Free pages left as they were, freed before the last commit: a read transaction (of
    /// any process) may still see them. (Those the last commit freed are never counted.)
    public var held: Int
    /// Live pages whose unused gap held stale bytes, now zeros.
    public var gaps: Int = 0

    public init(scrubbed: Int, held: Int) {
        self.scrubbed = scrubbed
        self.held = held
    }
}

extension Environment {
    /// Overwrites with zeros every free page of the data file that no reader can still see,
    /// so that what a transaction deleted or replaced is gone from the file's bytes, not only
    /// from its trees.
    ///
    /// LMDB copies a page on write and keeps the old copy on its free list until it reuses
    /// it; the bytes stay in `data.mdb` until then. A free page no read transaction can see
    /// (freed by a transaction older than every reader's, and older than the last commit,
    /// which the previous meta page still names) is exactly one LMDB itself may overwrite
    /// now, so zeroing it changes nothing LMDB or a reader relies on. It runs holding the
    /// write lock, before the transaction writes anything, and the transaction is aborted:
    /// the free list is unchanged.
    ///
    /// Paused ``Snapshot``s of this process are ended first. Pages the free list files under
    /// the last commit are never free to scrub: commit once more (any write) and call this
    /// again. (A commit files there both the pages it freed and those it took from older
    /// entries of the free list without using them: two rounds of a commit and a scrub leave
    /// no free page unscrubbed but those a reader holds.)
    /// - Throws: ``LMDBError`` when the free list cannot be read or the file written.
    /// - Parameter zeroingGaps: also zero the unused gaps of live pages (a pass over the whole file).
    public func scrubFreePages(zeroingGaps: Bool = true) throws -> ScrubReport {
        releasePausedSnapshots()
        let pageSize = info.pageSize
        var fd: Int32 = -1
        try check(mdb_env_get_fd(handle, &fd), "mdb_env_get_fd")
        return try resizeLock.withReadLock {
            if isJournaled { committing.lock() }
            defer { if isJournaled { committing.unlock() } }
            // The write transaction holds the writer's lock; the free list is read through a
            // read transaction beside it (LMDB opens no cursor on it in a write transaction),
            // which sees the state the writer starts from.
            let txn = try begin(readOnly: false)
            defer { txn.abort() }
            // A journaled environment's pin holds the pages freed since its last checkpoint,
            // and its journal the changes since: checkpoint (the records zeroed) first.
            try checkpoint(erasingRecords: true)
            let freeList = try begin(readOnly: true)
            defer { freeList.abort() }
            let lastCommit = UInt64(mdb_txn_id(txn.handle)) - 1
            let oldest = min(lastCommit, oldestReader() ?? .max)
            var report = ScrubReport(scrubbed: 0, held: 0)
            let zeros = [UInt8](repeating: 0, count: pageSize)
            func zero(_ page: Int, from start: Int = 0, to end: Int? = nil) throws {
                let length = (end ?? pageSize) - start
                let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, length, off_t(page * pageSize + start)) }
                guard written == length else { throw LMDBError(errno, "pwrite(page \(page))") }
            }
            var free = Set<Int>()
            var cursor: OpaquePointer?
            try check(mdb_cursor_open(freeList.handle, 0, &cursor), "mdb_cursor_open(free list)")
            defer { mdb_cursor_close(cursor) }
            var key = MDB_val()
            var value = MDB_val()
            var result = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            while result == 0 {
                let freedBy = key.mv_data.loadUnaligned(as: Int.self)
                let ids = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)
                let count = ids.loadUnaligned(as: Int.self)
                for index in stride(from: 1, through: count, by: 1) {
                    let page = ids.loadUnaligned(fromByteOffset: index * MemoryLayout<Int>.size, as: Int.self)
                    free.insert(page)
                    if UInt64(freedBy) < oldest { try zero(page) }
                }
                if UInt64(freedBy) < oldest { report.scrubbed += count } else if UInt64(freedBy) < lastCommit { report.held += count }
                result = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
            }
            guard result == MDB_NOTFOUND else { throw LMDBError(result, "mdb_cursor_get(free list)") }
            // Live pages keep stale bytes too: LMDB leaves the gap between a page's node
            // pointers and its nodes as it was (a deleted node's bytes, or those of the page
            // buffer it reused). No reader reads the gap, and no writer rewrites a committed
            // page in place: zero it.
            var header = [UInt8](repeating: 0, count: 16)
            var buffer = [UInt8](repeating: 0, count: pageSize)
            var page = 2
            let lastPage = zeroingGaps ? info.lastPage : 0
            while page <= lastPage {
                defer { page += 1 }
                if free.contains(page) { continue }
                guard header.withUnsafeMutableBytes({ pread(fd, $0.baseAddress, 16, off_t(page * pageSize)) }) == 16 else { break }
                let flags = UInt16(header[10]) | UInt16(header[11]) << 8
                if flags & 0x04 != 0 {
                    // An overflow run: its other pages have no header.
                    let pages = Int(UInt32(header[12]) | UInt32(header[13]) << 8 | UInt32(header[14]) << 16 | UInt32(header[15]) << 24)
                    page += max(pages, 1) - 1
                    continue
                }
                guard flags & 0x03 != 0, flags & 0x20 == 0 else { continue }
                let lower = Int(UInt16(header[12]) | UInt16(header[13]) << 8)
                let upper = Int(UInt16(header[14]) | UInt16(header[15]) << 8)
                guard lower >= 16, lower < upper, upper <= pageSize else { continue }
                guard buffer.withUnsafeMutableBytes({ pread(fd, $0.baseAddress, pageSize, off_t(page * pageSize)) }) == pageSize else { break }
                if buffer[lower..<upper].contains(where: { $0 != 0 }) {
                    try zero(page, from: lower, to: upper)
                    report.gaps += 1
                }
            }
            if report.scrubbed + report.gaps > 0, fdatasync(fd) != 0 { throw LMDBError(errno, "fdatasync(data.mdb)") }
            return report
        }
    }

    /// Ends the transactions of this process's paused snapshots (their next read starts a
    /// newer one), waiting for the reads running now.
    package func releasePausedSnapshots() {
        resizeLock.withWriteLock { endSnapshotTransactions() }
    }

    /// The oldest transaction any reader of any process is reading, from LMDB's reader table.
    private func oldestReader() -> UInt64? {
        final class Lines { var text = "" }
        let lines = Lines()
        _ = withExtendedLifetime(lines) {
            mdb_reader_list(handle, { message, context in
                guard let message, let context else { return 0 }
                Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().text += String(cString: message)
                return 0
            }, Unmanaged.passUnretained(lines).toOpaque())
        }
        // "pid thread txnid" per reader; "-" for a slot between transactions.
        return lines.text.split(separator: "\n").dropFirst().compactMap { line in
            line.split(separator: " ").last.flatMap { UInt64($0) }
        }.min()
    }
}
