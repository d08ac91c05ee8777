import StrataEngine
import StrataTesting
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Handles of one store share the log's index through `<store>-shm`: each
/// sees the others' commits, writers take turns with a busy timeout, and a
/// damaged, half-published, missing or foreign index is rebuilt from the
/// log, never trusted. (Two handles in one process stand for two
/// processes: their locks belong to their descriptors.)
final class SharedIndexTests: EngineTestCase {
    func put(_ db: Database, _ key: String, _ value: String) throws {
        try db.write { tx in try tx.put(bytes(key), bytes(value), in: try tx.createTree("t")) }
    }

    func get(_ db: Database, _ key: String) throws -> [UInt8]? {
        try db.read { tx in try tx.treeIfPresent("t").flatMap { try tx.get(bytes(key), in: $0) } }
    }

    func testEachHandleSeesTheOthersCommits() throws {
        let a = try open("shared.strata")
        let b = try open("shared.strata")
        try put(a, "x", "1")
        XCTAssertEqual(try get(b, "x"), bytes("1"))
        try put(b, "x", "2")
        XCTAssertEqual(try get(a, "x"), bytes("2"))
        // A reader that began before a commit keeps its snapshot, across
        // the other handle's checkpoints and restarts too.
        let reader = try a.beginRead()
        for i in 0..<50 { try put(b, "k\(i)", "v") }
        try b.checkpoint()
        XCTAssertEqual(try reader.get(bytes("x"), in: try reader.tree("t")), bytes("2"))
        XCTAssertNil(try reader.get(bytes("k0"), in: try reader.tree("t")))
        reader.end()
        XCTAssertEqual(try get(a, "k49"), bytes("v"))
        let readOnly = try open("shared.strata", DatabaseOptions(readOnly: true))
        try put(a, "y", "3")
        XCTAssertEqual(try get(readOnly, "y"), bytes("3"), "a read-only handle sees later commits")
        try readOnly.close()
        try a.close()
        try b.close()
    }

