import StrataEngine
import StrataTesting
import XCTest

/// Seeded random operation sequences against an in-memory sorted map.
/// Replay a failure with the seed it prints: `STRATA_SEED=<seed> swift test
/// --filter DifferentialTests`. `STRATA_DIFF_OPS` sets the operations per
/// run (default 60,000, so the two page sizes give 120,000 per CI run).
final class DifferentialTests: EngineTestCase {
    var operationsPerRun: Int {
        environmentValue("STRATA_DIFF_OPS").flatMap(Int.init) ?? 60_000
    }

    func run(pageSize: Int, durability: Durability, label: String) throws {
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: label)
        var random = SeededRandom(seed: seed)
        let path = directory.file("diff-\(pageSize).strata")
        var options = DatabaseOptions(pageSize: pageSize, durability: durability)
        options.checkpointThresholdFrames = 200
        options.cacheSizeBytes = 64 * pageSize  // small: exercises eviction and disk reads
        let db = try Database.open(path: path, options: options)
        let runner = DifferentialRunner(db: db) { try Database.open(path: path, options: options) }
        do {
            try runner.run(operationsPerRun, choices: &random)
            try runner.verifyAll()
            try runner.db.close()
        } catch {
            XCTFail("\(label) seed \(seed): \(error)")
            try? runner.db.close()
        }
        XCTAssertGreaterThanOrEqual(runner.operations, operationsPerRun)
    }

    func testPageSize4096() throws {
        try run(pageSize: 4096, durability: .none, label: "differential 4096")
    }

    func testPageSize16384() throws {
        try run(pageSize: 16384, durability: .normal, label: "differential 16384")
    }

    func testInMemoryFileSystemSmallRun() throws {
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "differential memory fs")
        var random = SeededRandom(seed: seed)
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 50)
        let db = try Database.open(path: "/mem/store", options: options, fileSystem: fs)
        let runner = DifferentialRunner(db: db) { try Database.open(path: "/mem/store", options: options, fileSystem: fs) }
        do {
            try runner.run(5_000, choices: &random)
            try runner.db.close()
        } catch {
            XCTFail("seed \(seed): \(error)")
        }
    }
}

/// Environment lookup without Foundation.

#if canImport(Glibc)
    import Glibc
#endif
