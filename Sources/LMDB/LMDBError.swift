import CLMDB

/// An error returned by LMDB, with the operation that failed.
///
/// Match on ``code`` to handle a specific condition:
///
/// ```swift
/// catch let error as LMDBError where error.code == .mapFull { … }
/// ```
public struct LMDBError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An LMDB (or errno) result code.
    public struct Code: RawRepresentable, Sendable, Hashable {
        public var rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        public static let keyExists = Code(rawValue: MDB_KEYEXIST)
        public static let notFound = Code(rawValue: MDB_NOTFOUND)
        public static let corrupted = Code(rawValue: MDB_CORRUPTED)
        public static let versionMismatch = Code(rawValue: MDB_VERSION_MISMATCH)
        public static let invalid = Code(rawValue: MDB_INVALID)
        public static let mapFull = Code(rawValue: MDB_MAP_FULL)
        public static let readersFull = Code(rawValue: MDB_READERS_FULL)
        public static let mapResized = Code(rawValue: MDB_MAP_RESIZED)
        public static let badValueSize = Code(rawValue: MDB_BAD_VALSIZE)
        /// `ENOSPC`: the disk is full.
        public static let noSpace = Code(rawValue: 28)
    }

    public var code: Code
    /// What was being done, e.g. `mdb_put(objects)`.
    public var operation: String

    public init(_ code: Int32, _ operation: String) {
        self.code = Code(rawValue: code)
        self.operation = operation
    }

    /// LMDB's own text for the code.
    public var message: String { String(cString: mdb_strerror(code.rawValue)) }

    public var description: String { "\(operation): \(message) (\(code.rawValue))" }
}

@inline(__always)
func check(_ result: Int32, _ operation: @autoclosure () -> String) throws {
    if result != MDB_SUCCESS { throw LMDBError(result, operation()) }
}
