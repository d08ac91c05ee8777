import FidelitySupport
import Foundation
import Strata
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
        init(name: String, code: Int, label: String) {
            self.name = name
            self.code = code
            self.label = label
        }
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
                        item.code = item.name.count
                        item.label = item.name.uppercased()
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

final class CustomStageTests: FidelityTestCase {
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
}
