import Foundation
import StrataEngine
import StrataTesting
import XCTest

/// Power loss at every sync point of a scripted workload, with torn,
/// dropped and kept unsynced writes, then recovery and verification.
///
/// `STRATA_CRASH_SEEDS` sets the seeds tried per crash point (default 3).
final class CrashMatrixTests: CrashTestCase {
    let path = "/crash/store.strata"

    /// The workload: commit `c` changes a handful of keys (inserts,
    /// updates, deletes, some values spanning overflow pages). The expected
    /// state after every commit is recorded.
    struct Workload {
        static let commits = 36

        static func apply(commit c: Int, to tx: WriteTransaction, model: inout [[UInt8]: [UInt8]]) throws {
            let t = try tx.createTree("t")
            for j in 0..<6 {
                let k = (c * 7 + j * 13) % 50
                let key = Array("key\(k)".utf8)
                if (c + j) % 5 == 4 {
                    try tx.delete(key, in: t)
                    model.removeValue(forKey: key)
                } else {
                    let size = (c + j) % 9 == 0 ? 9000 + c : 20 + (c * j) % 300
                    let value = [UInt8](repeating: UInt8(truncatingIfNeeded: c &* 31 &+ j), count: size)
                    try tx.put(key, value, in: t)
                    model[key] = value
                }
            }
            try tx.put(Array("commit".utf8), Array("\(c)".utf8), in: t)
            model[Array("commit".utf8)] = Array("\(c)".utf8)
        }
    }

    /// Runs the workload until it finishes or the file system crashes.
    /// Returns the states after each acknowledged commit (index 0: before
    /// any) and the state the in-flight commit would have produced.
    func run(
        _ fs: MemoryFileSystem, _ options: DatabaseOptions
    ) -> (acknowledged: [[[UInt8]: [UInt8]]], inFlight: [[UInt8]: [UInt8]]?) {
        var states: [[[UInt8]: [UInt8]]] = [[:]]
        var model: [[UInt8]: [UInt8]] = [:]
        guard let db = try? Database.open(path: path, options: options, fileSystem: fs) else { return (states, nil) }
        for c in 0..<Workload.commits {
            var next = model
            do {
                try db.write { tx in try Workload.apply(commit: c, to: tx, model: &next) }
            } catch {
                return (states, next)
            }
            model = next
            states.append(model)
        }
        try? db.close()
        return (states, nil)
    }

    /// Tree "t"'s entries (none when it is missing), its count checked.
    static func snapshot(_ db: Database) throws -> [[UInt8]: [UInt8]] {
        try db.read { tx in
            guard let t = try tx.treeIfPresent("t") else { return [:] }
            var result: [[UInt8]: [UInt8]] = [:]
            for (k, v) in try tx.scan(t) { result[k] = v }
            XCTAssertEqual(try tx.count(t), result.count)
            return result
        }
    }

