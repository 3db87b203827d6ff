import Foundation
import HealthModel

/// One measurement of an electrocardiogram's lead I (HealthKit's `HKElectrocardiogram.Voltage`).
public struct ElectrocardiogramVoltage: Sendable, Hashable {
    /// Seconds since the recording's start.
    public var timeSinceStart: TimeInterval
    /// The voltage, in µV.
    public var microvolts: Double
}

/// The voltage measurements of an electrocardiogram in batches (HealthKit's
/// `HKElectrocardiogramQueryDescriptor`), as far as the caller may read it: the recording (at
/// most 200,000 measurements) is fetched once, then handed out a batch at a time.
///
/// ```swift
/// for try await batch in ElectrocardiogramQueryDescriptor(recording.uuid).results(for: store) {
///     plot(batch)
/// }
/// ```
public struct ElectrocardiogramQueryDescriptor: Sendable, Hashable {
    public var uuid: UUID
    /// Measurements per batch.
    public var batchSize: Int

    public init(_ uuid: UUID, batchSize: Int = 1_024) {
        self.uuid = uuid
        self.batchSize = max(1, batchSize)
    }

    /// Every measurement, in time order.
    /// - Throws: ``HealthError`` `noData` when there is no such recording the caller may read.
    public func result(for store: HealthStore) async throws -> [ElectrocardiogramVoltage] {
        var all: [ElectrocardiogramVoltage] = []
        for try await batch in results(for: store) { all += batch }
        return all
    }

    /// The measurements in batches of ``batchSize``, in time order.
    public func results(for store: HealthStore) -> AsyncThrowingStream<[ElectrocardiogramVoltage], any Error> {
        let uuid = self.uuid
        return inBatches(of: batchSize) {
            guard let recording = try await store.object(with: uuid)?.electrocardiogram else {
                throw HealthError(.noData, "no electrocardiogram \(uuid) that this credential may read", field: "uuid")
            }
            let hertz = (try? recording.samplingFrequency.doubleValue(for: .hertz)) ?? 1
            return recording.voltages.enumerated().map { ElectrocardiogramVoltage(timeSinceStart: Double($0) / hertz, microvolts: Double($1)) }
        }
    }
}

/// What `load` returns, handed out `size` at a time: the series queries' streams, which fetch
/// their object once (at most 200,000 items) and hand it out in batches.
func inBatches<Element: Sendable>(of size: Int, _ load: @escaping @Sendable () async throws -> [Element]) -> AsyncThrowingStream<[Element], any Error> {
    AsyncThrowingStream { continuation in
        let task = Task {
            do {
                let all = try await load()
                let size = max(1, size)
                var start = 0
                while start < all.count, !Task.isCancelled {
                    let end = min(start + size, all.count)
                    continuation.yield(Array(all[start..<end]))
                    start = end
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
    }
}
