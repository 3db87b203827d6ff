import SwiftProtobuf

/// The field numbers of one `healthledger.v1` message, for the codecs written by hand (the
/// hot paths: objects, events, statistics, change pages) that read and write the wire format
/// without the generated types.
///
/// One enum per message: each case is a field the codecs use, named as the schema names it in
/// JSON (lowerCamelCase) and numbered as the schema numbers it. `FieldNumberTests` holds every
/// case to the generated message's field of that number, so a schema change that moves a
/// field fails there, not in a stored ledger.
///
/// The enums are `@usableFromInline` so that the readers in other modules (replay's, the
/// SDK's) get their numbers inlined instead of calling `init(rawValue:)` for every field.
@usableFromInline
package protocol ProtoFields: RawRepresentable<Int>, CaseIterable, Sendable {
    /// The generated message these are the fields of.
    associatedtype Message: SwiftProtobuf.Message
}

// MARK: - objects.proto

/// `healthledger.v1.HealthObject`: the common fields, then one body (a oneof).
@usableFromInline package enum HealthObjectField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_HealthObject
    case uuid = 1, type, sourceRevision, device, metadata, startUs, endUs
    case quantity = 10, category, visionPrescription, workout, workoutRoute, correlation, activitySummary, audiogram, clinicalRecord, electrocardiogram,
        heartbeatSeries, stateOfMind, userAnnotatedMedication, medicationDoseEvent
}

/// `healthledger.v1.SourceRevision`.
@usableFromInline package enum SourceRevisionField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_SourceRevision
    case source = 1, version, productType, operatingSystemVersion
}

/// `healthledger.v1.Source`.
@usableFromInline package enum SourceField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_Source
    case bundleIdentifier = 1, name
}

/// `healthledger.v1.Device`.
@usableFromInline package enum DeviceField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_Device
    case name = 1, manufacturer, model, hardwareVersion, firmwareVersion, softwareVersion, localIdentifier, udiDeviceIdentifier
}

/// `healthledger.v1.Quantity`.
@usableFromInline package enum QuantityField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_Quantity
    case value = 1, unit
}

/// `healthledger.v1.MetadataEntry`: the key, then one value (a oneof).
@usableFromInline package enum MetadataEntryField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_MetadataEntry
    case key = 1, stringValue, numberValue, dateUs, quantityValue
}

/// `healthledger.v1.QuantitySampleBody`.
@usableFromInline package enum QuantitySampleBodyField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_QuantitySampleBody
    case quantity = 1, series
}

/// `healthledger.v1.QuantitySeriesEntry`.
@usableFromInline package enum QuantitySeriesEntryField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_QuantitySeriesEntry
    case value = 1, startUs, endUs
}

/// `healthledger.v1.CategorySampleBody`.
@usableFromInline package enum CategorySampleBodyField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_CategorySampleBody
    case value = 1
}

/// `healthledger.v1.VisionPrescriptionBody`.
@usableFromInline package enum VisionPrescriptionBodyField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_VisionPrescriptionBody
    case prescriptionType = 1, description, rightEye, leftEye
}

/// `healthledger.v1.LensSpecification`.
@usableFromInline package enum LensSpecificationField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_LensSpecification
    case sphere = 1, cylinder, axis, addPower, vertexDistance, prism, farPupillaryDistance, nearPupillaryDistance, baseCurve, diameter
}

/// `healthledger.v1.Prism`.
@usableFromInline package enum PrismField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_Prism
    case amount = 1, angle, baseDirection, eye
}

/// `healthledger.v1.WorkoutRouteBody`.
@usableFromInline package enum WorkoutRouteBodyField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_WorkoutRouteBody
    case workoutUuid = 1
}

/// `healthledger.v1.CorrelationBody`.
@usableFromInline package enum CorrelationBodyField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_CorrelationBody
    case objects = 1, memberUuids
}

/// `healthledger.v1.Attachment`: an attachment's description.
@usableFromInline package enum AttachmentField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_Attachment
    case uuid = 1, objectUuid, name, contentType, size
}

// MARK: - ledger.proto

/// `healthledger.v1.LedgerEvent`: the header, then the kind's body.
@usableFromInline package enum LedgerEventField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_LedgerEvent
    case previousHash = 1, sequence, formatVersion, commitTimeUs, actor, kind, objectType, objectUuid
    case bodyCommitment = 9, erasedHash
    case bodySalt = 14, body
}

/// `healthledger.v1.Actor`.
@usableFromInline package enum ActorField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_Actor
    case kind = 1, source
}

