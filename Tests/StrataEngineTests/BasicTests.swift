import StrataEngine
import StrataTesting
import XCTest

final class BasicTests: EngineTestCase {
    func testPutGetDeleteAcrossReopen() throws {
        var db = try open()
        try db.write { tx in
            let t = try tx.createTree("t")
            try tx.put(bytes("b"), bytes("2"), in: t)
            try tx.put(bytes("a"), bytes("1"), in: t)
            try tx.put(bytes("c"), bytes("3"), in: t)
            XCTAssertTrue(try tx.delete(bytes("c"), in: t))
            XCTAssertFalse(try tx.delete(bytes("zz"), in: t))
        }
        try db.close()
        db = try open()
        try db.read { tx in
            let t = try tx.tree("t")
            XCTAssertEqual(try tx.get(bytes("a"), in: t), bytes("1"))
            XCTAssertEqual(try tx.get(bytes("b"), in: t), bytes("2"))
            XCTAssertNil(try tx.get(bytes("c"), in: t))
            XCTAssertEqual(try tx.count(t), 2)
            XCTAssertEqual(try tx.scan(t).map(\.key), [bytes("a"), bytes("b")])
        }
    }

    /// `get(_:in:into:)` reads into a buffer the caller reuses: the value,
    /// inline or in overflow pages, replaces what the buffer held, and an
    /// absent key empties it. Inside a write it sees the transaction's own
    /// puts, as `get(_:in:)` does.
    func testGetIntoABufferMatchesGet() throws {
        let db = try open()
        let large = (0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var buffer: [UInt8] = Array(repeating: 0xEE, count: 40)
        try db.write { tx in
            let t = try tx.createTree("t")
            try tx.put(bytes("small"), bytes("one"), in: t)
            try tx.put(bytes("large"), large, in: t)
            XCTAssertTrue(try tx.get(bytes("small"), in: t, into: &buffer))
            XCTAssertEqual(buffer, bytes("one"))
        }
        try db.read { tx in
            let t = try tx.tree("t")
            for key in ["small", "large", "small", "absent", "large"] {
                let found = try tx.get(bytes(key), in: t, into: &buffer)
                let expected = try tx.get(bytes(key), in: t)
                XCTAssertEqual(found, expected != nil, key)
                XCTAssertEqual(buffer, expected ?? [], key)
            }
            XCTAssertEqual(buffer, large)
        }
    }

    func testManyKeysSplitAndMergeBackToOnePage() throws {
        let db = try open()
        let n = 20_000
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<n { try tx.put(bytes("key\(i)"), bytes("value\(i)"), in: t) }
        }
        var report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
        XCTAssertEqual(report.trees.first { $0.name == "t" }?.entries, n)
        XCTAssertGreaterThan(report.trees.first { $0.name == "t" }?.height ?? 0, 1)
        try db.write { tx in
            let t = try tx.tree("t")
            for i in 0..<n { XCTAssertTrue(try tx.delete(bytes("key\(i)"), in: t)) }
        }
        report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
        let stats = report.trees.first { $0.name == "t" }
        XCTAssertEqual(stats?.entries, 0)
        XCTAssertEqual(stats?.pages, 1, "an emptied tree collapses to its root page")
    }

    func testCursorBothDirections() throws {
        let db = try open()
        let keys = (0..<3000).map { bytes(String(format: "%05d", $0 * 2)) }
        try db.write { tx in
            let t = try tx.createTree("t")
            for k in keys.shuffled() { try tx.put(k, k, in: t) }
        }
        try db.read { tx in
            let c = try tx.cursor(try tx.tree("t"))
            var seen: [[UInt8]] = []
            var more = try c.first()
            while more {
                seen.append(try c.key())
                more = try c.next()
            }
            XCTAssertEqual(seen, keys)
            seen.removeAll()
            more = try c.last()
            while more {
                seen.append(try c.key())
                more = try c.previous()
            }
            XCTAssertEqual(seen, keys.reversed())
            XCTAssertTrue(try c.seek(bytes("00101")))
            XCTAssertEqual(try c.key(), bytes("00102"))
            XCTAssertFalse(try c.seek(bytes("99999")))
        }
    }

    /// Regression (found while writing the fuzz seed generator): a tree
    /// created in a transaction, in a store with no free page, could not be
    /// looked up, re-created or dropped in that same transaction.
    func testTreeCreatedInATransactionIsUsableInIt() throws {
        let db = try open()
        try db.write { tx in
            let created = try tx.createTree("t")
            XCTAssertEqual(try tx.tree("t"), created)
            XCTAssertEqual(try tx.createTree("t"), created)
            try tx.put(bytes("k"), bytes("v"), in: try tx.tree("t"))
            XCTAssertEqual(try tx.count(created), 1)
            _ = try tx.createTree("u")
            XCTAssertTrue(try tx.dropTree("u"))
        }
        try db.read { tx in
            XCTAssertEqual(try tx.get(bytes("k"), in: try tx.tree("t")), bytes("v"))
            XCTAssertNil(try tx.treeIfPresent("u"))
        }
    }
}
