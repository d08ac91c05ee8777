import BenchSupport
import Foundation
import GRDB
import Strata

// Live results (issue 43): how soon an observer has the new value after a
// save returns, and what observers of other tables cost a writer; against
// GRDB's `ValueObservation` on a `DatabasePool`, in one run.
//
//     swift run -c release live-bench [--saves N] [--observers K]
//
// - latency, one process: a writer saves one `Ticket` of bucket 0 at a
//   time; an observer of the count of bucket 0 (Strata: `liveCount` in a
//   task of its own; GRDB: `ValueObservation.tracking` scheduled on a
//   queue of its own) records when each new count arrives. Latency is
//   from the save's return to the arrival (0 when the value arrived
//   before the save returned). N saves (default 300).
// - latency, another process: this program started again as a writer
//   process saves N tickets 5 ms apart and prints when each save
//   returned (wall clock); the observer here records when each count
//   arrived.
// - throughput: N × 10 single-ticket saves with 0 and with K (default
//   100) observers of another entity (`Item`), five rounds alternating,
//   medians.
//
// Both engines run with durability `normal` (GRDB's pool default,
// `synchronous = NORMAL`): the cost measured is the notification's, not
// the disk's.

let saves = argument("--saves").flatMap { Int($0) } ?? 300
let observerCount = argument("--observers").flatMap { Int($0) } ?? 100

/// Wall-clock seconds since 1970, comparable between processes.
func now() -> Double { Date().timeIntervalSince1970 }

// MARK: The writer process (`live-bench --writer strata|grdb PATH N`)

if let engine = argument("--writer") {
    let arguments = CommandLine.arguments
    let path = arguments[arguments.count - 2]
    let count = Int(arguments[arguments.count - 1]) ?? 0
    var out = ""
    if engine == "strata" {
        var configuration = ModelConfiguration(url: URL(fileURLWithPath: path))
        configuration.durability = .normal
        let container = try ModelContainer(for: Ticket.self, Item.self, configurations: configuration)
        let context = ModelContext(container)
        for i in 0..<count {
            context.insert(Ticket(number: 1_000_000 + i, bucket: 0, title: "remote", opened: Date()))
            try context.save()
            out += "\(i) \(now())\n"
            usleep(5_000)
        }
    } else {
        let pool = try DatabasePool(path: path)
        for i in 0..<count {
            try pool.write { db in
                var record = TicketRecord(id: nil, number: 1_000_000 + i, bucket: 0, title: "remote", opened: Date())
                try record.insert(db)
            }
            out += "\(i) \(now())\n"
            usleep(5_000)
        }
    }
    FileHandle.standardOutput.write(Data(out.utf8))
    exit(0)
}

// MARK: Shared

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("live-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

/// Values an observer received, with their arrival times; guarded by `lock`.
final class Arrivals: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [(count: Int, at: Double)] = []  // guarded by lock
    let arrived = DispatchSemaphore(value: 0)

    func add(_ count: Int) {
        lock.withLock { values.append((count, now())) }
        arrived.signal()
    }

    var all: [(count: Int, at: Double)] { lock.withLock { values } }

    /// When the first value of at least `count` arrived.
    func arrival(of count: Int) -> Double? { all.first { $0.count >= count }?.at }

    /// Waits (up to 10 s) for a value of at least `count`.
    func wait(for count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if all.contains(where: { $0.count >= count }) { return true }
            _ = arrived.wait(timeout: .now() + .milliseconds(50))
        }
        return false
    }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func ms(_ s: Double) -> String { String(format: "%.3f ms", s * 1000) }

func strataContainer(_ name: String) throws -> ModelContainer {
    var configuration = ModelConfiguration(url: directory.appendingPathComponent(name))
    configuration.durability = .normal
    return try ModelContainer(for: Ticket.self, Item.self, configurations: configuration)
}

func grdbPool(_ name: String) throws -> DatabasePool {
    let pool = try DatabasePool(path: directory.appendingPathComponent(name).path)
    try pool.write { db in
        try TicketRecord.createTable(db)
        try db.create(table: ItemRecord.databaseTableName) { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("code", .integer).notNull()
            t.column("category", .integer).notNull()
            t.column("tag", .text).notNull()
            t.column("score", .double).notNull()
            t.column("flag", .boolean).notNull()
            t.column("note", .text).notNull()
        }
    }
    return pool
}

