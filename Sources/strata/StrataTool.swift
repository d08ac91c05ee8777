import ArgumentParser
import Foundation
import Strata
import StrataEngine
import StrataSync

#if canImport(Glibc)
    import Glibc
#endif

/// `strata`: inspect, check and maintain a Strata store file.
///
/// Every command opens the store itself; none needs the app's model types.
/// Errors (a bad path, a locked or damaged store) print one line to stderr
/// and exit non-zero.
@main
struct StrataTool: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Inspect, check and maintain a Strata store file.",
        subcommands: [
            Check.self, Stats.self, Dump.self, SchemaCommand.self, History.self, SyncStatusCommand.self, Compact.self,
            Backup.self, SyncServerCommand.self,
        ])
}

/// Opens `path` read-only: beside an app that has the store open, the tool
/// reads a consistent snapshot of the latest commit (the shared index
/// tells it where the log ends), and checkpoints leave that snapshot alone.
func openReadOnly(_ path: String) throws -> Database {
    guard FileManager.default.fileExists(atPath: path) else { throw ToolError("no store at \(path)") }
    var options = DatabaseOptions()
    options.readOnly = true
    options.createIfMissing = false
    return try Database.open(path: path, options: options)
}

/// A progress bar on stderr, drawn only when stderr is a terminal (so
/// pipes and logs get none).
struct ProgressBar {
    let label: String
    let enabled = isatty(STDERR_FILENO) != 0
    private var drawn = -1

    init(_ label: String) { self.label = label }

