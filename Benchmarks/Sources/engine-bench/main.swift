// engine-bench: runs the same workloads on StrataEngine, on SQLite
// (through GRDB) and on LMDB in one process and prints a markdown report.
//
//     swift run -c release engine-bench [--count N] [--deletes N] [--durability full|normal|none]
//     swift run -c release engine-bench --bulk-load-only [--cache-mib N] [--count N]

import BenchSupport
import Foundation
import StrataEngine

/// Command-line options.
struct Options {
    /// Entries of the bulk load (and point reads).
    var count = 1_000_000
    /// Entries removed by the delete workload; nil for the default.
    var deleteCount: Int?
    var durability = DurabilityLevel.full
    /// Scratch folder, removed at the start and at the end of the run.
    var directory = "/tmp/strata-engine-bench"
    /// Only the bulk load, on Strata alone, reporting peak memory.
    var bulkLoadOnly = false
    /// Strata's page cache (and write transaction) budget.
    var cacheBytes = DatabaseOptions().cacheSizeBytes

    /// 100,000 deletes, or a tenth of the store when it is smaller than a million.
    var deletes: Int { deleteCount ?? min(100_000, count / 10) }

    static let usage = """
        usage: engine-bench [--count N] [--deletes N] [--durability full|normal|none]
               engine-bench --bulk-load-only [--cache-mib N] [--count N] [--durability L]

          --count N        entries of the bulk load (default 1000000)
          --deletes N      entries the delete workload removes
                           (default min(100000, count / 10))
          --durability L   full (default), normal or none: Strata's level,
                           SQLite's synchronous=FULL/NORMAL/OFF and LMDB's
                           default/MDB_NOMETASYNC/MDB_NOSYNC
          --bulk-load-only the bulk load on Strata alone, its keys made on
                           the fly; reports time and peak resident memory
          --cache-mib N    Strata's page cache and write transaction budget
                           (default 64)
        """

    init(arguments: [String]) throws {
        var rest = arguments[...]
        func value(of flag: String) throws -> String {
            guard let value = rest.popFirst() else { throw BenchError("\(flag) needs a value\n\(Self.usage)") }
            return value
        }
        func positive(_ flag: String) throws -> Int {
            let text = try value(of: flag).replacingOccurrences(of: "_", with: "")
            guard let n = Int(text), n > 0 else { throw BenchError("\(flag) takes a positive integer, not \(text)") }
            return n
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--count": count = try positive(flag)
            case "--deletes": deleteCount = try positive(flag)
            case "--bulk-load-only": bulkLoadOnly = true
            case "--cache-mib": cacheBytes = try positive(flag) << 20
            case "--durability":
                let text = try value(of: flag)
                guard let level = DurabilityLevel(rawValue: text) else {
                    throw BenchError("--durability takes full, normal or none, not \(text)")
                }
                durability = level
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default:
                throw BenchError("unknown argument \(flag)\n\(Self.usage)")
            }
        }
        guard deletes <= count else { throw BenchError("--deletes \(deletes) exceeds --count \(count)") }
    }
}

/// One timed workload: its title, how many operations it did, and the
/// elapsed time on each engine (in the order of ``Benchmark/engines``).
struct WorkloadResult {
    let title: String
    let ops: Int
    let times: [Duration]
}

/// Runs every workload on every engine and collects times and file sizes.
final class Benchmark {
    let options: Options
    let data: Dataset
    let strata: StrataStore
    let sqlite: SQLiteStore
    let lmdb: LMDBStore
    /// Strata first: the report's columns follow this order.
    var engines: [any KeyValueEngine] { [strata, sqlite, lmdb] }

    private(set) var results: [WorkloadResult] = []
    /// Sizes of each engine's files after each step.
    private(set) var sizes: [(step: String, stores: [StoreSize])] = []
    /// Mean durable 4 KiB write on this file system: overwrite, append.
    private(set) var fsync: (overwrite: Duration, append: Duration, log: Duration, logAndCheckpoint: Duration)?

