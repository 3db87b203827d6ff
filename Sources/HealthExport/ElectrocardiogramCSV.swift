import Foundation
import HealthModel
import LedgerSchema
import SwiftProtobuf

/// The Health app's electrocardiogram files, `electrocardiograms/ecg_….csv` beside
/// `export.xml`: a header of `key,value` lines (`Recorded Date`, `Classification`, `Symptoms`,
/// `Software Version`, `Device`, `Sample Rate`, `Lead`, `Unit`; the person's name and date of
/// birth too, which are not kept), then lead I's voltages in µV, one a line.
///
/// HealthLedger's exports write the same, with `Source`, `Average Heart Rate` and `Metadata` lines
/// the Health app's lack (the metadata as the `HealthObject` message's JSON, `{"metadata":[…]}`, on
/// one line, so that the sync identifier travels).
public enum ElectrocardiogramCSV {
    /// The source a recording is imported from when its file names none: the ECG app.
    public static let defaultSource = "ECG"

    /// The recording a file holds (its sync identifier not yet set).
    /// - Throws: a message naming what is wrong.
    public static func read(_ data: Data) throws(ReadFailure) -> Electrocardiogram {
        guard let text = String(data: data, encoding: .utf8) else { throw ReadFailure("the file is not UTF-8 text") }
        var header: [String: String] = [:]
        var voltages: [Float] = []
        voltages.reserveCapacity(16_384)
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            if let value = Float(line) {
                guard voltages.count < Electrocardiogram.maximumVoltages else {
                    throw ReadFailure("it holds more than \(Electrocardiogram.maximumVoltages) measurements")
                }
                voltages.append(value)
                continue
            }
            guard voltages.isEmpty else { throw ReadFailure("'\(line.prefix(40))' among the voltages is not a number") }
            guard let comma = line.firstIndex(of: ",") else { continue }
            var value = line[line.index(after: comma)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            header[String(line[..<comma])] = value
        }
        guard let recorded = header["Recorded Date"].flatMap(AppleHealthValues.date) else {
            throw ReadFailure("its Recorded Date is missing or not a date")
        }
        guard let rateText = header["Sample Rate"], let hertz = Double(rateText.split(separator: " ").first ?? ""), hertz > 0 else {
            throw ReadFailure("its Sample Rate ('\(header["Sample Rate"] ?? "")') is not a number of hertz")
        }
        if let unit = header["Unit"], !["µV", "uV", "μV"].contains(unit) { throw ReadFailure("its Unit is '\(unit)', not µV") }
        guard !voltages.isEmpty else { throw ReadFailure("it holds no voltages") }
        let symptoms = header["Symptoms"] ?? ""
        let averageRate = header["Average Heart Rate"].flatMap { Double($0.split(separator: " ").first ?? "") }
        let device = header["Device"].flatMap { $0.isEmpty ? nil : Device(model: "Watch", hardwareVersion: $0) }
        let version = header["Software Version"].flatMap { $0.isEmpty ? nil : $0 }
        let source = Source.imported(named: header["Source"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultSource)
        var metadata: Metadata = [:]
        if let json = header["Metadata"], !json.isEmpty {
            do { metadata = try Healthledger_V1_HealthObject(jsonString: json).metadata.model() } catch {
                throw ReadFailure("its Metadata line is not a HealthObject's metadata in JSON: \(error)")
            }
        }
        return Electrocardiogram(
            classification: classification(header["Classification"] ?? ""),
            symptomsStatus: symptoms.isEmpty ? .notSet : symptoms.lowercased() == "none" ? .none : .present,
            averageHeartRate: averageRate.map { Quantity($0, try! HealthUnit("count/min")) }, samplingFrequency: Quantity(hertz, .hertz),
            voltages: voltages, start: recorded, end: recorded.addingTimeInterval(Double(voltages.count) / hertz), device: device,
            metadata: metadata, sourceRevision: SourceRevision(source: source, version: version))
    }

    /// The file of `recording`, as the Health app writes one.
    public static func write(_ recording: Electrocardiogram) -> String {
        var lines = [
            "Name,", "Date of Birth,", "Recorded Date,\(AppleHealthValues.string(recording.startDate))",
            "Classification,\(classificationNames[recording.classification] ?? "")",
            "Symptoms,\(recording.symptomsStatus == .present ? "Present" : recording.symptomsStatus == .none ? "None" : "")",
            "Software Version,\(recording.sourceRevision.version ?? "")",
            "Device,\"\(recording.device?.hardwareVersion ?? recording.device?.model ?? "")\"",
            "Sample Rate,\(AppleHealthValues.number((try? recording.samplingFrequency.doubleValue(for: .hertz)) ?? 0)) hertz",
            "Source,\(recording.sourceRevision.source.name)",
        ]
        if let rate = recording.averageHeartRate, let perMinute = try? rate.doubleValue(for: HealthUnit("count/min")) {
            lines.append("Average Heart Rate,\(AppleHealthValues.number(perMinute)) count/min")
        }
        if !recording.metadata.isEmpty, let json = try? Healthledger_V1_HealthObject.with({ $0.metadata = .init(recording.metadata) }).jsonString() {
            lines.append("Metadata,\(json)")
        }
        lines += ["", "Lead,Lead I", "Unit,µV", ""]
        // The shortest text that reads back as the same Float.
        lines += recording.voltages.map { "\($0)" }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The Health app's names of the classifications.
    static let classificationNames: [ElectrocardiogramClassification: String] = [
        .sinusRhythm: "Sinus Rhythm", .atrialFibrillation: "Atrial Fibrillation", .inconclusiveLowHeartRate: "Heart Rate Under 50",
        .inconclusiveHighHeartRate: "Heart Rate Over 150", .inconclusivePoorReading: "Poor Recording", .inconclusiveOther: "Inconclusive",
        .unrecognized: "Unrecognized",
    ]

    /// A classification from the Health app's words (older and newer ones).
    static func classification(_ text: String) -> ElectrocardiogramClassification {
        let words = text.lowercased()
        if words.isEmpty || words == "not set" { return .notSet }
        if words.contains("sinus") { return .sinusRhythm }
        if words.contains("fibrillation") { return .atrialFibrillation }
        if words.contains("under") || words.contains("below") || words.contains("low heart") { return .inconclusiveLowHeartRate }
        if words.contains("over") || words.contains("above") || words.contains("high heart") { return .inconclusiveHighHeartRate }
        if words.contains("poor") { return .inconclusivePoorReading }
        if words.contains("inconclusive") { return .inconclusiveOther }
        return .unrecognized
    }

    /// Why a file is not a recording.
    public struct ReadFailure: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}