    func testAWriterWaitsForTheBusyTimeoutThenGetsBusy() throws {
        let a = try open("busy.strata")
        let b = try open("busy.strata", DatabaseOptions(busyTimeout: .milliseconds(150)))
        let held = try a.beginWrite()
        try held.put(bytes("k"), bytes("a"), in: try held.createTree("t"))
        let start = ContinuousClock.now
        XCTAssertThrowsError(try put(b, "k", "b")) { error in
            XCTAssertEqual(error as? StorageError, .busy(path: directory.file("busy.strata")))
        }
        let waited = ContinuousClock.now - start
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(150))
        // Readers are never blocked by the writer.
        XCTAssertNil(try get(b, "k"))
        try held.commit()
        try put(b, "k", "b")
        XCTAssertEqual(try get(a, "k"), bytes("b"))
        XCTAssertThrowsError(
            try Database.open(path: directory.file("busy.strata"), options: DatabaseOptions(busyTimeout: .seconds(-1))))
        try a.close()
        try b.close()
    }

    /// Overwrites bytes of the index file at `offset`.
    func damage(_ path: String, at offset: Int, with bytes: [UInt8]) throws {
        let fd = Glibc.open(path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { Glibc.close(fd) }
        XCTAssertEqual(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, bytes.count, off_t(offset)) }, bytes.count)
    }

    func testADamagedIndexIsRebuiltFromTheLog() throws {
        let path = directory.file("damaged.strata")
        let cases: [(String, Int, [UInt8])] = [
            ("magic", 0, [0, 0, 0, 0]),
            ("header field", 40, [0x7f]),
            ("header checksum", 128, [1, 2, 3]),
            ("frame list", 4096, [0xff, 0xff, 0xff, 0x7f]),
            ("odd sequence word (a writer died publishing)", 16, [0xff]),
            ("foreign bytes", 0, Array(repeating: 0xa5, count: 4096)),
        ]
        for (label, offset, garbage) in cases {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: path + "-wal")
            try? FileManager.default.removeItem(atPath: path + "-shm")
            let a = try open("damaged.strata", DatabaseOptions(checkpointThresholdFrames: 1000))
            for i in 0..<20 { try put(a, "k\(i)", "v\(i)") }
            try damage(path + "-shm", at: offset, with: garbage)
            let b = try open("damaged.strata")
            XCTAssertEqual(try get(b, "k19"), bytes("v19"), label)
            XCTAssertEqual(try get(a, "k19"), bytes("v19"), label)
            try put(b, "after", "1")
            XCTAssertEqual(try get(a, "after"), bytes("1"), label)
            XCTAssertTrue(try a.check().isHealthy, label)
            try b.close()
            try a.close()
        }
    }

    func testAMissingTruncatedOrStaleIndexIsRebuiltByTheFirstHandle() throws {
        let path = directory.file("first.strata")
        // A log left by a handle that never closed, and an index that
        // describes an older state of it.
        let fs = MemoryFileSystem()
        let db = try Database.open(path: path, options: DatabaseOptions(checkpointThresholdFrames: 1000), fileSystem: fs)
        try db.write { tx in try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("t")) }
        let stale = try XCTUnwrap(fs.file(path + "-shm")).withContents { $0 }
        try db.write { tx in try tx.put(bytes("b"), bytes("2"), in: try tx.tree("t")) }
        for (label, index) in [("stale", stale), ("truncated", Array(stale.prefix(100))), ("empty", []), ("missing", nil)] {
            let crashed = fs.afterProcessCrash()
            if let index {
                try XCTUnwrap(crashed.file(path + "-shm")).withContents { $0 = index }
            } else {
                try crashed.remove(path + "-shm")
            }
            let reopened = try Database.open(path: path, fileSystem: crashed)
            try reopened.read { tx in
                XCTAssertEqual(try tx.get(bytes("a"), in: try tx.tree("t")), bytes("1"), label)
                XCTAssertEqual(try tx.get(bytes("b"), in: try tx.tree("t")), bytes("2"), label)
            }
            XCTAssertTrue(try reopened.check().isHealthy, label)
            try reopened.close()
        }
        try db.close()
    }

    func testExclusiveModeUsesNoIndexFile() throws {
        let path = directory.file("alone.strata")
        let db = try open("alone.strata", DatabaseOptions(locking: .exclusive))
        try put(db, "k", "v")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-shm"))
        try db.close()
        let shared = try open("alone.strata")
        XCTAssertEqual(try get(shared, "k"), bytes("v"))
        try shared.close()
    }

    /// A file system whose files have neither byte-range locks nor shared
    /// mappings cannot share a store: the open says so, and exclusive mode
    /// works there.
    func testAFileSystemThatCannotShareGetsAClearErrorOrExclusiveMode() throws {
        let fs = NoSharingFileSystem()
        let path = directory.file("plain.strata")
        XCTAssertThrowsError(try Database.open(path: path, fileSystem: fs)) { error in
            guard case StorageError.cannotShare(let why) = error else { return XCTFail("\(error)") }
            XCTAssertTrue("\(error)".contains("exclusive") || why.contains("map") || why.contains("lock"), why)
        }
        let db = try Database.open(path: path, options: DatabaseOptions(locking: .exclusive), fileSystem: fs)
        try put(db, "k", "v")
        XCTAssertEqual(try get(db, "k"), bytes("v"))
        try db.close()
    }

    /// A reader left open when its handle closes must not write into the
    /// reader slot the handle held: another handle may own it by then, and
    /// erasing its mark would let a checkpoint overwrite pages its reader
    /// still reads.
    func testAReaderEndedAfterItsHandleClosedLeavesTheNextOwnersMarkAlone() throws {
        let a = try open("marks.strata", DatabaseOptions(checkpointThresholdFrames: 1 << 20))
        try put(a, "x", "old")
        let leftover = try a.beginRead()
        try a.close()
        let b = try open("marks.strata", DatabaseOptions(checkpointThresholdFrames: 1 << 20))
        let reader = try b.beginRead()
        leftover.end()
        let c = try open("marks.strata", DatabaseOptions(checkpointThresholdFrames: 1 << 20))
        try put(c, "x", "new")
        for i in 0..<300 { try put(c, "k\(i)", String(repeating: "v", count: 200)) }
        try c.checkpoint()
        XCTAssertEqual(try reader.get(bytes("x"), in: try reader.tree("t")), bytes("old"))
        reader.end()
        XCTAssertEqual(try get(b, "x"), bytes("new"))
        try c.close()
        try b.close()
    }

    /// A read-only handle that opened before the store had a log reads the
    /// commits a writer makes once it creates one.
    func testAReadOnlyHandleOpenedWithoutALogSeesLaterCommits() throws {
        let path = directory.file("late-log.strata")
        let first = try open("late-log.strata")
        try put(first, "a", "1")
        try first.close()
        try FileManager.default.removeItem(atPath: path + "-wal")
        let reader = try open("late-log.strata", DatabaseOptions(readOnly: true))
        let writer = try open("late-log.strata", DatabaseOptions(checkpointThresholdFrames: 1 << 20))
        try put(writer, "b", "2")
        XCTAssertEqual(try get(reader, "a"), bytes("1"))
        XCTAssertEqual(try get(reader, "b"), bytes("2"))
        try reader.close()
        try writer.close()
    }

    /// A rebuild never moves positions back. A restart whose log header
    /// write failed, then a torn header, made the rebuilt index start again
    /// at generation 0: the next checkpoint then took a reader of an older,
    /// higher generation for one behind it and overwrote the main-file
    /// pages that reader still read.
    func testARebuildAfterALostLogHeaderKeepsOlderReadersSnapshots() throws {
        let fs = MemoryFileSystem()
        let path = "/gen/store"
        let db = try open(path, options: DatabaseOptions(checkpointThresholdFrames: 1 << 20), fileSystem: fs)
        try put(db, "a", "1")
        try db.checkpoint()
        try put(db, "x", "old")  // restarts the log: generation 2
        try db.checkpoint()
        let reader = try db.beginRead()
        // The next commit restarts the log; its header write fails.
        fs.faults = { op in op.kind == .write && op.path.hasSuffix("-wal") && op.offset == 0 ? EIO : nil }
        XCTAssertThrowsError(try put(db, "y", "1"))
        fs.faults = nil
        // And what the disk kept of it is a torn header.
        fs.file(path + "-wal")?.withContents { log in
            for i in 0..<min(32, log.count) { log[i] = 0x5a }
        }
        try put(db, "x", "new")
        try db.checkpoint()
        XCTAssertEqual(try reader.get(bytes("x"), in: try reader.tree("t")), bytes("old"))
        reader.end()
        XCTAssertEqual(try get(db, "x"), bytes("new"))
        try db.close()
    }

    /// The checkpoint a commit starts once the log reaches the threshold
    /// takes the writer lock after the commit gave it up. Another handle
    /// (in the stress test, another process) that committed, checkpointed
    /// and restarted the log in that window left this handle's view of the
    /// index behind; the checkpoint planned from it copied this handle's
    /// older image of a page over the newer one in the main file, and the
    /// next reader of that page read the older value (the stress test saw
    /// counters go back and a tree's count fall behind its entries).
    func testTheCheckpointAfterACommitStartsFromWhatOtherHandlesDidMeanwhile() throws {
        let a = try open("window.strata", DatabaseOptions(checkpointThresholdFrames: 1))
        let b = try open("window.strata", DatabaseOptions(checkpointThresholdFrames: 1 << 20))
        try a.write { tx in
            try tx.createTree("t")
            try tx.createTree("u")
        }
        var ran = false
        a.beforeAutomaticCheckpoint = {
            guard !ran else { return }
            ran = true
            do {
                try self.put(b, "x", "2")
                try b.checkpoint()
                // Restarts the log; tree t's page is only in the main file now.
                try b.write { tx in try tx.put(bytes("y"), bytes("1"), in: try tx.tree("u")) }
            } catch {
                XCTFail("the other handle's commits failed: \(error)")
            }
        }
        try put(a, "x", "1")
        XCTAssertTrue(ran)
        a.beforeAutomaticCheckpoint = nil
        XCTAssertEqual(try get(b, "x"), bytes("2"))
        XCTAssertEqual(try get(a, "x"), bytes("2"))
        try a.close()
        try b.close()
        let reopened = try open("window.strata")
        XCTAssertEqual(try get(reopened, "x"), bytes("2"))
        try reopened.close()
    }

    /// A read inside this handle's own write transaction that finds the
    /// index damaged repairs it, instead of waiting for the writer gate the
    /// thread holds (which never comes).
    func testAReadInsideTheWritersOwnTransactionRepairsADamagedIndex() throws {
        let path = directory.file("own.strata")
        let db = try open("own.strata")
        try put(db, "k", "v")
        try db.write { tx in
            try tx.put(bytes("k2"), bytes("v2"), in: try tx.tree("t"))
            try damage(path + "-shm", at: 16, with: [0xff])  // the sequence word, odd
            XCTAssertEqual(try get(db, "k"), bytes("v"))
        }
        XCTAssertEqual(try get(db, "k2"), bytes("v2"))
        try db.close()
    }
}

