import Foundation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

/// Schema migrations: the V1 → V2 → V3 chain of `MigrationModels.swift`,
/// incompatible changes, unique constraints over colliding rows, and
/// crashes during a migration.
final class MigrationTests: StoreTestCase {
    /// Rows of the chain test (`STRATA_MIGRATION_ROWS`, default 100 000).
    let rows = Int(environmentValue("STRATA_MIGRATION_ROWS") ?? "") ?? 100_000

    func configuration(_ name: String = "library.store") -> ModelConfiguration {
        ModelConfiguration(url: storeURL(name))
    }

    /// A V1 store of `count` books: book i has pages 100 + i % 400, a note
    /// except when i % 3 == 0, rating i % 5, isbn "isbn-i", code
    /// `code(i)`, and writer "W\(i % 100)" except when i % 7 == 0.
    static func fillV1(_ container: ModelContainer, count: Int, code: (Int) -> Int = { $0 }) throws {
        let context = ModelContext(container)
        let writers = (0..<100).map { LibraryV1.Writer(name: "W\($0)") }
        for writer in writers { context.insert(writer) }
        for i in 0..<count {
            let book = LibraryV1.Book(
                title: "Book \(i)", pages: 100 + i % 400, note: i % 3 == 0 ? nil : "note \(i)", rating: i % 5,
                isbn: "isbn-\(i)", code: code(i))
            context.insert(book)
            if i % 7 != 0 { book.writer = writers[i % 100] }
            if i % 20_000 == 19_999 { try context.save() }
        }
        try context.save()
    }

