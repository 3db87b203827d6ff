import Foundation

/// Where an object came from: an app or device, by bundle identifier.
public struct Source: Sendable, Hashable, Codable, CustomStringConvertible {
    public var bundleIdentifier: String
    public var name: String

    public init(bundleIdentifier: String, name: String) {
        self.bundleIdentifier = bundleIdentifier
        self.name = name
    }

    /// The source of data the owner enters directly.
    public static let owner = Source(bundleIdentifier: "org.healthledger.owner", name: "Owner")

    public var description: String { "\(name) (\(bundleIdentifier))" }

    /// Bundle identifiers under this prefix belong to the ledger itself (the owner's source
    /// and imported sources); no app credential is ever issued for one.
    public static let reservedPrefix = "org.healthledger."

    /// The prefix of sources recorded by an import: `org.healthledger.import.`.
    public static let importedPrefix = reservedPrefix + "import."

    /// The source an import records for a name an export gives (`sourceName`):
    /// `org.healthledger.import.` + the name in lower-case letters, digits and dashes (at most
    /// 48) + `.` + 8 hex digits of the name's FNV-1a hash, so that two names never share one.
    ///
    /// Such a source is not an app: an app connecting later under the same display name has
    /// its own bundle identifier, so it neither changes nor gains the imported data.
    public static func imported(named name: String) -> Source {
        var slug = ""
        for scalar in name.lowercased().unicodeScalars {
            if scalar.isASCII, CharacterSet.alphanumerics.contains(scalar) {
                slug.unicodeScalars.append(scalar)
            } else if !slug.hasSuffix("-"), !slug.isEmpty {
                slug.append("-")
            }
            if slug.count >= 48 { break }
        }
        while slug.hasSuffix("-") { slug.removeLast() }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        let suffix = String(UInt32(truncatingIfNeeded: hash ^ (hash >> 32)), radix: 16)
        let padded = String(repeating: "0", count: 8 - suffix.count) + suffix
        return Source(bundleIdentifier: importedPrefix + (slug.isEmpty ? "source" : slug) + "." + padded, name: name)
    }
}

/// A source plus the version details of the software that saved an object.
public struct SourceRevision: Sendable, Hashable, Codable {
    public var source: Source
    public var version: String?
    /// Hardware model, e.g. `Watch2,4`.
    public var productType: String?
    /// Operating-system version, e.g. `17.1.0`.
    public var operatingSystemVersion: String?

    public init(source: Source, version: String? = nil, productType: String? = nil, operatingSystemVersion: String? = nil) {
        self.source = source
        self.version = version
        self.productType = productType
        self.operatingSystemVersion = operatingSystemVersion
    }
}

/// The hardware that produced a sample (HealthKit's `HKDevice`).
public struct Device: Sendable, Hashable, Codable {
    public var name: String?
    public var manufacturer: String?
    public var model: String?
    public var hardwareVersion: String?
    public var firmwareVersion: String?
    public var softwareVersion: String?
    public var localIdentifier: String?
    public var udiDeviceIdentifier: String?

    public init(
        name: String? = nil, manufacturer: String? = nil, model: String? = nil, hardwareVersion: String? = nil,
        firmwareVersion: String? = nil, softwareVersion: String? = nil, localIdentifier: String? = nil,
        udiDeviceIdentifier: String? = nil
    ) {
        self.name = name
        self.manufacturer = manufacturer
        self.model = model
        self.hardwareVersion = hardwareVersion
        self.firmwareVersion = firmwareVersion
        self.softwareVersion = softwareVersion
        self.localIdentifier = localIdentifier
        self.udiDeviceIdentifier = udiDeviceIdentifier
    }

    /// The fields by name, in schema order.
    public var fields: [(String, String?)] {
        var fields: [(String, String?)] = []
        forEachField { name, value in fields.append((name, value)) }
        return fields
    }

    /// Calls `body` with each field's name and value, in schema order, without building a
    /// list (for validation, once per object).
    public func forEachField(_ body: (_ name: String, _ value: String?) throws -> Void) rethrows {
        try body("name", name)
        try body("manufacturer", manufacturer)
        try body("model", model)
        try body("hardwareVersion", hardwareVersion)
        try body("firmwareVersion", firmwareVersion)
        try body("softwareVersion", softwareVersion)
        try body("localIdentifier", localIdentifier)
        try body("udiDeviceIdentifier", udiDeviceIdentifier)
    }
}
