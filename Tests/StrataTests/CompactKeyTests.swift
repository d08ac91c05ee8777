import Foundation
import StrataEngine
import XCTest

@testable import Strata

/// Compact keys (format 2): integers in their significant bytes, an index
/// key's row read from its end, a unique entry's row in its significant
/// bytes, and the rewrite of a store of format 1 at its first writable open.
final class CompactKeyTests: StoreTestCase {
    static let rows: [Int64] = [
        0, 1, 2, 127, 128, 255, 256, 65_535, 65_536, 1 << 24, (1 << 32) - 1, 1 << 40, 1 << 56, .max - 1, .max, -1, -255,
        -256, -257, -65_536, 1 - (1 << 56), .min + 1, .min,
    ]

    func testAnIndexKeyEndsWithItsRowWhateverItsValues() throws {
        let valueTuples: [[KeyEncoding.Element]] = [
            [], [.null], [.int(0)], [.int(-7)], [.uint(.max)], [.string("")], [.string("a\u{0}b")], [.bytes([0, 9, 9])],
            [.double(-0.0), .bool(true)], [.int(9), .int(9)],
        ]
        for values in valueTuples {
            for row in Self.rows {
                var key = KeyEncoding.encode(values)
                KeyGroup.appendRow(row, to: &key)
                XCTAssertEqual(key.count, KeyEncoding.encode(values).count + KeyGroup.rowSuffixLength(row))
                try key.withUnsafeBytes { raw in
                    XCTAssertEqual(KeyGroup.row(inIndexKey: raw), row, "\(values) row \(row)")
                    XCTAssertEqual(try KeyEncoding.decode(Array(KeyGroup.values(inIndexKey: raw))), values)
                }
            }
        }
        // Rows of one value sort by row; any row of a smaller value first.
        let sortedRows = Self.rows.sorted()
        let keys = sortedRows.map { row in
            var key = KeyEncoding.encode([.int(5)])
            KeyGroup.appendRow(row, to: &key)
            return key
        }
        XCTAssertEqual(keys, keys.sorted { $0.lexicographicallyPrecedes($1) })
        var smaller = KeyEncoding.encode([.int(4)])
        KeyGroup.appendRow(.max, to: &smaller)
        XCTAssertTrue(smaller.lexicographicallyPrecedes(keys[0]))
        // A key too short for its last byte's length has no row.
        for bad: [UInt8] in [[], [0x05], [0x89, 0x05, 0x09], [0x89, 0x05, 0x00], [0x40, 0x41, 0x00, 0x02]] {
            bad.withUnsafeBytes { XCTAssertNil(KeyGroup.row(inIndexKey: $0), "\(bad)") }
        }
    }

    func testAUniqueEntryHoldsItsRowInItsSignificantBytes() throws {
        for row in Self.rows {
            let value = KeyGroup.uniqueValue(row)
            XCTAssertEqual(value.count, max(1, (64 - UInt64(bitPattern: row).leadingZeroBitCount + 7) / 8))
            XCTAssertEqual(try KeyGroup.row(inUniqueValue: value), row)
            // Format 1's 8 bytes read the same.
            XCTAssertEqual(try KeyGroup.row(inUniqueValue: RowKey.encode(row)), row)
        }
        XCTAssertThrowsError(try KeyGroup.row(inUniqueValue: []))
        XCTAssertThrowsError(try KeyGroup.row(inUniqueValue: [UInt8](repeating: 1, count: 9)))
    }

    /// Format 1's encoding of `elements`: integers as a code (0x20, 0x21)
    /// and 8 bytes.
    func legacy(_ elements: [KeyEncoding.Element]) -> [UInt8] {
        elements.flatMap { element -> [UInt8] in
            switch element {
            case .int(let value):
                return [0x20] + withUnsafeBytes(of: (UInt64(bitPattern: value) ^ (1 << 63)).bigEndian) { Array($0) }
            case .uint(let value): return [0x21] + withUnsafeBytes(of: value.bigEndian) { Array($0) }
            default: return KeyEncoding.encode([element])
            }
        }
    }

    /// Rewrites the key trees of the store at `url` into format 1 and drops
    /// the catalog's record of the format, as an earlier Strata left it.
    func downgradeKeys(of container: ModelContainer) throws {
        try container.store.write { tx in
            for name in try tx.treeNames() where name.hasPrefix("i.") || name.hasPrefix("u.") {
                let tree = try tx.tree(name)
                let entries = try tx.scan(tree)
                try tx.clear(tree)
                for entry in entries {
                    if name.hasPrefix("u.") {
                        let row = try KeyGroup.row(inUniqueValue: entry.value)
                        try tx.put(legacy(KeyEncoding.decode(entry.key)), RowKey.encode(row), in: tree)
                    } else {
                        let (values, row) = try entry.key.withUnsafeBytes { raw in
                            (
                                try KeyEncoding.decode(Array(KeyGroup.values(inIndexKey: raw))),
                                try XCTUnwrap(KeyGroup.row(inIndexKey: raw))
                            )
                        }
                        try tx.put(legacy(values + [.int(row)]), [], in: tree)
                    }
                }
            }
            XCTAssertTrue(try tx.delete(KeyFormat.catalogKey, in: tx.tree(StoredSchema.tree)))
        }
    }