let bucketZero = FetchDescriptor<Ticket>(predicate: #Predicate { $0.bucket == 0 })

/// Observes the count of bucket 0 in `container` from a task with a
/// context of its own.
func observeStrata(_ container: ModelContainer, into arrivals: Arrivals) -> Task<Void, Never> {
    Task.detached {
        let context = ModelContext(container)
        do {
            for try await count in context.liveCount(bucketZero) { arrivals.add(count) }
        } catch {
            print("FAILED: \(error)")
            exit(1)
        }
    }
}

func observeGRDB(_ pool: DatabasePool, into arrivals: Arrivals) -> AnyDatabaseCancellable {
    ValueObservation.tracking { db in try TicketRecord.filter(Column("bucket") == 0).fetchCount(db) }
        .start(
            in: pool, scheduling: .async(onQueue: DispatchQueue(label: "observer")),
            onError: { error in
                print("FAILED: \(error)")
                exit(1)
            }, onChange: { arrivals.add($0) })
}

// MARK: Latency in one process

func latencies(save: (Int) throws -> Void, arrivals: Arrivals) throws -> [Double] {
    guard arrivals.wait(for: 0) else { throw CancellationError() }
    var result: [Double] = []
    for i in 0..<saves {
        try save(i)
        let returned = now()
        guard arrivals.wait(for: i + 1), let at = arrivals.arrival(of: i + 1) else {
            print("FAILED: no value for save \(i)")
            exit(1)
        }
        result.append(max(0, at - returned))
    }
    return result
}

let strataArrivals = Arrivals()
let strataStore = try strataContainer("latency.store")
let strataTask = observeStrata(strataStore, into: strataArrivals)
let writer = ModelContext(strataStore)
let strataLatency = try latencies(
    save: { i in
        writer.insert(Ticket(number: i, bucket: 0, title: "local", opened: Date()))
        try writer.save()
    }, arrivals: strataArrivals)
strataTask.cancel()

let grdbArrivals = Arrivals()
let pool = try grdbPool("latency.sqlite")
let grdbObservation = observeGRDB(pool, into: grdbArrivals)
let grdbLatency = try latencies(
    save: { i in
        try pool.write { db in
            var record = TicketRecord(id: nil, number: i, bucket: 0, title: "local", opened: Date())
            try record.insert(db)
        }
    }, arrivals: grdbArrivals)
grdbObservation.cancel()

print("| save → observer's new value | Strata p50 / p99 | GRDB p50 / p99 |")
print("|---|---|---|")
print(
    "| one process (\(saves) saves) | \(ms(percentile(strataLatency, 0.5))) / \(ms(percentile(strataLatency, 0.99))) | "
        + "\(ms(percentile(grdbLatency, 0.5))) / \(ms(percentile(grdbLatency, 0.99))) |")

// MARK: Latency from another process

/// Runs this program as a writer process of `engine` on `path`; returns
/// when each save returned there.
func remoteWriter(_ engine: String, path: String, count: Int) throws -> [Double] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = ["--writer", engine, path, "\(count)"]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        print("FAILED: the \(engine) writer process exited with \(process.terminationStatus)")
        exit(1)
    }
    return String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { line in
        line.split(separator: " ").last.flatMap { Double($0) }
    }
}

let remoteSaves = min(saves, 200)
let remoteStore = try strataContainer("remote.store")
let remoteArrivals = Arrivals()
let remoteTask = observeStrata(remoteStore, into: remoteArrivals)
_ = remoteArrivals.wait(for: 0)
let returnedThere = try remoteWriter(
    "strata", path: directory.appendingPathComponent("remote.store").path, count: remoteSaves)
_ = remoteArrivals.wait(for: remoteSaves)
let remoteLatency = returnedThere.enumerated().compactMap { i, returned in
    remoteArrivals.arrival(of: i + 1).map { max(0, $0 - returned) }
}
remoteTask.cancel()
let strataSeen = remoteLatency.count

