import StrataEngine
import XCTest

@testable import Strata

/// The directly written row and pair keys against the forms they are
/// documented to have (a pair key: two integers of the fixed form, a code
/// 0x20 and 8 bytes with the sign bit flipped), one key at a time and in a
/// batch.
final class RowKeyTests: XCTestCase {
    func testPairAndRowKeysHaveTheirDocumentedForm() {
        let values: [Int64] = [Int64.min, Int64.min + 1, -256, -1, 0, 1, 255, 256, 1 << 40, Int64.max - 1, Int64.max]
        var pairs = KeyBatch()
        var rows = KeyBatch()
        var expectedPairs: [[UInt8]] = []
        for first in values {
            var big = UInt64(bitPattern: first).bigEndian
            let rowKey = withUnsafeBytes(of: &big) { Array($0) }
            XCTAssertEqual(RowKey.encode(first), rowKey, "row \(first)")
            XCTAssertEqual(try RowKey.decode(RowKey.encode(first)), first)
            RowKey.append(first, to: &rows)
            XCTAssertEqual(rows[rows.count - 1], rowKey)
            for second in values {
                let expected = [first, second].flatMap { value in
                    [0x20] + withUnsafeBytes(of: (UInt64(bitPattern: value) ^ (1 << 63)).bigEndian) { Array($0) }
                }
                XCTAssertEqual(try KeyEncoding.decode(expected), [.int(first), .int(second)], "format 1 still decodes")
                XCTAssertEqual(PairKey.prefix(first), Array(expected.prefix(9)))
                XCTAssertEqual(PairKey.encode(first, second), expected, "pair \(first), \(second)")
                XCTAssertTrue(PairKey.decode(expected)! == (first, second))
                PairKey.append(first, second, to: &pairs)
                expectedPairs.append(expected)
            }
        }
        XCTAssertEqual((0..<pairs.count).map { pairs[$0] }, expectedPairs)
        XCTAssertTrue(pairs.isSorted, "ascending values give ascending pair keys")
    }
}
