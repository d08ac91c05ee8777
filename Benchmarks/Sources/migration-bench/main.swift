import BenchSupport
import Foundation
import GRDB
import Strata

// Migration benchmark (issue 7): a lightweight migration of N rows
// (default 1,000,000) — a renamed attribute, an added attribute with a
// default, a new index — in Strata (opening the container with the new
// schema) and in GRDB (ALTER TABLE … RENAME COLUMN, ADD COLUMN … DEFAULT,
// CREATE INDEX, in one transaction), on the same machine in one run.
//
//     swift run -c release migration-bench [--count N]
//
// Each side loads its store in one child process and migrates it in
// another, so the migration's peak resident memory is its own
// (getrusage's ru_maxrss of the migrating process). The time is what an
// app waits for at launch: opening the store and migrating it, both
// durable (Strata `.full`, SQLite `synchronous = FULL`), not the close.
//
// A second pair of stores takes the same migration without the index:
// a rename and an added attribute with a default, which change only the
// catalog on both sides.

func peakMemoryMiB() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

let count = countArgument(default: 1_000_000)

func child(_ phase: String, _ path: String) throws {
    switch phase {
    case "strata-load":
        var configuration = ModelConfiguration(url: URL(fileURLWithPath: path))
        configuration.recordsHistory = false
        let container = try ModelContainer(for: Schema(versionedSchema: V1.self), configurations: [configuration])
        let context = ModelContext(container)
        for start in stride(from: 0, to: count, by: 100_000) {
            for i in start..<min(count, start + 100_000) {
                context.insert(V1.Product(name: "product \(i)", price: Double(i % 10_000) / 10, stock: i % 500))
            }
            try context.save()
        }
    case "strata-migrate":
        var opened: ModelContainer?
        let time = try seconds {
            opened = try ModelContainer(
                for: Schema(versionedSchema: V2.self), migrationPlan: Plan.self,
                configurations: [ModelConfiguration(url: URL(fileURLWithPath: path))])
        }
        guard let container = opened else { fatalError("no container") }
        let check = try ModelContext(container).fetchCount(FetchDescriptor<V2.Product>(predicate: #Predicate { $0.price < 1 }))
        print("\(time) \(peakMemoryMiB()) \(check)")
    case "strata-migrate-catalog":
        var opened: ModelContainer?
        let time = try seconds {
            opened = try ModelContainer(
                for: Schema(versionedSchema: V2Catalog.self), migrationPlan: CatalogPlan.self,
                configurations: [ModelConfiguration(url: URL(fileURLWithPath: path))])
        }
        guard let container = opened else { fatalError("no container") }
        let check = try ModelContext(container).fetchCount(
            FetchDescriptor<V2Catalog.Product>(predicate: #Predicate { $0.discount == 0 && $0.price < 1 }))
        print("\(time) \(peakMemoryMiB()) \(check)")
    case "grdb-load":
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "PRAGMA journal_mode=WAL")
            try db.execute(
                sql:
                    "CREATE TABLE product (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL, stock INTEGER NOT NULL)"
            )
            let insert = try db.makeStatement(sql: "INSERT INTO product (name, price, stock) VALUES (?, ?, ?)")
            for i in 0..<count {
                try insert.execute(arguments: ["product \(i)", Double(i % 10_000) / 10, i % 500])
            }
        }
    case "grdb-migrate", "grdb-migrate-catalog":
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous=FULL") }
        var opened: DatabaseQueue?
        let time = try seconds {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            opened = queue
            try queue.write { db in
                try db.execute(sql: "ALTER TABLE product RENAME COLUMN name TO title")
                try db.execute(sql: "ALTER TABLE product ADD COLUMN discount REAL NOT NULL DEFAULT 0")
                if phase == "grdb-migrate" { try db.execute(sql: "CREATE INDEX product_price ON product(price)") }
            }
        }
        guard let queue = opened else { fatalError("no queue") }
        let check = try queue.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM product WHERE discount = 0 AND price < 1") ?? 0
        }
        print("\(time) \(peakMemoryMiB()) \(check)")
    default:
        fatalError("unknown phase \(phase)")
    }
}

if let phase = argument("--phase"), let path = argument("--path") {
    try child(phase, path)
    exit(0)
}

func run(_ phase: String, _ path: String) throws -> [String] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = ["--phase", phase, "--path", path, "--count", "\(count)"]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { fatalError("\(phase) failed") }
    return String(decoding: output, as: UTF8.self).split(separator: " ").map {
        $0.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migration-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }
/// Loads a store on each side, migrates both with `phase` (`migrate` or
/// `migrate-catalog`), and returns (time, peak MiB, check count) per side.
func measure(_ phase: String) throws -> (strata: [String], grdb: [String]) {
    let strataPath = directory.appendingPathComponent("strata-\(phase).store").path
    let grdbPath = directory.appendingPathComponent("grdb-\(phase).sqlite").path
    _ = try run("strata-load", strataPath)
    _ = try run("grdb-load", grdbPath)
    let strata = try run("strata-\(phase)", strataPath)
    let grdb = try run("grdb-\(phase)", grdbPath)
    guard strata.count == 3, grdb.count == 3, strata[2] == grdb[2] else {
        fatalError("the two sides disagree: \(strata) vs \(grdb)")
    }
    return (strata, grdb)
}

let full = try measure("migrate")
let catalog = try measure("migrate-catalog")
print(
    "Lightweight migrations of \(count) rows: rename, added attribute with a default and a new index; the same "
        + "without the index (catalog only). \(full.strata[2]) rows with price < 1 after."
)
print("")
print("| workload | Strata | GRDB | GRDB ÷ Strata |")
print("|---|---|---|---|")
ratioRow("migration time (rename, default, index)", Double(full.strata[0])!, Double(full.grdb[0])!)
print("| its peak RSS | \(full.strata[1].prefix(6)) MiB | \(full.grdb[1].prefix(6)) MiB | |")
ratioRow("migration time (rename, default)", Double(catalog.strata[0])!, Double(catalog.grdb[0])!)
print("| its peak RSS | \(catalog.strata[1].prefix(6)) MiB | \(catalog.grdb[1].prefix(6)) MiB | |")
