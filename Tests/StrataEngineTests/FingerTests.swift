import StrataEngine
import StrataTesting
import XCTest

/// A writer remembers the leaf each of its last descents into a tree ended
/// in, and sends a lookup or put whose key lies between that leaf's
/// separators straight there. These tests change the trees' shape between
/// such operations (splits, redistributions, merges, freed pages) and check
/// every key against a reference; `check()` runs at tear-down.
final class FingerTests: EngineTestCase {
    private func key(_ i: Int) -> [UInt8] { bytes(String(format: "k%06d", i)) }

    /// A lookup leaves a finger on a leaf; filling the gaps next to it
    /// splits the leaf and moves keys the finger covered to a new page.
    /// The lookups and puts after the split must find them there.
    func testKeysMovedBySplitsAreFoundAfterALookup() throws {
        let db = try open("finger-split.strata", DatabaseOptions(durability: .none))
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in stride(from: 0, to: 3_000, by: 10) { try tx.put(key(i), [UInt8](repeating: 1, count: 40), in: tree) }
        }
        try db.write { tx in
            let tree = try tx.tree("t")
            for i in stride(from: 0, to: 3_000, by: 10) {
                XCTAssertEqual(try tx.get(key(i), in: tree), [UInt8](repeating: 1, count: 40))
                for j in (i + 1)..<(i + 10) { try tx.put(key(j), [UInt8](repeating: 2, count: 40), in: tree) }
                // Replaces, between the new keys: each must land on its key.
                for j in stride(from: i, to: i + 10, by: 3) { try tx.put(key(j), [UInt8](repeating: 3, count: 40), in: tree) }
            }
            XCTAssertEqual(try tx.count(tree), 3_000)
            for i in 0..<3_000 {
                let expected: UInt8 = i % 10 % 3 == 0 ? 3 : (i % 10 == 0 ? 1 : 2)
                XCTAssertEqual(try tx.get(key(i), in: tree), [UInt8](repeating: expected, count: 40), "key \(i)")
            }
        }
        try db.read { tx in
            let stored = try tx.scan(tx.tree("t"))
            XCTAssertEqual(stored.map(\.key), (0..<3_000).map(key))
        }
    }

    /// Deletes empty and merge the leaves a finger pointed at (their pages
    /// go back to the freelist) before more lookups and puts of the keys
    /// around them.
    func testLookupsAfterMergesFindTheSurvivors() throws {
        let db = try open("finger-merge.strata", DatabaseOptions(durability: .none))
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<4_000 { try tx.put(key(i), [UInt8](repeating: 1, count: 30), in: tree) }
        }
        try db.write { tx in
            let tree = try tx.tree("t")
            for i in stride(from: 0, to: 4_000, by: 200) {
                XCTAssertNotNil(try tx.get(key(i + 100), in: tree))
                for j in i..<(i + 190) { try tx.delete(key(j), in: tree) }
                try tx.put(key(i + 195), [UInt8](repeating: 9, count: 30), in: tree)
                XCTAssertNil(try tx.get(key(i + 100), in: tree))
                XCTAssertEqual(try tx.get(key(i + 199), in: tree), [UInt8](repeating: 1, count: 30))
            }
            XCTAssertEqual(try tx.count(tree), 200)
        }
        try db.read { tx in
            let stored = try tx.scan(tx.tree("t"))
            XCTAssertEqual(stored.map(\.key), stride(from: 0, to: 4_000, by: 200).flatMap { ($0 + 190)..<($0 + 200) }.map(key))
            for (key, value) in stored {
                let i = Int(String(decoding: key.dropFirst(), as: UTF8.self))!
                XCTAssertEqual(value.first, i % 200 == 195 ? 9 : 1, "key \(i)")
            }
        }
    }

    /// Random runs of neighbouring lookups, puts (values that shrink, grow
    /// and overflow) and deletes in two trees, in one transaction each,
    /// against a reference.
    func testRandomNeighbouringChangesMatchTheReference() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "FingerTests"))
        let db = try open("finger-random.strata", DatabaseOptions(durability: .none))
        var reference: [String: [[UInt8]: [UInt8]]] = ["a": [:], "b": [:]]
        try db.write { tx in
            _ = try tx.createTree("a")
            _ = try tx.createTree("b")
        }
        for round in 0..<6 {
            try db.write { tx in
                for _ in 0..<400 {
                    let name = Bool.random(using: &random) ? "a" : "b"
                    let tree = try tx.tree(name)
                    let start = Int.random(in: 0..<20_000, using: &random)
                    for i in start..<(start + Int.random(in: 1...40, using: &random)) {
                        let k = key(i)
                        switch Int.random(in: 0..<10, using: &random) {
                        case 0..<3:
                            XCTAssertEqual(try tx.get(k, in: tree), reference[name]![k], "round \(round) \(name) \(i)")
                        case 3..<8:
                            let size =
                                Int.random(in: 0..<100, using: &random) == 0 ? 6_000 : Int.random(in: 0...60, using: &random)
                            let value = [UInt8](repeating: UInt8(truncatingIfNeeded: i &+ round), count: size)
                            try tx.put(k, value, in: tree)
                            reference[name]![k] = value
                        default:
                            try tx.delete(k, in: tree)
                            reference[name]![k] = nil
                        }
                    }
                }
            }
            try db.read { tx in
                for name in ["a", "b"] {
                    let stored = try tx.scan(tx.tree(name))
                    XCTAssertEqual(stored.count, reference[name]!.count, "round \(round) \(name)")
                    for (key, value) in stored where reference[name]![key] != value {
                        XCTFail("round \(round) \(name): \(String(decoding: key, as: UTF8.self)) differs")
                        break
                    }
                }
            }
            let report = try db.check()
            XCTAssertTrue(report.isHealthy, "round \(round): \(report)")
        }
    }
}
