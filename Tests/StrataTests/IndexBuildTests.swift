import Foundation
import StrataEngine
import XCTest

@testable import Strata

enum IndexBuildV1 {
    @Model final class Reading {
        var count: Int
        var small: Int8
        var code: UInt
        var ratio: Double
        var weight: Float
        var when: Date
        var flag: Bool
        var maybe: Int?
        var name: String
        var tag: String?
        var serial: Int
        var label: String

        init(_ i: Int, label: String? = nil) {
            count = (i * 7_919) % 2_001 - 1_000
            small = Int8(truncatingIfNeeded: i * 31)
            code = UInt(i % 5) << 60 | UInt(i % 97)
            let ratios: [Double] = [-0.0, 0.0, -1.5, .infinity, -.infinity, .nan, 1e-300, -1e300]
            ratio = i % 11 < ratios.count ? ratios[i % 11] : Double(i % 1_000) / 7 - 60
            weight = Float(i % 300) / 3 - 50
            when = Date(timeIntervalSinceReferenceDate: Double((i * 104_729) % 100_000) - 50_000)
            flag = i % 4 == 0
            maybe = i % 3 == 0 ? nil : i % 50
            // Long shared prefixes: keys tie on their first 16 bytes.
            let names = [
                "a name that is longer than sixteen bytes \(i % 40)", "short \(i % 9)", "zero\u{0}byte \(i % 3)",
                "cafe\u{301} \(i % 5)", "café \(i % 5)", "",
            ]
            name = names[i % names.count]
            tag = i % 5 == 0 ? nil : "tag \(i % 13)"
            serial = 1_000_000 - i * 3
            self.label = label ?? "a label that is longer than sixteen bytes, number \(i)"
        }
    }
}

enum IndexBuildV2 {
    @Model final class Reading {
        #Index<Reading>(
            [\.count], [\.small], [\.code], [\.ratio], [\.weight], [\.when], [\.flag], [\.maybe], [\.name], [\.tag],
            [\.flag, \.name], [\.maybe, \.count])
        var count: Int
        var small: Int8
        var code: UInt
        var ratio: Double
        var weight: Float
        var when: Date
        var flag: Bool
        var maybe: Int?
        var name: String
        var tag: String?
        @Attribute(.unique) var serial: Int
        @Attribute(.unique) var label: String

        init(count: Int) {
            self.count = count
            small = 0
            code = 0
            ratio = 0
            weight = 0
            when = .now
            flag = false
            name = ""
            serial = 0
            label = ""
        }
    }
}

/// Indexes and unique constraints a migration adds: built from one scan,
/// sorted by radix (`RadixSort`), put in key order. Every kind of value
/// a key holds, values that tie on their first 16 bytes, and collisions.
final class IndexBuildTests: StoreTestCase {
    func open(_ type: any PersistentModel.Type) throws -> ModelContainer {
        try track(ModelContainer(for: Schema([type]), configurations: [ModelConfiguration(url: storeURL())]))
    }

    func makeV1(_ count: Int, label: (Int) -> String? = { _ in nil }) throws {
        let container = try open(IndexBuildV1.Reading.self)
        let context = ModelContext(container)
        for i in 0..<count { context.insert(IndexBuildV1.Reading(i, label: label(i))) }
        try context.save()
        container.store.close()
    }