    init(options: Options, data: Dataset) throws {
        self.options = options
        self.data = data
        strata = try StrataStore(
            path: options.directory + "/bench.strata", durability: options.durability, cacheBytes: options.cacheBytes)
        sqlite = try SQLiteStore(path: options.directory + "/bench.sqlite", durability: options.durability)
        lmdb = try LMDBStore(path: options.directory + "/bench.lmdb", durability: options.durability)
        recordSizes(after: "open")
    }

    func run() throws {
        let n = data.keys.count
        try measure("1. bulk load, one transaction", ops: n) { try $0.bulkLoad(data) }
        try measure("2. random point reads, one read transaction", ops: n) { try $0.pointReads(data) }

        var digests: [ScanDigest] = []
        try measure("3. full ordered scan (key + value)", ops: n) { digests.append(try $0.scan()) }
        guard digests.allSatisfy({ $0 == digests[0] }), digests[0].entries == n else {
            throw BenchError("the scans disagree: \(zip(engines.map(\.name), digests).map { "\($0): \($1)" })")
        }

        try measure("4. single-put commits, one transaction each", ops: Dataset.commitCount) {
            try $0.singleCommits(data)
        }
        progress("fdatasync probe…")
        let probe = options.directory + "/fsync-probe"
        fsync = (
            try FsyncProbe.meanSyncedWrite(path: probe, iterations: Dataset.commitCount, append: false),
            try FsyncProbe.meanSyncedWrite(path: probe, iterations: Dataset.commitCount, append: true),
            try FsyncProbe.meanSyncedLogWrite(path: probe, iterations: Dataset.commitCount, bytes: 2 * (24 + 4096)),
            try FsyncProbe.meanLogAndCheckpointIO(
                path: probe, mainBytes: Int(StoreSize(path: strata.path).main ?? 0), iterations: Dataset.commitCount,
                bytes: 2 * (24 + 4096), commitsPerCheckpoint: 500)
        )

        try measure("5. random deletes, one transaction", ops: data.deleteOrder.count) { try $0.deletes(data) }

        for engine in engines { try engine.close() }
        recordSizes(after: "close (checkpointed)")
    }

    /// Times `body` on each engine in turn, then records the file sizes.
    private func measure(_ title: String, ops: Int, _ body: (any KeyValueEngine) throws -> Void) throws {
        var times: [Duration] = []
        for engine in engines {
            progress("\(title): \(engine.name)…")
            let (_, elapsed) = try timed { try body(engine) }
            progress("  \(Format.time(elapsed, ops: ops))")
            times.append(elapsed)
        }
        results.append(WorkloadResult(title: title, ops: ops, times: times))
        recordSizes(after: String(title.prefix { $0 != "," }))
    }

    private func recordSizes(after step: String) {
        sizes.append((step, engines.map { StoreSize(path: $0.path) }))
    }

