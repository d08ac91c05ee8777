import StrataTesting
import XCTest

@testable import StrataEngine

/// The page cache's hash table against `Dictionary`: random inserts,
/// updates and removals, with keys that collide on purpose (a stride of
/// the table size) and WAL frame keys (top bit set).
final class PageMapTests: XCTestCase {
    func testMatchesADictionary() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "PageMapTests"))
        var map = PageMap(capacity: 64)
        var reference: [UInt64: Int] = [:]
        let pool: [UInt64] =
            (0..<40).map { UInt64($0) } + (0..<40).map { UInt64($0) * 128 } + (0..<40).map { (1 << 63) | UInt64($0) << 32 | 7 }
        for step in 0..<200_000 {
            let key = pool[Int(random.next() % UInt64(pool.count))]
            if random.next() % 3 == 0 {
                XCTAssertEqual(map.remove(key), reference.removeValue(forKey: key), "step \(step)")
            } else if reference.count < 64 || reference[key] != nil {
                map[key] = step
                reference[key] = step
            }
            let probe = pool[Int(random.next() % UInt64(pool.count))]
            XCTAssertEqual(map[probe], reference[probe], "step \(step)")
        }
        for key in pool { XCTAssertEqual(map[key], reference[key]) }
    }
}

/// A write transaction's dirty pages against `Dictionary`: few pages are
/// found by a scan, more by a table, and `removeAll` returns to scanning;
/// the sizes cross that line both ways.
final class DirtyPagesTests: XCTestCase {
    func testMatchesADictionaryAcrossTheScannedSize() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "DirtyPagesTests"))
        let images = (0..<8).map { _ in Page.zeroed(64) }
        var dirty = DirtyPages()
        var reference: [UInt32: Page] = [:]
        for step in 0..<100_000 {
            // Sizes wander from empty to well past the scanned 16 pages.
            let span = UInt64(step % 5_000 < 2_500 ? 12 : 80)
            let number = UInt32(random.next() % span) * 7 + 1
            switch random.next() % 100 {
            case 0:
                dirty.removeAll()
                reference.removeAll()
            case 1..<35:
                dirty[number] = nil
                reference[number] = nil
            default:
                let image = images[Int(random.next() % UInt64(images.count))]
                dirty[number] = image
                reference[number] = image
            }
            let probe = UInt32(random.next() % span) * 7 + 1
            XCTAssertTrue(dirty[probe] === reference[probe], "step \(step): page \(probe)")
            XCTAssertEqual(dirty.count, reference.count, "step \(step)")
        }
        for (number, image) in reference { XCTAssertTrue(dirty[number] === image) }
        XCTAssertEqual(Set(dirty.numbers), Set(reference.keys))
    }
}
