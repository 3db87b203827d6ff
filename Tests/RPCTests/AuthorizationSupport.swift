import Foundation
import HealthLedgerSDK
import Ledger
import Testing

/// Helpers shared by the authorization, leak-matrix, revocation and isolation suites.
extension TestServer {
    /// Issues a credential for another app of `ledger` (alice's by default) and lets it
    /// share `share` (asked by the app, granted by the owner, directly on the ledger).
    func addApp(_ bundle: String, name: String, share: [ObjectType] = [Samples.heartRate.objectType], in ledger: Ledger? = nil) async throws
        -> (source: Source, credential: String)
    {
        let ledger = ledger ?? self.ledger
        let source = Source(bundleIdentifier: bundle, name: name)
        let credential = try await ledger.issueCredential(for: .app(source))
        if !share.isEmpty {
            try await ledger.requestAuthorization(toShare: Set(share), read: [], by: .app(source))
            for type in share {
                try await ledger.decideAuthorization(app: bundle, type: type, direction: .share, decision: .granted, by: .owner)
            }
        }
        return (source, credential)
    }
}

enum Types {
    static let heartRate = Samples.heartRate.objectType
    static let bodyMass = try! ObjectType("HKQuantityTypeIdentifierBodyMass")
    static let stepCount = try! ObjectType("HKQuantityTypeIdentifierStepCount")
    static let activeEnergy = try! ObjectType("HKQuantityTypeIdentifierActiveEnergyBurned")
    static let bloodPressure = try! ObjectType("HKCorrelationTypeIdentifierBloodPressure")
    static let dateOfBirth = try! ObjectType("HKCharacteristicTypeIdentifierDateOfBirth")
    static let vision = ObjectType.visionPrescription
}

/// The id part (third `:`-part) of a credential string.
func credentialID(_ credential: String) -> String {
    String(credential.split(separator: ":", omittingEmptySubsequences: false)[2])
}

/// The secret part (fourth `:`-part) of a credential string.
func credentialSecret(_ credential: String) -> String {
    String(credential.split(separator: ":", omittingEmptySubsequences: false)[3])
}

/// Runs `body`, which must throw an ``RPCError`` with `code` (and, when given, HealthKit's
/// `health` code; pass `.some(nil)` to require none). Returns the error.
@discardableResult
func expectRPCError(
    _ code: RPCStatusCode, _ health: HealthError.Code?? = nil, _ what: String = "",
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> RPCError? {
    do {
        try await body()
        Issue.record("\(what): expected \(code), but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, "\(what): \(error)", sourceLocation: sourceLocation)
        if let health {
            #expect(error.healthErrorCode == health, "\(what): \(error)", sourceLocation: sourceLocation)
        }
        return error
    } catch {
        Issue.record("\(what): expected RPCError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// A message with the UUID it names replaced, to compare the shape of two errors.
func messageShape(_ error: RPCError?, naming uuid: UUID) -> String? {
    error?.message.replacingOccurrences(of: uuid.uuidString, with: "<uuid>").replacingOccurrences(of: uuid.uuidString.lowercased(), with: "<uuid>")
}

/// Every batch of a sample query, as received.
func batches(_ store: HealthStore, _ query: SampleQueryDescriptor) async throws -> [[HealthObject]] {
    var result: [[HealthObject]] = []
    for try await batch in try await store.results(for: query) { result.append(batch) }
    return result
}

func visionPrescription(issuedDay day: Double, validDays: Double = 30, description: String = "") -> VisionPrescription {
    let issued = Samples.base.addingTimeInterval(day * 86_400)
    return VisionPrescription(
        type: .glasses, dateIssued: issued, expirationDate: issued.addingTimeInterval(validDays * 86_400), description: description,
        rightEye: .glasses(sphere: try! Quantity(-1.5, "D"), cylinder: try! Quantity(-0.25, "D"), axis: try! Quantity(90, "deg")))
}

/// A watched anchored query's initial batches, up to the one that catches up, merged (a
/// call's batches grow from 128 changes: the initial changes may come in several).
func initialChanges(_ watch: inout AnchoredObjectQueryResults.AsyncIterator, sourceLocation: SourceLocation = #_sourceLocation) async throws
    -> AnchoredObjectQueryResult
{
    var merged = try #require(try await watch.next(), sourceLocation: sourceLocation)
    while !merged.caughtUp {
        let batch = try #require(try await watch.next(), sourceLocation: sourceLocation)
        merged.addedObjects += batch.addedObjects
        merged.deletedObjects += batch.deletedObjects
        merged.newAnchor = batch.newAnchor
        merged.caughtUp = batch.caughtUp
    }
    return merged
}
