import Foundation
import HealthModel
import ZIPFoundation

/// An Apple Health export as the Health app writes it: `export.zip` (with
/// `apple_health_export/export.xml` and `workout-routes/*.gpx`) or an unpacked `export.xml`
/// next to its `workout-routes` folder.
public struct ExportArchive: Sendable {
    public enum Form: Sendable { case zip, xml }

    public let url: URL
    public let form: Form
    /// The bytes of `export.xml` (inflated), for progress.
    public let xmlSize: UInt64
    private let xmlEntryPath: String?

    /// Opens `url`, telling a zip from XML by its first bytes.
    /// - Throws: ``ExportArchiveError`` when the file is missing, or a zip without `export.xml`.
    public init(url: URL) throws {
        self.url = url
        guard let handle = FileHandle(forReadingAtPath: url.path) else { throw ExportArchiveError("cannot open \(url.path)") }
        let magic = (try? handle.read(upToCount: 4)) ?? Data()
        try? handle.close()
        if magic.starts(with: [0x50, 0x4B, 0x05, 0x06]) { throw ExportArchiveError("\(url.path) is an empty zip: it holds no export.xml") }
        // A zip begins with its first entry, unless something comes before it (a
        // self-extracting archive): what is not XML is then tried as a zip.
        let looksLikeXML = magic.withUnsafeBytes { XMLStreamParser.mayBegin($0) }
        if magic.starts(with: [0x50, 0x4B, 0x03, 0x04]) || (!looksLikeXML && Self.opensAsZip(url)) {
            form = .zip
            let archive: Archive
            do {
                archive = try Archive(url: url, accessMode: .read)
            } catch {
                throw ExportArchiveError(
                    "\(url.path) is not a readable zip (\(error)); a zip cut short cannot be read, as its index is at its end: copy it again, "
                        + "or import the export.xml that unzipping what is there recovers")
            }
            guard let entry = archive.first(where: { $0.type == .file && ($0.path == "export.xml" || $0.path.hasSuffix("/export.xml")) }) else {
                throw ExportArchiveError("\(url.path) holds no export.xml")
            }
            xmlEntryPath = entry.path
            xmlSize = entry.uncompressedSize
        } else {
            form = .xml
            xmlEntryPath = nil
            let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
            xmlSize = (attributes?[.size] as? NSNumber)?.uint64Value ?? 0
        }
    }

    /// Streams `export.xml` to `consumer` in chunks (inflating a zip entry as it goes),
    /// blocking the calling thread; returns after the last chunk.
    public func readXML(chunkSize: Int = 1 << 18, _ consumer: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch form {
        case .zip:
            let archive = try Archive(url: url, accessMode: .read)
            guard let path = xmlEntryPath, let entry = archive[path] else { throw ExportArchiveError("export.xml vanished from \(url.path)") }
            do {
                // Checked whole before any record is read: a mismatch found at the end would come
                // after the records were saved. (One more inflate of the entry, no copy kept.)
                try Self.check(try archive.extract(entry, bufferSize: 1 << 20, skipCRC32: false) { _ in }, of: entry)
                let checksum = try archive.extract(entry, bufferSize: chunkSize, skipCRC32: false) { data in
                    try data.withUnsafeBytes { try consumer($0) }
                }
                // The file changed under the reader after the check.
                try Self.check(checksum, of: entry)
            } catch let error as XMLStreamError {
                throw error
            } catch let error as ArchiveReadStop {
                throw error
            } catch let error as ExportArchiveError {
                throw error
            } catch {
                throw Self.damaged(entry, error)
            }
        case .xml:
            guard let handle = FileHandle(forReadingAtPath: url.path) else { throw ExportArchiveError("cannot open \(url.path)") }
            defer { try? handle.close() }
            while true {
                let data = try handle.read(upToCount: chunkSize) ?? Data()
                if data.isEmpty { break }
                try data.withUnsafeBytes { try consumer($0) }
            }
        }
    }

