import Foundation
import StrataEngine
import StrataTesting
import XCTest

/// Power loss around transactions that spill (write pages into the main
/// file before their commit): at every sync point, and at every write into
/// the main file (in the middle of a spill, of a commit's fresh pages, of a
/// checkpoint). Recovery must find the last acknowledged commit, or the
/// one in flight whole, and never a spilled transaction's pages as a
/// commit; a rolled-back spill leaves nothing behind.
///
/// `STRATA_CRASH_SEEDS` sets the seeds tried per crash point (default 3).
final class SpillCrashTests: CrashTestCase {
    let path = "/crash/spill.strata"

    /// The budget in pages. 16: the big commits spill; small commits do
    /// not. 64: the loads do not spill and write their fresh pages into the
    /// main file at their commit (a quarter of the budget or more); the
    /// rewrites of commits 5 and 7 spill.
    var budgetPages = 16

    var options: DatabaseOptions {
        var options = DatabaseOptions(durability: .full, cacheSizeBytes: budgetPages * 4096)
        options.checkpointThresholdFrames = 24
        return options
    }

    static let commits = 9
    /// The commit whose transaction spills and then rolls back.
    static let rolledBack = 4

    /// Commit `c`: even ones load 400 keys in scattered order (some values
    /// spanning overflow pages) and delete half of the keys commit `c - 2`
    /// loaded (their pages spill into the main file); commits 5 and 7
    /// rewrite every value loaded by commits 0 and 2 (pages that existed
    /// before: their leaves move to new pages in the main file, the others
    /// spill to the log); the other odd ones change a few keys.
    static func apply(commit c: Int, to tx: WriteTransaction, model: inout [[UInt8]: [UInt8]]) throws {
        let tree = try tx.createTree("t")
        if c % 2 == 0 {
            for j in 0..<400 {
                let scattered = (j * 263) % 400
                let key = Array("c\(c)-\(scattered)".utf8)
                let value = [UInt8](repeating: UInt8(truncatingIfNeeded: c * 11 + j), count: j % 50 == 0 ? 5000 : 120)
                try tx.put(key, value, in: tree)
                model[key] = value
            }
            if c >= 2 {
                for j in stride(from: 0, to: 400, by: 2) {
                    let key = Array("c\(c - 2)-\(j)".utf8)
                    try tx.delete(key, in: tree)
                    model.removeValue(forKey: key)
                }
            }
        } else if c == 5 || c == 7 {
            for j in 0..<400 {
                for loader in [0, 2] {
                    let key = Array("c\(loader)-\(j)".utf8)
                    guard let old = model[key] else { continue }
                    let value = [UInt8](repeating: UInt8(truncatingIfNeeded: c &* 3 &+ j), count: old.count)
                    try tx.put(key, value, in: tree)
                    model[key] = value
                }
            }
        } else {
            for j in 0..<5 {
                let key = Array("small-\(j)".utf8)
                model[key] = [UInt8(c)]
                try tx.put(key, [UInt8(c)], in: tree)
            }
        }
        let counter = Array("commit".utf8)
        model[counter] = Array("\(c)".utf8)
        try tx.put(counter, Array("\(c)".utf8), in: tree)
    }

    /// The commits acknowledged so far, and the one in flight, for the
    /// file system's hook.
    final class Progress: @unchecked Sendable {
        private let lock = NSLock()
        private var states: [[[UInt8]: [UInt8]]] = [[:]]  // guarded by lock
        private var inFlight: [[UInt8]: [UInt8]]?  // guarded by lock
        /// The log was synced since the commit in flight began: from then
        /// on it may be durable (a checkpoint runs before it returns).
        private var logSynced = false  // guarded by lock
        /// Counts of images taken while a transaction ran (spills), and
        /// while it committed.
        /// Images taken at writes into the main file, with the states a
        /// recovery of each may find.
        private var images: [(MemoryFileSystem, [[[UInt8]: [UInt8]]])] = []  // guarded by lock
        func begin(_ state: [[UInt8]: [UInt8]]) {
            lock.withLock {
                inFlight = state
                logSynced = false
            }
        }
        func logWasSynced() { lock.withLock { logSynced = true } }
        func rolledBack() { lock.withLock { inFlight = nil } }
        func acknowledge(_ state: [[UInt8]: [UInt8]]) {
            lock.withLock {
                states.append(state)
                inFlight = nil
            }
        }
        var acknowledged: [[[UInt8]: [UInt8]]] { lock.withLock { states } }
        /// Keeps what a power loss would leave of `fs` now, before a write
        /// to the log (`log`) or the main file. The commit in flight may
        /// survive once it is writing its frames (a write to the log
        /// after it began) or synced them.
        func keep(_ fs: MemoryFileSystem, log: Bool) {
            lock.withLock {
                let image = fs.afterPowerLoss(seed: UInt64(images.count + 1))
                let possible = [states.last!] + (logSynced || log ? inFlight.map { [$0] } ?? [] : [])
                images.append((image, possible))
            }
        }
        var taken: [(MemoryFileSystem, [[[UInt8]: [UInt8]]])] { lock.withLock { images } }
    }

