import ArgumentParser
import Foundation
import HealthLedgerSDK

struct AttachmentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachment", abstract: "Attach images and PDF files to objects, list, fetch and remove them.",
        subcommands: [Add.self, List.self, Get.self, Remove.self])

    static func row(_ attachment: Attachment) -> [String: Any] {
        [
            "uuid": attachment.uuid.uuidString, "object": attachment.objectUUID.uuidString, "name": attachment.name,
            "contentType": attachment.contentType, "size": attachment.size, "created": attachment.creationDate.formatted(.iso8601),
            "metadata": attachment.metadata,
        ]
    }

    static func print(_ attachments: [Attachment], json: Bool) {
        if json { return printJSON(attachments.map(row)) }
        for attachment in attachments {
            Swift.print([attachment.uuid.uuidString, attachment.contentType, "\(attachment.size)", attachment.name].joined(separator: "\t"))
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Attach a file (JPEG, PNG, HEIC, GIF, TIFF or PDF) to an object.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The object's UUID.") var object: String
        @Option(help: "The file to attach.") var file: String
        @Option(help: "Its name (default: the file's name).") var name: String?
        @Option(name: .customLong("content-type"), help: "Its content type (default: what its bytes are).") var contentType: String?
        @Option(help: "KEY=VALUE metadata (repeatable).") var metadata: [String] = []

        func run() async throws {
            let objectUUID: UUID
            let data: [UInt8]
            var entries: [String: String] = [:]
            do {
                objectUUID = try parseUUID(object, "--object")
                guard let contents = FileManager.default.contents(atPath: file) else { throw ValidationErrorExit("cannot read \(file)") }
                data = Array(contents)
                for entry in metadata {
                    let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                    guard parts.count == 2 else { throw ValidationErrorExit("--metadata takes KEY=VALUE, got '\(entry)'") }
                    entries[parts[0]] = parts[1]
                }
            } catch { throw fail(error) }
            let type = contentType ?? Attachment.sniff(data) ?? "application/octet-stream"
            let fileName = name ?? URL(filePath: file).lastPathComponent
            try await connection.withStore { store in
                let attachment = try await store.addAttachment(to: objectUUID, name: fileName, contentType: type, data: data, metadata: entries)
                AttachmentCommand.print([attachment], json: connection.json)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "The attachments of an object.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The object's UUID.") var object: String

        func run() async throws {
            let objectUUID = try parseUUID(object, "--object")
            try await connection.withStore { store in
                AttachmentCommand.print(try await store.attachments(of: objectUUID), json: connection.json)
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Write an attachment's bytes to a file.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The attachment's UUID.") var uuid: String
        @Option(help: "The file to write (a new one: an existing file is not replaced).") var output: String

        func run() async throws {
            let attachmentUUID = try parseUUID(uuid, "--uuid")
            guard !FileManager.default.fileExists(atPath: output) else { throw ValidationErrorExit("\(output) exists: choose a new file") }
            try await connection.withStore { store in
                let (attachment, data) = try await store.data(of: attachmentUUID)
                try writeNewFile(Data(data), to: output)
                AttachmentCommand.print([attachment], json: connection.json)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an attachment.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "The attachment's UUID.") var uuid: String

        func run() async throws {
            let attachmentUUID = try parseUUID(uuid, "--uuid")
            try await connection.withStore { store in
                try await store.removeAttachment(attachmentUUID)
                Swift.print("removed \(attachmentUUID.uuidString)")
            }
        }
    }
}