    /// The export paths (`/electrocardiograms/ecg_….csv`) of the regular files in `folder`
    /// beside `export.xml` whose names end in `suffix`, sorted; none when there is no such folder.
    public func files(in folder: String, suffix: String) throws -> [String] {
        switch form {
        case .zip:
            let archive = try Archive(url: url, accessMode: .read)
            let base = xmlEntryPath.map { ($0 as NSString).deletingLastPathComponent } ?? ""
            let prefix = (base.isEmpty ? "" : base + "/") + folder + "/"
            return archive.filter { $0.type == .file && $0.path.hasPrefix(prefix) && $0.path.hasSuffix(suffix) }
                .map { "/" + folder + "/" + $0.path.dropFirst(prefix.count) }.filter { !$0.dropFirst(folder.count + 2).contains("/") }.sorted()
        case .xml:
            let directory = url.deletingLastPathComponent().appending(path: folder, directoryHint: .isDirectory)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { $0.hasSuffix(suffix) }.map { "/" + folder + "/" + $0 }.sorted()
        }
    }

    /// A file the export names, such as `/workout-routes/route_….gpx`: from the zip (under
    /// the folder holding `export.xml`) or beside `export.xml`.
    /// - Returns: nil when the export does not hold it.
    public func file(at exportPath: String, limit: Int = 64 << 20) throws -> Data? {
        let relative = exportPath.split(separator: "/").filter { $0 != ".." && $0 != "." }.joined(separator: "/")
        guard !relative.isEmpty else { return nil }
        switch form {
        case .zip:
            let archive = try Archive(url: url, accessMode: .read)
            let folder = xmlEntryPath.map { ($0 as NSString).deletingLastPathComponent } ?? ""
            let candidates = [folder.isEmpty ? relative : folder + "/" + relative, relative]
            guard let entry = candidates.lazy.compactMap({ archive[$0] }).first else { return nil }
            let tooLarge = ExportArchiveError("\(exportPath) is larger than \(limit >> 20) MiB")
            guard entry.uncompressedSize <= UInt64(limit) else { throw tooLarge }
            // The entry's declared size is the zip's word only: what it inflates to is counted.
            var data = Data()
            do {
                let checksum = try archive.extract(entry, skipCRC32: false) { chunk in
                    guard data.count + chunk.count <= limit else { throw tooLarge }
                    data.append(chunk)
                }
                try Self.check(checksum, of: entry)
            } catch let error as ExportArchiveError {
                throw error
            } catch {
                throw Self.damaged(entry, error)
            }
            return data
        case .xml:
            let file = url.deletingLastPathComponent().appending(path: relative).resolvingSymlinksInPath()
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path) else { return nil }
            guard attributes[.type] as? FileAttributeType == .typeRegular else { throw ExportArchiveError("\(exportPath) is not a regular file") }
            guard let handle = FileHandle(forReadingAtPath: file.path) else { throw ExportArchiveError("cannot open \(file.path)") }
            defer { try? handle.close() }
            let data = try handle.read(upToCount: limit + 1) ?? Data()
            guard data.count <= limit else { throw ExportArchiveError("\(exportPath) is larger than \(limit >> 20) MiB") }
            return data
        }
    }
}

extension ExportArchive {
    static func opensAsZip(_ url: URL) -> Bool {
        do {
            _ = try Archive(url: url, accessMode: .read)
            return true
        } catch {
            return false
        }
    }

    /// ZIPFoundation returns the CRC-32 of what it inflated; comparing it is the caller's part.
    static func check(_ checksum: CRC32, of entry: Entry) throws {
        guard checksum == entry.checksum else {
            throw ExportArchiveError(
                "the zip entry \(entry.path) is damaged: its bytes do not match the checksum the zip records for them (CRC-32 \(String(format: "%08x", checksum)), not \(String(format: "%08x", entry.checksum)))")
        }
    }

    /// What an entry that cannot be read is, named as what it is.
    static func damaged(_ entry: Entry, _ error: any Error) -> ExportArchiveError {
        if case Archive.ArchiveError.invalidCompressionMethod = error {
            return ExportArchiveError("the zip entry \(entry.path) is compressed with a method this reader does not take (only stored and deflate, as Apple writes)")
        }
        return ExportArchiveError("the zip entry \(entry.path) is damaged: \(error)")
    }
}

/// Thrown by a consumer to stop reading early.
public struct ArchiveReadStop: Error {
    public init() {}
}

public struct ExportArchiveError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
