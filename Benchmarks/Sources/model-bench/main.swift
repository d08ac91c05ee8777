import BenchSupport
import Foundation
import GRDB
import Strata

// Model-layer benchmark: Strata's @Model objects against GRDB Codable
// records of the same fields, in one run on the same machine.
//
//     swift run -c release model-bench [--count N] [--profile-fetch]
//
// Workloads (issue 4): insert N objects with one save; fetch all N in a new
// context; fetch N/5 by identifier in a new context. Inserts run once; the
// read workloads report the median of five runs, each in a fresh context.
// Then the write workloads of issue 27 (Writes.swift), with `--writes-only`
// alone. Then filing memos into shelves (Filing.swift), with
// `--filing-only` alone. `--profile-saves S` only makes S durable one-object saves on a
// store of N tickets and exits, for `perf record`, `strace` or callgrind;
// `--profile-updates R` makes R fetch-modify-saves of a tenth of them
// (`--partial`: the fetches name only the attribute the change reads in
// `propertiesToFetch`).
// `--profile-filing K` runs Strata's filing shape K alone (0: one shelf,
// 1: one shelf loaded, 2: a shelf per memo).
// `--profile-lookups R` repeats the scale curve's fetches by identifier.
// `--scale strata|grdb` runs one side of the scale curve (Scale.swift).
// `--profile-fetch` only repeats Strata's fetch-all 20 times and exits, for
// `perf record` or callgrind.

let count = countArgument(default: 100_000)
let lookups = count / 5
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("model-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }
if let saves = argument("--profile-saves").flatMap({ Int($0) }) {
    try profileSingleSaves(count: count, saves: saves, in: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if let rounds = argument("--profile-updates").flatMap({ Int($0) }) {
    try profileUpdates(
        count: count, rounds: rounds, partial: CommandLine.arguments.contains("--partial"), in: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if let rounds = argument("--profile-lookups").flatMap({ Int($0) }) {
    try profileLookups(count: count, rounds: rounds, in: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if let shape = argument("--profile-filing").flatMap({ Int($0) }) {
    guard (0...2).contains(shape) else {
        print("--profile-filing takes 0, 1 or 2")
        exit(2)
    }
    let figures = try strataFiling(count: count, shapes: [shape], in: directory)
    print(String(format: "shape %d: %.3f s", shape, [figures.oneShelf, figures.oneShelfLoaded, figures.manyShelves][shape]))
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if let side = argument("--scale") {
    try scaleWorkloads(side: side, count: count, in: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if CommandLine.arguments.contains("--filing-only") {
    print("| workload | Strata | GRDB | ratio (GRDB time / Strata time) |")
    print("|---|---|---|---|")
    try filingWorkloads(count: count, in: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}
if CommandLine.arguments.contains("--writes-only") {
    print("| workload (\(count) objects) | Strata | GRDB | ratio (GRDB time / Strata time) |")
    print("|---|---|---|---|")
    try writeWorkloads(count: count, in: directory)
    try? FileManager.default.removeItem(at: directory)
    exit(0)
}

let base = Date(timeIntervalSinceReferenceDate: 700_000_000)
func fields(_ i: Int) -> (String, String, Int, Double, Date, Bool) {
    ("Person \(i)", "person\(i)@example.com", 18 + i % 60, Double(i % 1000) / 10, base.addingTimeInterval(Double(i)), i % 3 != 0)
}
var lookupOrder = Array(0..<count)
var generator = SeededRandom(seed: 42)
lookupOrder.shuffle(using: &generator)
lookupOrder = Array(lookupOrder.prefix(lookups))

// Strata
let strataURL = directory.appendingPathComponent("strata.store")
let container = try ModelContainer(for: Person.self, configurations: ModelConfiguration(url: strataURL))
var identifiers: [PersistentIdentifier] = []
let strataInsert = try seconds {
    let context = ModelContext(container)
    for i in 0..<count {
        let f = fields(i)
        let person = Person(name: f.0, email: f.1, age: f.2, score: f.3, joined: f.4, active: f.5)
        context.insert(person)
        identifiers.append(person.persistentModelID)
    }
    try context.save()
}
var strataChecksum = 0
let strataFetchAll = try median {
    let people = try ModelContext(container).fetch(FetchDescriptor<Person>())
    strataChecksum = people.reduce(0) { $0 &+ $1.age }
}
if CommandLine.arguments.contains("--profile-fetch") {
    for _ in 0..<20 {
        let people = try ModelContext(container).fetch(FetchDescriptor<Person>())
        strataChecksum = people.reduce(0) { $0 &+ $1.age }
    }
    exit(0)
}
var strataFound = 0
let strataFetchByID = try median {
    let context = ModelContext(container)
    strataFound = 0
    for i in lookupOrder {
        let person: Person? = try context.existingModel(for: identifiers[i])
        strataFound += person?.age ?? 0
    }
}

// GRDB
let pool = try durablePool(path: directory.appendingPathComponent("grdb.sqlite").path)
try pool.write { db in
    try db.create(table: "person") { t in
        t.autoIncrementedPrimaryKey("id")
        t.column("name", .text).notNull()
        t.column("email", .text).notNull()
        t.column("age", .integer).notNull()
        t.column("score", .double).notNull()
        t.column("joined", .datetime).notNull()
        t.column("active", .boolean).notNull()
    }
}
var rowIDs: [Int64] = []
let grdbInsert = try seconds {
    try pool.write { db in
        for i in 0..<count {
            let f = fields(i)
            var record = PersonRecord(id: nil, name: f.0, email: f.1, age: f.2, score: f.3, joined: f.4, active: f.5)
            try record.insert(db)
            rowIDs.append(record.id ?? 0)
        }
    }
}
var grdbChecksum = 0
let grdbFetchAll = try median {
    let people = try pool.read { db in try PersonRecord.fetchAll(db) }
    grdbChecksum = people.reduce(0) { $0 &+ $1.age }
}
var grdbFound = 0
let grdbFetchByID = try median {
    grdbFound = 0
    try pool.read { db in
        for i in lookupOrder { grdbFound += try PersonRecord.fetchOne(db, key: rowIDs[i])?.age ?? 0 }
    }
}

guard strataChecksum == grdbChecksum, strataFound == grdbFound else {
    print("MISMATCH: checksums \(strataChecksum) vs \(grdbChecksum), lookups \(strataFound) vs \(grdbFound)")
    exit(1)
}

print("| workload (\(count) objects) | Strata | GRDB | ratio (GRDB time / Strata time) |")
print("|---|---|---|---|")
ratioRow("insert, one save", strataInsert, grdbInsert)
ratioRow("fetch all", strataFetchAll, grdbFetchAll)
ratioRow("fetch \(lookups) by identifier", strataFetchByID, grdbFetchByID)
try writeWorkloads(count: count, in: directory)
try filingWorkloads(count: count, in: directory)
