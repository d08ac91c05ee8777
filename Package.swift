// swift-tools-version: 6.2
import CompilerPluginSupport
import PackageDescription

/// What Xcode 26 sets for a new app target: the main actor as the default
/// isolation and "approachable concurrency", with member import visibility.
let xcode26AppSettings: [SwiftSetting] = [
    .defaultIsolation(MainActor.self),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
    .enableUpcomingFeature("InferIsolatedConformances"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "Strata",
    products: [
        .library(name: "StrataEngine", targets: ["StrataEngine"]),
        .library(name: "Strata", targets: ["Strata"]),
        // Sync through PostgreSQL (postgres-nio); an app that uses only
        // `Strata` builds none of its dependencies.
        .library(name: "StrataSync", targets: ["StrataSync"]),
        .library(name: "StrataTesting", targets: ["StrataTesting"]),
        .library(name: "StrataObjectTesting", targets: ["StrataObjectTesting"]),
        .executable(name: "trips", targets: ["trips"]),
        .executable(name: "strata", targets: ["StrataCLI"]),
    ],
    traits: [
        .trait(
            name: "Sync",
            description: "StrataSync's PostgreSQL transport (postgres-nio). On by default; a build that turns it off "
                + "(`--disable-default-traits`) compiles StrataSync without a server to talk to."),
        .default(enabledTraits: ["Sync"]),
    ],
    dependencies: [
        // Every swift-syntax from 600 to 603 builds the macros (CI tests the
        // lowest; the normal build resolves the highest).
        .package(url: "https://github.com/swiftlang/swift-syntax", "600.0.0"..<"604.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // `swift package generate-documentation` (the DocC catalog in
        // Sources/Strata/Strata.docc); a plugin, not linked into anything.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // StrataSync's transport (the Sync trait).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // SHA-256 of `.externalStorage` values (StrataSync's content
        // addresses); postgres-nio depends on it already.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        // CRC-32C for page and log checksums, with the processor's
        // instruction where it has one (C: Swift has no intrinsics for it),
        // a prefetch hint, and Linux's futex calls for the engine's waits
        // (`syscall` is variadic, which Swift cannot call).
        .target(name: "CStrataCRC32C"),
        .target(name: "StrataEngine", dependencies: ["CStrataCRC32C"]),
        .macro(
            name: "StrataMacros",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
            ]
        ),
        .target(name: "Strata", dependencies: ["StrataEngine", "StrataMacros", "CZlib"]),
        .target(
            name: "StrataSync",
            dependencies: [
                "Strata",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["Sync"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Sync"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Sync"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["Sync"])),
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Sync"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Sync"])),
            ]),
        .target(name: "StrataTesting", dependencies: ["StrataEngine"]),
        // The object-store fuzz harness and its models, and the decoders'
        // harness (sync payloads included) (Fuzz/, and the replay in
        // StrataTests).
        .target(name: "StrataObjectTesting", dependencies: ["Strata", "StrataEngine", "StrataSync", "StrataTesting"]),
        .executableTarget(name: "strata-crash-writer", dependencies: ["StrataEngine"], path: "Sources/CrashWriter"),
        // One member of the multi-process stress test's crowd.
        .executableTarget(name: "strata-stress-worker", dependencies: ["StrataEngine"], path: "Sources/StressWorker"),
        // A process of an app in the multi-process model-layer test.
        .executableTarget(name: "strata-model-worker", dependencies: ["Strata"], path: "Sources/ModelWorker"),
        // A device of the sync fault tests, killed in the middle of a push
        // and of a pull.
        .executableTarget(name: "strata-sync-device", dependencies: ["Strata", "StrataSync"], path: "Sources/SyncDevice"),
        .executableTarget(name: "trips", dependencies: ["Strata"], path: "Examples/Trips"),
        // The command-line tool (module StrataCLI: a module named `strata`
        // would clash with `Strata` on case-insensitive file systems).
        .executableTarget(
            name: "StrataCLI",
            dependencies: [
                "Strata", "StrataEngine", "StrataSync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/strata"),
        .testTarget(name: "StrataEngineTests", dependencies: ["StrataEngine", "StrataTesting", "CStrataCRC32C"]),
        .testTarget(
            name: "StrataTests", dependencies: ["Strata", "StrataTesting", "StrataObjectTesting", "strata-model-worker"]),
        .testTarget(
            name: "StrataMacrosTests",
            dependencies: [
                "StrataMacros",
                .product(name: "SwiftSyntaxMacrosTestSupport", package: "swift-syntax"),
            ]
        ),
        // SwiftData-style model files compiled with only `import Strata`,
        // in the four settings apps use: Swift 6, Swift 5, and each with
        // Xcode 26's new-app settings (default MainActor isolation and
        // approachable concurrency). The three other folders hold links to
        // FidelityTests' files, made by Tests/link-fidelity.sh.
        .target(name: "FidelitySupport", dependencies: ["Strata", "StrataTesting"], path: "Tests/FidelitySupport"),
        .testTarget(name: "FidelityTests", dependencies: ["Strata", "StrataTesting", "FidelitySupport"]),
        .testTarget(
            name: "FidelitySwift5Tests", dependencies: ["Strata", "StrataTesting", "FidelitySupport"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
        .testTarget(
            name: "FidelityMainActorTests", dependencies: ["Strata", "StrataTesting", "FidelitySupport"],
            swiftSettings: xcode26AppSettings),
        .testTarget(
            name: "FidelityMainActorSwift5Tests", dependencies: ["Strata", "StrataTesting", "FidelitySupport"],
            swiftSettings: [.swiftLanguageMode(.v5)] + xcode26AppSettings),
        .testTarget(
            name: "StrataCLITests", dependencies: ["Strata", "StrataEngine", "StrataSync", "StrataTesting", "StrataCLI"]),
        .testTarget(
            name: "StrataSyncTests",
            dependencies: [
                "Strata", "StrataSync", "StrataTesting", "strata-sync-device",
                .product(name: "Logging", package: "swift-log", condition: .when(traits: ["Sync"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["Sync"])),
            ]),
        .testTarget(
            name: "CrashTests", dependencies: ["StrataEngine", "StrataTesting", "strata-crash-writer", "strata-stress-worker"]),
    ]
)

// A test target that depends on a macro target (StrataMacrosTests) makes
// SwiftPM build every test target, and all they depend on, for the host
// as well as for the destination: Strata, postgres-nio and BoringSSL are
// compiled twice. `STRATA_WITHOUT_TEST_TARGETS` (comma-separated test target
// names) drops those test targets: CI builds and runs the others with
// `StrataMacrosTests` dropped, then the macro tests on their own.
if let unwanted = Context.environment["STRATA_WITHOUT_TEST_TARGETS"] {
    let names = Set(unwanted.split(separator: ",").map(String.init))
    package.targets.removeAll { $0.type == .test && names.contains($0.name) }
}

// CI's ThreadSanitizer step builds only the test targets it runs:
// `STRATA_TEST_TARGETS` (comma-separated test target names) keeps those
// and the targets they depend on, and drops every other target with the
// products made of it. Unset (every other build), the package is whole.
if let wanted = Context.environment["STRATA_TEST_TARGETS"] {
    let byName = Dictionary(uniqueKeysWithValues: package.targets.map { ($0.name, $0) })
    var kept: Set<String> = []
    var pending = wanted.split(separator: ",").map(String.init)
    while let name = pending.popLast() {
        guard let target = byName[name], kept.insert(name).inserted else { continue }
        for dependency in target.dependencies {
            switch dependency {
            case .targetItem(let name, _), .byNameItem(let name, _): pending.append(name)
            default: break
            }
        }
    }
    package.targets.removeAll { !kept.contains($0.name) }
    package.products.removeAll { product in
        let targets = (product as? Product.Library)?.targets ?? (product as? Product.Executable)?.targets ?? []
        return !targets.allSatisfy(kept.contains)
    }
}

// `STRATA_OPTIMIZE` (comma-separated target names) compiles those targets
// with `-O` in a debug build: CI's test run, whose time goes mostly to the
// engine's randomized, crash and spill suites, takes the engine and its
// test support this way (assertions stay: the engine has no `assert`,
// only `precondition` and thrown errors, which `-O` keeps). Unset, every
// target builds as the configuration says.
if let optimized = Context.environment["STRATA_OPTIMIZE"] {
    let names = Set(optimized.split(separator: ",").map(String.init))
    for target in package.targets where names.contains(target.name) {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"])]
    }
}
