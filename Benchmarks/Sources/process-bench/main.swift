// process-bench: several processes on one store, on StrataEngine and on
// SQLite through GRDB's DatabasePool (WAL), and prints a markdown report.
//
//     swift run -c release process-bench [--writers N] [--commits M] [--readers R]
//
// Each writer process makes M durable commits of one put (durability
// `full`, SQLite `synchronous = FULL`), all writers at once; each reader
// process meanwhile runs point reads, one read transaction each, as request
// handlers of a server would. The report gives the writers' total commit
// rate and the readers' read rate while the writers run.

import Foundation
import GRDB
import StrataEngine

#if canImport(Glibc)
    import Glibc
#endif

let preloaded = 10_000

func key(_ i: Int) -> [UInt8] { Array(String(format: "key%08d", i).utf8) }
func value(_ i: Int) -> [UInt8] { [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 100) }

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("process-bench: \(text)\n".utf8))
    exit(1)
}

// MARK: - Workers

/// `worker write|read strata|sqlite PATH ID COUNT STOPFILE`
func runWorker(_ arguments: [String]) throws {
    guard arguments.count == 7, let id = Int(arguments[4]), let count = Int(arguments[5]) else {
        fail("bad worker arguments \(arguments)")
    }
    let (role, engine, path, stop) = (arguments[1], arguments[2], arguments[3], arguments[6])
    var random = SystemRandomNumberGenerator()
    switch (engine, role) {
    case ("strata", "write"):
        let db = try Database.open(path: path, options: DatabaseOptions(durability: .full, busyTimeout: .seconds(60)))
        for i in 0..<count {
            try db.write { tx in try tx.put(Array("w\(id)-\(i)".utf8), value(i), in: try tx.tree("kv")) }
        }
        try db.close()
    case ("strata", "read"):
        let db = try Database.open(path: path, options: DatabaseOptions(readOnly: true))
        var reads = 0
        while !FileManager.default.fileExists(atPath: stop) {
            for _ in 0..<100 {
                let k = key(Int.random(in: 0..<preloaded, using: &random))
                guard try db.read({ tx in try tx.get(k, in: try tx.tree("kv")) }) != nil else { fail("missing key") }
            }
            reads += 100
        }
        print(reads)
    case ("sqlite", "write"):
        var config = Configuration()
        config.busyMode = .timeout(60)
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let pool = try DatabasePool(path: path, configuration: config)
        // DatabasePool sets `synchronous = NORMAL` on its writer after
        // `prepareDatabase`: set FULL on it again, then check.
        let synchronous = try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            return try Int.fetchOne(db, sql: "PRAGMA synchronous")
        }
        guard synchronous == 2 else { fail("SQLite's synchronous is \(synchronous ?? -1), not FULL (2)") }
        for i in 0..<count {
            try pool.write { db in
                try db.execute(
                    sql: "INSERT INTO kv (key, value) VALUES (?, ?)", arguments: [Data("w\(id)-\(i)".utf8), Data(value(i))])
            }
        }
    case ("sqlite", "read"):
        var config = Configuration()
        config.busyMode = .timeout(60)
        config.readonly = true
        let pool = try DatabasePool(path: path, configuration: config)
        var reads = 0
        while !FileManager.default.fileExists(atPath: stop) {
            for _ in 0..<100 {
                let k = Data(key(Int.random(in: 0..<preloaded, using: &random)))
                guard
                    try pool.read({ db in try Data.fetchOne(db, sql: "SELECT value FROM kv WHERE key = ?", arguments: [k]) })
                        != nil
                else { fail("missing key") }
            }
            reads += 100
        }
        print(reads)
    default:
        fail("unknown worker \(engine) \(role)")
    }
}

// MARK: - Coordinator

struct Options {
    var writers = 4
    var commits = 250
    var readers = 2
    var directory = "/tmp/strata-process-bench"

    init(_ arguments: [String]) {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let text = rest.popFirst(), let n = Int(text), n >= 0 else { fail("\(flag) needs a count") }
            switch flag {
            case "--writers": writers = max(1, n)
            case "--commits": commits = max(1, n)
            case "--readers": readers = n
            default: fail("usage: process-bench [--writers N] [--commits M] [--readers R]")
            }
        }
    }
}

struct Result {
    var seconds: Double
    var commits: Int
    var reads: Int
}

func prepare(_ engine: String, _ path: String) throws {
    switch engine {
    case "strata":
        let db = try Database.open(path: path)
        try db.write { tx in
            let tree = try tx.createTree("kv")
            for i in 0..<preloaded { try tx.put(key(i), value(i), in: tree) }
        }
        try db.close()
    default:
        var config = Configuration()
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let pool = try DatabasePool(path: path, configuration: config)
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID")
            let insert = try db.makeStatement(sql: "INSERT INTO kv (key, value) VALUES (?, ?)")
            for i in 0..<preloaded { try insert.execute(arguments: [Data(key(i)), Data(value(i))]) }
        }
    }
}

func run(_ engine: String, _ options: Options) throws -> Result {
    let path = options.directory + "/\(engine).store"
    let stop = options.directory + "/\(engine).stop"
    try prepare(engine, path)
    let executable = CommandLine.arguments[0]
    func spawn(_ role: String, _ id: Int) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["worker", role, engine, path, "\(id)", "\(options.commits)", stop]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        return (process, pipe)
    }
    let readers = try (0..<options.readers).map { try spawn("read", $0) }
    usleep(200_000)  // the readers are reading when the writers start
    let start = ContinuousClock.now
    let writers = try (0..<options.writers).map { try spawn("write", $0) }
    for (process, _) in writers {
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { fail("a \(engine) writer failed") }
    }
    let elapsed = ContinuousClock.now - start
    _ = FileManager.default.createFile(atPath: stop, contents: nil)
    var reads = 0
    for (process, pipe) in readers {
        process.waitUntilExit()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        reads += Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Result(seconds: seconds, commits: options.writers * options.commits, reads: reads)
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "worker" {
    do { try runWorker(arguments) } catch { fail("\(error)") }
    exit(0)
}
let options = Options(arguments)
try? FileManager.default.removeItem(atPath: options.directory)
try FileManager.default.createDirectory(atPath: options.directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: options.directory) }
let strata = try run("strata", options)
let sqlite = try run("sqlite", options)
func rate(_ n: Int, _ seconds: Double) -> String { String(format: "%.0f/s", Double(n) / seconds) }
print("## Several processes on one store: Strata vs SQLite (GRDB DatabasePool)")
print("")
print(
    "\(options.writers) writer processes × \(options.commits) durable one-put commits (durability `full`, "
        + "SQLite WAL with `synchronous = FULL`), \(options.readers) reader processes doing point reads, "
        + "one read transaction each, over \(preloaded) entries while the writers run.")
print("")
print("| measure | Strata | SQLite (GRDB) | Strata ÷ SQLite |")
print("| --- | --- | --- | --- |")
print(
    "| commits, all writers | \(rate(strata.commits, strata.seconds)) | \(rate(sqlite.commits, sqlite.seconds)) | "
        + String(format: "%.2f×", (Double(strata.commits) / strata.seconds) / (Double(sqlite.commits) / sqlite.seconds)) + " |")
print(
    "| reads during the writes, all readers | \(rate(strata.reads, strata.seconds)) | \(rate(sqlite.reads, sqlite.seconds)) | "
        + String(format: "%.2f×", (Double(strata.reads) / strata.seconds) / max(1, Double(sqlite.reads) / sqlite.seconds))
        + " |")
print(String(format: "| wall time of the writers | %.2f s | %.2f s | |", strata.seconds, sqlite.seconds))
