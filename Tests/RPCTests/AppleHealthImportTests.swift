import Crypto
import Foundation
import HealthExport
import HealthLedgerSDK
import Ledger
import TestSupport
import Testing
import ZIPFoundation

/// `healthledger import apple-health` against a real server: every element kind, unit and
/// date form, metadata kind and bad record of an export.
@Suite("Apple Health import", .timeLimit(.minutes(3)))
struct AppleHealthImportTests {
    static let watch = "Alice’s Apple Watch"
    static let device = "&lt;&lt;HKDevice: 0x283c74a50&gt;, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:9.4&gt;"

    /// An export covering what the importer reads, and one bad record of each kind.
    static let exportXML = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE HealthData [
        <!-- HealthKit Export Version: 14 -->
        <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
        <!ATTLIST HealthData locale CDATA #REQUIRED>
        <!ELEMENT ExportDate EMPTY>
        <!ATTLIST ExportDate value CDATA #REQUIRED>
        ]>
        <HealthData locale="en_GB">
         <ExportDate value="2025-06-01 10:00:00 +0100"/>
         <Me HKCharacteristicTypeIdentifierDateOfBirth="1980-05-17" HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexFemale" HKCharacteristicTypeIdentifierBloodType="HKBloodTypeAPositive" HKCharacteristicTypeIdentifierFitzpatrickSkinType="HKFitzpatrickSkinTypeNotSet" HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse="BetaBlocker"/>
         <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="\(watch)" sourceVersion="9.4" device="\(device)" unit="count/min" creationDate="2025-05-18 12:31:00 +0100" startDate="2025-05-18 12:05:00 +0100" endDate="2025-05-18 12:05:00 +0100" value="72">
          <MetadataEntry key="HKMetadataKeyHeartRateMotionContext" value="1"/>
          <MetadataEntry key="HKMetadataKeyTimeZone" value="Europe/London"/>
          <MetadataEntry key="Recorded" value="2025-05-18 12:05:00 +0100"/>
          <MetadataEntry key="HKAverageMETs" value="5.4321 kcal/hr·kg"/>
          <MetadataEntry key="note" value="after coffee"/>
         </Record>
         <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="\(watch)" unit="count/min" startDate="2025-05-18 12:20:00 -0400" endDate="2025-05-18 12:20:00 -0400" value="140"/>
         <Record type="HKQuantityTypeIdentifierBloodGlucose" sourceName="Contour" unit="mmol&lt;180.1558800000541&gt;/L" startDate="2025-05-18 07:00:00 +0100" endDate="2025-05-18 07:00:00 +0100" value="5.4"/>
         <Record type="HKQuantityTypeIdentifierActiveEnergyBurned" sourceName="\(watch)" unit="Cal" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:10:00 +0100" value="80"/>
         <Record type="HKQuantityTypeIdentifierOxygenSaturation" sourceName="\(watch)" unit="%" startDate="2025-05-18 03:00:00 +0100" endDate="2025-05-18 03:00:00 +0100" value="0.97"/>
         <Record type="HKQuantityTypeIdentifierHeartRateVariabilitySDNN" sourceName="\(watch)" unit="ms" startDate="2025-05-18 03:00:00 +0100" endDate="2025-05-18 03:01:00 +0100" value="48.5">
          <HeartRateVariabilityMetadataList>
           <InstantaneousBeatsPerMinute bpm="70" time="3:00:01.25 am"/>
           <InstantaneousBeatsPerMinute bpm="71" time="3:00:02.10 AM"/>
           <InstantaneousBeatsPerMinute bpm="72" time="3:01:00.90\u{202F}AM"/>
          </HeartRateVariabilityMetadataList>
         </Record>
         <Record type="HKQuantityTypeIdentifierEnvironmentalAudioExposure" sourceName="\(watch)" unit="dBASPL" startDate="2025-05-18 09:00:00 +0100" endDate="2025-05-18 09:30:00 +0100" value="61.2"/>
         <Record type="HKQuantityTypeIdentifierBodyTemperature" sourceName="Thermometer" unit="degF" startDate="2025-05-18 06:00:00 +0100" endDate="2025-05-18 06:00:00 +0100" value="98.6"/>
         <Record type="HKQuantityTypeIdentifierBloodPressureSystolic" sourceName="Omron" unit="mmHg" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100" value="120"/>
         <Record type="HKQuantityTypeIdentifierBloodPressureDiastolic" sourceName="Omron" unit="mmHg" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100" value="80"/>
         <Record type="HKQuantityTypeIdentifierDietaryEnergyConsumed" sourceName="Food Log" unit="kcal" startDate="2025-05-18 13:00:00 +0100" endDate="2025-05-18 13:00:00 +0100" value="95"/>
         <Record type="HKQuantityTypeIdentifierDietaryEnergyConsumed" sourceName="Food Log" unit="kcal" startDate="2025-05-18 16:00:00 +0100" endDate="2025-05-18 16:00:00 +0100" value="30"/>
         <Record type="HKCategoryTypeIdentifierSleepAnalysis" sourceName="\(watch)" startDate="2025-05-18 01:00:00 +0100" endDate="2025-05-18 02:00:00 +0100" value="HKCategoryValueSleepAnalysisAsleepREM"/>
         <Record type="HKCategoryTypeIdentifierSleepAnalysis" sourceName="\(watch)" startDate="2025-05-18 00:30:00 +0100" endDate="2025-05-18 06:00:00 +0100" value="HKCategoryValueSleepAnalysisInBed"/>
         <Record type="HKDataTypeSleepDurationGoal" sourceName="Health" sourceVersion="17.4" unit="hr" creationDate="2025-05-01 21:00:00 +0100" startDate="2025-05-01 21:00:00 +0100" endDate="2025-05-01 21:00:00 +0100" value="7.5"/>
         <Record type="HKQuantityTypeIdentifierMadeUp" sourceName="X" unit="count" startDate="2025-05-18 01:00:00 +0100" endDate="2025-05-18 02:00:00 +0100" value="1"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="X" unit="count" startDate="2025-05-18 01:00:00 +0100" endDate="2025-05-18 02:00:00 +0100" value="many"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="X" unit="kg" startDate="2025-05-18 01:00:00 +0100" endDate="2025-05-18 02:00:00 +0100" value="1"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="X" unit="count" startDate="2025-05-18 03:00:00 +0100" endDate="2025-05-18 02:00:00 +0100" value="1"/>
         <Record type="HKQuantityTypeIdentifierStepCount" sourceName="X" unit="count" startDate="18/05/2025" endDate="2025-05-18 02:00:00 +0100" value="1"/>
         <Correlation type="HKCorrelationTypeIdentifierBloodPressure" sourceName="Omron" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100">
          <MetadataEntry key="HKWasUserEntered" value="1"/>
          <Record type="HKQuantityTypeIdentifierBloodPressureSystolic" sourceName="Omron" unit="mmHg" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100" value="120"/>
          <Record type="HKQuantityTypeIdentifierBloodPressureDiastolic" sourceName="Omron" unit="mmHg" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:00:00 +0100" value="80"/>
         </Correlation>
         <Correlation type="HKCorrelationTypeIdentifierFood" sourceName="Food Log" startDate="2025-05-18 13:00:00 +0100" endDate="2025-05-18 13:00:00 +0100">
          <MetadataEntry key="HKFoodType" value="Apple"/>
          <Record type="HKQuantityTypeIdentifierDietaryEnergyConsumed" sourceName="Food Log" unit="kcal" startDate="2025-05-18 13:00:00 +0100" endDate="2025-05-18 13:00:00 +0100" value="95"/>
         </Correlation>
         <Workout workoutActivityType="HKWorkoutActivityTypeRunning" duration="30" durationUnit="min" sourceName="\(watch)" device="\(device)" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:30:00 +0100">
          <MetadataEntry key="HKIndoorWorkout" value="0"/>
          <WorkoutEvent type="HKWorkoutEventTypePause" date="2025-05-18 12:10:00 +0100"/>
          <WorkoutEvent type="HKWorkoutEventTypeResume" date="2025-05-18 12:11:00 +0100"/>
          <WorkoutActivity uuid="0A1B2C3D-0000-4000-8000-000000000001" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:30:00 +0100" duration="30" durationUnit="min"/>
          <WorkoutStatistics type="HKQuantityTypeIdentifierHeartRate" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:30:00 +0100" average="72" minimum="72" maximum="72" unit="count/min"/>
          <WorkoutStatistics type="HKQuantityTypeIdentifierActiveEnergyBurned" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:30:00 +0100" sum="80" unit="Cal"/>
          <WorkoutRoute sourceName="\(watch)" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:30:00 +0100">
           <MetadataEntry key="HKMetadataKeySyncIdentifier" value="ROUTE-1"/>
           <MetadataEntry key="HKMetadataKeySyncVersion" value="2"/>
           <FileReference path="/workout-routes/route_2025-05-18_12.00pm.gpx"/>
          </WorkoutRoute>
         </Workout>
         <VisionPrescription type="glasses" dateIssued="2025-01-10 09:00:00 +0000" expirationDate="2027-01-10 09:00:00 +0000" brand="Acme">
          <RightEye sphere="-1.25" sphereUnit="D" cylinder="-0.5" cylinderUnit="D" axis="90" axisUnit="deg"/>
          <LeftEye sphere="-1" sphereUnit="D"/>
          <Attachment identifier="scan-1"/>
         </VisionPrescription>
         <ActivitySummary dateComponents="2025-05-18" activeEnergyBurned="500"/>
         <ClinicalRecord type="HKClinicalTypeIdentifierLabResultRecord" identifier="x" sourceName="Hospital" sourceURL="https://example.org" fhirVersion="4.0.1" receivedDate="2025-05-18 08:00:00 +0100" resourceFilePath="/clinical-records/x.json"/>
         <Audiogram type="HKDataTypeIdentifierAudiogram" sourceName="Hearing" startDate="2025-05-18 08:00:00 +0100" endDate="2025-05-18 08:10:00 +0100">
          <SensitivityPoint frequencyValue="4000" frequencyUnit="Hz" leftEarValue="25" leftEarUnit="dBHL" rightEarValue="15" rightEarUnit="dBHL"/>
          <SensitivityPoint frequencyValue="500" frequencyUnit="Hz" leftEarValue="10" leftEarUnit="dBHL" rightEarValue="5" rightEarUnit="dBHL" rightEarMasked="true"/>
          <SensitivityPoint frequencyValue="1000" leftEarValue="5"/>
         </Audiogram>
        </HealthData>