    /// Runs the workload until it ends or the file system crashes; returns
    /// the states acknowledged and the one in flight.
    func run(_ fs: MemoryFileSystem, progress: Progress = Progress()) -> (
        acknowledged: [[[UInt8]: [UInt8]]], inFlight: [[UInt8]: [UInt8]]?, statistics: Statistics?
    ) {
        var model: [[UInt8]: [UInt8]] = [:]
        guard let db = try? Database.open(path: path, options: options, fileSystem: fs) else {
            return (progress.acknowledged, nil, nil)
        }
        for c in 0..<Self.commits {
            var next = model
            do {
                try db.write { tx in
                    try Self.apply(commit: c, to: tx, model: &next)
                    progress.begin(next)
                    if c == Self.rolledBack { throw CancellationError() }
                }
            } catch is CancellationError {
                progress.rolledBack()
                continue
            } catch {
                return (progress.acknowledged, next, db.statistics)
            }
            model = next
            progress.acknowledge(model)
        }
        let statistics = db.statistics
        try? db.close()
        return (progress.acknowledged, nil, statistics)
    }

    /// Opens `image`, checks it, compares its state, and commits once more.
    func verify(_ image: MemoryFileSystem, _ label: String, expect ok: ([[UInt8]: [UInt8]]) -> Bool) throws {
        let db: Database
        do {
            db = try Database.open(path: path, options: options, fileSystem: image)
        } catch {
            return XCTFail("\(label): reopening failed: \(error)")
        }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(label):\n\(report)")
        XCTAssertTrue(ok(try CrashMatrixTests.snapshot(db)), "\(label): the state is not the one expected")
        try db.write { tx in
            let tree = try tx.createTree("t")
            for j in 0..<40 { try tx.put(Array("after-\(j * 7 % 40)".utf8), [UInt8](repeating: 1, count: 100), in: tree) }
        }
        XCTAssertTrue(try db.check().isHealthy, label)
        try db.close()
        leave(path, fileSystem: image)
    }

    func testCrashAtEverySyncPointWithSpills() throws {
        let clean = MemoryFileSystem()
        let cleanRun = run(clean)
        XCTAssertGreaterThan(cleanRun.statistics?.spilledPages ?? 0, 100, "the workload must spill")
        XCTAssertGreaterThan(cleanRun.statistics?.relocatedPages ?? 0, 20, "and move leaves that existed before")
        XCTAssertEqual(cleanRun.acknowledged.count, Self.commits)  // one rolled back
        try crashAtEverySyncPoint(of: clean)
    }

    /// Commits that write their fresh pages into the main file (no spill):
    /// a crash at any sync recovers the last commit or the one in flight.
    func testCrashAtEverySyncPointWithFreshPagesWrittenAtCommit() throws {
        budgetPages = 64
        let clean = MemoryFileSystem()
        let cleanRun = run(clean)
        XCTAssertGreaterThan(cleanRun.statistics?.freshPagesWrittenToMainFile ?? 0, 60, "the loads must write fresh pages")
        XCTAssertEqual(cleanRun.acknowledged.count, Self.commits)
        try crashAtEverySyncPoint(of: clean)
    }

    /// Runs the workload again crashing at each sync point `clean`'s run
    /// reached, and checks each recovery.
    func crashAtEverySyncPoint(of clean: MemoryFileSystem) throws {
        let syncPoints = clean.syncCount
        let seeds = Int(environmentValue("STRATA_CRASH_SEEDS") ?? "") ?? 3
        var runs = 0
        for n in 1...syncPoints {
            for seed in 0..<seeds {
                let fs = MemoryFileSystem()
                fs.crashAtSync = n
                let (acknowledged, inFlight, _) = run(fs)
                var image = fs.afterPowerLoss(seed: UInt64(n * 1000 + seed)).afterProcessCrash()
                if seed % 2 == 1 {
                    try? image.remove(path + "-shm")
                    image = image.afterProcessCrash()
                }
                try verify(image, "crash at sync \(n), seed \(seed)") { state in
                    state == acknowledged.last! || inFlight.map { state == $0 } == true
                }
                runs += 1
            }
        }
        print("spill crash matrix: \(syncPoints) sync points × \(seeds) seeds: \(runs) recoveries verified")
    }

    /// Power loss at each write into the main file or the log: in the
    /// middle of spills (to either), of commits' fresh pages, of commit
    /// frames and of checkpoints. While the transaction in flight runs
    /// (its spills) the store recovers to the last acknowledged commit
    /// exactly; once it commits, to that or to the commit in flight.
    func testPowerLossAtEveryWrite() throws {
        try powerLossAtEveryWrite()
    }

    /// The same with the loads' fresh pages written at their commits.
    func testPowerLossAtEveryWriteWithFreshPagesWrittenAtCommit() throws {
        budgetPages = 64
        try powerLossAtEveryWrite(expectSpills: false)
    }

    func powerLossAtEveryWrite(expectSpills: Bool = true) throws {
        let fs = MemoryFileSystem()
        let progress = Progress()
        let main = path
        let log = path + "-wal"
        fs.faults = { operation in
            if operation.kind == .sync && operation.path == log { progress.logWasSynced() }
            guard operation.kind == .write, operation.path == main || operation.path == log else { return nil }
            progress.keep(fs, log: operation.path == log)
            return nil
        }
        let result = run(fs, progress: progress)
        fs.faults = nil
        XCTAssertEqual(result.acknowledged.count, Self.commits)
        let taken = progress.taken
        XCTAssertGreaterThan(taken.count, 20, "writes")
        var spillTime = 0
        for (i, (image, possible)) in taken.enumerated() {
            if possible.count == 1 { spillTime += 1 }
            try verify(image.afterProcessCrash(), "power loss at write \(i + 1)") { possible.contains($0) }
        }
        if expectSpills {
            XCTAssertGreaterThan(spillTime, 20, "writes while transactions ran (spills)")
        } else {
            XCTAssertGreaterThan(result.statistics?.freshPagesWrittenToMainFile ?? 0, 60, "fresh pages written at commits")
        }
        print("spill power-loss images at writes: \(taken.count) verified, \(spillTime) of them while a transaction ran")
    }
}
