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
        [("name", name), ("manufacturer", manufacturer), ("model", model), ("hardwareVersion", hardwareVersion),
         ("firmwareVersion", firmwareVersion), ("softwareVersion", softwareVersion),
         ("localIdentifier", localIdentifier), ("udiDeviceIdentifier", udiDeviceIdentifier)]
    }
}
