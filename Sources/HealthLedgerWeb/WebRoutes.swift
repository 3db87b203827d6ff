import Foundation
import HTTPTypes
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel
import Hummingbird
import NIOCore

/// A request's context: what Hummingbird keeps, and the peer's address (for the sign-in
/// throttle).
struct WebContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: String

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }
}

/// The owner's web app: its pages and forms. Every page reads and writes through the SDK with
/// the signed-in owner's credential, against the server's own RPC port: the same calls, checks
/// and records as any client's.
struct WebRoutes: Sendable {
    let sessions: WebSessions
    /// How the SDK reaches the RPC server (its port, TLS), for a credential.
    let connect: @Sendable (_ credential: String) -> HealthStore
    /// The session cookie carries `Secure` (the app is served over TLS).
    let secure: Bool

    static let cookie = "healthledger_session"
    /// The largest form body read.
    static let largestForm = 16 << 10

    func register(on router: Router<WebContext>) {
        router.get("/app.css") { _, _ in Self.asset(HTML.styleSheet, type: "text/css; charset=utf-8") }
        router.get("/app.js") { _, _ in Self.asset(HTML.script, type: "text/javascript; charset=utf-8") }
        router.get("/sign-in") { request, _ in
            if sessions.session(request.cookies[Self.cookie]?.value) != nil { return Self.redirect("/") }
            return Self.page(.ok, HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: nil)))
        }
        router.post("/sign-in") { request, context in try await signIn(request, context) }
        // A sign-in link (`healthledger admin sign-in-link`): the credential is after '#', which
        // the browser keeps to itself; the page's script posts it as the sign-in form would.
        router.get("/sign-in/link") { _, _ in
            Self.page(
                .ok,
                HTML.page(
                    title: "Sign in", session: nil,
                    body: """
                        <p id="link-status" role="status">Signing you in…</p>
                        <form method="post" action="/sign-in" id="link-sign-in"><input type="hidden" name="credential" id="link-credential"></form>
                        <noscript><p>Signing in with a link needs JavaScript. Instead, copy the part of the link after <code>#</code> and paste it on <a href="/sign-in">the sign-in page</a>.</p></noscript>
                        """))
        }
        router.post("/sign-out") { request, _ in
            try await withForm(request, as: CSRFForm.self) { session, _ in
                sessions.end(session.id)
                var response = Self.redirect("/sign-in")
                response.setCookie(Cookie(name: Self.cookie, value: "", maxAge: 0, path: "/", secure: secure, httpOnly: true, sameSite: .strict))
                return response
            }
        }
        router.get("/") { request, _ in
            try await withSession(request) { session in
                Self.page(.ok, HTML.page(title: "Summary", session: session, current: "/", body: try await SummaryPage(store: session.store).render()))
            }
        }
        router.get("/apps") { request, _ in
            try await withSession(request) { session in
                Self.page(.ok, HTML.page(title: "Apps", session: session, current: "/apps", notice: sessions.takeNotice(for: session), body: try await apps(session)))
            }
        }
        router.post("/apps/decide") { request, _ in
            try await withForm(request, as: DecisionForm.self) { session, form in
                guard let type = try? ObjectType(form.type), let direction = AuthorizationDirection(rawValue: form.direction),
                    let decision = AuthorizationDecision(rawValue: form.decision)
                else { return Self.page(.badRequest, HTML.page(title: "Apps", session: session, body: "<p class=\"error\">The form named an unknown type, direction or decision.</p>")) }
                try await session.store.decideAuthorization(app: form.app, type: type, direction: direction, decision: decision)
                sessions.setNotice("\(form.app): \(WebText.typeName(type.identifier)), \(direction), \(decision).", for: session)
                return Self.redirect("/apps")
            }
        }
        router.post("/apps/priority") { request, _ in
            try await withForm(request, as: PriorityForm.self) { session, form in
                guard let type = try? ObjectType(form.type) else {
                    return Self.page(.badRequest, HTML.page(title: "Apps", session: session, body: "<p class=\"error\">The form named an unknown type.</p>"))
                }
                var order = try await session.store.sourcePriority(for: type).map(\.bundleIdentifier)
                if let index = order.firstIndex(of: form.source) {
                    let target = form.move == "up" ? index - 1 : index + 1
                    if order.indices.contains(target) { order.swapAt(index, target) }
                }
                try await session.store.setSourcePriority(for: type, order: order)
                sessions.setNotice("\(WebText.typeName(type.identifier)): sources in order \(order.joined(separator: ", ")).", for: session)
                return Self.redirect("/apps")
            }
        }
        router.post("/apps/select") { request, _ in
            try await withForm(request, as: SelectionForm.self) { session, form in
                guard let type = try? ObjectType(form.type) else {
                    return Self.page(.badRequest, HTML.page(title: "Apps", session: session, body: "<p class=\"error\">The form named an unknown type.</p>"))
                }
                let uuids = (form.uuids ?? []).compactMap(UUID.init(uuidString:))
                // Every item the form names, or none of the change: a selection that silently
                // lost an item would take back what the owner meant to share.
                guard uuids.count == (form.uuids ?? []).count else {
                    return Self.page(.badRequest, HTML.page(title: "Apps", session: session, body: "<p class=\"error\" role=\"alert\">The form named an item that is not one (not a UUID); nothing was changed.</p>"))
                }
                try await session.store.setObjectReadSelection(app: form.app, type: type, objects: uuids)
                sessions.setNotice("\(form.app) may read \(uuids.count) chosen \(WebText.typeName(type.identifier).lowercased()) item(s).", for: session)
                return Self.redirect("/apps")
            }
        }
        router.get("/browse") { request, _ in
            try await withSession(request) { session in
                let parameters = request.uri.queryParameters
                let type = parameters["type"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
                guard type.map({ identifier in BrowsePage.types.contains { $0.identifier == identifier } }) != false else {
                    return Self.page(.badRequest, HTML.page(title: "Browse", session: session, current: "/browse", body: "<p class=\"error\" role=\"alert\">There is no kind of data by that name.</p>"))
                }
                let grouping = parameters["by"].flatMap { BrowsePage.Grouping(rawValue: String($0)) } ?? .day
                // A page of samples starting before a time the ledger can hold (a date from the
                // years 1–9999), in microseconds, as the page's own links write it.
                var before: Date?
                if let text = parameters["before"] {
                    guard let microseconds = Int64(String(text)), ObjectLimits.dateRange.contains(Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)) else {
                        return Self.page(
                            .badRequest,
                            HTML.page(title: "Browse", session: session, current: "/browse", body: "<p class=\"error\" role=\"alert\">That page of samples does not exist: its date is not one the ledger holds.</p>"))
                    }
                    before = Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)
                }
                let body = try await BrowsePage(store: session.store, session: session).render(type: type, grouping: grouping, before: before)
                return Self.page(.ok, HTML.page(title: "Browse", session: session, current: "/browse", notice: sessions.takeNotice(for: session), body: body))
            }
        }
        router.post("/browse/delete") { request, _ in
            try await withForm(request, as: DeleteForm.self) { session, form in
                guard let uuid = UUID(uuidString: form.uuid) else {
                    return Self.page(.badRequest, HTML.page(title: "Browse", session: session, body: "<p class=\"error\">The form named no sample.</p>"))
                }
                let deleted = try await session.store.delete([uuid])
                sessions.setNotice(deleted == 1 ? "The sample was deleted." : "That sample was already gone.", for: session)
                return Self.redirect("/browse?type=\(form.type.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")")
            }
        }
        router.get("/history") { request, _ in
            try await withSession(request) { session in Self.page(.ok, HTML.page(title: "History", session: session, current: "/history", body: try await history(session))) }
        }
        router.get("/history/live") { request, _ in try await historyStream(request) }
        registerData(on: router)
        refuseOtherMethods(on: router)
    }

    /// Each page answers a method it does not take with 405 and the methods it takes (RFC
    /// 9110 §15.5.6), not with "not found".
    private func refuseOtherMethods(on router: Router<WebContext>) {
        for routes in Dictionary(grouping: router.routes, by: { $0.path.description }).values {
            let taken = routes.map(\.method)
            let allow = taken.map(\.rawValue).sorted().joined(separator: ", ")
            for method in [HTTPRequest.Method.get, .post, .put, .delete, .patch] where !taken.contains(method) {
                router.on(routes[0].path, method: method) { _, _ in
                    var response = Self.page(
                        .methodNotAllowed,
                        HTML.page(
                            title: "Not allowed", session: nil,
                            body: "<p class=\"error\" role=\"alert\">This page does not take \(method.rawValue) requests (it takes \(allow)): nothing was changed.</p>"))
                    response.headers[.allow] = allow
                    return response
                }
            }
        }
    }

    // MARK: Sign-in

    struct SignInForm: Decodable { let credential: String }
    struct CSRFForm: Decodable { let csrf: String }
    struct PriorityForm: Decodable, CSRFCarrying {
        let csrf: String
        let type: String
        let source: String
        let move: String
    }
    struct SelectionForm: Decodable, CSRFCarrying {
        let csrf: String
        let app: String
        let type: String
        let uuids: [String]?
    }
    struct DeleteForm: Decodable {
        let csrf: String
        let uuid: String
        let type: String
    }
    struct DecisionForm: Decodable {
        let csrf: String
        let app: String
        let type: String
        let direction: UInt8
        let decision: UInt8
    }

    static func signInForm(error: String?) -> String {
        """
        \(error.map { "<p class=\"error\" role=\"alert\">\(HTML.escape($0))</p>" } ?? "")
        <p>Sign in with your ledger's owner credential (it starts with <code>hl1:</code>). Apps' credentials cannot sign in here.</p>
        <form method="post" action="/sign-in">
        <label for="credential">Owner credential</label>
        <input type="password" id="credential" name="credential" autocomplete="current-password" required>
        <p><button type="submit">Sign in</button></p>
        </form>
        """
    }

    /// Checks the credential with a ping through the SDK: it must authenticate, and be the
    /// owner's. Failures from one address are throttled.
    private func signIn(_ request: Request, _ context: WebContext) async throws -> Response {
        if let refusal = Self.crossSiteRefusal(request) { return Self.page(.forbidden, HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: refusal))) }
        guard sessions.beginSignIn(from: context.remoteAddress) else {
            return Self.page(
                .tooManyRequests,
                HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: "Too many failed sign-ins from this address: wait a minute, then try again.")))
        }
        let form: SignInForm
        do { form = try await Self.form(request, as: SignInForm.self) } catch {
            sessions.signedIn(from: context.remoteAddress)
            let tooLarge = error is FormTooLarge
            return Self.page(
                tooLarge ? .contentTooLarge : .badRequest,
                HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: tooLarge ? Self.formTooLarge : "Enter your owner credential.")))
        }
        let credential = form.credential.trimmingCharacters(in: .whitespacesAndNewlines)
        let store = connect(credential)
        func refuse(_ message: String, _ status: HTTPResponse.Status = .unauthorized) async -> Response {
            await store.close()
            return Self.page(status, HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: message)))
        }
        let pong: PingResult
        do { pong = try await store.ping() } catch let error as RPCError where error.code == .unauthenticated {
            return await refuse("That credential is not accepted: \(error.message).")
        } catch {
            await store.close()
            sessions.signedIn(from: context.remoteAddress)
            return Self.page(
                .serviceUnavailable, HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: "The ledger could not be reached: \(error)")))
        }
        guard pong.principal == "owner" else {
            return await refuse("That is an app's credential. Sign in with the owner credential of your ledger.", .forbidden)
        }
        // A sign-in link's credential signs in once. Its first use schedules its revocation
        // for when the session must end at the latest, in the ledger: a restart, which forgets
        // the sessions, does not make the link usable again.
        let id = credential.split(separator: ":").dropFirst(2).first.map(String.init) ?? ""
        var linkCredentialID: String?
        let alreadyUsed = "This sign-in link was already used: ask for a new one, or sign in with your owner credential."
        do {
            if let link = try await store.credentials().first(where: { $0.id == id }), link.label == CredentialInfo.webSignInLinkLabel {
                guard link.revocation == nil, sessions.redeemLink(ledger: pong.ledgerID, credentialID: id) else { return await refuse(alreadyUsed) }
                do {
                    // A few minutes past the session's end, which revokes it at once anyway.
                    let latestEnd = min(sessions.lifetime + 300, 365 * 86_400)
                    try await store.revokeCredential(id: id, effectiveIn: .seconds(Int64(latestEnd.rounded(.up))))
                } catch {
                    sessions.forgetLink(ledger: pong.ledgerID, credentialID: id)
                    throw error
                }
                linkCredentialID = id
            }
        } catch let error as RPCError where error.code == .unauthenticated {
            return await refuse("That credential is not accepted: \(error.message).")
        } catch {
            // The ledger could not record the link's use: no session, the link still unused.
            await store.close()
            sessions.signedIn(from: context.remoteAddress)
            return Self.page(
                .serviceUnavailable, HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: "The ledger could not be reached: \(error)")))
        }
        sessions.signedIn(from: context.remoteAddress)
        let session = sessions.begin(ledger: pong.ledgerID, store: store, linkCredentialID: linkCredentialID)
        var response = Self.redirect("/")
        response.setCookie(
            Cookie(name: Self.cookie, value: session.id, maxAge: Int(sessions.lifetime), path: "/", secure: secure, httpOnly: true, sameSite: .strict))
        return response
    }

    // MARK: Pages

    private func apps(_ session: WebSession) async throws -> String {
        let pending = try await session.store.pendingAuthorizations()
        let all = try await session.store.authorizations()
        func decide(_ entry: AuthorizationEntry, _ decision: AuthorizationDecision, _ button: String, _ style: String) -> String {
            HTML.form(
                action: "/apps/decide", session: session,
                fields: [
                    ("app", entry.app.bundleIdentifier), ("type", entry.type.identifier), ("direction", "\(entry.direction.rawValue)"),
                    ("decision", "\(decision.rawValue)"),
                ], button: button, label: "\(button) \(entry.app.name): \(entry.direction) \(WebText.typeName(entry.type.identifier))", style: style)
        }
        let pendingRows = try await pending.asyncMap { entry in
            guard entry.direction != .objectRead else { return try await chooser(entry, session) }
            return """
            <tr><td>\(HTML.escape(entry.app.name)) <small>(\(HTML.escape(entry.app.bundleIdentifier)))</small></td>
            <td>\(HTML.escape(WebText.typeName(entry.type.identifier)))</td><td>\(WebText.direction(entry.direction))</td>
            <td>\(decide(entry, .granted, "Allow", "grant")) \(decide(entry, .denied, "Don't allow", "deny"))</td></tr>
            """
        }.joined()
        let decided = all.filter { $0.decision != nil && $0.direction != .objectRead }
        let priorities = try await self.priorities(all, session)
        let decidedRows = decided.map { entry in
            let action = entry.decision == .granted ? decide(entry, .revoked, "Revoke", "deny") : decide(entry, .granted, "Allow", "grant")
            return """
                <tr><td>\(HTML.escape(entry.app.name)) <small>(\(HTML.escape(entry.app.bundleIdentifier)))</small></td>
                <td>\(HTML.escape(WebText.typeName(entry.type.identifier)))</td><td>\(WebText.direction(entry.direction))</td>
                <td>\(HTML.escape(entry.decision.map { "\($0)" } ?? ""))\(entry.decidedAt.map { " <time datetime=\"\(WebText.iso($0))\">\(WebText.iso($0))</time>" } ?? "")</td>
                <td>\(action)</td></tr>
                """
        }.joined()
        return """
            <section aria-labelledby="pending-heading">
            <h2 id="pending-heading">Waiting for your decision</h2>
            \(pending.isEmpty ? "<p>No app is waiting for a decision.</p>" : """
            <table id="pending"><thead><tr><th scope="col">App</th><th scope="col">Data</th><th scope="col">Asks to</th><th scope="col">Decide</th></tr></thead>
            <tbody>\(pendingRows)</tbody></table>
            """)
            </section>
            \(priorities)
            <section aria-labelledby="decided-heading">
            <h2 id="decided-heading">Your decisions</h2>
            \(decided.isEmpty ? "<p>You have decided nothing yet.</p>" : """
            <table id="decided"><thead><tr><th scope="col">App</th><th scope="col">Data</th><th scope="col">Access</th><th scope="col">Decision</th><th scope="col">Change</th></tr></thead>
            <tbody>\(decidedRows)</tbody></table>
            """)
            </section>
            """
    }

    /// A per-object read request: the items it matches, each with a checkbox (those already
    /// chosen checked), and one button to share the chosen ones.
    private func chooser(_ entry: AuthorizationEntry, _ session: WebSession) async throws -> String {
        let chosen = Set(entry.selected)
        var items = ""
        for uuid in entry.matching.prefix(200) {
            let object = try await session.store.object(with: uuid)
            let when = object.map { WebText.iso($0.object.startDate) } ?? ""
            items += """
                <li><label><input type="checkbox" name="uuids[]" value="\(uuid.uuidString)"\(chosen.contains(uuid) ? " checked" : "")> \(HTML.escape(WebText.typeName(entry.type.identifier))) of <time datetime="\(when)">\(when)</time> <small>(\(uuid.uuidString.prefix(8)))</small></label></li>
                """
        }
        return """
            <tr><td>\(HTML.escape(entry.app.name)) <small>(\(HTML.escape(entry.app.bundleIdentifier)))</small></td>
            <td>\(HTML.escape(WebText.typeName(entry.type.identifier)))</td><td>\(WebText.direction(entry.direction))</td>
            <td><form method="post" action="/apps/select" class="chooser"><input type="hidden" name="csrf" value="\(HTML.escape(session.csrfToken))">
            <input type="hidden" name="app" value="\(HTML.escape(entry.app.bundleIdentifier))"><input type="hidden" name="type" value="\(HTML.escape(entry.type.identifier))">
            <fieldset><legend>Choose what \(HTML.escape(entry.app.name)) may read</legend><ul>\(items.isEmpty ? "<li>Nothing matches the request.</li>" : items)</ul></fieldset>
            <button type="submit" class="grant">Share the chosen items</button></form></td></tr>
            """
    }

    /// Source priority of every type an app may save: which source's values count first in
    /// statistics, with buttons to move a source up or down (types with two sources or more).
    private func priorities(_ entries: [AuthorizationEntry], _ session: WebSession) async throws -> String {
        let types = Set(entries.filter { $0.direction == .share && $0.decision == .granted }.map(\.type.identifier)).sorted()
        var sections = ""
        for identifier in types {
            let type = try ObjectType(identifier)
            let sources = try await session.store.sourcePriority(for: type)
            guard sources.count > 1 else { continue }
            let items = sources.enumerated().map { index, source in
                let name = "\(source.name) (\(source.bundleIdentifier))"
                func move(_ direction: String, _ button: String) -> String {
                    HTML.form(
                        action: "/apps/priority", session: session, fields: [("type", identifier), ("source", source.bundleIdentifier), ("move", direction)],
                        button: button, label: "\(button): \(name) for \(WebText.typeName(identifier))")
                }
                return "<li>\(HTML.escape(name)) \(index > 0 ? move("up", "Move up") : "") \(index < sources.count - 1 ? move("down", "Move down") : "")</li>"
            }.joined()
            sections += "<h3>\(HTML.escape(WebText.typeName(identifier)))</h3><ol class=\"priority\" data-type=\"\(HTML.escape(identifier))\">\(items)</ol>"
        }
        return """
            <section aria-labelledby="priority-heading">
            <h2 id="priority-heading">Which source counts first</h2>
            \(sections.isEmpty ? "<p>No kind of data has more than one source yet.</p>" : "<p>When sources overlap, statistics count the first one's values.</p>" + sections)
            </section>
            """
    }

    /// The last 200 lines of the audit trail, newest first; the page's script adds new ones
    /// as they commit (``historyStream(_:)``).
    private func history(_ session: WebSession) async throws -> String {
        var events: [AuditEvent] = []
        var head: UInt64 = 0
        for try await batch in try await session.store.audit(AuditFilter()) {
            events.append(contentsOf: batch.events)
            if events.count > 2_000 { events.removeFirst(events.count - 2_000) }
            head = batch.headSequence
        }
        let reads = try await readers(session)
        let lines = AuditLine.lines(events).suffix(200).reversed()
        let items = lines.map { line in
            "<li data-sequence=\"\(line.sequences.upperBound)\"><time datetime=\"\(WebText.iso(line.time))\">\(WebText.iso(line.time))</time> \(HTML.escape(line.sentence))</li>"
        }.joined()
        return """
            \(reads)
            <section aria-labelledby="events-heading">
            <h2 id="events-heading">What happened</h2>
            <p>Everything that happened to your ledger, newest first: who saved, deleted or decided what, and when. New events appear here as they happen.</p>
            <p id="history-status" role="status" aria-live="polite"></p>
            <ol id="history" reversed data-after="\(head)">\(items)</ol>
            </section>
            """
    }

    /// Who read what in the last 30 days, from the access records: per reader and type, and
    /// the latest reads one by one.
    private func readers(_ session: WebSession) async throws -> String {
        let filter = AccessRecordFilter(since: Date().addingTimeInterval(-30 * 86_400))
        let summary = try await session.store.accessSummary(filter)
        let latest = try await session.store.accessRecords(filter, limit: 10_000).records.suffix(50).reversed()
        func reader(_ principal: Principal) -> String {
            switch principal {
            case .owner: "You"
            case .app(let source): "\(source.name) (\(source.bundleIdentifier))"
            default: "\(principal)"
            }
        }
        let summaryRows = summary.lines.map { line in
            "<tr><td>\(HTML.escape(reader(line.principal)))</td><td>\(HTML.escape(WebText.typeName(line.type)))</td><td>\(line.objects)</td><td>\(line.calls)</td></tr>"
        }.joined()
        let latestRows = latest.map { record in
            """
            <tr><td><time datetime="\(WebText.iso(record.time))">\(WebText.iso(record.time))</time></td><td>\(HTML.escape(reader(record.principal)))</td>
            <td>\(HTML.escape(record.types.map(WebText.typeName).joined(separator: ", ")))</td><td>\(record.objects)</td>
            <td>\(HTML.escape(String(record.method.split(separator: "/").last ?? "")))</td></tr>
            """
        }.joined()
        return """
            <section aria-labelledby="reads-heading">
            <h2 id="reads-heading">Who read your data</h2>
            \(summary.lines.isEmpty ? "<p>Nobody read your data in the last 30 days.</p>" : """
            <div class="scroll"><table id="readers"><caption>Reads in the last 30 days, by reader and kind of data</caption>
            <thead><tr><th scope="col">Reader</th><th scope="col">Data</th><th scope="col">Items read</th><th scope="col">Reads</th></tr></thead>
            <tbody>\(summaryRows)</tbody></table></div>
            <details><summary>The latest reads</summary>
            <div class="scroll"><table id="reads"><thead><tr><th scope="col">When</th><th scope="col">Reader</th><th scope="col">Data</th><th scope="col">Items</th><th scope="col">How</th></tr></thead>
            <tbody>\(latestRows)</tbody></table></div></details>
            """)
            </section>
            """
    }

    /// Server-sent events: each audit event after `after`, as it commits, until the page goes
    /// (found out at the next write: a comment every 15 seconds, so that a closed page ends its
    /// watch even on a quiet ledger) or the session ends.
    private func historyStream(_ request: Request) async throws -> Response {
        try await withSession(request) { session in
            let after = request.uri.queryParameters["after"].flatMap { UInt64(String($0)) } ?? 0
            let events = try await session.store.watchAudit(AuditFilter(fromSequence: after + 1))
            let (messages, queue) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1_000))
            let forward = Task {
                do {
                    for try await batch in events {
                        for event in batch.events {
                            let line = try JSONSerialization.data(
                                withJSONObject: ["sequence": event.sequence, "time": WebText.iso(event.time), "sentence": event.sentence] as [String: Any])
                            queue.yield("event: line\ndata: \(String(decoding: line, as: UTF8.self))\n\n")
                        }
                    }
                } catch {}
                queue.finish()
            }
            let keepalive = Task {
                while (try? await Task.sleep(for: .seconds(15))) != nil { queue.yield(": still here\n\n") }
            }
            var headers = Self.securityHeaders
            headers[.contentType] = "text/event-stream; charset=utf-8"
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    defer {
                        forward.cancel()
                        keepalive.cancel()
                    }
                    for await message in messages { try await writer.write(ByteBuffer(string: message)) }
                    try await writer.finish(nil)
                })
        }
    }

    // MARK: Sessions and forms

    /// Runs `body` for the signed-in owner; sends anyone else to sign in. A credential that
    /// stopped working (revoked, expired) ends the session.
    func withSession(_ request: Request, _ body: (WebSession) async throws -> Response) async throws -> Response {
        guard let session = sessions.session(request.cookies[Self.cookie]?.value) else { return Self.redirect("/sign-in") }
        do {
            return try await body(session)
        } catch let error as RPCError where error.code == .unauthenticated {
            sessions.end(session.id)
            return Self.page(.unauthorized, HTML.page(title: "Sign in", session: nil, body: Self.signInForm(error: "Signed out: \(error.message).")))
        } catch let error as RPCError {
            return Self.page(.init(code: error.code.httpStatus), HTML.page(title: "Something went wrong", session: session, body: "<p class=\"error\" role=\"alert\">\(HTML.escape(error.message))</p>"))
        }
    }

    /// Runs `body` with a posted form of the signed-in owner whose CSRF token matches the
    /// session's; refuses anything else, changing nothing.
    func withForm<Form: Decodable & Sendable>(_ request: Request, as _: Form.Type, _ body: (WebSession, Form) async throws -> Response) async throws -> Response
    where Form: CSRFCarrying {
        try await withSession(request) { session in
            if let refusal = Self.crossSiteRefusal(request) {
                return Self.page(.forbidden, HTML.page(title: "Refused", session: session, body: "<p class=\"error\" role=\"alert\">\(HTML.escape(refusal))</p>"))
            }
            let form: Form
            do { form = try await Self.form(request, as: Form.self) } catch is FormTooLarge {
                return Self.page(
                    .contentTooLarge, HTML.page(title: "Refused", session: session, body: "<p class=\"error\" role=\"alert\">\(HTML.escape(Self.formTooLarge))</p>"))
            } catch {
                return Self.page(
                    .forbidden,
                    HTML.page(
                        title: "Refused", session: session,
                        body: "<p class=\"error\" role=\"alert\">This form was not sent by HealthLedger's own page, or is incomplete: nothing was changed. Go back, reload the page and try again.</p>"))
            }
            guard Self.constantTimeEqual(form.csrf, session.csrfToken) else {
                return Self.page(
                    .forbidden,
                    HTML.page(
                        title: "Refused", session: session,
                        body: "<p class=\"error\" role=\"alert\">This form was not sent by HealthLedger's own page (its security token is missing or wrong): nothing was changed. Go back, reload the page and try again.</p>"))
            }
            return try await body(session, form)
        }
    }

    /// Why a post is refused when the browser says another site sent it (its `Sec-Fetch-Site`,
    /// or an `Origin` whose host is not this one); nil for a post from the app's own pages, or
    /// from a client that says neither.
    static func crossSiteRefusal(_ request: Request) -> String? {
        let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!]
        let origin = request.headers[.origin]
        let host = request.head.authority
        let crossSite = (site != nil && site != "same-origin" && site != "none")
            || (origin != nil && origin != "null" && URLComponents(string: origin ?? "").map { components in
                "\(components.host ?? "")\(components.port.map { ":\($0)" } ?? "")" != host
            } != false)
        return crossSite ? "This form was sent from another site: nothing was changed. Use HealthLedger's own pages." : nil
    }

    private static func form<Form: Decodable>(_ request: Request, as _: Form.Type) async throws -> Form {
        var request = request
        let body: ByteBuffer
        do { body = try await request.collectBody(upTo: largestForm) } catch is NIOTooManyBytesError { throw FormTooLarge() }
        return try URLEncodedFormDecoder().decode(Form.self, from: String(buffer: body))
    }

    /// A form body past ``largestForm``: none of HealthLedger's pages sends one.
    struct FormTooLarge: Error {}

    static let formTooLarge = "This form is larger than the \(largestForm >> 10) KiB a HealthLedger form may be: nothing was changed. Go back, reload the page and try again."

    static func constantTimeEqual(_ left: String, _ right: String) -> Bool {
        let (a, b) = (Array(left.utf8), Array(right.utf8))
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    // MARK: Responses

    /// What every page sends: nothing cached, nothing framed, nothing loaded from elsewhere.
    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy:
            "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        .xContentTypeOptions: "nosniff", .cacheControl: "no-store", HTTPField.Name("Referrer-Policy")!: "no-referrer",
    ]

    static func page(_ status: HTTPResponse.Status, _ html: String) -> Response {
        var headers = securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func asset(_ text: String, type: String) -> Response {
        var headers = securityHeaders
        headers[.contentType] = type
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func redirect(_ location: String) -> Response {
        var headers = securityHeaders
        headers[.location] = location
        return Response(status: .seeOther, headers: headers)
    }
}

/// A form that carries the session's CSRF token.
protocol CSRFCarrying { var csrf: String { get } }
extension WebRoutes.CSRFForm: CSRFCarrying {}
extension WebRoutes.DecisionForm: CSRFCarrying {}
extension WebRoutes.DeleteForm: CSRFCarrying {}

/// Words for what the pages show.
enum WebText {
    /// "HKQuantityTypeIdentifierHeartRate" → "Heart rate".
    static func typeName(_ identifier: String) -> String {
        var name = identifier
        for prefix in ["HKQuantityTypeIdentifier", "HKCategoryTypeIdentifier", "HKCorrelationTypeIdentifier", "HKCharacteristicTypeIdentifier", "HKDataTypeIdentifier",
            "HKMedicationDoseEventTypeIdentifier", "HKDataType", "HK"]
        where name.hasPrefix(prefix) {
            name.removeFirst(prefix.count)
            break
        }
        var words: [String] = []
        for character in name {
            if character.isUppercase || words.isEmpty { words.append(String(character)) } else { words[words.count - 1].append(character) }
        }
        guard let first = words.first else { return identifier }
        return ([first] + words.dropFirst().map { $0.count == 1 ? $0 : $0.lowercased() }).joined(separator: " ")
    }

    static func direction(_ direction: AuthorizationDirection) -> String {
        switch direction {
        case .share: "save"
        case .read: "read"
        case .objectRead: "read chosen items"
        }
    }

    static func iso(_ date: Date) -> String { date.formatted(.iso8601) }

    /// "1 object", "3 objects".
    static func count(_ count: Int, _ noun: String) -> String { count == 1 ? "1 \(noun)" : "\(count) \(noun)s" }

    /// The unit people read a quantity type in.
    static func displayUnit(_ type: QuantityType) -> HealthUnit { DisplayUnits.unit(for: type) }

    /// An object's value as people read it: a quantity in its type's display unit (a series
    /// sample's with its number of values), a category value by name, and for the other kinds
    /// what the Health app shows first.
    static func value(of object: HealthObject) -> String {
        func quantity(_ quantity: Quantity, _ unit: HealthUnit) -> String {
            (try? quantity.doubleValue(for: unit)).map { "\(HTML.number($0)) \(unit)" } ?? "\(quantity)"
        }
        switch object {
        case .quantitySample(let sample):
            let value = quantity(sample.quantity, DisplayUnits.unit(for: sample.type))
            return sample.series.isEmpty ? value : "\(value) (\(count(sample.series.count, "value")))"
        case .categorySample(let sample):
            return sample.type.values.name(of: sample.value) ?? "\(sample.value)"
        case .workout(let workout):
            return "\(workout.activityType.name), \(HTML.number(workout.duration / 60)) min"
        case .correlation(let correlation):
            return correlation.objects.map { "\(typeName($0.type.identifier)) \(quantity($0.quantity, DisplayUnits.unit(for: $0.type)))" }.joined(separator: ", ")
        case .visionPrescription(let prescription):
            return prescription.prescriptionType == .glasses ? "Glasses" : "Contact lenses"
        case .workoutRoute(let route):
            return count(route.locationCount, "location")
        case .activitySummary(let summary):
            let (kcal, minutes, hours) = (try! HealthUnit("kcal"), try! HealthUnit("min"), HealthUnit.count)
            let move = summary.moveMode == .appleMoveTime
                ? "move \(quantity(summary.moveTime, minutes)) of \(quantity(summary.moveTimeGoal, minutes))"
                : "move \(quantity(summary.activeEnergyBurned, kcal)) of \(quantity(summary.activeEnergyBurnedGoal, kcal))"
            return "\(move), exercise \(quantity(summary.exerciseTime, minutes)) of \(quantity(summary.exerciseTimeGoal, minutes)),"
                + " stand \(quantity(summary.standHours, hours)) of \(quantity(summary.standHoursGoal, hours)) hours"
        case .audiogram(let audiogram):
            return audiogram.points.map { point in
                let ears = [("left", point.leftEar), ("right", point.rightEar)].compactMap { name, level in level.map { "\(name) \(quantity($0, .hearingLevel))" } }
                return "\(quantity(point.frequency, .hertz)): \(ears.joined(separator: ", "))"
            }.joined(separator: "; ")
        case .clinicalRecord(let record):
            return "\(record.displayName) (\(record.fhirResource.resourceType))"
        case .electrocardiogram(let recording):
            let classification = typeName("\(recording.classification)".prefix(1).uppercased() + "\(recording.classification)".dropFirst())
            let rate = recording.averageHeartRate.map { ", average \(quantity($0, try! HealthUnit("count/min")))" } ?? ""
            return "\(classification)\(rate); \(count(recording.voltages.count, "measurement")) at \(quantity(recording.samplingFrequency, .hertz))"
        case .heartbeatSeries(let series):
            // The mean rate over the beat-to-beat intervals (those after a gap are none).
            let intervals = zip(series.beats, series.beats.dropFirst()).filter { !$1.precededByGap }.map { $1.timeSinceSeriesStart - $0.timeSinceSeriesStart }
            let rate = intervals.isEmpty ? "" : ", about \(HTML.number((60 * Double(intervals.count) / intervals.reduce(0, +)).rounded())) beats a minute"
            return "\(count(series.beats.count, "beat"))\(rate)"
        case .stateOfMind(let state):
            // "Daily mood, slightly pleasant (0.3): calm, grateful; about family"
            let feeling = state.valenceClassification.map { typeName("\($0)".prefix(1).uppercased() + "\($0)".dropFirst()).lowercased() } ?? ""
            var text = "\(state.kind == .dailyMood ? "Daily mood" : "Momentary emotion"), \(feeling) (\(HTML.number(state.valence)))"
            if !state.labels.isEmpty { text += ": " + state.labels.map { typeName($0.rawValue).lowercased() }.joined(separator: ", ") }
            if !state.associations.isEmpty { text += "; about " + state.associations.map { typeName($0.rawValue).lowercased() }.joined(separator: ", ") }
            return text
        case .userAnnotatedMedication(let medication):
            // "Ibuprofen 200 mg (tablet), “pain pill”, on a schedule"
            var text = "\(medication.medication.displayText) (\(typeName(medication.medication.generalForm.rawValue).lowercased()))"
            if let nickname = medication.nickname { text += ", “\(nickname)”" }
            if medication.hasSchedule { text += ", on a schedule" }
            return medication.isArchived ? text + ", archived" : text
        case .medicationDoseEvent(let dose):
            // "Taken: 1 count of 1 scheduled (ibuprofen-200)"
            var text = typeName("\(dose.logStatus)".prefix(1).uppercased() + "\(dose.logStatus)".dropFirst())
            if let quantity = dose.doseQuantity { text += ": \(HTML.number(quantity)) \(dose.unit)" }
            if let scheduled = dose.scheduledDoseQuantity { text += " of \(HTML.number(scheduled)) scheduled" }
            return text + " (\(dose.medicationConceptIdentifier))"
        }
    }
}

extension RPCStatusCode {
    /// The HTTP status a page answers with when a call fails so.
    var httpStatus: Int {
        switch self {
        case .invalidArgument, .outOfRange, .failedPrecondition: 400
        case .unauthenticated: 401
        case .permissionDenied: 403
        case .notFound: 404
        case .alreadyExists, .aborted: 409
        case .resourceExhausted: 429
        case .unavailable: 503
        case .deadlineExceeded: 504
        default: 500
        }
    }
}

extension Sequence {
    /// The elements mapped by an async transform, one after another, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
