import StrataEngine
import StrataTesting
import XCTest

/// `KeyBatch` (its own copy-on-write byte buffer) against an array of
/// arrays: keys of every length including empty ones, growth past the
/// reserved capacity, appends of one batch to another and to itself,
/// sortedness, sorting, and copies that must not see each other's appends.
final class KeyBatchTests: XCTestCase {
    func testKeyBatchMatchesAnArrayOfKeys() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "KeyBatchTests"))
        for round in 0..<40 {
            var batch = round % 2 == 0 ? KeyBatch() : KeyBatch(capacity: 4, bytes: 3)
            var reference: [[UInt8]] = []
            for _ in 0..<Int.random(in: 0...300, using: &random) {
                let key = (0..<Int.random(in: 0...20, using: &random)).map { _ in UInt8.random(in: 0...3, using: &random) }
                if Bool.random(using: &random) {
                    batch.append(key)
                } else {
                    key.withUnsafeBytes { source in batch.append(count: source.count) { $0.copyMemory(from: source) } }
                }
                reference.append(key)
            }
            let snapshot = batch
            let snapshotKeys = reference
            let other = KeyBatch((0..<5).map { [UInt8($0), 9] })
            batch.append(contentsOf: other)
            reference += (0..<5).map { [UInt8($0), 9] }
            if round % 4 == 1 {
                batch.append(contentsOf: batch)
                reference += reference
            }
            XCTAssertEqual((0..<snapshot.count).map { snapshot[$0] }, snapshotKeys, "a copy keeps its keys")
            XCTAssertEqual(batch.count, reference.count)
            XCTAssertEqual((0..<batch.count).map { batch[$0] }, reference, "round \(round)")
            let isSorted = zip(reference, reference.dropFirst()).allSatisfy { !$1.lexicographicallyPrecedes($0) }
            XCTAssertEqual(batch.isSorted, isSorted)
            let sorted = batch.sorted()
            XCTAssertTrue(sorted.isSorted)
            XCTAssertEqual((0..<sorted.count).map { sorted[$0] }, reference.sorted { $0.lexicographicallyPrecedes($1) })
            XCTAssertEqual((0..<batch.count).map { batch[$0] }, reference, "sorting left the batch as it was")
        }
    }

    func testCopiesDoNotShareAppends() {
        var first = KeyBatch(capacity: 100, bytes: 8)
        first.append([1, 2, 3])
        var second = first
        second.append([4])
        first.append([5, 6])
        XCTAssertEqual((0..<first.count).map { first[$0] }, [[1, 2, 3], [5, 6]])
        XCTAssertEqual((0..<second.count).map { second[$0] }, [[1, 2, 3], [4]])
    }

    func testRemoveAllLeavesCopiesTheirKeys() {
        var first = KeyBatch(capacity: 4, bytes: 4)
        first.append([1, 2, 3])
        let copy = first
        first.removeAll()
        XCTAssertTrue(first.isEmpty)
        first.append([9])
        XCTAssertEqual((0..<copy.count).map { copy[$0] }, [[1, 2, 3]], "a copy keeps its keys")
        first.removeAll()
        first.append([7, 7])
        first.append([8])
        XCTAssertEqual((0..<first.count).map { first[$0] }, [[7, 7], [8]], "the emptied buffer takes new keys")
    }
}
