import Foundation
import HealthModel
import SwiftProtobuf

extension Healthledger_V1_Attachment {
    public init(_ attachment: Attachment) {
        self.init()
        uuid = Data(attachment.uuid.bytes)
        objectUuid = Data(attachment.objectUUID.bytes)
        name = attachment.name
        contentType = attachment.contentType
        size = UInt64(attachment.size)
        createdUs = microseconds(attachment.creationDate)
        metadata = Self.entries(attachment.metadata)
    }

    /// - Throws: ``HealthError`` `invalidArgument` for a bad UUID or a repeated metadata key.
    public func model() throws -> Attachment {
        guard let uuid = UUID(bytes: uuid), let object = UUID(bytes: objectUuid) else {
            throw HealthError.invalidArgument("an attachment's UUIDs must be 16 bytes", field: "uuid")
        }
        return Attachment(
            uuid: uuid, objectUUID: object, name: name, contentType: contentType, size: Int(clamping: size),
            creationDate: date(microseconds: createdUs), metadata: try Self.metadata(metadata))
    }

    /// Metadata entries as a dictionary; a key given twice is refused.
    /// The entries of `metadata`, sorted by key (the schema's order).
    public static func entries(_ metadata: [String: String]) -> [Healthledger_V1_AttachmentMetadataEntry] {
        metadata.keys.sorted().map { key in .with { $0.key = key; $0.value = metadata[key]! } }
    }

    public static func metadata(_ entries: [Healthledger_V1_AttachmentMetadataEntry]) throws -> [String: String] {
        var metadata: [String: String] = [:]
        for entry in entries {
            guard metadata.updateValue(entry.value, forKey: entry.key) == nil else {
                throw HealthError.invalidArgument("attachment metadata key '\(entry.key.prefix(100))' appears twice", field: "metadata")
            }
        }
        return metadata
    }
}
