import Foundation
import HealthLedgerSDK
import Ledger
import Testing

@Suite("Per-object read of vision prescriptions over the wire", .timeLimit(.minutes(3)))
struct PerObjectReadTests {
    static let app = TestServer.appSource.bundleIdentifier

    /// Lets the walk app share vision prescriptions (asked by the app, granted by the owner).
    static func grantShare(app: HealthStore, owner: HealthStore) async throws {
        #expect(try await app.requestAuthorization(toShare: [Types.vision], read: []) == 1)
        try await owner.decideAuthorization(app: Self.app, type: Types.vision, direction: .share, decision: .granted)
    }

    @Test("the owner's selection over time decides which prescriptions the app reads")
    func selectionOverTime() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await Self.grantShare(app: app, owner: owner)
            // The owner's three, 30 days each, at days 0, 100 and 400; the app's own at day 600.
            let first = visionPrescription(issuedDay: 0, description: "first")
            let second = visionPrescription(issuedDay: 100, description: "second")
            let third = visionPrescription(issuedDay: 400, description: "third")
            try await owner.save([.visionPrescription(first), .visionPrescription(second), .visionPrescription(third)])
            let mine = visionPrescription(issuedDay: 600, description: "mine")
            try await app.save(.visionPrescription(mine))
            let query = SampleQueryDescriptor(type: Types.vision)
            func sees() async throws -> [UUID] { try await app.result(for: query).map(\.uuid) }

            // Before any request: only its own, everywhere.
            #expect(try await sees() == [mine.uuid])
            #expect(try await app.object(with: first.uuid) == nil)
            let unknown = UUID()
            let unknownError = await expectRPCError(.notFound, .noData, "unknown") { _ = try await app.delete([unknown]) }
            let hiddenError = await expectRPCError(.notFound, .noData, "hidden prescription") { _ = try await app.delete([first.uuid]) }
            #expect(messageShape(hiddenError, naming: first.uuid) == messageShape(unknownError, naming: unknown))

            // Asking by type is refused; the per-object request becomes pending with the prescriptions it matches.
            await expectRPCError(.invalidArgument, .invalidArgument, "read by type") {
                _ = try await app.requestAuthorization(toShare: [], read: [Types.vision])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "per-object read of heart rate") {
                try await app.requestPerObjectReadAuthorization(for: Types.heartRate)
            }
            let asked = DateInterval(start: Samples.base.addingTimeInterval(-86_400), end: Samples.base.addingTimeInterval(200 * 86_400))
            try await app.requestPerObjectReadAuthorization(for: Types.vision, overlapping: asked)
            let pending = try await owner.pendingAuthorizations(app: Self.app)
            #expect(pending.count == 1)
            let request = try #require(pending.first)
            #expect(request.direction == .objectRead && request.type == Types.vision && request.decision == nil)
            #expect(request.matching == [first.uuid, second.uuid])
            #expect(request.rangeStart == asked.start && request.rangeEnd == asked.end)
            #expect(request.selected.isEmpty)
            #expect(try await sees() == [mine.uuid], "a request grants nothing")

