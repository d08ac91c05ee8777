import Foundation
import StrataEngine
import XCTest

/// A large commit, and a checkpoint, that will sync what they write start
/// each write's trip to the disk (`StorageFile.startWriteback`,
/// `sync_file_range` on Linux) before they build the next, and leave the
/// last to the sync: a commit at durability `full`, a checkpoint at `full`
/// or `normal`. With durability `none` nothing is synced and nothing is
/// hinted. The hints only ever cover bytes already written, and a sync
/// always follows them before the commit or checkpoint ends.
final class WritebackTests: EngineTestCase {
    let path = "/writeback/store.strata"
    var log: String { path + "-wal" }

    /// The operations of a memory file system's files, in order.
    final class Journal: @unchecked Sendable {
        private let lock = NSLock()
        private var operations: [FileOperation] = []  // guarded by lock

        func record(_ operation: FileOperation) -> Int32? {
            if operation.kind != .read { lock.withLock { operations.append(operation) } }
            return nil
        }

        func take() -> [FileOperation] {
            lock.withLock {
                defer { operations.removeAll() }
                return operations
            }
        }
    }

    /// 600 values of 3,000 bytes, a page each (new pages: the commit
    /// writes them into the main file), then `rewrites` commits that
    /// change every one: 600 pages the store held, about 2.5 MB of frames
    /// in three writes of at most a mebibyte.
    func writeLargeCommits(_ db: Database, rewrites: Int = 1) throws {
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<600 { try tx.put(key(i), value(i, 0), in: tree) }
        }
        for round in 0..<rewrites { try rewrite(db, round + 1) }
    }

    func rewrite(_ db: Database, _ round: Int) throws {
        try db.write { tx in
            let tree = try tx.tree("t")
            for i in 0..<600 { try tx.put(key(i), value(i, round), in: tree) }
        }
    }

    func key(_ i: Int) -> [UInt8] { [UInt8(i >> 8), UInt8(i & 255)] }
    func value(_ i: Int, _ round: Int) -> [UInt8] { [UInt8](repeating: UInt8((i + round) % 251), count: 3_000) }

    func checkValues(_ db: Database, round: Int) throws {
        try db.read { tx in
            let tree = try tx.tree("t")
            for i in 0..<600 { XCTAssertEqual(try tx.get(key(i), in: tree), value(i, round), "key \(i)") }
        }
    }

    /// Writes of whole frames into the log (not the header, nor the zeros
    /// a small commit writes ahead of itself).
    func frameWrites(_ operations: [FileOperation]) -> [FileOperation] {
        let frame = Int64(4096 + 24)
        return operations.filter {
            $0.path == log && $0.kind == .write && $0.offset >= 32 && ($0.offset - 32) % frame == 0
                && Int64($0.count) % frame == 0
        }
    }

    /// A store on `fs` that checkpoints only when asked.
    func openStore(_ fs: MemoryFileSystem, durability: Durability = .full) throws -> Database {
        try open(path, options: DatabaseOptions(durability: durability, checkpointThresholdFrames: 100_000), fileSystem: fs)
    }

    /// Closes `db`, opens the store again after a power loss and checks
    /// that it holds round `round`'s values.
    func checkAfterPowerLoss(_ db: Database, _ fs: MemoryFileSystem, round: Int) throws {
        try db.close()
        let reopened = try open(path, fileSystem: fs.afterPowerLoss())
        try checkValues(reopened, round: round)
        try reopened.close()
    }

    /// The operations other than reads that `body` makes on `fs`'s files.
    func operations(on fs: MemoryFileSystem, _ body: () throws -> Void) rethrows -> [FileOperation] {
        let journal = Journal()
        fs.faults = { journal.record($0) }
        defer { fs.faults = nil }
        try body()
        return journal.take()
    }

    /// Each hint on `file` covers from the start of one write after the
    /// previous hint to the end of a later (or the same) one, and a sync
    /// of the file comes after the last hint. Returns the hints.
    @discardableResult
    func checkHints(_ operations: [FileOperation], file: String, line: UInt = #line) -> [FileOperation] {
        let mine = operations.filter { $0.path == file }
        var sinceHint: [FileOperation] = []
        var hints: [FileOperation] = []
        var lastHint: Int?
        for (index, operation) in mine.enumerated() {
            switch operation.kind {
            case .write:
                sinceHint.append(operation)
            case .writeback:
                let starts = sinceHint.contains { $0.offset == operation.offset }
                let ends = sinceHint.contains { $0.offset + Int64($0.count) == operation.offset + Int64(operation.count) }
                XCTAssertTrue(
                    starts && ends, "\(file): hint \(operation.offset)+\(operation.count) is not a run just written",
                    line: line)
                hints.append(operation)
                lastHint = index
                sinceHint.removeAll()
            default:
                break
            }
        }
        if let lastHint {
            XCTAssertTrue(mine[lastHint...].contains { $0.kind == .sync }, "\(file): no sync after the last hint", line: line)
        }
        return hints
    }

    /// ``checkHints(_:file:line:)`` for the main file, where 2.5 MB of
    /// pages written in runs are hinted at least once, a mebibyte or more
    /// at a time.
    func checkMainFileHints(_ operations: [FileOperation], line: UInt = #line) {
        let hints = checkHints(operations, file: path, line: line)
        XCTAssertGreaterThanOrEqual(hints.count, 1, "2.5 MB written into the main file hint at least once", line: line)
        XCTAssertGreaterThanOrEqual(
            hints.map(\.count).min() ?? 0, 1 << 20, "each hint covers a mebibyte or more", line: line)
    }

    func testALargeCommitStartsEachFrameWriteButTheLastBeforeItsSync() throws {
        let fs = MemoryFileSystem()
        let db = try openStore(fs)
        try writeLargeCommits(db, rewrites: 0)
        let operations = try operations(on: fs) { try rewrite(db, 1) }
        let hints = checkHints(operations, file: log)
        let frames = frameWrites(operations)
        XCTAssertGreaterThanOrEqual(frames.count, 3, "the commit must take several writes for this test to mean anything")
        XCTAssertEqual(hints.map(\.offset), frames.dropLast().map(\.offset), "every frame write but the last is hinted")
        XCTAssertEqual(hints.map(\.count), frames.dropLast().map(\.count))
        // Nothing else was hinted, and the hints changed nothing durable:
        // the commit survives a power loss.
        XCTAssertEqual(operations.filter { $0.kind == .writeback && $0.path != log }.count, 0)
        try checkAfterPowerLoss(db, fs, round: 1)
    }

    func testACheckpointStartsItsMainFileWritesBeforeItsSync() throws {
        let fs = MemoryFileSystem()
        let db = try openStore(fs)
        try writeLargeCommits(db)
        checkMainFileHints(try operations(on: fs) { try db.checkpoint() })
        try checkAfterPowerLoss(db, fs, round: 1)
    }

    /// A commit's new pages go into the main file (not the log), in runs
    /// hinted as a checkpoint's copies are, before its sync of that file.
    func testNewPagesWrittenIntoTheMainFileAreHinted() throws {
        let fs = MemoryFileSystem()
        let db = try openStore(fs)
        checkMainFileHints(try operations(on: fs) { try writeLargeCommits(db, rewrites: 0) })
        try checkAfterPowerLoss(db, fs, round: 0)
    }

    func testDurabilityNoneHintsNothing() throws {
        let fs = MemoryFileSystem()
        let db = try openStore(fs, durability: .none)
        let operations = try operations(on: fs) {
            try writeLargeCommits(db, rewrites: 2)
            try db.checkpoint()
        }
        XCTAssertGreaterThanOrEqual(frameWrites(operations).count, 6)
        XCTAssertEqual(operations.filter { $0.kind == .writeback }.count, 0)
        try checkValues(db, round: 2)
        try db.close()
    }

    /// At durability `normal` a commit does not sync the log, so its
    /// frames are not hinted; the checkpoint, which syncs, still hints its
    /// copies.
    func testDurabilityNormalHintsOnlyTheCheckpoint() throws {
        let fs = MemoryFileSystem()
        let db = try openStore(fs, durability: .normal)
        try writeLargeCommits(db, rewrites: 0)
        let commit = try operations(on: fs) { try rewrite(db, 1) }
        XCTAssertGreaterThanOrEqual(frameWrites(commit).count, 3)
        XCTAssertEqual(commit.filter { $0.kind == .writeback }.count, 0)
        let checkpoint = try operations(on: fs) { try db.checkpoint() }
        checkMainFileHints(checkpoint)
        XCTAssertEqual(checkpoint.filter { $0.kind == .writeback && $0.path == log }.count, 0)
        try checkValues(db, round: 1)
        try db.close()
    }

    /// Small commits take one write each: nothing to hint.
    func testSmallCommitsHintNothing() throws {
        let fs = MemoryFileSystem()
        let db = try open(path, options: DatabaseOptions(durability: .full), fileSystem: fs)
        try db.write { tx in _ = try tx.createTree("t") }
        let operations = try operations(on: fs) {
            for i in 0..<50 {
                try db.write { tx in try tx.put(key(i), value(i, 0), in: try tx.tree("t")) }
            }
        }
        XCTAssertGreaterThanOrEqual(frameWrites(operations).count, 50)
        XCTAssertEqual(operations.filter { $0.kind == .writeback }.count, 0)
        try db.close()
    }

    /// On a real file the hint is `sync_file_range`: any range, even one a
    /// real call rejects, leaves the bytes as written and throws nothing.
    func testAHintOnARealFileLeavesItsBytes() throws {
        let fileSystem = POSIXFileSystem()
        let file = try fileSystem.open(directory.file("hinted"), create: true, readOnly: false)
        defer { file.close() }
        let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try bytes.withUnsafeBytes { try file.write($0.baseAddress!, count: $0.count, at: 0) }
        file.startWriteback(offset: 0, count: 1 << 20)
        file.startWriteback(offset: 1 << 20, count: 2 << 20)
        file.startWriteback(offset: 10 << 20, count: 4096)  // past the end
        file.startWriteback(offset: -4096, count: 4096)  // rejected (EINVAL)
        file.startWriteback(offset: 0, count: 0)  // to the end of the file
        try file.sync()
        var read = [UInt8](repeating: 0, count: bytes.count)
        let n = try read.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: $0.count, at: 0) }
        XCTAssertEqual(n, bytes.count)
        XCTAssertEqual(read, bytes)
        XCTAssertEqual(try file.size(), Int64(bytes.count))
    }

    /// The same large commits and a checkpoint on the real file system.
    func testALargeCommitOnDiskReadsBackAfterReopening() throws {
        let db = try open("large.strata", DatabaseOptions(durability: .full, checkpointThresholdFrames: 100_000))
        try writeLargeCommits(db, rewrites: 2)
        try checkValues(db, round: 2)
        try db.checkpoint()
        try rewrite(db, 3)
        try db.close()
        let reopened = try open("large.strata")
        try checkValues(reopened, round: 3)
        try reopened.close()
    }
}
