// swift-tools-version: 6.1
//
// libFuzzer targets for StrataEngine, in their own package so that the
// sanitizer flags stay out of the library. Run from the repository root:
//
//     Fuzz/run [SECONDS]
//
// which builds with `swift build -c release -Xswiftc -sanitize=fuzzer,address`
// and runs each target over a copy of its seed corpus in `corpus/`. The
// seeds are made by `swift run fuzz-make-seeds` (a plain build, no sanitizer).
import PackageDescription

/// A fuzz target: `main.swift` defines `LLVMFuzzerTestOneInput` and hands
/// it to libFuzzer's driver. (SwiftPM links every executable with its own
/// `main`, renamed per module, so libFuzzer's `main` cannot be used.)
func fuzzTarget(_ name: String) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["CLibFuzzer", .product(name: "StrataTesting", package: "Strata")]
    )
}

let package = Package(
    name: "StrataFuzz",
    dependencies: [
        .package(name: "Strata", path: "..")
    ],
    targets: [
        .systemLibrary(name: "CLibFuzzer", path: "Sources/CLibFuzzer"),
        fuzzTarget("fuzz-store-file"),
        fuzzTarget("fuzz-wal"),
        fuzzTarget("fuzz-operations"),
        .executableTarget(
            name: "fuzz-make-seeds",
            dependencies: [
                .product(name: "StrataEngine", package: "Strata"),
                .product(name: "StrataTesting", package: "Strata"),
            ]
        ),
    ]
)
