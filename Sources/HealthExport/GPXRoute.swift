import Foundation
import HealthModel

/// GPX 1.1 route files as the Health app writes them (`workout-routes/*.gpx`): one track of
/// `trkpt` elements, each with `ele`, `time` and the `speed`, `course`, `hAcc` and `vAcc`
/// extensions.
public enum GPXRoute {
    /// The locations of a GPX file, in file order.
    /// - Throws: ``XMLStreamError`` for a file that is not XML, ``ExportArchiveError`` for a
    ///   point without a valid position or time.
    public static func locations(_ data: Data) throws -> [RouteLocation] {
        let reader = PointReader()
        let parser = XMLStreamParser(handler: reader, documentName: "route.gpx")
        try data.withUnsafeBytes { try parser.feed($0) }
        try parser.finish()
        if let problem = reader.problem { throw ExportArchiveError(problem) }
        return reader.locations
    }

    /// A GPX file of `locations`, readable by ``locations(_:)`` and by the usual GPX tools.
    public static func document(_ locations: [RouteLocation], name: String) -> String {
        var text = """
            <?xml version="1.0" encoding="UTF-8"?>
            <gpx version="1.1" creator="HealthLedger" xmlns="http://www.topografix.com/GPX/1/1" \
            xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" \
            xsi:schemaLocation="http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd">
             <metadata><time>\(iso(locations.first?.timestamp ?? Date(timeIntervalSince1970: 0)))</time></metadata>
             <trk>
              <name>\(AppleHealthValues.escape(name))</name>
              <trkseg>

            """
        for location in locations {
            text += "   <trkpt lon=\"\(location.longitude)\" lat=\"\(location.latitude)\"><ele>\(location.altitude)</ele>"
            text += "<time>\(iso(location.timestamp))</time><extensions><speed>\(location.speed)</speed><course>\(location.course)</course>"
            text += "<hAcc>\(location.horizontalAccuracy)</hAcc><vAcc>\(location.verticalAccuracy)</vAcc></extensions></trkpt>\n"
        }
        text += "  </trkseg>\n </trk>\n</gpx>\n"
        return text
    }

    private static func iso(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    static func parseTime(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let date = try? Date(trimmed, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true)) { return date }
        if let date = try? Date(trimmed, strategy: .iso8601) { return date }
        return nil
    }
}

private final class PointReader: XMLStreamHandler {
    var locations: [RouteLocation] = []
    var problem: String?
    private var point: (latitude: Double, longitude: Double, line: Int)?
    private var fields: [String: String] = [:]
    private var text: [UInt8] = []
    private var collecting = false

    func startElement(_ name: String, attributes: [XMLAttribute], line: Int) {
        if name == "trkpt" {
            let latitude = attributes.first { $0.name == "lat" }.flatMap { Double($0.value) }
            let longitude = attributes.first { $0.name == "lon" }.flatMap { Double($0.value) }
            guard let latitude, let longitude else {
                if problem == nil { problem = "line \(line): a track point has no valid lat and lon" }
                return
            }
            point = (latitude, longitude, line)
            fields = [:]
        } else if point != nil, ["ele", "time", "speed", "course", "hAcc", "vAcc"].contains(name) {
            collecting = true
            text = []
        }
    }

    func characters(_ text: UnsafeBufferPointer<UInt8>) {
        if collecting { self.text.append(contentsOf: text) }
    }

    func endElement(_ name: String) {
        if collecting {
            fields[name] = String(decoding: text, as: UTF8.self)
            collecting = false
            return
        }
        guard name == "trkpt", let current = point else { return }
        point = nil
        guard let time = fields["time"].flatMap(GPXRoute.parseTime) else {
            if problem == nil { problem = "line \(current.line): a track point has no valid time" }
            return
        }
        func number(_ key: String, _ fallback: Double) -> Double {
            fields[key].flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? fallback
        }
        locations.append(RouteLocation(
            timestamp: time, latitude: current.latitude, longitude: current.longitude, altitude: number("ele", 0),
            horizontalAccuracy: number("hAcc", -1), verticalAccuracy: number("vAcc", -1), course: number("course", -1),
            speed: number("speed", -1)))
    }
}
