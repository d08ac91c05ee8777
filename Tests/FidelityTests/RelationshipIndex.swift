// An index over a to-one relationship and a date, as SwiftData allows
// (`#Index<Item>([\.category, \.createdAt])`): the store keys it by the
// category's row.
import Foundation
import Strata

@Model
final class Category {
    var name: String
    @Relationship(inverse: \Item.category) var items: [Item] = []
    init(name: String) { self.name = name }
}

@Model
final class Item {
    #Index<Item>([\.category, \.createdAt], [\.title])
    var title: String
    var createdAt: Date
    var category: Category?
    init(title: String, createdAt: Date, category: Category? = nil) {
        self.title = title
        self.createdAt = createdAt
        self.category = category
    }
}

@Model
final class Shelf2 {
    #Index<Shelf2>([\.boxes])
    var boxes: [Box2] = []
    init() {}
}

@Model
final class Box2 {
    var shelf: Shelf2?
    init() {}
}

/// A store that gains the index in a later version (lightweight migration
/// builds it from the records' to-ones).
enum ShopV1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Aisle.self, Product.self] }

    @Model final class Aisle {
        var name: String
        @Relationship(deleteRule: .cascade, inverse: \Product.aisle) var products: [Product] = []
        init(name: String) { self.name = name }
    }

    @Model final class Product {
        var name: String
        var aisle: Aisle?
        init(name: String, aisle: Aisle?) {
            self.name = name
            self.aisle = aisle
        }
    }
}

enum ShopV2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Aisle.self, Product.self] }

    @Model final class Aisle {
        var name: String
        @Relationship(deleteRule: .cascade, inverse: \Product.aisle) var products: [Product] = []
        init(name: String) { self.name = name }
    }

    @Model final class Product {
        #Index<Product>([\.aisle, \.name])
        var name: String
        var aisle: Aisle?
        init(name: String, aisle: Aisle?) {
            self.name = name
            self.aisle = aisle
        }
    }
}

enum ShopPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShopV1.self, ShopV2.self] }
    static var stages: [MigrationStage] { [.lightweight(fromVersion: ShopV1.self, toVersion: ShopV2.self)] }
}
