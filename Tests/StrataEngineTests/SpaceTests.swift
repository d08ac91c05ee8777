import Dispatch
import StrataEngine
import StrataTesting
import XCTest

/// Free-page reuse, the shrinking file, compaction, online backup, page sizes.
final class SpaceTests: EngineTestCase {
    func fileSize(_ path: String) -> Int { readFile(path)?.count ?? 0 }

    func fill(_ db: Database, tree: String, count: Int, valueSize: Int = 200) throws {
        try db.write { tx in
            let t = try tx.createTree(tree)
            for i in 0..<count {
                try tx.put(bytes(String(format: "%08d", i)), [UInt8](repeating: UInt8(i & 0xff), count: valueSize), in: t)
            }
        }
    }

    func testFreedPagesAreReusedAndTheFileShrinks() throws {
        let path = directory.file("shrink.strata")
        let db = try open("shrink.strata", DatabaseOptions(durability: .normal))
        try fill(db, tree: "keep", count: 100)
        try fill(db, tree: "big", count: 20_000)
        try db.checkpoint()
        let pagesFull = db.statistics.pageCount
        // Freed pages are reused: refilling after a delete does not grow.
        try db.write { tx in _ = try tx.dropTree("big") }
        XCTAssertLessThan(db.statistics.pageCount, 10, "the free tail is released at commit")
        try fill(db, tree: "big", count: 20_000)
        XCTAssertLessThanOrEqual(db.statistics.pageCount, pagesFull + 2)
        try db.write { tx in _ = try tx.dropTree("big") }
        try db.checkpoint()
        XCTAssertLessThan(fileSize(path), 20 * 4096, "the main file is truncated at checkpoint")
        try db.read { tx in XCTAssertEqual(try tx.count(try tx.tree("keep")), 100) }
    }

    func testFreePagesInTheMiddleAreListedAndReused() throws {
        let db = try open("middle.strata", DatabaseOptions(durability: .none))
        try fill(db, tree: "a", count: 10_000)
        try fill(db, tree: "b", count: 1_000)
        try db.write { tx in _ = try tx.dropTree("a") }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
        XCTAssertGreaterThan(report.freePages, 100)
        let pages = db.statistics.pageCount
        try fill(db, tree: "c", count: 5_000)
        XCTAssertEqual(db.statistics.pageCount, pages, "new data went into free pages")
    }

    func testCompactShrinksAndKeepsEverything() throws {
        let db = try open("big.strata", DatabaseOptions(durability: .none))
        try fill(db, tree: "t", count: 30_000)
        try fill(db, tree: "u", count: 10)
        try db.write { tx in
            let t = try tx.tree("t")
            for i in stride(from: 0, to: 30_000, by: 1) where i % 10 != 0 {
                try tx.delete(bytes(String(format: "%08d", i)), in: t)
            }
        }
        let compacted = directory.file("compact.strata")
        try db.compact(to: compacted)
        try db.close()
        XCTAssertLessThan(fileSize(compacted) * 4, fileSize(directory.file("big.strata")))
        let copy = try open("compact.strata")
        try copy.read { tx in
            XCTAssertEqual(try tx.count(try tx.tree("t")), 3_000)
            XCTAssertEqual(try tx.count(try tx.tree("u")), 10)
            XCTAssertEqual(try tx.get(bytes("00000990"), in: try tx.tree("t")), [UInt8](repeating: UInt8(990 & 0xff), count: 200))
        }
    }

    func testOnlineBackupIsConsistentWhileWritersGoOn() throws {
        let db = try open("live.strata", DatabaseOptions(durability: .none, checkpointThresholdFrames: 30))
        let width = 500
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<width { try tx.put(bytes("k\(i)"), bytes("0"), in: t) }
        }
        let done = AtomicFlag()
        let group = DispatchGroup()
        let failures = FailureLog()
        DispatchQueue.global().async(group: group) {
            var n = 1
            while !done.isSet {
                do {
                    try db.write { tx in
                        let t = try tx.tree("t")
                        for i in 0..<width { try tx.put(bytes("k\(i)"), bytes("\(n)"), in: t) }
                    }
                } catch {
                    failures.add("\(error)")
                    return
                }
                n += 1
            }
        }
        var backups: [String] = []
        for b in 0..<5 {
            let path = directory.file("backup\(b).strata")
            try db.backup(to: path)
            backups.append(path)
        }
        done.set()
        group.wait()
        XCTAssertEqual(failures.messages, [])
        for path in backups {
            let copy = try Database.open(path: path)
            let report = try copy.check()
            XCTAssertTrue(report.isHealthy, "\(report)")
            try copy.read { tx in
                let all = try tx.scan(try tx.tree("t"))
                XCTAssertEqual(all.count, width)
                XCTAssertEqual(Set(all.map(\.value)).count, 1, "a backup holds exactly one commit")
            }
            try copy.close()
        }
    }

    func testEveryPageSizeWithOverflowValues() throws {
        for pageSize in [4096, 8192, 16384, 32768, 65536] {
            let name = "ps\(pageSize).strata"
            var db = try open(name, DatabaseOptions(pageSize: pageSize, durability: .none))
            let big = (0..<(pageSize * 3 + 17)).map { UInt8(truncatingIfNeeded: $0 * 7) }
            try db.write { tx in
                let t = try tx.createTree("t")
                for i in 0..<200 { try tx.put(bytes("k\(i)"), i % 10 == 0 ? big : bytes("small\(i)"), in: t) }
                try tx.put([], [], in: t)
            }
            try db.close()
            db = try open(name, DatabaseOptions(pageSize: 4096))  // an existing store keeps its page size
            XCTAssertEqual(db.pageSize, pageSize)
            try db.read { tx in
                let t = try tx.tree("t")
                XCTAssertEqual(try tx.get(bytes("k10"), in: t), big)
                XCTAssertEqual(try tx.get(bytes("k11"), in: t), bytes("small11"))
                XCTAssertEqual(try tx.get([], in: t), [])
                XCTAssertEqual(try tx.count(t), 201)
            }
        }
    }
}
