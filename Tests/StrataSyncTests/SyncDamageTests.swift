import Foundation
import StrataEngine
import XCTest

@testable import StrataSync

/// Sync's bookkeeping in a damaged store (what `strata sync-status` and a
/// replica read before anything else): a typed error naming the damage,
/// never a trap, and the store left as it was.
final class SyncDamageTests: XCTestCase {
    func testDamagedSyncMetadataIsATypedError() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-damage-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let db = try Database.open(path: directory.appendingPathComponent("damaged.store").path)
        defer { try? db.close() }
        let cases: [(key: String, value: [UInt8], message: String)] = [
            ("device", [1, 2, 3, 4, 5, 6, 7, 8], "sync.meta: a device of 8 bytes"),
            ("position", [1, 2, 3], "a row key of 3 bytes"),
        ]
        for (key, value, message) in cases {
            try db.write { tx in
                let meta = try tx.treeIfPresent("sync.meta") ?? tx.createTree("sync.meta")
                try tx.put(Array("zone".utf8), Array("box-office".utf8), in: meta)
                if key != "device" { try tx.put(Array("device".utf8), [UInt8](repeating: 7, count: 16), in: meta) }
                try tx.put(Array(key.utf8), value, in: meta)
            }
            XCTAssertThrowsError(try db.read { try SyncReplica.state(in: $0) }, key) { error in
                XCTAssertTrue("\(error)".contains(message), "\(key): \(error)")
            }
            XCTAssertEqual(try db.read { try $0.get(Array(key.utf8), in: try $0.tree("sync.meta")) }, value, key)
        }
        XCTAssertEqual(try db.check().problems, [])
    }
}
