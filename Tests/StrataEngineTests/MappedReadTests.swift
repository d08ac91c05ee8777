import Foundation
import StrataEngine
import StrataTesting
import XCTest

/// Reads of the main file through its memory mapping: who maps, what is
/// checked and when, a file that outgrows its mapping or shrinks, and pages
/// that outlive their database.
final class MappedReadTests: EngineTestCase {
    private func key(_ i: Int) -> [UInt8] { bytes("key \(String(i, radix: 16))") }
    private func value(_ i: Int, round: Int = 0) -> [UInt8] {
        bytes("value \(i) of round \(round) " + String(repeating: "x", count: i % 90))
    }

    private func fill(_ db: Database, _ range: Range<Int>, round: Int = 0) throws {
        try db.write { tx in
            let tree = try tx.treeIfPresent("t") ?? tx.createTree("t")
            for i in range { try tx.put(key(i), value(i, round: round), in: tree) }
        }
    }

    private func assertHolds(
        _ db: Database, _ range: Range<Int>, round: Int = 0, file: StaticString = #filePath, line: UInt = #line
    )
        throws
    {
        try db.read { tx in
            let tree = try tx.tree("t")
            for i in range {
                XCTAssertEqual(try tx.get(key(i), in: tree), value(i, round: round), "key \(i)", file: file, line: line)
            }
        }
    }

    /// Lets a small store outgrow its mapping: no minimum mapping length
    /// until the test ends.
    private func mapInSmallSteps() {
        let saved = Database.minimumMappingLength
        Database.minimumMappingLength = 0
        addTeardownBlock { Database.minimumMappingLength = saved }
    }

    /// Every shared handle maps (a checkpoint of any of them never
    /// rewrites or cuts a page another one's reader still reads); a
    /// read-only exclusive one, which takes no lock, does not.
    func testMappingFollowsTheLockingMode() throws {
        let db = try open("mapped.strata", DatabaseOptions(durability: .none))
        try fill(db, 0..<2000)
        try db.checkpoint()
        XCTAssertEqual(db.statistics.mappedBytes, 64 << 20)
        try assertHolds(db, 0..<2000)

        let reader = try Database.open(path: directory.file("mapped.strata"), options: DatabaseOptions(readOnly: true))
        XCTAssertEqual(reader.statistics.mappedBytes, 64 << 20, "a shared read-only handle maps")
        try assertHolds(reader, 0..<2000)
        try reader.close()
        try db.close()
        let lone = try Database.open(
            path: directory.file("mapped.strata"), options: DatabaseOptions(readOnly: true, locking: .exclusive))
        XCTAssertEqual(lone.statistics.mappedBytes, 0, "an exclusive read-only handle takes no lock and must not map")
        try assertHolds(lone, 0..<2000)
        try lone.close()

        let unmapped = try open("mapped.strata", DatabaseOptions(memoryMappedReads: false))
        XCTAssertEqual(unmapped.statistics.mappedBytes, 0)
        try assertHolds(unmapped, 0..<2000)

        let memory = try open("/mem/store", options: DatabaseOptions(durability: .none), fileSystem: MemoryFileSystem())
        XCTAssertEqual(memory.statistics.mappedBytes, 0, "the simulated file system maps nothing")
    }

    #if os(Linux)
        /// Mapped pages a scan touches count in the process's RSS, more
        /// than it read (a fault maps neighbours too);
        /// `discardMappedPages()` gives them back.
        func testDiscardingMappedPagesShrinksTheResidentFile() throws {
            let db = try open("resident.strata", DatabaseOptions(durability: .none, cacheSizeBytes: 1 << 20))
            let big = [UInt8](repeating: 7, count: 2000)
            try db.write { tx in
                let tree = try tx.createTree("t")
                for i in 0..<12_000 { try tx.put(key(i), big, in: tree) }
            }
            try db.checkpoint()
            db.discardMappedPages()
            let before = try XCTUnwrap(ProcessMemory.residentFileBytes(), "no RssFile in /proc/self/status")
            var scanned = 0
            try db.read { tx in
                let cursor = try tx.cursor(try tx.tree("t"))
                var valid = try cursor.first()
                while valid {
                    scanned += try cursor.value().count
                    valid = try cursor.next()
                }
            }
            XCTAssertEqual(scanned, 12_000 * 2000)
            let afterScan = try XCTUnwrap(ProcessMemory.residentFileBytes())
            XCTAssertGreaterThan(afterScan - before, 16 << 20, "the scan of \(scanned >> 20) MiB left little resident")
            db.discardMappedPages()
            let afterDiscard = try XCTUnwrap(ProcessMemory.residentFileBytes())
            XCTAssertLessThan(
                afterDiscard - before, 2 << 20,
                "\((afterDiscard - before) >> 20) MiB of the file still resident after the discard")
            // The views the cache holds still read (they fault back in).
            try db.read { tx in XCTAssertEqual(try tx.get(key(5), in: try tx.tree("t")), big) }
        }
    #endif

