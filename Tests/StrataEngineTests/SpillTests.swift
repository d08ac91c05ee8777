import Foundation
import StrataEngine
import StrataTesting
import XCTest

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A write transaction that outgrows its budget spills the pages it
/// allocated past the end of the store into the main file, reads them back
/// when it needs them, and stays bounded in memory; rollbacks, failed
/// writes and crashes leave the store at its previous commit.
final class SpillTests: EngineTestCase {
    /// Errors of worker threads, reported by the test's thread.
    final class FailureLog: @unchecked Sendable {
        private let lock = NSLock()
        private var messages: [String] = []  // guarded by lock
        func add(_ message: String) { lock.withLock { messages.append(message) } }
        var all: [String] { lock.withLock { messages } }
    }

    /// A budget of 16 pages (the least there is): a few hundred entries
    /// spill.
    private let small = DatabaseOptions(cacheSizeBytes: 16 * 4096)

    private func key(_ i: Int) -> [UInt8] {
        var random = SeededRandom(seed: UInt64(i) &* 0x9E37_79B9 &+ 7)
        return Array(String(format: "%08x", random.next() & 0xffff_ffff).utf8) + Array("-\(i)".utf8)
    }
    private func value(_ i: Int, _ round: Int = 0) -> [UInt8] {
        [UInt8](repeating: UInt8(truncatingIfNeeded: i &+ round &* 7), count: 90 + (i % 5) * 20)
    }

