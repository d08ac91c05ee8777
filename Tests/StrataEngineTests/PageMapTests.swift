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