    func matrix(durability: Durability) throws {
        var options = DatabaseOptions(durability: durability)
        options.checkpointThresholdFrames = 24  // checkpoints and WAL restarts happen often
        // A clean run counts the sync points.
        let clean = MemoryFileSystem()
        _ = run(clean, options)
        let syncPoints = clean.syncCount
        XCTAssertGreaterThan(syncPoints, durability == .full ? Workload.commits : 5)
        let seeds = Int(environmentValue("STRATA_CRASH_SEEDS") ?? "") ?? 3
        var runs = 0
        for n in 1...syncPoints {
            for seed in 0..<seeds {
                let fs = MemoryFileSystem()
                fs.crashAtSync = n
                let (acknowledged, inFlight) = run(fs, options)
                let image = fs.afterPowerLoss(seed: UInt64(n * 1000 + seed))
                // The shared index is never synced: after a power loss it
                // may be missing, stale (what the crashed handle last
                // published, which can name frames that did not survive),
                // torn or damaged. Each is rebuilt from the log.
                let index = fs.file(path + "-shm")?.withContents { $0 } ?? []
                let variants = ["as the disk left it", "missing", "stale", "torn", "damaged"]
                // Seed 0 tries every kind of index at this sync point; the
                // other seeds one each.
                for variant in seed == 0 ? variants : [variants[(n + seed) % variants.count]] {
                    let image = image.afterProcessCrash()
                    switch variant {
                    case "missing": try image.remove(path + "-shm")
                    case "stale": image.file(path + "-shm")?.withContents { $0 = index }
                    case "torn": image.file(path + "-shm")?.withContents { $0 = Array(index.prefix(index.count / 2 + 13)) }
                    case "damaged":
                        var bytes = index
                        var random = SeededRandom(seed: UInt64(n * 7 + seed))
                        for _ in 0..<16 where !bytes.isEmpty { bytes[random.choose(min(bytes.count, 8192))] ^= 0x5a }
                        image.file(path + "-shm")?.withContents { $0 = bytes }
                    default: break
                    }
                    let label = "\(durability) crash at sync \(n), seed \(seed), index \(variant)"
                    let db: Database
                    do {
                        db = try Database.open(path: path, options: options, fileSystem: image)
                    } catch {
                        XCTFail("\(label): reopening failed: \(error)")
                        continue
                    }
                    let report = try db.check()
                    XCTAssertTrue(report.isHealthy, "\(label):\n\(report)")
                    let state = try Self.snapshot(db)
                    switch durability {
                    case .full:
                        // Every acknowledged commit is there; the one in flight
                        // may or may not be, but never in part.
                        let ok = state == acknowledged.last! || (inFlight.map { state == $0 } ?? false)
                        XCTAssertTrue(
                            ok,
                            "\(label): state is not the last acknowledged commit (\(acknowledged.count - 1)) nor the one in flight"
                        )
                    default:
                        // A prefix of the commits, never a mix.
                        let ok = acknowledged.contains(state) || (inFlight.map { state == $0 } ?? false)
                        XCTAssertTrue(ok, "\(label): state is not any commit's")
                    }
                    // The recovered store takes new commits.
                    try db.write { tx in try tx.put(Array("after".utf8), [1], in: try tx.createTree("t")) }
                    XCTAssertTrue(try db.check().isHealthy, label)
                    try db.close()
                    leave(path, fileSystem: image)
                    runs += 1
                }
            }
        }
        print(
            "crash matrix \(durability): \(syncPoints) sync points × \(seeds) seeds, every kind of shared index at each point: \(runs) recoveries verified"
        )
    }

    func testCrashAtEverySyncPointDurabilityFull() throws {
        try matrix(durability: .full)
    }

    func testCrashAtEverySyncPointDurabilityNormal() throws {
        try matrix(durability: .normal)
    }

    // MARK: Group commit

    /// What each committer thread of ``runGroup(_:_:)`` saw: the last
    /// commit that returned (-1: none) and the last it began.
    final class Committers: @unchecked Sendable {
        private let lock = NSLock()
        private var acknowledged: [Int]  // guarded by lock
        private var attempted: [Int]  // guarded by lock
        /// The handle's log syncs (``Statistics/logSyncs``) at the end.
        var logSyncs = 0  // guarded by lock

        init(_ threads: Int) {
            acknowledged = Array(repeating: -1, count: threads)
            attempted = Array(repeating: -1, count: threads)
        }

        func began(_ t: Int, _ c: Int) { lock.withLock { attempted[t] = c } }
        func returned(_ t: Int, _ c: Int) { lock.withLock { acknowledged[t] = c } }
        var figures: (acknowledged: [Int], attempted: [Int]) { lock.withLock { (acknowledged, attempted) } }
        func finish(_ syncs: Int) { lock.withLock { logSyncs = syncs } }
        var syncs: Int { lock.withLock { logSyncs } }
    }

    static let groupThreads = 4
    static let groupCommits = 10

    /// Thread `t`'s commit `c` rewrites its keys, each with the stamp `c`
    /// (some long enough for overflow pages), and its commit counter.
    static func groupCommit(_ t: Int, _ c: Int, _ tx: WriteTransaction) throws {
        let tree = try tx.tree("g")
        for j in 0..<4 {
            let size = (t + j) % 4 == 0 ? 5000 : 40
            try tx.put(Array("t\(t)-k\(j)".utf8), Array(repeating: UInt8(c), count: size), in: tree)
        }
        try tx.put(Array("t\(t)-commit".utf8), [UInt8(c)], in: tree)
    }

