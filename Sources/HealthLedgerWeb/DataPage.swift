import Foundation
import HTTPTypes
import HealthExport
import HealthLedgerSDK
import HealthModel
import Hummingbird
import NIOCore

/// The Data page: the ledger's signed head and a check of it, the export download (HealthLedger
/// JSON Lines, which `healthledger import healthledger FILE` reads back), and erasure of a kind of
/// data after a confirmation.
extension WebRoutes {
    func registerData(on router: Router<WebContext>) {
        router.get("/data") { request, _ in
            try await withSession(request) { session in
                Self.page(.ok, HTML.page(title: "Data", session: session, current: "/data", notice: sessions.takeNotice(for: session), body: try await dataPage(session)))
            }
        }
        router.post("/data/verify") { request, _ in
            try await withForm(request, as: CSRFForm.self) { session, _ in
                let before = session.store.lastTreeHead
                do {
                    let head = try await session.store.treeHead()
                    let against = before.map { " It is consistent with the head of \($0.size) events checked before in this session: no event was changed or removed since." } ?? ""
                    sessions.setNotice(
                        "Verified: the ledger's head of \(head.size) events is signed by the ledger's key (\(head.publicKey.prefix(8).hexString)…).\(against)", for: session)
                } catch let failure as TreeProofs.Failure {
                    sessions.setNotice("The check FAILED: \(failure.description)", for: session)
                }
                return Self.redirect("/data")
            }
        }
        router.get("/data/export.jsonl") { request, _ in
            try await withSession(request) { session in try await export(session) }
        }
        router.post("/data/erase") { request, _ in
            try await withForm(request, as: EraseForm.self) { session, form in
                guard let type = try? ObjectType(form.type), BrowsePage.types.contains(where: { $0.identifier == form.type }) else {
                    return Self.page(.badRequest, HTML.page(title: "Data", session: session, body: "<p class=\"error\" role=\"alert\">There is no kind of data by that name.</p>"))
                }
                guard form.confirm.trimmingCharacters(in: .whitespaces).lowercased() == "erase" else {
                    sessions.setNotice("Nothing was erased: type the word erase to confirm.", for: session)
                    return Self.redirect("/data")
                }
                let erasure = try await session.store.erase(.matching(type), reason: form.reason.isEmpty ? "erased in the web app" : String(form.reason.prefix(500)))
                sessions.setNotice("Erased \(erasure.objects) \(WebText.typeName(type.identifier).lowercased()) objects: their values are gone; the history still verifies.", for: session)
                return Self.redirect("/data")
            }
        }
    }

    struct EraseForm: Decodable, CSRFCarrying {
        let csrf: String
        let type: String
        let confirm: String
        let reason: String
    }

    private func dataPage(_ session: WebSession) async throws -> String {
        let head = try await session.store.treeHead()
        let options = BrowsePage.types.map { "<option value=\"\(HTML.escape($0.identifier))\">\(HTML.escape($0.name))</option>" }.joined()
        return """
            <section aria-labelledby="head-heading">
            <h2 id="head-heading">Your ledger's history</h2>
            <p id="tree-head">\(head.size) events, signed at <time datetime="\(WebText.iso(Date(timeIntervalSince1970: Double(head.timestampUs) / 1_000_000)))">\(WebText.iso(Date(timeIntervalSince1970: Double(head.timestampUs) / 1_000_000)))</time>
            by the ledger's key <code>\(head.publicKey.prefix(8).hexString)…</code>; root <code>\(head.rootHash.prefix(8).hexString)…</code>.</p>
            \(HTML.form(action: "/data/verify", session: session, button: "Verify the history"))
            </section>
            <section aria-labelledby="export-heading">
            <h2 id="export-heading">Download your data</h2>
            <p><a id="export" href="/data/export.jsonl" download>Download everything</a> as HealthLedger JSON Lines (one object per line; <code>healthledger import healthledger FILE</code> reads it back).</p>
            </section>
            <section aria-labelledby="erase-heading">
            <h2 id="erase-heading">Erase data</h2>
            <p>Erasing removes the values for good, from the ledger and from every backup made afterwards; the history keeps that something was there and that you erased it. This cannot be undone.</p>
            <form method="post" action="/data/erase" id="erase">
            <input type="hidden" name="csrf" value="\(HTML.escape(session.csrfToken))">
            <label for="erase-type">Kind of data to erase</label>
            <select id="erase-type" name="type">\(options)</select>
            <label for="erase-reason">Why (kept in the history)</label>
            <input id="erase-reason" name="reason" maxlength="500">
            <label for="erase-confirm">Type <strong>erase</strong> to confirm</label>
            <input id="erase-confirm" name="confirm" autocomplete="off" required>
            <p><button type="submit" class="deny">Erase</button></p>
            </form>
            </section>
            """
    }

    /// Everything the owner may read, as JSON Lines: written to a file of its own first (the
    /// exporter writes files), then sent and removed.
    private func export(_ session: WebSession) async throws -> Response {
        let file = FileManager.default.temporaryDirectory.appending(path: "healthledger-web-export-\(UUID().uuidString).jsonl")
        guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw WebEndpointFailure("could not create a file for the export")
        }
        do {
            let handle = try FileHandle(forWritingTo: file)
            let writer = LineWriter(handle: handle)
            _ = try await LedgerLinesExporter(store: session.store).export(ledgerID: session.ledger, to: writer)
            try writer.flush()
            try handle.close()
        } catch {
            try? FileManager.default.removeItem(at: file)
            throw error
        }
        let reader = try FileHandle(forReadingFrom: file)
        // Gone from the directory at once; the open handle still reads it.
        try? FileManager.default.removeItem(at: file)
        var headers = Self.securityHeaders
        headers[.contentType] = "application/jsonl; charset=utf-8"
        headers[.contentDisposition] = "attachment; filename=\"\(session.ledger)-\(Date().formatted(.iso8601.year().month().day())).jsonl\""
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { try? reader.close() }
                while let chunk = try reader.read(upToCount: 1 << 20), !chunk.isEmpty {
                    try await writer.write(ByteBuffer(bytes: chunk))
                }
                try await writer.finish(nil)
            })
    }
}
