import StrataTesting
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Replays every fuzz seed (`Fuzz/corpus/<target>/`) and every fixed fuzz
/// finding (`Fuzz/regressions/<target>/`) through the same ``FuzzHarness``
/// function as the fuzz target. A harness traps on a bug, so a regression
/// stops the test run with the harness's message.
final class FuzzRegressionTests: XCTestCase {
    /// `Fuzz/` in this checkout.
    static let fuzzDirectory: String = {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Tests/StrataEngineTests/FuzzRegressionTests.swift
        return parts.joined(separator: "/") + "/Fuzz"
    }()

    /// Replays the inputs of `target`; the seed corpus must not be empty.
    func replay(_ target: String, through harness: ([UInt8]) -> Void) throws {
        let seeds = files(in: "\(Self.fuzzDirectory)/corpus/\(target)")
        XCTAssertFalse(seeds.isEmpty, "no seeds in Fuzz/corpus/\(target)")
        for path in seeds + files(in: "\(Self.fuzzDirectory)/regressions/\(target)") {
            harness(try XCTUnwrap(readFile(path), path))
        }
    }

    func testStoreFile() throws { try replay("store-file", through: FuzzHarness.storeFile) }

    func testWAL() throws { try replay("wal", through: FuzzHarness.walFile) }

    func testSharedIndex() throws { try replay("shared-index", through: FuzzHarness.sharedIndex) }

    func testOperations() throws { try replay("operations", through: FuzzHarness.operations) }

    /// Regular files in `directory`, sorted; none when it does not exist.
    func files(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var result: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if !name.hasPrefix(".") && Int32(entry.pointee.d_type) == DT_REG { result.append(directory + "/" + name) }
        }
        return result.sorted()
    }
}
