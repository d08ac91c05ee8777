import StrataEngine
import StrataTesting
import XCTest

/// Power loss at every sync point of a scripted workload, with torn,
/// dropped and kept unsynced writes, then recovery and verification.
///
/// `STRATA_CRASH_SEEDS` sets the seeds tried per crash point (default 3).
final class CrashMatrixTests: XCTestCase {
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

    func snapshot(_ db: Database) throws -> [[UInt8]: [UInt8]] {
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
                    let state = try snapshot(db)
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
}

#if canImport(Glibc)
    import Glibc
#endif
