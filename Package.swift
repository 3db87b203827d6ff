// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "HealthLedger",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HealthModel", targets: ["HealthModel"]),
        .library(name: "LedgerSchema", targets: ["LedgerSchema"]),
        .library(name: "Ledger", targets: ["Ledger"]),
        .library(name: "HealthLedgerSDK", targets: ["HealthLedgerSDK"]),
        .library(name: "HealthLedgerServer", targets: ["HealthLedgerServer"]),
        .library(name: "HealthExport", targets: ["HealthExport"]),
        .executable(name: "healthledger", targets: ["healthledger"]),
        .executable(name: "healthledgerd", targets: ["healthledgerd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.30.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/weichsel/ZIPFoundation.git", from: "0.9.19"),
        .package(url: "https://github.com/grpc/grpc-swift-2.git", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", from: "2.9.2"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    ],
    targets: [
        // LMDB, as Debian's liblmdb-dev installs it.
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        // libxml2, as Debian's libxml2-dev installs it: a streaming (SAX) XML parser.
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]
        ),
        // AES-GCM, AES-GCM-SIV and AES with keys set up once, and SHA-256 without an allocation,
        // from swift-crypto's BoringSSL; the system's random bytes in one call (ledger_aead.h).
        .target(
            name: "CLedgerAEAD",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")]
        ),
        // A small, closure-scoped Swift API over LMDB.
        .target(
            name: "LMDB",
            dependencies: ["CLMDB"],
            swiftSettings: swiftSettings
        ),
        // The health data model: units, types, objects, validation. Pure Swift, no I/O.
        .target(
            name: "HealthModel",
            swiftSettings: swiftSettings
        ),
        // The language-neutral schema (generated from Protos/) and its mapping to HealthModel.
        .target(
            name: "LedgerSchema",
            dependencies: [
                "HealthModel",
                "CLedgerAEAD",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The ledger: hash-chained event log, projections, group commit, queries, replay, verify.
        .target(
            name: "Ledger",
            dependencies: [
                "LMDB",
                "HealthModel",
                "LedgerSchema",
                "CLedgerAEAD",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Health data in and out: Apple Health exports (XML + GPX, streamed from a zip) and
        // HealthLedger's own JSON Lines, read and written without holding a file in memory.
        .target(
            name: "HealthExport",
            dependencies: [
                "CLibXML2",
                "HealthModel",
                "LedgerSchema",
                "HealthLedgerRPC",
                "HealthLedgerSDK",
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The wire protocol: framing with limits, statuses, method names. Shared by server and SDK.
        .target(
            name: "HealthLedgerRPC",
            dependencies: [
                "HealthModel",
                "LedgerSchema",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // The RPC server: connections, calls, authentication, the ledger methods, metrics.
        .target(
            name: "HealthLedgerServer",
            dependencies: [
                "HealthLedgerRPC",
                "Ledger",
                "HealthModel",
                "LedgerSchema",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The same methods as standard gRPC over HTTP/2, through the RPC server's dispatch,
        // with grpc.health.v1 and grpc.reflection.v1 (their messages generated from grpc-proto).
        .target(
            name: "HealthLedgerGRPC",
            dependencies: [
                "HealthLedgerRPC",
                "HealthLedgerServer",
                "Ledger",
                "LedgerSchema",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The owner's web app (Hummingbird): sign-in, sessions, and pages that call the ledger
        // through the SDK with the owner's credential.
        .target(
            name: "HealthLedgerWeb",
            dependencies: [
                "HealthExport",
                "HealthLedgerRPC",
                "HealthLedgerSDK",
                "HealthLedgerServer",
                "HealthModel",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // A follower's side of replication: this server's ledgers kept a copy of a primary's,
        // through the SDK's replication calls.
        .target(
            name: "HealthLedgerReplica",
            dependencies: [
                "Ledger",
                "HealthLedgerSDK",
                "HealthModel",
                "LedgerSchema",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // A cluster on etcd: membership, the leader's election and fencing, and its standby.
        .target(
            name: "HealthLedgerCluster",
            dependencies: [
                "Ledger",
                "LedgerSchema",
                "HealthLedgerReplica",
                "HealthLedgerSDK",
                "HealthLedgerServer",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HealthKit-shaped client SDK.
        .target(
            name: "HealthLedgerSDK",
            dependencies: [
                "HealthLedgerRPC",
                "HealthModel",
                "LedgerSchema",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "healthledger",
            dependencies: [
                "Ledger",
                "HealthExport",
                "HealthLedgerSDK",
                "HealthModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "healthledgerd",
            dependencies: [
                "Ledger",
                "HealthLedgerServer",
                "HealthLedgerGRPC",
                "HealthLedgerWeb",
                "HealthLedgerReplica",
                "HealthLedgerCluster",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                "HealthModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Helpers shared by the test targets (deterministic randomness, child processes,
        // rewriting a ledger's history as an attacker would).
        .target(
            name: "TestSupport",
            dependencies: [
                "LMDB", "LedgerSchema",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HealthModelTests",
            dependencies: ["HealthModel", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RPCTests",
            dependencies: [
                "HealthLedgerRPC", "HealthLedgerServer", "HealthLedgerSDK", "Ledger", "HealthModel", "LedgerSchema", "TestSupport", "healthledger", "HealthExport",
                "HealthLedgerGRPC", "HealthLedgerWeb", "HealthLedgerReplica", "HealthLedgerCluster", "CLibXML2",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            // A data directory made by an earlier release, read by the tests from the file system.
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LedgerTests",
            dependencies: [
                "Ledger", "LMDB", "HealthModel", "LedgerSchema", "healthledger", "TestSupport",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"), .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
