import Foundation
import StrataEngine
import StrataTesting
import XCTest

/// `check`, `compact` and `backup` report progress that grows, stays
/// within its total, and ends complete (check and backup).
final class ProgressTests: EngineTestCase {
    func testLongOperationsReportProgress() throws {
        let db = try open("store")
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<20_000 { try tx.put(Array("key \(i)".utf8), [UInt8](repeating: 1, count: 200), in: tree) }
        }
        var checkCalls: [(Int, Int)] = []
        _ = try db.check(progress: { checkCalls.append(($0, $1)) })
        var compactCalls: [(Int, Int)] = []
        try db.compact(to: directory.file("compact"), progress: { compactCalls.append(($0, $1)) })
        var backupCalls: [(Int, Int)] = []
        try db.backup(to: directory.file("backup"), progress: { backupCalls.append(($0, $1)) })
        for (name, calls) in [("check", checkCalls), ("compact", compactCalls), ("backup", backupCalls)] {
            XCTAssertFalse(calls.isEmpty, name)
            XCTAssertEqual(calls.map(\.0), calls.map(\.0).sorted(), "\(name) grows")
            XCTAssertTrue(calls.allSatisfy { $0.0 <= $0.1 }, "\(name) stays within its total: \(calls)")
        }
        XCTAssertEqual(checkCalls.last.map { $0.0 == $0.1 }, true)
        XCTAssertEqual(backupCalls.last.map { $0.0 == $0.1 }, true)
        XCTAssertEqual(compactCalls.last?.1, 20_000)
        // Opened, the copies are checked at tear-down too.
        for copy in ["compact", "backup"] {
            let opened = try Database.open(path: directory.file(copy), options: DatabaseOptions(readOnly: true))
            XCTAssertEqual(try opened.read { tx in try tx.count(try tx.tree("t")) }, 20_000, copy)
            try opened.close()
        }
    }
}
