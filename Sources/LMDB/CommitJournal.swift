import CLMDB
import Foundation

/// The write-ahead journal of a durable ``Environment``: each write transaction's changes
/// are appended to it and synced before the transaction commits, so that a commit reaches
/// the disk with one small sync instead of LMDB's two (its pages, then its meta page).
///
/// LMDB then commits without syncing (`MDB_NOSYNC`), into the operating system's page
/// cache, which a killed process does not lose: after a crash in the same boot the data file
/// is whole as it is. What a power loss could lose or tear is covered by checkpoints: now and
/// then (``checkpointInterval``, ``checkpointBytes``) a read transaction is opened on the
/// last commit (the *pin*: LMDB reuses no page of that state or of any later one while it is
/// open), the meta pages are read, the data file is synced, and the meta pages are kept in
/// one of the journal's two header slots, with the boot they were taken in. After a reboot,
/// recovery writes those meta pages back, which makes the file exactly that state again
/// (its pages were never overwritten), and redoes the journal's records after it.
///
/// The file, `commits.journal` beside `data.mdb`, every integer little-endian:
///
/// - two header slots of 4 KiB at offsets 0 and 4 KiB, each: `"HLJH"`, a version (1), the
///   checkpoint's generation (8 bytes), the data file's device and inode (8 each), the page
///   size (4), how many bytes of each meta page are kept (4, ``metaBytes``), the boot's id
///   (16: `/proc/sys/kernel/random/boot_id` as bytes), a checksum (``Checksum64``) of the
///   56 bytes before it and of the meta bytes (8), then the first ``metaBytes`` of meta page
///   0 and of meta page 1. The valid slot of the data file with the higher generation is the
///   checkpoint; a checkpoint writes the other slot.
/// - from 8 KiB on, records: `"HLJR"`, the generation (8), the payload's length (4), a
///   checksum of the generation, the length and the payload (8), the payload: the
///   transaction's operations in order (``JournalOperations``); after the last, a record
///   header of zeros. Recovery redoes the records of the checkpoint's generation from the
///   first on, and stops at the first that is not whole (a commit that never finished: it
///   was not answered).
///
/// The journal belongs to the one process holding an exclusive `flock` on it; it is removed
/// when its environment closes after a last checkpoint.
final class CommitJournal {
    static let fileName = "commits.journal"
    static let slotSize = 4 << 10
    static let recordsStart = 2 * slotSize
    /// The bytes kept of each meta page: its page header and LMDB's `MDB_meta` (152 bytes
    /// on a 64-bit host), the rest of the page being unused.
    static let metaBytes = 256
    private static let headerMagic: UInt32 = 0x484A_4C48  // "HLJH"
    private static let recordMagic: UInt32 = 0x524A_4C48  // "HLJR"
    private static let headerSize = 64
    private static let recordHeaderSize = 24
    /// A checkpoint is also taken once the records since the last one reach this size.
    static let checkpointBytes = 8 << 20
    /// A transaction whose changes take at least this many bytes is not journaled: it
    /// commits, and a checkpoint is taken before the next commit (its own sync of the data
    /// file costs less than writing it all twice, measured on batches of 1,000 samples).
    static let largestRecord = 256 << 10
    /// The file is extended with zeros, so that a record's sync overwrites allocated blocks
    /// and has no file size to make durable: first by this much, then by twice the step
    /// before, up to ``largestExtension``.
    private static let firstExtension = 64 << 10
    private static let largestExtension = 4 << 20

    /// What recovery finds for a data file.
    enum Recovery {
        /// No checkpoint of this data file: a new journal, or one left beside a data file
        /// since replaced (a restore, a compaction).
        case none
        /// A checkpoint taken in this boot: the page cache kept every commit, the data file
        /// is whole as it is.
        case sameBoot
        /// A checkpoint from before a reboot: its state's first bytes of the meta pages (to
        /// write back at offsets 0 and `pageSize`) and the records to redo after it.
        case restore(metaBytes: [UInt8], pageSize: Int, records: [[UInt8]])
    }

