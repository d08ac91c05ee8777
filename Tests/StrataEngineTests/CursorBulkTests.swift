import StrataEngine
import StrataTesting
import XCTest

/// `Cursor.forEachEntry`, `Cursor.count(upTo:)` and `estimatedCount` against a
/// sorted reference, over a tree of many leaves with inline and overflow
/// values.
final class CursorBulkTests: EngineTestCase {
    func testBulkReadsMatchTheReference() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "CursorBulkTests"))
        let db = try open("bulk.strata", DatabaseOptions(durability: .none))
        var keys: [[UInt8]] = []
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in stride(from: 0, to: 20_000, by: 2) {
                let key = bytes(String(format: "k%06d", i))
                let size = i % 997 == 0 ? 5_000 : Int.random(in: 0...30, using: &random)
                try tx.put(key, [UInt8](repeating: UInt8(i & 0x7F), count: size), in: tree)
                keys.append(key)
            }
        }
        func bound(_ i: Int) -> [UInt8] { bytes(String(format: "k%06d", i)) }
        try db.read { tx in
            let tree = try tx.tree("t")
            for _ in 0..<300 {
                let low = Int.random(in: -10..<20_010, using: &random)
                let high = low + Int.random(in: 0..<(random.next() % 4 == 0 ? 20_000 : 300), using: &random)
                let lower = bound(max(low, 0))
                let upper: [UInt8]? = random.next() % 10 == 0 ? nil : bound(high)
                let expected = keys.filter { key in
                    !key.lexicographicallyPrecedes(lower) && (upper.map { key.lexicographicallyPrecedes($0) } ?? true)
                }.count
                let cursor = try tx.cursor(tree)
                try cursor.seek(lower)
                XCTAssertEqual(try cursor.count(upTo: upper), expected, "\(low)..<\(high)")

                var visited: [[UInt8]] = []
                try cursor.seek(lower)
                try cursor.forEachEntry { key, value in
                    if let upper, !Array(key).lexicographicallyPrecedes(upper) { return false }
                    visited.append(Array(key))
                    return true
                }
                XCTAssertEqual(visited.count, expected)
                XCTAssertEqual(visited.first, expected > 0 ? keys.first { !$0.lexicographicallyPrecedes(lower) } : nil)
                if upper != nil, cursor.isValid {
                    XCTAssertFalse(try cursor.key().lexicographicallyPrecedes(upper!), "stops on the first key past the range")
                }

                // A tree this small (10,000 entries) is counted, not estimated.
                XCTAssertLessThanOrEqual(keys.count, ReadTransaction.exactEstimateLimit)
                XCTAssertEqual(try tx.estimatedCount(tree, from: lower, to: upper), Double(expected), "\(low)..<\(high)")
            }
        }
    }

    /// `first()`, `next()`, `previous()` and `withEntry` against a sorted
    /// reference, in a reader that reads through the mapping and in one
    /// that reads through a page cache of 16 pages (every leaf an object
    /// the cache may evict), across leaves with inline and overflow values.
    /// A `withEntry` body that moves the cursor past several leaves still
    /// reads its buffers intact.
    func testStepsAndEntriesMatchTheReference() throws {
        for mapped in [true, false] {
            let options = DatabaseOptions(durability: .none, cacheSizeBytes: 16 * 4096, memoryMappedReads: mapped)
            let db = try open("steps-\(mapped).strata", options)
            var reference: [(key: [UInt8], value: [UInt8])] = []
            try db.write { tx in
                let tree = try tx.createTree("t")
                for i in stride(from: 0, to: 6_000, by: 2) {
                    let value = [UInt8](repeating: UInt8(i % 251), count: i % 701 == 0 ? 6_000 : 20 + i % 90)
                    reference.append((bytes(String(format: "k%06d", i)), value))
                    try tx.put(reference.last!.key, value, in: tree)
                }
            }
            try db.read { tx in
                let cursor = try tx.cursor(try tx.tree("t"))
                var seen: [(key: [UInt8], value: [UInt8])] = []
                var more = try cursor.first()
                while more {
                    seen.append(try cursor.withEntry { (Array($0), Array($1)) })
                    more = try cursor.next()
                }
                XCTAssertFalse(cursor.isValid)
                XCTAssertEqual(seen.map(\.key), reference.map(\.key), "mapped: \(mapped)")
                XCTAssertTrue(zip(seen, reference).allSatisfy { $0.value == $1.value }, "mapped: \(mapped)")

                // Backwards from the end, then forwards again from the middle.
                var back: [[UInt8]] = []
                more = try cursor.last()
                while more {
                    back.append(try cursor.key())
                    more = try cursor.previous()
                }
                XCTAssertEqual(back, reference.map(\.key).reversed(), "mapped: \(mapped)")
                XCTAssertTrue(try cursor.seek(reference[1_500].key))
                XCTAssertTrue(try cursor.previous())
                XCTAssertTrue(try cursor.next())
                XCTAssertTrue(try cursor.next())
                XCTAssertEqual(try cursor.key(), reference[1_501].key)

                // The body moves the cursor 400 entries on (tens of leaves)
                // before it reads the buffers it was given.
                XCTAssertTrue(try cursor.seek(reference[100].key))
                let (key, value, later) = try cursor.withEntry { key, value in
                    for _ in 0..<400 { XCTAssertTrue(try cursor.next()) }
                    return (Array(key), Array(value), try cursor.key())
                }
                XCTAssertEqual(key, reference[100].key, "mapped: \(mapped)")
                XCTAssertEqual(value, reference[100].value, "mapped: \(mapped)")
                XCTAssertEqual(later, reference[500].key, "mapped: \(mapped)")
            }
            try db.close()
        }
    }

    func testSeekForwardLandsWhereSeekDoes() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "CursorBulkTests.seekForward"))
        let db = try open("forward.strata", DatabaseOptions(durability: .none))
        // A tree of two levels, and one of three (where the climb stops at
        // a branch below the root, or reaches the root).
        for (name, end) in [("t", 30_000), ("deep", 400_000)] {
            try db.write { tx in
                let tree = try tx.createTree(name)
                for i in stride(from: 0, to: end, by: 3) {
                    try tx.put(bytes(String(format: "k%06d", i)), bytes("v\(i)"), in: tree)
                }
            }
            try checkSeekForward(db, tree: name, end: end, random: &random)
        }
    }

    private func checkSeekForward(_ db: Database, tree name: String, end: Int, random: inout SeededRandom) throws {
        try db.read { tx in
            let tree = try tx.tree(name)
            let forward = try tx.cursor(tree)
            let reference = try tx.cursor(tree)
            for _ in 0..<50 {
                // An ascending run with gaps of every size, then a step back.
                var position = Int.random(in: -5..<end, using: &random)
                for _ in 0..<200 {
                    position += [0, 1, 2, 3, 50, 700, 9_000][Int.random(in: 0..<7, using: &random)]
                    if Int.random(in: 0..<40, using: &random) == 0 { position -= 5_000 }
                    let key = bytes(String(format: "k%06d", max(position, 0)))
                    let exact = try key.withUnsafeBytes { try forward.seekForward($0) }
                    let valid = try reference.seek(key)
                    XCTAssertEqual(forward.isValid, valid, "\(position)")
                    guard valid else { break }
                    XCTAssertEqual(try forward.key(), try reference.key(), "\(position)")
                    XCTAssertEqual(exact, try reference.key() == key, "\(position)")
                    var value: [UInt8] = []
                    try forward.readValue { value = Array($0) }
                    XCTAssertEqual(value, try reference.value())
                }
                try forward.first()
            }
        }
    }
}
