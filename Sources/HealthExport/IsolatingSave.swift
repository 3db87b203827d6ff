import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import HealthModel

extension HealthStore {
    /// Saves `objects` in one call; when the batch is refused (by the server: `invalidArgument`,
    /// or `alreadyExists` for a UUID it holds; by the SDK: `resourceExhausted` for a request
    /// larger than a frame), splits it in halves until the refused objects stand alone, so one
    /// bad object never costs its neighbours. Every object ends up either answered or
    /// refused, in order.
    ///
    /// - Parameters:
    ///   - saved: called with an object's index and the server's answer.
    ///   - refused: called with a refused object's index and the server's error.
    /// - Throws: any other ``RPCError`` (a lost connection, an expired credential…).
    func saveIsolatingRefusals(
        _ objects: [HealthObject], saved: (Int, SaveResult) -> Void, refused: (Int, RPCError) -> Void
    ) async throws {
        // A stack of ranges still to save, the next on top.
        var ranges = [0..<objects.count]
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
}

/// Seconds since `start`.
func seconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}
