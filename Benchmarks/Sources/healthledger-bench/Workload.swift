import BenchmarkPeers
import Foundation
import HealthModel

/// The samples every system under test receives: the same values, times and sources, as
/// HealthLedger objects and as the peers' rows.
struct Workload: Sendable {
    let heartRate: QuantityType
    /// The anchored-page scenario's type, so its pages hold nothing of the other scenarios.
    let restingHeartRate: QuantityType
    let steps: QuantityType
    let beatsPerMinute: HealthUnit
    /// The statistics year: 2024-01-01 UTC, `days` long.
    let year: DateInterval
    let days: Int
    let stepSources = ["com.example.watch", "com.example.phone", "com.example.ring"].map { Source(bundleIdentifier: $0, name: $0) }
    static let ownerSource = "owner"

    init(days: Int) throws {
        heartRate = try QuantityType("HKQuantityTypeIdentifierHeartRate")
        restingHeartRate = try QuantityType("HKQuantityTypeIdentifierRestingHeartRate")
        steps = try QuantityType("HKQuantityTypeIdentifierStepCount")
        beatsPerMinute = try HealthUnit("count/min")
        self.days = days
        year = DateInterval(start: Date(timeIntervalSince1970: 1_704_067_200), duration: Double(days) * 86_400)
    }

    /// Ingest sample `index`: heart rate, one a minute from September 2020.
    func ingest(_ index: Int) -> (object: HealthObject, row: PeerSample) {
        quantity(heartRate, beatsPerMinute, Double(50 + index % 120), start: 1_600_000_000 + Int64(index) * 60, length: 0)
    }

    /// The statistics scenario's heart rate: one sample a minute through the year.
    var minutes: Int { days * 1440 }
    func minuteOfYear(_ minute: Int) -> (object: HealthObject, row: PeerSample) {
        quantity(heartRate, beatsPerMinute, Double(55 + minute % 90), start: Int64(year.start.timeIntervalSince1970) + Int64(minute) * 60, length: 0)
    }

    /// The statistics scenario's steps: each of three sources a sample every 10 minutes,
    /// lasting 10 to 15 minutes and starting 2 minutes apart, so they overlap.
    var stepsPerSource: Int { days * 144 }
    func steps(source offset: Int, _ index: Int) -> (object: HealthObject, row: PeerSample) {
        quantity(
            steps, .count, Double(100 + index % 50), start: Int64(year.start.timeIntervalSince1970) + Int64(index) * 600 + Int64(offset) * 120,
            length: 600 + Int64(offset) * 150, source: stepSources[offset])
    }

    /// The anchored-page scenario's samples, one a minute from 2022.
    func resting(_ index: Int) -> (object: HealthObject, row: PeerSample) {
        quantity(restingHeartRate, beatsPerMinute, Double(45 + index % 30), start: 1_640_995_200 + Int64(index) * 60, length: 0)
    }

    private func quantity(
        _ type: QuantityType, _ unit: HealthUnit, _ value: Double, start: Int64, length: Int64, source: Source? = nil
    ) -> (object: HealthObject, row: PeerSample) {
        let startDate = Date(timeIntervalSince1970: Double(start))
        let uuid = UUID.timeOrdered()
        let object = HealthObject.quantitySample(QuantitySample(
            type: type, quantity: Quantity(value, unit), start: startDate, end: startDate.addingTimeInterval(Double(length)), uuid: uuid,
            sourceRevision: SourceRevision(source: source ?? .owner)))
        let row = PeerSample(
            uuid: uuid, type: type.identifier, source: source?.bundleIdentifier ?? Self.ownerSource, start: start * 1_000_000,
            end: (start + length) * 1_000_000, value: value, unit: unit.description)
        return (object, row)
    }
}
