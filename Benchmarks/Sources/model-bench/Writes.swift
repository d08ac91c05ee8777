import BenchSupport
import Foundation
import GRDB
import Strata

// model-bench's write workloads (issue 27), each as an app writes it, with
// durability `full` on both sides (GRDB: WAL, `synchronous = FULL`):
//
// - insert N tickets (a unique Int, an indexed Int, a String, a Date), one
//   save;
// - `singles` durable saves in a row, one new ticket each;
// - `threads` threads, each with its own context (GRDB: the pool's writer),
//   `perThread` durable saves of one ticket each;
// - fetch the tenth of the tickets in one bucket by the indexed attribute,
//   change each one's title, one save (GRDB: one SQL `UPDATE`); then the
//   same for other buckets, the fetch naming in `propertiesToFetch` only
//   the attribute the change reads (GRDB: the same `UPDATE`). Each is the
//   median of `updateRounds` rounds, one bucket each: a single round's
//   ratio swung from 1.1× to 2.0× between runs of one build on this VM;
// - the store's size once every handle closed (Strata: main file and log;
//   SQLite: database and WAL files).

struct WriteFigures {
    var insert = 0.0
    var singles = 0.0
    var threaded = 0.0
    var update = 0.0
    /// The update with `propertiesToFetch` (GRDB: the same `UPDATE`).
    var partialUpdate = 0.0
    var bytes = 0
    /// Strata only: the floor under one durable save, measured after the
    /// saves with the bytes they logged (see `singleSaveFloor`).
    var floor = 0.0
    var framesPerSave = 0.0
}

let ticketBase = Date(timeIntervalSinceReferenceDate: 750_000_000)

/// Rounds of each fetch-modify-save workload (buckets 3–7 whole, then 8, 9,
/// 0, 1, 2 with `propertiesToFetch`); their median is reported.
let updateRounds = 5

/// The median of `rounds` timings, the `round`-th made by `body(round)`.
func medianOfRounds(_ rounds: Int, _ body: (Int) throws -> Double) rethrows -> Double {
    try (0..<rounds).map(body).sorted()[rounds / 2]
}

func ticketFields(_ i: Int) -> (Int, Int, String, Date) {
    (i, i % 10, "Ticket \(i)", ticketBase.addingTimeInterval(Double(i)))
}

func fileBytes(_ paths: [URL]) -> Int {
    paths.reduce(0) { total, url in
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? nil
        return total + (size ?? 0)
    }
}

/// Runs `body(thread)` on `threads` threads at once and waits for all.
func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let failures = Failures()
    let group = DispatchGroup()
    for thread in 0..<threads {
        group.enter()
        Thread {
            do { try body(thread) } catch { failures.add(error) }
            group.leave()
        }.start()
    }
    group.wait()
    if let failure = failures.first { throw BenchFailure(message: failure) }
}

/// The errors of the threads of `onThreads`, guarded by `lock`.
final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []  // guarded by lock

    func add(_ error: Error) { lock.withLock { messages.append("\(error)") } }
    var first: String? { lock.withLock { messages.first } }
}

struct BenchFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

