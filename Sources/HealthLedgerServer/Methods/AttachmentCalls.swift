import Foundation
import HealthLedgerRPC
import HealthModel
import Ledger
import LedgerSchema
import SwiftProtobuf

/// Attachments: files on objects, readable with the object.
extension LedgerCall {
    /// What an access record names as the type read by a call of attachments (HealthKit's
    /// attachments are files on objects, of no type of their own).
    static let attachmentType = "HKAttachment"

    func addAttachment(_ request: Healthledger_V1_AddAttachmentRequest) async throws -> [UInt8] {
        let attachment = try await ledger.addAttachment(
            to: try Self.uuid(request.objectUuid, field: "object_uuid"), name: request.name, contentType: request.contentType,
            data: Array(request.data), metadata: try Healthledger_V1_Attachment.metadata(request.metadata), by: principal)
        return try Healthledger_V1_Attachment(attachment).serializedBytes()
    }

    func attachments(_ request: Healthledger_V1_AttachmentsRequest) throws -> [UInt8] {
        let attachments = try ledger.attachments(of: try Self.uuid(request.objectUuid, field: "object_uuid"), as: principal)
        reads.add(Self.attachmentType, objects: attachments.count)
        return try Healthledger_V1_AttachmentsResponse.with { $0.attachments = attachments.map(Healthledger_V1_Attachment.init) }.serializedBytes()
    }

    func attachmentData(_ request: Healthledger_V1_AttachmentRequest) throws -> [UInt8] {
        let (attachment, data) = try ledger.attachmentData(try Self.uuid(request.uuid, field: "uuid"), as: principal)
        reads.add(Self.attachmentType, objects: 1)
        return try Healthledger_V1_AttachmentDataResponse.with {
            $0.attachment = .init(attachment)
            $0.data = Data(data)
        }.serializedBytes()
    }

    func removeAttachment(_ request: Healthledger_V1_AttachmentRequest) async throws -> [UInt8] {
        try await ledger.removeAttachment(try Self.uuid(request.uuid, field: "uuid"), by: principal)
        return []
    }
}
