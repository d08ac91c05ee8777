import Foundation
import StrataEngine
import XCTest

/// A small commit of durability `full` writes its frames after it releases
/// the writer gate: the next writer's transaction runs while the `pwrite`
/// does. A write that fails there fails its commit and every commit queued
/// after it, and the handle goes on from the commit before.
final class DeferredLogWriteTests: EngineTestCase {
    let path = "/deferred/store.strata"
    var log: String { path + "-wal" }

    /// The file system's fault hook: once armed, holds the next frame write
    /// to the log until ``release(failing:)`` and then fails it or lets it
    /// through; counts the frame writes it saw.
    final class WriteHold: @unchecked Sendable {
        private let condition = NSCondition()
        private var armed = false  // guarded by condition
        private var holding = false  // guarded by condition
        private var verdict: Int32?? = .none  // guarded by condition
        private(set) var frameWrites = 0  // guarded by condition
        let log: String

        init(log: String) { self.log = log }

        func observe(_ operation: FileOperation) -> Int32? {
            // Frames start after the log's 32-byte header; the zeros a
            // small commit writes ahead of itself are not frames but pass
            // here too, so only a write a frame long or longer counts.
            guard operation.path == log, operation.kind == .write, operation.offset >= 32, operation.count >= 4096 + 24
            else { return nil }
            condition.lock()
            defer { condition.unlock() }
            frameWrites += 1
            condition.broadcast()
            guard armed else { return nil }
            armed = false
            holding = true
            condition.broadcast()
            while verdict == .none { condition.wait() }
            holding = false
            let errno = verdict ?? nil
            verdict = .none
            return errno
        }

        func arm() { condition.withLock { armed = true } }

        /// Waits until a write is held; false after `seconds`.
        func waitUntilHolding(seconds: Double = 10) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            let deadline = Date().addingTimeInterval(seconds)
            while !holding { if !condition.wait(until: deadline) { return holding } }
            return true
        }

