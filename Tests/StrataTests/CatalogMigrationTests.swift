import Foundation
import StrataEngine
import XCTest

@testable import Strata

/// Migrations that change only the catalog: renames, attributes added
/// with a default, optional → non-optional with a default and trailing
/// removals leave every record as it was; readers apply the stored
/// defaults. A field number that old records may still hold is never
/// given to a new field without a rewrite, and a default declared
/// differently later does not change what old rows read.
final class CatalogMigrationTests: StoreTestCase {
    func open(_ types: [any PersistentModel.Type], progress: (@Sendable (MigrationProgress) -> Void)? = nil) throws
        -> ModelContainer
    {
        try track(
            ModelContainer(
                for: Schema(types), migrationPlan: nil, configurations: [ModelConfiguration(url: storeURL())],
                migrationProgress: progress))
    }

    /// Rows 0..<count of version 1: price i, count i % 10, legacy nil for
    /// every third row.
    func makeV1(_ count: Int) throws {
        let container = try open([CatalogV1.Item.self])
        let context = ModelContext(container)
        for i in 0..<count {
            context.insert(CatalogV1.Item(name: "item \(i)", price: Double(i), count: i % 10, legacy: i % 3 == 0 ? nil : "l\(i)"))
        }
        try context.save()
        container.store.close()
    }

    /// What `strata check` and `strata dump` find in the store.
    func inspect(_ container: ModelContainer) throws -> (problems: [String], dump: [String]) {
        try container.store.database.read { tx in
            var lines: [String] = []
            try StoreInspector.dump(tx, entity: "Item", json: false) { lines.append($0) }
            return (try StoreInspector.checkRecords(tx), lines)
        }
    }

