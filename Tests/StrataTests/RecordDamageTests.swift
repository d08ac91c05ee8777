import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// Record decoding under damage: valid records of every attribute type and
/// of related models are mutated at random (bit flips, truncation, inserted
/// and overwritten bytes, spliced fields) and read back through `fetch`.
/// Each read must either succeed or throw `corruptRecord`; a trap fails
/// the whole test run. Seed printed; replay with `STRATA_SEED`.
final class RecordDamageTests: StoreTestCase {
    func testDamagedRecordsReadOrThrowCorruptRecord() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "RecordDamageTests"))
        let rounds = Int(environmentValue("STRATA_DAMAGE_ROUNDS") ?? "") ?? 3_000
        let container = try track(
            ModelContainer(
                for: Everything.self, Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
        do {
            let context = ModelContext(container)
            for seed in 0..<6 { context.insert(Everything(seed: seed)) }
            let trip = Trip(name: "Lisbon", destination: "Portugal")
            trip.bucketList = [BucketListItem(title: "Tram 28", details: "", hasReservation: false, isInPlan: true)]
            trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
            context.insert(trip)
            try context.save()
        }
        let database = container.store.database
        let entities = ["Everything", "Trip", "BucketListItem"]
        var originals: [(tree: String, key: [UInt8], value: [UInt8])] = []
        try database.read { tx in
            for entity in entities {
                let tree = try XCTUnwrap(tx.treeIfPresent(Store.treeName(entityName: entity)))
                for (key, value) in try tx.scan(tree) { originals.append((Store.treeName(entityName: entity), key, value)) }
            }
        }

        var outcomes = (read: 0, corrupt: 0)
        for _ in 0..<rounds {
            let target = originals[Int.random(in: 0..<originals.count, using: &random)]
            let donor = originals[Int.random(in: 0..<originals.count, using: &random)].value
            let damaged = Self.damage(target.value, donor: donor, using: &random)
            try database.write { tx in try tx.put(target.key, damaged, in: tx.tree(target.tree)) }
            do {
                try readEverything(in: ModelContext(container))
                outcomes.read += 1
            } catch let error as SwiftDataError where error.code == .corruptRecord {
                outcomes.corrupt += 1
            }
            try database.write { tx in try tx.put(target.key, target.value, in: tx.tree(target.tree)) }
        }
        print("RecordDamageTests: \(rounds) damaged records, \(outcomes.read) still read, \(outcomes.corrupt) corruptRecord")
        XCTAssertGreaterThan(outcomes.corrupt, rounds / 10, "most damage should be detected")
        // The originals are back: everything reads again.
        try readEverything(in: ModelContext(container))
    }

    /// A save of a changed model walks its stored record to keep the
    /// fields it did not change. A stored record whose fields are out of
    /// order fails the save with `corruptRecord`: the store keeps the
    /// record as it was, and the context keeps the change.
    func testASaveOverAStoredRecordWithFieldsOutOfOrderThrows() throws {
        let container = try track(
            ModelContainer(for: Schema([Memo.self]), configurations: [ModelConfiguration(url: storeURL())]))
        let context = ModelContext(container)
        let memo = Memo(title: "t", body: "b", priority: 1, due: Date(timeIntervalSinceReferenceDate: 9))
        context.insert(memo)
        try context.save()
        let entity = try XCTUnwrap(container.schema.entity(forType: Memo.self))
        let row = memo._strataState.rowID
        let key = RowKey.encode(row)
        let tree = Store.treeName(entityName: "Memo")
        let database = container.store.database
        let stored = try XCTUnwrap(database.read { tx in try tx.get(key, in: tx.tree(tree)) })
        let damaged = try stored.withUnsafeBytes { raw in
            var reader = try _RecordReader(borrowing: raw, entity: entity, row: row)
            var writer = _RecordWriter()
            for field in try reader.fields().reversed() {
                writer.appendCopy(
                    field: field.field, wire: field.slot.wire,
                    value: UnsafeRawBufferPointer(rebasing: raw[field.valueStart..<field.slot.end]))
            }
            return writer.bytes
        }
        try database.write { tx in try tx.put(key, damaged, in: tx.tree(tree)) }

        memo.body = "changed"
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .corruptRecord, "\(error)")
        }
        XCTAssertEqual(try database.read { tx in try tx.get(key, in: tx.tree(tree)) }, damaged)
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(memo.body, "changed")
        // With the record mended, the same change saves.
        try database.write { tx in try tx.put(key, stored, in: tx.tree(tree)) }
        try context.save()
        let saved = try ModelContext(container).fetch(FetchDescriptor<Memo>())
        XCTAssertEqual(saved.map(\.body), ["changed"])
        XCTAssertEqual(saved.map(\.title), ["t"])
    }

    /// The reader skips the fields before the one it looks for from their
    /// first bytes (`simpleField(at:)`), and falls back to the checked walk for
    /// anything unusual. Over valid records with every wire type, field
    /// numbers past 15 (two-byte tags), lengths past 127 and ten-byte
    /// varints, and over damaged copies of them, every lookup (in order,
    /// and out of order from a moved position) must give what the checked
    /// walk gives: the same slot, the same nil, or an error where it throws
    /// (and so must `findInOrder`, the initializers' lookup); a varint's
    /// short decode must give what the general reader gives.
    func testFastFieldSkipAgreesWithTheCheckedWalk() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "FastFieldSkip"))
        let entity = Schema.Entity(Everything.self)
        var records: [[UInt8]] = []
        for _ in 0..<400 {
            var writer = _RecordWriter()
            var field = 0
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                field += Int.random(in: 1...(Bool.random(using: &random) ? 3 : 12), using: &random)
                switch Int.random(in: 0..<5, using: &random) {
                case 0:
                    writer.tag(field, RecordFormat.varint)
                    // Every varint length, one to ten bytes.
                    let bits = UInt64(Int.random(in: 0...64, using: &random))
                    let value: UInt64 = bits == 64 ? random.next() : random.next() & ((1 << bits) - 1)
                    writer.appendVarint(Bool.random(using: &random) ? value : [0, 127, 128, UInt64.max][Int(bits) % 4])
                case 1:
                    writer.tag(field, RecordFormat.fixed64)
                    writer.appendFixed64(random.next())
                case 2:
                    writer.tag(field, RecordFormat.fixed32)
                    writer.appendFixed32(UInt32(truncatingIfNeeded: random.next()))
                case 3:
                    writer.null(field)
                default:
                    writer.tag(field, RecordFormat.lengthDelimited)
                    let length = [0, 1, 5, 127, 128, 300][Int.random(in: 0..<6, using: &random)]
                    writer.appendLengthDelimited((0..<length).map { UInt8(truncatingIfNeeded: $0) })
                }
            }
            records.append(writer.bytes)
        }
        var compared = 0
        var agreedOnErrors = 0
        for round in 0..<4_000 {
            let original = records[round % records.count]
            let bytes =
                round < records.count
                ? original
                : Self.damage(original, donor: records[Int.random(in: 0..<records.count, using: &random)], using: &random)
            guard bytes.first == RecordFormat.version else { continue }
            try bytes.withUnsafeBytes { raw in
                var fast = try _RecordReader(borrowing: raw, entity: entity, row: 1)
                var inOrder = try _RecordReader(borrowing: raw, entity: entity, row: 1)
                var checked = try _RecordReader(borrowing: raw, entity: entity, row: 1)
                // Ascending lookups, then a few out of order.
                let fields = Array(1...40) + (0..<6).map { _ in Int.random(in: 1...40, using: &random) }
                for field in fields {
                    let a = Result { try fast.find(field) }
                    let c = Result { try inOrder.findInOrder(field) }
                    let b = Result { try checked.find(field, skipping: false) }
                    switch (a, b) {
                    case (.success(let x), .success(let y)):
                        XCTAssertEqual(
                            x.map { [Int($0.wire), $0.start, $0.end] }, y.map { [Int($0.wire), $0.start, $0.end] },
                            "field \(field) of \(bytes)")
                        XCTAssertEqual(
                            (try? c.get()).flatMap { $0 }.map { [Int($0.wire), $0.start, $0.end] },
                            y.map { [Int($0.wire), $0.start, $0.end] }, "in order: field \(field) of \(bytes)")
                        XCTAssertEqual(fast.position, checked.position)
                        XCTAssertEqual(inOrder.position, checked.position)
                        // A varint's payload: the short decode against the
                        // general reader.
                        if let slot = y, slot.wire == RecordFormat.varint {
                            var index = slot.start
                            let expected = Result { try checked.varint(at: &index, limit: slot.end, field: field) }
                            let decoded = Result { try fast.payloadVarint(slot, field: field) }
                            XCTAssertEqual(try? decoded.get(), try? expected.get(), "varint of field \(field) of \(bytes)")
                            XCTAssertEqual((try? decoded.get()) == nil, (try? expected.get()) == nil)
                        }
                    case (.failure, .failure):
                        agreedOnErrors += 1
                        return
                    default:
                        XCTFail("field \(field) of \(bytes): fast \(a), checked \(b)")
                        return
                    }
                    compared += 1
                }
            }
        }
        XCTAssertGreaterThan(compared, 50_000)
        XCTAssertGreaterThan(agreedOnErrors, 100, "damaged records should reach the error paths")
    }

    /// Fetches every model and touches every property, relationships too.
    /// Row ids run from 1 to `Int64.max`. A record tree whose last key is
    /// out of that range (a negative row, which sorts after every positive
    /// one, or row 0) fails the open with corruptRecord naming the entity,
    /// instead of handing out rows at or below 0 that later reads skip.
    func testOutOfRangeLastRowKeyFailsTheOpen() throws {
        for (name, row) in [("negative", Int64(-5)), ("minimum", .min), ("minus-one", -1), ("zero", 0)] {
            let store = name + ".store"
            // Row 0 sorts first: it is the last key only when alone.
            try damageLastRow(store: store, row: row, moving: row == 0)
            XCTAssertThrowsError(try self.container(for: [Everything.self], name: store), name) { error in
                XCTAssertEqual((error as? SwiftDataError)?.code, .corruptRecord, "\(name): \(error)")
                XCTAssertTrue("\(error)".contains("Everything"), "\(name): \(error)")
            }
        }
    }

    /// A last row of `Int64.max` opens (it is a row id; its record reads),
    /// but no row is left to allocate: an insert's save throws
    /// corruptRecord naming the entity and writes nothing, instead of
    /// trapping on the overflow.
    func testExhaustedRowIdsFailTheSaveWithoutTrapping() throws {
        try damageLastRow(store: "max.store", row: .max)
        let container = try self.container(for: [Everything.self], name: "max.store")
        let context = ModelContext(container)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Everything>()), 2)
        let stored = try context.fetch(FetchDescriptor<Everything>()).map(\.persistentModelID.rowID)
        XCTAssertEqual(stored, [1, .max])
        context.insert(Everything(seed: 7))
        context.insert(Everything(seed: 8))
        for _ in 0..<2 {
            XCTAssertThrowsError(try context.save()) { error in
                XCTAssertEqual((error as? SwiftDataError)?.code, .corruptRecord, "\(error)")
                XCTAssertTrue("\(error)".contains("Everything"), "\(error)")
            }
        }
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Everything>()), 2)
        // Rolled back, the context saves other changes again.
        context.rollback()
        let first = try XCTUnwrap(try context.fetch(FetchDescriptor<Everything>()).first)
        first.int = 99
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Everything>()).map(\.int).first, 99)
    }

    /// Makes store `store` in the test directory with one saved
    /// `Everything` at row 1, and writes a copy of its record under row
    /// key `row` straight into the entity's record tree (`moving`: and
    /// removes row 1).
    private func damageLastRow(store: String, row: Int64, moving: Bool = false) throws {
        let container = try self.container(for: [Everything.self], name: store)
        let context = ModelContext(container)
        context.insert(Everything(seed: 1))
        try context.save()
        let tree = Store.treeName(entityName: "Everything")
        try container.store.database.write { tx in
            let records = try tx.tree(tree)
            let record = try XCTUnwrap(try tx.get(RowKey.encode(1), in: records))
            try tx.put(RowKey.encode(row), record, in: records)
            if moving { try tx.delete(RowKey.encode(1), in: records) }
        }
        if row < 1 { skipIntegrityCheck(of: container, because: "row \(row) is not a row id: the store no longer opens") }
    }

    private func readEverything(in context: ModelContext) throws {
        for model in try context.fetch(FetchDescriptor<Everything>()) {
            _ = (model.string, model.decimal, model.url, model.uuid, model.shape, model.address, model.scores)
            _ = (model.matrix, model.addresses, model.optionalAddress, model.optionalTags, model.status, model.priority)
        }
        for trip in try context.fetch(FetchDescriptor<Trip>()) {
            _ = (trip.name, trip.startDate, trip.bucketList.map(\.title), trip.livingAccommodation?.placeName)
        }
        for item in try context.fetch(FetchDescriptor<BucketListItem>()) { _ = (item.title, item.trip?.name) }
    }

    static func damage(_ bytes: [UInt8], donor: [UInt8], using random: inout SeededRandom) -> [UInt8] {
        var out = bytes
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            let position = out.isEmpty ? 0 : Int.random(in: 0..<out.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0 where !out.isEmpty:
                out[position] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1:
                out.removeSubrange(Int.random(in: 0...out.count, using: &random)...)
            case 2:
                out.insert(UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...out.count, using: &random))
            case 3 where !out.isEmpty:
                out[position] = [0x00, 0x7F, 0x80, 0xFF][Int.random(in: 0..<4, using: &random)]
            case 4 where !donor.isEmpty:
                // Splice a run of another record (valid fields, wrong place).
                let start = Int.random(in: 0..<donor.count, using: &random)
                let run = donor[start..<min(donor.count, start + Int.random(in: 1...24, using: &random))]
                out.replaceSubrange(position..<min(out.count, position + run.count), with: run)
            default:
                // A long varint or length: 0xFF runs.
                out.insert(contentsOf: repeatElement(0xFF, count: Int.random(in: 1...11, using: &random)), at: position)
            }
        }
        return out
    }
}
