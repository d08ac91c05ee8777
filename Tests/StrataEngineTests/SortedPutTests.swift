import StrataEngine
import StrataTesting
import XCTest

/// `put(sortedKeys:values:in:)` against one-by-one puts on a reference:
/// into an empty tree and between existing keys, with replaced keys,
/// duplicates, overflow values, keys out of order, and in a transaction
/// that spilled; `check()` runs after each round and at tear-down.
final class SortedPutTests: EngineTestCase {
    func testSortedPutMatchesTheReference() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "SortedPutTests"))
        var db = try open("sorted-put.strata", DatabaseOptions(durability: .none))
        var reference: [[UInt8]: [UInt8]] = [:]
        func key(_ i: Int) -> [UInt8] { bytes(String(format: "k%07d", i)) }
        try db.write { tx in _ = try tx.createTree("t") }
        for round in 0..<10 {
            // A run of neighbours, scattered keys (some present already),
            // duplicates, now and then a large value.
            var keys: [[UInt8]] = []
            let start = Int.random(in: 0..<40_000, using: &random)
            keys += (start..<(start + Int.random(in: 1...6_000, using: &random))).map(key)
            keys += (0..<300).map { _ in key(Int.random(in: 0..<50_000, using: &random)) }
            keys.sort { $0.lexicographicallyPrecedes($1) }
            if round % 4 == 3 { keys.shuffle(using: &random) }
            let values: [[UInt8]] = keys.indices.map { index in
                let size = Int.random(in: 0..<200, using: &random) == 0 ? 5_000 : Int.random(in: 0...30, using: &random)
                return [UInt8](repeating: UInt8((index + round) & 0xFF), count: size)
            }
            try db.write { tx in try tx.put(sortedKeys: KeyBatch(keys), values: { values[$0] }, in: tx.tree("t")) }
            for (index, key) in keys.enumerated() { reference[key] = values[index] }
            try db.read { tx in
                let tree = try tx.tree("t")
                XCTAssertEqual(try tx.count(tree), reference.count, "round \(round)")
                let stored = try tx.scan(tree)
                XCTAssertEqual(stored.count, reference.count, "round \(round)")
                for (key, value) in stored where reference[key] != value {
                    XCTFail("round \(round): \(String(decoding: key, as: UTF8.self)) differs")
                    break
                }
            }
            let report = try db.check()
            XCTAssertTrue(report.isHealthy, "round \(round): \(report)")
            if round % 3 == 2 {
                try db.close()
                db = try open("sorted-put.strata", DatabaseOptions(durability: .none))
            }
        }
    }

    func testAnIndexBuiltFromSortedKeysFillsItsLeaves() throws {
        let db = try open("fill.strata", DatabaseOptions(durability: .none))
        let keys = (0..<50_000).map { bytes(String(format: "key-%08d", $0)) }
        try db.write { tx in
            let tree = try tx.createTree("sorted")
            try tx.put(sortedKeys: KeyBatch(keys), values: { _ in [] }, in: tree)
            let other = try tx.createTree("one-by-one")
            for key in keys { try tx.put(key, [], in: other) }
        }
        try db.read { tx in
            XCTAssertEqual(try tx.scan(tx.tree("sorted")).map(\.key), keys)
            XCTAssertEqual(try tx.count(tx.tree("sorted")), keys.count)
        }
        // No more pages than one-by-one appends, which fill each leaf.
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
        let pages = { (name: String) in report.trees.first { $0.name == name }?.pages ?? 0 }
        XCTAssertGreaterThan(pages("sorted"), 0)
        XCTAssertLessThanOrEqual(pages("sorted"), pages("one-by-one"))
    }

    func testSortedPutsInASpilledTransactionAreBuffered() throws {
        let options = DatabaseOptions(durability: .none, cacheSizeBytes: 16 * 4096)
        let db = try open("spilled-put.strata", options)
        let keys = (0..<20_000).map { bytes(String(format: "s%07d", $0)) }
        try db.write { tx in
            let tree = try tx.createTree("t")
            try tx.put(sortedKeys: KeyBatch(keys), values: { [UInt8](repeating: UInt8($0 & 0xFF), count: 100) }, in: tree)
            XCTAssertEqual(try tx.count(tree), keys.count)
        }
        XCTAssertGreaterThan(db.statistics.spilledPages, 0)
        try db.read { tx in
            let stored = try tx.scan(tx.tree("t"))
            XCTAssertEqual(stored.map(\.key), keys)
            XCTAssertEqual(stored[777].value, [UInt8](repeating: UInt8(777 & 0xFF), count: 100))
        }
    }
}