    func makeV1(count: Int, code: (Int) -> Int = { $0 }) throws {
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV1.self), configurations: [configuration()]))
        try Self.fillV1(container, count: count, code: code)
    }

    func testChainV1ToV3OverManyRows() throws {
        try makeV1(count: rows)
        let steps = Locked<[MigrationProgress]>([])
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV3.self), migrationPlan: LibraryPlan.self,
                configurations: [configuration()], migrationProgress: { progress in steps.withLock { $0.append(progress) } }))
        let context = ModelContext(container)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<LibraryV3.Book>()), rows)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<LibraryV3.Writer>()), 100)

        for i in [0, 1, 2, 3, 6, 7, 14, 99, rows / 2, rows - 1] {
            let name = "Book \(i)"
            let found = try context.fetch(FetchDescriptor<LibraryV3.Book>(predicate: #Predicate { $0.name == name }))
            XCTAssertEqual(found.count, 1, name)
            guard let book = found.first else { continue }
            XCTAssertEqual(book.pages, 100 + i % 400, name)
            XCTAssertEqual(book.note, i % 3 == 0 ? "none" : "note \(i)", "\(name): the default fills nil")
            XCTAssertEqual(book.rating, i % 5, name)
            XCTAssertEqual(book.isbn, "isbn-\(i)", name)
            XCTAssertEqual(book.year, 2000, "\(name): the added attribute has its default")
            XCTAssertNil(book.subtitle, name)
            XCTAssertEqual(book.summary, "Book \(i) (\(100 + i % 400) pages)", "\(name): didMigrate ran")
            XCTAssertEqual(book.writers.map(\.name), i % 7 == 0 ? [] : ["W\(i % 100)"], "\(name): to-one → to-many")
        }
        // The to-many's inverse holds the same pairs.
        let w3 = try context.fetch(FetchDescriptor<LibraryV3.Writer>(predicate: #Predicate { $0.name == "W3" }))
        XCTAssertEqual(w3.first?.books.count, (0..<rows).filter { $0 % 100 == 3 && $0 % 7 != 0 }.count)

        // The new index answers pages queries; the new unique constraint
        // upserts.
        let plan = try context.explain(FetchDescriptor<LibraryV3.Book>(predicate: #Predicate { $0.pages == 150 }))
        XCTAssertTrue(plan.contains("i.Book.pages"), plan)
        XCTAssertEqual(
            try context.fetchCount(FetchDescriptor<LibraryV3.Book>(predicate: #Predicate { $0.pages == 150 })),
            (0..<rows).filter { 100 + $0 % 400 == 150 }.count)
        context.insert(LibraryV3.Book(name: "Replacement", pages: 1, isbn: "isbn-5"))
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<LibraryV3.Book>()), rows)
        XCTAssertEqual(try container.checkIntegrity(), [])

        let reported = steps.withLock { $0 }
        XCTAssertTrue(
            reported.contains { $0.entityName == "Book" && $0.step == "rewriting records" && $0.completedRows == rows },
            "progress: \(reported.suffix(5))")

        // Opening again at V3 does nothing: no commit.
        container.store.close()
        let reopened = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV3.self), migrationPlan: LibraryPlan.self, configurations: [configuration()]))
        XCTAssertEqual(reopened.store.database.statistics.commits, 0)
    }

    func testIncompatibleChangeWithoutPlanIsNamedAndLeavesTheStoreReadable() throws {
        try makeV1(count: 50)
        XCTAssertThrowsError(
            try ModelContainer(for: Schema(versionedSchema: LibraryBroken.self), configurations: [configuration()])
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .loadIssueModelContainer)
            let message = (error as? SwiftDataError)?.message ?? ""
            XCTAssertTrue(message.contains("Book.pages: its type changed from Int to String"), message)
            XCTAssertTrue(message.contains("Book.added: an added non-optional attribute needs a default value"), message)
        }
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV1.self), configurations: [configuration()]))
        let books = try ModelContext(container).fetch(
            FetchDescriptor<LibraryV1.Book>(sortBy: [SortDescriptor(\.pages)]))
        XCTAssertEqual(books.count, 50)
        XCTAssertEqual(books.first?.title, "Book 0")
    }

    func testLightweightChangesApplyWithoutAPlan() throws {
        try makeV1(count: 300)
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV2.self), configurations: [configuration()]))
        let books = try ModelContext(container).fetch(FetchDescriptor<LibraryV2.Book>(sortBy: [SortDescriptor(\.pages)]))
        XCTAssertEqual(books.count, 300)
        XCTAssertEqual(Set(books.map(\.name)), Set((0..<300).map { "Book \($0)" }))
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    /// A migration that rewrites every record (V1 → V2 drops a field and
    /// fills new ones) leaves the rewritten leaves room to grow, as a save
    /// does: every name made two characters longer afterwards keeps the
    /// record tree's pages.
    func testRewrittenRecordsKeepRoomToGrow() throws {
        try makeV1(count: 3_000)
        let container = try track(
            ModelContainer(for: Schema(versionedSchema: LibraryV2.self), configurations: [configuration()]))
        let entity = try XCTUnwrap(container.schema.entity(named: "Book"))
        func recordPages() throws -> Int {
            let report = try container.store.database.check()
            return try XCTUnwrap(report.trees.first { $0.name == entity.recordTree }).pages
        }
        let migrated = try recordPages()
        let context = ModelContext(container)
        let books = try context.fetch(FetchDescriptor<LibraryV2.Book>())
        XCTAssertEqual(books.count, 3_000)
        for book in books { book.name += "!!" }
        try context.save()
        XCTAssertEqual(try recordPages(), migrated)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testUniqueConstraintOverCollidingRowsFailsAndListsThem() throws {
        try makeV1(count: 200, code: { $0 % 150 })
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema(versionedSchema: LibraryV2UniqueCode.self), migrationPlan: LibraryCollidingPlan.self,
                configurations: [configuration()])
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .uniqueConstraintViolation)
            let message = (error as? SwiftDataError)?.message ?? ""
            XCTAssertTrue(message.contains("50 collision(s)"), message)
            XCTAssertTrue(message.contains("share (0)"), message)
        }
        // Nothing happened: the store is still V1, even the first stage.
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV1.self), configurations: [configuration()]))
        XCTAssertEqual(try count(LibraryV1.Book.self, in: container), 200)
        XCTAssertEqual(container.store.database.statistics.commits, 0)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    /// The classic custom stage: `willMigrate` removes duplicates on the
    /// old schema, then the unique constraint is added.
    func testWillMigrateRemovesDuplicatesBeforeAUniqueConstraint() throws {
        try makeV1(count: 200, code: { $0 % 150 })
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV1UniqueCode.self), migrationPlan: LibraryDedupPlan.self,
                configurations: [configuration()]))
        let books = try ModelContext(container).fetch(FetchDescriptor<LibraryV1UniqueCode.Book>())
        XCTAssertEqual(books.count, 150)
        XCTAssertEqual(Set(books.map(\.code)).count, 150)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    /// A stage that fails after its `willMigrate` saved leaves the store
    /// exactly as it was: the saves were part of the migration's
    /// transaction.
    func testAFailingStageLeavesTheStoreUnchanged() throws {
        try makeV1(count: 100)
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema(versionedSchema: LibraryV1UniqueCode.self), migrationPlan: LibraryFailingPlan.self,
                configurations: [configuration()])
        ) { error in
            XCTAssertTrue(error is LibraryFailingPlan.Failure, "\(error)")
        }
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV1.self), configurations: [configuration()]))
        XCTAssertEqual(try count(LibraryV1.Book.self, in: container), 100)
        XCTAssertEqual(container.store.database.statistics.commits, 0)
    }

    /// A save that fails inside a stage fails the migration even when the
    /// stage's code swallows the error: the save may have written part of
    /// itself into the migration's transaction.
    func testASwallowedFailedSaveStillFailsTheMigration() throws {
        try makeV1(count: 20)
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema(versionedSchema: LibraryV1UniqueCode.self), migrationPlan: LibrarySwallowingPlan.self,
                configurations: [configuration()])
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .uniqueConstraintViolation, "\(error)")
        }
        let container = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV1.self), configurations: [configuration()]))
        XCTAssertEqual(container.store.database.statistics.commits, 0, "the store is still V1")
        let codes = try ModelContext(container).fetch(FetchDescriptor<LibraryV1.Book>()).map(\.code)
        XCTAssertEqual(codes.sorted(), Array(0..<20))
    }

    func testBackwardMigrationIsRefused() throws {
        try makeV1(count: 10)
        _ = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV2.self), migrationPlan: LibraryPlan.self, configurations: [configuration()]))
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema(versionedSchema: LibraryV1.self), migrationPlan: LibraryPlan.self,
                configurations: [configuration()])
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .backwardMigration)
        }
    }

    func testStoredSchemaRecordsStableIdsAndTheVersion() throws {
        try makeV1(count: 5)
        let v1 = try track(ModelContainer(for: Schema(versionedSchema: LibraryV1.self), configurations: [configuration()]))
        let before = try v1.store.database.read { try StoredSchema($0) }
        withExtendedLifetime(v1) {}
        let titleID = before.entities["Book"]?.property(named: "title")?.id
        XCTAssertNotNil(titleID)
        v1.store.close()
        let v2 = try track(
            ModelContainer(
                for: Schema(versionedSchema: LibraryV2.self), migrationPlan: LibraryPlan.self, configurations: [configuration()]))
        let after = try v2.store.database.read { try StoredSchema($0) }
        XCTAssertEqual(after.version, "2.0.0")
        XCTAssertEqual(after.entities["Book"]?.property(named: "name")?.id, titleID, "a rename keeps the id")
        let year = after.entities["Book"]?.property(named: "year")?.id ?? 0
        XCTAssertGreaterThan(year, before.entities["Book"]?.properties.map(\.id).max() ?? .max, "new ids are fresh")
        XCTAssertEqual(after.hash, StoredSchema.hash(of: StoredSchema.describe(Schema(versionedSchema: LibraryV2.self))))
    }

    /// A store whose catalog is in format 1 (no ids, details or hash) opens
    /// read-only as it is, and a writable open upgrades the catalog.
    func testFormatOneCatalogOpensAndIsUpgraded() throws {
        try makeV1(count: 20)
        do {
            let database = try Database.open(path: storeURL("library.store").path)
            try database.write { tx in
                let tree = try tx.tree(StoredSchema.tree)
                try tx.delete(StoredSchema.hashKey, in: tree)
                try tx.delete(StoredSchema.versionKey, in: tree)
                for (name, entity) in try StoredSchema(tx).entities {
                    let lines = entity.properties.map { "\($0.field) \($0.name) \($0.kind) \($0.type)" } + entity.keys
                    try tx.put(Array(name.utf8), Array(lines.joined(separator: "\n").utf8), in: tree)
                }
            }
            try database.close()
        }
        let schema = Schema(versionedSchema: LibraryV1.self)
        let readOnly = try track(
            ModelContainer(
                for: schema, configurations: [ModelConfiguration(url: storeURL("library.store"), allowsSave: false)]))
        XCTAssertEqual(try count(LibraryV1.Book.self, in: readOnly), 20)
        readOnly.store.close()
        let writable = try track(ModelContainer(for: schema, configurations: [configuration()]))
        XCTAssertEqual(try count(LibraryV1.Book.self, in: writable), 20)
        let stored = try writable.store.database.read { try StoredSchema($0) }
        XCTAssertEqual(stored.hash, StoredSchema.hash(of: StoredSchema.describe(schema)))
        XCTAssertEqual(try writable.checkIntegrity(), [])
    }

    /// The version hash must be the same in every process: the stored
    /// description names an inverse by its property name, never by a key
    /// path's description (which can hold addresses).
    func testStoredDescriptionHoldsNothingRunDependent() {
        let described = StoredSchema.describe(Schema(versionedSchema: LibraryV1.self))
        let books = described["Writer"]?.property(named: "books")?.detail ?? ""
        XCTAssertTrue(books.contains("inverse writer"), books)
        let text = described.values.map { String(decoding: $0.encoded, as: UTF8.self) }.joined(separator: "\n")
        XCTAssertFalse(text.contains("0x"), text)
    }

    /// A type left out of the container's list is not a reason to delete
    /// its rows: the automatic migration refuses, naming it.
    func testAnEntityWithRowsIsNotDroppedAutomatically() throws {
        let url = storeURL("two.store")
        do {
            let container = try track(
                ModelContainer(
                    for: Schema([Memo.self, HashPlain.Item.self]), configurations: [ModelConfiguration(url: url)]))
            let context = ModelContext(container)
            context.insert(Memo(title: "m", body: "", priority: 1))
            context.insert(HashPlain.Item(value: 7))
            try context.save()
        }
        XCTAssertThrowsError(try ModelContainer(for: Schema([Memo.self]), configurations: [ModelConfiguration(url: url)])) {
            error in
            XCTAssertEqual(error as? SwiftDataError, .loadIssueModelContainer)
            let message = (error as? SwiftDataError)?.message ?? ""
            XCTAssertTrue(message.contains("Item: missing from the schema but holds 1 rows"), message)
        }
        let both = try track(
            ModelContainer(
                for: Schema([Memo.self, HashPlain.Item.self]), configurations: [ModelConfiguration(url: url)]))
        XCTAssertEqual(try count(HashPlain.Item.self, in: both), 1)
    }

    func testHashModifierChangesTheVersionHash() {
        let plain = StoredSchema.hash(of: StoredSchema.describe(Schema(versionedSchema: LibraryV1.self)))
        let same = StoredSchema.hash(of: StoredSchema.describe(Schema(versionedSchema: LibraryV1.self)))
        XCTAssertEqual(plain, same)
        let a = StoredSchema.describe(Schema([HashPlain.Item.self]))
        let b = StoredSchema.describe(Schema([HashModified.Item.self]))
        XCTAssertEqual(a["Item"]?.properties.map(\.type), b["Item"]?.properties.map(\.type))
        XCTAssertNotEqual(StoredSchema.hash(of: a), StoredSchema.hash(of: b))
    }

    /// A crash at every sync point of a V1 → V2 migration: the store
    /// reopens at V1 or at V2, complete, never in between.
    func testCrashAtEverySyncPointOfAMigration() throws {
        let url = URL(fileURLWithPath: "/crash/library.store")
        let base = MemoryFileSystem()
        do {
            let container = try ModelContainer(
                for: Schema(versionedSchema: LibraryV1.self),
                configurations: [ModelConfiguration(url: url, fileSystem: base)])
            try Self.fillV1(container, count: 2000)
        }
        let v1Hash = StoredSchema.hash(of: StoredSchema.describe(Schema(versionedSchema: LibraryV1.self)))
        let v2Hash = StoredSchema.hash(of: StoredSchema.describe(Schema(versionedSchema: LibraryV2.self)))
        func migrate(_ fs: MemoryFileSystem) throws {
            _ = try ModelContainer(
                for: Schema(versionedSchema: LibraryV2.self), migrationPlan: LibraryPlanV2.self,
                configurations: [ModelConfiguration(url: url, fileSystem: fs)])
        }
        let clean = base.afterPowerLoss()
        try migrate(clean)
        let syncPoints = clean.syncCount
        XCTAssertGreaterThan(syncPoints, 0)
        var outcomes: [String: Int] = [:]
        for n in 1...syncPoints {
            for seed in 0..<3 {
                let fs = base.afterPowerLoss()
                fs.crashAtSync = n
                let migrated = (try? migrate(fs)) != nil
                let image = fs.afterPowerLoss(seed: UInt64(n * 100 + seed))
                let label = "crash at sync \(n) of \(syncPoints), seed \(seed)"
                let stored = try Database.open(path: url.path, fileSystem: image).read { try StoredSchema.storedHash($0) }
                let version: any VersionedSchema.Type
                switch stored {
                case v1Hash:
                    version = LibraryV1.self
                    XCTAssertFalse(migrated, "\(label): a migration that returned is durable")
                case v2Hash: version = LibraryV2.self
                default:
                    XCTFail("\(label): the stored schema is neither V1 nor V2")
                    continue
                }
                outcomes["\(version.versionIdentifier)", default: 0] += 1
                let container = try ModelContainer(
                    for: Schema(versionedSchema: version), configurations: [ModelConfiguration(url: url, fileSystem: image)])
                XCTAssertEqual(container.store.database.statistics.commits, 0, "\(label): no migration left to do")
                XCTAssertEqual(try container.checkIntegrity(), [], label)
                let books =
                    ObjectIdentifier(version) == ObjectIdentifier(LibraryV1.self)
                    ? try count(LibraryV1.Book.self, in: container) : try count(LibraryV2.Book.self, in: container)
                XCTAssertEqual(books, 2000, label)
            }
        }
        XCTAssertNotNil(outcomes["2.0.0"], "some crash points come after the commit: \(outcomes)")
        print("migration crash matrix: \(syncPoints) sync points × 3 seeds: \(outcomes)")
    }
}

enum HashPlain {
    @Model final class Item {
        var value: Int
        init(value: Int) { self.value = value }
    }
}

enum HashModified {
    @Model final class Item {
        @Attribute(hashModifier: "v2") var value: Int
        init(value: Int) { self.value = value }
    }
}
