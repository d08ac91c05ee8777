import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

nonisolated final class RelationshipIndexTests: FidelityTestCase {
    func testAnIndexOverAToOneIsKeptThroughChangesAndReopening() throws {
        do {
            let context = ModelContext(try container(Item.self, Category.self))
            let work = Category(name: "work")
            let home = Category(name: "home")
            context.insert(work)
            context.insert(home)
            for day in 0..<6 {
                let item = Item(
                    title: "item \(day)", createdAt: Date(timeIntervalSinceReferenceDate: Double(day) * 86_400),
                    category: day.isMultiple(of: 2) ? work : home)
                context.insert(item)
            }
            context.insert(Item(title: "loose", createdAt: .distantPast))
            try context.save()
            // Moving an item to another category, clearing one, deleting one.
            let items = try context.fetch(FetchDescriptor<Item>(sortBy: [SortDescriptor(\.title)]))
            items[1].category = home
            items[2].category = nil
            context.delete(items[3])
            try context.save()
            XCTAssertEqual(try context.container.checkIntegrity(), [], "every index entry matches its record")
        }
        // Reopened: the records' categories load as faults, and changing
        // them must find the old index entries.
        let context = ModelContext(try container(Item.self, Category.self))
        let home = try XCTUnwrap(try context.fetch(FetchDescriptor<Category>(predicate: #Predicate { $0.name == "home" })).first)
        for item in try context.fetch(FetchDescriptor<Item>()) where item.title != "loose" {
            item.createdAt = item.createdAt.addingTimeInterval(60)
        }
        let loose = try XCTUnwrap(try context.fetch(FetchDescriptor<Item>(predicate: #Predicate { $0.title == "loose" })).first)
        loose.category = home
        try context.save()
        XCTAssertEqual(try context.container.checkIntegrity(), [])
        let homeID = home.persistentModelID
        let inHome = try context.fetch(
            FetchDescriptor<Item>(
                predicate: #Predicate { $0.category?.persistentModelID == homeID }, sortBy: [SortDescriptor(\.createdAt)]))
        XCTAssertEqual(inHome.map(\.title), ["loose", "item 1", "item 5"])
        context.delete(home)
        try context.save()
        XCTAssertEqual(try context.container.checkIntegrity(), [], "nullified to-ones leave the index with them")
    }

    func testAToManyInAnIndexIsRefusedByName() throws {
        XCTAssertThrowsError(try container(Shelf2.self, Box2.self)) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .unknownSchema)
            XCTAssertTrue("\(error)".contains("Shelf2.boxes: a to-many relationship cannot be part of an index"), "\(error)")
        }
    }

    func testAMigrationAddsAnIndexOverAToOne() throws {
        let url = URL(fileURLWithPath: directory.file("shop.store"))
        do {
            let container = try ModelContainer(
                for: Schema(versionedSchema: ShopV1.self), configurations: ModelConfiguration(url: url))
            let context = ModelContext(container)
            let fruit = ShopV1.Aisle(name: "fruit")
            context.insert(fruit)
            for name in ["pear", "apple", "fig"] { context.insert(ShopV1.Product(name: name, aisle: fruit)) }
            context.insert(ShopV1.Product(name: "loose", aisle: nil))
            try context.save()
        }
        let container = try ModelContainer(
            for: Schema(versionedSchema: ShopV2.self), migrationPlan: ShopPlan.self,
            configurations: ModelConfiguration(url: url))
        XCTAssertEqual(try container.checkIntegrity(), [], "the new index holds every record's key")
        let context = ModelContext(container)
        let products = try context.fetch(FetchDescriptor<ShopV2.Product>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(products.map(\.name), ["apple", "fig", "loose", "pear"])
        XCTAssertEqual(products.filter { $0.aisle?.name == "fruit" }.count, 3)
        products[0].aisle = nil
        try context.save()
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}
