import Foundation
import HealthModel
import LMDB
import LedgerSchema
import SwiftProtobuf

/// Lookups in the attachment projections.
enum AttachmentIndex {
    /// The UUIDs of an object's attachments, in UUID order (time-ordered UUIDs sort by the
    /// millisecond they were made in, not within it: order by ``entry(_:in:)``'s sequence).
    static func attachments(of object: [UInt8], in snapshot: LedgerSnapshot) throws -> [[UInt8]] {
        var uuids: [[UInt8]] = []
        try snapshot.forEach(prefix: object, keyLength: 32, in: snapshot.databases.objectAttachments) { key, _ in
            uuids.append(Array(key[16..<32]))
            return true
        }
        return uuids
    }

    /// The object an attachment belongs to and the event that added it.
    static func entry(_ uuid: [UInt8], in snapshot: LedgerSnapshot) throws -> (object: [UInt8], sequence: UInt64)? {
        guard let value = try snapshot.get(uuid, in: snapshot.databases.attachments) else { return nil }
        guard value.count == 24 else { throw LedgerFailure.corrupted("an attachments entry is \(value.count) bytes, not 24: replay the ledger") }
        return (Array(value[0..<16]), KeyEncoding.uint64(value, at: 16))
    }

    /// The attachment's description alone, read in place from the event that added it
    /// (skipping its bytes).
    static func description(sequence: UInt64, in snapshot: LedgerSnapshot) throws -> Attachment {
        let stored = try Ledger.storedEvent(sequence, in: snapshot)
        do {
            // The AttachmentAdded's description, without its bytes.
            guard let attachment = try ProtoReader.field(AttachmentAddedField.attachment, in: try LedgerEvent.bodyView(stored: stored)) else {
                throw LedgerFailure.corrupted("the attachment event \(sequence) has no description")
            }
            return try Healthledger_V1_Attachment(serializedBytes: Array(attachment)).model()
        } catch let error as LedgerFailure {
            throw error
        } catch {
            throw LedgerFailure.corrupted("the attachment event \(sequence) does not decode")
        }
    }

    /// The attachment and its bytes, from the event that added it.
    static func load(sequence: UInt64, in snapshot: LedgerSnapshot) throws -> (Attachment, [UInt8]) {
        let stored = try Ledger.storedEvent(sequence, in: snapshot)
        do {
            let added = try Healthledger_V1_AttachmentAdded(serializedBytes: try LedgerEvent.body(stored: stored))
            return (try added.attachment.model(), Array(added.data))
        } catch let error as LedgerFailure {
            throw error
        } catch {
            throw LedgerFailure.corrupted("the attachment event \(sequence) does not decode")
        }
    }
}

extension Ledger {
    /// Most attachments one object holds.
    public static let maximumAttachments = 100

    /// Attaches a file to an object (an `attachmentAdded` event carrying its bytes).
    ///
    /// An app attaches only to objects it saved, of a type it may share; the owner to any
    /// object. An object the app may not read is answered as an unknown one.
    ///
    /// ```swift
    /// let scan = try await ledger.addAttachment(to: prescription.uuid, name: "scan.pdf", contentType: "application/pdf", data: bytes, by: .owner)
    /// ```
    ///
    /// - Throws: ``HealthError``: `invalidArgument` for a bad name, content type or metadata
    ///   and for bytes that are not what the content type says; `dataSizeExceeded` above
    ///   ``Attachment/maximumSize``; `noData` for an unknown (or hidden, or deleted) object;
    ///   `authorizationDenied` for another source's object it may read.
    public func addAttachment(
        to object: UUID, name: String, contentType: String, data: [UInt8], metadata: [String: String] = [:], by principal: Principal
    ) async throws -> Attachment {
        try Attachment.validate(name: name, contentType: contentType, data: data, metadata: metadata)
        let attachment = Attachment(
            uuid: .timeOrdered(), objectUUID: object, name: name, contentType: contentType, size: data.count,
            creationDate: date(microseconds: microseconds(Date())), metadata: metadata)
        let body: [UInt8] = try Healthledger_V1_AttachmentAdded.with {
            $0.attachment = .init(attachment)
            $0.data = Data(data)
        }.serializedBytes()
        let change = try Projector.change(kind: .attachmentAdded, actor: principal, body: body)
        try await committer.submit { context in
            let type = try Self.requireAttachable(object, by: principal, in: context)
            guard try AttachmentIndex.attachments(of: object.bytes, in: context.reads).count < Self.maximumAttachments else {
                throw HealthError(.dataSizeExceeded, "an object holds at most \(Self.maximumAttachments) attachments", field: "object_uuid")
            }
            try context.append(
                kind: .attachmentAdded, actor: principal, objectType: type.identifier, objectUUID: object.bytes, body: body, change: change)
        }
        return attachment
    }

