import Foundation
import StrataEngine
import XCTest

/// Group commit (durability `full`): commits of several threads that
/// arrive while a log sync is in flight share the next sync, each commit
/// returns only once it is durable, and readers never see a commit before
/// its sync.
final class GroupCommitTests: EngineTestCase {
    let path = "/group/store.strata"

    /// Holds the first sync of the log until `followers` more commits have
    /// been written to the log, then lets it go. Counts log syncs.
    final class SyncGate: @unchecked Sendable {
        private let condition = NSCondition()
        private var logWrites = 0  // guarded by condition
        private var held = false  // guarded by condition
        private var released = false  // guarded by condition
        private(set) var logSyncs = 0  // guarded by condition
        let followers: Int
        let log: String

        init(followers: Int, log: String) {
            self.followers = followers
            self.log = log
        }

        /// The file system's fault hook: never fails an operation.
        func observe(_ operation: FileOperation) -> Int32? {
            guard operation.path == log else { return nil }
            condition.lock()
            defer { condition.unlock() }
            switch operation.kind {
            case .write:
                logWrites += 1
                condition.broadcast()
            case .sync:
                logSyncs += 1
                if !held {
                    // The first sync: the leader. Hold it until every
                    // follower appended (each commit is one write here).
                    held = true
                    let target = logWrites + followers
                    while logWrites < target { condition.wait() }
                    released = true
                }
            default:
                break
            }
            return nil
        }

        var syncs: Int {
            condition.lock()
            defer { condition.unlock() }
            return logSyncs
        }

        var leaderReleased: Bool {
            condition.lock()
            defer { condition.unlock() }
            return released
        }

        /// Waits until the leader's sync has begun.
        func waitForLeader() {
            condition.lock()
            defer { condition.unlock() }
            while !held { _ = condition.wait(until: Date().addingTimeInterval(0.01)) }
        }
    }

    /// A leader commits (key 1) and blocks in its sync; then
    /// `gate.followers` threads commit (keys 10...) while it syncs, each
    /// appending and waiting. Errors go to `errors`; wait on the group.
    func leaderAndFollowers(_ db: Database, gate: SyncGate, errors: ErrorList) -> DispatchGroup {
        let done = DispatchGroup()
        func commit(_ key: UInt8) {
            done.enter()
            Thread {
                do { try db.write { tx in try tx.put([key], [key], in: try tx.tree("t")) } } catch { errors.add(error) }
                done.leave()
            }.start()
        }
        commit(1)
        gate.waitForLeader()
        for i in 0..<gate.followers { commit(UInt8(10 + i)) }
        return done
    }

    func testCommitsArrivingDuringASyncShareTheNextOne() throws {
        let fs = MemoryFileSystem()
        let db = try open(path, fileSystem: fs)
        try db.write { tx in try tx.put([0], [0], in: try tx.createTree("t")) }
        let followers = 7
        let gate = SyncGate(followers: followers, log: path + "-wal")
        fs.faults = { gate.observe($0) }
        let syncsBefore = db.statistics.logSyncs

        // The leader commits and blocks in its sync.
        let errors = ErrorList()
        let done = leaderAndFollowers(db, gate: gate, errors: errors)
        // Until the leader's sync returns, no reader sees any of the new
        // commits.
        while !gate.leaderReleased {
            let count = try db.read { tx in try tx.count(try tx.tree("t")) }
            XCTAssertEqual(count, 1, "a reader saw a commit before its sync")
            usleep(200)
        }
        done.wait()
        XCTAssertEqual(errors.all, [])
        let count = try db.read { tx in try tx.count(try tx.tree("t")) }
        XCTAssertEqual(count, 2 + followers)
        // The leader's sync, then one sync for the followers: all but the
        // last had queued their commit when the leader's sync returned
        // (each follower's write to the log follows the previous one's
        // queueing), and the last may need a third. One sync per commit
        // would be eight.
        XCTAssertGreaterThanOrEqual(gate.syncs, 2)
        XCTAssertLessThanOrEqual(gate.syncs, 3)
        XCTAssertEqual(db.statistics.logSyncs - syncsBefore, gate.syncs)
        fs.faults = nil
        try db.close()

        // Everything survives a power loss right after.
        let image = fs.afterPowerLoss(seed: 1)
        let reopened = try open(path, fileSystem: image)
        XCTAssertEqual(try reopened.read { tx in try tx.count(try tx.tree("t")) }, 2 + followers)
        try reopened.close()
    }

