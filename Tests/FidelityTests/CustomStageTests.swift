import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

enum InventoryV1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }

    @Model final class Item {
        var name: String
        init(name: String) { self.name = name }
    }
}

/// Adds two non-optional attributes without defaults: a custom stage's
/// didMigrate fills them.
enum InventoryV2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }

    @Model final class Item {
        var name: String
        var code: Int
        var label: String
        var photo: Data
        init(name: String, code: Int, label: String) {
            self.name = name
            self.code = code
            self.label = label
            self.photo = Data()
        }
    }
}

/// Adds a unique attribute without a default: a placeholder would collide.
enum InventoryV2Unique: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 1, 0) }
    static var models: [any PersistentModel.Type] { [Item.self] }

    @Model final class Item {
        var name: String
        @Attribute(.unique) var code: Int
        init(name: String, code: Int) {
            self.name = name
            self.code = code
        }
    }
}

enum InventoryUniquePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [InventoryV1.self, InventoryV2Unique.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: InventoryV1.self, toVersion: InventoryV2Unique.self, willMigrate: nil, didMigrate: { _ in })]
    }
}

/// Its didMigrate opens a container on another file (importing from a
/// legacy store, say) while the migration runs.
enum InventoryImportingPlan: SchemaMigrationPlan {
    nonisolated(unsafe) static var legacyURL: URL?
    static var schemas: [any VersionedSchema.Type] { [InventoryV1.self, InventoryV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(
                fromVersion: InventoryV1.self, toVersion: InventoryV2.self, willMigrate: nil,
                didMigrate: { context in
                    let legacy = try ModelContainer(
                        for: Recipe.self, configurations: ModelConfiguration(url: try XCTUnwrap(legacyURL)))
                    let count = try ModelContext(legacy).fetchCount(FetchDescriptor<Recipe>())
                    for item in try context.fetch(FetchDescriptor<InventoryV2.Item>()) {
                        item.code = count
                        item.label = "imported"
                        item.photo = Data()
                    }
                })
        ]
    }
}

enum InventoryPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [InventoryV1.self, InventoryV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(
                fromVersion: InventoryV1.self, toVersion: InventoryV2.self, willMigrate: nil,
                didMigrate: { context in
                    for item in try context.fetch(FetchDescriptor<InventoryV2.Item>(sortBy: [SortDescriptor(\.name)])) {
                        XCTAssertEqual(item.code, 0, "an added attribute reads as its placeholder until set")
                        XCTAssertEqual(item.photo, Data(), "as does added Data")
                        item.code = item.name.count
                        item.label = item.name.uppercased()
                        item.photo = Data(item.name.utf8)
                    }
                    try context.save()
                })
        ]
    }
}

/// Its didMigrate forgets one row.
enum InventoryForgetfulPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [InventoryV1.self, InventoryV2.self] }
    static var stages: [MigrationStage] {
        [
            .custom(
                fromVersion: InventoryV1.self, toVersion: InventoryV2.self, willMigrate: nil,
                didMigrate: { context in
                    for item in try context.fetch(FetchDescriptor<InventoryV2.Item>()) where item.name != "bolt" {
                        item.code = 1
                        item.label = "set"
                    }
                })
        ]
    }
}

nonisolated final class CustomStageTests: FidelityTestCase {
    private func makeV1() throws -> URL {
        let url = URL(fileURLWithPath: directory.file("inventory.store"))
        let container = try ModelContainer(
            for: Schema(versionedSchema: InventoryV1.self), configurations: ModelConfiguration(url: url))
        let context = ModelContext(container)
        for name in ["nut", "bolt", "washer"] { context.insert(InventoryV1.Item(name: name)) }
        try context.save()
        return url
    }

    func testDidMigrateFillsAddedNonOptionalAttributes() throws {
        let url = try makeV1()
        let container = try ModelContainer(
            for: Schema(versionedSchema: InventoryV2.self), migrationPlan: InventoryPlan.self,
            configurations: ModelConfiguration(url: url))
        let items = try ModelContext(container).fetch(FetchDescriptor<InventoryV2.Item>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(items.map(\.code), [4, 3, 6])
        XCTAssertEqual(items.map(\.label), ["BOLT", "NUT", "WASHER"])
        XCTAssertEqual(items.map { String(decoding: $0.photo, as: UTF8.self) }, ["bolt", "nut", "washer"])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testARowLeftWithoutAValueFailsTheMigrationAndLeavesTheStore() throws {
        let url = try makeV1()
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema(versionedSchema: InventoryV2.self), migrationPlan: InventoryForgetfulPlan.self,
                configurations: ModelConfiguration(url: url))
        ) { error in
            XCTAssertTrue("\(error)".contains("didMigrate left Item.code without a value in 1 row(s)"), "\(error)")
        }
        let old = try ModelContainer(
            for: Schema(versionedSchema: InventoryV1.self), configurations: ModelConfiguration(url: url))
        XCTAssertEqual(try ModelContext(old).fetchCount(FetchDescriptor<InventoryV1.Item>()), 3, "still version 1")
    }

    func testAUniqueAttributeStillNeedsADefault() throws {
        let url = try makeV1()
        XCTAssertThrowsError(
            try ModelContainer(
                for: Schema(versionedSchema: InventoryV2Unique.self), migrationPlan: InventoryUniquePlan.self,
                configurations: ModelConfiguration(url: url))
        ) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .loadIssueModelContainer, "\(error)")
            XCTAssertTrue("\(error)".contains("Item.code: an added non-optional attribute needs a default"), "\(error)")
        }
    }

    func testDidMigrateMayOpenAnotherStore() throws {
        let legacy = URL(fileURLWithPath: directory.file("legacy.store"))
        do {
            let context = ModelContext(try ModelContainer(for: Recipe.self, configurations: ModelConfiguration(url: legacy)))
            context.insert(Recipe(name: "Old"))
            try context.save()
        }
        InventoryImportingPlan.legacyURL = legacy
        let url = try makeV1()
        let container = try ModelContainer(
            for: Schema(versionedSchema: InventoryV2.self), migrationPlan: InventoryImportingPlan.self,
            configurations: ModelConfiguration(url: url))
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<InventoryV2.Item>()).map(\.code), [1, 1, 1])
    }
}
