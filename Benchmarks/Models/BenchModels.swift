import Foundation
import GRDB
import Strata

// Every benchmark's models, in one file that each benchmark target compiles
// (Sources/<benchmark>/Models.swift links here), so they are declared
// once and stay in the benchmark's own module, as an app's models are.

// MARK: model-bench: a flat model and the GRDB record of the same fields

@Model
final class Person {
    var name: String
    var email: String
    var age: Int
    var score: Double
    var joined: Date
    var active: Bool

    init(name: String, email: String, age: Int, score: Double, joined: Date, active: Bool) {
        self.name = name
        self.email = email
        self.age = age
        self.score = score
        self.joined = joined
        self.active = active
    }
}

struct PersonRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "person"
    var id: Int64?
    var name: String
    var email: String
    var age: Int
    var score: Double
    var joined: Date
    var active: Bool

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

// MARK: model-bench's writes: a unique Int, an indexed Int, a String, a Date

@Model
final class Ticket {
    #Index<Ticket>([\.bucket])
    @Attribute(.unique) var number: Int
    var bucket: Int
    var title: String
    var opened: Date

    init(number: Int, bucket: Int, title: String, opened: Date) {
        self.number = number
        self.bucket = bucket
        self.title = title
        self.opened = opened
    }
}

struct TicketRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "ticket"
    var id: Int64?
    var number: Int
    var bucket: Int
    var title: String
    var opened: Date

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }

    /// The table: `Ticket`'s unique `number` and indexed `bucket`.
    static func createTable(_ db: GRDB.Database) throws {
        try db.create(table: databaseTableName) { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("number", .integer).notNull().unique()
            t.column("bucket", .integer).notNull().indexed()
            t.column("title", .text).notNull()
            t.column("opened", .datetime).notNull()
        }
    }
}

// MARK: query-bench: indexed attributes and a unique code

@Model
final class Item {
    #Index<Item>([\.category], [\.tag])
    @Attribute(.unique) var code: Int
    var category: Int
    var tag: String
    var score: Double
    var flag: Bool
    var note: String

    init(code: Int, category: Int, tag: String, score: Double, flag: Bool, note: String) {
        self.code = code
        self.category = category
        self.tag = tag
        self.score = score
        self.flag = flag
        self.note = note
    }
}

struct ItemRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "item"
    var id: Int64?
    var code: Int
    var category: Int
    var tag: String
    var score: Double
    var flag: Bool
    var note: String

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

// MARK: graph-bench: upserts on a unique SKU, and a cascade of parts

@Model
final class StockItem {
    @Attribute(.unique) var sku: String
    var quantity: Int
    var price: Double

    init(sku: String, quantity: Int, price: Double) {
        self.sku = sku
        self.quantity = quantity
        self.price = price
    }
}

@Model
final class Owner {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Part.owner) var parts: [Part] = []
    init(name: String) { self.name = name }
}

@Model
final class Part {
    var label: String
    var weight: Double
    var owner: Owner?
    init(label: String, weight: Double) {
        self.label = label
        self.weight = weight
    }
}

struct StockItemRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "item"
    var id: Int64?
    var sku: String
    var quantity: Int
    var price: Double

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

// MARK: migration-bench: two schema versions and the plan between them

enum V1: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(1, 0, 0) }
    static var models: [any PersistentModel.Type] { [Product.self] }

    @Model final class Product {
        var name: String
        var price: Double
        var stock: Int
        init(name: String, price: Double, stock: Int) {
            self.name = name
            self.price = price
            self.stock = stock
        }
    }
}

enum V2: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 0, 0) }
    static var models: [any PersistentModel.Type] { [Product.self] }

    @Model final class Product {
        #Index<Product>([\.price])
        @Attribute(originalName: "name") var title: String
        var price: Double
        var stock: Int
        var discount: Double = 0
        init(title: String, price: Double, stock: Int) {
            self.title = title
            self.price = price
            self.stock = stock
        }
    }
}