func strataWrites(count: Int, singles: Int, threads: Int, perThread: Int, in directory: URL) throws -> WriteFigures {
    let url = directory.appendingPathComponent("tickets.store")
    var figures = WriteFigures()
    try {
        let container = try ModelContainer(for: Ticket.self, configurations: ModelConfiguration(url: url))
        figures.insert = try seconds {
            let context = ModelContext(container)
            for i in 0..<count {
                let f = ticketFields(i)
                context.insert(Ticket(number: f.0, bucket: f.1, title: f.2, opened: f.3))
            }
            try context.save()
        }
        figures.singles = try seconds {
            let context = ModelContext(container)
            for i in count..<(count + singles) {
                let f = ticketFields(i)
                context.insert(Ticket(number: f.0, bucket: f.1, title: f.2, opened: f.3))
                try context.save()
            }
        }
        (figures.floor, figures.framesPerSave) = try singleSaveFloor(store: url, saves: singles, in: directory)
        let first = count + singles
        figures.threaded = try seconds {
            try onThreads(threads) { thread in
                let context = ModelContext(container)
                for j in 0..<perThread {
                    let f = ticketFields(first + thread * perThread + j)
                    context.insert(Ticket(number: f.0, bucket: f.1, title: f.2, opened: f.3))
                    try context.save()
                }
            }
        }
        // The tickets of one bucket, fetched whole or with only the
        // attribute the change reads, each given a new title; one save.
        func reopen(bucket: Int, partial: Bool) throws -> Double {
            try seconds {
                let context = ModelContext(container)
                var descriptor = FetchDescriptor<Ticket>(predicate: #Predicate { $0.bucket == bucket })
                if partial { descriptor.propertiesToFetch = [\.number] }
                let tickets = try context.fetch(descriptor)
                for ticket in tickets { ticket.title = "Reopened \(ticket.number)" }
                try context.save()
            }
        }
        figures.update = try medianOfRounds(updateRounds) { try reopen(bucket: 3 + $0, partial: false) }
        figures.partialUpdate = try medianOfRounds(updateRounds) { try reopen(bucket: (8 + $0) % 10, partial: true) }
        let check = try ModelContext(container).fetchCount(FetchDescriptor<Ticket>())
        guard check == count + singles + threads * perThread else {
            throw BenchFailure(message: "Strata holds \(check) tickets")
        }
    }()
    figures.bytes = fileBytes([url, URL(fileURLWithPath: url.path + "-wal")])
    return figures
}

func grdbWrites(count: Int, singles: Int, threads: Int, perThread: Int, in directory: URL) throws -> WriteFigures {
    let path = directory.appendingPathComponent("tickets.sqlite").path
    var figures = WriteFigures()
    try {
        let pool = try durablePool(path: path)
        try pool.write { db in
            try TicketRecord.createTable(db)
        }
        figures.insert = try seconds {
            try pool.write { db in
                for i in 0..<count {
                    let f = ticketFields(i)
                    var record = TicketRecord(id: nil, number: f.0, bucket: f.1, title: f.2, opened: f.3)
                    try record.insert(db)
                }
            }
        }
        figures.singles = try seconds {
            for i in count..<(count + singles) {
                let f = ticketFields(i)
                try pool.write { db in
                    var record = TicketRecord(id: nil, number: f.0, bucket: f.1, title: f.2, opened: f.3)
                    try record.insert(db)
                }
            }
        }
        let first = count + singles
        figures.threaded = try seconds {
            try onThreads(threads) { thread in
                for j in 0..<perThread {
                    let f = ticketFields(first + thread * perThread + j)
                    try pool.write { db in
                        var record = TicketRecord(id: nil, number: f.0, bucket: f.1, title: f.2, opened: f.3)
                        try record.insert(db)
                    }
                }
            }
        }
        // GRDB's side of both: one `UPDATE` of a bucket.
        func reopen(bucket: Int) throws -> Double {
            try seconds {
                try pool.write { db in
                    try db.execute(
                        sql: "UPDATE ticket SET title = 'Reopened ' || number WHERE bucket = ?", arguments: [bucket])
                }
            }
        }
        figures.update = try medianOfRounds(updateRounds) { try reopen(bucket: 3 + $0) }
        figures.partialUpdate = try medianOfRounds(updateRounds) { try reopen(bucket: (8 + $0) % 10) }
        let check = try pool.read { db in try TicketRecord.fetchCount(db) }
        guard check == count + singles + threads * perThread else {
            throw BenchFailure(message: "GRDB holds \(check) tickets")
        }
    }()
    figures.bytes = fileBytes([URL(fileURLWithPath: path), URL(fileURLWithPath: path + "-wal")])
    return figures
}

/// The floor under the durable one-object saves just made on the store at
/// `store`, in seconds per save, and the log frames each wrote.
///
/// The log's current generation (StrataEngine's "File format" article:
/// frames of 24 + 4,096 bytes after a 32-byte header, each carrying the
/// header's salts; a commit's last frame holds the page count) holds only
/// these saves: the large insert before them outgrew the checkpoint
/// threshold, so the log started over at the first of them. Its frames per
/// commit and distinct pages give what a log of page images must write and
/// sync per save, and copy home at each checkpoint (every 1,000 frames,
/// the default threshold); `FsyncProbe` times that I/O with no engine
/// around it, in the same run.
func singleSaveFloor(store: URL, saves: Int, in directory: URL) throws -> (seconds: Double, frames: Double) {
    let log = try Data(contentsOf: URL(fileURLWithPath: store.path + "-wal"))
    let frameSize = 24 + 4096
    func word(_ offset: Int) -> UInt32 { log[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) } }
    guard log.count >= 32 else { throw BenchFailure(message: "the log holds no header") }
    let salts = (word(16), word(20))
    var frames = 0
    var commits = 0
    var pages = Set<UInt32>()
    var offset = 32
    while offset + frameSize <= log.count, word(offset + 8) == salts.0, word(offset + 12) == salts.1 {
        frames += 1
        pages.insert(word(offset))
        if word(offset + 4) != 0 { commits += 1 }
        offset += frameSize
    }
    guard commits > 0, commits <= saves else {
        throw BenchFailure(message: "the log's generation holds \(commits) commits, not the \(saves) saves' alone")
    }
    let perCommit = Double(frames) / Double(commits)
    let commitsPerCheckpoint = max(1, Int(1_000 / perCommit))
    let mainBytes = fileBytes([store])
    let floor = try FsyncProbe.meanLogAndCheckpointIO(
        path: directory.appendingPathComponent("floor-probe").path, mainBytes: mainBytes, iterations: saves,
        bytes: Int(perCommit * Double(frameSize)), commitsPerCheckpoint: commitsPerCheckpoint,
        pagesPerCheckpoint: max(1, pages.count * commitsPerCheckpoint / commits))
    return (Double(floor.components.attoseconds) / 1e18 + Double(floor.components.seconds), perCommit)
}