/// The real file system, with files that offer only the I/O seam's basic
/// calls: no shared mapping, no byte-range locks.
final class NoSharingFileSystem: StorageFileSystem {
    let real = POSIXFileSystem()

    final class File: StorageFile {
        let file: any StorageFile
        init(_ file: any StorageFile) { self.file = file }
        func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws -> Int {
            try file.read(into: buffer, count: count, at: offset)
        }
        func write(_ buffer: UnsafeRawPointer, count: Int, at offset: Int64) throws {
            try file.write(buffer, count: count, at: offset)
        }
        func sync() throws { try file.sync() }
        func size() throws -> Int64 { try file.size() }
        func truncate(to size: Int64) throws { try file.truncate(to: size) }
        func tryLock(exclusive: Bool) throws -> Bool { try file.tryLock(exclusive: exclusive) }
        func close() { file.close() }
    }

    func open(_ path: String, create: Bool, readOnly: Bool) throws -> any StorageFile {
        File(try real.open(path, create: create, readOnly: readOnly))
    }
    func exists(_ path: String) -> Bool { real.exists(path) }
    func remove(_ path: String) throws { try real.remove(path) }
    func rename(_ source: String, to destination: String) throws { try real.rename(source, to: destination) }
    func syncDirectory(of path: String) throws { try real.syncDirectory(of: path) }
}