/// V2 without the index: a rename and an added attribute with a default,
/// which change only the catalog.
enum V2Catalog: VersionedSchema {
    static var versionIdentifier: Schema.Version { Schema.Version(2, 1, 0) }
    static var models: [any PersistentModel.Type] { [Product.self] }

    @Model final class Product {
        @Attribute(originalName: "name") var title: String
        var price: Double
        var stock: Int
        var discount: Double = 0
        init(title: String, price: Double, stock: Int) {
            self.title = title
            self.price = price
            self.stock = stock
        }
    }
}

enum CatalogPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [V1.self, V2Catalog.self] }
    static var stages: [MigrationStage] { [.lightweight(fromVersion: V1.self, toVersion: V2Catalog.self)] }
}

enum Plan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [V1.self, V2.self] }
    static var stages: [MigrationStage] { [.lightweight(fromVersion: V1.self, toVersion: V2.self)] }
}

// MARK: GRDB's side, durable as Strata's `.full`

/// A `DatabasePool` whose commits sync the WAL (`synchronous = FULL`), as
/// Strata's default durability does. The pool sets `synchronous = NORMAL`
/// on its writer after `prepareDatabase` runs, so FULL is set on the writer
/// again and checked; readers never commit.
func durablePool(path: String, configuration base: Configuration = Configuration()) throws -> DatabasePool {
    var configuration = base
    configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
    let pool = try DatabasePool(path: path, configuration: configuration)
    let synchronous = try pool.writeWithoutTransaction { db in
        try db.execute(sql: "PRAGMA synchronous = FULL")
        return try Int.fetchOne(db, sql: "PRAGMA synchronous")
    }
    guard synchronous == 2 else {
        throw DatabaseError(message: "SQLite's synchronous is \(synchronous ?? -1), not FULL (2)")
    }
    return pool
}

// MARK: query-bench --inheritance: a hierarchy, the same data flat, and GRDB

@Model
class Parcel {
    #Index<Parcel>([\.category])
    var code: Int
    var category: Int
    var weight: Double

    init(code: Int, category: Int, weight: Double) {
        self.code = code
        self.category = category
        self.weight = weight
    }
}

@Model
final class ExpressParcel: Parcel {
    var deadline: Int

    init(code: Int, category: Int, weight: Double, deadline: Int) {
        self.deadline = deadline
        super.init(code: code, category: category, weight: weight)
    }
}

@Model
final class FragileParcel: Parcel {
    var insured: Bool

    init(code: Int, category: Int, weight: Double, insured: Bool) {
        self.insured = insured
        super.init(code: code, category: category, weight: weight)
    }
}

/// The hierarchy's data in one entity, as a single table keeps it: a kind
/// (0 plain, 1 express, 2 fragile) and the subclasses' columns optional.
@Model
final class FlatParcel {
    #Index<FlatParcel>([\.category], [\.kind])
    var kind: Int
    var code: Int
    var category: Int
    var weight: Double
    var deadline: Int?
    var insured: Bool?

    init(kind: Int, code: Int, category: Int, weight: Double, deadline: Int?, insured: Bool?) {
        self.kind = kind
        self.code = code
        self.category = category
        self.weight = weight
        self.deadline = deadline
        self.insured = insured
    }
}

struct ParcelRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "parcel"
    var id: Int64?
    var kind: Int
    var code: Int
    var category: Int
    var weight: Double
    var deadline: Int?
    var insured: Bool?

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

// MARK: model-bench --filing: a to-many filled through its inverse to-one

@Model
final class Shelf {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Memo.shelf) var memos: [Memo] = []

    init(name: String) { self.name = name }
}

@Model
final class Memo {
    var title: String
    var shelf: Shelf?

    init(title: String) { self.title = title }
}

struct ShelfRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "shelf"
    var id: Int64?
    var name: String

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

struct MemoRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "memo"
    var id: Int64?
    var title: String
    var shelfId: Int64?

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}
