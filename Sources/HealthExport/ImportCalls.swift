import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel

/// The calls both importers make through the SDK, shaped for an import: a refusal is counted
/// and the import goes on; anything else ends it.
extension HealthStore {
    /// Saves `objects` in one call; when the batch is refused (by the server: `invalidArgument`,
    /// or `alreadyExists` for a UUID it holds; by the SDK: `resourceExhausted` for a request
    /// larger than a frame), splits it in halves until the refused objects stand alone, so one
    /// bad object never costs its neighbours. Every object ends up either answered or
    /// refused, in order.
    ///
    /// - Parameters:
    ///   - refusedWhole: the caller has just sent the whole list and had it refused: the
    ///     halves are sent first.
    ///   - saved: called with an object's index and the server's answer.
    ///   - refused: called with a refused object's index and the server's error.
    /// - Throws: any other ``RPCError`` (a lost connection, an expired credential…).
    func saveIsolatingRefusals(
        _ objects: [HealthObject], refusedWhole: Bool = false, saved: (Int, SaveResult) -> Void, refused: (Int, RPCError) -> Void
    ) async throws {
        // A stack of ranges still to save, the next on top.
        var ranges = [0..<objects.count]
        if refusedWhole, objects.count > 1 { ranges = [objects.count / 2..<objects.count, 0..<objects.count / 2] }
        while let range = ranges.popLast() {
            guard !range.isEmpty else { continue }
            do {
                // The whole list is sent as it is: a slice made an array copies every object.
                let results = try await save(range == objects.indices ? objects : Array(objects[range]))
                for (offset, result) in results.enumerated() { saved(range.lowerBound + offset, result) }
            } catch let error as RPCError where [.invalidArgument, .alreadyExists, .resourceExhausted].contains(error.code) {
                guard range.count > 1 else {
                    refused(range.lowerBound, error)
                    continue
                }
                let middle = range.lowerBound + range.count / 2
                ranges.append(middle..<range.upperBound)
                ranges.append(range.lowerBound..<middle)
            }
        }
    }

    /// Stores `locations` as a route of `workout` through a route builder, in calls of 5,000
    /// locations. The builder is discarded when anything fails, so that a refused route never
    /// holds one of the few builders the server keeps open for a principal.
    func saveRoute(
        _ locations: [RouteLocation], of workout: UUID, metadata: Metadata, sourceRevision: SourceRevision?, device: Device?
    ) async throws -> FinishedRoute {
        let builder = try await makeRouteBuilder()
        do {
            for start in stride(from: 0, to: locations.count, by: 5000) {
                _ = try await builder.insertRouteData(Array(locations[start..<min(start + 5000, locations.count)]))
            }
            return try await builder.finishRoute(with: workout, metadata: metadata, sourceRevision: sourceRevision, device: device)
        } catch {
            try? await builder.discard()
            throw error
        }
    }

    /// Associates `samples` with `workout` in calls of at most
    /// ``ObjectLimits/maximumAssociatedSamples``: a workout of a long day holds more samples
    /// than one call may name. Each call is idempotent, so a re-run after a failure
    /// completes the links.
    func associate(_ samples: [UUID], with workout: UUID) async throws {
        let limit = ObjectLimits.maximumAssociatedSamples
        for start in stride(from: 0, to: samples.count, by: limit) {
            try await add(Array(samples[start..<min(start + limit, samples.count)]), to: workout)
        }
    }
}

extension RPCError {
    /// Whether the server refused this request for what it holds (bad, too large, or naming
    /// an object the caller cannot see), so that an import counts it and goes on; any other
    /// error (a lost connection, an expired credential) ends the import.
    var isRefusalOfTheRequest: Bool {
        [.invalidArgument, .resourceExhausted, .notFound, .alreadyExists].contains(code)
    }
}

/// Seconds since `start`.
func seconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

extension HealthStore {
    /// Puts the sources named in `order` (bundle identifiers, highest priority first) in that
    /// order among `type`'s sources, keeping the places the ledger's other sources hold:
    /// statistics then merge overlapping samples as they did where the export came from.
    /// Sources that have saved no `type` here are passed over.
    ///
    /// - Returns: whether the order changed (false when it already was so: nothing is recorded).
    func orderSources(of type: ObjectType, as order: [String]) async throws -> Bool {
        let current = try await sourcePriority(for: type).map(\.bundleIdentifier)
        let present = Set(current)
        var seen = Set<String>()
        let wanted = order.filter { present.contains($0) && seen.insert($0).inserted }
        guard current.filter(seen.contains) != wanted else { return false }
        var next = wanted.makeIterator()
        // The wanted sources take the places they hold now, in the wanted order.
        let reordered = current.map { seen.contains($0) ? next.next()! : $0 }
        try await setSourcePriority(for: type, order: reordered)
        return true
    }
}
