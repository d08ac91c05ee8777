import StrataEngine
import StrataTesting
import XCTest

/// Stores abandoned without `close()`: what a killed process or a power loss
/// leaves, reopened.
final class RecoveryTests: EngineTestCase {
    let path = "/mem/store.strata"

    /// Commits `count` transactions, each adding key i and rewriting "last".
    func commit(_ db: Database, from start: Int, count: Int) throws {
        for i in start..<(start + count) {
            try db.write { tx in
                let t = try tx.createTree("t")
                try tx.put(bytes("key\(i)"), [UInt8](repeating: UInt8(i & 0xff), count: 50 + (i % 7) * 900), in: t)
                try tx.put(bytes("last"), bytes("\(i)"), in: t)
            }
        }
    }

    /// Where the log's frames end (a 32-byte header, then frames of a
    /// 24-byte header and a 4 KiB page); the file goes on past it.
    func logEnd(_ db: Database) -> Int { 32 + db.statistics.walFrames * (24 + 4096) }

    /// The log grows ahead of its frames, zeros as long as itself (64 KiB
    /// to 1 MiB), so the syncs of the small commits that follow flush only
    /// their data; the zeros end recovery's scan as the end of the file did.
    func testTheLogGrowsAheadOfItsFramesAndRecoveryStopsAtTheZeros() throws {
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 100_000)
        let db = try Database.open(path: path, options: options, fileSystem: fs)
        try commit(db, from: 0, count: 1)
        let log = try XCTUnwrap(fs.file(path + "-wal"))
        XCTAssertEqual(log.contents.count, logEnd(db) + 65536)
        var sizes: Set<Int> = [log.contents.count]
        for i in 1..<600 {
            try commit(db, from: i, count: 1)
            sizes.insert(log.contents.count)
            XCTAssertGreaterThanOrEqual(log.contents.count, logEnd(db))
        }
        XCTAssertGreaterThan(logEnd(db), 4 << 20)
        // Doubling to 1 MiB, then a mebibyte at a time: about 5 + MiB
        // extensions, where each commit would extend the file without it.
        XCTAssertLessThanOrEqual(sizes.count, 6 + logEnd(db) >> 20, "\(sizes.sorted())")
        XCTAssertLessThanOrEqual(log.contents.count - logEnd(db), 1 << 20)
        XCTAssertTrue(log.contents[logEnd(db)...].allSatisfy { $0 == 0 })
        let crashed = fs.afterPowerLoss()
        let reopened = try Database.open(path: path, options: options, fileSystem: crashed)
        try verify(reopened, committed: 600)
        try reopened.close()
        try db.close()
    }

    func verify(_ db: Database, committed count: Int) throws {
        try db.read { tx in
            let t = try tx.tree("t")
            XCTAssertEqual(try tx.count(t), count + 1)
            XCTAssertEqual(try tx.get(bytes("last"), in: t), bytes("\(count - 1)"))
            for i in 0..<count {
                XCTAssertEqual(
                    try tx.get(bytes("key\(i)"), in: t), [UInt8](repeating: UInt8(i & 0xff), count: 50 + (i % 7) * 900))
            }
            XCTAssertNil(try tx.get(bytes("key\(count)"), in: t))
        }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
    }

    /// The first commit after an open starts the log afresh: its header
    /// becomes durable with the commit's own sync, and a power loss at any
    /// point of that commit leaves the store before it or after it.
    func testTheFirstCommitAfterAnOpenCostsOneSync() throws {
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .full)
        var db = try Database.open(path: path, options: options, fileSystem: fs)
        try commit(db, from: 0, count: 3)
        try db.close()
        db = try Database.open(path: path, options: options, fileSystem: fs)
        let before = fs.syncCount
        try commit(db, from: 3, count: 1)
        XCTAssertEqual(fs.syncCount - before, 1, "one sync for the first commit, header included")
        XCTAssertEqual(try XCTUnwrap(fs.file(path + "-wal")).durable.count, try XCTUnwrap(fs.file(path + "-wal")).contents.count)
        try verify(try Database.open(path: path, options: options, fileSystem: fs.afterPowerLoss()), committed: 4)
        // Power lost during that commit: any subset of its writes arrived.
        // (The crashed file systems cannot be read back at tear-down;
        // `verify` checks each recovered store.)
        let path = "/mem/crashed.strata"
        expectDamaged(path, because: "its file system lost power")
        var recovered: [Int: Int] = [:]
        for seed in 0..<20 {
            let fresh = MemoryFileSystem()
            var store = try Database.open(path: path, options: options, fileSystem: fresh)
            try commit(store, from: 0, count: 3)
            try store.close()
            store = try Database.open(path: path, options: options, fileSystem: fresh)
            fresh.crashAtSync = fresh.syncCount + 1
            XCTAssertThrowsError(try commit(store, from: 3, count: 1))
            let reopened = try Database.open(path: path, options: options, fileSystem: fresh.afterPowerLoss(seed: UInt64(seed)))
            // Not acknowledged: absent, or whole when every write arrived.
            let last = try reopened.read { tx in try tx.get(bytes("last"), in: tx.tree("t")) }
            try verify(reopened, committed: last == bytes("3") ? 4 : 3)
            recovered[last == bytes("3") ? 4 : 3, default: 0] += 1
        }
        XCTAssertEqual(recovered[3, default: 0] + recovered[4, default: 0], 20, "\(recovered)")
    }

    func testAbandonedStoreKeepsEveryCommitAndNothingUncommitted() throws {
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 40)
        let db = try Database.open(path: path, options: options, fileSystem: fs)
        try commit(db, from: 0, count: 120)
        // An open, uncommitted transaction at the moment of the crash.
        let tx = try db.beginWrite()
        try tx.put(bytes("key120"), bytes("uncommitted"), in: try tx.tree("t"))
        try tx.put(bytes("last"), bytes("uncommitted"), in: try tx.tree("t"))
        for crashed in [fs.afterProcessCrash(), fs.afterPowerLoss()] {
            let reopened = try Database.open(path: path, options: options, fileSystem: crashed)
            try verify(reopened, committed: 120)
            // The recovered store takes new commits.
            try commit(reopened, from: 120, count: 5)
            try verify(reopened, committed: 125)
            try reopened.close()
        }
        tx.rollback()
        try db.close()
    }

    func testTornLastCommitIsDroppedAndEarlierOnesKept() throws {
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 100_000)
        let db = try Database.open(path: path, options: options, fileSystem: fs)
        try commit(db, from: 0, count: 30)
        try commit(db, from: 30, count: 1)
        let end = logEnd(db)
        let crashed = fs.afterProcessCrash()
        // Cut the last commit's frames in the middle of its last frame.
        try XCTUnwrap(crashed.file(path + "-wal")).withContents { wal in
            wal.removeLast(wal.count - (end - 1000))
        }
        let reopened = try Database.open(path: path, options: options, fileSystem: crashed)
        try verify(reopened, committed: 30)
        try reopened.close()
        try db.close()
    }

    func testGarbageAfterTheLastCommitIsIgnored() throws {
        let fs = MemoryFileSystem()
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 100_000)
        let db = try Database.open(path: path, options: options, fileSystem: fs)
        try commit(db, from: 0, count: 20)
        let end = logEnd(db)
        var random = SeededRandom(seed: 7)
        for garbage in [random.bytes(100), random.bytes(4096 + 24), [UInt8](repeating: 0, count: 9000)] {
            let crashed = fs.afterProcessCrash()
            // Right after the last frame (the log is longer: zeros the
            // writer wrote ahead).
            try XCTUnwrap(crashed.file(path + "-wal")).withContents { wal in
                wal.removeLast(wal.count - end)
                wal += garbage
            }
            let reopened = try Database.open(path: path, options: options, fileSystem: crashed)
            try verify(reopened, committed: 20)
            try reopened.close()
        }
        try db.close()
    }

    func testRealFilesAbandonedWithoutClose() throws {
        let file = directory.file("abandoned.strata")
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 25)
        do {
            let db = try Database.open(path: file, options: options)
            try commit(db, from: 0, count: 60)
            // Copy the files as they are while the handle is still open: what a
            // SIGKILL at this moment would leave.
            for suffix in ["", "-wal"] {
                let data = try XCTUnwrap(readFile(file + suffix))
                try writeFile(directory.file("copy.strata") + suffix, data)
            }
            try db.close()
        }
        let reopened = try open("copy.strata", options)
        try verify(reopened, committed: 60)
    }
}

