import Foundation
import HealthModel
import Testing

@testable import Ledger

@Suite("Attachments")
struct AttachmentTests {
    static let app = Principal.app(Fixtures.appA)
    static let pdf = Array("%PDF-1.7\n1 0 obj << >> endobj\n%%EOF\n".utf8)
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 7, count: 64)
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0] + Array(repeating: 1, count: 32)

    @Test("the bytes decide the content type: images and PDF only")
    func sniffing() throws {
        #expect(Attachment.sniff(Self.pdf) == "application/pdf")
        #expect(Attachment.sniff(Self.png) == "image/png")
        #expect(Attachment.sniff(Self.jpeg) == "image/jpeg")
        #expect(Attachment.sniff(Array("GIF89a....".utf8)) == "image/gif")
        #expect(Attachment.sniff([0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0]) == "image/heic")
        #expect(Attachment.sniff([0x4D, 0x4D, 0x00, 0x2A, 1]) == "image/tiff")
        #expect(Attachment.sniff(Array("<html>".utf8)) == nil)
        #expect(Attachment.sniff([0xFF, 0xD8]) == nil)
        #expect(Attachment.sniff([UInt8]()) == nil)
    }

    /// A fresh ledger holding the owner's glasses prescription (keep the store alive: it
    /// removes its directory when released).
    static func ledgerWithGlasses(_ id: String) async throws -> (TemporaryStore, Ledger, VisionPrescription) {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: id)
        let prescription = VisionPrescriptionLedgerTests.glasses()
        try await ledger.save([.visionPrescription(prescription)], by: .owner)
        return (temporary, ledger, prescription)
    }

    @Test("an audit page with its stored events stays within its byte budget past its first event, whatever the events' sizes")
    func auditPagesOfLargeEvents() async throws {
        let (temporary, ledger, prescription) = try await Self.ledgerWithGlasses("large")
        defer { withExtendedLifetime(temporary) {} }
        // Three of 400 KB, then one of 3 MiB: the third would take a 1 MiB page past its
        // budget, and the large one alone is bigger than the budget.
        for (index, size) in [400_000, 400_000, 400_000, 3 << 20].enumerated() {
            let data = Array(Self.png.prefix(8)) + Array(repeating: UInt8(index), count: size - 8)
            _ = try await ledger.addAttachment(to: prescription.uuid, name: "page\(index).png", contentType: "image/png", data: data, by: .owner)
        }
        let budget = 1 << 20
        var next: UInt64 = 1
        var sequences: [UInt64] = []
        var sizes: [[Int]] = []
        while true {
            let page = try ledger.audit(AuditFilter(), from: next, includeStored: true, maximumBytes: budget, as: .owner)
            sequences += page.events.map(\.sequence)
            sizes.append(page.events.map { ($0.stored?.count ?? 0) + $0.sentence.utf8.count + 128 })
            next = page.next
            if page.caughtUp { break }
        }
        #expect(sequences == Array(1...(try ledger.head().sequence)), "every event once, in order")
        for page in sizes where page.count > 1 {
            #expect(page.reduce(0, +) <= budget, "\(page)")
        }
        #expect(sizes.map { $0.count { $0 > 300_000 } }.filter { $0 > 0 } == [2, 1, 1], "large events per page: \(sizes)")
    }

    @Test("the owner attaches, lists, reads and removes; each change is an event; deleting the object takes its attachments")
    func lifecycle() async throws {
        let (temporary, ledger, prescription) = try await Self.ledgerWithGlasses("files")
        defer { withExtendedLifetime(temporary) {} }
        let scan = try await ledger.addAttachment(
            to: prescription.uuid, name: "scan.pdf", contentType: "application/pdf", data: Self.pdf, metadata: ["page": "1"], by: .owner)
        let photo = try await ledger.addAttachment(to: prescription.uuid, name: "photo.png", contentType: "image/png", data: Self.png, by: .owner)
        #expect(scan.size == Self.pdf.count && scan.objectUUID == prescription.uuid && scan.metadata == ["page": "1"])
        #expect(try ledger.attachments(of: prescription.uuid, as: .owner) == [scan, photo])
        let (stored, bytes) = try ledger.attachmentData(scan.uuid, as: .owner)
        #expect(stored == scan && bytes == Self.pdf)
        let kinds = try ledger.events(from: 1, limit: 100).map(\.kind)
        #expect(kinds.filter { $0 == .attachmentAdded }.count == 2)

        try await ledger.removeAttachment(photo.uuid, by: .owner)
        #expect(try ledger.attachments(of: prescription.uuid, as: .owner) == [scan])
        await #expect { try await ledger.removeAttachment(photo.uuid, by: .owner) } throws: { ($0 as? HealthError)?.code == .noData }
        #expect(try ledger.replay().identical)

        _ = try await ledger.delete([prescription.uuid], by: .owner)
        #expect { try ledger.attachments(of: prescription.uuid, as: .owner) } throws: { ($0 as? HealthError)?.code == .noData }
        #expect { try ledger.attachmentData(scan.uuid, as: .owner) } throws: { ($0 as? HealthError)?.code == .noData }
        #expect(try ledger.replay().identical)
    }

    @Test("an object's attachments list oldest first, also those added within one millisecond")
    func oldestFirst() async throws {
        let (temporary, ledger, prescription) = try await Self.ledgerWithGlasses("order")
        defer { withExtendedLifetime(temporary) {} }
        // Added at once, concurrently: their time-ordered UUIDs share milliseconds, and within
        // one their order is random; the list follows the events that added them.
        let added: [HealthModel.Attachment] = try await withThrowingTaskGroup(of: HealthModel.Attachment.self) { group in
            for page in 0..<24 {
                group.addTask {
                    try await ledger.addAttachment(to: prescription.uuid, name: "page-\(page).png", contentType: "image/png", data: Self.png, by: .owner)
                }
            }
            return try await group.reduce(into: [HealthModel.Attachment]()) { $0.append($1) }
        }
        let order = try ledger.events(from: 1, limit: 100).compactMap { event -> UUID? in
            guard case .attachmentAdded(let summary) = try event.decodedBody() else { return nil }
            return summary.uuid
        }
        #expect(order.count == 24 && Set(order) == Set(added.map { $0.uuid }))
        #expect(try ledger.attachments(of: prescription.uuid, as: .owner).map { $0.uuid } == order)
    }

    @Test("bad files are refused and write nothing; apps attach only to their own objects of types they share")
    func refusals() async throws {
        let temporary = try TemporaryStore()
        let ledger = try temporary.ledgerStore.createLedger(id: "refusals")
        try await ledger.authorize([Fixtures.appA], share: [.visionPrescription])
        let owners = VisionPrescriptionLedgerTests.glasses()
        let mine = VisionPrescriptionLedgerTests.contacts()
        try await ledger.save([.visionPrescription(owners)], by: .owner)
        try await ledger.save([.visionPrescription(mine)], by: Self.app)
        let head = try ledger.head()
        func refused(_ code: HealthError.Code, _ body: () async throws -> Void) async {
            await #expect { try await body() } throws: { ($0 as? HealthError)?.code == code }
        }
        await refused(.invalidArgument) { _ = try await ledger.addAttachment(to: mine.uuid, name: "x.pdf", contentType: "application/pdf", data: Self.png, by: .owner) }
        await refused(.invalidArgument) { _ = try await ledger.addAttachment(to: mine.uuid, name: "x.html", contentType: "text/html", data: Array("<html>".utf8), by: .owner) }
        await refused(.invalidArgument) { _ = try await ledger.addAttachment(to: mine.uuid, name: "x", contentType: "image/png", data: [], by: .owner) }
        await refused(.invalidArgument) { _ = try await ledger.addAttachment(to: mine.uuid, name: "", contentType: "image/png", data: Self.png, by: .owner) }
        await refused(.invalidArgument) { _ = try await ledger.addAttachment(to: mine.uuid, name: "a/b.png", contentType: "image/png", data: Self.png, by: .owner) }
        await refused(.dataSizeExceeded) {
            _ = try await ledger.addAttachment(to: mine.uuid, name: "big.png", contentType: "image/png", data: Self.png + Array(repeating: 0, count: Attachment.maximumSize), by: .owner)
        }
        await refused(.noData) { _ = try await ledger.addAttachment(to: UUID(), name: "x.png", contentType: "image/png", data: Self.png, by: .owner) }
        // The app may not read the owner's prescription: it is answered as unknown.
        await refused(.noData) { _ = try await ledger.addAttachment(to: owners.uuid, name: "x.png", contentType: "image/png", data: Self.png, by: Self.app) }
        await refused(.authorizationDenied) { _ = try await ledger.addAttachment(to: mine.uuid, name: "x.png", contentType: "image/png", data: Self.png, by: .operator) }
        #expect(try ledger.head() == head, "nothing was written")

        let own = try await ledger.addAttachment(to: mine.uuid, name: "lens.jpg", contentType: "image/jpeg", data: Self.jpeg, by: Self.app)
        #expect(try ledger.attachments(of: mine.uuid, as: Self.app) == [own])
        // Selected for the app, the owner's prescription is readable, so refusals say why.
        try await ledger.setObjectReadSelection(app: Fixtures.appA.bundleIdentifier, type: .visionPrescription, objects: [owners.uuid], by: .owner)
        await refused(.authorizationDenied) { _ = try await ledger.addAttachment(to: owners.uuid, name: "x.png", contentType: "image/png", data: Self.png, by: Self.app) }
        let ownersScan = try await ledger.addAttachment(to: owners.uuid, name: "scan.pdf", contentType: "application/pdf", data: Self.pdf, by: .owner)
        await refused(.authorizationDenied) { try await ledger.removeAttachment(ownersScan.uuid, by: Self.app) }
        #expect(try ledger.attachmentData(ownersScan.uuid, as: Self.app).1 == Self.pdf)
        // Revoking the share grant stops the app attaching even to its own.
        try await ledger.decideAuthorization(app: Fixtures.appA.bundleIdentifier, type: .visionPrescription, direction: .share, decision: .revoked, by: .owner)
        await refused(.authorizationDenied) { _ = try await ledger.addAttachment(to: mine.uuid, name: "x.png", contentType: "image/png", data: Self.png, by: Self.app) }
    }
}
