import Foundation
import StrataEngine
import StrataTesting
import XCTest

/// A change that fails part-way leaves its write transaction failed: a
/// caller that catches the error inside `write {}` cannot commit half of a
/// split or merge.
///
/// Before transactions could fail, every one of these cases committed
/// what the transaction had done until the failing read, and in 31 of the
/// 107 the failing read was a sibling loaded in the middle of a delete's
/// merge: the committed store's catalog counted an entry the tree no
/// longer held.
final class FailedTransactionTests: EngineTestCase {
    private let path = "/mem/failed"
    /// A cache of four pages, so that changes keep reading pages back (from
    /// the log or the main file) in the middle of splits and merges.
    private let options = DatabaseOptions(cacheSizeBytes: 4 * 4096, memoryMappedReads: false)

    private func key(_ i: Int) -> [UInt8] { Array(String(format: "k%05d", i).utf8) }
    private func value(_ i: Int, _ size: Int) -> [UInt8] { [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: size) }

    /// Deletes a run of keys (leaves empty out and merge with, or borrow
    /// from, right siblings read for the first time in the middle of the
    /// delete), then puts larger values between the remaining keys (splits).
    private func change(_ tx: WriteTransaction, _ tree: Tree) throws {
        for i in 0..<600 { try tx.delete(key(i), in: tree) }
        for i in stride(from: 600, to: 2000, by: 4) { try tx.put(key(i) + [0], value(i, 300), in: tree) }
    }

    private func contents(_ db: Database) throws -> [[UInt8]: [UInt8]] {
        try db.read { tx in
            var all: [[UInt8]: [UInt8]] = [:]
            let cursor = try tx.cursor(try tx.tree("t"))
            var valid = try cursor.first()
            while valid {
                all[try cursor.key()] = try cursor.value()
                valid = try cursor.next()
            }
            return all
        }
    }

    func testAChangeThatFailsPartWayCannotBeCommitted() throws {
        // The base store: 2,000 entries, checkpointed and closed.
        let base = MemoryFileSystem()
        do {
            let db = try Database.open(path: path, options: options, fileSystem: base)
            try db.write { tx in
                let tree = try tx.createTree("t")
                for i in 0..<2000 { try tx.put(key(i), value(i, 200), in: tree) }
            }
            try db.close()
        }
        let expected = try contents(try open(path, options: options, fileSystem: base.afterProcessCrash()))

        // How many reads the change makes when nothing fails (the tree's
        // catalog entry is read before, the commit's reads after).
        final class Reads: @unchecked Sendable { var count = 0 }
        let clean = Reads()
        do {
            let fs = base.afterProcessCrash()
            let db = try Database.open(path: path, options: options, fileSystem: fs)
            try db.write { tx in
                let tree = try tx.tree("t")
                fs.faults = { op in
                    if op.kind == .read { clean.count += 1 }
                    return nil
                }
                try change(tx, tree)
                fs.faults = nil
            }
            try db.close()
        }
        XCTAssertGreaterThan(clean.count, 50, "the change must read pages back for this test to mean anything")

        // Fail the n-th read, for reads spread over the whole change.
        var failedMidChange = 0
        for n in stride(from: 1, through: clean.count, by: max(1, clean.count / 80)) {
            let fs = base.afterProcessCrash()
            let db = try open(path, options: options, fileSystem: fs)
            let reads = Reads()
            let tx = try db.beginWrite()
            let tree = try tx.tree("t")
            fs.faults = { op in
                guard op.kind == .read else { return nil }
                reads.count += 1
                return reads.count == n ? EIO : nil
            }
            var caught: (any Error)?
            do { try change(tx, tree) } catch { caught = error }
            fs.faults = nil
            guard let caught else {
                XCTFail("read #\(n) of \(clean.count) did not fail the change")
                tx.rollback()
                continue
            }
            guard case StorageError.io(operation: "pread", _, _) = caught else {
                XCTFail("read #\(n): \(caught)")
                tx.rollback()
                continue
            }
            failedMidChange += 1
            // Every later use is refused, and so is the commit, which ends
            // the transaction.
            XCTAssertThrowsError(try tx.put(key(9999), value(1, 10), in: tree), "read #\(n)") { error in
                guard case StorageError.transactionFailed(let why) = error else { return XCTFail("read #\(n): \(error)") }
                XCTAssertTrue(why.contains("pread"), why)
            }
            XCTAssertThrowsError(try tx.commit(), "read #\(n): a failed transaction must not commit") { error in
                guard case StorageError.transactionFailed = error else { return XCTFail("read #\(n): \(error)") }
            }
            // The store is exactly as before, healthy, and takes writes.
            let now = try contents(db)
            XCTAssertTrue(now == expected, "read #\(n): \(now.count) entries where \(expected.count) were committed")
            let report = try db.check()
            XCTAssertTrue(report.isHealthy, "read #\(n):\n\(report)")
            try db.write { tx in try tx.put(key(0), value(7, 10), in: try tx.tree("t")) }
        }
        XCTAssertGreaterThan(failedMidChange, 50)
    }

    func testErrorsFoundBeforeAnyChangeLeaveTheTransactionUsable() throws {
        let db = try open()
        try db.write { tx in
            let tree = try tx.createTree("t")
            XCTAssertThrowsError(try tx.put([UInt8](repeating: 1, count: Database.maxKeyLength + 1), [], in: tree))
            XCTAssertThrowsError(try tx.createTree(""))
            try tx.put(key(1), value(1, 10), in: tree)
        }
        try db.read { tx in XCTAssertEqual(try tx.get(key(1), in: try tx.tree("t")), value(1, 10)) }
    }
}