func readFile(_ path: String) -> [UInt8]? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = fread(&buffer, 1, buffer.count, f)
        if n <= 0 { break }
        result += buffer[0..<n]
    }
    return result
}

func writeFile(_ path: String, _ data: [UInt8]) throws {
    guard let f = fopen(path, "wb") else { throw StorageError.io(operation: "fopen", path: path, errno: errno) }
    defer { fclose(f) }
    _ = data.withUnsafeBytes { fwrite($0.baseAddress, 1, data.count, f) }
}

#if canImport(Glibc)
    import Glibc
#endif

final class TornHeaderTests: EngineTestCase {
    /// A crash while a checkpoint rewrites page 0 can tear the main file's
    /// header; the log still holds page 0 then, and opening must use it.
    func testTornMainHeaderIsRepairedFromTheLog() throws {
        let fs = MemoryFileSystem()
        let path = "/mem/torn"
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 100_000)
        let db = try Database.open(path: path, options: options, fileSystem: fs)
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<500 { try tx.put(bytes("k\(i)"), bytes("v\(i)"), in: t) }
        }
        let crashed = fs.afterProcessCrash()
        try XCTUnwrap(crashed.file(path)).withContents { data in
            for i in 0..<512 { data[i] = UInt8(truncatingIfNeeded: i &* 37) }
        }
        let reopened = try open(path, options: options, fileSystem: crashed)
        try reopened.read { tx in
            XCTAssertEqual(try tx.count(try tx.tree("t")), 500)
            XCTAssertEqual(try tx.get(bytes("k499"), in: try tx.tree("t")), bytes("v499"))
        }
        try db.close()
    }

    /// Without the log, a torn header is reported, not trusted.
    func testTornMainHeaderWithoutLogIsAnError() throws {
        let fs = MemoryFileSystem()
        let path = "/mem/torn2"
        let db = try Database.open(path: path, options: DatabaseOptions(durability: .full), fileSystem: fs)
        try db.write { tx in try tx.put(bytes("a"), bytes("b"), in: try tx.createTree("t")) }
        try db.close()
        expectDamaged(path, because: "its header is torn with no log to repair it")
        try XCTUnwrap(fs.file(path)).withContents { data in data[100] ^= 1 }
        XCTAssertThrowsError(try Database.open(path: path, fileSystem: fs)) { error in
            XCTAssertEqual(error as? StorageError, .corruptFile("header page checksum mismatch"))
        }
    }
}