        /// Waits until `count` frame writes were seen; false after `seconds`.
        func waitForFrameWrites(_ count: Int, seconds: Double = 10) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            let deadline = Date().addingTimeInterval(seconds)
            while frameWrites < count { if !condition.wait(until: deadline) { return frameWrites >= count } }
            return true
        }

        func release(failing errno: Int32?) {
            condition.withLock {
                verdict = .some(errno)
                condition.broadcast()
            }
        }
    }

    /// Commits key `key` on a new thread; `done` is left when it returns.
    func commitOnThread(_ db: Database, _ key: UInt8, errors: ErrorList, done: DispatchGroup) {
        done.enter()
        Thread {
            do { try db.write { tx in try tx.put([key], [key], in: try tx.tree("t")) } } catch { errors.add(error) }
            done.leave()
        }.start()
    }

    func keys(_ db: Database) throws -> [[UInt8]] {
        try db.read { tx in try tx.scan(try tx.tree("t")).map(\.0) }
    }

    /// A store with key 0 committed, and a commit of key 1 on another
    /// thread whose frame write `hold` holds; `done` is left when that
    /// commit returns, and its error goes to `errors`.
    func storeWithAHeldCommit() throws -> (
        fs: MemoryFileSystem, db: Database, hold: WriteHold, errors: ErrorList, done: DispatchGroup
    ) {
        let fs = MemoryFileSystem()
        let db = try open(path, options: DatabaseOptions(durability: .full), fileSystem: fs)
        try db.write { tx in try tx.put([0], [0], in: try tx.createTree("t")) }
        let hold = WriteHold(log: log)
        fs.faults = { hold.observe($0) }
        hold.arm()
        let errors = ErrorList()
        let done = DispatchGroup()
        commitOnThread(db, 1, errors: errors, done: done)
        XCTAssertTrue(hold.waitUntilHolding(), "the commit never wrote its frames")
        return (fs, db, hold, errors, done)
    }

    func testTheNextTransactionRunsWhileACommitWritesItsFrames() throws {
        let (fs, db, hold, errors, done) = try storeWithAHeldCommit()
        // The commit's frames are not written yet, and the gate is free:
        // another transaction begins and reads what is published.
        let began = DispatchSemaphore(value: 0)
        let seen = ErrorList()
        Thread {
            do {
                let tx = try db.beginWrite()
                if try tx.get([1], in: try tx.tree("t")) != [1] { seen.add(StorageError.transactionEnded) }
                tx.rollback()
            } catch {
                seen.add(error)
            }
            began.signal()
        }.start()
        let free = began.wait(timeout: .now() + 10) == .success
        XCTAssertTrue(free, "the writer gate stayed held while the commit wrote its frames")
        // The pending commit is not visible to readers until its sync.
        XCTAssertEqual(try keys(db), [[0]])
        hold.release(failing: nil)
        done.wait()
        if !free { _ = began.wait(timeout: .now() + 10) }
        XCTAssertEqual(errors.all, [])
        XCTAssertEqual(seen.all, [], "the next transaction did not continue from the pending commit")
        XCTAssertEqual(try keys(db), [[0], [1]])
        fs.faults = nil
        try db.close()
        let reopened = try open(path, fileSystem: fs.afterPowerLoss())
        XCTAssertEqual(try keys(reopened), [[0], [1]])
        try reopened.close()
    }

    /// A commit's deferred write fails while a later commit, appended after
    /// it, wrote its own frames: both fail, the handle writes on from the
    /// commit before them, and a power loss keeps exactly the commits that
    /// returned.
    func testAFailedFrameWriteFailsTheCommitsAfterItAndTheHandleGoesOn() throws {
        let (fs, db, hold, errors, done) = try storeWithAHeldCommit()
        let before = hold.frameWrites
        // The second commit continues from the first and writes its frames
        // after them; it then waits for a sync, which waits for the first.
        commitOnThread(db, 2, errors: errors, done: done)
        XCTAssertTrue(hold.waitForFrameWrites(before + 1))
        hold.release(failing: EIO)
        done.wait()
        XCTAssertEqual(errors.all.count, 2, "\(errors.all)")
        XCTAssertTrue(errors.all.allSatisfy { $0.contains("pwrite") }, "\(errors.all)")
        XCTAssertEqual(try keys(db), [[0]])
        // The handle goes on: the next commit appends where the first one
        // did, and its sync makes it durable.
        try db.write { tx in try tx.put([3], [3], in: try tx.tree("t")) }
        XCTAssertEqual(try keys(db), [[0], [3]])
        fs.faults = nil
        let image = fs.afterPowerLoss()
        try db.close()
        let reopened = try open(path, fileSystem: image)
        XCTAssertEqual(try keys(reopened), [[0], [3]])
        XCTAssertTrue(try reopened.check().isHealthy)
        try reopened.close()
    }

    /// A transaction that began on top of a commit whose frame write then
    /// failed cannot commit: its frames would follow the hole, and a
    /// recovery would drop them although the commit returned.
    func testATransactionBuiltOnAFailedCommitFails() throws {
        let (fs, db, hold, errors, done) = try storeWithAHeldCommit()
        // Begun while the first commit is pending: it sees its key.
        let tx = try db.beginWrite()
        let tree = try tx.tree("t")
        XCTAssertEqual(try tx.get([1], in: tree), [1])
        try tx.put([2], [2], in: tree)
        hold.release(failing: EIO)
        done.wait()
        XCTAssertEqual(errors.all.count, 1)
        XCTAssertThrowsError(try tx.commit())
        XCTAssertEqual(try keys(db), [[0]])
        try db.write { tx in try tx.put([3], [3], in: try tx.tree("t")) }
        fs.faults = nil
        let image = fs.afterPowerLoss()
        try db.close()
        let reopened = try open(path, fileSystem: image)
        XCTAssertEqual(try keys(reopened), [[0], [3]])
        try reopened.close()
    }

    /// A leader's sync fails while a later commit's frames are still being
    /// written: both commits fail, the handle refuses writes, and closing
    /// it waits until that write is over (a write landing after the close
    /// could fall among a reopened log's frames).
    func testAFailedSyncWaitsForTheFrameWritesStillInFlight() throws {
        let fs = MemoryFileSystem()
        let db = try open(path, options: DatabaseOptions(durability: .full), fileSystem: fs)
        try db.write { tx in try tx.put([0], [0], in: try tx.createTree("t")) }
        let hold = WriteHold(log: log)
        let syncHeld = DispatchSemaphore(value: 0)
        let failSync = DispatchSemaphore(value: 0)
        let armedSync = FaultCounter()
        let log = log
        fs.faults = { operation in
            if operation.path == log, operation.kind == .sync, armedSync.next() == 1 {
                syncHeld.signal()
                failSync.wait()
                return EIO
            }
            return hold.observe(operation)
        }
        let errors = ErrorList()
        let done = DispatchGroup()
        // The first commit writes its frames and leads a sync, held.
        commitOnThread(db, 1, errors: errors, done: done)
        XCTAssertEqual(syncHeld.wait(timeout: .now() + 10), .success)
        // The second commit's frame write is held.
        hold.arm()
        commitOnThread(db, 2, errors: errors, done: done)
        XCTAssertTrue(hold.waitUntilHolding())
        failSync.signal()
        // Closing waits for the held write.
        let closed = DispatchSemaphore(value: 0)
        Thread {
            try? db.close()
            closed.signal()
        }.start()
        XCTAssertEqual(
            closed.wait(timeout: .now() + 0.3), .timedOut, "close returned while a commit's frames were being written")
        hold.release(failing: nil)
        done.wait()
        XCTAssertEqual(closed.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(errors.all.count, 2, "\(errors.all)")
        fs.faults = nil
        let reopened = try open(path, fileSystem: fs.afterPowerLoss())
        XCTAssertEqual(try keys(reopened), [[0]])
        XCTAssertTrue(try reopened.check().isHealthy)
        try reopened.close()
    }

    /// Threads commit while one frame write in seven fails: every commit
    /// that returned survives a power loss, none that threw does, and the
    /// store is whole.
    func testCommitsThatReturnedSurviveFailingFrameWrites() throws {
        let fs = MemoryFileSystem()
        let db = try open(path, options: DatabaseOptions(durability: .full), fileSystem: fs)
        try db.write { tx in try tx.put([0, 0], [0], in: try tx.createTree("t")) }
        let counter = FaultCounter()
        let log = log
        fs.faults = { operation in
            guard operation.path == log, operation.kind == .write, operation.offset >= 32,
                operation.count >= 4096 + 24
            else { return nil }
            return counter.next() % 7 == 3 ? EIO : nil
        }
        let committed = KeyList()
        let failed = KeyList()
        let done = DispatchGroup()
        for t in 0..<8 {
            done.enter()
            Thread {
                for c in 0..<30 {
                    let key = [UInt8(t + 1), UInt8(c)]
                    do {
                        try db.write { tx in try tx.put(key, key, in: try tx.tree("t")) }
                        committed.add(key)
                    } catch {
                        failed.add(key)
                    }
                }
                done.leave()
            }.start()
        }
        done.wait()
        XCTAssertGreaterThan(failed.all.count, 0, "no write failed: the test tested nothing")
        XCTAssertGreaterThan(committed.all.count, 0)
        XCTAssertEqual(committed.all.count + failed.all.count, 8 * 30)
        fs.faults = nil
        // The keys stored and not committed, or committed and not stored.
        let expected = Set(committed.all + [[0, 0]])
        XCTAssertEqual(Set(try keys(db)).symmetricDifference(expected), [])
        let image = fs.afterPowerLoss()
        try db.close()
        let reopened = try open(path, fileSystem: image)
        XCTAssertEqual(Set(try keys(reopened)).symmetricDifference(expected), [])
        XCTAssertTrue(try reopened.check().isHealthy)
        try reopened.close()
    }
}

/// Keys recorded by several threads.
final class KeyList: @unchecked Sendable {
    private let lock = NSLock()
    private var keys: [[UInt8]] = []  // guarded by lock

    func add(_ key: [UInt8]) { lock.withLock { keys.append(key) } }
    var all: [[UInt8]] { lock.withLock { keys } }
}

/// A counter shared by the threads of a fault hook.
final class FaultCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0  // guarded by lock

    func next() -> Int {
        lock.withLock {
            count += 1
            return count
        }
    }
}