        """

    /// The FHIR resource of the export's clinical record, as a hospital sends it (kept byte for byte).
    static let labResult = """
        {"resourceType":"Observation","id":"x","status":"final",
         "code":{"coding":[{"system":"http://loinc.org","code":"4548-4","display":"Hemoglobin A1c"}]},
         "valueQuantity":{"value":5.4,"unit":"%"},"effectiveDateTime":"2025-05-17"}
        """

    /// A recording as the Health app writes one: a header, then 1,536 voltages (3 s at 512 Hz).
    static let electrocardiogram = """
        Name,Alice Example
        Date of Birth,"May 17, 1980"
        Recorded Date,2025-05-18 09:30:00 +0100
        Classification,Sinus Rhythm
        Symptoms,
        Software Version,1.90
        Device,"Watch6,7"
        Sample Rate,512 hertz


        Lead,Lead I
        Unit,µV


        """ + (0..<1_536).map { String(format: "%.3f", 60 * sin(Double($0) / 512 * 2 * .pi)) }.joined(separator: "\n") + "\n"

    /// Three points, the last two written out of time order, to show that the route keeps
    /// time order.
    static let gpx = """
        <?xml version="1.0" encoding="UTF-8"?>
        <gpx version="1.1" creator="Apple Health Export" xmlns="http://www.topografix.com/GPX/1/1">
         <trk><name>Route</name><trkseg>
          <trkpt lon="-0.1000" lat="51.5000"><ele>10.5</ele><time>2025-05-18T11:00:00Z</time><extensions><speed>3.1</speed><course>90</course><hAcc>5</hAcc><vAcc>3</vAcc></extensions></trkpt>
          <trkpt lon="-0.1002" lat="51.5002"><ele>10.9</ele><time>2025-05-18T11:00:10Z</time><extensions><speed>3.3</speed><course>92</course><hAcc>5</hAcc><vAcc>3</vAcc></extensions></trkpt>
          <trkpt lon="-0.1001" lat="51.5001"><ele>10.7</ele><time>2025-05-18T11:00:05Z</time><extensions><speed>3.2</speed><course>91</course><hAcc>5</hAcc><vAcc>3</vAcc></extensions></trkpt>
         </trkseg></trk>
        </gpx>