/// Runs both sides' write workloads and prints their rows.
func writeWorkloads(count: Int, in directory: URL) throws {
    let singles = 300
    let threads = 16
    let perThread = 40
    let strata = try strataWrites(count: count, singles: singles, threads: threads, perThread: perThread, in: directory)
    let grdb = try grdbWrites(count: count, singles: singles, threads: threads, perThread: perThread, in: directory)
    ratioRow("tickets: insert \(count), one save", strata.insert, grdb.insert)
    ratioRow("tickets: \(singles) durable one-object saves", strata.singles, grdb.singles)
    let each = strata.singles / Double(singles)
    print(
        String(
            format: "| tickets: one durable save beside the floor (%.1f frames logged) | %.0f µs | floor %.0f µs | "
                + "%.2f× the floor |", strata.framesPerSave, each * 1e6, strata.floor * 1e6, each / strata.floor))
    ratioRow("tickets: \(threads) threads × \(perThread) durable saves", strata.threaded, grdb.threaded)
    ratioRow("tickets: fetch 10% by index, change, one save (median of \(updateRounds))", strata.update, grdb.update)
    ratioRow(
        "tickets: the same, `propertiesToFetch` = the attribute read (GRDB: the same `UPDATE`)", strata.partialUpdate,
        grdb.partialUpdate)
    let ratio = String(format: "%.2f×", Double(grdb.bytes) / Double(strata.bytes))
    print("| tickets: file size | \(strata.bytes / 1024) KiB | \(grdb.bytes / 1024) KiB | \(ratio) |")
}

/// A new store of `count` tickets saved in one save, and the context
/// that saved them.
func ticketStore(count: Int, in directory: URL) throws -> (ModelContainer, ModelContext) {
    let url = directory.appendingPathComponent("profile.store")
    let container = try ModelContainer(for: Ticket.self, configurations: ModelConfiguration(url: url))
    let context = ModelContext(container)
    for i in 0..<count {
        let f = ticketFields(i)
        context.insert(Ticket(number: f.0, bucket: f.1, title: f.2, opened: f.3))
    }
    try context.save()
    return (container, context)
}

/// `saves` durable one-object saves on a store of `count` tickets, alone.
func profileSingleSaves(count: Int, saves: Int, in directory: URL) throws {
    let (_, context) = try ticketStore(count: count, in: directory)
    let time = try seconds {
        for i in count..<(count + saves) {
            let f = ticketFields(i)
            context.insert(Ticket(number: f.0, bucket: f.1, title: f.2, opened: f.3))
            try context.save()
        }
    }
    print(String(format: "%d saves: %.1f µs each", saves, time / Double(saves) * 1e6))
}

/// `rounds` fetch-modify-saves of a tenth of a store of `count` tickets,
/// alone, for `perf record`; prints the time of each phase.
func profileUpdates(count: Int, rounds: Int, partial: Bool = false, in directory: URL) throws {
    let (container, _) = try ticketStore(count: count, in: directory)
    var phases = (fetch: 0.0, modify: 0.0, save: 0.0)
    for round in 0..<rounds {
        let context = ModelContext(container)
        let bucket = round % 10
        var tickets: [Ticket] = []
        phases.fetch += try seconds {
            var descriptor = FetchDescriptor<Ticket>(predicate: #Predicate { $0.bucket == bucket })
            if partial { descriptor.propertiesToFetch = [\.number] }
            tickets = try context.fetch(descriptor)
        }
        phases.modify += seconds {
            for ticket in tickets { ticket.title = "Round \(round) \(ticket.number)" }
        }
        phases.save += try seconds { try context.save() }
    }
    let each = { (time: Double) in time / Double(rounds) * 1e3 }
    print(
        String(
            format: "%d fetch-modify-saves: %.1f ms each (fetch %.1f, modify %.1f, save %.1f)", rounds,
            each(phases.fetch + phases.modify + phases.save), each(phases.fetch), each(phases.modify), each(phases.save)))
}
