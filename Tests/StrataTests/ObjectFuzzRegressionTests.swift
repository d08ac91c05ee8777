import Foundation
import StrataObjectTesting
import StrataTesting
import XCTest

/// Replays the seeds (`Fuzz/corpus/object-store/`) and the fixed findings
/// (`Fuzz/regressions/object-store/`) of the `fuzz-object-store` target
/// through ``ObjectFuzzHarness/objectStore(_:)``, and runs random edit
/// lists through it, so that the path is exercised without libFuzzer too.
/// The harness traps on a bug, which stops the test run.
final class ObjectFuzzRegressionTests: XCTestCase {
    /// `Fuzz/` in this checkout.
    static let fuzzDirectory: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Tests/StrataTests/ObjectFuzzRegressionTests.swift
        return parts.joined(separator: "/") + "/Fuzz"
    }()

    func testReplaySeedsAndRegressions() throws {
        let seeds = files(in: "\(Self.fuzzDirectory)/corpus/object-store")
        XCTAssertFalse(seeds.isEmpty, "no seeds in Fuzz/corpus/object-store")
        for path in seeds + files(in: "\(Self.fuzzDirectory)/regressions/object-store") {
            let bytes = try XCTUnwrap(FileManager.default.contents(atPath: path), path)
            ObjectFuzzHarness.objectStore([UInt8](bytes))
        }
    }

    /// Random edit lists (`STRATA_OBJECT_FUZZ_RUNS`, 200 by default); the
    /// seed is printed, replay with `STRATA_SEED`.
    func testRandomEdits() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "ObjectFuzzRandomEdits"))
        let runs = Int(environmentValue("STRATA_OBJECT_FUZZ_RUNS") ?? "") ?? 200
        for _ in 0..<runs {
            ObjectFuzzHarness.objectStore(ObjectFuzzHarness.randomEdits(using: &random))
        }
    }

    /// The `fuzz-decoders` target's seeds (each must decode), its fixed
    /// findings, and the seeds cut short and with bytes changed, through
    /// ``DecoderFuzzHarness/decoders(_:)``, which traps on a decoder that
    /// neither fails cleanly nor round-trips.
    func testDecoderSeedsRegressionsAndMutations() throws {
        let seeds = files(in: "\(Self.fuzzDirectory)/corpus/decoders")
        XCTAssertEqual(seeds.count, DecoderFuzzHarness.seeds().count, "Fuzz/corpus/decoders is out of date")
        var inputs: [[UInt8]] = []
        for path in seeds {
            let bytes = [UInt8](try XCTUnwrap(FileManager.default.contents(atPath: path), path))
            XCTAssertTrue(DecoderFuzzHarness.decoders(bytes), "seed \(path) does not decode")
            inputs.append(bytes)
        }
        for path in files(in: "\(Self.fuzzDirectory)/regressions/decoders") {
            DecoderFuzzHarness.decoders([UInt8](try XCTUnwrap(FileManager.default.contents(atPath: path), path)))
        }
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "DecoderMutations"))
        var refused = 0
        for seed in inputs {
            for cut in 1..<seed.count where !DecoderFuzzHarness.decoders(Array(seed.prefix(cut))) { refused += 1 }
            for _ in 0..<2_000 {
                var bytes = seed
                for _ in 0...Int.random(in: 0..<3, using: &random) {
                    bytes[Int.random(in: 1..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
                DecoderFuzzHarness.decoders(bytes)
            }
        }
        XCTAssertGreaterThan(refused, 0, "no truncated seed was refused")
    }

    /// The checked-in seeds are what `fuzz-make-seeds` makes today: the
    /// object-store seeds name trees by their index in the base store, so
    /// a base store that gains a tree moves them onto other trees (14 had
    /// drifted), and building them trapped once `h.meta` left the base.
    func testTheCorporaAreTheHarnessesSeeds() throws {
        let corpora: [(target: String, seeds: [(String, [UInt8])])] = [
            ("object-store", ObjectFuzzHarness.seeds.map { ($0.name, $0.input) }),
            ("decoders", DecoderFuzzHarness.seeds().map { ($0.name, $0.bytes) }),
        ]
        for (target, seeds) in corpora {
            for (name, bytes) in seeds {
                let path = "\(Self.fuzzDirectory)/corpus/\(target)/\(name)"
                let stored = try XCTUnwrap(FileManager.default.contents(atPath: path), "\(path) is missing")
                XCTAssertEqual([UInt8](stored), bytes, "\(path) is out of date: run `swift run fuzz-make-seeds` in Fuzz/")
            }
        }
    }

    /// Regular files in `directory`, sorted; none when it does not exist.
    func files(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { !$0.hasPrefix(".") }.map { directory + "/" + $0 }.sorted()
    }
}
