import StrataEngine
import StrataTesting
import XCTest

/// An injected EIO or ENOSPC at every write and every sync of a commit
/// sequence: the commit that meets it throws, a failed sync closes the
/// handle to writes, and reopening yields the last good commit.
final class IOErrorTests: CrashTestCase {
    let path = "/io/store.strata"

    func commit(_ db: Database, _ n: Int) throws {
        try db.write { tx in
            let t = try tx.createTree("t")
            try tx.put(Array("k\(n)".utf8), [UInt8](repeating: UInt8(n), count: n % 4 == 0 ? 9000 : 100), in: t)
            try tx.put(Array("last".utf8), Array("\(n)".utf8), in: t)
        }
    }

    func last(_ db: Database) throws -> Int {
        try db.read { tx in
            guard let t = try tx.treeIfPresent("t"), let v = try tx.get(Array("last".utf8), in: t) else { return -1 }
            return Int(String(decoding: v, as: UTF8.self)) ?? -2
        }
    }

    /// Counts the writes and syncs of the workload, then fails each one in
    /// turn with each error.
    func testEveryWriteAndSyncFailure() throws {
        let options = DatabaseOptions(durability: .full, checkpointThresholdFrames: 12)
        let commits = 20
        final class Counter: @unchecked Sendable {
            var writes = 0
            var syncs = 0
            var failAt: (FileOperation.Kind, Int)?
            var code: Int32 = EIO
        }
        // The clean run, counting operations after the store exists.
        let counter = Counter()
        do {
            let fs = MemoryFileSystem()
            let db = try Database.open(path: path, options: options, fileSystem: fs)
            fs.faults = { op in
                if op.kind == .write { counter.writes += 1 }
                if op.kind == .sync { counter.syncs += 1 }
                return nil
            }
            for n in 0..<commits { try commit(db, n) }
            try db.close()
        }
        let plan =
            (1...counter.writes).map { (FileOperation.Kind.write, $0) }
            + (1...counter.syncs).map { (FileOperation.Kind.sync, $0) }
        var cases = 0
        for (kind, index) in plan {
            for code in [EIO, ENOSPC] {
                let fs = MemoryFileSystem()
                let db = try Database.open(path: path, options: options, fileSystem: fs)
                let c = Counter()
                c.failAt = (kind, index)
                c.code = code
                fs.faults = { op in
                    guard op.kind == kind else { return nil }
                    if kind == .write { c.writes += 1 } else { c.syncs += 1 }
                    let count = kind == .write ? c.writes : c.syncs
                    return count == index ? code : nil
                }
                var acknowledged = -1
                var failed = false
                for n in 0..<commits {
                    do {
                        try commit(db, n)
                        acknowledged = n
                    } catch {
                        failed = true
                        break
                    }
                }
                let label = "\(kind) #\(index) failing with errno \(code)"
                // A failing checkpoint does not fail its commit (the commit is
                // already durable); every other failure must surface.
                if failed {
                    XCTAssertEqual(try last(db), acknowledged, "\(label): the handle shows the last good commit")
                    if kind == .sync {
                        XCTAssertThrowsError(try commit(db, 99), "\(label): writes refused after a failed sync")
                    }
                }
                fs.faults = nil
                try? db.close()
                // Power loss now: the durable image must hold the last
                // acknowledged commit (or the failed one, if its frames and
                // sync made it) and be healthy.
                let image = fs.afterPowerLoss()
                let reopened = try Database.open(path: path, options: options, fileSystem: image)
                let report = try reopened.check()
                XCTAssertTrue(report.isHealthy, "\(label):\n\(report)")
                let recovered = try last(reopened)
                XCTAssertTrue(
                    recovered == acknowledged || recovered == acknowledged + 1,
                    "\(label): recovered \(recovered), acknowledged \(acknowledged)")
                try reopened.close()
                leave(path, fileSystem: image)
                cases += 1
            }
        }
        print("I/O errors: \(counter.writes) writes and \(counter.syncs) syncs, each failed with EIO and ENOSPC: \(cases) cases")
    }
}
