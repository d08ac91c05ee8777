import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// The model state's small tables against the standard library's: the
/// field map (one entry inline, the rest in an array) against
/// `Dictionary`, and a to-many's pending edits (a scan up to a few members,
/// a hash set past that) against sets of members.
final class FieldMapTests: XCTestCase {
    func testFieldMapMatchesDictionaryUnderRandomEdits() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "FieldMapTests"))
        for round in 0..<50 {
            var map: FieldMap<[Int]> = [:]
            var reference: [Int: [Int]] = [:]
            for step in 0..<400 {
                let field = Int.random(in: 0..<(round % 2 == 0 ? 3 : 9), using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0:
                    map[field] = [step]
                    reference[field] = [step]
                case 1:
                    map[field] = nil
                    reference[field] = nil
                case 2:
                    XCTAssertEqual(map.removeValue(forKey: field), reference.removeValue(forKey: field))
                default:
                    map[field, default: [-1]].append(step)
                    reference[field, default: [-1]].append(step)
                }
                XCTAssertEqual(map.isEmpty, reference.isEmpty, "step \(step), round \(round)")
                for field in 0..<9 { XCTAssertEqual(map[field], reference[field], "field \(field), step \(step)") }
            }
        }
        let literal: FieldMap<String> = [4: "four", 1: "one"]
        XCTAssertEqual(literal[4], "four")
        XCTAssertEqual(literal[1], "one")
        XCTAssertNil(literal[0])
    }

    /// The list of added members (the first held inline) keeps the order
    /// an array keeps under the same appends and removals.
    func testInlineModelsKeepAnArraysOrder() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "InlineModelsTests"))
        let models = (0..<12).map { BucketListItem(title: "t\($0)", details: "", hasReservation: false, isInPlan: false) }
        for round in 0..<40 {
            var list = InlineModels()
            var reference: [BucketListItem] = []
            for step in 0..<200 {
                if !reference.isEmpty && Int.random(in: 0..<3, using: &random) == 0 {
                    // The first member half the time: the inline one.
                    let position = Bool.random(using: &random) ? 0 : Int.random(in: 0..<reference.count, using: &random)
                    list.remove(at: position)
                    reference.remove(at: position)
                } else {
                    let model = models[Int.random(in: 0..<models.count, using: &random)]
                    list.append(model)
                    reference.append(model)
                }
                XCTAssertEqual(list.count, reference.count, "step \(step), round \(round)")
                XCTAssertEqual(list.isEmpty, reference.isEmpty)
                XCTAssertEqual(list.map(ObjectIdentifier.init), reference.map(ObjectIdentifier.init), "step \(step)")
            }
        }
    }

    /// Members are added and removed at random, each one as the inverse
    /// upkeep does (added only when not a member, removed only when one),
    /// across the size where the edits switch from a scan to a hash set
    /// and back.
    func testToManyDeltaMatchesTheMembersAddedAndRemoved() {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "ToManyDeltaTests"))
        let models = (0..<40).map { i -> BucketListItem in
            let model = BucketListItem(title: "t\(i)", details: "", hasReservation: false, isInPlan: false)
            // The first 30 are stored rows; the rest were never saved.
            model._strataState.rowID = i < 30 ? Int64(i + 1) : 0
            return model
        }
        for round in 0..<40 {
            let baseline = Set(0..<(round % 4 == 0 ? 0 : 12))
            var members = baseline
            var delta = ToManyDelta()
            // Rounds differ in how many members they touch: a few (the
            // scan) or many (the set), growing and shrinking.
            let pool = round % 2 == 0 ? 6 : 40
            for step in 0..<300 {
                let index = Int.random(in: 0..<pool, using: &random)
                if members.contains(index) {
                    delta.remove(models[index])
                    members.remove(index)
                } else {
                    delta.add(models[index])
                    members.insert(index)
                }
                let added = members.subtracting(baseline)
                let removed = baseline.subtracting(members)
                XCTAssertEqual(
                    Set(delta.added.map(ObjectIdentifier.init)), Set(added.map { ObjectIdentifier(models[$0]) }),
                    "step \(step), round \(round)")
                XCTAssertEqual(delta.added.count, added.count, "no member is listed twice")
                for index in 0..<pool {
                    XCTAssertEqual(delta.removes(models[index]), removed.contains(index), "member \(index)")
                }
                XCTAssertEqual(delta.removedRows, Set(removed.map { Int64($0 + 1) }))
            }
        }
    }
}