    /// Commits entries `range` (``key(_:)`` → ``value(_:_:)``) into tree
    /// "t", creating it if missing, and returns them.
    @discardableResult
    private func load(_ db: Database, _ range: Range<Int>) throws -> [[UInt8]: [UInt8]] {
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in range { try tx.put(key(i), value(i), in: tree) }
        }
        return Dictionary(uniqueKeysWithValues: range.map { (key($0), value($0)) })
    }

    private func contents(_ db: Database, _ name: String = "t") throws -> [[UInt8]: [UInt8]] {
        try db.read { tx in
            guard let tree = try tx.treeIfPresent(name) else { return [:] }
            var all: [[UInt8]: [UInt8]] = [:]
            for (k, v) in try tx.scan(tree) { all[k] = v }
            XCTAssertEqual(try tx.count(tree), all.count)
            return all
        }
    }

    func testABulkLoadPastTheBudgetSpillsReadsBackAndCommits() throws {
        let db = try open("bulk.strata", small)
        var model: [[UInt8]: [UInt8]] = [:]
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<3000 {
                try tx.put(key(i), value(i), in: tree)
                model[key(i)] = value(i)
                // Reads of its own spilled pages, and overwrites of them.
                if i % 97 == 0 && i > 0 {
                    XCTAssertEqual(try tx.get(key(i / 2), in: tree), value(i / 2), "read back entry \(i / 2)")
                    try tx.put(key(i / 3), value(i / 3, 1), in: tree)
                    model[key(i / 3)] = value(i / 3, 1)
                }
            }
            XCTAssertEqual(try tx.count(tree), model.count)
        }
        let statistics = db.statistics
        XCTAssertGreaterThan(statistics.spilledPages, 50, "\(statistics)")
        XCTAssertGreaterThan(statistics.spillReads, 0, "\(statistics)")
        // The spilled pages went to the main file once, not through the
        // log: the commit's frames are a fraction of the store's pages.
        XCTAssertLessThan(statistics.walFrames, statistics.pageCount / 2, "\(statistics)")
        XCTAssertEqual(try contents(db), model)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
        let reopened = try open("bulk.strata", small)
        XCTAssertEqual(try contents(reopened), model)
        try reopened.close()
    }

    /// A commit within its budget that adds a quarter of the budget in
    /// pages new to the file writes them into the main file once, not into
    /// the log and again at the checkpoint; another handle and a reopened
    /// store read them, and a later small commit goes through the log.
    func testALargeCommitWritesItsFreshPagesIntoTheMainFile() throws {
        let options = DatabaseOptions(cacheSizeBytes: 256 * 4096)
        let db = try open("fresh.strata", options)
        let other = try open("fresh.strata", options)
        var model = try load(db, 0..<20)
        XCTAssertEqual(db.statistics.freshPagesWrittenToMainFile, 0, "a small commit logs its pages")
        model.merge(try load(db, 20..<3000)) { $1 }
        let statistics = db.statistics
        XCTAssertEqual(statistics.spilledPages, 0, "\(statistics)")
        // Most of the store's pages went straight to the main file.
        XCTAssertGreaterThan(statistics.freshPagesWrittenToMainFile * 4, statistics.pageCount * 3, "\(statistics)")
        // The committing handle keeps them as checked, as after a
        // checkpoint: reading them all checks almost none again.
        XCTAssertEqual(try contents(db), model)
        XCTAssertLessThan(db.statistics.pagesChecked - statistics.pagesChecked, 8, "\(db.statistics)")
        XCTAssertEqual(try contents(other), model)
        XCTAssertTrue(try db.check().isHealthy)
        model.merge(try load(db, 3000..<3005)) { $1 }
        XCTAssertEqual(try contents(other), model)
        try other.close()
        try db.close()
        let reopened = try open("fresh.strata", options)
        XCTAssertEqual(try contents(reopened), model)
        XCTAssertTrue(try reopened.check().isHealthy)
        try reopened.close()
    }

    func testASmallTransactionDoesNotSpill() throws {
        let db = try open("small.strata", small)
        try load(db, 0..<20)
        XCTAssertEqual(db.statistics.spilledPages, 0)
        try db.close()
    }

    /// Random puts, overwrites and deletes in large transactions over a
    /// store that already holds data, some rolled back after spilling,
    /// each read checked against a dictionary inside the transaction.
    func testSpillingTransactionsMatchAModel() throws {
        let db = try open("model.strata", small)
        var committed: [[UInt8]: [UInt8]] = [:]
        var random = SeededRandom(seed: 27)
        for round in 0..<8 {
            var working = committed
            let rollBack = round % 3 == 2
            do {
                try db.write { tx in
                    let tree = try tx.createTree("t")
                    for step in 0..<1500 {
                        let i = random.choose(4000)
                        switch random.choose(10) {
                        case 0..<6:
                            try tx.put(key(i), value(i, round), in: tree)
                            working[key(i)] = value(i, round)
                        case 6..<8:
                            let removed = try tx.delete(key(i), in: tree)
                            XCTAssertEqual(removed, working.removeValue(forKey: key(i)) != nil, "round \(round) step \(step)")
                        default:
                            XCTAssertEqual(try tx.get(key(i), in: tree), working[key(i)], "round \(round) step \(step)")
                        }
                    }
                    XCTAssertEqual(try tx.count(tree), working.count)
                    if rollBack { throw CancellationError() }
                }
                committed = working
            } catch is CancellationError {
                XCTAssertTrue(rollBack)
            }
            XCTAssertEqual(try contents(db), committed, "after round \(round)")
        }
        XCTAssertGreaterThan(db.statistics.spilledPages, 0)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
    }

    func testARollbackAfterASpillLeavesThePreviousCommit() throws {
        let db = try open("rollback.strata", small)
        try load(db, 0..<50)
        let before = try contents(db)
        let spilledBefore = db.statistics.spilledPages
        let tx = try db.beginWrite()
        let tree = try tx.createTree("t")
        for i in 50..<2500 { try tx.put(key(i), value(i), in: tree) }
        try tx.put(Array("other".utf8), [1], in: try tx.createTree("u"))
        XCTAssertGreaterThan(db.statistics.spilledPages, spilledBefore)
        tx.rollback()
        XCTAssertEqual(try contents(db), before)
        XCTAssertNil(try db.read { try $0.treeIfPresent("u") })
        // The next transaction allocates over the spilled bytes.
        try load(db, 5000..<5400)
        XCTAssertEqual(try contents(db).count, 450)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
    }

    /// A spill that cannot write (a full disk, an I/O error) fails the
    /// transaction with that error; the store stays at its previous
    /// commit and takes new ones once the disk recovers.
    func testASpillThatCannotWriteFailsTheTransaction() throws {
        for (code, name) in [(ENOSPC, "ENOSPC"), (EIO, "EIO")] {
            let fs = MemoryFileSystem()
            let path = "/mem/spill-\(name)"
            let db = try open(path, options: small, fileSystem: fs)
            try load(db, 0..<40)
            let before = try contents(db)
            fs.faults = { operation in
                operation.kind == .write && operation.path == path ? code : nil
            }
            var thrown: (any Error)?
            do {
                try load(db, 40..<3000)
            } catch {
                thrown = error
            }
            switch thrown as? StorageError {
            case .diskFull(let at)? where code == ENOSPC: XCTAssertEqual(at, path)
            case .io(_, let at, let errno)? where code == EIO:
                XCTAssertEqual(at, path)
                XCTAssertEqual(errno, EIO)
            default: XCTFail("\(name): \(String(describing: thrown))")
            }
            // The failed transaction cannot be committed either.
            let tx = try db.beginWrite()
            let tree = try tx.createTree("t")
            XCTAssertThrowsError(try { for i in 40..<3000 { try tx.put(key(i), value(i), in: tree) } }())
            XCTAssertThrowsError(try tx.commit()) { error in
                guard case .transactionFailed = error as? StorageError else {
                    return XCTFail("\(name): \(error)")
                }
            }
            XCTAssertEqual(try contents(db), before, name)
            fs.faults = nil
            try load(db, 40..<3000)
            XCTAssertEqual(try contents(db).count, 3000, name)
            XCTAssertTrue(try db.check().isHealthy, name)
            try db.close()
        }
    }

    /// A transaction that rewrites a store's existing pages (no fresh ones
    /// to write into the main file) spills them to the log: it holds no
    /// more pages than the budget, reads its own changes, and commits or
    /// rolls back as any transaction.
    func testRewritingExistingPagesSpillsToTheLogWithinTheBudget() throws {
        let db = try open("rewrite.strata", small)
        var model = try load(db, 0..<3000)
        let before = db.statistics.spilledPages
        for round in 1...2 {
            var working = model
            let tx = try db.beginWrite()
            let tree = try tx.tree("t")
            var peak = 0
            for i in 0..<3000 {
                if i % 10 == 9 {
                    XCTAssertTrue(try tx.delete(key(i), in: tree))
                    working.removeValue(forKey: key(i))
                } else {
                    try tx.put(key(i), value(i, round), in: tree)
                    working[key(i)] = value(i, round)
                }
                peak = max(peak, tx.heldPageCount)
                if i % 101 == 0 { XCTAssertEqual(try tx.get(key(i / 2), in: tree), working[key(i / 2)]) }
            }
            // 16 pages, and what one change can add before the spill that
            // follows it.
            XCTAssertLessThanOrEqual(peak, 16 + 8, "round \(round)")
            XCTAssertEqual(try tx.count(tree), working.count)
            var seen: [[UInt8]: [UInt8]] = [:]
            for (k, v) in try tx.scan(tree) { seen[k] = v }
            XCTAssertEqual(seen, working, "round \(round): the transaction's own view")
            if round == 1 {
                tx.rollback()
                XCTAssertEqual(try contents(db), model, "the rollback left the previous commit")
            } else {
                try tx.commit()
                model = working
                XCTAssertEqual(try contents(db), model)
            }
        }
        XCTAssertGreaterThan(db.statistics.spilledPages - before, 100)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
        let reopened = try open("rewrite.strata", small)
        XCTAssertEqual(try contents(reopened), model)
        try reopened.close()
    }

    /// A transaction that spilled moves the leaves it changes to new
    /// pages, written once into the main file, instead of logging them:
    /// its commit logs a few frames (branches, the header, the catalog,
    /// the freelist), a reader of the snapshot before it still reads every
    /// old page, and the commits after it reuse the pages it freed.
    func testASpilledTransactionMovesTheLeavesItChangesInsteadOfLoggingThem() throws {
        let db = try open("relocate.strata", small)
        var model = try load(db, 0..<3000)
        let old = model
        let reader = try db.beginRead()
        let before = db.statistics
        var random = SeededRandom(seed: 5)
        try db.write { tx in
            let tree = try tx.tree("t")
            for i in 0..<3000 where random.choose(3) != 0 {
                if i % 2 == 0 {
                    XCTAssertTrue(try tx.delete(key(i), in: tree))
                    model.removeValue(forKey: key(i))
                } else {
                    try tx.put(key(i), value(i, 1), in: tree)
                    model[key(i)] = value(i, 1)
                }
            }
        }
        let after = db.statistics
        let leaves = after.pageCount - after.freePages
        XCTAssertGreaterThan(after.spilledPages - before.spilledPages, 0, "\(after)")
        XCTAssertGreaterThan(after.relocatedPages - before.relocatedPages, leaves / 2, "\(after)")
        // The reader holds the log: every frame the commit wrote is there.
        // Leaves logged one frame each before they moved.
        XCTAssertLessThan(after.walFrames - before.walFrames, leaves / 8, "\(before) → \(after)")
        XCTAssertEqual(try contents(db), model)
        // The moved leaves' old pages are free, not yet reused: the reader
        // still finds its snapshot whole.
        var seen: [[UInt8]: [UInt8]] = [:]
        for (k, v) in try reader.scan(try reader.tree("t")) { seen[k] = v }
        XCTAssertTrue(seen == old, "the snapshot before the commit")
        // Commits that reuse the freed pages leave it whole too.
        model.merge(try load(db, 3000..<4500)) { $1 }
        XCTAssertLessThan(db.statistics.pageCount, after.pageCount + 20, "the freed pages were reused")
        XCTAssertEqual(
            db.statistics.relocatedPages, after.relocatedPages,
            "with a third of the store free, a spilled transaction logs its pages rather than grow the file")
        seen = [:]
        for (k, v) in try reader.scan(try reader.tree("t")) { seen[k] = v }
        XCTAssertTrue(seen == old, "the snapshot before both commits")
        reader.end()
        XCTAssertEqual(try contents(db), model)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
        let reopened = try open("relocate.strata", small)
        XCTAssertEqual(try contents(reopened), model)
        XCTAssertTrue(try reopened.check().isHealthy)
        try reopened.close()
    }

    /// Small commits of other threads of the same handle (group commit)
    /// interleave with transactions that spill to the log.
    func testSpillingBesideConcurrentSmallCommits() throws {
        let db = try open("concurrent.strata", small)
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<2000 { try tx.put(key(i), value(i), in: tree) }
            _ = try tx.createTree("small")
        }
        let threads = 3
        let group = DispatchGroup()
        let failures = FailureLog()
        for t in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    for c in 0..<40 {
                        try db.write { tx in
                            try tx.put(Array("t\(t)".utf8), Array("\(c)".utf8), in: try tx.tree("small"))
                        }
                    }
                } catch {
                    failures.add("thread \(t): \(error)")
                }
            }.start()
        }
        for round in 1...3 {
            try db.write { tx in
                let tree = try tx.tree("t")
                for i in 0..<2000 { try tx.put(key(i), value(i, round), in: tree) }
            }
        }
        group.wait()
        XCTAssertEqual(failures.all, [])
        var expected: [[UInt8]: [UInt8]] = [:]
        for i in 0..<2000 { expected[key(i)] = value(i, 3) }
        XCTAssertEqual(try contents(db), expected)
        XCTAssertEqual(try contents(db, "small").count, threads)
        for t in 0..<threads { XCTAssertEqual(try contents(db, "small")[Array("t\(t)".utf8)], Array("39".utf8)) }
        XCTAssertGreaterThan(db.statistics.spilledPages, 0)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
    }

    /// Once a transaction spilled its puts are buffered and applied in key
    /// order: every read, cursor step and other change sees them, a key
    /// put twice keeps its last value, bad keys are refused at the put, and
    /// a buffer that cannot be applied fails the transaction.
    func testBufferedPutsAreSeenByEveryRead() throws {
        let fs = MemoryFileSystem()
        let path = "/mem/buffered"
        let db = try open(path, options: small, fileSystem: fs)
        try db.write { tx in
            let tree = try tx.createTree("t")
            var model: [[UInt8]: [UInt8]] = [:]
            for i in 0..<1500 {
                try tx.put(key(i), value(i), in: tree)
                model[key(i)] = value(i)
            }
            XCTAssertGreaterThan(db.statistics.spilledPages, 0, "the transaction spilled: puts are buffered")
            // A cursor positioned before more puts are buffered.
            let cursor = try tx.cursor(tree)
            XCTAssertTrue(try cursor.seek(key(3)))
            let before = try cursor.key()
            for round in 1...3 {
                for i in stride(from: round, to: 1500, by: 7) {
                    try tx.put(key(i), value(i, round), in: tree)
                    model[key(i)] = value(i, round)
                }
            }
            let new = Array("zz-new".utf8)
            try tx.put(new, [1], in: tree)
            try tx.put(new, [2], in: tree)
            model[new] = [2]
            XCTAssertThrowsError(try tx.put([UInt8](repeating: 1, count: Database.maxKeyLength + 1), [1], in: tree)) {
                guard case .keyTooLong = $0 as? StorageError else { return XCTFail("\($0)") }
            }
            XCTAssertEqual(try cursor.key(), before, "the cursor stays on its key")
            XCTAssertEqual(try cursor.value(), model[before])
            XCTAssertTrue(try cursor.next())
            let following = model.keys.filter { before.lexicographicallyPrecedes($0) }
            XCTAssertEqual(try cursor.key(), following.min { $0.lexicographicallyPrecedes($1) })
            try tx.put(key(5000), value(5000), in: tree)
            model[key(5000)] = value(5000)
            XCTAssertEqual(try tx.count(tree), model.count)
            try tx.put(key(5001), value(5001), in: tree)
            model[key(5001)] = value(5001)
            XCTAssertEqual(try tx.get(key(5001), in: tree), value(5001))
            try tx.put(key(5002), value(5002), in: tree)
            XCTAssertTrue(try tx.delete(key(5002), in: tree), "a delete sees a buffered put")
            var seen: [[UInt8]: [UInt8]] = [:]
            for (k, v) in try tx.scan(tree) { seen[k] = v }
            XCTAssertEqual(seen, model)
        }
        // A buffered put that cannot be applied fails the transaction.
        let committed = try contents(db)
        let tx = try db.beginWrite()
        let tree = try tx.tree("t")
        for i in 10_000..<12_000 { try tx.put(key(i), value(i), in: tree) }
        fs.faults = { $0.kind == .write && $0.path == path ? EIO : nil }
        // The put that fills the buffer applies it and reports the error;
        // the transaction is failed from then on.
        var putError: (any Error)?
        for i in 12_000..<12_100 where putError == nil {
            do { try tx.put(key(i), value(i), in: tree) } catch { putError = error }
        }
        guard case .io(_, _, EIO)? = putError as? StorageError else { return XCTFail("\(String(describing: putError))") }
        XCTAssertThrowsError(try tx.get(key(1), in: tree))
        XCTAssertThrowsError(try tx.commit()) { error in
            guard case .transactionFailed = error as? StorageError else { return XCTFail("\(error)") }
        }
        fs.faults = nil
        XCTAssertEqual(try contents(db), committed)
        try db.close()
    }

    /// Once a transaction spilled, deletes are looked up, counted and held
    /// with the puts, and applied in key order: each one reports whether
    /// its key was there (a key deleted twice, a key put after its delete,
    /// an absent key), every read sees them, and random deletes read far
    /// fewer spilled pages back than they delete keys.
    func testBufferedDeletesReportPresenceAndAreSeenByEveryRead() throws {
        let fs = MemoryFileSystem()
        let path = "/mem/deletes"
        // 32 pages; 10,000 entries take about 350 leaves.
        let db = try open(path, options: DatabaseOptions(cacheSizeBytes: 32 * 4096), fileSystem: fs)
        var model = try load(db, 0..<10_000)
        try db.write { tx in
            let other = try tx.createTree("u")
            for i in 0..<100 { try tx.put(key(i), [1], in: other) }
        }
        var random = SeededRandom(seed: 41)
        var order = Array(0..<10_000)
        for i in order.indices.reversed() { order.swapAt(i, random.choose(i + 1)) }
        try db.write { tx in
            let tree = try tx.tree("t")
            let other = try tx.tree("u")
            for (n, i) in order.prefix(2500).enumerated() {
                XCTAssertTrue(try tx.delete(key(i), in: tree), "delete \(n)")
                model.removeValue(forKey: key(i))
                if n % 50 == 0 {
                    XCTAssertFalse(try tx.delete(key(i), in: tree), "a key deleted twice, \(n)")
                    XCTAssertFalse(try tx.delete(key(500_000 + n), in: tree), "an absent key, \(n)")
                    XCTAssertTrue(try tx.delete(key(n / 50), in: other), "another tree's key, \(n)")
                }
                if n % 400 == 399 {
                    // A put after the delete of its key, then a delete that
                    // sees the put.
                    try tx.put(key(i), value(i, 9), in: tree)
                    XCTAssertTrue(try tx.delete(key(i), in: tree))
                    try tx.put(key(i), value(i, 8), in: tree)
                    model[key(i)] = value(i, 8)
                }
            }
            XCTAssertGreaterThan(db.statistics.spilledPages, 0, "the transaction spilled: deletes are buffered")
            // Buffered deletes change no page until the buffer is applied
            // (a read applies it): 100 of them fit in this budget's buffer.
            _ = try tx.get(key(0), in: tree)
            let held = tx.heldPageCount
            let spilled = db.statistics.spilledPages
            for i in order[2500..<2600] {
                XCTAssertTrue(try tx.delete(key(i), in: tree))
                model.removeValue(forKey: key(i))
            }
            XCTAssertEqual(tx.heldPageCount, held, "no page was made private")
            XCTAssertEqual(db.statistics.spilledPages, spilled, "none was spilled")
            XCTAssertEqual(try tx.count(tree), model.count)
            XCTAssertEqual(try tx.count(other), 50)
            let survivor = try XCTUnwrap(model.keys.min { $0.lexicographicallyPrecedes($1) })
            XCTAssertFalse(try tx.delete(key(order[0]), in: tree))
            XCTAssertEqual(try tx.get(key(order[1]), in: tree), nil)
            XCTAssertEqual(try tx.get(survivor, in: tree), model[survivor])
            let cursor = try tx.cursor(tree)
            XCTAssertTrue(try cursor.first())
            XCTAssertEqual(try cursor.key(), survivor)
            var seen: [[UInt8]: [UInt8]] = [:]
            for (k, v) in try tx.scan(tree) { seen[k] = v }
            XCTAssertTrue(seen == model, "the transaction's own view")
        }
        XCTAssertTrue(try contents(db) == model)
        XCTAssertEqual(try contents(db, "u").count, 50)
        XCTAssertTrue(try db.check().isHealthy)

        // A rollback after buffered deletes leaves the previous commit.
        let tx = try db.beginWrite()
        let tree = try tx.tree("t")
        for k in model.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }).prefix(800) {
            XCTAssertTrue(try tx.delete(k, in: tree))
        }
        tx.rollback()
        XCTAssertTrue(try contents(db) == model, "the rollback left the previous commit")

        // Buffered deletes that cannot be applied fail the transaction.
        let failing = try db.beginWrite()
        let t = try failing.tree("t")
        for i in 200_000..<201_500 { try failing.put(key(i), value(i), in: t) }
        XCTAssertGreaterThan(db.statistics.spilledPages, 0)
        _ = try failing.get(key(200_000), in: t)
        for k in model.keys.prefix(300) { XCTAssertTrue(try failing.delete(k, in: t)) }
        fs.faults = { $0.kind == .write ? EIO : nil }
        XCTAssertThrowsError(try failing.commit()) { error in
            guard case .transactionFailed = error as? StorageError else { return XCTFail("\(error)") }
        }
        fs.faults = nil
        XCTAssertTrue(try contents(db) == model, "the failed commit left the previous one")
        try db.close()
    }

    /// Buffered keys that tie in their first 8 bytes, or are shorter than
    /// 8 bytes and differ only by trailing zero bytes, land in `memcmp`
    /// order, the last put of each winning.
    func testBufferedKeysWithCommonPrefixesKeepTheirOrder() throws {
        let db = try open("prefixes.strata", small)
        var model: [[UInt8]: [UInt8]] = [:]
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<1500 { try tx.put(key(i), value(i), in: tree) }
            XCTAssertGreaterThan(db.statistics.spilledPages, 0)
            for i in 0..<1500 { model[key(i)] = value(i) }
            var random = SeededRandom(seed: 9)
            for round in 0..<3 {
                for _ in 0..<400 {
                    let shared = Array("prefix!!".utf8) + [UInt8(random.choose(4))]
                    let tail = (0..<random.choose(3)).map { _ in UInt8(random.choose(3)) }
                    for k in [shared + tail, Array("a".utf8) + tail, tail] {
                        let v = [UInt8(round), UInt8(k.count)]
                        try tx.put(k, v, in: tree)
                        model[k] = v
                    }
                }
            }
        }
        let scanned = try db.read { tx in try tx.scan(try tx.tree("t")).map { $0 } }
        XCTAssertEqual(scanned.map(\.0), model.keys.sorted { $0.lexicographicallyPrecedes($1) })
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: scanned.map { ($0.0, $0.1) }), model)
        try db.close()
    }

    /// Buffered changes of two trees made in turn, with values from empty
    /// to larger than a buffer starts with, and deletes among them: each
    /// tree gets its own changes, in the order made, across many
    /// applications of the buffers (whose memory passes from one tree's
    /// buffer to the other's), and the store matches a model.
    func testBufferedChangesOfTwoTreesWithValuesOfEverySize() throws {
        let db = try open("two-trees.strata", small)
        var models: [[[UInt8]: [UInt8]]] = [[:], [:]]
        var random = SeededRandom(seed: 44)
        try db.write { tx in
            let trees = [try tx.createTree("t"), try tx.createTree("u")]
            for i in 0..<1200 { try tx.put(key(i), value(i), in: trees[0]) }
            for i in 0..<1200 { models[0][key(i)] = value(i) }
            XCTAssertGreaterThan(db.statistics.spilledPages, 0)
            for step in 0..<6000 {
                let t = random.choose(2)
                let i = random.choose(1500)
                if random.choose(4) == 0 {
                    let removed = try tx.delete(key(i), in: trees[t])
                    XCTAssertEqual(removed, models[t].removeValue(forKey: key(i)) != nil, "step \(step)")
                    continue
                }
                let size = [0, 1, 7, 300, 5000, 70_000][random.choose(step % 500 == 0 ? 6 : 5)]
                let v = [UInt8](repeating: UInt8(truncatingIfNeeded: step), count: size)
                try tx.put(key(i), v, in: trees[t])
                models[t][key(i)] = v
            }
        }
        XCTAssertEqual(try contents(db, "t"), models[0])
        XCTAssertEqual(try contents(db, "u"), models[1])
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
    }

    /// A spilled transaction's buffer of held-back changes that grew to
    /// hold a large value is let go once applied, not kept for reuse: the
    /// transaction would otherwise hold that memory to its end.
    func testAChangeBufferThatHeldALargeValueIsNotKept() throws {
        let db = try open("large-value.strata", small)
        let large = [UInt8](repeating: 7, count: 4 << 20)
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<1200 { try tx.put(key(i), value(i), in: tree) }
            XCTAssertGreaterThan(db.statistics.spilledPages, 0)
            // Small changes: buffers of about the limit's size are kept.
            for i in 0..<1200 { try tx.put(key(i), value(i, 1), in: tree) }
            let ordinary = tx.changeBufferBytes
            XCTAssertLessThan(ordinary, 1 << 20)
            try tx.put(key(5), large, in: tree)
            // The put went past the limit, so it was applied at once.
            XCTAssertLessThan(tx.changeBufferBytes, large.count)
            try tx.put(key(6), value(6), in: tree)
            XCTAssertLessThan(tx.changeBufferBytes, large.count)
        }
        XCTAssertEqual(try db.read { try $0.get(key(5), in: try $0.tree("t")) }, large)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
    }

    /// The checkpoint after a transaction that spilled copies most of its
    /// pages from frames read back from the log, each straight into the
    /// write to the main file without a page of its own. After the log
    /// restarts, every read comes from the main file and sees the new
    /// values, and the store checks healthy. Unmapped, so the page cache
    /// holds copies, not views of the file; a reader of the previous commit
    /// reads the first leaf from the main file all through the transaction.
    func testACheckpointCopiesFramesReadBackFromTheLog() throws {
        let options = DatabaseOptions(cacheSizeBytes: 16 * 4096, memoryMappedReads: false)
        let db = try open("stale.strata", options)
        var model = try load(db, 0..<3000)
        // The first key in key order: its leaf is the first each application
        // of the buffered puts rewrites, so it is spilled again long before
        // the commit and its newest image is a frame read back.
        let first = (0..<3000).min { key($0).lexicographicallyPrecedes(key($1)) }!
        let watched = key(first)
        func read(_ key: [UInt8]) throws -> [UInt8]? { try db.read { try $0.get(key, in: try $0.tree("t")) } }
        try db.checkpoint()
        // A commit restarts the log: the watched leaf has no frame, and its
        // readers read the main file.
        var restarts = db.statistics.walRestarts
        try db.write { try $0.put(Array("~a".utf8), [1], in: try $0.tree("t")) }
        XCTAssertEqual(db.statistics.walRestarts, restarts + 1)
        model[Array("~a".utf8)] = [1]
        let spilled = db.statistics.spilledPages
        let tx = try db.beginWrite()
        let tree = try tx.tree("t")
        for i in 0..<3000 {
            try tx.put(key(i), value(i, 1), in: tree)
            model[key(i)] = value(i, 1)
            // The previous commit's image of the watched leaf stays cached.
            if i % 25 == 0 { XCTAssertEqual(try read(watched), value(first)) }
        }
        try tx.commit()
        XCTAssertGreaterThan(db.statistics.spilledPages - spilled, 100)
        try db.checkpoint()
        restarts = db.statistics.walRestarts
        try db.write { try $0.put(Array("~b".utf8), [2], in: try $0.tree("t")) }
        XCTAssertEqual(db.statistics.walRestarts, restarts + 1)
        model[Array("~b".utf8)] = [2]
        XCTAssertEqual(try read(watched), value(first, 1))
        XCTAssertEqual(try contents(db), model)
        XCTAssertTrue(try db.check().isHealthy)
        try db.close()
    }

    /// Another handle of the store (its own cache and mapping) reads a
    /// spilled commit's pages, which reached the main file without a
    /// checkpoint.
    func testAnotherHandleReadsASpilledCommit() throws {
        let path = directory.file("shared.strata")
        let writer = try Database.open(path: path, options: small)
        let reader = try Database.open(path: path, options: small)
        try writer.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<100 { try tx.put(key(i), value(i), in: tree) }
        }
        XCTAssertEqual(try contents(reader).count, 100)
        var model = try contents(writer)
        try writer.write { tx in
            let tree = try tx.createTree("t")
            for i in 100..<4000 {
                try tx.put(key(i), value(i), in: tree)
                model[key(i)] = value(i)
            }
        }
        XCTAssertGreaterThan(writer.statistics.spilledPages, 0)
        XCTAssertEqual(try contents(reader), model)
        try reader.close()
        try writer.close()
    }
}