            // Select the first: own + first.
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [first.uuid])
            #expect(try await sees() == [first.uuid, mine.uuid])
            #expect(try await app.object(with: first.uuid) == .visionPrescription(first))
            #expect(try await app.object(with: second.uuid) == nil)
            #expect(try await app.object(with: third.uuid) == nil)
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.vision, limit: 1, sort: .startDate(ascending: false))).map(\.uuid) == [mine.uuid])
            #expect(try await batches(app, SampleQueryDescriptor(type: Types.vision, batchSize: 1)).map { $0.map(\.uuid) } == [[first.uuid], [mine.uuid]])
            // A selected prescription is readable, not the app's to delete.
            await expectRPCError(.permissionDenied, .authorizationDenied, "selected, not own") { _ = try await app.delete([first.uuid]) }
            let hiddenNow = await expectRPCError(.notFound, .noData, "not selected") { _ = try await app.delete([second.uuid]) }
            #expect(hiddenNow?.message.contains(second.uuid.uuidString) == true)
            #expect(try await owner.pendingAuthorizations(app: Self.app).isEmpty, "the selection answered the request")
            let entry = try #require(try await owner.authorizations(app: Self.app).first { $0.direction == .objectRead })
            #expect(entry.selected == [first.uuid] && entry.decision == .granted)

            // Change to the second: own + second, the first hidden again.
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [second.uuid])
            #expect(try await sees() == [second.uuid, mine.uuid])
            #expect(try await app.object(with: first.uuid) == nil)
            #expect(try await app.object(with: second.uuid) == .visionPrescription(second))

            // The owner may select outside the asked range too (it is a suggestion), and more than one.
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [third.uuid, first.uuid, third.uuid])
            #expect(try await sees() == [first.uuid, third.uuid, mine.uuid])

            // Refused selections change nothing.
            await expectRPCError(.notFound, .noData, "unknown UUID") {
                try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [first.uuid, UUID()])
            }
            let heart = Samples.heartRate(70, at: 0)
            try await owner.save(heart)
            await expectRPCError(.notFound, .noData, "an object of another type") {
                try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [heart.uuid])
            }
            await expectRPCError(.invalidArgument, .invalidArgument, "a type read by type") {
                try await owner.setObjectReadSelection(app: Self.app, type: Types.heartRate, objects: [heart.uuid])
            }
            #expect(try await sees() == [first.uuid, third.uuid, mine.uuid])
            #expect(try await app.object(with: heart.uuid) == nil, "a refused selection leaks nothing of another type")

            // A selected prescription that is deleted is seen by nobody.
            try await owner.delete([third.uuid])
            #expect(try await sees() == [first.uuid, mine.uuid])
            #expect(try await app.object(with: third.uuid) == nil)

            // Select none: own only.
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [])
            #expect(try await sees() == [mine.uuid])
            #expect(try await app.object(with: first.uuid) == nil)
            #expect(try await app.object(with: second.uuid) == nil)

            // A new request asks again; the current selection stays until the owner answers.
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [second.uuid])
            try await app.requestPerObjectReadAuthorization(for: Types.vision)
            let again = try await owner.pendingAuthorizations(app: Self.app)
            #expect(again.count == 1 && again.first?.matching == [first.uuid, second.uuid, mine.uuid], "an open request matches every prescription")
            #expect(again.first?.selected == [second.uuid])
            #expect(try await sees() == [second.uuid, mine.uuid])

            // The trail: the share request and grant, the per-object requests and every selection.
            let history = try await owner.authorizationHistory(app: Self.app)
            let actions = history.map(\.action).filter {
                switch $0 {
                case .requestedObjects, .selectedObjects: true
                case .requested(let share, _): share == [Types.vision]
                case .decided(let type, _, _): type == Types.vision
                }
            }
            #expect(actions == [
                .requested(share: [Types.vision], read: []),
                .decided(Types.vision, .share, .granted),
                .requestedObjects(Types.vision, start: asked.start, end: asked.end),
                .selectedObjects(Types.vision, count: 1),
                .selectedObjects(Types.vision, count: 1),
                .selectedObjects(Types.vision, count: 2),
                .selectedObjects(Types.vision, count: 0),
                .selectedObjects(Types.vision, count: 1),
                .requestedObjects(Types.vision, start: nil, end: nil),
            ])
            let selectionActors = history.filter { if case .selectedObjects = $0.action { true } else { false } }.map(\.actor)
            #expect(selectionActors == Array(repeating: "owner", count: 5))

            await owner.close()
            await app.close()
        }
    }

    @Test("deselecting a prescription ends the app's running stream; widening does not")
    func deselectionEndsStream() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            let prescriptions = (0..<60).map { visionPrescription(issuedDay: Double($0) * 40, validDays: 10) }
            try await owner.save(prescriptions.map { .visionPrescription($0) })
            try await app.requestPerObjectReadAuthorization(for: Types.vision)
            let selected = Array(prescriptions.prefix(50).map(\.uuid))
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: selected)

            // Widening the selection does not end a stream: it runs to its end with what it started with.
            var widened = 0
            var iterator = try await app.results(for: SampleQueryDescriptor(type: Types.vision, batchSize: 1)).makeAsyncIterator()
            widened += try #require(try await iterator.next()).count
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: selected + [prescriptions[55].uuid])
            while let batch = try await iterator.next() { widened += batch.count }
            #expect(widened == 50)

            // Taking one prescription away ends it with permissionDenied.
            var received = 0
            var stream = try await app.results(for: SampleQueryDescriptor(type: Types.vision, batchSize: 1)).makeAsyncIterator()
            received += try #require(try await stream.next()).count
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: Array(selected.dropFirst()))
            await expectRPCError(.permissionDenied, .authorizationDenied, "deselected mid-stream") {
                while let batch = try await stream.next() { received += batch.count }
            }
            #expect(received < 50)
            #expect(try await app.result(for: SampleQueryDescriptor(type: Types.vision)).map(\.uuid) == Array(selected.dropFirst()))
            await owner.close()
            await app.close()
        }
    }
    @Test("a watched query shows selections as they happen; a deselection ends it, and the next query reports the loss")
    func watchedSelection() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await Self.grantShare(app: app, owner: owner)
            let first = visionPrescription(issuedDay: 0, description: "first")
            let second = visionPrescription(issuedDay: 100, description: "second")
            try await owner.save([.visionPrescription(first), .visionPrescription(second)])
            let mine = visionPrescription(issuedDay: 600, description: "mine")
            try await app.save(.visionPrescription(mine))
            try await app.requestPerObjectReadAuthorization(for: Types.vision)

            var watch = try await app.changes(for: AnchoredObjectQueryDescriptor(type: Types.vision)).makeAsyncIterator()
            let initial = try #require(try await watch.next())
            #expect(initial.addedObjects.map(\.uuid) == [mine.uuid] && initial.caughtUp)
            var observer = try await app.observe(Types.vision).makeAsyncIterator()

            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [first.uuid])
            let selected = try #require(try await watch.next())
            #expect(selected.addedObjects == [.visionPrescription(first)] && selected.deletedObjects.isEmpty)
            #expect(try await observer.next() != nil)
            // Widening the selection keeps the stream; the newly selected one arrives.
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [first.uuid, second.uuid])
            let widened = try #require(try await watch.next())
            #expect(widened.addedObjects.map(\.uuid) == [second.uuid])
            // Deselecting takes access away: the stream ends at once.
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [second.uuid])
            await expectRPCError(.permissionDenied, .authorizationDenied, "watch after a deselection") { while try await watch.next() != nil {} }
            await expectRPCError(.permissionDenied, .authorizationDenied, "observer after a deselection") { while try await observer.next() != nil {} }
            let after = try await app.result(for: AnchoredObjectQueryDescriptor(type: Types.vision, anchor: widened.newAnchor))
            #expect(after.addedObjects.isEmpty && after.deletedObjects.map(\.uuid) == [first.uuid])
            for store in [owner, app] { await store.close() }
        }
    }
    @Test("attachments follow their prescription's read access; hidden ones answer as unknown ones do")
    func attachments() async throws {
        try await withTestServer { server in
            let owner = server.client()
            let app = server.client(server.appCredential)
            try await Self.grantShare(app: app, owner: owner)
            let prescription = visionPrescription(issuedDay: 0, description: "with a scan")
            try await owner.save(.visionPrescription(prescription))
            let pdf = Array("%PDF-1.4\n%%EOF\n".utf8)
            let scan = try await owner.addAttachment(to: prescription.uuid, name: "scan.pdf", contentType: "application/pdf", data: pdf, metadata: ["from": "optician"])
            #expect(try await owner.attachments(of: prescription.uuid) == [scan])

            let unknownObject = UUID()
            let unknownAttachment = UUID()
            func hidden() async {
                let unknown = await expectRPCError(.notFound, .noData, "attachments of an unknown object") { _ = try await app.attachments(of: unknownObject) }
                let hidden = await expectRPCError(.notFound, .noData, "attachments of a hidden prescription") { _ = try await app.attachments(of: prescription.uuid) }
                #expect(messageShape(hidden, naming: prescription.uuid) == messageShape(unknown, naming: unknownObject))
                let unknownData = await expectRPCError(.notFound, .noData, "unknown attachment") { _ = try await app.data(of: unknownAttachment) }
                let hiddenData = await expectRPCError(.notFound, .noData, "hidden attachment") { _ = try await app.data(of: scan.uuid) }
                #expect(messageShape(hiddenData, naming: scan.uuid) == messageShape(unknownData, naming: unknownAttachment))
                let hiddenRemove = await expectRPCError(.notFound, .noData, "removing a hidden attachment") { try await app.removeAttachment(scan.uuid) }
                #expect(messageShape(hiddenRemove, naming: scan.uuid) == messageShape(unknownData, naming: unknownAttachment))
            }
            await hidden()
            try await app.requestPerObjectReadAuthorization(for: Types.vision)
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [prescription.uuid])
            #expect(try await app.attachments(of: prescription.uuid) == [scan])
            let (attachment, bytes) = try await app.data(of: scan.uuid)
            #expect(attachment == scan && bytes == pdf)
            await expectRPCError(.permissionDenied, .authorizationDenied, "removing the owner's attachment") { try await app.removeAttachment(scan.uuid) }
            try await owner.setObjectReadSelection(app: Self.app, type: Types.vision, objects: [])
            await hidden()
            for store in [owner, app] { await store.close() }
        }
    }
}