    /// Several threads commit at once until done or the file system
    /// crashes; every sync of the log is slowed so commits pile up behind
    /// it and share the next one.
    func runGroup(_ fs: MemoryFileSystem, _ options: DatabaseOptions) -> Committers {
        let committers = Committers(Self.groupThreads)
        guard let db = try? Database.open(path: path, options: options, fileSystem: fs),
            (try? db.write({ tx in _ = try tx.createTree("g") })) != nil
        else { return committers }
        let log = path + "-wal"
        fs.faults = { operation in
            if operation.kind == .sync && operation.path == log { usleep(300) }
            return nil
        }
        let done = DispatchGroup()
        for t in 0..<Self.groupThreads {
            done.enter()
            Thread {
                defer { done.leave() }
                for c in 0..<Self.groupCommits {
                    committers.began(t, c)
                    do { try db.write { tx in try Self.groupCommit(t, c, tx) } } catch { return }
                    committers.returned(t, c)
                }
            }.start()
        }
        done.wait()
        fs.faults = nil
        committers.finish(db.statistics.logSyncs)
        try? db.close()
        return committers
    }

    /// Power loss at every sync point while four threads commit at once
    /// (durability `full`, group commit): every commit a thread was told
    /// is durable survives, and each thread's commits are whole or absent.
    func testCrashAtEverySyncPointWithGroupedCommits() throws {
        var options = DatabaseOptions(durability: .full)
        options.checkpointThresholdFrames = 24
        let clean = MemoryFileSystem()
        let cleanCommitters = runGroup(clean, options)
        let cleanRun = cleanCommitters.figures
        XCTAssertEqual(cleanRun.acknowledged, Array(repeating: Self.groupCommits - 1, count: Self.groupThreads))
        let syncPoints = clean.syncCount
        let totalCommits = Self.groupThreads * Self.groupCommits
        let seeds = Int(environmentValue("STRATA_CRASH_SEEDS") ?? "") ?? 3
        var runs = 0
        var grouped = 0
        for n in 1...syncPoints {
            for seed in 0..<seeds {
                let fs = MemoryFileSystem()
                fs.crashAtSync = n
                let committers = runGroup(fs, options)
                let (acknowledged, attempted) = committers.figures
                if !fs.hasCrashed && committers.syncs < totalCommits { grouped += 1 }
                let image = fs.afterPowerLoss(seed: UInt64(n * 1000 + seed)).afterProcessCrash()
                if seed % 2 == 1 { try? image.remove(path + "-shm") }
                let label = "grouped commits, crash at sync \(n), seed \(seed)"
                let db: Database
                do {
                    db = try Database.open(path: path, options: options, fileSystem: image)
                } catch {
                    XCTFail("\(label): reopening failed: \(error)")
                    continue
                }
                let report = try db.check()
                XCTAssertTrue(report.isHealthy, "\(label):\n\(report)")
                let state: [[UInt8]: [UInt8]] = try db.read { tx in
                    guard let tree = try tx.treeIfPresent("g") else { return [:] }
                    var result: [[UInt8]: [UInt8]] = [:]
                    for (k, v) in try tx.scan(tree) { result[k] = v }
                    return result
                }
                for t in 0..<Self.groupThreads {
                    let counter = state[Array("t\(t)-commit".utf8)].map { Int($0[0]) } ?? -1
                    XCTAssertGreaterThanOrEqual(
                        counter, acknowledged[t], "\(label): thread \(t)'s commit \(acknowledged[t]) returned but is lost")
                    XCTAssertLessThanOrEqual(counter, attempted[t], "\(label): thread \(t)")
                    for j in 0..<4 {
                        let value = state[Array("t\(t)-k\(j)".utf8)]
                        if counter < 0 {
                            XCTAssertNil(value, "\(label): thread \(t) has a key but no commit")
                        } else {
                            XCTAssertEqual(value?.first.map(Int.init), counter, "\(label): thread \(t)'s commit is partial")
                            XCTAssertEqual(value?.count, (t + j) % 4 == 0 ? 5000 : 40, label)
                        }
                    }
                }
                try db.write { tx in try tx.put(Array("after".utf8), [1], in: try tx.createTree("g")) }
                XCTAssertTrue(try db.check().isHealthy, label)
                try db.close()
                leave(path, fileSystem: image)
                runs += 1
            }
        }
        // Commits did share log syncs (without group commit: one each).
        XCTAssertLessThan(cleanCommitters.syncs, totalCommits + 1)
        print(
            "crash matrix, grouped commits: \(syncPoints) sync points × \(seeds) seeds, \(runs) recoveries verified; "
                + "clean run: \(cleanCommitters.syncs) log syncs for \(totalCommits + 1) commits; "
                + "\(grouped) uncrashed runs grouped")
    }
}

#if canImport(Glibc)
    import Glibc
#endif
