// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Strata",
    products: [
        .library(name: "StrataEngine", targets: ["StrataEngine"]),
        .library(name: "Strata", targets: ["Strata"]),
        .library(name: "StrataTesting", targets: ["StrataTesting"]),
    ],
    targets: [
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        .target(name: "StrataEngine", dependencies: ["CZlib"]),
        .target(name: "Strata", dependencies: ["StrataEngine"]),
        .target(name: "StrataTesting", dependencies: ["StrataEngine", "CZlib"]),
        .executableTarget(name: "strata-crash-writer", dependencies: ["StrataEngine"], path: "Sources/CrashWriter"),
        .testTarget(name: "StrataEngineTests", dependencies: ["StrataEngine", "StrataTesting"]),
        .testTarget(name: "StrataTests", dependencies: ["Strata", "StrataTesting"]),
        .testTarget(name: "CrashTests", dependencies: ["StrataEngine", "StrataTesting", "strata-crash-writer"]),
    ]
)
