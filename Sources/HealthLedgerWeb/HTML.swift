import Foundation

/// The web app's HTML: escaped text, the page frame, forms that carry the session's CSRF
/// token, and charts drawn as SVG on the server (no script, no external font or library: the
/// browser may be offline, and no value ever goes to another origin).
enum HTML {
    /// `text` safe inside an element or a quoted attribute.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// The pages an owner moves between, in the navigation's order.
    static let sections: [(path: String, name: String)] = [("/", "Summary"), ("/browse", "Browse"), ("/apps", "Apps"), ("/history", "History"), ("/data", "Data")]

    /// A whole page: `body` under a heading `title`, with the navigation and sign-out when
    /// signed in (`session`).
    static func page(title: String, session: WebSession?, current: String = "", notice: String? = nil, body: String) -> String {
        var navigation = ""
        if let session {
            let links = sections.map { section in
                section.path == current
                    ? "<li><a href=\"\(section.path)\" aria-current=\"page\">\(section.name)</a></li>"
                    : "<li><a href=\"\(section.path)\">\(section.name)</a></li>"
            }.joined()
            navigation = """
                <header><nav aria-label="Sections"><ul>\(links)</ul></nav>
                <p class="ledger">Ledger <strong>\(escape(session.ledger))</strong></p>
                \(form(action: "/sign-out", session: session, button: "Sign out"))</header>
                """
        }
        let noticeHTML = notice.map { "<p class=\"notice\" role=\"status\">\(escape($0))</p>" } ?? ""
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · HealthLedger</title>
            <link rel="stylesheet" href="/app.css">
            <script src="/app.js" defer></script>
            </head>
            <body>
            \(navigation)
            <main>
            <h1>\(escape(title))</h1>
            \(noticeHTML)
            \(body)
            </main>
            </body>
            </html>
            """
    }

    /// A form that posts `fields` (and the session's CSRF token) to `action` with one button.
    static func form(action: String, session: WebSession, fields: [(String, String)] = [], button: String, label: String? = nil, style: String = "") -> String {
        let hidden = ([("csrf", session.csrfToken)] + fields).map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }.joined()
        let aria = label.map { " aria-label=\"\(escape($0))\"" } ?? ""
        let classes = style.isEmpty ? "" : " class=\"\(style)\""
        return "<form method=\"post\" action=\"\(escape(action))\">\(hidden)<button type=\"submit\"\(classes)\(aria)>\(escape(button))</button></form>"
    }

    /// A bar chart: one bar per value, labelled, with a text alternative for screen readers.
    static func barChart(id: String, caption: String, bars: [(label: String, value: Double)], unit: String) -> String {
        let width = 640.0
        let height = 160.0
        let maximum = max(bars.map(\.value).max() ?? 0, 1)
        let slot = width / Double(max(bars.count, 1))
        let rects = bars.enumerated().map { index, bar in
            let barHeight = bar.value / maximum * (height - 20)
            let x = Double(index) * slot + slot * 0.15
            return """
                <rect class="bar" x="\(format(x))" y="\(format(height - barHeight))" width="\(format(slot * 0.7))" height="\(format(barHeight))"><title>\(escape(bar.label)): \(escape(number(bar.value))) \(escape(unit))</title></rect>
                """
        }.joined()
        let summary = bars.map { "\($0.label): \(number($0.value)) \(unit)" }.joined(separator: "; ")
        return """
            <figure id="\(escape(id))">
            <svg class="chart" viewBox="0 0 \(format(width)) \(format(height))" role="img" aria-label="\(escape(caption)). \(escape(summary))">\(rects)</svg>
            <figcaption>\(escape(caption))</figcaption>
            </figure>
            """
    }

    /// A range chart: one vertical bar from each interval's lowest to its highest value.
    static func rangeChart(id: String, caption: String, ranges: [(label: String, low: Double, high: Double)], unit: String) -> String {
        let width = 640.0
        let height = 160.0
        let top = ranges.map(\.high).max() ?? 1
        let bottom = min(ranges.map(\.low).min() ?? 0, top - 1)
        let slot = width / Double(max(ranges.count, 1))
        func y(_ value: Double) -> Double { 10 + (top - value) / (top - bottom) * (height - 20) }
        let rects = ranges.enumerated().map { index, range in
            """
            <rect class="range" x="\(format(Double(index) * slot + slot * 0.3))" y="\(format(y(range.high)))" width="\(format(slot * 0.4))" height="\(format(max(y(range.low) - y(range.high), 2)))"><title>\(escape(range.label)): \(escape(number(range.low)))–\(escape(number(range.high))) \(escape(unit))</title></rect>
            """
        }.joined()
        let summary = ranges.map { "\($0.label): \(number($0.low)) to \(number($0.high)) \(unit)" }.joined(separator: "; ")
        return """
            <figure id="\(escape(id))">
            <svg class="chart" viewBox="0 0 \(format(width)) \(format(height))" role="img" aria-label="\(escape(caption)). \(escape(summary))">\(rects)</svg>
            <figcaption>\(escape(caption))</figcaption>
            </figure>
            """
    }

    static func number(_ value: Double) -> String {
        value.rounded() == value || abs(value) >= 100 ? String(format: "%.0f", value) : String(format: "%.1f", value)
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    /// The style sheet: readable on a phone's width, visible focus, system fonts only.
    static let styleSheet = """
        :root { color-scheme: light dark; font-family: system-ui, sans-serif; line-height: 1.45; }
        body { margin: 0 auto; max-width: 60rem; padding: 0 1rem 3rem; }
        header { display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem 1.5rem; padding: 0.75rem 0; border-bottom: 1px solid #8884; }
        nav ul { display: flex; gap: 1rem; list-style: none; margin: 0; padding: 0; }
        nav a[aria-current="page"] { font-weight: bold; text-decoration: underline; }
        .ledger { margin: 0; }
        header form { margin-left: auto; }
        a:focus, button:focus, input:focus, textarea:focus { outline: 3px solid #2a7ae2; outline-offset: 2px; }
        button { font: inherit; padding: 0.3rem 0.8rem; cursor: pointer; }
        .grant { background: #1f7a3a; color: white; border: none; border-radius: 4px; }
        .deny { background: #a12d2d; color: white; border: none; border-radius: 4px; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: 0.35rem 0.5rem; border-bottom: 1px solid #8883; vertical-align: top; }
        td form { display: inline; }
        figure { margin: 0.5rem 0 1rem; }
        .chart { display: block; width: 100%; height: auto; }
        .scroll { overflow-x: auto; }
        .bar { fill: #2a7ae2; }
        .range { fill: #c0392b; }
        .notice { padding: 0.5rem 0.75rem; border-left: 4px solid #2a7ae2; background: #2a7ae21a; }
        .error { padding: 0.5rem 0.75rem; border-left: 4px solid #a12d2d; background: #a12d2d1a; }
        .cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(17rem, 1fr)); gap: 1rem; }
        section.card { border: 1px solid #8884; border-radius: 6px; padding: 0 1rem 1rem; }
        #history li { margin: 0.25rem 0; }
        time { color: #666; }
        label { display: block; margin: 0.5rem 0 0.25rem; }
        .picker { display: flex; flex-wrap: wrap; align-items: end; gap: 0.5rem 1rem; }
        .picker label { margin: 0; }
        select { font: inherit; padding: 0.25rem; max-width: 100%; }
        .priority li { margin: 0.3rem 0; }
        .priority form { display: inline; }
        .chooser ul { list-style: none; padding: 0; }
        fieldset { border: 1px solid #8884; margin: 0 0 0.5rem; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
        input[type=password], input:not([type]) { width: 100%; max-width: 36rem; font: inherit; padding: 0.3rem; }
        """

    /// The script: History's live updates, from the server's event stream (same origin), and
    /// the import's upload with its progress.
    static let script = """
        "use strict";
        document.addEventListener("DOMContentLoaded", () => {
          const link = document.getElementById("link-sign-in");
          if (link) {
            const credential = decodeURIComponent(window.location.hash.slice(1));
            history.replaceState(null, "", window.location.pathname);
            if (credential) {
              document.getElementById("link-credential").value = credential;
              link.submit();
            } else {
              document.getElementById("link-status").textContent = "This link holds no credential: ask for a new one, or sign in on the sign-in page.";
            }
          }
          const form = document.getElementById("import");
          if (form) {
            const bar = document.getElementById("import-progress");
            const status = document.getElementById("import-status");
            form.addEventListener("submit", (event) => {
              event.preventDefault();
              const file = document.getElementById("import-file").files[0];
              if (!file) return;
              const request = new XMLHttpRequest();
              let poll = null;
              request.open("POST", "/data/import");
              request.setRequestHeader("X-CSRF-Token", form.dataset.csrf);
              request.setRequestHeader("Content-Type", "application/octet-stream");
              request.upload.addEventListener("progress", (progress) => {
                if (progress.lengthComputable) { bar.value = progress.loaded / progress.total / 2; status.textContent = "Uploading…"; }
              });
              request.upload.addEventListener("load", () => {
                status.textContent = "Importing…";
                poll = setInterval(() => {
                  fetch("/data/import/progress").then((answer) => answer.json()).then((progress) => {
                    if (progress.running) { bar.value = 0.5 + progress.fraction / 2; status.textContent = "Importing… " + progress.records + " records read"; }
                  }).catch(() => {});
                }, 500);
              });
              request.addEventListener("loadend", () => {
                if (poll) clearInterval(poll);
                let answer = {};
                try { answer = JSON.parse(request.responseText); } catch (error) { answer = { error: "the server answered " + request.status }; }
                if (request.status === 200) {
                  bar.value = 1;
                  status.textContent = "Imported " + answer.imported + " records (" + answer.alreadyPresent + " already there, " + answer.skipped + " skipped, " + answer.rejected + " rejected)." + (answer.error ? " " + answer.error : "");
                } else {
                  status.textContent = "Not imported: " + (answer.error || ("the server answered " + request.status));
                }
              });
              request.send(file);
            });
          }
          const list = document.getElementById("history");
          if (!list || !window.EventSource) return;
          const source = new EventSource("/history/live?after=" + encodeURIComponent(list.dataset.after || "0"));
          source.addEventListener("line", (event) => {
            const line = JSON.parse(event.data);
            const item = document.createElement("li");
            const time = document.createElement("time");
            time.dateTime = line.time;
            time.textContent = line.time;
            item.append(time, " ", line.sentence);
            item.dataset.sequence = String(line.sequence);
            list.prepend(item);
            const status = document.getElementById("history-status");
            if (status) status.textContent = "Updated live: " + line.sentence;
          });
        });
        """
}