        """

    @Test("SourcePriority elements (HealthLedger's exports) are read in order as import sources; an unknown type or a missing source name is rejected with its line; an attribute's & is read as written")
    func sourcePriorityElements() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <SourcePriority type="HKQuantityTypeIdentifierStepCount" sourceName="Watch"/>
             <SourcePriority type="HKQuantityTypeIdentifierStepCount" sourceName="Alice’s &amp; Bob’s Phone"/>
             <SourcePriority type="HKQuantityTypeIdentifierNoSuchThing" sourceName="Phone"/>
             <SourcePriority type="HKQuantityTypeIdentifierStepCount"/>
             <Record type="HKQuantityTypeIdentifierDietaryEnergyConsumed" sourceName="Tom &amp; Jerry" unit="kcal" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:00:00 +0100" value="500">
              <MetadataEntry key="HKFoodType" value="Mac &amp; Cheese, &#38; &amp;#38; &lt;3"/>
             </Record>
            </HealthData>
            """
        var ranked: [String] = []
        var rejected: [String] = []
        for item in try Self.read(xml) {
            switch item {
            case .sourcePriority(let type, let source, _): ranked.append("\(type.identifier) \(source.bundleIdentifier)")
            case .rejected(let element, let kind, _, let line): rejected.append("\(line) \(element) \(kind.rawValue)")
            case .sample(let object, _, _, _):
                // Every `&` of an attribute as written (libxml2 hands it on as `&#38;`).
                let sample = try #require(object.quantitySample)
                #expect(sample.sourceRevision.source.name == "Tom & Jerry")
                #expect(sample.metadata[MetadataKey.foodType] == .string("Mac & Cheese, & &#38; <3"))
            default: Issue.record("unexpected \(item)")
            }
        }
        #expect(ranked == [
            "HKQuantityTypeIdentifierStepCount \(Source.imported(named: "Watch").bundleIdentifier)",
            "HKQuantityTypeIdentifierStepCount \(Source.imported(named: "Alice’s & Bob’s Phone").bundleIdentifier)",
        ])
        #expect(rejected == ["5 SourcePriority unknown type", "6 SourcePriority invalid object"])
    }

    @Test("a record with no value of a type whose only value is not-applicable (Apple's mindful sessions) is read as HealthKit reads it; one of another category type is still rejected")
    func recordsWithoutValue() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <Record type="HKCategoryTypeIdentifierMindfulSession" sourceName="Breathe" startDate="2025-05-18 07:00:00 +0100" endDate="2025-05-18 07:05:00 +0100"/>
             <Record type="HKCategoryTypeIdentifierSleepAnalysis" sourceName="Watch" startDate="2025-05-18 01:00:00 +0100" endDate="2025-05-18 02:00:00 +0100"/>
            </HealthData>
            """
        let items = try Self.read(xml)
        #expect(items.count == 2)
        guard case .sample(let object, _, _, _) = items.first, let session = object.categorySample else {
            Issue.record("the mindful session was not read: \(items)")
            return
        }
        #expect(session.type.identifier == "HKCategoryTypeIdentifierMindfulSession" && session.value == 0)
        #expect(session.endDate.timeIntervalSince(session.startDate) == 300)
        guard case .rejected(_, let kind, let reason, let line) = items.last else {
            Issue.record("a sleep record without a value was not rejected: \(items)")
            return
        }
        #expect(kind == .unparsableValue && line == 4 && reason.contains("HKCategoryTypeIdentifierSleepAnalysis: '' is not one of its values"), "\(reason)")
    }

    @Test("a value written other than in decimal (hexadecimal, nan, inf), which Apple's exports never hold, is rejected as not a number with its line")
    func decimalValuesOnly() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:01:00 +0000" value="0x1p6"/>
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" startDate="2025-05-18 12:01:00 +0000" endDate="2025-05-18 12:02:00 +0000" value="inf"/>
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" startDate="2025-05-18 12:02:00 +0000" endDate="2025-05-18 12:03:00 +0000" value="6.4e1">
              <MetadataEntry key="chip" value="0x1F"/>
              <MetadataEntry key="cadence" value="1.5e2"/>
             </Record>
            </HealthData>
            """
        let items = try Self.read(xml)
        let rejected = items.compactMap { item -> (String, Int)? in
            if case .rejected(_, .unparsableValue, let reason, let line) = item { (reason, line) } else { nil }
        }
        #expect(rejected.map(\.1) == [3, 4] && rejected[0].0.contains("'0x1p6' is not a number"), "\(rejected)")
        let steps = items.compactMap { item -> Double? in if case .sample(let object, _, _, _) = item { object.quantitySample?.quantity.value } else { nil } }
        #expect(steps == [64])
        // A metadata value in hexadecimal is a string, as written; a decimal one a number.
        let metadata = items.compactMap { item -> Metadata? in if case .sample(let object, _, _, _) = item { object.quantitySample?.metadata } else { nil } }.first
        #expect(metadata?["chip"] == .string("0x1F") && metadata?["cadence"] == .number(150), "\(String(describing: metadata))")
    }

    @Test("heartbeat lists are read as heartbeat series: times of day in the start's local time, either clock, past midnight, to the last beat; this format's gaps, metadata and series of their own; bad lists rejected with their line")
    func heartbeatLists() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="de_DE">
             <Record type="HKQuantityTypeIdentifierHeartRateVariabilitySDNN" sourceName="Uhr" unit="ms" startDate="2025-05-18 23:59:58 +0200" endDate="2025-05-19 00:00:30 +0200" value="40">
              <HeartRateVariabilityMetadataList>
               <InstantaneousBeatsPerMinute bpm="60" time="23:59:57,99"/>
               <InstantaneousBeatsPerMinute bpm="60" time="23:59:59,5"/>
               <InstantaneousBeatsPerMinute bpm="61" time="0:00:00,25"/>
              </HeartRateVariabilityMetadataList>
             </Record>
             <Record type="HKDataTypeIdentifierHeartbeatSeries" sourceName="Strap" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:00:10 +0000">
              <HeartRateVariabilityMetadataList>
               <MetadataEntry key="HKMetadataKeySyncIdentifier" value="strap-1"/>
               <MetadataEntry key="HKMetadataKeySyncVersion" value="3"/>
               <InstantaneousBeatsPerMinute time="12:00:00.000001 PM"/>
               <InstantaneousBeatsPerMinute time="12:00:05.5 p.m." precededByGap="1"/>
              </HeartRateVariabilityMetadataList>
             </Record>
             <Record type="HKQuantityTypeIdentifierHeartRateVariabilitySDNN" sourceName="Uhr" unit="ms" startDate="2025-05-18 08:00:00 +0200" endDate="2025-05-18 08:01:00 +0200" value="40">
              <HeartRateVariabilityMetadataList>
               <InstantaneousBeatsPerMinute bpm="60" time="8:00:01 o'clock"/>
              </HeartRateVariabilityMetadataList>
             </Record>
             <Record type="HKQuantityTypeIdentifierHeartRateVariabilitySDNN" sourceName="Uhr" unit="ms" startDate="2025-05-18 09:00:00 +0200" endDate="2025-05-18 09:01:00 +0200" value="40">
              <HeartRateVariabilityMetadataList>
               <InstantaneousBeatsPerMinute bpm="60" time="9:00:02.00 AM"/>
               <InstantaneousBeatsPerMinute bpm="60" time="9:00:01.00 AM"/>
              </HeartRateVariabilityMetadataList>
             </Record>
             <Record type="HKDataTypeIdentifierHeartbeatSeries" sourceName="Strap" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:00:10 +0000"/>
            </HealthData>
            """
        let items = try Self.read(xml)
        let series = items.compactMap { item -> HeartbeatSeriesSample? in if case .heartbeatSeries(let series, _) = item { series } else { nil } }
        let samples = items.filter { if case .sample = $0 { true } else { false } }
        #expect(series.count == 2 && samples.count == 3, "each HRV record is kept with or without its list")
        let midnight = try #require(series.first)
        #expect(midnight.beats.map(\.timeSinceSeriesStart) == [0, 1.5, 2.25], "a beat within a second before the start is at it; past midnight the next day")
        #expect(midnight.endDate.timeIntervalSince(midnight.startDate) == 32 && midnight.sourceRevision.source == Source.imported(named: "Uhr"))
        let strap = try #require(series.last)
        #expect(strap.beats == [HeartbeatSeriesBeat(timeSinceSeriesStart: 0.000001), HeartbeatSeriesBeat(timeSinceSeriesStart: 5.5, precededByGap: true)])
        #expect(strap.syncIdentifier == "strap-1" && strap.syncVersion == 3 && strap.endDate.timeIntervalSince(strap.startDate) == 10)
        let rejections = items.compactMap { item -> (RejectionKind, String, Int)? in
            if case .rejected(let element, let kind, let reason, let line) = item, element == "HeartRateVariabilityMetadataList" { (kind, reason, line) } else { nil }
        }
        #expect(rejections.map(\.0) == [.unparsableValue, .invalidDate, .invalidObject], "\(rejections)")
        #expect(rejections.map(\.2) == [19, 24, 29], "the list's line, or the record's when it has none")
        #expect(rejections[0].1.contains("line 20") && rejections[0].1.contains("8:00:01 o'clock"), "\(rejections[0].1)")
        #expect(rejections[1].1.contains("past the record's end"), "a time of day before the last beat's is the next day: \(rejections[1].1)")
    }

    @Test("the Me element's cardio fitness medications: None is not set, medications by name in the spellings this reader knows; an unknown one is rejected")
    func cardioFitnessMedications() throws {
        func medications(_ value: String) throws -> [AppleHealthItem] {
            try Self.read("<?xml version=\"1.0\"?>\n<HealthData locale=\"en_US\">\n <Me HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse=\"\(value)\"/>\n</HealthData>")
        }
        #expect(try medications("None").isEmpty, "none taken is not set")
        for text in ["HKCardioFitnessMedicationsUseBetaBlocker, Calcium Channel Blocker", "CalciumChannelBlocker+BetaBlocker", "betaBlocker|calciumChannelBlocker"] {
            guard case .characteristic(.cardioFitnessMedicationsUse(let set), _)? = try medications(text).first else {
                Issue.record("\(text) was not read: \(try medications(text))")
                continue
            }
            #expect(set == [.betaBlocker, .calciumChannelBlocker] && AppleHealthValues.string(set) == "CalciumChannelBlocker, BetaBlocker")
        }
        guard case .rejected(_, .unparsableValue, let reason, 3)? = try medications("Aspirin").first else {
            Issue.record("an unknown medication was not rejected: \(try medications("Aspirin"))")
            return
        }
        #expect(reason.contains("Aspirin"), "\(reason)")
    }

    @Test("QuantitySeriesEntry elements (HealthLedger's exports) make a series sample, to the microsecond, its end the last value's when that is within the second after; a bad one rejects the record with its line")
    func seriesEntries() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Watch" unit="count" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:02:00 +0000" value="30">
              <QuantitySeriesEntry value="10" start="0" end="60"/>
              <QuantitySeriesEntry value="20" start="60.000001" end="120.5"/>
             </Record>
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Watch" unit="count" startDate="2025-05-18 13:00:00 +0000" endDate="2025-05-18 13:02:00 +0000" value="30">
              <QuantitySeriesEntry value="10" start="0" end="-60"/>
             </Record>
            </HealthData>
            """
        let items = try Self.read(xml)
        guard case .sample(.quantitySample(let sample), _, _, _)? = items.first else {
            Issue.record("no sample: \(items)")
            return
        }
        #expect(sample.series.map(\.value) == [10, 20] && (sample.series[1].startDate.timeIntervalSince(sample.startDate) * 1e6).rounded() == 60_000_001)
        #expect(sample.endDate.timeIntervalSince(sample.startDate) == 120.5, "to the last value's end")
        guard case .rejected(_, .unparsableValue, let reason, 7)? = items.last else {
            Issue.record("not rejected: \(items)")
            return
        }
        #expect(reason.contains("line 8") && reason.contains("-60"), "\(reason)")
        #expect(AppleHealthValues.microseconds(seconds: "86400.000001") == 86_400_000_001 && AppleHealthValues.microseconds(seconds: "1.1234567") == nil)
        #expect(AppleHealthValues.seconds(microseconds: 60_500_000) == "60.5" && AppleHealthValues.seconds(microseconds: 7_000_000) == "7")
    }

    @Test("a heartbeat series of its own record comes back from the export's form as it was: a day long, past midnight, with a gap of over twelve hours, to the microsecond")
    func heartbeatRecordRoundTrip() throws {
        let start = Date(timeIntervalSince1970: 1_747_598_400)  // 2025-05-18 20:00:00 UTC
        let series = HeartbeatSeriesSample(
            beats: [0, 0.8, 13 * 3600.0, 13 * 3600 + 0.001001, 86_399.999999].enumerated().map { HeartbeatSeriesBeat(timeSinceSeriesStart: $1, precededByGap: $0 == 2) },
            start: start, end: start.addingTimeInterval(86_400), metadata: ["HKMetadataKeySyncIdentifier": .string("s"), "HKMetadataKeySyncVersion": .number(1)],
            sourceRevision: SourceRevision(source: Source.imported(named: "Strap")))
        let xml = "<?xml version=\"1.0\"?>\n<HealthData locale=\"en_US\">\n" + AppleHealthWriter.heartbeatSeriesRecord(series) + "</HealthData>\n"
        guard case .heartbeatSeries(let read, _)? = try Self.read(xml).first else {
            Issue.record("not read back: \(try Self.read(xml))")
            return
        }
        #expect(read.beats == series.beats && read.startDate == start && read.endDate == series.endDate && read.metadata == series.metadata)
    }

    @Test("a beat's time of day reads in the forms the Health app writes and is written back as it reads")
    func beatTimesOfDay() {
        let cases: [(String, Int64?)] = [
            ("4:17:18.57 PM", 58_638_570_000), ("4:17:18.57 pm", 58_638_570_000), ("4:17:18.57\u{202F}PM", 58_638_570_000),
            ("12:00:00.00 AM", 0), ("12:00:00.5 a.m.", 500_000), ("12:30:00 PM", 45_000_000_000), ("16:17:18,57", 58_638_570_000),
            ("0:00:00", 0), ("23:59:59.999999", 86_399_999_999), ("13:00:00 PM", nil), ("24:00:00", nil), ("4:60:00", nil),
            ("4:17", nil), ("4:17:18.1234567", nil), ("", nil), ("4:17:18.-5", nil), ("٤:17:18", nil), ("-1:00:00", nil), ("+4:17:18", nil),
            ("4:-1:00", nil),
        ]
        for (text, expected) in cases { #expect(AppleHealthValues.timeOfDay(text) == expected, "\(text)") }
        #expect(AppleHealthValues.timeOfDayString(microseconds: 58_638_570_000) == "4:17:18.57 PM")
        #expect(AppleHealthValues.timeOfDayString(microseconds: 500_001) == "12:00:00.500001 AM")
        #expect(AppleHealthValues.timeOfDayString(microseconds: AppleHealthValues.microsecondsPerDay + 43_200_000_000) == "12:00:00.00 PM")
        for micro in [Int64(0), 1, 43_199_999_999, 86_399_990_000] {
            #expect(AppleHealthValues.timeOfDay(AppleHealthValues.timeOfDayString(microseconds: micro)) == micro)
        }
    }

    @Test("ActivitySummary elements are read as days' rings: Apple's units and absent rings as HealthKit reads them, this format's move mode, pause and source; bad ones rejected with their line")
    func activitySummaries() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <ExportDate value="2025-06-01 10:00:00 +0100"/>
             <ActivitySummary dateComponents="2025-05-18" activeEnergyBurned="492.652" activeEnergyBurnedGoal="420" activeEnergyBurnedUnit="Cal" appleMoveTime="0" appleMoveTimeGoal="0" appleExerciseTime="18" appleExerciseTimeGoal="30" appleStandHours="15" appleStandHoursGoal="9"/>
             <ActivitySummary dateComponents="2024-02-29" appleMoveTime="35" appleMoveTimeGoal="30" activityMoveMode="HKActivityMoveModeAppleMoveTime" paused="1" sourceName="Fitness"/>
             <ActivitySummary dateComponents="2025-02-30" activeEnergyBurned="1"/>
             <ActivitySummary dateComponents="2025-05-19" activeEnergyBurned="lots"/>
             <ActivitySummary dateComponents="2025-05-20" activeEnergyBurned="-5"/>
             <ActivitySummary dateComponents="2025-05-21" activeEnergyBurned="5" activeEnergyBurnedUnit="min"/>
            </HealthData>
            """
        let items = try Self.read(xml)
        let summaries = items.compactMap { item -> ActivitySummary? in if case .activitySummary(let summary, _) = item { summary } else { nil } }
        #expect(summaries.count == 2)
        let first = try #require(summaries.first)
        #expect(first.day.description == "2025-05-18" && first.startDate == Date(timeIntervalSince1970: 1_747_526_400), "00:00 UTC of its day")
        #expect(first.endDate.timeIntervalSince(first.startDate) == 86_400)
        #expect(try first.activeEnergyBurned.doubleValue(for: HealthUnit("kcal")) == 492.652 && first.activeEnergyBurnedGoal.value == 420)
        #expect(try first.exerciseTime == Quantity(18, HealthUnit("min")) && first.standHours == Quantity(15, HealthUnit("count")))
        #expect(first.moveMode == .activeEnergy && !first.isPaused && first.sourceRevision.source == Source.imported(named: "Health"))
        #expect(first.syncIdentifier?.hasPrefix("apple-health:01747526400-") == true)
        #expect(first.syncVersion == 1_748_768_400, "the export's date, so that a later export's day replaces it")
        let second = try #require(summaries.last)
        #expect(second.day.description == "2024-02-29" && second.moveMode == .appleMoveTime && second.isPaused)
        #expect(second.moveTime.value == 35 && second.activeEnergyBurned.value == 0 && second.sourceRevision.source == Source.imported(named: "Fitness"))
        let rejected = items.compactMap { item -> String? in
            if case .rejected(let element, let kind, _, let line) = item { "\(line) \(element) \(kind.rawValue)" } else { nil }
        }
        #expect(rejected == [
            "6 ActivitySummary invalid date", "7 ActivitySummary unparsable value", "8 ActivitySummary invalid object", "9 ActivitySummary invalid object",
        ])
    }

    @Test("text is escaped scalar by scalar: a CR LF comes back as both, and a character XML cannot hold is written as U+FFFD, so the file still parses")
    func escapedText() throws {
        let text = "a\u{1}b\r\nc & <d>\u{FFFF}"
        let escaped = AppleHealthValues.escape(text)
        #expect(escaped == "a\u{FFFD}b&#13;&#10;c &amp; &lt;d&gt;\u{FFFD}")
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:01:00 +0100" value="5">
              <MetadataEntry key="note" value="\(escaped)"/>
             </Record>
            </HealthData>
            """
        let items = try Self.read(xml)
        guard case .sample(let object, _, _, _)? = items.first else { Issue.record("\(items)"); return }
        #expect(object.metadata["note"] == .string("a\u{FFFD}b\r\nc & <d>\u{FFFD}"))
    }

    @Test("StateOfMind elements (HealthLedger's exports) are read with their words, dates, source and metadata; bad ones are rejected with their line")
    func statesOfMind() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_US">
             <StateOfMind kind="dailyMood" valence="-0.35" labels="stressed drained" associations="work currentEvents" sourceName="Mood Diary" sourceVersion="1.0" startDate="2025-05-18 21:00:00 +0100" endDate="2025-05-18 21:00:00 +0100">
              <MetadataEntry key="note" value="deadline"/>
             </StateOfMind>
             <StateOfMind kind="momentaryEmotion" valence="1" sourceName="Mood Diary" startDate="2025-05-19 08:00:00 +0100" endDate="2025-05-19 08:00:00 +0100"/>
             <StateOfMind kind="weeklyMood" valence="0" sourceName="Mood Diary" startDate="2025-05-19 08:00:00 +0100" endDate="2025-05-19 08:00:00 +0100"/>
             <StateOfMind kind="dailyMood" valence="very" sourceName="Mood Diary" startDate="2025-05-19 08:00:00 +0100" endDate="2025-05-19 08:00:00 +0100"/>
             <StateOfMind kind="dailyMood" valence="0.1" labels="calm sleepy" sourceName="Mood Diary" startDate="2025-05-19 08:00:00 +0100" endDate="2025-05-19 08:00:00 +0100"/>
             <StateOfMind kind="dailyMood" valence="1.5" sourceName="Mood Diary" startDate="2025-05-19 08:00:00 +0100" endDate="2025-05-19 08:00:00 +0100"/>
             <StateOfMind kind="dailyMood" valence="0.2" associations="work work" sourceName="Mood Diary" startDate="2025-05-19 08:00:00 +0100" endDate="2025-05-19 08:00:00 +0100"/>
             <StateOfMind kind="dailyMood" valence="0.2" sourceName="Mood Diary" startDate="2025-05-19 09:00:00 +0100" endDate="2025-05-19 08:00:00 +0100"/>
            </HealthData>
            """
        let items = try Self.read(xml)
        let states = items.compactMap { item -> StateOfMind? in if case .stateOfMind(let state, _) = item { state } else { nil } }
        #expect(states.count == 2)
        let first = try #require(states.first)
        #expect(first.kind == .dailyMood && first.valence == -0.35 && first.labels == [.stressed, .drained] && first.associations == [.work, .currentEvents])
        #expect(first.startDate == Date(timeIntervalSince1970: 1_747_598_400) && first.endDate == first.startDate)
        #expect(first.sourceRevision.source == Source.imported(named: "Mood Diary") && first.sourceRevision.version == "1.0")
        #expect(first.metadata["note"] == .string("deadline") && first.syncIdentifier?.hasPrefix("apple-health:") == true && first.syncVersion == 1)
        #expect(states.last?.kind == .momentaryEmotion && states.last?.labels == [] && states.last?.valence == 1)
        let rejected = items.compactMap { item -> String? in
            if case .rejected(let element, let kind, let reason, let line) = item { "\(line) \(element) \(kind.rawValue): \(reason)" } else { nil }
        }
        #expect(rejected.map { $0.prefix { $0 != ":" } } == [
            "7 StateOfMind unparsable value", "8 StateOfMind unparsable value", "9 StateOfMind invalid object", "10 StateOfMind invalid object",
            "11 StateOfMind invalid object", "12 StateOfMind dates out of order",
        ])
        #expect(rejected[2].contains("'sleepy' is not a state of mind label") && rejected[3].contains("valence must be from -1"), "\(rejected)")
    }

    @Test("the reader loads no external entity, parameter entity or DTD, and an entity bomb is refused, not expanded")
    func hostileDocumentTypes() throws {
        let directory = URL(filePath: NSTemporaryDirectory()).appending(path: "healthledger-xxe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secret = "SECRET-\(UUID().uuidString)"
        let secretFile = directory.appending(path: "secret.txt")
        try Data(secret.utf8).write(to: secretFile)
        let dtdFile = directory.appending(path: "evil.dtd")
        try Data("<!ENTITY leaked \"\(secret)\">".utf8).write(to: dtdFile)
        func record(_ source: String) -> String {
            #"<Record type="HKQuantityTypeIdentifierHeartRate" sourceName="\#(source)" unit="count/min" startDate="2025-05-18 12:00:00 +0100" endDate="2025-05-18 12:00:00 +0100" value="70"/>"#
        }
        func mentionsSecret(_ items: [AppleHealthItem]) -> Bool { items.contains { "\($0)".contains(secret) } }

        // External entities and an external DTD: never read.
        let external = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE HealthData SYSTEM "file://\(dtdFile.path)" [
             <!ENTITY secret SYSTEM "file://\(secretFile.path)">
             <!ENTITY % remote SYSTEM "file://\(dtdFile.path)"> %remote;
            ]>
            <HealthData locale="en_US">
             \(record("Watch"))
             <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="Phone" unit="count/min" startDate="2025-05-18 12:01:00 +0100" endDate="2025-05-18 12:01:00 +0100" value="71"><MetadataEntry key="note" value="&secret;"/></Record>
             <Note>&secret;</Note>
            </HealthData>
            """
        let read = try Self.read(external)
        #expect(!mentionsSecret(read), "an external entity was read")
        let samples = read.compactMap { item -> HealthObject? in if case .sample(let object, _, _, _) = item { object } else { nil } }
        #expect(samples.count == 2 && samples.last?.metadata["note"] == .string(""), "the entity reference reads as nothing")

        // A billion laughs: never expanded.
        let laughs = (1...9).map { level in
            "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level - 1);", count: 10) + "\">"
        }.joined(separator: "\n")
        let bomb = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE HealthData [
             <!ENTITY lol0 "lol">
             \(laughs)
            ]>
            <HealthData locale="en_US">
             \(record("&lol9;"))
            </HealthData>
            """
        // The document's own entity declarations are not kept: the reference is an error at its line.
        #expect { try Self.read(bomb) } throws: { "\($0)".contains("line 15: Entity 'lol9' not defined") }
    }

    /// A half-hour walk starting at `hour` on 2025-05-18 (UTC) whose route is the export's
    /// `workout-routes/<route>`.
    static func walk(at hour: Int, route: String) -> String {
        """
         <Workout workoutActivityType="HKWorkoutActivityTypeWalking" sourceName="Phone" startDate="2025-05-18 \(hour):00:00 +0000" endDate="2025-05-18 \(hour):30:00 +0000">
          <WorkoutRoute sourceName="Phone" startDate="2025-05-18 \(hour):00:00 +0000" endDate="2025-05-18 \(hour):30:00 +0000">
           <FileReference path="/workout-routes/\(route)"/>
          </WorkoutRoute>
         </Workout>
        """
    }

    /// What the reader makes of `xml`, in order.
    static func read(_ xml: String) throws -> [AppleHealthItem] {
        var items: [AppleHealthItem] = []
        let parser = XMLStreamParser(handler: AppleHealthReader { items.append($0) })
        try parser.feed(Array(xml.utf8))
        try parser.finish()
        return items
    }

    /// Writes `export.zip` as the Health app does and returns its URL.
    static func writeZip(in directory: URL, xml: String = exportXML) throws -> URL {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appending(path: "export.zip")
        try? FileManager.default.removeItem(at: url)
        let archive = try Archive(url: url, accessMode: .create)
        let files = [
            ("apple_health_export/export.xml", xml), ("apple_health_export/workout-routes/route_2025-05-18_12.00pm.gpx", gpx),
            ("apple_health_export/clinical-records/x.json", labResult),
            ("apple_health_export/electrocardiograms/ecg_2025-05-18.csv", electrocardiogram),
        ]
        for (path, text) in files {
            let data = Data(text.utf8)
            try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate) { position, size in
                data.subdata(in: Int(position)..<Int(position) + size)
            }
        }
        return url
    }

    @Test("every element kind goes in through the server; bad records are rejected with their line; a re-import adds nothing")
    func importsEverything() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let zip = try Self.writeZip(in: server.directory.appending(path: "export"))
            let owner = server.ownerCredential

            let first = try #require(try await cli.json(owner, ["import", "apple-health", zip.path]) as? [String: Any])
            let imported = try #require(first["imported"] as? [String: Int])
            // 12 samples (2 heart rate, glucose, energy, oxygen, HRV, audio, temperature, 2 sleep,
            // the sleep schedule's goal, the second dietary energy), 2 correlations, 1 workout, its
            // route, a prescription, an activity summary, an audiogram, a clinical record, an ECG, the
            // HRV record's heartbeat series, 4 characteristics.
            #expect(imported == [
                "samples": 12, "correlations": 2, "workouts": 1, "routes": 1, "visionPrescriptions": 1, "activitySummaries": 1, "audiograms": 1,
                "clinicalRecords": 1, "electrocardiograms": 1, "heartbeatSeries": 1, "characteristics": 4,
            ])
            #expect(first["rejected"] as? [String: Int] == [
                "unknown type": 1, "unparsable value": 1, "unit incompatible with its type": 1, "dates out of order": 1, "invalid date": 1,
            ])
            let rejections = try #require(first["rejections"] as? [[String: Any]])
            #expect(rejections.map { $0["line"] as? Int } == [39, 40, 41, 42, 43], "each rejection names its line")
            let skipped = try #require(first["skipped"] as? [String: Int])
            #expect(skipped["Record: listed again inside its correlation"] == 3, "top-level copies of correlation members are not saved twice")
            #expect(!skipped.keys.contains { $0.hasPrefix("HeartRateVariabilityMetadataList") }, "\(skipped)")
            #expect(skipped["Attachment: attachment scan-1: its bytes are not part of the export"] == 1)
            #expect(first["associatedWithWorkouts"] as? Int == 2, "the workout's heart rate and energy samples")
            #expect(first["error"] == nil)
            #expect(first["elements"] as? Int == 30, "the 29 elements under HealthData, the rejected and skipped among them, and the ECG file")

            // What the SDK sees.
            let store = server.client()
            let heartRate = try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: store)
            let first72 = try #require(heartRate.first?.quantitySample)
            #expect(heartRate.count == 2 && first72.quantity.value == 72)
            #expect(first72.sourceRevision.source == Source.imported(named: Self.watch) && first72.sourceRevision.version == "9.4")
            #expect(first72.device == Device(name: "Apple Watch", manufacturer: "Apple Inc.", model: "Watch", hardwareVersion: "Watch6,2", softwareVersion: "9.4"))
            #expect(first72.startDate == Date(timeIntervalSince1970: 1_747_566_300), "12:05 at +0100 is 11:05 UTC")
            #expect(first72.metadata["HKMetadataKeyHeartRateMotionContext"] == .number(1))
            #expect(first72.metadata["HKMetadataKeyTimeZone"] == .string("Europe/London"))
            #expect(first72.metadata["Recorded"] == .date(first72.startDate))
            #expect(first72.metadata["HKAverageMETs"] == .quantity(try Quantity(5.4321, "kcal/(hr*kg)")))
            #expect(first72.metadata["note"] == .string("after coffee"))
            #expect(heartRate[1].startDate == Date(timeIntervalSince1970: 1_747_585_200), "12:20 at -0400 is 16:20 UTC")
            // The sync identifier is docs/EXPORT.md §1.4's recipe: "apple-health:", the start in
            // eleven digits and "-", then SHA-256 over the record's fields, each followed by 0x1F,
            // its first 16 bytes in hex.
            let fields = ["Record", "HKQuantityTypeIdentifierHeartRate", Self.watch, "1747585200", "1747585200", "140", "count/min"]
            let digest = SHA256.hash(data: fields.flatMap { Array($0.utf8) + [0x1F] })
            let recipe = "apple-health:01747585200-" + digest.prefix(16).map { String(format: "%02x", $0) }.joined()
            #expect(heartRate[1].metadata[MetadataKey.syncIdentifier] == .string(recipe))
            #expect(heartRate[1].metadata[MetadataKey.syncVersion] == .number(1))
            let glucose = try await SampleQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierBloodGlucose")).result(for: store)
            #expect(try glucose.first?.quantitySample?.quantity.doubleValue(for: HealthUnit("mmol<180.1558800000541>/L")) == 5.4)
            let temperature = try await SampleQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierBodyTemperature")).result(for: store)
            #expect(abs(try #require(temperature.first?.quantitySample).quantity.doubleValue(for: HealthUnit("degC")) - 37) < 1e-9)
            let sleep = try await SampleQueryDescriptor(type: try ObjectType("HKCategoryTypeIdentifierSleepAnalysis")).result(for: store)
            #expect(Set(sleep.compactMap { $0.categorySample?.value }) == [0, 5], "inBed and asleepREM by name")
            let goal = try await SampleQueryDescriptor(type: try ObjectType("HKDataTypeSleepDurationGoal")).result(for: store)
            #expect(try goal.first?.quantitySample?.quantity.doubleValue(for: HealthUnit("min")) == 450, "7.5 hours")

            let systolic = try await SampleQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierBloodPressureSystolic")).result(for: store)
            #expect(systolic.count == 1, "the correlation's member only, not its top-level copy")
            let pressures = try await CorrelationQueryDescriptor(type: try CorrelationType("HKCorrelationTypeIdentifierBloodPressure")).result(for: store)
            #expect(pressures.first?.metadata[MetadataKey.wasUserEntered] == .number(1), "HKWasUserEntered is HealthKit's stored name of the key")
            #expect(pressures.count == 1 && pressures.first?.objects.count == 2 && pressures.first?.objects.map(\.uuid).contains(systolic[0].uuid) == true)
            let energy = try await SampleQueryDescriptor(type: try ObjectType("HKQuantityTypeIdentifierDietaryEnergyConsumed")).result(for: store)
            #expect(energy.compactMap { $0.quantitySample?.quantity.value }.sorted() == [30, 95], "the apple's member and the lone snack")

            let workouts = try await SampleQueryDescriptor(type: .workout).result(for: store)
            let workout = try #require(workouts.first?.workout)
            #expect(workouts.count == 1 && workout.activityType == .running && workout.configuration.locationType == .outdoor)
            #expect(workout.duration == 29 * 60, "30 minutes less the minute paused")
            #expect(workout.activities.map(\.uuid) == [UUID(uuidString: "0A1B2C3D-0000-4000-8000-000000000001")!])
            let statistics = try await store.statistics(for: workout.uuid)
            #expect(try statistics.statistics(for: Samples.heartRate)?.averageQuantity()?.doubleValue(for: HealthUnit("count/min")) == 72)
            let routes = try await SampleQueryDescriptor(type: .workoutRoute).result(for: store).compactMap(\.workoutRoute)
            let route = try #require(routes.first)
            #expect(route.workoutUUID == workout.uuid && route.sourceRevision.source == Source.imported(named: Self.watch))
            #expect(routes.count == 1 && route.syncIdentifier == "ROUTE-1" && route.syncVersion == 2 && route.locationCount == 3)
            let locations = try await store.routeLocations(of: route.uuid).all()
            #expect(locations.map(\.latitude) == [51.5, 51.5001, 51.5002] && locations.map(\.speed) == [3.1, 3.2, 3.3])
            let prescriptions = try await SampleQueryDescriptor(type: .visionPrescription).result(for: store)
            #expect(prescriptions.first?.visionPrescription?.rightEye?.cylinder?.value == -0.5)
            let days = try await ActivitySummaryQueryDescriptor(from: CalendarDay("2025-05-18"), to: CalendarDay("2025-05-18")).result(for: store)
            let day = try #require(days.first)
            #expect(try days.count == 1 && day.activeEnergyBurned == Quantity(500, HealthUnit("Cal")) && day.moveMode == .activeEnergy)
            #expect(day.exerciseTime.value == 0 && day.standHoursGoal.value == 0, "absent rings read as 0")
            #expect(day.sourceRevision.source == Source.imported(named: "Health"))
            let labs = try await ClinicalRecordQueryDescriptor(type: try ObjectType("HKClinicalTypeIdentifierLabResultRecord"), resourceType: "Observation")
                .result(for: store)
            let lab = try #require(labs.first)
            #expect(labs.count == 1 && lab.displayName == "Hemoglobin A1c" && lab.fhirResource.data == Array(Self.labResult.utf8), "byte for byte")
            #expect(lab.fhirResource.identifier == "x" && lab.fhirResource.fhirVersion == "4.0.1" && lab.fhirResource.sourceURL == "https://example.org")
            #expect(lab.startDate == Date(timeIntervalSince1970: 1_747_551_600) && lab.sourceRevision.source == Source.imported(named: "Hospital"))
            #expect(try await ClinicalRecordQueryDescriptor(type: try ObjectType("HKClinicalTypeIdentifierLabResultRecord"), resourceType: "Condition")
                .result(for: store).isEmpty)
            let recording = try #require(try await SampleQueryDescriptor(type: .electrocardiogram).result(for: store).first?.electrocardiogram)
            #expect(recording.classification == .sinusRhythm && recording.symptomsStatus == .notSet && recording.voltages.count == 1_536)
            #expect(recording.startDate == Date(timeIntervalSince1970: 1_747_557_000) && recording.endDate.timeIntervalSince(recording.startDate) == 3)
            #expect(recording.samplingFrequency == Quantity(512, .hertz) && recording.sourceRevision == SourceRevision(source: Source.imported(named: "ECG"), version: "1.90"))
            #expect(recording.device?.hardwareVersion == "Watch6,7" && abs(Double(recording.voltages[128]) - 60) < 0.001, "a quarter period in")
            let voltages = try await ElectrocardiogramQueryDescriptor(recording.uuid, batchSize: 500).result(for: store)
            #expect(voltages.count == 1_536 && voltages[512].timeSinceStart == 1)
            let hearing = try #require(try await SampleQueryDescriptor(type: .audiogram).result(for: store).first?.audiogram)
            #expect(try hearing.points.map { try $0.frequency.doubleValue(for: .hertz) } == [500, 1000, 4000], "in rising frequency")
            #expect(try hearing.points[0].rightEar?.doubleValue(for: .hearingLevel) == 5 && hearing.points[0].rightEarMasked && !hearing.points[0].leftEarMasked)
            #expect(hearing.points[1].rightEar == nil && hearing.points[1].leftEar?.value == 5, "one ear tested; Hz and dBHL when no unit is given")
            #expect(hearing.endDate.timeIntervalSince(hearing.startDate) == 600 && hearing.sourceRevision.source == Source.imported(named: "Hearing"))
            let series = try #require(try await SampleQueryDescriptor(type: .heartbeatSeries).result(for: store).first?.heartbeatSeries)
            #expect(series.beats.map(\.timeSinceSeriesStart) == [1.25, 2.1, 60.9] && !series.beats.contains(where: \.precededByGap), "times of day since 03:00 local")
            #expect(series.startDate == Date(timeIntervalSince1970: 1_747_533_600) && series.endDate.timeIntervalSince(series.startDate) == 61, "to the last beat, rounded up")
            #expect(series.sourceRevision.source == Source.imported(named: Self.watch) && series.syncVersion == 1)
            let hrvFields = ["HeartbeatSeries", Self.watch, "1747533600", "1747533661"]
            let hrvDigest = SHA256.hash(data: hrvFields.flatMap { Array($0.utf8) + [0x1F] })
            #expect(series.syncIdentifier == "apple-health:01747533600-" + hrvDigest.prefix(16).map { String(format: "%02x", $0) }.joined())
            #expect(try await HeartbeatSeriesQueryDescriptor(series.uuid, batchSize: 2).result(for: store) == series.beats)
            let (sex, blood) = (try await store.biologicalSex(), try await store.bloodType())
            #expect(sex == .female && blood == .aPositive)
            #expect(try await store.cardioFitnessMedicationsUse() == .betaBlocker)

            // The same file again adds nothing, and says so.
            let second = try #require(try await cli.json(owner, ["import", "apple-health", zip.path]) as? [String: Any])
            #expect((second["imported"] as? [String: Int])?.isEmpty == true)
            #expect(second["alreadyPresent"] as? Int == 26, "21 objects, the route and 4 characteristics")
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: store).count == 2)

            // An app never gets an imported source's name: the prefix is the ledger's.
            await #expect(throws: HealthError.self) {
                _ = try await server.ledger.issueCredential(for: .app(Source(bundleIdentifier: Source.imported(named: Self.watch).bundleIdentifier, name: Self.watch)))
            }
            await store.close()
        }
    }

    @Test("a generated export named .zip is a zip holding apple_health_export/export.xml, the same XML as the one written bare")
    func generatedZip() throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "healthledger-generated-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func contents(_ name: String) throws -> [UInt8] {
            let url = directory.appending(path: name)
            #expect(try SyntheticExport(records: 500).write(to: url) == 500)
            var bytes: [UInt8] = []
            try ExportArchive(url: url).readXML { bytes += $0 }
            return bytes
        }
        let zipped = try contents("export.zip")
        #expect(try Data(contentsOf: directory.appending(path: "export.zip")).starts(with: [0x50, 0x4B, 0x03, 0x04]))
        #expect(zipped == (try contents("export.xml")) && zipped.count > 100_000)
    }

    @Test("batches too large for a frame are split until each part fits: the same import as with room to spare, nothing rejected")
    func batchesSplitToFitFrames() async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "healthledger-split-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appending(path: "export.xml")
        try SyntheticExport(records: 12_000, seed: 3).write(to: file)
        var summaries: [ImportSummary] = []
        var counts: [Int] = []
        // 256 KiB frames hold about a thousand of these records: every batch of 5,000 is split.
        // (The limit applies to the answers too: the largest here are about 200 KiB.)
        for frameLimit in [256 << 10, 4 << 20] {
            try await withTestServer { server in
                let store = HealthStore(configuration: .init(port: server.port, credential: server.ownerCredential, maximumFrameSize: frameLimit))
                let importer = AppleHealthImporter(store: store, archive: try ExportArchive(url: file))
                importer.batchSize = 5000
                summaries.append(try await importer.run())
                counts.append(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: store).count)
                await store.close()
            }
        }
        #expect(summaries[0].rejected.isEmpty && summaries[0].error == nil, "\(summaries[0].rejections)")
        #expect(summaries[0].elements == summaries[1].elements && summaries[0].imported == summaries[1].imported)
        #expect(summaries[0].imported.values.reduce(0, +) > 10_000)
        #expect(counts[0] == counts[1] && counts[0] > 4000)
    }

    @Test("a truncated export commits what was complete and ends with a clear error; a file that is not XML is refused")
    func truncatedAndGarbage() async throws {
        try await withTestServer { server in
            let cli = AuthCLITests.Session(server: server)
            let directory = server.directory.appending(path: "bad")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let cut = Self.exportXML.range(of: "<Correlation type=\"HKCorrelationTypeIdentifierFood\"")!.lowerBound
            let truncated = directory.appending(path: "export.xml")
            try Data(Self.exportXML[..<cut].utf8).write(to: truncated)
            let run = try await cli.run(server.ownerCredential, ["import", "apple-health", truncated.path])
            #expect(run.status == 1 && run.error.contains("not complete XML") && run.error.contains("everything before that point was imported"), "\(run.error)")
            let store = server.client()
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: store).count == 2)
            let pressures = try await CorrelationQueryDescriptor(type: try CorrelationType("HKCorrelationTypeIdentifierBloodPressure")).result(for: store)
            #expect(pressures.count == 1, "the blood pressure before the cut is in")
            // The cut falls before the meal's correlation: whether the two dietary records are
            // members of a correlation cannot be told, so neither is saved on its own.
            #expect(run.error.contains("2 records of the types a correlation holds were not"), "\(run.error)")
            let energyType = try ObjectType("HKQuantityTypeIdentifierDietaryEnergyConsumed")
            #expect(try await SampleQueryDescriptor(type: energyType).result(for: store).isEmpty)

            // The complete export then adds the meal with its member, and the lone snack, once each.
            let zip = try Self.writeZip(in: directory)
            _ = try await cli.json(server.ownerCredential, ["import", "apple-health", zip.path])
            func energyValues() async throws -> [Double] {
                try await SampleQueryDescriptor(type: energyType).result(for: store).compactMap { $0.quantitySample?.quantity.value }.sorted()
            }
            #expect(try await energyValues() == [30, 95])
            // And the truncated file after the complete one adds nothing: the meal's member is
            // not saved a second time on its own.
            let again = try await cli.run(server.ownerCredential, ["import", "apple-health", truncated.path, "--json"])
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(again.output.utf8)) as? [String: Any])
            #expect(again.status == 1 && (summary["imported"] as? [String: Int])?.isEmpty == true, "\(again.output)")
            #expect((summary["skipped"] as? [String: Int])?[AppleHealthImporter.undecidedMember] == 2)
            #expect(try await energyValues() == [30, 95])

            // A zip cut short: its index is gone, so nothing of it is read, and the message says why.
            let zipBytes = try Data(contentsOf: zip)
            let cutZip = directory.appending(path: "cut.zip")
            try zipBytes.prefix(zipBytes.count / 2).write(to: cutZip)
            let fresh = try server.store.createLedger(id: "fresh")
            let freshOwner = try await fresh.issueCredential(for: .owner)
            let cutRun = try await cli.run(freshOwner, ["import", "apple-health", cutZip.path])
            #expect(cutRun.status != 0 && cutRun.error.contains("a zip cut short cannot be read"), "\(cutRun.error)")
            let freshStore = server.client(freshOwner)
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: freshStore).isEmpty)
            await freshStore.close()

            // A zip whose export.xml does not match its checksum (a byte changed in a stored
            // entry): the import fails, naming it, where it read a changed value before.
            let stored = directory.appending(path: "stored.zip")
            let storedArchive = try Archive(url: stored, accessMode: .create)
            let xml = Data(Self.exportXML.utf8)
            try storedArchive.addEntry(with: "apple_health_export/export.xml", type: .file, uncompressedSize: Int64(xml.count), compressionMethod: .none) {
                position, size in xml.subdata(in: Int(position)..<Int(position) + size)
            }
            var storedBytes = try Data(contentsOf: stored)
            let digit = try #require(storedBytes.firstRange(of: Data(#"value=""#.utf8))).upperBound
            storedBytes[digit] = storedBytes[digit] == UInt8(ascii: "9") ? UInt8(ascii: "8") : UInt8(ascii: "9")
            try storedBytes.write(to: stored)
            let other = try server.store.createLedger(id: "checksum")
            let otherOwner = try await other.issueCredential(for: .owner)
            let changed = try await cli.run(otherOwner, ["import", "apple-health", stored.path])
            #expect(changed.status == 1 && changed.error.contains("do not match the checksum the zip records"), "\(changed.error)")
            let checked = server.client(otherOwner)
            #expect(try await SampleQueryDescriptor(type: Samples.heartRate.objectType).result(for: checked).isEmpty, "nothing of a damaged entry is imported")
            await checked.close()

            let garbage = directory.appending(path: "garbage.xml")
            try Data("this is not xml\u{0}\u{1}".utf8).write(to: garbage)
            let refused = try await cli.run(server.ownerCredential, ["import", "apple-health", garbage.path])
            #expect(refused.status == 1 && refused.error.contains("export.xml is not XML (it begins with 't', not '<'): nothing was imported"), "\(refused.error)")
            let empty = directory.appending(path: "empty.xml")
            try Data().write(to: empty)
            let emptyRun = try await cli.run(server.ownerCredential, ["import", "apple-health", empty.path])
            #expect(emptyRun.status == 1 && emptyRun.error.contains("export.xml is empty"), "\(emptyRun.error)")
            // An entity the DTD declares is not read, and the message says so (not "not defined" alone).
            let entity = directory.appending(path: "entity.xml")
            try Data(#"<?xml version="1.0"?><!DOCTYPE HealthData [<!ENTITY x SYSTEM "file:///etc/passwd">]><HealthData><Record type="HKQuantityTypeIdentifierHeartRate" sourceName="&x;" unit="count/min" startDate="2020-09-13 12:27:13 +0000" endDate="2020-09-13 12:27:13 +0000" value="73"/></HealthData>"#.utf8).write(to: entity)
            let entityRun = try await cli.run(server.ownerCredential, ["import", "apple-health", entity.path])
            #expect(entityRun.status == 1 && entityRun.error.contains("entities declared in a document's DTD are not read"), "\(entityRun.error)")
            #expect(!entityRun.error.contains("root:"), "nothing of the file an entity names is read")
            let missing = try await cli.run(server.ownerCredential, ["import", "apple-health", directory.appending(path: "none.zip").path])
            #expect(missing.status != 0 && missing.error.contains("no file at \(directory.appending(path: "none.zip").path)"), "\(missing.error)")
            let app = try await cli.run(server.appCredential, ["import", "apple-health", truncated.path])
            #expect(app.status != 0, "an app cannot import: \(app.output)")
            await store.close()
        }
    }

    @Test("route files that are a directory, larger than 64 MiB or not XML are rejected with their line; one with no points is skipped; the workouts go in")
    func unreadableRoutes() async throws {
        try await withTestServer { server in
            let directory = server.directory.appending(path: "bad-routes")
            let routes = directory.appending(path: "workout-routes")
            try FileManager.default.createDirectory(at: routes.appending(path: "folder.gpx"), withIntermediateDirectories: true)
            let big = routes.appending(path: "big.gpx")
            try Data().write(to: big)
            let handle = try FileHandle(forWritingTo: big)
            try handle.truncate(atOffset: (64 << 20) + 1)  // sparse: 64 MiB and one byte
            try handle.close()
            try Data("hello".utf8).write(to: routes.appending(path: "text.gpx"))
            try Data(#"<?xml version="1.0"?><gpx version="1.1"><trk><trkseg/></trk></gpx>"#.utf8).write(to: routes.appending(path: "empty.gpx"))
            let workouts = ["folder.gpx", "big.gpx", "text.gpx", "empty.gpx"].enumerated().map { index, route in Self.walk(at: 10 + index, route: route) }
            let xml = """
                <?xml version="1.0" encoding="UTF-8"?>
                <HealthData locale="en_GB">
                \(workouts.joined(separator: "\n"))
                </HealthData>
                """
            let file = directory.appending(path: "export.xml")
            try Data(xml.utf8).write(to: file)
            let cli = AuthCLITests.Session(server: server)
            let summary = try #require(try await cli.json(server.ownerCredential, ["import", "apple-health", file.path]) as? [String: Any])
            #expect(summary["imported"] as? [String: Int] == ["workouts": 4], "\(summary)")
            #expect(summary["rejected"] as? [String: Int] == [RejectionKind.routeFile.rawValue: 3], "\(summary)")
            let rejections = try #require(summary["rejections"] as? [[String: Any]])
            let reasons = rejections.compactMap { $0["reason"] as? String }
            #expect(rejections.map { $0["line"] as? Int } == [4, 9, 14], "\(rejections)")
            #expect(reasons == [
                "/workout-routes/folder.gpx is not a regular file", "/workout-routes/big.gpx is larger than 64 MiB",
                "/workout-routes/text.gpx: not XML: it begins with 'h', not '<'",
            ])
            #expect(summary["skipped"] as? [String: Int] == ["WorkoutRoute: the route file has no points": 1], "\(summary)")
        }
    }

    @Test("a route file over the route limit, or missing, is rejected with its line and the import goes on, routes after it included")
    func oversizedAndMissingRoutes() async throws {
        try await withTestServer { server in
            let directory = server.directory.appending(path: "routes")
            let routes = directory.appending(path: "workout-routes")
            try FileManager.default.createDirectory(at: routes, withIntermediateDirectories: true)
            // One point more than a route may hold: the server would refuse it after the upload.
            let points = ObjectLimits.maximumRouteLocations + 1
            var huge = #"<?xml version="1.0" encoding="UTF-8"?><gpx version="1.1" xmlns="http://www.topografix.com/GPX/1/1"><trk><trkseg>"#
            huge.reserveCapacity(points * 80)
            func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
            for index in 0..<points {
                let time = "2025-05-\(twoDigits(10 + index / 86_400))T\(twoDigits(index / 3600 % 24)):\(twoDigits(index / 60 % 60)):\(twoDigits(index % 60))Z"
                huge += #"<trkpt lon="-0.1" lat="51.5"><time>\#(time)</time></trkpt>"#
            }
            huge += "</trkseg></trk></gpx>"
            try Data(huge.utf8).write(to: routes.appending(path: "huge.gpx"))
            try Data(Self.gpx.utf8).write(to: routes.appending(path: "small.gpx"))
            let xml = """
                <?xml version="1.0" encoding="UTF-8"?>
                <HealthData locale="en_GB">
                 <ExportDate value="2025-05-19 08:00:00 +0000"/>
                \(Self.walk(at: 13, route: "huge.gpx"))
                \(Self.walk(at: 14, route: "gone.gpx"))
                \(Self.walk(at: 15, route: "small.gpx"))
                 <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:05:00 +0000" value="400"/>
                </HealthData>
                """
            let file = directory.appending(path: "export.xml")
            try Data(xml.utf8).write(to: file)
            let cli = AuthCLITests.Session(server: server)
            let summary = try #require(try await cli.json(server.ownerCredential, ["import", "apple-health", file.path]) as? [String: Any])
            #expect(summary["imported"] as? [String: Int] == ["workouts": 3, "routes": 1, "samples": 1], "\(summary)")
            #expect(summary["rejected"] as? [String: Int] == [RejectionKind.routeFile.rawValue: 2], "\(summary)")
            let rejections = try #require(summary["rejections"] as? [[String: Any]])
            #expect(rejections.map { $0["line"] as? Int } == [5, 10] && rejections.map { $0["element"] as? String } == ["WorkoutRoute", "WorkoutRoute"], "\(rejections)")
            #expect((rejections.first?["reason"] as? String)?.contains("at most \(ObjectLimits.maximumRouteLocations)") == true, "\(rejections)")
            let store = server.client()
            #expect(try await SampleQueryDescriptor(type: .workoutRoute).result(for: store).compactMap(\.workoutRoute).map(\.locationCount) == [3])
            await store.close()
        }
    }

    @Test("a record key's start is written in at least eleven digits: zero-padded, 0 before 1970, twelve digits in year 9999")
    func recordKeyDigits() {
        func recipe(_ digits: String, _ start: String, _ end: String) -> String {
            let fields = ["Record", "HKQuantityTypeIdentifierStepCount", Self.watch, start, end, "12", "count"]
            let digest = SHA256.hash(data: fields.flatMap { Array($0.utf8) + [0x1F] })
            return "apple-health:\(digits)-" + digest.prefix(16).map { String(format: "%02x", $0) }.joined()
        }
        let cases: [(start: Double, digits: String, field: String)] = [
            (0, "00000000000", "0"),
            (1_747_585_200.4, "01747585200", "1747585200"),
            (-86_400, "00000000000", "-86400"),
            (99_999_999_999, "99999999999", "99999999999"),
            (253_402_300_799, "253402300799", "253402300799"),
        ]
        for (start, digits, field) in cases {
            let date = Date(timeIntervalSince1970: start)
            let key = AppleHealthReader.recordKey(type: "HKQuantityTypeIdentifierStepCount", source: Self.watch, start: date, end: date, value: "12", unit: "count")
            #expect(key == recipe(digits, field, field), "start \(start)")
        }
    }

    @Test("records interleaving a dozen types, sources and devices each keep their own, whatever the reader remembers of the ones before")
    func interleavedRecords() throws {
        // Cycles of different lengths, so that each record meets a new combination and each
        // kind of value runs through more than the reader keeps at hand.
        let types = [
            ("HKQuantityTypeIdentifierHeartRate", "count/min"), ("HKQuantityTypeIdentifierStepCount", "count"),
            ("HKQuantityTypeIdentifierBodyMass", "kg"), ("HKQuantityTypeIdentifierRestingHeartRate", "count/min"),
            ("HKQuantityTypeIdentifierDistanceWalkingRunning", "km"), ("HKQuantityTypeIdentifierActiveEnergyBurned", "kcal"),
            ("HKQuantityTypeIdentifierBodyTemperature", "degC"), ("HKQuantityTypeIdentifierAppleExerciseTime", "min"),
            ("HKQuantityTypeIdentifierRespiratoryRate", "count/min"), ("HKQuantityTypeIdentifierBasalEnergyBurned", "kcal"),
            ("HKQuantityTypeIdentifierFlightsClimbed", "count"), ("HKQuantityTypeIdentifierBloodPressureSystolic", "mmHg"),
            ("HKCategoryTypeIdentifierSleepAnalysis", ""),
        ]
        let sources = (0..<11).map { "Sensor ✓ \($0)" }
        let devices = (0..<10).map { "&lt;&lt;HKDevice: 0x\($0)&gt;, name:Device \($0), manufacturer:Maker, model:M\($0), hardware:H\($0),\($0), software:\($0).0&gt;" }
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<HealthData locale=\"en_GB\">\n"
        let count = 13 * 11 * 10
        for index in 0..<count {
            let (type, unit) = types[index % types.count]
            let value = unit.isEmpty ? "HKCategoryValueSleepAnalysisAsleepREM" : "\(index % 90 + 1)"
            let second = String(format: "%02d", index % 60)
            let minute = String(format: "%02d", index / 60 % 60)
            xml += " <Record type=\"\(type)\" sourceName=\"\(sources[index % sources.count])\" sourceVersion=\"\(index % 7)\" device=\"\(devices[index % devices.count])\""
                + (unit.isEmpty ? "" : " unit=\"\(unit)\"")
                + " startDate=\"2025-05-18 1\(index / 3600):\(minute):\(second) +0000\" endDate=\"2025-05-18 1\(index / 3600):\(minute):\(second) +0000\" value=\"\(value)\"/>\n"
        }
        xml += "</HealthData>\n"
        let samples: [(HealthObject, Bool)] = try Self.read(xml).compactMap { item in
            switch item {
            case .sample(let object, _, let member, _): return (object, member)
            case .rejected(_, _, let reason, let line):
                Issue.record("line \(line): \(reason)")
                return nil
            default: return nil
            }
        }
        #expect(samples.count == count)
        for (index, (object, member)) in samples.enumerated() {
            let (type, _) = types[index % types.count]
            #expect(object.objectType.identifier == type)
            #expect(member == (type == "HKQuantityTypeIdentifierBloodPressureSystolic"), "only blood pressure may be a correlation's member")
            let revision = object.sourceRevision
            #expect(revision.source == Source.imported(named: sources[index % sources.count]) && revision.version == "\(index % 7)")
            let device = try #require(object.device)
            let number = index % devices.count
            #expect(device.name == "Device \(number)" && device.model == "M\(number)" && device.hardwareVersion == "H\(number),\(number)")
            if let quantity = object.quantitySample?.quantity {
                #expect(quantity.value == Double(index % 90 + 1))
            }
        }
    }

    @Test("past the reader's cache limits, each record still gets its own source, device and unit; the summary lists at most a thousand reasons")
    func boundedCaches() async throws {
        // A device address per record, as the Health app may write them, and more distinct
        // sources and units than a cache holds before it starts again.
        let count = AppleHealthReader.cacheLimit + 500
        func number(_ index: Int) -> String { "\(index % 3 + 1)\(String(repeating: "0", count: index % 4))" }
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<HealthData locale=\"en_GB\">\n"
        for index in 0..<count {
            let device = "&lt;&lt;HKDevice: 0x\(String(index, radix: 16))&gt;, name:Watch \(index % 7), manufacturer:Apple Inc., model:Watch, hardware:W\(index % 5), software:9.4&gt;"
            xml += " <Record type=\"HKQuantityTypeIdentifierBloodGlucose\" sourceName=\"Meter \(index)\" device=\"\(device)\" unit=\"mmol&lt;\(index + 100)&gt;/L\""
                + " startDate=\"2025-05-18 10:00:00 +0000\" endDate=\"2025-05-18 10:00:00 +0000\" value=\"\(number(index))\"/>\n"
        }
        xml += "</HealthData>\n"
        var items: [AppleHealthItem] = []
        let reader = AppleHealthReader { items.append($0) }
        let parser = XMLStreamParser(handler: reader)
        // Fed in slices, the caches looked at as the file goes.
        let bytes = Array(xml.utf8)
        var largest = [0, 0, 0]
        for start in stride(from: 0, to: bytes.count, by: 64 << 10) {
            try parser.feed(Array(bytes[start..<min(start + (64 << 10), bytes.count)]))
            largest = zip(largest, reader.cacheCounts).map { max($0, $1) }
        }
        try parser.finish()
        #expect(largest.allSatisfy { $0 <= AppleHealthReader.cacheLimit } && largest.allSatisfy { $0 > 1000 }, "\(largest)")
        let samples: [HealthObject] = items.compactMap { item in
            switch item {
            case .sample(let object, _, _, _): return object
            case .rejected(_, _, let reason, let line):
                Issue.record("line \(line): \(reason)")
                return nil
            default: return nil
            }
        }
        #expect(samples.count == count)
        let milligramsPerDecilitre = try HealthUnit("mg/dL")
        for (index, object) in samples.enumerated() {
            #expect(object.sourceRevision.source == Source.imported(named: "Meter \(index)"))
            #expect(object.device?.name == "Watch \(index % 7)" && object.device?.hardwareVersion == "W\(index % 5)")
            // n mmol of a substance of molar mass M g/mol in a litre: n·M mg/L, n·M/10 mg/dL.
            let glucose = try #require(object.quantitySample?.quantity)
            let expected = Double(number(index))! * Double(index + 100) / 10
            #expect(abs(try glucose.doubleValue(for: milligramsPerDecilitre) - expected) <= expected * 1e-12, "record \(index)")
        }

        var summary = ImportSummary()
        for index in 0..<(ImportSummary.reasonLimit + 20) { summary.skip("Element\(index): not held") }
        summary.skip("Element0: not held")
        #expect(summary.skipped.count == ImportSummary.reasonLimit + 1)
        #expect(summary.skipped[ImportSummary.otherReasons] == 20 && summary.skipped["Element0: not held"] == 2)
    }

    @Test("a last segment that outlasts its workout by a fraction of a second (whole-second ends) ends with it; by two seconds, the workout is rejected")
    func segmentsAtTheWorkoutsEnd() throws {
        func workout(overshoot seconds: Double) -> String {
            // The segment starts 10 s before the end and lasts 10 s and the overshoot, in minutes.
            let minutes = (10 + seconds) / 60
            return """
                 <Workout workoutActivityType="HKWorkoutActivityTypeRunning" sourceName="Watch" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:30:00 +0000">
                  <WorkoutEvent type="HKWorkoutEventTypeSegment" date="2025-05-18 12:29:50 +0000" duration="\(minutes)" durationUnit="min"/>
                  <WorkoutActivity uuid="0A1B2C3D-0000-4000-8000-00000000002\(Int(seconds))" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:30:00 +0000">
                   <WorkoutEvent type="HKWorkoutEventTypeLap" date="2025-05-18 12:29:50 +0000" duration="\(minutes)" durationUnit="min"/>
                  </WorkoutActivity>
                 </Workout>
                """
        }
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<HealthData locale=\"en_GB\">\n" + workout(overshoot: 0.6) + workout(overshoot: 2) + "</HealthData>\n"
        var workouts: [Workout] = []
        var rejections: [String] = []
        for item in try Self.read(xml) {
            switch item {
            case .workout(let workout, _, _, _): workouts.append(workout)
            case .rejected(let element, _, let reason, _): rejections.append("\(element): \(reason)")
            default: break
            }
        }
        let kept = try #require(workouts.first)
        #expect(workouts.count == 1 && kept.events.map(\.endDate) == [kept.endDate])
        #expect(kept.activities.first?.events.map(\.endDate) == [kept.endDate])
        #expect(rejections.count == 1 && rejections[0].contains("Workout"), "\(rejections)")
    }

    @Test("an element the importer does not read inside a record, correlation, workout or prescription is counted as skipped, and the entries inside it go nowhere")
    func unknownChildren() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <HealthData locale="en_GB">
             <Record type="HKQuantityTypeIdentifierStepCount" sourceName="Phone" unit="count" startDate="2025-05-18 12:00:00 +0000" endDate="2025-05-18 12:05:00 +0000" value="400">
              <Gadget><MetadataEntry key="stray" value="1"/></Gadget>
              <MetadataEntry key="kept" value="2"/>
             </Record>
             <Correlation type="HKCorrelationTypeIdentifierBloodPressure" sourceName="Cuff" startDate="2025-05-18 08:00:00 +0000" endDate="2025-05-18 08:00:00 +0000">
              <Record type="HKQuantityTypeIdentifierBloodPressureSystolic" sourceName="Cuff" unit="mmHg" startDate="2025-05-18 08:00:00 +0000" endDate="2025-05-18 08:00:00 +0000" value="120"/>
              <Cuff><MetadataEntry key="stray" value="1"/></Cuff>
              <Record type="HKQuantityTypeIdentifierBloodPressureDiastolic" sourceName="Cuff" unit="mmHg" startDate="2025-05-18 08:00:00 +0000" endDate="2025-05-18 08:00:00 +0000" value="80"/>
             </Correlation>
             <Workout workoutActivityType="HKWorkoutActivityTypeWalking" sourceName="Phone" startDate="2025-05-18 13:00:00 +0000" endDate="2025-05-18 13:30:00 +0000">
              <WorkoutRoute sourceName="Phone" startDate="2025-05-18 13:00:00 +0000" endDate="2025-05-18 13:30:00 +0000">
               <FileReference path="/workout-routes/a.gpx"/>
              </WorkoutRoute>
              <Weather><FileReference path="/workout-routes/b.gpx"/></Weather>
             </Workout>
             <VisionPrescription type="glasses" dateIssued="2025-01-10 09:00:00 +0000">
              <RightEye sphere="-1" sphereUnit="D"><MetadataEntry key="stray" value="1"/></RightEye>
              <Frame/>
             </VisionPrescription>
            </HealthData>
            """
        var skipped: [String] = []
        var objects: [HealthObject] = []
        var routes: [RouteReference] = []
        for item in try Self.read(xml) {
            switch item {
            case .skipped(let element, let reason, _): skipped.append("\(element): \(reason)")
            case .sample(let object, _, _, _): objects.append(object)
            case .visionPrescription(let prescription, _): objects.append(.visionPrescription(prescription))
            case .correlation(let correlation, _, _): objects.append(.correlation(correlation))
            case .workout(_, let references, _, _): routes += references
            case .rejected(_, _, let reason, let line): Issue.record("line \(line): \(reason)")
            default: break
            }
        }
        #expect(skipped == [
            "Gadget: the ledger does not hold Gadget elements inside a Record",
            "Cuff: the ledger does not hold Cuff elements inside a Correlation",
            "Weather: the ledger does not hold Weather elements inside a Workout",
            "Frame: the ledger does not hold Frame elements inside a VisionPrescription",
        ])
        #expect(objects.allSatisfy { $0.metadata["stray"] == nil } && objects.first?.metadata["kept"] == .number(2))
        let pressure = try #require(objects.compactMap(\.correlation).first)
        #expect(pressure.objects.count == 2 && pressure.objects.allSatisfy { $0.metadata["stray"] == nil })
        #expect(routes.map(\.path) == ["/workout-routes/a.gpx"])
    }
}