    func testAStoreOfTheFixedFormatIsRewrittenAtItsFirstWritableOpen() throws {
        let url = storeURL()
        let first = try container(for: [Member.self, Tag.self])
        let context = ModelContext(first)
        for i in 0..<600 {
            let number = i % 3 == 0 ? -i * 1_000_003 : i * 70_001
            let member = Member(
                email: "m\(i)@x", team: "team \(i % 7)", number: number, nickname: i % 4 == 0 ? nil : "n\(i % 50)",
                status: Status.allCases[i % Status.allCases.count])
            context.insert(member)
            context.insert(Tag(name: "tag \(i)", uses: i))
        }
        try context.save()
        try downgradeKeys(of: first)
        first.store.close()

        // Read-only, the old keys cannot be rewritten: a clear error.
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema([Member.self, Tag.self]), configurations: [ModelConfiguration(url: url, allowsSave: false)])
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .loadIssueModelContainer, "\(error)")
            XCTAssertTrue("\(error)".contains("open it writable once"), "\(error)")
        }

        let second = try track(
            ModelContainer(for: Schema([Member.self, Tag.self]), configurations: [ModelConfiguration(url: url)]))
        XCTAssertEqual(try second.checkIntegrity(), [])
        try second.store.database.read { tx in
            XCTAssertEqual(try tx.get(KeyFormat.catalogKey, in: tx.tree(StoredSchema.tree)), KeyFormat.current)
        }
        let fresh = ModelContext(second)
        let negative = -3 * 1_000_003
        let team = try fresh.fetch(
            FetchDescriptor<Member>(
                predicate: #Predicate { $0.team == "team 2" && $0.number < 0 }, sortBy: [SortDescriptor(\.number)]))
        let expected = (0..<600).filter { $0 % 7 == 2 && $0 % 3 == 0 && $0 > 0 }.map { -$0 * 1_000_003 }.sorted()
        XCTAssertEqual(team.map(\.number), expected)
        XCTAssertEqual(
            try fresh.fetch(FetchDescriptor<Member>(predicate: #Predicate { $0.number == negative })).map(\.email), ["m3@x"])
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Member>(predicate: #Predicate { $0.nickname == "n7" })), 12)
        XCTAssertEqual(try fresh.fetch(FetchDescriptor<Tag>(predicate: #Predicate { $0.name == "tag 599" })).map(\.uses), [599])
        // Saves go on in the new format: an upsert finds the rewritten entry.
        fresh.insert(Tag(name: "tag 5", uses: -5))
        try fresh.save()
        XCTAssertEqual(
            try ModelContext(second).fetch(FetchDescriptor<Tag>(predicate: #Predicate { $0.name == "tag 5" })).map(\.uses), [-5])
        XCTAssertEqual(try ModelContext(second).fetchCount(FetchDescriptor<Tag>()), 600)
        XCTAssertEqual(try second.checkIntegrity(), [])
    }

    func testAStoreOfALaterKeyFormatIsRefusedNotRewritten() throws {
        let url = storeURL()
        let first = try container(for: [Member.self, Tag.self])
        let context = ModelContext(first)
        context.insert(Tag(name: "kept", uses: 1))
        try context.save()
        try first.store.write { tx in try tx.put(KeyFormat.catalogKey, Array("3".utf8), in: tx.tree(StoredSchema.tree)) }
        first.store.close()
        skipIntegrityCheck(of: first, because: "the store records a key format this version does not read")
        XCTAssertThrowsError(
            try ModelContainer(for: Schema([Member.self, Tag.self]), configurations: [ModelConfiguration(url: url)])
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .loadIssueModelContainer, "\(error)")
            XCTAssertTrue("\(error)".contains("format 3, written by a later Strata"), "\(error)")
        }
    }

    func testAnIndexEntryAtTheOldLimitWithALongRowStopsTheRewriteWithAClearError() throws {
        let url = storeURL()
        let first = try container(for: [Member.self, Tag.self])
        let context = ModelContext(first)
        context.insert(Member(email: "a@x", team: "t", number: 1, nickname: "short"))
        try context.save()
        try downgradeKeys(of: first)
        // Format 1 allowed 951 bytes of values before its 9-byte row; a
        // row of 8 significant bytes needs 10 now.
        try first.store.write { tx in
            let long = legacy([.string(String(repeating: "x", count: 949)), .int(1 << 56)])
            XCTAssertEqual(long.count, Database.maxKeyLength)
            try tx.put(long, [], in: tx.tree("i.Member.nickname"))
        }
        first.store.close()
        skipIntegrityCheck(of: first, because: "an index entry is added around the model layer, as checked here")
        XCTAssertThrowsError(
            try ModelContainer(for: Schema([Member.self, Tag.self]), configurations: [ModelConfiguration(url: url)])
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .loadIssueModelContainer, "\(error)")
            XCTAssertTrue("\(error)".contains("i.Member.nickname: an entry's values take 951 bytes"), "\(error)")
        }
    }
}