    mutating func update(_ done: Int, _ total: Int) {
        guard enabled, total > 0 else { return }
        let percent = min(100, done * 100 / total)
        guard percent != drawn else { return }
        drawn = percent
        let filled = percent * 30 / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled)
        FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(percent)%".utf8))
    }

    func finish() {
        if enabled && drawn >= 0 { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

struct ToolError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body`, turning any error into a message on stderr and exit code 2.
func running(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ExitCode {
        throw error
    } catch {
        FileHandle.standardError.write(Data("strata: error: \(error)\n".utf8))
        throw ExitCode(2)
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every page, tree and record; exit 0 when healthy, 1 with a report of each problem.")

    @Argument(help: "The store file.") var path: String

    func run() throws {
        try running {
            let database = try openReadOnly(path)
            defer { try? database.close() }
            var pages = ProgressBar("checking pages")
            let report = try database.check(progress: { pages.update($0, $1) })
            pages.finish()
            var problems = report.problems
            if report.isHealthy {
                var bar = ProgressBar("checking records")
                problems += try database.read { tx in try StoreInspector.checkRecords(tx, progress: { bar.update($0, $1) }) }
                bar.finish()
            }
            if problems.isEmpty {
                print("ok: \(report.pageCount) pages, \(report.trees.count) trees")
                return
            }
            print("\(problems.count) problem(s):")
            for problem in problems { print("  " + problem) }
            throw ExitCode(1)
        }
    }
}

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Page size, page count, free pages, WAL size, each tree's entries and height, rows per entity.")

    @Argument(help: "The store file.") var path: String

    func run() throws {
        try running {
            let database = try openReadOnly(path)
            defer { try? database.close() }
            let report = try database.check()
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            print("page size: \(report.pageSize) bytes")
            print("pages: \(report.pageCount) (\(report.freePages) free)")
            print("WAL: \(wal) bytes")
            for tree in report.trees {
                print("tree \(tree.name): \(tree.entries) entries, height \(tree.height), \(tree.pages) pages")
            }
            for (entity, rows) in try database.read({ try StoreInspector.rowCounts($0) }) {
                print("entity \(entity): \(rows) rows")
            }
            if !report.isHealthy { print("(damaged: run `strata check`)") }
        }
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Every record decoded with the stored schema, one per line.")

    @Argument(help: "The store file.") var path: String
    @Option(help: "Only this entity's records.") var entity: String?
    @Flag(help: "JSON lines instead of `Entity pN: name=value …`.") var json = false

    func run() throws {
        try running {
            let database = try openReadOnly(path)
            defer { try? database.close() }
            var bar = ProgressBar("dumping")
            try database.read { tx in
                try StoreInspector.dump(
                    tx, entity: entity, json: json, line: { print($0) }, progress: { bar.update($0, $1) })
            }
            bar.finish()
        }
    }
}

struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "schema", abstract: "The stored schema.")

    @Argument(help: "The store file.") var path: String

    func run() throws {
        try running {
            let database = try openReadOnly(path)
            defer { try? database.close() }
            print(try database.read { try StoreInspector.schemaText($0) } ?? "no stored schema (an engine-only store)")
        }
    }
}

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The history: each save's token, author, time and changes.")

    @Argument(help: "The store file.") var path: String

    func run() throws {
        try running {
            let database = try openReadOnly(path)
            defer { try? database.close() }
            let lines = try database.read { try StoreInspector.historyText($0) }
            print(lines.isEmpty ? "no history" : lines.joined(separator: "\n"))
        }
    }
}

struct SyncStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-status", abstract: "The store's sync zone and position, saves not pushed yet, changes set aside.")

    @Argument(help: "The store file.") var path: String

    func run() throws {
        try running {
            let database = try openReadOnly(path)
            defer { try? database.close() }
            let state = try database.read { try SyncReplica.state(in: $0) }
            guard let zone = state.zone else {
                print("not synced (the store never joined a zone)")
                return
            }
            print("zone: \(zone)")
            print("device: \(state.device?.description ?? "none")")
            print("server position: \(state.position)")
            print("last pushed save: \(state.pushedThrough)")
            print("pending local saves: \(state.pendingSaves)")
            for change in state.setAside { print("set aside: \(change)") }
            if let rejoined = state.rejoined { print("joined again: \(rejoined)") }
        }
    }
}

struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite the store densely, into --output or in place (the store must not be in use).")

    @Argument(help: "The store file.") var path: String
    @Option(help: "Where to write the compacted copy (default: replace the store).") var output: String?

    func run() throws {
        try running {
            guard FileManager.default.fileExists(atPath: path) else { throw ToolError("no store at \(path)") }
            // Exclusive: a handle of any other process makes this `locked`.
            var options = DatabaseOptions(locking: .exclusive)
            options.createIfMissing = false
            let database = try Database.open(path: path, options: options)
            let target = output ?? path + ".compacting"
            try? FileManager.default.removeItem(atPath: path + ".compacting")
            var bar = ProgressBar("compacting")
            defer { bar.finish() }
            do {
                try database.compact(to: target, progress: { bar.update($0, $1) })
            } catch {
                try? database.close()
                throw error
            }
            let before = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            if output == nil {
                // The lock is held until the copy replaces the store.
                // rename(2) replaces the store atomically, while this handle
                // still holds the lock: a crash leaves the old store or the
                // new one. The old WAL belongs to the old file (the copy
                // already holds its commits) and must not be replayed onto
                // the new one, so it goes too.
                guard rename(target, path) == 0 else {
                    throw ToolError("cannot replace \(path): \(String(cString: strerror(errno)))")
                }
                try? FileManager.default.removeItem(atPath: path + "-wal")
            }
            try? database.close()
            let after = (try? FileManager.default.attributesOfItem(atPath: output ?? path)[.size] as? Int) ?? 0
            print("compacted: \(before) → \(after) bytes")
        }
    }
}

struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a consistent snapshot of the store to DEST while it stays in use.")

    @Argument(help: "The store file.") var path: String
    @Argument(help: "The backup file to create.") var destination: String

    func run() throws {
        try running {
            let database = try openReadOnly(path)
            defer { try? database.close() }
            var bar = ProgressBar("backing up")
            try database.backup(to: destination, progress: { bar.update($0, $1) })
            bar.finish()
            print("backed up to \(destination)")
        }
    }
}
