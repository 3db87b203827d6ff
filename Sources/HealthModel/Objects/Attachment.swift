import Foundation

/// A file attached to an object (HealthKit's `HKAttachment`), such as the scan of a vision
/// prescription. Only images and PDF documents are accepted, and their bytes must be what
/// their content type says.
public struct Attachment: Sendable, Hashable {
    public var uuid: UUID
    /// The object it is attached to.
    public var objectUUID: UUID
    public var name: String
    public var contentType: String
    /// Bytes.
    public var size: Int
    public var creationDate: Date
    public var metadata: [String: String]

    public init(uuid: UUID, objectUUID: UUID, name: String, contentType: String, size: Int, creationDate: Date, metadata: [String: String] = [:]) {
        self.uuid = uuid
        self.objectUUID = objectUUID
        self.name = name
        self.contentType = contentType
        self.size = size
        self.creationDate = creationDate
        self.metadata = metadata
    }

    /// Largest attachment accepted (it travels in one frame).
    public static let maximumSize = 3 << 20
    /// The content types accepted.
    public static let contentTypes: Set<String> = ["image/jpeg", "image/png", "image/heic", "image/gif", "image/tiff", "application/pdf"]

    /// The content type `data` is, judged by its first bytes; nil when it is none of
    /// ``contentTypes``.
    public static func sniff(_ data: some Collection<UInt8>) -> String? {
        let head = Array(data.prefix(16))
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + bytes.count && Array(head[offset..<(offset + bytes.count)]) == bytes
        }
        if starts([0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "image/gif" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "image/tiff" }
        if starts(Array("%PDF-".utf8)) { return "application/pdf" }
        if starts(Array("ftyp".utf8), at: 4), head.count >= 12,
            ["heic", "heix", "hevc", "hevx", "mif1", "msf1"].contains(String(decoding: head[8..<12], as: UTF8.self))
        {
            return "image/heic"
        }
        return nil
    }

    /// Checks an attachment before it is stored.
    ///
    /// - Throws: ``HealthError`` `invalidArgument` naming what is wrong: an empty or odd name,
    ///   a content type that is not accepted or not what the bytes are, empty data, too
    ///   much metadata; `dataSizeExceeded` above ``maximumSize``.
    public static func validate(name: String, contentType: String, data: some Collection<UInt8>, metadata: [String: String]) throws {
        guard !name.isEmpty, name.utf8.count <= ObjectLimits.maximumIdentifierLength, !name.contains("/"), !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw HealthError.invalidArgument("an attachment's name is 1 to 255 bytes, without '/' or control characters", field: "name")
        }
        guard contentTypes.contains(contentType) else {
            throw HealthError.invalidArgument(
                "content type '\(contentType.prefix(100))' is not accepted: images (JPEG, PNG, HEIC, GIF, TIFF) and PDF only", field: "content_type")
        }
        guard !data.isEmpty else { throw HealthError.invalidArgument("the attachment is empty", field: "data") }
        guard data.count <= maximumSize else {
            throw HealthError(.dataSizeExceeded, "an attachment holds at most \(maximumSize) bytes, got \(data.count)", field: "data")
        }
        guard let actual = sniff(data), actual == contentType else {
            throw HealthError.invalidArgument(
                "the bytes are \(sniff(data).map { "a \($0) file" } ?? "no image or PDF"), not \(contentType)", field: "data")
        }
        guard metadata.count <= 64, metadata.allSatisfy({
            !$0.key.isEmpty && $0.key.utf8.count <= ObjectLimits.maximumKeyLength && $0.value.utf8.count <= ObjectLimits.maximumStringLength
        }) else {
            throw HealthError.invalidArgument("attachment metadata: at most 64 entries, keys of 1 to 256 bytes, values up to 4096", field: "metadata")
        }
    }
}
