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

    /// Values replaced by slightly larger ones, on leaves filled by a
    /// bulk of puts: a larger cell grows in place into the leaf's free gap
    /// (the cells below it move down), falls back to remove and insert
    /// (compacting or splitting the leaf) once the gap is used up, and
    /// shrinks in place leaving a hole. Every value, neighbours included,
    /// reads back as last written, and the store checks healthy after
    /// each transaction.
    func testValuesThatGrowAndShrinkInPlaceKeepTheirNeighbours() throws {
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "grow in place")
        var random = SeededRandom(seed: seed)
        let db = try open("grow.strata", DatabaseOptions(durability: .none))
        var expected: [[UInt8]: [UInt8]] = [:]
        let keys = (0..<600).map { Array("key \($0 + 100_000)".utf8) }
        try db.write { tx in
            let tree = try tx.createTree("t")
            for key in keys {
                let value = [UInt8](repeating: UInt8.random(in: 0...255, using: &random), count: 20)
                try tx.put(key, value, in: tree)
                expected[key] = value
            }
        }
        for round in 0..<30 {
            try db.write { tx in
                let tree = try tx.tree("t")
                for _ in 0..<200 {
                    let key = keys[Int.random(in: 0..<keys.count, using: &random)]
                    let old = expected[key]!.count
                    // Mostly a byte or three larger, sometimes smaller.
                    let size = max(1, old + Int.random(in: -2...3, using: &random))
                    let value = [UInt8](repeating: UInt8(truncatingIfNeeded: round &+ size), count: size)
                    try tx.put(key, value, in: tree)
                    expected[key] = value
                }
            }
            let stored = try db.read { tx in try tx.scan(try tx.tree("t")) }
            XCTAssertEqual(stored.count, keys.count, "round \(round), seed \(seed)")
            for entry in stored where expected[entry.key] != entry.value {
                return XCTFail("round \(round), seed \(seed): \(String(decoding: entry.key, as: UTF8.self)) reads back wrong")
            }
            let report = try db.check()
            XCTAssertTrue(report.isHealthy, "round \(round), seed \(seed): \(report)")
        }
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
