// swift-tools-version: 6.1
import PackageDescription

// The benchmarks live in their own package so that building and testing HealthLedger never
// needs the peers' client libraries: `tools/bench.sh` installs them and builds this package.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "HealthLedgerBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "HealthLedger", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/grpc/grpc-swift-2.git", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", from: "2.9.2"),
    ],
    targets: [
        // PostgreSQL's C client library, as Debian's libpq-dev installs it.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // SQLite, as Debian's libsqlite3-dev installs it.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // The peers: PostgreSQL and SQLite doing the benchmark's work through their own clients.
        .target(
            name: "BenchmarkPeers",
            dependencies: ["CLibPQ", "CSQLite"],
            swiftSettings: swiftSettings
        ),
        // The benchmark report: every scenario of TARGETS.md against a separate healthledgerd,
        // with raw LMDB, loopback TCP, PostgreSQL and SQLite measured in the same run.
        .executableTarget(
            name: "healthledger-bench",
            dependencies: [
                "BenchmarkPeers",
                .product(name: "HealthModel", package: "HealthLedger"),
                .product(name: "Ledger", package: "HealthLedger"),
                .product(name: "HealthLedgerSDK", package: "HealthLedger"),
                .product(name: "HealthExport", package: "HealthLedger"),
                .product(name: "LedgerSchema", package: "HealthLedger"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
