import BenchSupport
import Foundation
import GRDB
import Strata

// Object-graph benchmark (issue 5): Strata's unique constraints and delete
// rules against GRDB with a UNIQUE column (INSERT … ON CONFLICT DO UPDATE,
// through GRDB's `upsert`) and foreign keys with ON DELETE CASCADE, in one
// run on the same machine, synchronous FULL on both.
//
//     swift run -c release graph-bench [--count N] [--only upsert|cascade|prefetch] [--rounds R]
//
// Workloads:
// - upsert: a store holds N/2 items; N items are upserted in one
//   transaction, the first N/2 matching stored ones (half collide).
// - cascade delete: N/10 owners with 10 parts each; every owner is deleted
//   in one transaction and the parts go with them (Strata: `.cascade` and
//   `delete(model:)`; GRDB: a foreign key ON DELETE CASCADE, indexed, and
//   `DELETE FROM owner`). Each delete is a single transaction on fresh
//   stores, so the workload is repeated R times (default 5), each side on
//   its own new stores, and the median of each side is reported.
// - prefetch: the same graph read back, every owner's parts' weights, with
//   and without `relationshipKeyPathsForPrefetching` (GRDB: owners, then
//   their parts, the two queries of `including(all:)`).

let count = countArgument(default: 100_000)
/// `--only upsert|cascade` runs one workload (for profiling).
let only = argument("--only")
/// `--rounds R`: how many fresh cascade runs the median is taken over.
let rounds = max(1, argument("--rounds").flatMap { Int($0) } ?? 5)
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("graph-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

func sku(_ i: Int) -> String { "SKU-\(i)" }

@MainActor func upsertWorkload() throws -> (Double, Double) {
    // MARK: Upsert, Strata

    let container = try ModelContainer(
        for: StockItem.self, configurations: ModelConfiguration(url: directory.appendingPathComponent("strata.store")))
    do {
        let context = ModelContext(container)
        for i in 0..<count / 2 { context.insert(StockItem(sku: sku(i), quantity: 1, price: 1)) }
        try context.save()
    }
    let strataUpsert = try seconds {
        let context = ModelContext(container)
        for i in 0..<count { context.insert(StockItem(sku: sku(i), quantity: 2, price: Double(i))) }
        try context.save()
    }
    let strataRows = try ModelContext(container).fetchCount(FetchDescriptor<StockItem>())

    // MARK: Upsert, GRDB

    let pool = try durablePool(path: directory.appendingPathComponent("grdb.sqlite").path)
    try pool.write { db in
        try db.create(table: "item") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("sku", .text).notNull().unique()
            t.column("quantity", .integer).notNull()
            t.column("price", .double).notNull()
        }
        for i in 0..<count / 2 {
            var record = StockItemRecord(id: nil, sku: sku(i), quantity: 1, price: 1)
            try record.insert(db)
        }
    }
    let grdbUpsert = try seconds {
        try pool.write { db in
            for i in 0..<count {
                var record = StockItemRecord(id: nil, sku: sku(i), quantity: 2, price: Double(i))
                try record.upsert(db)
            }
        }
    }
    let grdbRows = try pool.read { db in try StockItemRecord.fetchCount(db) }

    guard strataRows == count, grdbRows == count else {
        print("MISMATCH: rows after upsert \(strataRows) (Strata) vs \(grdbRows) (GRDB), expected \(count)")
        exit(1)
    }

    return (strataUpsert, grdbUpsert)
}

/// Strata's timed cascade, a function of its own so that a profiler can
/// collect just it (`valgrind --tool=callgrind --toggle-collect=…strataCascadeDelete…`).
@inline(never) @MainActor func strataCascadeDelete(_ container: ModelContainer) throws {
    let context = ModelContext(container)
    try context.delete(model: Owner.self)
    try context.save()
}

/// N/10 owners with 10 parts each, in a Strata store named `name`.
@MainActor func strataOwnersAndParts(_ name: String) throws -> ModelContainer {
    let owners = count / 10
    let graphContainer = try ModelContainer(
        for: Owner.self, configurations: ModelConfiguration(url: directory.appendingPathComponent("\(name).store")))
    do {
        let context = ModelContext(graphContainer)
        for o in 0..<owners {
            let owner = Owner(name: "owner \(o)")
            owner.parts = (0..<10).map { Part(label: "part \(o)-\($0)", weight: Double($0)) }
            context.insert(owner)
        }
        try context.save()
    }
    return graphContainer
}

/// The same in a GRDB database named `name`: parts point at their owner
/// through an indexed foreign key that cascades.
@MainActor func grdbOwnersAndParts(_ name: String) throws -> DatabasePool {
    let owners = count / 10
    let graphPool = try durablePool(path: directory.appendingPathComponent("\(name).sqlite").path)
    try graphPool.write { db in
        try db.create(table: "owner") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("name", .text).notNull()
        }
        try db.create(table: "part") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("label", .text).notNull()
            t.column("weight", .double).notNull()
            t.belongsTo("owner", onDelete: .cascade)
        }
        for o in 0..<owners {
            try db.execute(sql: "INSERT INTO owner (name) VALUES (?)", arguments: ["owner \(o)"])
            let ownerID = db.lastInsertedRowID
            for p in 0..<10 {
                try db.execute(
                    sql: "INSERT INTO part (label, weight, ownerId) VALUES (?, ?, ?)",
                    arguments: ["part \(o)-\(p)", Double(p), ownerID])
            }
        }
    }
    return graphPool
}

