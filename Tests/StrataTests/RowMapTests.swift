import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// The identity map's hash table against `Dictionary`, under random
/// inserts, replacements and removals (removal shifts probe runs back, the
/// part most easily got wrong).
final class RowMapTests: XCTestCase {
    func testMatchesDictionaryUnderRandomEdits() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "RowMapTests"))
        let models = (0..<64).map { _ in BucketListItem(title: "t", details: "", hasReservation: false, isInPlan: false) }
        for round in 0..<20 {
            var map = RowMap()
            var reference: [Int64: BucketListItem] = [:]
            // Small key ranges force collisions and long probe runs.
            let range: ClosedRange<Int64> = round % 2 == 0 ? 0...40 : 0...5_000
            for _ in 0..<3_000 {
                let row = Int64.random(in: range, using: &random)
                if Bool.random(using: &random) {
                    let model = models[Int.random(in: 0..<models.count, using: &random)]
                    map[row] = model
                    reference[row] = model
                } else {
                    map[row] = nil
                    reference[row] = nil
                }
                XCTAssertEqual(map.count, reference.count)
            }
            for row in range {
                XCTAssertTrue(map[row] as AnyObject? === reference[row], "row \(row), round \(round)")
            }
            XCTAssertEqual(map.models.count, reference.count)
        }
    }
}