    let path: String
    private let fd: Int32
    /// The longest a checkpoint waits (at the first commit after it): what a power loss
    /// makes recovery redo.
    let checkpointInterval: Duration
    /// The current checkpoint's generation (its records carry it), and its slot.
    private var generation: UInt64 = 0
    private var slot = 1
    /// The highest generation any slot was written with: the next is above it, so that a
    /// record left from an earlier generation, of any data file, is never read as current.
    private var highestGeneration: UInt64 = 0
    /// Where the next record goes.
    private var tail = recordsStart
    /// The file's length (zeros past the records).
    private var length: Int
    private var lastCheckpoint = ContinuousClock.now
    private var nextExtension = firstExtension
    /// The end of the furthest record written, in any generation: records of earlier
    /// generations stay in the file past a later one's tail until overwritten.
    private var highWater = recordsStart
    /// Where the last record began, so that a commit that failed after it was written can
    /// take it back.
    private var lastRecord: Int?

    /// Opens (creating) the journal in `directory` and takes its lock; nil when another
    /// process holds it (that process's environment journals; this one commits the usual way).
    static func open(directory: String, checkpointInterval: Duration) throws -> CommitJournal? {
        let path = directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
        while true {
            let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw LMDBError(errno, "open(\(path))") }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let error = errno
                Glibc.close(fd)
                if error == EWOULDBLOCK { return nil }
                throw LMDBError(error, "flock(\(path))")
            }
            // The owner before may have removed the file between our open and our lock.
            var opened = stat()
            var named = stat()
            guard fstat(fd, &opened) == 0 else { Glibc.close(fd); throw LMDBError(errno, "fstat(\(path))") }
            if stat(path, &named) == 0, named.st_ino == opened.st_ino, named.st_dev == opened.st_dev {
                return CommitJournal(path: path, fd: fd, length: Int(opened.st_size), checkpointInterval: checkpointInterval)
            }
            Glibc.close(fd)
        }
    }

    private init(path: String, fd: Int32, length: Int, checkpointInterval: Duration) {
        self.checkpointInterval = checkpointInterval
        self.path = path
        self.fd = fd
        self.length = length
        // Records of an earlier opening may lie anywhere up to the file's end.
        self.highWater = max(length, Self.recordsStart)
    }

    deinit { Glibc.close(fd) }

    /// This boot's id (`/proc/sys/kernel/random/boot_id`), 16 bytes; zeros when unknown
    /// (then every recovery restores, as after a reboot).
    static let bootID: [UInt8] = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8),
              let id = UUID(uuidString: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            return [UInt8](repeating: 0, count: 16)
        }
        return withUnsafeBytes(of: id.uuid) { Array($0) }
    }()

    // MARK: Recovery

    /// What the journal holds for the data file `dataFile` (see ``Recovery``).
    func recover(dataFile: String) throws -> Recovery {
        var best: Header?
        var data = stat()
        let exists = stat(dataFile, &data) == 0
        for index in 0..<2 {
            guard let header = try readSlot(index) else { continue }
            highestGeneration = max(highestGeneration, header.generation)
            guard exists, header.device == UInt64(data.st_dev), header.inode == UInt64(data.st_ino) else { continue }
            if header.generation > best?.generation ?? 0 {
                best = header
                slot = index
            }
        }
        guard let best else { return .none }
        generation = best.generation
        var records: [[UInt8]] = []
        var offset = Self.recordsStart
        while let record = try readRecord(at: offset) {
            records.append(record)
            offset += Self.recordHeaderSize + record.count
        }
        tail = offset
        let zeros = [UInt8](repeating: 0, count: 16)
        if best.bootID == Self.bootID, best.bootID != zeros { return .sameBoot }
        return .restore(metaBytes: best.metaBytes, pageSize: best.pageSize, records: records)
    }

    private struct Header {
        var generation: UInt64
        var device: UInt64
        var inode: UInt64
        var pageSize: Int
        var bootID: [UInt8]
        var metaBytes: [UInt8]
    }

    private func readSlot(_ index: Int) throws -> Header? {
        var fixed = [UInt8](repeating: 0, count: Self.headerSize)
        guard try read(into: &fixed, at: index * Self.slotSize), fixed.load(UInt32.self, at: 0) == Self.headerMagic,
              fixed.load(UInt32.self, at: 4) == 1, fixed.load(UInt32.self, at: 36) == UInt32(Self.metaBytes) else { return nil }
        var metas = [UInt8](repeating: 0, count: 2 * Self.metaBytes)
        guard try read(into: &metas, at: index * Self.slotSize + Self.headerSize) else { return nil }
        var checksum = Checksum64()
        checksum.update(fixed[0..<56])
        checksum.update(metas[...])
        guard checksum.value == fixed.load(UInt64.self, at: 56) else { return nil }
        return Header(
            generation: fixed.load(UInt64.self, at: 8), device: fixed.load(UInt64.self, at: 16), inode: fixed.load(UInt64.self, at: 24),
            pageSize: Int(fixed.load(UInt32.self, at: 32)), bootID: Array(fixed[40..<56]), metaBytes: metas)
    }

    private func readRecord(at offset: Int) throws -> [UInt8]? {
        var header = [UInt8](repeating: 0, count: Self.recordHeaderSize)
        guard try read(into: &header, at: offset), header.load(UInt32.self, at: 0) == Self.recordMagic,
              header.load(UInt64.self, at: 4) == generation else { return nil }
        let count = Int(header.load(UInt32.self, at: 12))
        guard offset + Self.recordHeaderSize + count <= length else { return nil }
        var payload = [UInt8](repeating: 0, count: count)
        guard try read(into: &payload, at: offset + Self.recordHeaderSize) else { return nil }
        var checksum = Checksum64()
        checksum.update(header[4..<16])
        checksum.update(payload[...])
        return checksum.value == header.load(UInt64.self, at: 16) ? payload : nil
    }

    /// Reads `buffer.count` bytes at `offset`; false when the file ends before.
    private func read(into buffer: inout [UInt8], at offset: Int) throws -> Bool {
        let wanted = buffer.count
        let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, wanted, off_t(offset)) }
        guard got >= 0 else { throw LMDBError(errno, "pread(\(path))") }
        return got == wanted
    }

    // MARK: Writing

    /// Whether the next commit should first take a checkpoint.
    var checkpointDue: Bool {
        tail - Self.recordsStart >= Self.checkpointBytes || ContinuousClock.now - lastCheckpoint >= checkpointInterval
    }

    /// Appends one transaction's operations, with a header of zeros after them (the end),
    /// and syncs them. When this throws, the record may be in the file: take it back
    /// (``withdrawLast()``) before anything else is journaled.
    func append(_ payload: [UInt8]) throws {
        var record = [UInt8]()
        record.reserveCapacity(2 * Self.recordHeaderSize + payload.count)
        record.append(uint32: Self.recordMagic)
        record.append(uint64: generation)
        record.append(uint32: UInt32(payload.count))
        var checksum = Checksum64()
        checksum.update(record[4..<16])
        checksum.update(payload[...])
        record.append(uint64: checksum.value)
        record.append(contentsOf: payload)
        let count = record.count
        record.append(contentsOf: repeatElement(0, count: Self.recordHeaderSize))
        try reserve(record.count)
        lastRecord = tail
        try write(record, at: tail)
        tail += count
        highWater = max(highWater, tail + Self.recordHeaderSize)
        try sync()
    }

    /// Takes back the last record, whose transaction did not commit: its header is zeroed
    /// and synced, so recovery never redoes it.
    func withdrawLast() throws {
        guard let offset = lastRecord else { return }
        tail = offset
        try write([UInt8](repeating: 0, count: Self.recordHeaderSize), at: offset)
        try sync()
        lastRecord = nil
    }

    /// Starts a new generation from the data file's state, whose first ``metaBytes`` of
    /// each meta page are `metaBytes` (that state synced by the caller): writes the header
    /// slot the current checkpoint is not in, and syncs it. With `erasingRecords`, the
    /// records before are overwritten with zeros first (an erasure: their values must not
    /// outlive it). The data file is named by its descriptor: the header must name the file
    /// whose state it holds, even when another has just been renamed into its place.
    func checkpoint(metaBytes: [UInt8], pageSize: Int, dataDescriptor: Int32, erasingRecords: Bool = false) throws {
        var data = stat()
        guard fstat(dataDescriptor, &data) == 0 else { throw LMDBError(errno, "fstat(data.mdb)") }
        precondition(metaBytes.count == 2 * Self.metaBytes)
        if erasingRecords { try eraseRecords() }
        let next = highestGeneration + 1
        let target = 1 - slot
        var header = [UInt8]()
        header.append(uint32: Self.headerMagic)
        header.append(uint32: 1)
        header.append(uint64: next)
        header.append(uint64: UInt64(data.st_dev))
        header.append(uint64: UInt64(data.st_ino))
        header.append(uint32: UInt32(pageSize))
        header.append(uint32: UInt32(Self.metaBytes))
        header.append(contentsOf: Self.bootID)
        var checksum = Checksum64()
        checksum.update(header[0..<56])
        checksum.update(metaBytes[...])
        header.append(uint64: checksum.value)
        header.append(contentsOf: metaBytes)
        try reserve(0)
        try write(header, at: target * Self.slotSize)
        try sync()
        generation = next
        highestGeneration = next
        slot = target
        tail = Self.recordsStart
        lastRecord = nil
        lastCheckpoint = .now
    }

    /// Removes the file (after a last checkpoint, when its environment closes), its records
    /// overwritten with zeros first: a removed file's blocks keep their bytes on the disk.
    func remove() {
        guard (try? eraseRecords()) != nil, (try? sync()) != nil else { return }
        unlink(path)
    }

    /// Makes the file's name durable in its directory (a new journal must survive a power
    /// loss before its environment commits without syncing).
    func syncDirectory() throws {
        let directory = (path as NSString).deletingLastPathComponent
        let descriptor = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw LMDBError(errno, "open(\(directory))") }
        defer { Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw LMDBError(errno, "fsync(\(directory))") }
    }

    /// Overwrites every record in the file, of any generation, with zeros.
    private func eraseRecords() throws {
        let end = min(max(highWater, tail), length)
        guard end > Self.recordsStart else { return }
        try write([UInt8](repeating: 0, count: end - Self.recordsStart), at: Self.recordsStart)
        highWater = Self.recordsStart
    }

    /// Makes sure `count` bytes past the tail are allocated (zeros written there).
    private func reserve(_ count: Int) throws {
        let needed = max(tail, Self.recordsStart) + count
        guard needed > length else { return }
        let grown = max(needed, length + nextExtension)
        nextExtension = min(nextExtension * 2, Self.largestExtension)
        let zeros = [UInt8](repeating: 0, count: grown - length)
        try write(zeros, at: length)
        length = grown
    }

    private func write(_ bytes: [UInt8], at offset: Int) throws {
        var done = 0
        while done < bytes.count {
            let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, bytes.count - done, off_t(offset + done)) }
            guard written > 0 else {
                let error = errno
                throw LMDBError(error, error == ENOSPC ? "writing the commit journal \(path): the disk is full" : "pwrite(\(path))")
            }
            done += written
        }
    }

    private func sync() throws {
        guard fdatasync(fd) == 0 else { throw LMDBError(errno, "fdatasync(\(path))") }
    }
}