let grdbRemoteArrivals = Arrivals()
let grdbRemotePool = try grdbPool("remote.sqlite")
let grdbRemoteObservation = observeGRDB(grdbRemotePool, into: grdbRemoteArrivals)
_ = grdbRemoteArrivals.wait(for: 0)
_ = try remoteWriter("grdb", path: directory.appendingPathComponent("remote.sqlite").path, count: remoteSaves)
Thread.sleep(forTimeInterval: 0.2)
let grdbSeen = grdbRemoteArrivals.all.count - 1
grdbRemoteObservation.cancel()
let grdbRemoteCell =
    grdbSeen == 0 ? "no value (saw 0 of \(remoteSaves) saves)" : "\(grdbSeen) values for \(remoteSaves) saves"
print(
    "| another process (\(remoteSaves) saves, \(strataSeen) observed) | "
        + "\(ms(percentile(remoteLatency, 0.5))) / \(ms(percentile(remoteLatency, 0.99))) | \(grdbRemoteCell) |")

// MARK: Throughput with observers of another entity

let throughputSaves = saves * 10

func strataThroughput(observers: Int, round: Int) throws -> Double {
    let container = try strataContainer("throughput-\(observers)-\(round).store")
    let unrelated = FetchDescriptor<Item>(predicate: #Predicate { $0.category == 7 })
    let started = Arrivals()
    let tasks = (0..<observers).map { _ in
        Task.detached {
            let context = ModelContext(container)
            do {
                for try await items in context.liveResults(unrelated) { started.add(items.count) }
            } catch {
                print("FAILED: \(error)")
                exit(1)
            }
        }
    }
    while started.all.count < observers { _ = started.arrived.wait(timeout: .now() + .milliseconds(10)) }
    let context = ModelContext(container)
    let elapsed = try seconds {
        for i in 0..<throughputSaves {
            context.insert(Ticket(number: i, bucket: i % 10, title: "t", opened: Date()))
            try context.save()
        }
    }
    for task in tasks { task.cancel() }
    guard started.all.count == observers else {
        print("FAILED: observers of Item got \(started.all.count - observers) values from Ticket saves")
        exit(1)
    }
    return Double(throughputSaves) / elapsed
}

func grdbThroughput(observers: Int, round: Int) throws -> Double {
    let pool = try grdbPool("throughput-\(observers)-\(round).sqlite")
    let started = Arrivals()
    let observations = (0..<observers).map { _ in
        ValueObservation.tracking { db in try ItemRecord.filter(Column("category") == 7).fetchAll(db) }
            .start(
                in: pool, scheduling: .async(onQueue: DispatchQueue(label: "observer")),
                onError: { error in
                    print("FAILED: \(error)")
                    exit(1)
                }, onChange: { started.add($0.count) })
    }
    while started.all.count < observers { _ = started.arrived.wait(timeout: .now() + .milliseconds(10)) }
    let elapsed = try seconds {
        for i in 0..<throughputSaves {
            try pool.write { db in
                var record = TicketRecord(id: nil, number: i, bucket: i % 10, title: "t", opened: Date())
                try record.insert(db)
            }
        }
    }
    for observation in observations { observation.cancel() }
    return Double(throughputSaves) / elapsed
}

var rates: [String: [Double]] = [:]
for round in 0..<5 {
    for observers in [0, observerCount] {
        rates["strata-\(observers)", default: []].append(try strataThroughput(observers: observers, round: round))
        rates["grdb-\(observers)", default: []].append(try grdbThroughput(observers: observers, round: round))
    }
}
let strataBare = percentile(rates["strata-0"] ?? [0], 0.5)
let strataObserved = percentile(rates["strata-\(observerCount)"] ?? [0], 0.5)
let grdbBare = percentile(rates["grdb-0"] ?? [0], 0.5)
let grdbObserved = percentile(rates["grdb-\(observerCount)"] ?? [0], 0.5)
print()
print("| \(throughputSaves) saves, durability normal | Strata saves/s | GRDB saves/s |")
print("|---|---|---|")
print("| no observer | \(Int(strataBare)) | \(Int(grdbBare)) |")
print("| \(observerCount) observers of another entity | \(Int(strataObserved)) | \(Int(grdbObserved)) |")
print(
    "| cost of the observers | \(String(format: "%.1f%%", (1 - strataObserved / strataBare) * 100)) | "
        + "\(String(format: "%.1f%%", (1 - grdbObserved / grdbBare) * 100)) |")
