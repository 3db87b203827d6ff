import Foundation
import LMDB
import Logging

extension Ledger {
    /// Where `meta` keeps the ledger's data key, wrapped by the master key (``MasterKey/wrap(_:)``).
    static let dataKeyKey: [UInt8] = Array("data_key".utf8)

    /// Whether the ledger's health data is stored sealed under a data key of its own.
    public var isEncrypted: Bool { databases.cipher != nil }

    /// The ledger's cipher, from the data key in its `meta`; for a clear ledger opened with a
    /// master key, a new one, and `clear` true: the log is still to be sealed (``encryptLog``).
    /// - Throws: ``LedgerFailure`` `failedPrecondition` for an encrypted ledger without the
    ///   master key it was wrapped under.
    static func loadCipher(
        _ environment: Environment, ledger id: String, masterKey: MasterKey?, encryptingClear: Bool
    ) throws -> (cipher: LedgerCipher?, clear: Bool) {
        let meta = try environment.openDatabase("meta")
        let wrapped = try environment.read { txn in try txn.get(dataKeyKey, in: meta).map { Array($0) } }
        if let wrapped {
            guard let masterKey else {
                let under = wrapped.withUnsafeBytes { MasterKey.wrappingID($0) } ?? "?"
                throw LedgerFailure(
                    .failedPrecondition,
                    "ledger '\(id)' is encrypted (under master key \(under)), and no master key was given: start with --master-key-file or HEALTHLEDGER_MASTER_KEY_FILE")
            }
            return (LedgerCipher(rawKey: try wrapped.withUnsafeBytes { try masterKey.unwrap($0, ledger: id) }), false)
        }
        guard masterKey != nil, encryptingClear else { return (nil, false) }
        return (LedgerCipher.generate(), true)
    }

    /// Seals a clear ledger's log under its new data key in one transaction, keeping every
    /// event's bytes (so every hash, head and proof) as they were once opened, and marks the
    /// projections for the rebuild that seals their values and the scrub of the clear pages
    /// left free (the same steps as after an erasure; a crash before they finish redoes them).
    static func encryptLog(_ databases: LedgerDatabases, masterKey: MasterKey, in environment: Environment, ledger id: String, logger: Logger) throws {
        guard let cipher = databases.cipher else { return }
        logger.notice("encrypting ledger '\(id)' under master key \(masterKey.id): sealing its log, then rebuilding its projections")
        try environment.write { txn in
            var keys: [[UInt8]] = []
            try txn.withCursor(on: databases.events) { cursor in
                var entry = try cursor.first()
                while let current = entry {
                    if current.value.first != LedgerCipher.sealedEventMark { keys.append(Array(current.key)) }
                    entry = try cursor.next()
                }
            }
            for key in keys {
                let stored = Array(try txn.get(key, in: databases.events)!)
                try txn.put(cipher.sealEvent(stored, key: key), forKey: key, in: databases.events)
            }
            for name in [AnchorSeal.metaKey, SigningKey.metaKey] {
                guard let stored = try txn.get(name, in: databases.meta), stored.count == 32 else { continue }
                try txn.put(databases.storable(secret: Array(stored), name: name), forKey: name, in: databases.meta)
            }
            try txn.put(masterKey.wrap(cipher.rawKey), forKey: dataKeyKey, in: databases.meta)
            try txn.put(KeyEncoding.sequenceKey(0), forKey: erasureRebuildKey, in: databases.meta)
        }
    }
}

extension LedgerStore {
    /// The file naming the master key a data directory's ledgers are encrypted under.
    static let masterKeyMarkName = "master-key-id"

    /// Checks `masterKey` against the data directory: an encrypted directory needs its own
    /// key; a directory first given a key records it.
    /// - Throws: ``LedgerFailure`` `failedPrecondition` saying which: no key, or another key.
    static func checkMasterKey(_ masterKey: MasterKey?, directory: URL) throws {
        let mark = directory.appending(path: masterKeyMarkName)
        let recorded = (try? String(contentsOf: mark, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        switch (recorded, masterKey) {
        case (nil, nil):
            return
        case (let recorded?, nil):
            throw LedgerFailure(
                .failedPrecondition,
                "the data directory \(directory.path) is encrypted (master key \(recorded)), and no master key was given: give --master-key-file or HEALTHLEDGER_MASTER_KEY_FILE")
        case (let recorded?, let masterKey?):
            guard recorded == masterKey.id else {
                throw LedgerFailure(
                    .failedPrecondition,
                    "the master key in \(masterKey.path) (id \(masterKey.id)) is not the one the data directory \(directory.path) is encrypted under (id \(recorded))")
            }
        case (nil, let masterKey?):
            do {
                try Data((masterKey.id + "\n").utf8).write(to: mark, options: .atomic)
            } catch {
                throw LedgerFailure(.storage, "cannot record the master key's id in \(mark.path): \(error.localizedDescription)", cause: error)
            }
        }
    }

    /// Re-wraps every ledger's data key under `newKey`, and records it as the data
    /// directory's key: the data itself is not rewritten. Run with the server stopped.
    /// Backups taken before keep their data keys wrapped under the old key.
    /// - Returns: the ids of the ledgers re-wrapped.
    public static func rotateMasterKey(directory: URL, from oldKey: MasterKey, to newKey: MasterKey) throws -> [String] {
        guard newKey.looksRandom else {
            throw LedgerFailure(
                .invalidArgument,
                "the new master key in \(newKey.path) is not random (it repeats a few bytes, as zeros or a key typed by hand do): make one with `healthledger admin new-master-key FILE`")
        }
        // Run again after an interruption, it finishes the job: ledgers already under the new key are skipped.
        let recorded = (try? String(contentsOf: directory.appending(path: masterKeyMarkName), encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        if recorded != newKey.id { try checkMasterKey(oldKey, directory: directory) }
        var configuration = LedgerConfiguration(followInterval: nil)
        configuration.masterKey = newKey
        let store = try LedgerStore(directory: directory, configuration: configuration, checkingMasterKey: false)
        var rotated: [String] = []
        for id in try store.ledgerIDs() {
            guard !store.isOpenInProcess(id) else { throw LedgerFailure(.failedPrecondition, "ledger '\(id)' is open: stop the server first") }
            let environment = try Ledger.openEnvironment(at: store.directory(of: id), configuration: store.configuration)
            let meta = try environment.openDatabase("meta")
            let changed = try environment.write { txn -> Bool in
                guard let wrapped = try txn.get(Ledger.dataKeyKey, in: meta) else { return false }
                if MasterKey.wrappingID(wrapped) == newKey.id { return true }
                let dataKey = try oldKey.unwrap(wrapped, ledger: id)
                try txn.put(newKey.wrap(dataKey), forKey: Ledger.dataKeyKey, in: meta)
                return true
            }
            if changed { rotated.append(id) }
        }
        let mark = directory.appending(path: masterKeyMarkName)
        do {
            try Data((newKey.id + "\n").utf8).write(to: mark, options: .atomic)
        } catch {
            throw LedgerFailure(.storage, "cannot record the new master key's id in \(mark.path): \(error.localizedDescription)", cause: error)
        }
        return rotated
    }
}
