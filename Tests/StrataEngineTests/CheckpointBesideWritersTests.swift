import Foundation
import StrataEngine
import XCTest

/// An automatic checkpoint copies frames into the main file and syncs it
/// without the writer gate or the writer lock: writers commit meanwhile
/// (before, a save that followed a large one waited 7–15 ms for the copy
/// and the sync). What they do then must survive the copy: new images of
/// the pages it copies, pages freed and reused, fresh pages written into
/// the main file by a large commit, a log that must not restart.
final class CheckpointBesideWritersTests: EngineTestCase {
    /// Holds the background checkpoint's copy until the test lets it go.
    private final class CopyHold: @unchecked Sendable {
        let copying = DispatchSemaphore(value: 0)
        let resume = DispatchSemaphore(value: 0)
        private let lock = NSLock()
        private var held = false  // guarded by lock

        /// The hook: holds the first copy only (up to 30 s).
        func hold() {
            let first = lock.withLock {
                defer { held = true }
                return !held
            }
            guard first else { return }
            copying.signal()
            _ = resume.wait(timeout: .now() + 30)
        }
    }

    private func options(cachePages: Int = 1_024) -> DatabaseOptions {
        var options = DatabaseOptions(durability: .full, cacheSizeBytes: cachePages * 4096, checkpointThresholdFrames: 24)
        options.checkpointsInBackground = true
        return options
    }

    /// Commits until the log reaches the threshold, which sets the
    /// background checkpoint off; returns how many keys it wrote.
    private func fillPastThreshold(_ db: Database) throws -> Int {
        var written = 0
        while db.statistics.walFrames < 24 {
            try db.write { tx in try tx.put(key(written), value(written, 0), in: try tx.tree("t")) }
            written += 1
        }
        return written
    }

    /// A new store whose background checkpoint copies beside writers,
    /// filled until one starts, and held just before its copy; the store,
    /// the hold and how many keys were written.
    private func storeHeldAtCopy(cachePages: Int = 1_024) throws -> (Database, CopyHold, Int) {
        let db = try open("store.strata", options(cachePages: cachePages))
        db.pagesCopiedBesideWriters = 1
        try db.write { tx in _ = try tx.createTree("t") }
        let hold = CopyHold()
        db.beforeCheckpointCopy = { hold.hold() }
        let written = try fillPastThreshold(db)
        XCTAssertEqual(hold.copying.wait(timeout: .now() + 20), .success, "no background checkpoint started")
        return (db, hold, written)
    }

    private func waitForCheckpoint(_ db: Database) {
        let deadline = Date() + 30
        while db.automaticCheckpointInProgress && Date() < deadline { usleep(1_000) }
        XCTAssertFalse(db.automaticCheckpointInProgress, "the background checkpoint never finished")
    }

    /// While the checkpoint waits to copy, a write transaction of the same
    /// handle begins and commits (durably); the checkpoint then publishes,
    /// short of that commit, and copies that commit too before it lets
    /// writers in again, so the next commit restarts the log. With the
    /// gate held through the copy, the write waited for the hook's 30 s and
    /// the test failed after 10.
    func testAWriterCommitsWhileTheCheckpointCopies() throws {
        let (db, hold, written) = try storeHeldAtCopy()
        XCTAssertEqual(db.statistics.checkpoints, 0)
        let committed = DispatchSemaphore(value: 0)
        let errors = ErrorList()
        Thread {
            do {
                try db.write { tx in try tx.put(Array("during".utf8), [1, 2, 3], in: try tx.tree("t")) }
            } catch {
                errors.add(error)
            }
            committed.signal()
        }.start()
        let outcome = committed.wait(timeout: .now() + 10)
        XCTAssertEqual(outcome, .success, "the write waited for the checkpoint's copy")
        hold.resume.signal()
        if outcome != .success { _ = committed.wait(timeout: .now() + 40) }
        XCTAssertEqual(errors.all, [])
        waitForCheckpoint(db)
        db.beforeCheckpointCopy = nil
        XCTAssertEqual(db.statistics.checkpoints, 2, "the copy beside the writer, then the commit it made")
        XCTAssertEqual(db.statistics.partialCheckpoints, 1, "the first stopped short of the commit made during it")
        let restarts = db.statistics.walRestarts
        try db.write { tx in try tx.put(Array("after".utf8), [4], in: try tx.tree("t")) }
        XCTAssertEqual(db.statistics.walRestarts, restarts + 1, "the log held frames the checkpoint left behind")
        XCTAssertEqual(try db.read { tx in try tx.get(Array("during".utf8), in: try tx.tree("t")) }, [1, 2, 3])
        XCTAssertEqual(try db.read { tx in try tx.count(try tx.tree("t")) }, written + 2)
        try db.close()
    }

