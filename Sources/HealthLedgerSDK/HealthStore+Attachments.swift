import Foundation
import LedgerSchema
import SwiftProtobuf

/// Attachments (HealthKit's `HKAttachmentStore`): images and PDF files on objects, such as a
/// vision prescription's scan. Reading one needs read access to its object.
extension HealthStore {
    /// Attaches a file to an object this app saved (the owner: any object).
    ///
    /// ```swift
    /// let scan = try await store.addAttachment(to: prescription.uuid, name: "scan.pdf", contentType: "application/pdf", data: pdf)
    /// ```
    @discardableResult
    public func addAttachment(to object: UUID, name: String, contentType: String, data: [UInt8], metadata: [String: String] = [:]) async throws
        -> Attachment
    {
        let request = Healthledger_V1_AddAttachmentRequest.with { request in
            request.objectUuid = Data(object.bytes)
            request.name = name
            request.contentType = contentType
            request.data = Data(data)
            request.metadata = Healthledger_V1_Attachment.entries(metadata)
        }
        return try Self.attachment(try Self.decode(Healthledger_V1_Attachment.self, try await unary(.addAttachment, request)))
    }

    /// The attachments of an object, oldest first.
    public func attachments(of object: UUID) async throws -> [Attachment] {
        let request = Healthledger_V1_AttachmentsRequest.with { $0.objectUuid = Data(object.bytes) }
        return try Self.decode(Healthledger_V1_AttachmentsResponse.self, try await unary(.attachments, request)).attachments.map(Self.attachment)
    }

    /// An attachment's bytes.
    public func data(of attachment: UUID) async throws -> (Attachment, [UInt8]) {
        let request = Healthledger_V1_AttachmentRequest.with { $0.uuid = Data(attachment.bytes) }
        let response = try Self.decode(Healthledger_V1_AttachmentDataResponse.self, try await unary(.attachmentData, request))
        return (try Self.attachment(response.attachment), Array(response.data))
    }

    public func removeAttachment(_ attachment: UUID) async throws {
        _ = try await unary(.removeAttachment, Healthledger_V1_AttachmentRequest.with { $0.uuid = Data(attachment.bytes) })
    }

    private static func attachment(_ message: Healthledger_V1_Attachment) throws -> Attachment {
        do { return try message.model() } catch { throw RPCError(.internalError, "the server sent an invalid attachment") }
    }
}
