import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// The identity map's hash table against `Dictionary`, under random
/// inserts, replacements and removals (tombstones and their reuse are the
/// part most easily got wrong), including the sentinel rows.
final class RowMapTests: XCTestCase {
    func testMatchesDictionaryUnderRandomEdits() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "RowMapTests"))
        let models = (0..<64).map { _ in BucketListItem(title: "t", details: "", hasReservation: false, isInPlan: false) }
        for round in 0..<20 {
            var map = RowMap()
            var reference: [Int64: BucketListItem] = [:]
            // Small key ranges force collisions and long probe runs.
            let range: ClosedRange<Int64> = round % 2 == 0 ? -3...40 : 0...5_000
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
            // Removals move the last entry into the hole: the list still
            // holds each row's model once.
            func identities(_ models: [AnyObject]) -> [ObjectIdentifier] { models.map(ObjectIdentifier.init).sorted() }
            XCTAssertEqual(identities(map.models.map { $0 as AnyObject }), identities(Array(reference.values)))
        }
        // The two sentinel values are rows like any other.
        var map = RowMap()
        let model = models[0]
        for row in [Int64.min, 0, Int64.max] { map[row] = model }
        XCTAssertEqual(map.count, 3)
        XCTAssertTrue(map[Int64.min] as AnyObject? === model)
        map[Int64.min] = nil
        map[0] = nil
        XCTAssertEqual(map.count, 1)
        XCTAssertNil(map[Int64.min])
        XCTAssertTrue(map[Int64.max] as AnyObject? === model)
    }

    /// The cascade's row set against `Set`, with strided rows (which share
    /// low bits), dense runs, negative rows and row 0; inserts, then
    /// inserts and removals mixed (backward-shift deletion must keep every
    /// probe run whole), with iteration listing exactly the members.
    func testRowSetMatchesSet() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "RowSetTests"))
        for round in 0..<6 {
            var set = RowSet()
            var reference: Set<Int64> = []
            for _ in 0..<20_000 {
                let row: Int64
                switch round % 3 {
                case 0: row = Int64.random(in: -50...3_000, using: &random)
                case 1: row = Int64.random(in: 0..<2_000, using: &random) * 4_096
                default: row = Int64.random(in: Int64.min...Int64.max, using: &random)
                }
                XCTAssertEqual(set.insert(row), reference.insert(row).inserted, "row \(row), round \(round)")
            }
            XCTAssertEqual(set.count, reference.count)
            for row in reference { XCTAssertTrue(set.contains(row)) }
            for _ in 0..<2_000 {
                let row = Int64.random(in: -100...10_000_000, using: &random)
                XCTAssertEqual(set.contains(row), reference.contains(row), "row \(row)")
            }
            let members = Array(reference)
            for step in 0..<30_000 {
                if step % 3 == 0 {
                    let row = Int64.random(in: -50...3_000, using: &random)
                    XCTAssertEqual(set.insert(row), reference.insert(row).inserted, "insert \(row), round \(round)")
                } else {
                    let row =
                        Bool.random(using: &random)
                        ? members[Int.random(in: 0..<members.count, using: &random)]
                        : Int64.random(in: -50...3_000, using: &random)
                    XCTAssertEqual(set.remove(row), reference.remove(row) != nil, "remove \(row), round \(round)")
                }
            }
            XCTAssertEqual(set.count, reference.count)
            let listed = Array(set)
            XCTAssertEqual(listed.count, reference.count)
            XCTAssertEqual(Set(listed), reference)
            for row in members { XCTAssertEqual(set.contains(row), reference.contains(row), "row \(row)") }
        }
    }
}