    /// While the copy waits, the writer rewrites every key the copy holds
    /// (new images of its pages), deletes half of them (pages freed), and
    /// loads enough new keys in one transaction to spill (fresh pages
    /// written straight into the main file, where the copy must not land
    /// and the checkpoint must not cut them off). Then the copy runs; the
    /// store holds exactly the last values, in this handle, after a manual
    /// checkpoint, and reopened, and checks healthy.
    func testWhatWritersDidDuringTheCopySurvivesIt() throws {
        let (db, hold, first) = try storeHeldAtCopy(cachePages: 32)
        var expected: [[UInt8]: [UInt8]] = [:]
        for i in 0..<first { expected[key(i)] = value(i, 0) }
        try db.write { tx in
            let tree = try tx.tree("t")
            for i in 0..<first {
                try tx.put(key(i), value(i, 1), in: tree)
                expected[key(i)] = value(i, 1)
            }
        }
        try db.write { tx in
            let tree = try tx.tree("t")
            for i in stride(from: 0, to: first, by: 2) {
                try tx.delete(key(i), in: tree)
                expected[key(i)] = nil
            }
        }
        let loaded = 3_000
        try db.write { tx in
            let tree = try tx.tree("t")
            for i in first..<(first + loaded) {
                try tx.put(key(i), value(i, 2), in: tree)
                expected[key(i)] = value(i, 2)
            }
        }
        XCTAssertGreaterThan(db.statistics.spilledPages, 0, "the load did not spill")
        hold.resume.signal()
        waitForCheckpoint(db)
        db.beforeCheckpointCopy = nil

        func verify(_ db: Database, _ when: String) throws {
            let stored = try db.read { tx in
                var all: [[UInt8]: [UInt8]] = [:]
                let tree = try tx.tree("t")
                for i in 0..<(first + loaded) {
                    if let value = try tx.get(key(i), in: tree) { all[key(i)] = value }
                }
                return (all, try tx.count(tree))
            }
            XCTAssertEqual(stored.1, expected.count, when)
            XCTAssertTrue(stored.0 == expected, "values differ \(when)")
        }
        try verify(db, "after the copy")
        try db.checkpoint()
        try verify(db, "after a checkpoint of the rest")
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
        let again = try open("store.strata", options(cachePages: 32))
        try verify(again, "reopened")
        XCTAssertTrue(try again.check().isHealthy)
        try again.close()
    }

    /// `close()` while the checkpoint copies without the gate, with another
    /// handle's writer holding the writer lock (so the close checkpoints
    /// nothing itself): it waits for the copy before it closes the files the
    /// copy writes. It returned at once before, and the copy wrote through
    /// closed descriptors (or ones reused by other files).
    func testCloseWaitsForACopyInFlight() throws {
        let (a, hold, written) = try storeHeldAtCopy()
        let b = try open("store.strata", options())
        let held = try b.beginWrite()
        let closed = DispatchSemaphore(value: 0)
        let errors = ErrorList()
        Thread {
            do { try a.close() } catch { errors.add(error) }
            closed.signal()
        }.start()
        XCTAssertEqual(closed.wait(timeout: .now() + 1), .timedOut, "close() returned while the copy was under way")
        hold.resume.signal()
        XCTAssertEqual(closed.wait(timeout: .now() + 30), .success, "close() never returned")
        XCTAssertEqual(errors.all, [])
        held.rollback()
        XCTAssertEqual(try b.read { tx in try tx.count(try tx.tree("t")) }, written)
        try b.close()
        let again = try open("store.strata", options())
        XCTAssertEqual(try again.read { tx in try tx.count(try tx.tree("t")) }, written)
        XCTAssertTrue(try again.check().isHealthy)
        try again.close()
    }

    /// Several threads commit while background checkpoints come and go
    /// (a low threshold sets one off every few commits); every commit is
    /// kept, and the store checks healthy once closed and opened again.
    func testCommitsOfSeveralThreadsBesideBackgroundCheckpoints() throws {
        var options = options()
        options.checkpointThresholdFrames = 8
        let db = try open("store.strata", options)
        db.pagesCopiedBesideWriters = 1
        try db.write { tx in _ = try tx.createTree("t") }
        let errors = ErrorList()
        let group = DispatchGroup()
        let threads = 6
        let commits = 120
        for thread in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    for j in 0..<commits {
                        let i = thread * commits + j
                        try db.write { tx in
                            let tree = try tx.tree("t")
                            try tx.put(key(i), value(i, 0, size: 900), in: tree)
                            // Rewrites an earlier key of this thread: pages
                            // the running checkpoint may be copying.
                            if j > 0 { try tx.put(key(i - 1), value(i - 1, 1, size: 900), in: tree) }
                        }
                    }
                } catch {
                    errors.add(error)
                }
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(errors.all, [])
        waitForCheckpoint(db)
        XCTAssertGreaterThan(db.statistics.checkpoints, 3)
        try db.close()
        let again = try open("store.strata", options)
        try again.read { tx in
            let tree = try tx.tree("t")
            XCTAssertEqual(try tx.count(tree), threads * commits)
            for thread in 0..<threads {
                for j in 0..<commits {
                    let i = thread * commits + j
                    let round = j == commits - 1 ? 0 : 1
                    XCTAssertEqual(try tx.get(key(i), in: tree), value(i, round, size: 900), "key \(i)")
                }
            }
        }
        XCTAssertTrue(try again.check().isHealthy)
        try again.close()
    }
}

private func key(_ i: Int) -> [UInt8] { Array(String(format: "key %06d", i).utf8) }

/// Key `i`'s value in round `round` (its first byte), `size` bytes.
private func value(_ i: Int, _ round: Int, size: Int = 300) -> [UInt8] {
    var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: i &* 31 &+ round), count: size)
    bytes[0] = UInt8(truncatingIfNeeded: round)
    return bytes
}
