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
        router.get("/data/export.zip") { request, _ in
            try await withSession(request) { session in try await appleHealthExport(session) }
        }
        router.post("/data/import") { request, _ in try await importUpload(request) }
        router.get("/data/import/progress") { request, _ in
            try await withSession(request) { session in
                let progress = sessions.importProgress(for: session)
                let body = progress.map { "{\"running\":true,\"fraction\":\($0.fraction),\"records\":\($0.records)}" } ?? "{\"running\":false}"
                return Self.asset(body, type: "application/json")
            }
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
        router.post("/data/erase-everything") { request, _ in
            try await withForm(request, as: EraseEverythingForm.self) { session, form in
                guard form.confirm.trimmingCharacters(in: .whitespaces).lowercased() == "erase everything" else {
                    sessions.setNotice("Nothing was erased: type the words erase everything to confirm.", for: session)
                    return Self.redirect("/data")
                }
                let erasure = try await session.store.erase(.everything, reason: form.reason.isEmpty ? "everything erased in the web app" : String(form.reason.prefix(500)))
                let characteristics = erasure.characteristics == 0 ? "" : " and \(WebText.count(erasure.characteristics, "characteristic"))"
                sessions.setNotice(
                    "Erased \(WebText.count(erasure.objects, "object"))\(characteristics): every value you kept here is gone; your apps' access and the history stay, and the history still verifies.",
                    for: session)
                return Self.redirect("/data")
            }
        }
    }

    struct EraseEverythingForm: Decodable, CSRFCarrying {
        let csrf: String
        let confirm: String
        let reason: String
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
            <p><a id="export" href="/data/export.jsonl" download>Download everything</a> as HealthLedger JSON Lines (one object per line; <code>healthledger import healthledger FILE</code> reads it back),
            or <a id="export-zip" href="/data/export.zip" download>as an Apple Health export</a> (<code>export.zip</code>, as the Health app writes it).</p>
            </section>
            <section aria-labelledby="import-heading">
            <h2 id="import-heading">Bring your Apple Health data</h2>
            <p>On the iPhone, the Health app's profile → Export All Health Data makes <code>export.zip</code>. Choose it here; records already in your ledger are not added twice.</p>
            <form id="import" data-csrf="\(HTML.escape(session.csrfToken))">
            <label for="import-file">Apple Health export (zip or export.xml)</label>
            <input type="file" id="import-file" accept=".zip,.xml" required>
            <p><button type="submit">Import</button></p>
            <p><label for="import-progress">Progress</label><progress id="import-progress" max="1" value="0"></progress></p>
            <p id="import-status" role="status" aria-live="polite"><noscript>Importing needs JavaScript; <code>healthledger import apple-health FILE</code> does the same.</noscript></p>
            </form>
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
            <h3 id="erase-everything-heading">Erase everything</h3>
            <p>Every sample, workout, record and characteristic (such as your date of birth), of every kind and from every app. Your ledger, the apps you allowed and the history stay.</p>
            <form method="post" action="/data/erase-everything" id="erase-everything" aria-labelledby="erase-everything-heading">
            <input type="hidden" name="csrf" value="\(HTML.escape(session.csrfToken))">
            <label for="erase-everything-reason">Why (kept in the history)</label>
            <input id="erase-everything-reason" name="reason" maxlength="500">
            <label for="erase-everything-confirm">Type <strong>erase everything</strong> to confirm</label>
            <input id="erase-everything-confirm" name="confirm" autocomplete="off" required>
            <p><button type="submit" class="deny">Erase everything</button></p>
            </form>
            </section>
            """
    }

    /// The largest upload an import takes.
    static let largestImport = 4 << 30

    /// An Apple Health export sent as the request's body (by the page's script, which shows
    /// the upload's progress, then the import's from ``sessions``): written to a file, then
    /// imported through the SDK as the owner. Answers the summary as JSON.
    private func importUpload(_ request: Request) async throws -> Response {
        try await withSession(request) { session in
            if let refusal = Self.crossSiteRefusal(request) { return Self.json(.forbidden, ["error": refusal]) }
            guard let token = request.headers[HTTPField.Name("X-CSRF-Token")!], Self.constantTimeEqual(token, session.csrfToken) else {
                return Self.json(.forbidden, ["error": "The upload was not sent by HealthLedger's own page (its security token is missing or wrong): nothing was imported."])
            }
            guard sessions.importProgress(for: session) == nil else {
                return Self.json(.conflict, ["error": "An import is already running in this session; wait for it to end."])
            }
            sessions.setImportProgress((0, 0), for: session)
            defer { sessions.setImportProgress(nil, for: session) }
            let file = FileManager.default.temporaryDirectory.appending(path: "healthledger-web-import-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: file) }
            guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw WebEndpointFailure("could not create a file for the upload")
            }
            let handle = try FileHandle(forWritingTo: file)
            var size = 0
            do {
                for try await buffer in request.body {
                    size += buffer.readableBytes
                    guard size <= Self.largestImport else {
                        try? handle.close()
                        return Self.json(.contentTooLarge, ["error": "The file is larger than \(Self.largestImport >> 30) GiB: use `healthledger import apple-health FILE`."])
                    }
                    try handle.write(contentsOf: buffer.readableBytesView)
                }
                try handle.close()
            } catch {
                try? handle.close()
                throw error
            }
            guard size > 0 else { return Self.json(.badRequest, ["error": "The upload was empty: choose the export file."]) }
            let archive: ExportArchive
            // The upload's place on the server is none of the owner's business.
            func described(_ error: String) -> String { error.replacingOccurrences(of: file.path, with: "the uploaded file") }
            do { archive = try ExportArchive(url: file) } catch let error as ExportArchiveError {
                return Self.json(.badRequest, ["error": "That is not an Apple Health export: \(described(error.description))"])
            }
            let importer = AppleHealthImporter(store: session.store, archive: archive)
            let sessions = sessions
            importer.progress = { progress in sessions.setImportProgress((progress.fraction, progress.elements), for: session) }
            let summary = try await importer.run()
            if let error = summary.error, summary.elements == 0 {
                return Self.json(.badRequest, ["error": "That is not an Apple Health export: \(described(error))"])
            }
            var answer: [String: Any] = [
                "imported": summary.importedTotal, "alreadyPresent": summary.alreadyPresent, "skipped": summary.skippedTotal, "rejected": summary.rejectedTotal,
            ]
            if let error = summary.error { answer["error"] = described(error) }
            return Self.json(.ok, answer)
        }
    }

    static func json(_ status: HTTPResponse.Status, _ value: [String: Any]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])) ?? Data("{}".utf8)
        var headers = securityHeaders
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// Everything the owner may read, as an Apple Health export zip.
    private func appleHealthExport(_ session: WebSession) async throws -> Response {
        let file = FileManager.default.temporaryDirectory.appending(path: "healthledger-web-export-\(UUID().uuidString).zip")
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try await AppleHealthExporter(store: session.store).export(to: file)
        return try Self.download(file, type: "application/zip", name: "\(session.ledger)-export.zip")
    }

    /// Sends `file`'s bytes as a download (the handle opened here reads it after the caller
    /// removes it).
    static func download(_ file: URL, type: String, name: String) throws -> Response {
        let reader = try FileHandle(forReadingFrom: file)
        var headers = securityHeaders
        headers[.contentType] = type
        headers[.contentDisposition] = "attachment; filename=\"\(name)\""
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
        defer { try? FileManager.default.removeItem(at: file) }
        return try Self.download(
            file, type: "application/jsonl; charset=utf-8", name: "\(session.ledger)-\(Date().formatted(.iso8601.year().month().day())).jsonl")
    }
}