    /// Removes an attachment (an `attachmentRemoved` event), with the rights
    /// ``addAttachment(to:name:contentType:data:metadata:by:)`` asks for.
    ///
    /// - Throws: ``HealthError`` `noData` for an unknown attachment, or one of an object the
    ///   caller may not read.
    public func removeAttachment(_ uuid: UUID, by principal: Principal) async throws {
        if case .operator = principal { throw HealthError(.authorizationDenied, "the operator cannot change health data") }
        try await committer.submit { context in
            guard let (object, _) = try AttachmentIndex.entry(uuid.bytes, in: context.reads) else {
                throw HealthError(.noData, "no attachment with UUID \(uuid)", field: "uuid")
            }
            do {
                let type = try Self.requireAttachable(UUID(bytes: object)!, by: principal, in: context)
                let body: [UInt8] = try Healthledger_V1_AttachmentRemoved.with {
                    $0.uuid = Data(uuid.bytes)
                    $0.objectUuid = Data(object)
                }.serializedBytes()
                try context.append(
                    kind: .attachmentRemoved, actor: principal, objectType: type.identifier, objectUUID: object, body: body,
                    change: .attachmentRemoved(uuid: uuid.bytes, object: object))
            } catch let error as HealthError where error.code == .noData {
                throw HealthError(.noData, "no attachment with UUID \(uuid)", field: "uuid")
            }
        }
    }

    /// The attachments of an object `principal` may read, oldest first.
    ///
    /// - Throws: ``HealthError`` `noData` for an unknown, deleted or hidden object (the same
    ///   answer for all three).
    public func attachments(of object: UUID, as principal: Principal) throws -> [Attachment] {
        try read { snapshot in
            try Self.requireReadable(object, as: principal, in: snapshot)
            // Oldest first: by the sequence of the event that added each one.
            let sequences = try AttachmentIndex.attachments(of: object.bytes, in: snapshot).map { uuid in
                guard let (_, sequence) = try AttachmentIndex.entry(uuid, in: snapshot) else {
                    throw LedgerFailure.corrupted("attachment \(UUID(bytes: uuid)!) is listed but not stored: replay the ledger")
                }
                return sequence
            }
            return try sequences.sorted().map { try AttachmentIndex.description(sequence: $0, in: snapshot) }
        }
    }

    /// An attachment and its bytes, when `principal` may read its object.
    ///
    /// - Throws: ``HealthError`` `noData` for an unknown attachment or one it may not read.
    public func attachmentData(_ uuid: UUID, as principal: Principal) throws -> (Attachment, [UInt8]) {
        try read { snapshot in
            guard let (object, sequence) = try AttachmentIndex.entry(uuid.bytes, in: snapshot) else {
                // A scope is taken anyway, so an unknown attachment costs what a hidden one does.
                _ = try ReadScope(principal, type: .workout, in: snapshot)
                throw HealthError(.noData, "no attachment with UUID \(uuid)", field: "uuid")
            }
            do {
                try Self.requireReadable(UUID(bytes: object)!, as: principal, in: snapshot)
            } catch let error as HealthError where error.code == .noData {
                throw HealthError(.noData, "no attachment with UUID \(uuid)", field: "uuid")
            }
            return try AttachmentIndex.load(sequence: sequence, in: snapshot)
        }
    }

    /// Throws `noData` unless `principal` may read the object (as a fetch decides).
    private static func requireReadable(_ object: UUID, as principal: Principal, in snapshot: LedgerSnapshot) throws {
        guard try readable(object, as: principal, in: snapshot) != nil else {
            throw HealthError(.noData, "no object with UUID \(object)", field: "object_uuid")
        }
    }

    /// Checks that `principal` may change the attachments of `object`: what deleting it
    /// would need. Returns the object's type.
    private static func requireAttachable(_ object: UUID, by principal: Principal, in context: WriteContext) throws -> ObjectType {
        try requireChangeable(object, by: principal, ownSource: try ownSource(of: principal, in: context), field: "object_uuid", in: context)
    }
}
