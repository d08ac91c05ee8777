// swift-tools-version: 6.1
//
// libFuzzer targets for StrataEngine and the Strata object layer, in their
// own package so that the sanitizer flags stay out of the library. Run from
// the repository root:
//
//     Fuzz/run [SECONDS]
//
// which builds with `swift build -c release --toolset toolset.json` (the
// toolset adds `-sanitize=fuzzer,address` to the targets' compiles and links
// but not to host tools such as the @Model macro plugin) and runs each target
// over a copy of its seed corpus in `corpus/`. The seeds are made by
// `swift run fuzz-make-seeds` (a plain build, no sanitizer).
import PackageDescription

/// A fuzz target: `main.swift` defines `LLVMFuzzerTestOneInput` and hands
/// it to libFuzzer's driver. (SwiftPM links every executable with its own
/// `main`, renamed per module, so libFuzzer's `main` cannot be used.)
/// `harness` is the product holding the target's harness.
func fuzzTarget(_ name: String, harness: String = "StrataTesting") -> Target {
    .executableTarget(
        name: name,
        dependencies: ["CLibFuzzer", .product(name: harness, package: "Strata")]
    )
}

let package = Package(
    name: "StrataFuzz",
    dependencies: [
        // Without the Sync trait: the decoders' harness reads sync payloads
        // (StrataSync), and none of the targets talks to a server.
        .package(name: "Strata", path: "..", traits: [])
    ],
    targets: [
        .systemLibrary(name: "CLibFuzzer", path: "Sources/CLibFuzzer"),
        fuzzTarget("fuzz-store-file"),
        fuzzTarget("fuzz-wal"),
        fuzzTarget("fuzz-shared-index"),
        fuzzTarget("fuzz-operations"),
        fuzzTarget("fuzz-object-store", harness: "StrataObjectTesting"),
        fuzzTarget("fuzz-decoders", harness: "StrataObjectTesting"),
        .executableTarget(
            name: "fuzz-make-seeds",
            dependencies: [
                .product(name: "StrataEngine", package: "Strata"),
                .product(name: "StrataTesting", package: "Strata"),
                .product(name: "StrataObjectTesting", package: "Strata"),
            ]
        ),
    ]
)