    func testAFailedSharedSyncFailsEveryCommitWaitingOnIt() throws {
        let fs = MemoryFileSystem()
        let db = try open(path, fileSystem: fs)
        try db.write { tx in try tx.put([0], [0], in: try tx.createTree("t")) }
        let followers = 5
        let gate = SyncGate(followers: followers, log: path + "-wal")
        // The second sync (the followers' shared one) fails.
        let log = path + "-wal"
        fs.faults = { operation in
            _ = gate.observe(operation)
            return operation.path == log && operation.kind == .sync && gate.syncs == 2 ? EIO : nil
        }
        let errors = ErrorList()
        let done = leaderAndFollowers(db, gate: gate, errors: errors)
        done.wait()
        // The leader's commit is durable; each follower got the error.
        XCTAssertEqual(errors.all.count, followers, "\(errors.all)")
        XCTAssertEqual(try db.read { tx in try tx.count(try tx.tree("t")) }, 2)
        // The handle refuses writes after a failed fsync.
        XCTAssertThrowsError(try db.write { tx in try tx.put([2], [2], in: try tx.tree("t")) })
        fs.faults = nil
        try? db.close()
        // Reopened, the store holds the leader's commit, and no follower's
        // in part: each follower's commit is whole or absent.
        let image = fs.afterProcessCrash()
        let reopened = try open(path, fileSystem: image)
        let keys = try reopened.read { tx in try tx.scan(try tx.tree("t")).map(\.0) }
        XCTAssertTrue(keys.contains([1]))
        XCTAssertTrue(try reopened.check().isHealthy)
        try reopened.close()
    }

    /// `threads` threads each commit `commits` puts into tree "t" (which
    /// must exist), one per commit; returns the errors they met.
    func commitOnThreads(_ db: Database, threads: Int, commits: Int) -> [String] {
        let errors = ErrorList()
        let done = DispatchGroup()
        for t in 0..<threads {
            done.enter()
            Thread {
                for c in 0..<commits {
                    do {
                        try db.write { tx in
                            try tx.put(Array("t\(t)-c\(c)".utf8), Array(repeating: UInt8(c), count: 100), in: try tx.tree("t"))
                        }
                    } catch {
                        errors.add(error)
                    }
                }
                done.leave()
            }.start()
        }
        done.wait()
        return errors.all
    }

    func testManyThreadsCommitEverythingTheyWereToldWasDurable() throws {
        let db = try open()
        try db.write { tx in _ = try tx.createTree("t") }
        let threads = 16
        let commits = 40
        XCTAssertEqual(commitOnThreads(db, threads: threads, commits: commits), [])
        XCTAssertEqual(try db.read { tx in try tx.count(try tx.tree("t")) }, threads * commits)
        XCTAssertEqual(db.statistics.commits, threads * commits + 1)
        try db.close()
    }
}

extension GroupCommitTests {
    /// Every commit appended while the log was past the checkpoint
    /// threshold ran the automatic checkpoint: it took the gate, waited
    /// for every pending commit (stalling the others) and, all but the
    /// first, found the frames copied. One runs at a time now, and only
    /// while frames are left to copy, so each run checkpoints.
    func testOneAutomaticCheckpointServesTheCommitsThatFoundTheLogLong() throws {
        let db = try open("store.strata", DatabaseOptions(durability: .full, checkpointThresholdFrames: 24))
        try db.write { tx in _ = try tx.createTree("t") }
        final class Runs: @unchecked Sendable {
            private let lock = NSLock()
            private var count = 0  // guarded by lock
            func add() { lock.withLock { count += 1 } }
            var total: Int { lock.withLock { count } }
        }
        let runs = Runs()
        db.beforeAutomaticCheckpoint = { runs.add() }
        let errors = commitOnThreads(db, threads: 8, commits: 100)
        db.beforeAutomaticCheckpoint = nil
        XCTAssertEqual(errors, [])
        XCTAssertEqual(try db.read { tx in try tx.count(try tx.tree("t")) }, 800)
        let checkpoints = db.statistics.checkpoints
        XCTAssertGreaterThan(checkpoints, 5, "the log passed its threshold again and again")
        XCTAssertLessThanOrEqual(runs.total, checkpoints, "automatic checkpoints that found nothing to copy")
        try db.close()
    }
}