/// One write transaction's changes, as the journal records and recovery redoes them: a
/// sequence of operations, each a kind byte, the database's name (2-byte length, UTF-8),
/// and for a put the key and value, for a delete the key (each with a 4-byte length).
///
/// Once the changes reach ``CommitJournal/largestRecord`` they are no longer kept: such a
/// transaction commits without a record (``isOversized``), so copying more would be wasted
/// (a batch of 5,000 imported records would copy about 2.5 MB for nothing).
struct JournalOperations {
    enum Kind: UInt8 {
        case put = 1, delete = 2, removeAll = 3, createDatabase = 4, dropDatabase = 5
    }

    private(set) var bytes: [UInt8] = []
    /// The changes reached ``CommitJournal/largestRecord``: ``bytes`` holds none of them.
    private(set) var isOversized = false

    var isEmpty: Bool { bytes.isEmpty && !isOversized }

    mutating func put(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, in database: String) {
        guard !isOversized else { return }
        header(.put, database)
        field(key)
        field(value)
        checkSize()
    }

    mutating func delete(_ key: UnsafeRawBufferPointer, in database: String) {
        guard !isOversized else { return }
        header(.delete, database)
        field(key)
        checkSize()
    }

    mutating func removeAll(in database: String) {
        guard !isOversized else { return }
        header(.removeAll, database)
    }

