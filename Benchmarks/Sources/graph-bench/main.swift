import Foundation
import GRDB
import Strata

// Object-graph benchmark (issue 5): Strata's unique constraints and delete
// rules against GRDB with a UNIQUE column (INSERT … ON CONFLICT DO UPDATE,
// through GRDB's `upsert`) and foreign keys with ON DELETE CASCADE, in one
// run on the same machine, synchronous FULL on both.
//
//     swift run -c release graph-bench [--count N]
//
// Workloads:
// - upsert: a store holds N/2 items; N items are upserted in one
//   transaction, the first N/2 matching stored ones (half collide).

@Model
final class Item {
    @Attribute(.unique) var sku: String
    var quantity: Int
    var price: Double

    init(sku: String, quantity: Int, price: Double) {
        self.sku = sku
        self.quantity = quantity
        self.price = price
    }
}

struct ItemRecord: Codable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "item"
    var id: Int64?
    var sku: String
    var quantity: Int
    var price: Double

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

var count = 100_000
if let i = CommandLine.arguments.firstIndex(of: "--count"), i + 1 < CommandLine.arguments.count,
    let n = Int(CommandLine.arguments[i + 1])
{
    count = n
}
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("graph-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

func sku(_ i: Int) -> String { "SKU-\(i)" }

// MARK: Upsert, Strata

let container = try ModelContainer(
    for: Item.self, configurations: ModelConfiguration(url: directory.appendingPathComponent("strata.store")))
do {
    let context = ModelContext(container)
    for i in 0..<count / 2 { context.insert(Item(sku: sku(i), quantity: 1, price: 1)) }
    try context.save()
}
let strataUpsert = try seconds {
    let context = ModelContext(container)
    for i in 0..<count { context.insert(Item(sku: sku(i), quantity: 2, price: Double(i))) }
    try context.save()
}
let strataRows = try ModelContext(container).fetchCount(FetchDescriptor<Item>())

// MARK: Upsert, GRDB

var configuration = Configuration()
configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
let pool = try DatabasePool(path: directory.appendingPathComponent("grdb.sqlite").path, configuration: configuration)
try pool.write { db in
    try db.create(table: "item") { t in
        t.autoIncrementedPrimaryKey("id")
        t.column("sku", .text).notNull().unique()
        t.column("quantity", .integer).notNull()
        t.column("price", .double).notNull()
    }
    for i in 0..<count / 2 {
        var record = ItemRecord(id: nil, sku: sku(i), quantity: 1, price: 1)
        try record.insert(db)
    }
}
let grdbUpsert = try seconds {
    try pool.write { db in
        for i in 0..<count {
            var record = ItemRecord(id: nil, sku: sku(i), quantity: 2, price: Double(i))
            try record.upsert(db)
        }
    }
}
let grdbRows = try pool.read { db in try ItemRecord.fetchCount(db) }

guard strataRows == count, grdbRows == count else {
    print("MISMATCH: rows after upsert \(strataRows) (Strata) vs \(grdbRows) (GRDB), expected \(count)")
    exit(1)
}

func row(_ name: String, _ strata: Double, _ grdb: Double) {
    let ratio = String(format: "%.2f×", grdb / strata)
    print("| \(name) | \(String(format: "%.3f s", strata)) | \(String(format: "%.3f s", grdb)) | \(ratio) |")
}
print("| workload | Strata | GRDB | ratio (GRDB time / Strata time) |")
print("|---|---|---|---|")
row("upsert \(count) rows, half colliding, one transaction", strataUpsert, grdbUpsert)