    /// With a page cache of 16 pages, every pass over a store of hundreds
    /// of pages evicts nearly everything. Mapped pages come back as views
    /// without being checked again; read with `pread`, each is checked at
    /// each read.
    func testEvictedMappedPagesAreNotCheckedAgain() throws {
        for mapped in [true, false] {
            let name = "evict-\(mapped).strata"
            let db = try open(name, DatabaseOptions(durability: .none, cacheSizeBytes: 16 * 4096, memoryMappedReads: mapped))
            try fill(db, 0..<20_000)
            try db.checkpoint()
            let pages = db.statistics.pageCount
            XCTAssertGreaterThan(pages, 300)
            try assertHolds(db, 0..<20_000)
            let afterFirst = db.statistics.pagesChecked
            try assertHolds(db, 0..<20_000)
            let second = db.statistics.pagesChecked - afterFirst
            if mapped {
                XCTAssertLessThanOrEqual(afterFirst, pages, "each mapped page is checked at most once")
                XCTAssertEqual(second, 0, "an evicted view comes back unchecked: it was checked already")
            } else {
                XCTAssertGreaterThan(second, pages, "pread pages are checked at every read from disk")
            }
        }
    }

    /// A file growing far past its first mapping is mapped again; a reader
    /// that began before keeps reading its snapshot through the old
    /// mapping. Then most of it is deleted (the checkpoint truncates the
    /// file) and it grows again over the truncated pages.
    func testAFileOutgrowingItsMappingAndShrinkingReadsRight() throws {
        mapInSmallSteps()
        let db = try open(
            "grow.strata", DatabaseOptions(durability: .none, cacheSizeBytes: 16 * 4096, checkpointThresholdFrames: 50))
        try fill(db, 0..<500)
        try db.checkpoint()
        let firstMapping = db.statistics.mappedBytes
        XCTAssertGreaterThan(firstMapping, 0)

        let early = try db.beginRead()
        let earlyTree = try early.tree("t")
        XCTAssertEqual(try early.get(key(7), in: earlyTree), value(7))
        for round in 1...8 {
            try fill(db, 0..<(500 * (round + 1)), round: round)
            try assertHolds(db, 0..<(500 * (round + 1)), round: round)
        }
        for i in stride(from: 0, to: 500, by: 37) {
            XCTAssertEqual(try early.get(key(i), in: earlyTree), value(i), "the early reader's snapshot")
        }
        early.end()
        try db.checkpoint()
        XCTAssertGreaterThan(db.statistics.mappedBytes, firstMapping, "the grown file was mapped again")
        try assertHolds(db, 0..<4500, round: 8)

        try db.write { tx in
            let tree = try tx.tree("t")
            for i in 100..<4500 { try tx.delete(key(i), in: tree) }
        }
        try db.checkpoint()
        let shrunk = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: directory.file("grow.strata"))[.size] as? Int)
        XCTAssertEqual(shrunk, db.statistics.pageCount * 4096, "the checkpoint truncated the free tail")
        try assertHolds(db, 0..<100, round: 8)
        try fill(db, 100..<3000, round: 9)
        try db.checkpoint()
        try assertHolds(db, 0..<100, round: 8)
        try assertHolds(db, 100..<3000, round: 9)
        XCTAssertTrue(try db.check().isHealthy)
    }

    /// A main file cut short while its log still holds a commit opens (the
    /// log may supply pages past the end), and reading a page the file no
    /// longer holds is an error naming the page, on both read paths: never
    /// a read of mapped memory past the end of the file (`SIGBUS`).
    func testAPagePastTheEndOfACutMainFileIsAnError() throws {
        for mapped in [true, false] {
            let path = directory.file("cut-\(mapped).strata")
            let first = try Database.open(path: path, options: DatabaseOptions(durability: .none))
            try fill(first, 0..<20_000)
            try first.close()
            // One more commit, left in the log; both files copied while the
            // store is open, as a crash would leave them.
            let live = try Database.open(
                path: path, options: DatabaseOptions(durability: .none, checkpointThresholdFrames: 1 << 20))
            try live.write { tx in try tx.put(key(0), value(0, round: 1), in: try tx.tree("t")) }
            let copy = directory.file("cut-\(mapped)-copy.strata")
            expectDamaged(copy, because: "a copy cut short to be read past its end")
            var main = try XCTUnwrap(readFile(path))
            try writeFile(copy + "-wal", try XCTUnwrap(readFile(path + "-wal")))
            try live.close()
            main.removeLast(main.count / 2)
            try writeFile(copy, main)

            let db = try Database.open(path: copy, options: DatabaseOptions(memoryMappedReads: mapped))
            XCTAssertEqual(db.statistics.mappedBytes > 0, mapped)
            let readAll = {
                try db.read { tx in
                    let tree = try tx.tree("t")
                    for i in 1..<20_000 { _ = try tx.get(self.key(i), in: tree) }
                }
            }
            XCTAssertThrowsError(try readAll(), "mapped: \(mapped)") { error in
                guard case StorageError.corrupt(_, let reason) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.contains("beyond the end of the file"), reason)
            }
            try db.close()
        }
    }

    /// A transaction still open when its database closes reads nothing
    /// more (its reader mark went with the handle, so another process's
    /// checkpoint could rewrite its pages): it throws `closed`. The pages
    /// and nodes it read keep the mapping alive, so nothing reads freed
    /// address space.
    func testATransactionOutlivingItsDatabaseThrowsClosed() throws {
        let db = try open("outlive.strata", DatabaseOptions(durability: .none))
        try fill(db, 0..<3000)
        try db.checkpoint()
        let tx = try db.beginRead()
        let tree = try tx.tree("t")
        XCTAssertEqual(try tx.get(key(42), in: tree), value(42))
        try db.close()
        XCTAssertThrowsError(try tx.get(key(42), in: tree)) { error in
            XCTAssertEqual(error as? StorageError, .closed)
        }
        tx.end()
    }

    /// A transaction whose snapshot is wholly in the main file reads tree
    /// pages straight from the mapping: after a full checkpoint and on
    /// opening a store with an empty log, readers and the writer alike;
    /// not while the log holds commits the main file lacks, not in a
    /// handle that does not map.
    func testReadersOfABackfilledSnapshotReadTheMappingDirectly() throws {
        let db = try open("direct.strata", DatabaseOptions(durability: .none, checkpointThresholdFrames: 1 << 20))
        try fill(db, 0..<3000)
        XCTAssertFalse(try db.read { $0.readsMainFileDirectly }, "the last commit is only in the log")
        XCTAssertFalse(try db.write { $0.readsMainFileDirectly }, "the last commit is only in the log")
        try db.checkpoint()
        XCTAssertTrue(try db.read { $0.readsMainFileDirectly })
        try db.write { tx in
            XCTAssertTrue(tx.readsMainFileDirectly)
            try tx.put(key(0), value(0), in: try tx.tree("t"))
        }
        XCTAssertFalse(try db.read { $0.readsMainFileDirectly }, "a commit since the checkpoint")
        try db.checkpoint()
        try assertHolds(db, 0..<3000)
        try db.close()

        let reopened = try open("direct.strata", DatabaseOptions(durability: .none))
        XCTAssertTrue(try reopened.read { $0.readsMainFileDirectly }, "opened with an empty log")
        try assertHolds(reopened, 0..<3000)
        try reopened.close()
        let unmapped = try open("direct.strata", DatabaseOptions(memoryMappedReads: false))
        XCTAssertFalse(try unmapped.read { $0.readsMainFileDirectly })
    }

    /// The writer of a backfilled snapshot reads what it did not change
    /// through the mapping and everything it changed from its own images:
    /// in one transaction that rewrites a third of the keys, deletes a
    /// third and adds new ones, with every page checked in the mapping
    /// first, each read (point reads and a cursor's walk, before and after
    /// the changes) sees the transaction's own state: with a budget that
    /// holds every changed page, and with one of 16 pages that spills them,
    /// to new places in the main file (few pages free) or to the log (half
    /// the store free, after a tree of the same size was dropped).
    func testTheWriterReadsItsOwnChangesAndTheRestThroughTheMapping() throws {
        for (name, budget, free) in [("held", 64 << 20, false), ("moved", 16 * 4096, false), ("logged", 16 * 4096, true)] {
            let db = try open(
                "writer-\(name).strata",
                DatabaseOptions(durability: .none, cacheSizeBytes: budget, checkpointThresholdFrames: 1 << 20))
            // With `free`, a tree of the same size grows beside this one,
            // their pages interleaved, and is dropped: its pages stay free
            // inside the file.
            try db.write { tx in
                let tree = try tx.createTree("t")
                let other = free ? try tx.createTree("u") : nil
                for i in 0..<3000 {
                    try tx.put(key(i), value(i), in: tree)
                    if let other { try tx.put(key(i), value(i), in: other) }
                }
            }
            if free { try db.write { tx in try tx.dropTree("u") } }
            try db.checkpoint()
            let relocatedBefore = db.statistics.relocatedPages
            try assertHolds(db, 0..<3000)
            let spilledBefore = db.statistics.spilledPages
            func expected(_ i: Int) -> [UInt8]? {
                if i >= 3000 { return value(i, round: 2) }
                switch i % 3 {
                case 0: return value(i, round: 1)
                case 1: return nil
                default: return value(i)
                }
            }
            try db.write { tx in
                XCTAssertTrue(tx.readsMainFileDirectly, name)
                let tree = try tx.tree("t")
                XCTAssertEqual(try tx.get(key(3), in: tree), value(3), name)
                for i in stride(from: 0, to: 3000, by: 3) {
                    try tx.put(key(i), value(i, round: 1), in: tree)
                    XCTAssertTrue(try tx.delete(key(i + 1), in: tree), "\(name): key \(i + 1)")
                }
                for i in 3000..<3500 { try tx.put(key(i), value(i, round: 2), in: tree) }
                XCTAssertFalse(try tx.delete(key(1), in: tree), "\(name): deleted twice")
                for i in 0..<3500 { XCTAssertEqual(try tx.get(key(i), in: tree), expected(i), "\(name): key \(i)") }
                var walked = 0
                let cursor = try tx.cursor(tree)
                var more = try cursor.first()
                while more {
                    walked += 1
                    more = try cursor.next()
                }
                XCTAssertEqual(walked, 2500, name)
                XCTAssertEqual(try tx.count(tree), 2500, name)
            }
            if budget < 1 << 20 { XCTAssertGreaterThan(db.statistics.spilledPages, spilledBefore, "the writer spilled") }
            if free {
                XCTAssertEqual(db.statistics.relocatedPages, relocatedBefore, "pages of the store spilled to the log")
            } else if budget < 1 << 20 {
                XCTAssertGreaterThan(db.statistics.relocatedPages, relocatedBefore, "pages of the store moved")
            }
            try db.read { tx in
                let tree = try tx.tree("t")
                for i in 0..<3500 { XCTAssertEqual(try tx.get(key(i), in: tree), expected(i), "\(name): key \(i)") }
            }
            XCTAssertEqual(try db.check().problems, [], name)
            try db.close()
        }
    }

    /// A writer that begins while this handle's last commits wait for
    /// their sync reads their pages, not the mapping's older images, even
    /// when the published state is wholly in the main file: threads that
    /// each add one to a shared counter, durably, with a checkpoint after
    /// every commit, lose no addition.
    func testAWriterAfterPendingCommitsReadsTheirPagesNotTheMapping() throws {
        let db = try open("pending.strata", DatabaseOptions(durability: .full, checkpointThresholdFrames: 1))
        try db.write { tx in
            let tree = try tx.createTree("t")
            try tx.put(bytes("counter"), bytes("0"), in: tree)
            for i in 0..<500 { try tx.put(key(i), value(i), in: tree) }
        }
        try db.checkpoint()
        let threads = 4
        let additions = 60
        let errors = ErrorList()
        let done = DispatchGroup()
        for _ in 0..<threads {
            done.enter()
            Thread {
                defer { done.leave() }
                do {
                    for _ in 0..<additions {
                        try db.write { tx in
                            let tree = try tx.tree("t")
                            let now = Int(String(decoding: try tx.get(bytes("counter"), in: tree) ?? [], as: UTF8.self)) ?? -1
                            try tx.put(bytes("counter"), bytes(String(now + 1)), in: tree)
                        }
                    }
                } catch {
                    errors.add(error)
                }
            }.start()
        }
        done.wait()
        XCTAssertEqual(errors.all, [])
        let total = try db.read { tx in try tx.get(bytes("counter"), in: try tx.tree("t")) }
        XCTAssertEqual(total, bytes(String(threads * additions)))
        try db.close()
    }

    /// While a reader reads the main file directly, no checkpoint may
    /// change it: commits pile up in the log, the reader keeps seeing its
    /// snapshot through pages it has read and pages it has not, and once it
    /// ends the checkpoint catches up and the next readers read the new
    /// main file directly.
    func testADirectReaderHoldsCheckpointsBack() throws {
        mapInSmallSteps()
        let db = try open(
            "held.strata", DatabaseOptions(durability: .none, cacheSizeBytes: 16 * 4096, checkpointThresholdFrames: 20))
        try fill(db, 0..<4000)
        try db.checkpoint()
        let reader = try db.beginRead()
        XCTAssertTrue(reader.readsMainFileDirectly)
        let tree = try reader.tree("t")
        // Half the keys read (their pages verified) before the writes.
        for i in stride(from: 0, to: 4000, by: 2) { XCTAssertEqual(try reader.get(key(i), in: tree), value(i)) }
        let checkpoints = db.statistics.checkpoints
        for round in 1...3 {
            // Rewrites every value and grows the store to twice its size.
            try fill(db, 0..<(4000 * (round + 1)), round: round)
            try db.checkpoint()
        }
        XCTAssertEqual(db.statistics.checkpoints, checkpoints, "nothing may reach the main file under a direct reader")
        for i in 0..<4000 { XCTAssertEqual(try reader.get(key(i), in: tree), value(i), "key \(i) of the old snapshot") }
        XCTAssertNil(try reader.get(key(4000), in: tree))
        reader.end()
        try db.checkpoint()
        XCTAssertGreaterThan(db.statistics.checkpoints, checkpoints)
        XCTAssertTrue(try db.read { $0.readsMainFileDirectly })
        try assertHolds(db, 0..<16_000, round: 3)
        XCTAssertTrue(try db.check().isHealthy)
    }

    /// A branch whose child pointer names a page that was verified as
    /// something else (an overflow page, read for a value before) is a
    /// damaged tree: the direct read reports it as the ordinary read does,
    /// and never reads the overflow page as a node.
    func testADirectReaderRefusesAVerifiedPageThatIsNotATreePage() throws {
        let path = directory.file("not-a-node.strata")
        let db = try Database.open(path: path, options: DatabaseOptions(durability: .none))
        try db.write { tx in
            let tree = try tx.createTree("t")
            try tx.put(bytes("a big value"), [UInt8](repeating: 7, count: 20_000), in: tree)
            for i in 0..<2000 { try tx.put(key(i), value(i), in: tree) }
        }
        try db.close()
        expectDamaged(path, because: "its root points at an overflow page to be found")
        var file = try XCTUnwrap(readFile(path))
        let pageSize = 4096
        // The tree's root (page 2, where roots stay) is a branch now; its
        // right-most child, which holds the last keys, becomes an overflow
        // page of the big value.
        XCTAssertEqual(file[2 * pageSize + 4], 2, "the root is a branch")
        let overflow = try XCTUnwrap((3..<file.count / pageSize).first { file[$0 * pageSize + 4] == 4 })
        for (i, byte) in withUnsafeBytes(of: UInt32(overflow).bigEndian, Array.init).enumerated() {
            file[2 * pageSize + 12 + i] = byte
        }
        PageBytes.resealChecksum(&file, page: 2, pageSize: pageSize)
        try writeFile(path, file)

        let last = try XCTUnwrap((0..<2000).map(key).max { $0.lexicographicallyPrecedes($1) })
        for mapped in [true, false] {
            let damaged = try Database.open(path: path, options: DatabaseOptions(memoryMappedReads: mapped))
            try damaged.read { tx in
                XCTAssertEqual(tx.readsMainFileDirectly, mapped)
                let tree = try tx.tree("t")
                XCTAssertEqual(try tx.get(bytes("a big value"), in: tree)?.count, 20_000, "its overflow pages read and verified")
                XCTAssertThrowsError(try tx.get(last, in: tree), "mapped: \(mapped)") { error in
                    guard case StorageError.corrupt(let page, let reason) = error else { return XCTFail("\(error)") }
                    XCTAssertEqual(page, UInt32(overflow))
                    XCTAssertTrue(reason.contains("where a tree page was expected"), reason)
                }
            }
            try damaged.close()
        }
    }
}