    /// The markdown report.
    func report() -> String {
        var lines: [String] = []
        let names = engines.map(\.name)
        lines.append("## Strata vs SQLite (GRDB) and LMDB")
        lines.append("")
        lines.append(
            "\(Format.count(data.keys.count)) entries (\(Dataset.keyLength)-byte random keys, "
                + "\(Dataset.valueLength)-byte values), \(Format.count(data.deleteOrder.count)) deletes, "
                + "durability `\(options.durability.rawValue)`, SQLite \(sqlite.sqliteVersion) in WAL mode, "
                + "\(lmdb.version).")
        lines.append("")
        lines.append(
            Format.header(["workload"] + names + ["SQLite time / Strata time", "LMDB time / Strata time"]))
        for result in results {
            lines.append(
                Format.row(
                    [result.title] + result.times.map { Format.time($0, ops: result.ops) }
                        + [
                            Format.ratio(result.times[1].seconds, result.times[0].seconds),
                            Format.ratio(result.times[2].seconds, result.times[0].seconds),
                        ]))
        }

        if let fsync, let commits = results.first(where: { $0.title.hasPrefix("4.") }) {
            lines.append("")
            lines.append("### Durable commits against this machine's fdatasync")
            lines.append("")
            lines.append(
                Format.header([
                    "operation", "time per op", "÷ fdatasync (overwrite)", "÷ fdatasync (append)",
                    "÷ fdatasync (2-frame log write)", "÷ log write + checkpoint I/O",
                ]))
            let overwrite = fsync.overwrite.seconds
            let append = fsync.append.seconds
            let log = fsync.log.seconds
            let floor = fsync.logAndCheckpoint.seconds
            func row(_ label: String, _ seconds: Double) -> String {
                Format.row([
                    label, Format.time(seconds), Format.ratio(seconds, overwrite), Format.ratio(seconds, append),
                    Format.ratio(seconds, log), Format.ratio(seconds, floor),
                ])
            }
            lines.append(row("4 KiB pwrite + fdatasync, same block", overwrite))
            lines.append(row("4 KiB pwrite + fdatasync, appending", append))
            lines.append(row("8,240 B sequential pwrite into a preallocated log + fdatasync", log))
            lines.append(
                row(
                    "the same, plus a checkpoint every 500 commits (one random 4 KiB page per commit "
                        + "into a main file of Strata's size, fdatasync, log restart)", floor))
            for (name, time) in zip(names, commits.times) {
                lines.append(row("\(name) commit of one put", time.seconds / Double(commits.ops)))
            }
        }

        // One machine-readable line per engine, for scale.sh and
        // scale-plot.py: microseconds per operation of each workload.
        lines.append("")
        let keys = ["1.": "load", "2.": "read", "3.": "scan", "4.": "commit", "5.": "delete"]
        for (i, name) in names.enumerated() {
            let engine = name.split(separator: " ").first.map { $0.lowercased() } ?? name
            var fields = ["scale", engine, "\(data.keys.count)"]
            for result in results {
                guard let key = keys[String(result.title.prefix(2))] else { continue }
                fields.append(key + "=" + String(format: "%.4f", result.times[i].seconds / Double(result.ops) * 1e6))
            }
            lines.append("    " + fields.joined(separator: " "))
        }

        lines.append("")
        lines.append("### File sizes (main file + `-wal`)")
        lines.append("")
        lines.append(Format.header(["after"] + names.flatMap { ["\($0) main", "\($0) -wal", "\($0) total"] }))
        for (step, stores) in sizes {
            lines.append(
                Format.row(
                    [step] + stores.flatMap { [Format.bytes($0.main), Format.bytes($0.wal), Format.bytes($0.total)] }))
        }
        return lines.joined(separator: "\n")
    }
}

/// Parses the arguments, runs the benchmark in a fresh scratch folder and
/// prints the report; the folder is removed at the end, even on failure.
func runCommand() -> Int32 {
    let options: Options
    do {
        options = try Options(arguments: Array(CommandLine.arguments.dropFirst()))
    } catch {
        progress("error: \(error)")
        return 2
    }
    #if DEBUG
        progress("warning: this is a debug build; use `swift run -c release engine-bench` for meaningful numbers")
    #endif
    let fileManager = FileManager.default
    defer { try? fileManager.removeItem(atPath: options.directory) }
    do {
        try? fileManager.removeItem(atPath: options.directory)
        try fileManager.createDirectory(atPath: options.directory, withIntermediateDirectories: true)

        if options.bulkLoadOnly {
            print(
                try BulkLoadMemory.run(
                    count: options.count, cacheBytes: options.cacheBytes, durability: options.durability,
                    directory: options.directory))
            return 0
        }
        progress("generating \(Format.count(options.count)) keys and values…")
        let data = Dataset(count: options.count, deleteCount: options.deletes)
        let benchmark = try Benchmark(options: options, data: data)
        try benchmark.run()
        print(benchmark.report())
        return 0
    } catch {
        progress("error: \(error)")
        return 1
    }
}

exit(runCommand())