@MainActor func cascadeWorkload(round: Int) throws -> (Double, Double) {
    // MARK: Cascade delete

    let owners = count / 10
    let graphContainer = try strataOwnersAndParts("graph-\(round)")
    let strataPartsBefore = try ModelContext(graphContainer).fetchCount(FetchDescriptor<Part>())
    let strataCascade = try seconds { try strataCascadeDelete(graphContainer) }
    let strataPartsAfter = try ModelContext(graphContainer).fetchCount(FetchDescriptor<Part>())

    let graphPool = try grdbOwnersAndParts("graph-\(round)")

    let grdbPartsBefore = try graphPool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM part") ?? 0 }
    let grdbCascade = try seconds {
        try graphPool.write { db in try db.execute(sql: "DELETE FROM owner") }
    }
    let grdbPartsAfter = try graphPool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM part") ?? 0 }
    guard strataPartsBefore == owners * 10, grdbPartsBefore == owners * 10, strataPartsAfter == 0, grdbPartsAfter == 0 else {
        print(
            "MISMATCH: parts before \(strataPartsBefore)/\(grdbPartsBefore), after \(strataPartsAfter)/\(grdbPartsAfter) "
                + "(Strata/GRDB), expected \(owners * 10) then 0")
        exit(1)
    }

    return (strataCascade, grdbCascade)
}

// MARK: Prefetching

/// N/10 owners with 10 parts each, read back with every part's weight:
/// Strata without and with `relationshipKeyPathsForPrefetching`, GRDB with
/// the two queries `including(all:)` runs (owners, then their parts).
/// Medians of `rounds` runs, each in a fresh context.
@MainActor func prefetchWorkload() throws -> (plain: Double, prefetched: Double, grdb: Double) {
    let owners = count / 10
    let graphContainer = try strataOwnersAndParts("prefetch")
    let graphPool = try grdbOwnersAndParts("prefetch")
    let expected = Double(owners * 45)
    func strata(prefetch: Bool) throws -> Double {
        var total = 0.0
        let time = try seconds {
            let context = ModelContext(graphContainer)
            var descriptor = FetchDescriptor<Owner>()
            if prefetch { descriptor.relationshipKeyPathsForPrefetching = [\.parts] }
            total = try context.fetch(descriptor).reduce(0) { sum, owner in owner.parts.reduce(sum) { $0 + $1.weight } }
        }
        guard total == expected else {
            print("MISMATCH: prefetch \(prefetch) read \(total), expected \(expected)")
            exit(1)
        }
        return time
    }
    func grdb() throws -> Double {
        var total = 0.0
        let time = try seconds {
            try graphPool.read { db in
                let ids = try Int64.fetchAll(db, sql: "SELECT id FROM owner")
                var weights: [Int64: [Double]] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT ownerId, weight FROM part ORDER BY ownerId") {
                    weights[row["ownerId"], default: []].append(row["weight"])
                }
                total = ids.reduce(0) { sum, id in weights[id, default: []].reduce(sum, +) }
            }
        }
        guard total == expected else {
            print("MISMATCH: GRDB read \(total), expected \(expected)")
            exit(1)
        }
        return time
    }
    var plain: [Double] = []
    var prefetched: [Double] = []
    var grdbTimes: [Double] = []
    for _ in 0..<rounds {
        plain.append(try strata(prefetch: false))
        prefetched.append(try strata(prefetch: true))
        grdbTimes.append(try grdb())
    }
    return (plain.sorted()[rounds / 2], prefetched.sorted()[rounds / 2], grdbTimes.sorted()[rounds / 2])
}

print("| workload | Strata | GRDB | ratio (GRDB time / Strata time) |")
print("|---|---|---|---|")
if only == nil || only == "upsert" {
    let (strata, grdb) = try upsertWorkload()
    ratioRow("upsert \(count) rows, half colliding, one transaction", strata, grdb)
}
if only == nil || only == "cascade" {
    let runs = try (0..<rounds).map { try cascadeWorkload(round: $0) }
    let strata = runs.map(\.0).sorted()[rounds / 2]
    let grdb = runs.map(\.1).sorted()[rounds / 2]
    ratioRow("cascade delete \(count / 10) owners × 10 parts, one transaction (median of \(rounds))", strata, grdb)
}
if only == nil || only == "prefetch" {
    let (plain, prefetched, grdb) = try prefetchWorkload()
    ratioRow("read \(count / 10) owners × 10 parts, parts faulted one by one (median of \(rounds))", plain, grdb)
    ratioRow("read \(count / 10) owners × 10 parts, relationshipKeyPathsForPrefetching (median of \(rounds))", prefetched, grdb)
}