    /// The updates of models of `type` in the store's history, oldest first.
    func updates<T: PersistentModel>(of type: T.Type, in context: ModelContext) throws -> [DefaultHistoryUpdate<T>] {
        try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).flatMap(\.changes)
            .compactMap { change -> DefaultHistoryUpdate<T>? in
                guard case .update(let update as DefaultHistoryUpdate<T>) = change else { return nil }
                return update
            }
    }

    /// Every record of `e.Item`, as stored.
    func records(_ container: ModelContainer) throws -> [[UInt8]] {
        try container.store.database.read { tx in
            try tx.scan(try tx.tree(TreeName.records("Item"))).map(\.value)
        }
    }

    /// Storage lines from a damaged catalog, cut short: refused, never a
    /// trap (the object fuzzer found `read` with two words after it).
    func testStorageLinesCutShortAreRefused() {
        for line in ["storage items read r.Item.x", "storage items joined j.Item.x", "storage items read"] {
            XCTAssertNil(StoredStorage(line), line)
        }
        XCTAssertEqual(StoredStorage("storage items read from r.Item.items")?.tree, "r.Item.items")
        XCTAssertEqual(StoredStorage("storage items joined in j.Item.items and m.Item.items")?.tree, "j.Item.items")
    }

    func testRenameAddedDefaultNonOptionalAndIndexLeaveRecordsAsTheyWere() throws {
        try makeV1(300)
        let before = try records(try open([CatalogV1.Item.self]))
        let steps = Locked<[MigrationProgress]>([])
        let container = try open([CatalogV2.Item.self]) { progress in steps.withLock { $0.append(progress) } }
        XCTAssertEqual(try records(container), before, "no record was rewritten")
        XCTAssertFalse(steps.withLock { $0 }.contains { $0.step == "rewriting records" })

        let context = ModelContext(container)
        let items = try context.fetch(FetchDescriptor<CatalogV2.Item>(sortBy: [SortDescriptor(\.price)]))
        XCTAssertEqual(items.map(\.title), (0..<300).map { "item \($0)" })
        XCTAssertEqual(Set(items.map(\.discount)), [0.5], "the added attribute reads its default")
        XCTAssertEqual(items[3].legacy, "none", "nil reads as the default of an attribute made non-optional")
        XCTAssertEqual(items[4].legacy, "l4")

        // Predicates, sorting and the new index see the defaults.
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.discount == 0.5 })), 300)
        XCTAssertEqual(
            try context.fetchCount(FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.legacy == "none" })), 100)
        XCTAssertEqual(try inspect(container).problems, [])
        XCTAssertEqual(try inspect(container).dump[3], #"Item p4: title="item 3" price=3.0 count=3 legacy="none" discount=0.5"#)
        let indexed = try container.store.database.read { tx in try tx.count(try tx.tree("i.Item.discount")) }
        XCTAssertEqual(indexed, 300, "the new index holds every row's default")

        // A changed row, and a new one, hold their own values.
        items[7].discount = 2
        context.insert(CatalogV2.Item(title: "new", price: 1000, count: 1, discount: 3))
        try context.save()
        let fresh = ModelContext(container)
        XCTAssertEqual(
            try fresh.fetch(
                FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.discount > 1 }, sortBy: [SortDescriptor(\.price)])
            )
            .map(\.title), ["item 7", "new"])
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.discount == 0.5 })), 299)
        let plan = try fresh.explain(FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.discount > 1 }))
        XCTAssertTrue(plan.contains("i.Item.discount"), plan)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testAChangeToAnotherAttributeIsNotAChangeOfTheDefaultedOne() throws {
        try makeV1(10)
        let container = try open([CatalogV2.Item.self])
        let context = ModelContext(container)
        let item = try XCTUnwrap(context.fetch(FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.price == 4 })).first)
        item.title = "renamed"
        try context.save()
        let updates = try self.updates(of: CatalogV2.Item.self, in: context)
        XCTAssertEqual(updates.count, 1)
        XCTAssertEqual(updates.first?.updatedAttributes, [\CatalogV2.Item.title])
    }

    /// A fetched model given its defaulted attributes' defaults by hand
    /// writes them into its record, which lacked them (or held nil for
    /// the attribute made non-optional): only the attribute whose value
    /// differs is a change. A save finds this in the same walk that takes
    /// the changed fields into the stored record.
    func testSettingDefaultsByHandIsNotAChange() throws {
        try makeV1(10)
        let container = try open([CatalogV2.Item.self])
        let context = ModelContext(container)
        let item = try XCTUnwrap(context.fetch(FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.price == 3 })).first)
        item.discount = 0.5
        item.legacy = "none"
        item.price = 31
        try context.save()
        let updates = try self.updates(of: CatalogV2.Item.self, in: context)
        XCTAssertEqual(updates.count, 1)
        XCTAssertEqual(updates.first?.updatedAttributes, [\CatalogV2.Item.price])
        let stored = try ModelContext(container).fetch(FetchDescriptor<CatalogV2.Item>(predicate: #Predicate { $0.price == 31 }))
        XCTAssertEqual(stored.map(\.title), ["item 3"])
        XCTAssertEqual(stored.map(\.legacy), ["none"])
        XCTAssertEqual(stored.map(\.discount), [0.5])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    /// An insert that a unique constraint turns into an update writes
    /// every field, the defaulted ones included; the stored record lacks
    /// them (or holds nil for the attribute made non-optional). History
    /// lists only the attribute whose value differs.
    func testAnUpsertThatWritesOnlyDefaultsChangesOnlyWhatDiffers() throws {
        try makeV1(10)
        let container = try open([CatalogUnique.Item.self])
        let context = ModelContext(container)
        // Row 3 was stored with legacy nil and no discount: both read as
        // their defaults, which the inserted model holds too.
        context.insert(CatalogUnique.Item(title: "item 3", price: 30, count: 3))
        try context.save()
        let updates = try self.updates(of: CatalogUnique.Item.self, in: context)
        XCTAssertEqual(updates.count, 1, "the insert was upserted into the stored row")
        XCTAssertEqual(updates.first?.updatedAttributes, [\CatalogUnique.Item.price])
        let fresh = ModelContext(container)
        let stored = try fresh.fetch(FetchDescriptor<CatalogUnique.Item>(predicate: #Predicate { $0.title == "item 3" }))
        XCTAssertEqual(stored.map(\.price), [30])
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<CatalogUnique.Item>()), 10)
    }

    func testARemovedTrailingFieldIsNeverReadAsALaterAddedOne() throws {
        try makeV1(30)
        let before: [[UInt8]]
        do {
            let container = try open([CatalogV2.Item.self])
            let context = ModelContext(container)
            context.insert(CatalogV2.Item(title: "explicit", price: 500, count: 2, discount: 9.5))
            try context.save()
            before = try records(container)
            container.store.close()
        }
        // V3 drops `discount`, the last field: the records keep it.
        let v3 = try open([CatalogV3.Item.self])
        XCTAssertEqual(try records(v3), before, "no record was rewritten")
        XCTAssertEqual(try ModelContext(v3).fetchCount(FetchDescriptor<CatalogV3.Item>()), 31)
        XCTAssertEqual(try inspect(v3).problems, [])
        XCTAssertEqual(try inspect(v3).dump.last, #"Item p31: title="explicit" price=500.0 count=2 legacy="none""#)
        v3.store.close()

        // V4 adds `rank` where `discount` was: the old values must not
        // read as ranks.
        let v4 = try open([CatalogV4.Item.self])
        let items = try ModelContext(v4).fetch(FetchDescriptor<CatalogV4.Item>(sortBy: [SortDescriptor(\.price)]))
        XCTAssertEqual(items.count, 31)
        XCTAssertEqual(Set(items.map(\.rank)), [7])
        XCTAssertEqual(items.last?.title, "explicit")
        XCTAssertEqual(try v4.checkIntegrity(), [])
    }

    func testADefaultDeclaredDifferentlyLaterKeepsTheStoredOne() throws {
        try makeV1(20)
        do {
            let container = try open([CatalogV2.Item.self])
            XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<CatalogV2.Item>()).first?.discount, 0.5)
            container.store.close()
        }
        // Same shape, same version hash; the declared default is 0.25.
        let container = try open([CatalogV2b.Item.self])
        let context = ModelContext(container)
        XCTAssertEqual(Set(try context.fetch(FetchDescriptor<CatalogV2b.Item>()).map(\.discount)), [0.5])
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<CatalogV2b.Item>(predicate: #Predicate { $0.discount == 0.5 })), 20)
        context.insert(CatalogV2b.Item(title: "new", price: 1, count: 1))
        try context.save()
        XCTAssertEqual(
            try ModelContext(container).fetchCount(
                FetchDescriptor<CatalogV2b.Item>(predicate: #Predicate { $0.discount == 0.25 })), 1)
        XCTAssertEqual(try container.checkIntegrity(), [])
        container.store.close()
        // Opening again finds nothing to do.
        XCTAssertEqual(try open([CatalogV2b.Item.self]).store.database.statistics.commits, 0)
    }

    func testADefaultThatChangesFromLaunchToLaunchIsWrittenIntoRecords() throws {
        try makeV1(20)
        let steps = Locked<[MigrationProgress]>([])
        let container = try open([CatalogStamped.Item.self]) { progress in steps.withLock { $0.append(progress) } }
        XCTAssertTrue(steps.withLock { $0 }.contains { $0.step == "rewriting records" && $0.completedRows == 20 })
        let stamps = try ModelContext(container).fetch(FetchDescriptor<CatalogStamped.Item>()).map(\.stamp)
        XCTAssertEqual(Set(stamps).count, 1, "every existing row takes the one default of the migration")
        container.store.close()
        // The next launch's model makes another `Date.now`; the rows keep
        // theirs, read-only as well.
        let configuration = ModelConfiguration(url: storeURL(), allowsSave: false)
        let reader = try track(ModelContainer(for: Schema([CatalogStamped.Item.self]), configurations: [configuration]))
        XCTAssertEqual(try ModelContext(reader).fetch(FetchDescriptor<CatalogStamped.Item>()).map(\.stamp), stamps)
    }

    func testStoredFillsAndFieldLimitRoundTripThroughTheCatalog() throws {
        var entity = StoredEntity(Schema([CatalogV2.Item.self]).entities[0])
        entity.fills = ["discount": [1, 0x21, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f]]
        entity.recordFields = 6
        let decoded = try StoredEntity(decoding: entity.encoded)
        XCTAssertEqual(decoded, entity)
        XCTAssertEqual(decoded.hashedText, StoredEntity(Schema([CatalogV2.Item.self]).entities[0]).hashedText)
    }
}

enum CatalogV1 {
    @Model final class Item {
        var name: String
        var price: Double
        var count: Int
        var legacy: String?
        init(name: String, price: Double, count: Int, legacy: String?) {
            self.name = name
            self.price = price
            self.count = count
            self.legacy = legacy
        }
    }
}

enum CatalogV2 {
    @Model final class Item {
        #Index<Item>([\.discount])
        @Attribute(originalName: "name") var title: String
        var price: Double
        var count: Int
        var legacy: String = "none"
        var discount: Double = 0.5
        init(title: String, price: Double, count: Int, discount: Double = 0.5) {
            self.title = title
            self.price = price
            self.count = count
            self.discount = discount
        }
    }
}

enum CatalogUnique {
    @Model final class Item {
        @Attribute(.unique, originalName: "name") var title: String
        var price: Double
        var count: Int
        var legacy: String = "none"
        var discount: Double = 0.5
        init(title: String, price: Double, count: Int) {
            self.title = title
            self.price = price
            self.count = count
        }
    }
}

enum CatalogV2b {
    @Model final class Item {
        #Index<Item>([\.discount])
        var title: String
        var price: Double
        var count: Int
        var legacy: String = "none"
        var discount: Double = 0.25
        init(title: String, price: Double, count: Int) {
            self.title = title
            self.price = price
            self.count = count
        }
    }
}

enum CatalogV3 {
    @Model final class Item {
        var title: String
        var price: Double
        var count: Int
        var legacy: String = "none"
        init(title: String, price: Double, count: Int) {
            self.title = title
            self.price = price
            self.count = count
        }
    }
}

enum CatalogV4 {
    @Model final class Item {
        var title: String
        var price: Double
        var count: Int
        var legacy: String = "none"
        var rank: Int = 7
        init(title: String, price: Double, count: Int) {
            self.title = title
            self.price = price
            self.count = count
        }
    }
}

enum CatalogStamped {
    @Model final class Item {
        var name: String
        var price: Double
        var count: Int
        var legacy: String?
        var stamp: Date = Date.now
        init(name: String) {
            self.name = name
            self.price = 0
            self.count = 0
        }
    }
}
