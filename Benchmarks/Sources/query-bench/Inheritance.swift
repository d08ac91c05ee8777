import BenchSupport
import Foundation
import GRDB
import Strata

// `query-bench --inheritance [--count N]`: what a hierarchy costs. N
// parcels, a third each plain, express and fragile, stored three ways: as
// a Strata hierarchy (a tree per class), as one flat Strata entity with a
// kind attribute, and as one GRDB table with a kind column (how Core Data
// and SwiftData keep a hierarchy). Each figure is the median of 15 runs.

/// Runs the inheritance workloads and prints their table.
func runInheritance(count: Int, directory: URL) throws {
    let tree = try ModelContainer(
        for: Parcel.self, ExpressParcel.self, FragileParcel.self,
        configurations: ModelConfiguration(url: directory.appendingPathComponent("tree.store")))
    let flat = try ModelContainer(
        for: FlatParcel.self, configurations: ModelConfiguration(url: directory.appendingPathComponent("flat.store")))
    let pool = try durablePool(path: directory.appendingPathComponent("parcels.sqlite").path)
    try pool.write { db in
        try db.create(table: "parcel") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("kind", .integer).notNull().indexed()
            t.column("code", .integer).notNull()
            t.column("category", .integer).notNull().indexed()
            t.column("weight", .double).notNull()
            t.column("deadline", .integer)
            t.column("insured", .boolean)
        }
    }
    do {
        let treeContext = ModelContext(tree)
        let flatContext = ModelContext(flat)
        try pool.write { db in
            for i in 0..<count {
                let (kind, category, weight) = (i % 3, i % 1000, Double(i % 97))
                switch kind {
                case 0: treeContext.insert(Parcel(code: i, category: category, weight: weight))
                case 1: treeContext.insert(ExpressParcel(code: i, category: category, weight: weight, deadline: i % 48))
                default: treeContext.insert(FragileParcel(code: i, category: category, weight: weight, insured: i % 2 == 0))
                }
                let deadline = kind == 1 ? i % 48 : nil
                let insured = kind == 2 ? i % 2 == 0 : nil
                flatContext.insert(
                    FlatParcel(kind: kind, code: i, category: category, weight: weight, deadline: deadline, insured: insured))
                var record = ParcelRecord(
                    id: nil, kind: kind, code: i, category: category, weight: weight, deadline: deadline, insured: insured)
                try record.insert(db)
            }
        }
        try treeContext.save()
        try flatContext.save()
    }
    var generator = SeededRandom(seed: 11)
    let categories = (0..<200).map { _ in Int(generator.next() % 1000) }

    print("| workload (\(count) parcels, 3 classes) | hierarchy | flat, kind attribute | GRDB, kind column |")
    print("|---|---|---|---|")
    func median(_ body: () throws -> Int) throws -> (Double, Int) {
        var times: [Double] = []
        var result = 0
        for _ in 0..<15 { times.append(try seconds { result = try body() }) }
        return (times.sorted()[times.count / 2], result)
    }
    func row(_ name: String, tree: () throws -> Int, flat: () throws -> Int, grdb: () throws -> Int) throws {
        let (a, x) = try median(tree)
        let (b, y) = try median(flat)
        let (c, z) = try median(grdb)
        let shown = [a, b, c].map { String(format: "%.2f ms", $0 * 1000) }
        print("| \(name) | \(shown[0]) | \(shown[1]) | \(shown[2]) |" + (x == y && y == z ? "" : " mismatch \(x) \(y) \(z)"))
    }

    try row(
        "fetch every parcel",
        tree: { try ModelContext(tree).fetch(FetchDescriptor<Parcel>()).count },
        flat: { try ModelContext(flat).fetch(FetchDescriptor<FlatParcel>()).count },
        grdb: { try pool.read { try ParcelRecord.fetchAll($0).count } })
    try row(
        "fetch one subclass (a third)",
        tree: { try ModelContext(tree).fetch(FetchDescriptor<ExpressParcel>()).count },
        flat: { try ModelContext(flat).fetch(FetchDescriptor<FlatParcel>(predicate: #Predicate { $0.kind == 1 })).count },
        grdb: { try pool.read { try ParcelRecord.filter(Column("kind") == 1).fetchAll($0).count } })
    try row(
        "200 indexed equality queries, every class",
        tree: {
            let context = ModelContext(tree)
            return try categories.reduce(0) { sum, category in
                sum + (try context.fetch(FetchDescriptor<Parcel>(predicate: #Predicate { $0.category == category })).count)
            }
        },
        flat: {
            let context = ModelContext(flat)
            return try categories.reduce(0) { sum, category in
                sum + (try context.fetch(FetchDescriptor<FlatParcel>(predicate: #Predicate { $0.category == category })).count)
            }
        },
        grdb: {
            try pool.read { db in
                try categories.reduce(0) { $0 + (try ParcelRecord.filter(Column("category") == $1).fetchAll(db).count) }
            }
        })
    try row(
        "200 sorted top-20 fetches, every class",
        tree: {
            let context = ModelContext(tree)
            var descriptor = FetchDescriptor<Parcel>(sortBy: [SortDescriptor(\.category, order: .reverse)])
            descriptor.fetchLimit = 20
            return try (0..<200).reduce(0) { sum, _ in sum + (try context.fetch(descriptor).count) }
        },
        flat: {
            let context = ModelContext(flat)
            var descriptor = FetchDescriptor<FlatParcel>(sortBy: [SortDescriptor(\.category, order: .reverse)])
            descriptor.fetchLimit = 20
            return try (0..<200).reduce(0) { sum, _ in sum + (try context.fetch(descriptor).count) }
        },
        grdb: {
            try pool.read { db in
                try (0..<200).reduce(0) { sum, _ in
                    sum + (try ParcelRecord.order(Column("category").desc).limit(20).fetchAll(db).count)
                }
            }
        })
    try row(
        "200 type checks with an indexed condition",
        tree: {
            let context = ModelContext(tree)
            return try categories.reduce(0) { sum, category in
                sum
                    + (try context.fetchCount(
                        FetchDescriptor<Parcel>(predicate: #Predicate { $0 is FragileParcel && $0.category == category })))
            }
        },
        flat: {
            let context = ModelContext(flat)
            return try categories.reduce(0) { sum, category in
                sum
                    + (try context.fetchCount(
                        FetchDescriptor<FlatParcel>(predicate: #Predicate { $0.kind == 2 && $0.category == category })))
            }
        },
        grdb: {
            try pool.read { db in
                try categories.reduce(0) {
                    $0 + (try ParcelRecord.filter(Column("kind") == 2 && Column("category") == $1).fetchCount(db))
                }
            }
        })
}
