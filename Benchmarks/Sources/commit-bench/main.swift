import BenchSupport
import Foundation
import GRDB
import Strata

// Concurrent durable saves (issue 27): S savers at once, each its own
// `ModelContext` on its own thread, each save one small model with
// durability `full`; against GRDB as people run it, one `DatabasePool`
// per process shared by the savers (`synchronous = FULL` set after the
// pool opens and checked), and beside it GRDB with one connection per
// saver (`DatabaseQueue`, WAL, `synchronous = FULL`, checked; busy
// timeout), which makes SQLite serialize the savers on its file lock.
// Throughput and per-save latency (p50, p99), in one run; the ratio is
// against the pool.
//
//     swift run -c release commit-bench [--saves N] [--savers 1,4,16,64] [--strata-only]
//
// Each level makes N saves in all (default 1,280), split evenly between
// its savers, on a fresh store of each engine. `--strata-only` skips GRDB
// (for `perf record`).

let totalSaves = argument("--saves").flatMap { Int($0) } ?? 1_280
let levels = (argument("--savers") ?? "1,4,16,64").split(separator: ",").compactMap { Int($0) }
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("commit-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

/// Per-save latencies of all savers, guarded by `lock`.
final class Latencies: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Double] = []  // guarded by lock
    private var failures: [String] = []  // guarded by lock

    func add(_ batch: [Double]) { lock.withLock { values += batch } }
    func fail(_ error: Error) { lock.withLock { failures.append("\(error)") } }
    var all: [Double] { lock.withLock { values.sorted() } }
    var firstFailure: String? { lock.withLock { failures.first } }
}

struct LevelResult {
    var seconds: Double
    var p50: Double
    var p99: Double
    var savesPerSecond: Double
}

/// Runs `savers` threads, each calling `save(saver, i)` `each` times, and
/// times every call.
func runLevel(savers: Int, each: Int, _ save: @escaping @Sendable (Int, Int) throws -> Void) throws -> LevelResult {
    let latencies = Latencies()
    let group = DispatchGroup()
    let start = ContinuousClock.now
    for saver in 0..<savers {
        group.enter()
        Thread {
            defer { group.leave() }
            var own: [Double] = []
            own.reserveCapacity(each)
            do {
                for i in 0..<each {
                    own.append(try seconds { try save(saver, i) })
                }
            } catch {
                latencies.fail(error)
            }
            latencies.add(own)
        }.start()
    }
    group.wait()
    let elapsed = ContinuousClock.now - start
    if let failure = latencies.firstFailure {
        print("FAILED: \(failure)")
        exit(1)
    }
    let total = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let all = latencies.all
    return LevelResult(
        seconds: total, p50: all[all.count / 2], p99: all[min(all.count - 1, all.count * 99 / 100)],
        savesPerSecond: Double(all.count) / total)
}

func strataLevel(savers: Int, each: Int, round: Int) throws -> LevelResult {
    let url = directory.appendingPathComponent("strata-\(savers)-\(round).store")
    let container = try ModelContainer(for: Ticket.self, configurations: ModelConfiguration(url: url))
    let result = try runLevel(savers: savers, each: each) { saver, i in
        // Each saver's context lives on its thread, as a request handler's
        // would; made once, like a `@ModelActor`'s.
        let context = StrataContexts.context(for: saver, container: container)
        let number = saver * 1_000_000 + i
        context.insert(Ticket(number: number, bucket: number % 10, title: "Ticket \(number)", opened: Date()))
        try context.save()
    }
    StrataContexts.reset()
    let count = try ModelContext(container).fetchCount(FetchDescriptor<Ticket>())
    guard count == savers * each else {
        print("MISMATCH: Strata holds \(count) tickets, expected \(savers * each)")
        exit(1)
    }
    return result
}

/// One context per saver thread, created on first use.
enum StrataContexts {
    nonisolated(unsafe) private static var contexts: [Int: ModelContext] = [:]  // guarded by lock
    private static let lock = NSLock()

    static func context(for saver: Int, container: ModelContainer) -> ModelContext {
        lock.withLock {
            if let context = contexts[saver] { return context }
            let context = ModelContext(container)
            context.autosaveEnabled = false
            contexts[saver] = context
            return context
        }
    }

