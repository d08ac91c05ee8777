import XCTest

@testable import Strata

/// `_FieldSet` against a `Set<Int>` under random inserts and removes of
/// fields below and above 64 (the inline word and the array of words).
final class FieldSetTests: XCTestCase {
    func testInsertAndRemoveMatchASet() {
        var generator = SystemRandomNumberGenerator()
        var set = _FieldSet()
        var model = Set<Int>()
        var removedAbove64 = 0
        for _ in 0..<5_000 {
            let field = Int.random(in: -2..<200, using: &generator)
            if Bool.random(using: &generator) {
                set.insert(field)
                if field >= 0 { model.insert(field) }
            } else {
                if field >= 64, model.contains(field) { removedAbove64 += 1 }
                set.remove(field)
                model.remove(field)
            }
            XCTAssertEqual(set.fields, model.sorted())
            XCTAssertEqual(set.isEmpty, model.isEmpty)
        }
        XCTAssertGreaterThan(removedAbove64, 0, "no field past the inline word was removed")
        for field in model { set.remove(field) }
        XCTAssertTrue(set.isEmpty)
        set.remove(300)
        XCTAssertTrue(set.isEmpty)
    }
}