    func testAddedIndexesOfEveryKindHoldExactlyTheKeysOfTheRecords() throws {
        let rows = 3_000
        try makeV1(rows)
        let container = try open(IndexBuildV2.Reading.self)
        XCTAssertEqual(try container.checkIntegrity(), [])

        // The keys each group's builder hands out are the index tree's
        // keys, in the tree's order: the sort is the key order.
        guard let entity = container.schema.entity(forType: IndexBuildV2.Reading.self) else {
            return XCTFail("no entity")
        }
        XCTAssertEqual(entity.keyGroups.count, 14)
        try container.store.database.read { tx in
            let records = try tx.scan(try tx.tree(entity.recordTree))
            for group in entity.keyGroups {
                // A row count from a damaged catalog reserves no more than
                // a bounded buffer (Int.max would trap).
                for rows in [Int.max, -1] { XCTAssertEqual(IndexKeys(group, rows: rows).count, 0) }
                var keys = IndexKeys(group, rows: records.count)
                for (key, value) in records {
                    let row = try RowKey.decode(key)
                    try value.withUnsafeBytes { bytes in
                        var reader = try _RecordReader(borrowing: bytes, entity: entity, row: row)
                        try keys.add(&reader, row: row)
                    }
                }
                keys.sort()
                var built: [[UInt8]] = []
                try keys.forEachBatch(1_000) { batch, first in
                    XCTAssertEqual(first, built.count)
                    for i in 0..<batch.count { built.append(batch[i]) }
                }
                let stored = try tx.scan(try tx.tree(group.treeName)).map(\.key)
                XCTAssertEqual(built.count, rows, "\(group)")
                XCTAssertEqual(built, stored, "\(group): the built keys are the tree's, in order")
            }
        }

        // Queries through the new indexes agree with the models.
        let context = ModelContext(container)
        let all = try context.fetch(FetchDescriptor<IndexBuildV2.Reading>())
        let byName = try context.fetch(FetchDescriptor<IndexBuildV2.Reading>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(byName.map(\.name), all.map(\.name).sorted())
        let byCount = try context.fetch(FetchDescriptor<IndexBuildV2.Reading>(sortBy: [SortDescriptor(\.count)]))
        XCTAssertEqual(byCount.map(\.count), all.map(\.count).sorted())
        XCTAssertEqual(
            try context.fetchCount(FetchDescriptor<IndexBuildV2.Reading>(predicate: #Predicate { $0.maybe == nil })),
            all.filter { $0.maybe == nil }.count)
    }

    func testUniqueStringsThatTieOnTheirFirstSixteenBytesCollideOnlyWhenEqual() throws {
        // Rows 10 and 20 share a label, and so do 11 and 21; every label
        // shares its first 40 bytes with every other.
        try makeV1(30) { i in
            i == 20 || i == 21 ? "a label that is longer than sixteen bytes, number \(i - 10)" : nil
        }
        XCTAssertThrowsError(try open(IndexBuildV2.Reading.self)) { error in
            XCTAssertEqual(error as? SwiftDataError, .uniqueConstraintViolation)
            let message = (error as? SwiftDataError)?.message ?? ""
            XCTAssertTrue(message.contains("2 collision(s)"), message)
            XCTAssertTrue(
                message.contains("rows 11 and 21 share (\"a label that is longer than sixteen bytes, number 10\")"), message)
            XCTAssertTrue(message.contains("rows 12 and 22 share"), message)
        }
    }

    func testAMigrationMeetingAValueTooLongForTheNewIndexIsRefusedAndLeavesTheStore() throws {
        try makeV1(30) { i in i == 5 ? String(repeating: "l", count: 2_000) : nil }
        XCTAssertThrowsError(try open(IndexBuildV2.Reading.self)) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure, "\(error)")
            let message = (error as? SwiftDataError)?.message ?? ""
            XCTAssertTrue(message.contains("Reading/p6: the values of its unique (label)"), message)
        }
        let container = try open(IndexBuildV1.Reading.self)
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<IndexBuildV1.Reading>()), 30)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testRadixSortIsAStableSortByBothWords() {
        var generator = SeededRandom(seed: 27)
        // Sizes around the insertion-sort and cache thresholds, and
        // distributions with constant, few and many distinct bytes.
        let sizes = [0, 1, 2, 24, 25, 1_000, RadixSort.cacheEntries + 1, 200_000]
        let shapes: [(inout SeededRandom) -> (UInt64, UInt64)] = [
            { g in (g.next(), g.next()) },
            { g in (0x30 << 56 | g.next() % 7, 0) },
            { g in (42, g.next() % 300 << 56) },
            { g in (g.next() % 3 << 40, g.next() % 2) },
            { _ in (5, 5) },
        ]
        for size in sizes {
            for (shapeIndex, shape) in shapes.enumerated() {
                var entries = (0..<size).map { i -> RadixSort.Entry in
                    let (high, low) = shape(&generator)
                    return RadixSort.Entry(high: high, low: low, payload: Int64(i))
                }
                let expected = entries.sorted { a, b in
                    (a.high, a.low, a.payload) < (b.high, b.low, b.payload)
                }
                RadixSort.sort(&entries)
                XCTAssertTrue(
                    entries.map(\.payload) == expected.map(\.payload), "size \(size), shape \(shapeIndex)")
            }
        }
    }
}
