// swift-tools-version: 6.1
//
// Benchmarks for StrataEngine, kept in their own package so that the engine
// itself has no third-party dependency. Run from this folder:
//
//     swift run -c release engine-bench [--count N]
//     swift run -c release process-bench [--writers N] [--commits M] [--readers R]
//     swift run -c release model-bench [--count N]
//     swift run -c release commit-bench [--saves N] [--savers 1,4,16,64]
//     swift run -c release graph-bench [--count N]
//     swift run -c release query-bench [--count N] [--only NAME] [--enumerate]
//     swift run -c release migration-bench [--count N]
//     swift run -c release sync-bench [--count N] [--batch B] [--samples S]
//     swift run -c release live-bench [--saves N] [--observers K]
import PackageDescription

let package = Package(
    name: "StrataBenchmarks",
    dependencies: [
        .package(name: "Strata", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .target(name: "BenchSupport", dependencies: [.product(name: "StrataEngine", package: "Strata")]),
        // LMDB from Debian's liblmdb-dev, engine-bench's third engine.
        .systemLibrary(name: "CLMDB", path: "Sources/CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        .executableTarget(
            name: "engine-bench",
            dependencies: [
                "BenchSupport",
                "CLMDB",
                .product(name: "StrataEngine", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "process-bench",
            dependencies: [
                .product(name: "StrataEngine", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "graph-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "query-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // StrataSync against a throwaway PostgreSQL server (Debian's
        // postgresql package).
        .executableTarget(
            name: "sync-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "StrataSync", package: "Strata"),
                .product(name: "StrataTesting", package: "Strata"),
            ]
        ),
        .executableTarget(
            name: "migration-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "commit-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "live-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .executableTarget(
            name: "model-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ]
)
