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

/// The page cache against `Dictionary`: it may forget entries (it is
/// bounded), but what it returns is the last image put under that key,
/// and after dropping frames or main-file pages, none of that kind is left
/// while every entry of the other kind it held is still found. The share
/// dropped varies, so both ways of dropping run.
final class PageCacheTests: XCTestCase {
    func testGetsReturnTheLastPutAndDropsRemoveOneKind() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "PageCacheTests"))
        let images = (0..<16).map { _ in Page.zeroed(64) }
        var cache = PageCache(capacityPages: 48)
        var reference: [UInt64: Page] = [:]
        var drops = (rebuilt: 0, oneByOne: 0)
        let keys: [UInt64] =
            (0..<60).map { PageCache.mainKey(UInt32($0)) } + (0..<60).map { PageCache.frameKey(generation: 3, frame: $0) }
        for step in 0..<100_000 {
            let key = keys[Int(random.next() % UInt64(keys.count))]
            switch random.next() % 200 {
            case 0, 1:
                let frames = random.next() % 2 == 0
                let kind: UInt64 = frames ? 1 : 0
                let held = keys.filter { cache.get($0) != nil }
                let doomed = held.filter { $0 >> 63 == kind }.count
                if doomed > 0 && doomed * 4 < held.count { drops.oneByOne += 1 } else if doomed > 0 { drops.rebuilt += 1 }
                if frames { cache.removeFrames() } else { cache.removeMainPages() }
                for k in keys where k >> 63 == kind {
                    XCTAssertNil(cache.get(k), "step \(step)")
                    reference[k] = nil
                }
                for k in held where k >> 63 != kind { XCTAssertTrue(cache.get(k) === reference[k], "step \(step)") }
            case 2..<80:
                let page = images[Int(random.next() % UInt64(images.count))]
                cache.put(key, page)
                reference[key] = page
            default:
                if let page = cache.get(key) { XCTAssertTrue(page === reference[key], "step \(step)") }
            }
        }
        XCTAssertLessThanOrEqual(keys.filter { cache.get($0) != nil }.count, 48)
        XCTAssertGreaterThan(drops.rebuilt, 10)
        XCTAssertGreaterThan(drops.oneByOne, 10)
    }
}
