import StrataEngine
import StrataTesting
import XCTest

/// `delete(sortedKeys:in:)` against one-by-one deletes on a reference,
/// with small and overflow values, present and absent keys, sorted and
/// shuffled input, puts into the space deletes freed, and reopens that
/// read every page back through validation; `check()` runs at tear-down.
final class SortedDeleteTests: EngineTestCase {
    func testSortedDeleteMatchesTheReference() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "SortedDeleteTests"))
        var db = try open("sorted.strata", DatabaseOptions(durability: .none))
        var reference: [[UInt8]: [UInt8]] = [:]
        func key(_ i: Int) -> [UInt8] { bytes(String(format: "k%07d", i)) }
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in stride(from: 0, to: 30_000, by: 2) {
                let size = Int.random(in: 0..<100, using: &random) == 0 ? 6_000 : Int.random(in: 0...40, using: &random)
                let value = [UInt8](repeating: UInt8(i & 0xFF), count: size)
                try tx.put(key(i), value, in: tree)
                reference[key(i)] = value
            }
        }
        for round in 0..<12 {
            // Runs of neighbours, scattered keys, and absent (odd) keys.
            var doomed: [[UInt8]] = []
            let start = Int.random(in: 0..<30_000, using: &random)
            doomed += (start..<min(30_000, start + Int.random(in: 1...4_000, using: &random))).map(key)
            doomed += (0..<200).map { _ in key(Int.random(in: 0..<30_000, using: &random)) }
            var unique = Array(Set(doomed))
            unique.sort { $0.lexicographicallyPrecedes($1) }
            if round % 3 == 2 { unique.shuffle(using: &random) }
            let expected = unique.filter { reference[$0] != nil }.count
            let removed = try db.write { tx in try tx.delete(sortedKeys: unique, in: tx.tree("t")) }
            XCTAssertEqual(removed, expected, "round \(round)")
            for key in unique { reference[key] = nil }
            try db.read { tx in
                let tree = try tx.tree("t")
                XCTAssertEqual(try tx.count(tree), reference.count)
                let stored = try tx.scan(tree)
                XCTAssertEqual(stored.count, reference.count)
                for (key, value) in stored where reference[key] != value {
                    XCTFail("round \(round): \(String(decoding: key, as: UTF8.self)) differs")
                    break
                }
            }
            let report = try db.check()
            XCTAssertTrue(report.isHealthy, "round \(round): \(report)")
            // Refill some of the freed space (leaves keep their holes and
            // heap bounds), then, now and then, read every page back.
            try db.write { tx in
                let tree = try tx.tree("t")
                for _ in 0..<300 {
                    let i = Int.random(in: 0..<15_000, using: &random) * 2
                    let value = [UInt8](repeating: UInt8(round), count: Int.random(in: 0...60, using: &random))
                    try tx.put(key(i), value, in: tree)
                    reference[key(i)] = value
                }
            }
            if round % 4 == 3 {
                try db.close()
                db = try open("sorted.strata", DatabaseOptions(durability: .none))
                let stored = try db.read { tx in try tx.scan(tx.tree("t")) }
                XCTAssertEqual(stored.count, reference.count, "round \(round), reopened")
            }
        }
        // Everything left, in one call.
        let rest = reference.keys.sorted { $0.lexicographicallyPrecedes($1) }
        XCTAssertEqual(try db.write { tx in try tx.delete(sortedKeys: rest, in: tx.tree("t")) }, rest.count)
        try db.read { tx in XCTAssertEqual(try tx.count(tx.tree("t")), 0) }
    }
}
