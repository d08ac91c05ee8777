import XCTest

@testable import StrataEngine

/// The shared catalog cache answers for a tree name only with the entry
/// remembered under the same bytes (its table is keyed by `String`, whose
/// equality joins canonically equivalent spellings): every name finds its
/// own entry, names that differ in one byte stay apart, two
/// Unicode spellings of one name never find each other's entry, and a name
/// never remembered finds nothing.
final class CatalogCacheTests: XCTestCase {
    func testEveryNameFindsItsOwnEntry() {
        let cache = CatalogCache()
        var names: [String] = []
        for i in 0..<2_000 {
            names.append("t\(i)")
            names.append("t\(i)x")
            names.append("index.Entity\(i % 37).field\(i)")
        }
        names += ["", "a", "b"]
        for (i, name) in names.enumerated() {
            cache.remember(name, position: 7, root: UInt32(i + 2), count: i)
        }
        for (i, name) in names.enumerated() {
            let entry = cache.entry(name, position: 7)
            XCTAssertEqual(entry?.root, UInt32(i + 2), name)
            XCTAssertEqual(entry?.count, i, name)
        }
        // `String` takes these as one key; the catalog takes them as two trees.
        let precomposed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        cache.remember(precomposed, position: 7, root: 50_000, count: 1)
        XCTAssertEqual(cache.entry(precomposed, position: 7)?.root, 50_000)
        XCTAssertNil(cache.entry(decomposed, position: 7), "the other spelling's entry")
        cache.remember(decomposed, position: 7, root: 50_001, count: 2)
        XCTAssertEqual(cache.entry(decomposed, position: 7)?.root, 50_001)
        let other = cache.entry(precomposed, position: 7)
        XCTAssertTrue(other == nil || other?.root == 50_000, "the other spelling's entry")
        XCTAssertNil(cache.entry("t2000", position: 7))
        XCTAssertNil(cache.entry("t1", position: 8), "an entry of another position")
        // A commit moves the entries on with the counts of the trees it changed.
        cache.advance(from: 7, to: 9, changed: [5: names[3]], counts: [5: 99])
        XCTAssertEqual(cache.entry(names[3], position: 9)?.count, 99)
        XCTAssertEqual(cache.entry(names[4], position: 9)?.root, 6)
        XCTAssertNil(cache.entry(names[4], position: 7))
    }
}
