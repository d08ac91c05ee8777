import Foundation
import XCTest

@testable import Strata

/// A changed model whose change touches no key writes only its changed
/// fields (`_RecordWriter.only`) and lays them over the stored record
/// (`SaveTransaction.patch`), instead of encoding the whole model and
/// comparing it back (`SaveTransaction.overlayChanges`). Both ways must give
/// the same record and the same changed fields, whatever the stored record
/// holds: every attribute type, nil values, fields a record written before
/// an attribute existed lacks, and fields a later version added.
final class PatchedRecordTests: XCTestCase {
    func testAPatchGivesTheOverlaysRecordAndChanges() throws {
        let entity = try XCTUnwrap(Schema([Everything.self]).entity(forType: Everything.self))
        let count = entity.properties.count
        var random = SystemRandomNumberGenerator()
        var patchedBuffer: [UInt8] = [9, 9, 9]  // reused, as the save reuses it
        var tried = (changed: 0, unchanged: 0, lacking: 0, unknown: 0)
        for round in 0..<600 {
            let seed = Int.random(in: 0..<1_000, using: &random)
            let stored = Everything(seed: seed)
            // A third are the stored values again, but for some nils.
            let fresh = Everything(seed: round % 3 == 0 ? seed : Int.random(in: 0..<1_000, using: &random))
            for model in [stored, fresh] where Int.random(in: 0..<4, using: &random) == 0 {
                model.optionalInt = nil
                model.optionalString = nil
                model.optionalAddress = nil
            }
            // The stored record: whole, or lacking some fields (written
            // before they existed), and sometimes with a field past the
            // entity's (written by a later version).
            var storedWriter = _RecordWriter()
            if round % 4 == 1 {
                storedWriter.only = _FieldSet((0..<count).filter { _ in Int.random(in: 0..<4, using: &random) != 0 })
                tried.lacking += 1
            }
            stored._strataWrite(to: &storedWriter)
            if round % 5 == 2 {
                // A length-delimited value: its length, then its bytes.
                [UInt8]([2, 7, 7]).withUnsafeBytes {
                    storedWriter.appendCopy(field: count + 3, wire: RecordFormat.lengthDelimited, value: $0)
                }
                tried.unknown += 1
            }
            let storedBytes = storedWriter.bytes

            let fields = _FieldSet((0..<count).filter { _ in Int.random(in: 0..<6, using: &random) == 0 })
            var whole = _RecordWriter()
            fresh._strataWrite(to: &whole)
            var partial = _RecordWriter()
            partial.only = fields
            fresh._strataWrite(to: &partial)
            XCTAssertLessThanOrEqual(partial.bytes.count, whole.bytes.count)

            let expected = try SaveTransaction.overlayChanges(storedBytes, whole.bytes, fields: fields, entity, row: 1)
            let changed = try SaveTransaction.patch(
                storedBytes, with: partial.bytes, fields: fields, entity, row: 1, into: &patchedBuffer)
            XCTAssertEqual(patchedBuffer, expected.bytes, "round \(round), fields \(fields)")
            XCTAssertEqual(changed, expected.changed, "round \(round), fields \(fields)")
            if changed.isEmpty { tried.unchanged += 1 } else { tried.changed += 1 }
        }
        // Each case came up.
        XCTAssertGreaterThan(tried.changed, 50)
        XCTAssertGreaterThan(tried.unchanged, 10)
        XCTAssertGreaterThan(tried.lacking, 50)
        XCTAssertGreaterThan(tried.unknown, 50)
    }

    /// A change of one field (the usual save of a setter) takes a path of
    /// its own (`patchOne`): the same record and changes as the overlay's,
    /// for every field alone, whatever the stored record holds or lacks.
    func testAOneFieldPatchGivesTheOverlaysRecordAndChanges() throws {
        let entity = try XCTUnwrap(Schema([Everything.self]).entity(forType: Everything.self))
        let count = entity.properties.count
        var random = SystemRandomNumberGenerator()
        var buffer: [UInt8] = []
        var tried = (changed: 0, unchanged: 0, absent: 0)
        for round in 0..<400 {
            let field = round % count
            XCTAssertEqual(_FieldSet([field]).onlyField, field < 64 ? field : nil)
            let seed = Int.random(in: 0..<1_000, using: &random)
            let stored = Everything(seed: seed)
            let fresh = Everything(seed: round % 3 == 0 ? seed : Int.random(in: 0..<1_000, using: &random))
            if round % 4 == 0 { fresh.optionalString = nil }
            var storedWriter = _RecordWriter()
            if round % 5 == 1 {
                // Written before some fields existed: this one among them.
                storedWriter.only = _FieldSet((0..<count).filter { $0 != field && $0 % 2 == round % 2 })
                tried.absent += 1
            }
            stored._strataWrite(to: &storedWriter)
            let fields = _FieldSet([field])
            var whole = _RecordWriter()
            fresh._strataWrite(to: &whole)
            var partial = _RecordWriter()
            partial.only = fields
            fresh._strataWrite(to: &partial)
            let expected = try SaveTransaction.overlayChanges(storedWriter.bytes, whole.bytes, fields: fields, entity, row: 1)
            let changed = try SaveTransaction.patch(
                storedWriter.bytes, with: partial.bytes, fields: fields, entity, row: 1, into: &buffer)
            XCTAssertEqual(buffer, expected.bytes, "round \(round), field \(field)")
            XCTAssertEqual(changed, expected.changed, "round \(round), field \(field)")
            if changed.isEmpty { tried.unchanged += 1 } else { tried.changed += 1 }
        }
        XCTAssertGreaterThan(tried.changed, 100)
        XCTAssertGreaterThan(tried.unchanged, 30)
        XCTAssertNil(_FieldSet([1, 2]).onlyField)
        XCTAssertNil(_FieldSet().onlyField)
        XCTAssertNil(_FieldSet([70]).onlyField)
    }

    /// Damaged stored bytes throw, never trap, whichever way is taken.
    func testAPatchOfADamagedRecordThrows() throws {
        let entity = try XCTUnwrap(Schema([Everything.self]).entity(forType: Everything.self))
        var writer = _RecordWriter()
        Everything(seed: 5)._strataWrite(to: &writer)
        let good = writer.bytes
        var partial = _RecordWriter()
        partial.only = _FieldSet([14])
        Everything(seed: 6)._strataWrite(to: &partial)
        var buffer: [UInt8] = []
        var threw = 0
        for cut in stride(from: 1, to: good.count, by: 3) {
            for damage in [UInt8(0xFF), 0x07, 0x80] {
                var bad = Array(good.prefix(cut))
                bad.append(damage)
                do {
                    _ = try SaveTransaction.patch(
                        bad, with: partial.bytes, fields: _FieldSet([14]), entity, row: 1, into: &buffer)
                } catch let error as SwiftDataError {
                    XCTAssertEqual(error.code, .corruptRecord)
                    threw += 1
                }
            }
        }
        XCTAssertGreaterThan(threw, 0)
        XCTAssertThrowsError(
            try SaveTransaction.patch([7, 1], with: partial.bytes, fields: _FieldSet([14]), entity, row: 1, into: &buffer))
    }
}