/// `healthledger.v1.AttachmentAdded`: the description, then the bytes.
@usableFromInline package enum AttachmentAddedField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_AttachmentAdded
    case attachment = 1, data
}

/// `healthledger.v1.RouteLocationsAdded`.
@usableFromInline package enum RouteLocationsAddedField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_RouteLocationsAdded
    case routeUuid = 1, chunk, locations
}

// MARK: - rpc.proto

/// `healthledger.v1.Frame`: the fields of the frames that open and answer every call, which
/// the SDK and the server write (and read) directly.
@usableFromInline package enum FrameField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_Frame
    case callId = 1, request, message, status
}

/// `healthledger.v1.CallRequest`, which the SDK writes directly.
@usableFromInline package enum CallRequestField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_CallRequest
    case method = 1, credential, timeoutMs, payload, initialWindow, asOfSequence, asOfTimeUs
}

/// `healthledger.v1.SaveRequest`, and `SampleBatch` (its one field numbered alike, which
/// `FieldNumberTests` also holds).
@usableFromInline package enum SaveRequestField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_SaveRequest
    case objects = 1
}

/// `healthledger.v1.SaveResponse`.
@usableFromInline package enum SaveResponseField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_SaveResponse
    case outcomes = 1
}

/// `healthledger.v1.SaveOutcome`.
@usableFromInline package enum SaveOutcomeField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_SaveOutcome
    case uuid = 1, disposition, otherUuid
}

/// `healthledger.v1.ChangeBatch`.
@usableFromInline package enum ChangeBatchField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_ChangeBatch
    case added = 1, deleted, anchor, hasMore, caughtUp
}

/// `healthledger.v1.RouteBatch`.
@usableFromInline package enum RouteBatchField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_RouteBatch
    case locations = 1, done
}

/// `healthledger.v1.StatisticsBatch`.
@usableFromInline package enum StatisticsBatchField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_StatisticsBatch
    case results = 1, complete
}

/// `healthledger.v1.StatisticsResult`.
@usableFromInline package enum StatisticsResultField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_StatisticsResult
    case startUs = 1, endUs, unit, values, sources
}

/// `healthledger.v1.SourceStatistics`.
@usableFromInline package enum SourceStatisticsField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_SourceStatistics
    case source = 1, values
}

/// `healthledger.v1.StatisticsValues`.
@usableFromInline package enum StatisticsValuesField: Int, ProtoFields {
    @usableFromInline package typealias Message = Healthledger_V1_StatisticsValues
    case sum = 1, average, minimum, maximum, mostRecent, mostRecentStartUs, mostRecentEndUs, durationSeconds
}

// MARK: - Writing and reading by name

extension ProtoWriter {
    @inlinable package mutating func varint(field: some ProtoFields, _ value: UInt64) { varint(field: field.rawValue, value) }
    @inlinable package mutating func bytes(field: some ProtoFields, _ value: some Collection<UInt8>) { bytes(field: field.rawValue, value) }
    @inlinable package mutating func bytes(field: some ProtoFields, _ value: [UInt8]) { bytes(field: field.rawValue, value) }
    @inlinable package mutating func string(field: some ProtoFields, _ value: String) { string(field: field.rawValue, value) }
    @inlinable package mutating func presentString(field: some ProtoFields, _ value: String) { presentString(field: field.rawValue, value) }
    @inlinable package mutating func signed(field: some ProtoFields, _ value: Int64) { signed(field: field.rawValue, value) }
    @inlinable package mutating func presentSigned(field: some ProtoFields, _ value: Int64) { presentSigned(field: field.rawValue, value) }
    @inlinable package mutating func double(field: some ProtoFields, _ value: Double, present: Bool = false) {
        double(field: field.rawValue, value, present: present)
    }
    @inlinable package mutating func message(field: some ProtoFields, long: Bool = false, _ body: (inout ProtoWriter) -> Void) {
        message(field: field.rawValue, long: long, body)
    }
    @inlinable package mutating func message(field: some ProtoFields, _ value: [UInt8]) { message(field: field.rawValue, value) }
    @inlinable package mutating func message(field: some ProtoFields, _ value: UnsafeRawBufferPointer) { message(field: field.rawValue, value) }
    @inlinable package static func messageSize(field: some ProtoFields, length: Int) -> Int { messageSize(field: field.rawValue, length: length) }
}

extension ProtoReader {
    /// ``field(_:in:)`` by name.
    @inlinable package static func field(_ field: some ProtoFields, in message: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        try Self.field(field.rawValue, in: message)
    }
}