    mutating func createDatabase(_ name: String) {
        guard !isOversized else { return }
        header(.createDatabase, name)
    }

    mutating func dropDatabase(_ name: String) {
        guard !isOversized else { return }
        header(.dropDatabase, name)
    }

    /// Joins a committed nested transaction's changes.
    mutating func append(_ other: JournalOperations) {
        guard !isOversized else { return }
        guard !other.isOversized else { return markOversized() }
        bytes.append(contentsOf: other.bytes)
        checkSize()
    }

    private mutating func checkSize() {
        if bytes.count >= CommitJournal.largestRecord { markOversized() }
    }

    private mutating func markOversized() {
        isOversized = true
        bytes = []
    }

    private mutating func header(_ kind: Kind, _ database: String) {
        bytes.append(kind.rawValue)
        let count = database.utf8.count
        bytes.append(UInt8(count & 0xFF))
        bytes.append(UInt8(count >> 8 & 0xFF))
        bytes.append(contentsOf: database.utf8)
    }

    private mutating func field(_ buffer: UnsafeRawBufferPointer) {
        bytes.append(uint32: UInt32(buffer.count))
        bytes.append(contentsOf: buffer)
    }

    /// Calls `apply` with each operation of `payload`, in order.
    static func forEach(
        in payload: [UInt8], _ apply: (Kind, String, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try payload.withUnsafeBytes { all in
            var offset = 0
            func take(_ count: Int) throws -> UnsafeRawBufferPointer {
                guard count >= 0, offset + count <= all.count else { throw LMDBError(MDB_CORRUPTED, "a commit journal record ends inside an operation") }
                defer { offset += count }
                return UnsafeRawBufferPointer(rebasing: all[offset..<offset + count])
            }
            func length() throws -> Int { Int(try take(4).loadUnaligned(as: UInt32.self).littleEndian) }
            while offset < all.count {
                guard let kind = Kind(rawValue: try take(1)[0]) else { throw LMDBError(MDB_CORRUPTED, "a commit journal record holds an unknown operation") }
                let nameLength = Int(try take(2).loadUnaligned(as: UInt16.self).littleEndian)
                let name = String(decoding: try take(nameLength), as: UTF8.self)
                let empty = UnsafeRawBufferPointer(start: nil, count: 0)
                switch kind {
                case .put:
                    let key = try take(try length())
                    let value = try take(try length())
                    try apply(kind, name, key, value)
                case .delete: try apply(kind, name, try take(try length()), empty)
                case .removeAll, .createDatabase, .dropDatabase: try apply(kind, name, empty, empty)
                }
            }
        }
    }
}

/// A 64-bit checksum over 8-byte words (each mixed in with a multiply), for telling a
/// whole record or header from a torn one; not a cryptographic digest.
///
/// For each word `w` (little-endian; the last one zero-padded): `h = (h ^ w) &* 0x9E3779B97F4A7C15`,
/// then `h ^= h >> 29`, starting from `h = 0x2545F4914F6CDD1D`; each update of a slice starts
/// its words at the slice's first byte.
struct Checksum64 {
    private(set) var value: UInt64 = 0x2545_F491_4F6C_DD1D

    mutating func update(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { raw in
            var h = value
            var offset = 0
            while offset + 8 <= raw.count {
                h = (h ^ UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))) &* 0x9E37_79B9_7F4A_7C15
                h ^= h >> 29
                offset += 8
            }
            if offset < raw.count {
                var last: UInt64 = 0
                for index in offset..<raw.count { last |= UInt64(raw[index]) << (8 * UInt64(index - offset)) }
                h = (h ^ last) &* 0x9E37_79B9_7F4A_7C15
                h ^= h >> 29
            }
            value = h
        }
    }
}

extension [UInt8] {
    fileprivate mutating func append(uint32 value: UInt32) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    fileprivate mutating func append(uint64 value: UInt64) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    fileprivate func load<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}