/// Errors of several threads, guarded by `lock`.
final class ErrorList: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [String] = []  // guarded by lock

    func add(_ error: any Error) { lock.withLock { errors.append("\(error)") } }
    var all: [String] { lock.withLock { errors } }
}

extension GroupCommitTests {
    /// With `checkpointsInBackground`, the commit that brings the log past
    /// its threshold returns while its checkpoint still waits (here, held
    /// in the hook on another thread, with the writer gate); the next write
    /// transaction waits for the checkpoint, which copies the log.
    func testBackgroundCheckpointRunsAfterTheCommitReturns() throws {
        var options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 24)
        options.checkpointsInBackground = true
        let db = try open("store.strata", options)
        try db.write { tx in _ = try tx.createTree("t") }
        let hook = CheckpointHold()
        db.beforeAutomaticCheckpoint = { hook.hold() }
        var written = 0
        while db.statistics.walFrames < 24 {
            try db.write { tx in try tx.put(Array("k\(written)".utf8), [UInt8](repeating: 7, count: 900), in: try tx.tree("t")) }
            written += 1
        }
        XCTAssertFalse(hook.ranOnCommitter, "the checkpoint ran before the commit returned")
        XCTAssertEqual(hook.entered.wait(timeout: .now() + 20), .success, "no checkpoint started")
        XCTAssertEqual(db.statistics.checkpoints, 0)
        hook.proceed.signal()
        // Takes the gate after the checkpoint.
        try db.write { tx in try tx.put(Array("last".utf8), [1], in: try tx.tree("t")) }
        db.beforeAutomaticCheckpoint = nil
        XCTAssertEqual(db.statistics.checkpoints, 1)
        // The run gave its claim back: the log passing the threshold again
        // sets off another (each write waits for a running one).
        var more = 0
        while db.statistics.checkpoints < 2 && more < 500 {
            try db.write { tx in try tx.put(Array("m\(more)".utf8), [UInt8](repeating: 9, count: 900), in: try tx.tree("t")) }
            more += 1
        }
        try db.write { tx in try tx.put(Array("after".utf8), [2], in: try tx.tree("t")) }
        XCTAssertGreaterThanOrEqual(db.statistics.checkpoints, 2, "no second background checkpoint after \(more) commits")
        XCTAssertEqual(try db.read { tx in try tx.count(try tx.tree("t")) }, written + more + 2)
        try db.close()
    }

    /// A background checkpoint that copied every frame, with no reader
    /// left on the log, restarts the log itself: the next commit writes
    /// its frames at once, without writing and syncing a new header first,
    /// and the store reads and reopens whole.
    func testABackgroundCheckpointRestartsTheLog() throws {
        var options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 16)
        options.checkpointsInBackground = true
        let db = try open("store.strata", options)
        try db.write { tx in _ = try tx.createTree("t") }
        var written = 0
        while db.statistics.walFrames < 16 {
            try db.write { tx in try tx.put(Array("k\(written)".utf8), [UInt8](repeating: 4, count: 900), in: try tx.tree("t")) }
            written += 1
        }
        let restarts = db.statistics.walRestarts
        let deadline = Date() + 20
        while (db.statistics.checkpoints == 0 || db.automaticCheckpointInProgress) && Date() < deadline { usleep(1_000) }
        XCTAssertEqual(db.statistics.checkpoints, 1, "no background checkpoint ran")
        XCTAssertEqual(db.statistics.walRestarts, restarts + 1, "the checkpoint left the restart to the next commit")
        XCTAssertEqual(db.statistics.walFrames, 0)
        try db.write { tx in try tx.put(Array("after".utf8), [2], in: try tx.tree("t")) }
        XCTAssertEqual(db.statistics.walRestarts, restarts + 1, "the next commit restarted the log again")
        XCTAssertLessThan(db.statistics.walFrames, 16, "the commit did not start the log over")
        XCTAssertEqual(try db.read { tx in try tx.count(try tx.tree("t")) }, written + 1)
        try db.close()
        let again = try open("store.strata", options)
        XCTAssertEqual(try again.read { tx in try tx.get(Array("after".utf8), in: try tx.tree("t")) }, [2])
        XCTAssertEqual(try again.read { tx in try tx.count(try tx.tree("t")) }, written + 1)
        XCTAssertTrue(try again.check().isHealthy)
        try again.close()
    }

    /// A background checkpoint that reaches the writer gate only after
    /// `close()` returned finds the handle closed and stops there: nothing
    /// past its check runs (the files are closed), it gives its claim
    /// back, and the store opens again whole.
    func testABackgroundCheckpointThatReachesTheGateAfterCloseStops() throws {
        var options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 8)
        options.checkpointsInBackground = true
        let db = try open("store.strata", options)
        try db.write { tx in _ = try tx.createTree("t") }
        let hooks = CheckpointHold()
        db.beforeAutomaticCheckpointGate = { hooks.hold() }
        db.beforeAutomaticCheckpoint = { hooks.mark() }
        var written = 0
        while db.statistics.walFrames < 8 {
            try db.write { tx in
                try tx.put(Array("k\(written)".utf8), [UInt8](repeating: 5, count: 1_500), in: try tx.tree("t"))
            }
            written += 1
        }
        XCTAssertEqual(hooks.entered.wait(timeout: .now() + 20), .success, "no background checkpoint started")
        try db.close()
        hooks.proceed.signal()
        let deadline = Date() + 20
        while db.automaticCheckpointInProgress && Date() < deadline { usleep(1_000) }
        XCTAssertFalse(db.automaticCheckpointInProgress, "the background checkpoint kept its claim")
        XCTAssertFalse(hooks.wasMarked, "the background checkpoint went on after close()")
        let again = try open("store.strata", options)
        XCTAssertEqual(try again.read { tx in try tx.count(try tx.tree("t")) }, written)
        XCTAssertTrue(try again.check().isHealthy)
        try again.close()
    }

    /// A handle closed right after a commit that set off a background
    /// checkpoint: the checkpoint finds it closed or finishes first, the
    /// close returns, and the store opens again whole.
    func testCloseRightAfterABackgroundCheckpointStarts() throws {
        var options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 8)
        options.checkpointsInBackground = true
        var expected = 0
        for round in 0..<20 {
            let db = try open("store.strata", options)
            try db.write { tx in _ = try tx.treeIfPresent("t") ?? tx.createTree("t") }
            while db.statistics.walFrames < 8 {
                try db.write { tx in
                    try tx.put(Array("r\(round) k\(expected)".utf8), [UInt8](repeating: 3, count: 1_500), in: try tx.tree("t"))
                }
                expected += 1
            }
            try db.close()
        }
        let db = try open("store.strata", options)
        XCTAssertEqual(try db.read { tx in try tx.count(try tx.tree("t")) }, expected)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
    }
}

/// Holds a background checkpoint in an engine hook until the test lets it
/// go. On the committing thread (a checkpoint not in the background) it
/// never blocks, or the test would hang: it notes that it ran there.
private final class CheckpointHold: @unchecked Sendable {
    let entered = DispatchSemaphore(value: 0)
    let proceed = DispatchSemaphore(value: 0)
    private let committer = pthread_self()
    private let lock = NSLock()
    private var onCommitter = false  // guarded by lock
    private var marked = false  // guarded by lock

    var ranOnCommitter: Bool { lock.withLock { onCommitter } }
    var wasMarked: Bool { lock.withLock { marked } }

    func hold() {
        guard pthread_equal(pthread_self(), committer) == 0 else {
            lock.withLock { onCommitter = true }
            return
        }
        entered.signal()
        proceed.wait()
    }

    func mark() { lock.withLock { marked = true } }
}
