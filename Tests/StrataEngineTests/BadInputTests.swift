import StrataEngine
import StrataTesting
import XCTest

/// Damaged and foreign files, bad arguments, failing disks: typed errors,
/// never a trap.
final class BadInputTests: EngineTestCase {
    /// A closed store with enough data for a few levels of tree.
    func makeStore(_ name: String = "store.strata", pageSize: Int = 4096) throws -> String {
        let path = directory.file(name)
        let db = try Database.open(path: path, options: DatabaseOptions(pageSize: pageSize, durability: .none))
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<5000 { try tx.put(bytes("key\(i)"), bytes("value \(i) padded to some length"), in: t) }
        }
        try db.close()
        return path
    }

    /// A closed in-memory store of 4096-byte pages whose catalog (page 1)
    /// holds one tree, "t", of ten entries `k0`…`k9` → `v` in one leaf (page 2).
    func makeSmallMemoryStore() throws -> (MemoryFileSystem, String) {
        let fs = MemoryFileSystem()
        let path = "/mem/s"
        let db = try Database.open(path: path, options: DatabaseOptions(durability: .none), fileSystem: fs)
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<10 { try tx.put(bytes("k\(i)"), bytes("v"), in: t) }
        }
        try db.close()
        return (fs, path)
    }

    func expectCorruptFile(_ path: String, _ contains: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try Database.open(path: path), file: file, line: line) { error in
            guard case StorageError.corruptFile(let reason) = error else {
                return XCTFail("expected corruptFile, got \(error)", file: file, line: line)
            }
            XCTAssertTrue(reason.contains(contains), "\(reason)", file: file, line: line)
        }
    }

    func testNotAStrataFile() throws {
        let path = directory.file("foreign")
        var random = SeededRandom(seed: 1)
        try writeFile(path, random.bytes(10_000))
        expectCorruptFile(path, "not a Strata store")
        try writeFile(path, bytes("SQLite format 3\0"))
        expectCorruptFile(path, "too short")
    }

    func testTruncatedFile() throws {
        let path = try makeStore()
        expectDamaged(path, because: "cut in half to be refused")
        var data = try XCTUnwrap(readFile(path))
        data.removeLast(data.count / 2)
        try writeFile(path, data)
        expectCorruptFile(path, "truncated")
    }

    func testDamagedHeader() throws {
        let path = try makeStore()
        expectDamaged(path, because: "its header is damaged to be refused")
        var data = try XCTUnwrap(readFile(path))
        data[30] ^= 0x40
        try writeFile(path, data)
        expectCorruptFile(path, "checksum")
        data[30] ^= 0x40
        data[20] = 0x7f  // page size field
        try writeFile(path, data)
        expectCorruptFile(path, "page size")
    }

    func testDamagedPageIsReportedByReadsAndByCheck() throws {
        let path = try makeStore()
        var data = try XCTUnwrap(readFile(path))
        let damaged = 7
        data[damaged * 4096 + 2000] ^= 0xff
        try writeFile(path, data)
        expectDamaged(path, because: "page \(damaged) is damaged to be found")
        let db = try Database.open(path: path)
        let report = try db.check()
        XCTAssertFalse(report.isHealthy)
        XCTAssertTrue(report.problems.contains { $0.contains("corrupt page \(damaged): checksum mismatch") }, "\(report)")
        var sawError = false
        try db.read { tx in
            let t = try tx.tree("t")
            for i in 0..<5000 {
                do {
                    _ = try tx.get(bytes("key\(i)"), in: t)
                } catch StorageError.corrupt(let page, _) {
                    XCTAssertEqual(page, UInt32(damaged))
                    sawError = true
                }
            }
        }
        XCTAssertTrue(sawError, "some read crosses the damaged page")
        try db.close()
    }

    func testStructurallyBrokenPageWithValidChecksumIsRejected() throws {
        // A page that passes its checksum but whose cell offsets point
        // outside the page: validation, not the checksum, must catch it.
        let (fs, path) = try makeSmallMemoryStore()
        expectDamaged(path, because: "its tree's leaf is broken to be found")
        try XCTUnwrap(fs.file(path)).withContents { data in
            let base = 2 * 4096  // the tree's root leaf
            data[base + 16] = 0xff  // first slot offset -> 0xff.. beyond the page
            data[base + 17] = 0xf0
            PageBytes.resealChecksum(&data, page: 2, pageSize: 4096)
        }
        let reopened = try Database.open(path: path, fileSystem: fs)
        XCTAssertThrowsError(try reopened.read { tx in try tx.get(bytes("k1"), in: try tx.tree("t")) }) { error in
            guard case StorageError.corrupt(let page, let reason) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(page, 2)
            XCTAssertTrue(reason.contains("slot"), reason)
        }
        XCTAssertFalse(try reopened.check().isHealthy)
        try reopened.close()
    }

    /// A catalog entry whose count is damaged (checksum resealed). A count
    /// of 0 for a tree of ten entries went below zero when a delete
    /// followed, and committing it trapped converting the count to the
    /// catalog's unsigned field (found by fuzz-store-file): now the delete
    /// throws `corrupt`, the transaction is failed, and the store is as it
    /// was. A count larger than the file could hold (`Int.max` overflowed
    /// on the next insert, and sums of counts could overflow) is refused
    /// when the catalog entry is read.
    func testADamagedCatalogCountIsCorruptionNotATrap() throws {
        for (damaged, expected) in [(UInt64(0), "does not count the tree's entries"), (UInt64(Int.max), "out of range")] {
            let (fs, path) = try makeSmallMemoryStore()
            expectDamaged(path, because: "its catalog count is damaged to be found")
            try XCTUnwrap(fs.file(path)).withContents { data in
                // The catalog (page 1) holds "t" → root (4 bytes), count 10 (8 bytes).
                let catalog = 4096..<8192
                let ten = withUnsafeBytes(of: UInt64(10).bigEndian) { Array($0) }
                let at = try XCTUnwrap(
                    catalog.first { data[$0..<($0 + 8)].elementsEqual(ten) && data[$0 - 5] == UInt8(ascii: "t") })
                withUnsafeBytes(of: damaged.bigEndian) { data.replaceSubrange(at..<(at + 8), with: $0) }
                PageBytes.resealChecksum(&data, page: 1, pageSize: 4096)
            }
            let reopened = try Database.open(path: path, fileSystem: fs)
            XCTAssertThrowsError(
                try reopened.write { tx in
                    let t = try tx.tree("t")
                    try tx.delete(bytes("k0"), in: t)
                    try tx.delete(bytes("k1"), in: t)
                }, expected
            ) { error in
                guard case StorageError.corrupt(let page, let reason) = error else { return XCTFail("\(error)") }
                XCTAssertEqual(page, 1)
                XCTAssertTrue(reason.contains(expected), reason)
            }
            if damaged == 0 {
                // The failed delete fails the transaction: nothing more can be committed.
                let tx = try reopened.beginWrite()
                let t = try tx.tree("t")
                XCTAssertThrowsError(try tx.delete(bytes("k0"), in: t))
                XCTAssertThrowsError(try tx.put(bytes("k10"), bytes("v"), in: t)) { error in
                    guard case StorageError.transactionFailed = error else { return XCTFail("\(error)") }
                }
                XCTAssertThrowsError(try tx.commit())
            }
            if damaged == 0 {
                try reopened.read { tx in XCTAssertEqual(try tx.get(bytes("k0"), in: try tx.tree("t")), bytes("v")) }
            } else {
                XCTAssertThrowsError(try reopened.read { tx in try tx.count(try tx.tree("t")) })
            }
            try reopened.close()
        }
    }

    func testKeyTooLongAndInvalidOptions() throws {
        let db = try open()
        XCTAssertThrowsError(
            try db.write { tx in
                try tx.put([UInt8](repeating: 1, count: Database.maxKeyLength + 1), [], in: try tx.createTree("t"))
            }
        ) { error in
            XCTAssertEqual(error as? StorageError, .keyTooLong(length: Database.maxKeyLength + 1, maximum: Database.maxKeyLength))
        }
        // The failed transaction left nothing behind.
        try db.read { tx in XCTAssertNil(try tx.treeIfPresent("t")) }
        XCTAssertThrowsError(try Database.open(path: directory.file("x"), options: DatabaseOptions(pageSize: 1000))) { error in
            guard case StorageError.invalidOptions = error else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try db.read { tx in try tx.tree("missing") }) { error in
            XCTAssertEqual(error as? StorageError, .noSuchTree("missing"))
        }
    }

    func testDiskFullDuringCommitLeavesThePreviousCommit() throws {
        let fs = MemoryFileSystem()
        let path = "/mem/full"
        let db = try open(path, options: DatabaseOptions(durability: .full), fileSystem: fs)
        try db.write { tx in try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("t")) }
        fs.faults = { op in op.kind == .write && op.path.hasSuffix("-wal") ? ENOSPC : nil }
        XCTAssertThrowsError(
            try db.write { tx in
                let t = try tx.tree("t")
                try tx.put(bytes("a"), bytes("2"), in: t)
                for i in 0..<100 { try tx.put(bytes("b\(i)"), [UInt8](repeating: 9, count: 500), in: t) }
            }
        ) { error in
            XCTAssertEqual(error as? StorageError, .diskFull(path: path + "-wal"))
        }
        try db.read { tx in
            let t = try tx.tree("t")
            XCTAssertEqual(try tx.get(bytes("a"), in: t), bytes("1"))
            XCTAssertEqual(try tx.count(t), 1)
        }
        // Space comes back: the handle goes on.
        fs.faults = nil
        try db.write { tx in try tx.put(bytes("a"), bytes("3"), in: try tx.tree("t")) }
        let crashed = try Database.open(path: path, fileSystem: fs.afterPowerLoss())
        try crashed.read { tx in XCTAssertEqual(try tx.get(bytes("a"), in: try tx.tree("t")), bytes("3")) }
        try crashed.close()
    }

    func testFailedSyncMakesTheHandleRefuseWrites() throws {
        let fs = MemoryFileSystem()
        let path = "/mem/eio"
        let db = try Database.open(path: path, options: DatabaseOptions(durability: .full), fileSystem: fs)
        try db.write { tx in try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("t")) }
        fs.faults = { op in op.kind == .sync ? EIO : nil }
        XCTAssertThrowsError(try db.write { tx in try tx.put(bytes("a"), bytes("2"), in: try tx.tree("t")) })
        fs.faults = nil
        XCTAssertThrowsError(try db.write { tx in try tx.put(bytes("a"), bytes("3"), in: try tx.tree("t")) }) { error in
            guard case StorageError.readOnly = error else { return XCTFail("\(error)") }
        }
        try? db.close()
        // Reopening runs recovery; the last acknowledged commit is there.
        let reopened = try Database.open(path: path, fileSystem: fs.afterPowerLoss())
        try reopened.read { tx in XCTAssertEqual(try tx.get(bytes("a"), in: try tx.tree("t")), bytes("1")) }
        try reopened.close()
    }

    /// In exclusive mode one handle owns the store: a second one, in either
    /// mode, gets `locked`; a read-only exclusive open takes no lock.
    func testSecondWriterIsLockedOutInExclusiveModeButReadOnlyOpens() throws {
        let path = directory.file("locked.strata")
        let db = try open("locked.strata", DatabaseOptions(locking: .exclusive))
        try db.write { tx in try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("t")) }
        XCTAssertThrowsError(try Database.open(path: path, options: DatabaseOptions(locking: .exclusive))) { error in
            XCTAssertEqual(error as? StorageError, .locked(path: path))
        }
        XCTAssertThrowsError(try Database.open(path: path)) { error in
            XCTAssertEqual(error as? StorageError, .locked(path: path))
        }
        let reader = try Database.open(path: path, options: DatabaseOptions(readOnly: true, locking: .exclusive))
        try reader.read { tx in XCTAssertEqual(try tx.get(bytes("a"), in: try tx.tree("t")), bytes("1")) }
        XCTAssertThrowsError(try reader.write { _ in }) { error in
            guard case StorageError.readOnly = error else { return XCTFail("\(error)") }
        }
        try reader.close()
        try db.close()
        // Once closed, the lock is free.
        let again = try Database.open(path: path)
        try again.close()
    }

    func testClosedHandleAndEndedTransaction() throws {
        let db = try open()
        let tx = try db.beginRead()
        tx.end()
        XCTAssertThrowsError(try tx.treeNames()) { XCTAssertEqual($0 as? StorageError, .transactionEnded) }
        try db.close()
        XCTAssertThrowsError(try db.beginRead()) { XCTAssertEqual($0 as? StorageError, .closed) }
    }
}
