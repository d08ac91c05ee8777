import StrataTesting
import XCTest

@testable import StrataEngine

/// `compareBytes`, the order of every key comparison in the trees, against
/// the order of `[UInt8]` (lexicographic, shorter first on a common
/// prefix) for every length from 0 to 40 and pairs that share a prefix
/// of every length, so that each of its paths (single bytes, two
/// overlapping 4-byte words, one and two 8-byte words, `memcmp`) decides
/// at every position.
final class CompareBytesTests: EngineTestCase {
    func testOrderIsLexicographicAtEveryLengthAndPrefix() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "CompareBytesTests"))
        var checked = 0
        for aCount in 0...40 {
            for bCount in 0...40 {
                for shared in 0...min(aCount, bCount) {
                    for _ in 0..<3 {
                        let prefix = (0..<shared).map { _ in UInt8.random(in: 0...255, using: &random) }
                        // Tails that often differ by one bit, at either end of the byte range.
                        let a = prefix + (shared..<aCount).map { _ in [0, 1, 127, 128, 254, 255].randomElement(using: &random)! }
                        let b = prefix + (shared..<bCount).map { _ in [0, 1, 127, 128, 254, 255].randomElement(using: &random)! }
                        let expected = a == b ? 0 : (a.lexicographicallyPrecedes(b) ? -1 : 1)
                        // Exact-size buffers, so a read past either end would be caught by a sanitizer.
                        let got = a.withUnsafeBytes { ab in
                            b.withUnsafeBytes { bb in
                                compareBytes(
                                    ab.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, a.count,
                                    bb.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, b.count)
                            }
                        }
                        XCTAssertEqual(got.signum(), expected, "\(a) vs \(b)")
                        checked += 1
                    }
                }
            }
        }
        XCTAssertGreaterThan(checked, 30_000)
    }
}