    static func reset() { lock.withLock { contexts = [:] } }
}

/// GRDB as a server uses it: one `DatabasePool`, whose writer the savers
/// take turns on.
func grdbPoolLevel(savers: Int, each: Int, round: Int) throws -> LevelResult {
    let path = directory.appendingPathComponent("pool-\(savers)-\(round).sqlite").path
    let pool = try durablePool(path: path)
    try pool.write { db in try TicketRecord.createTable(db) }
    let result = try runLevel(savers: savers, each: each) { saver, i in
        let number = saver * 1_000_000 + i
        try pool.write { db in
            var record = TicketRecord(id: nil, number: number, bucket: number % 10, title: "Ticket \(number)", opened: Date())
            try record.insert(db)
        }
    }
    let count = try pool.read { db in try TicketRecord.fetchCount(db) }
    guard count == savers * each else {
        print("MISMATCH: the GRDB pool holds \(count) tickets, expected \(savers * each)")
        exit(1)
    }
    return result
}

func grdbLevel(savers: Int, each: Int, round: Int) throws -> LevelResult {
    let path = directory.appendingPathComponent("grdb-\(savers)-\(round).sqlite").path
    // The schema, through a first connection.
    let setup = try grdbConnection(path)
    try setup.write { db in
        try TicketRecord.createTable(db)
    }
    let connections = try (0..<savers).map { _ in try grdbConnection(path) }
    let result = try runLevel(savers: savers, each: each) { saver, i in
        let number = saver * 1_000_000 + i
        try connections[saver].write { db in
            var record = TicketRecord(id: nil, number: number, bucket: number % 10, title: "Ticket \(number)", opened: Date())
            try record.insert(db)
        }
    }
    let count = try setup.read { db in try TicketRecord.fetchCount(db) }
    guard count == savers * each else {
        print("MISMATCH: GRDB holds \(count) tickets, expected \(savers * each)")
        exit(1)
    }
    return result
}

/// One connection of its own: WAL, `synchronous = FULL` (checked), and a
/// busy timeout long enough for every other saver's turn.
func grdbConnection(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(60)
    configuration.prepareDatabase { db in
        try db.execute(sql: "PRAGMA journal_mode = WAL")
        try db.execute(sql: "PRAGMA synchronous = FULL")
    }
    let queue = try DatabaseQueue(path: path, configuration: configuration)
    let level = try queue.read { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    guard level == 2 else { throw DatabaseError(message: "synchronous is \(level ?? -1), not FULL (2)") }
    return queue
}

func ms(_ s: Double) -> String { String(format: "%.2f ms", s * 1000) }

print(
    "| savers | Strata saves/s | GRDB pool saves/s | ratio | GRDB connection per saver saves/s | ratio "
        + "| Strata p50 / p99 | GRDB pool p50 / p99 |")
print("|---|---|---|---|---|---|---|---|")
for (round, savers) in levels.enumerated() {
    let each = max(1, totalSaves / savers)
    let strata = try strataLevel(savers: savers, each: each, round: round)
    if CommandLine.arguments.contains("--strata-only") {
        print("| \(savers) | \(Int(strata.savesPerSecond)) | | | | | \(ms(strata.p50)) / \(ms(strata.p99)) | |")
        continue
    }
    let pool = try grdbPoolLevel(savers: savers, each: each, round: round)
    let grdb = try grdbLevel(savers: savers, each: each, round: round)
    let ratio = String(format: "%.2f×", strata.savesPerSecond / pool.savesPerSecond)
    let perSaver = String(format: "%.2f×", strata.savesPerSecond / grdb.savesPerSecond)
    print(
        "| \(savers) | \(Int(strata.savesPerSecond)) | \(Int(pool.savesPerSecond)) | \(ratio) | "
            + "\(Int(grdb.savesPerSecond)) | \(perSaver) | \(ms(strata.p50)) / \(ms(strata.p99)) | "
            + "\(ms(pool.p50)) / \(ms(pool.p99)) |")
}
