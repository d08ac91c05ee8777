import BenchSupport
import Foundation
import GRDB
import Strata

#if canImport(Glibc)
    import Glibc
#endif

// The scale curve (issue 44): one side (Strata or GRDB) at one size, in a
// process of its own so that its peak memory is its own.
//
//     model-bench --scale strata|grdb --count N
//
// prints one line `scale SIDE N key=value …` of per-object costs in
// microseconds, bytes per object and peak memory; `scale.sh` runs both
// sides at 10k, 100k, 1M and 10M and `scale-plot.py` draws the table.
//
// Workloads, each as an app writes it, durability `full` on both sides:
// - insert N tickets in saves of 10,000 (a new context for each save, as a
//   bulk import does to keep memory flat; GRDB: one transaction each);
// - 10,000 fetches by identifier (`existingModel(for:)`; GRDB: by primary
//   key) of objects spread over the store, in a new context: first
//   `by_id`, the first touch of their pages by this process, then three
//   times again, each in another new context, `by_id_warm` the median
//   (the kernel is first made to write back what the load left dirty);
// - 10,000 fetches by the unique attribute (`#Predicate` on `number`);
// - 100 indexed ranges of 100 objects (`number` in `lo..<lo + 100`);
// - fetch-modify-save of 1%: the objects of a range of N / 100 numbers,
//   a new title each, one save (GRDB: one `UPDATE`);
// - enumerate every object (`enumerate(_:batchSize:)`; GRDB: a cursor);
// - 300 durable one-object saves into the large store;
// - the files' size per object; the process's peak resident memory
//   (`peak_mib`, getrusage), and the largest anonymous and file-backed
//   parts of it seen after each workload (`anon_mib`: the heap;
//   `file_mib`: pages of the store mapped for reading, which the kernel
//   may take back).

/// Per-object costs of one side at one size.
struct ScaleFigures {
    var insert = 0.0
    var byID = 0.0
    var byIDWarm = 0.0
    var byUnique = 0.0
    var range = 0.0
    var update = 0.0
    var enumerate = 0.0
    var single = 0.0
    var bytes = 0
    var anonMiB = 0.0
    var fileMiB = 0.0

    /// Notes the process's resident memory now (Linux: /proc/self/status).
    mutating func sampleMemory() {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return }
        for line in status.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count >= 2, let kib = Double(parts[1]) else { continue }
            if parts[0] == "RssAnon:" { anonMiB = max(anonMiB, kib / 1024) }
            if parts[0] == "RssFile:" { fileMiB = max(fileMiB, kib / 1024) }
        }
    }

    /// After the load: notes the memory, and has the kernel write back
    /// what the load left dirty (it would compete with the next workloads).
    mutating func loaded() {
        sampleMemory()
        sync()
    }

    /// The first pass of `pass` (fetches by identifier) and the median of
    /// three more.
    mutating func timeFetchesByID(_ pass: () throws -> Double) rethrows {
        byID = try pass()
        byIDWarm = try [pass(), pass(), pass()].sorted()[1]
        sampleMemory()
    }

    func line(side: String, count: Int) -> String {
        let us = { (seconds: Double) in String(format: "%.3f", seconds * 1e6) }
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let peakMiB = Double(usage.ru_maxrss) / 1024
        return "scale \(side) \(count) insert=\(us(insert)) by_id=\(us(byID)) by_id_warm=\(us(byIDWarm)) "
            + "by_unique=\(us(byUnique)) range=\(us(range)) update=\(us(update)) enumerate=\(us(enumerate)) "
            + "single=\(us(single)) "
            + String(
                format: "bytes=%.1f peak_mib=%.0f anon_mib=%.0f file_mib=%.0f", Double(bytes) / Double(count), peakMiB,
                anonMiB, fileMiB)
    }
}

/// What the scale workloads look up: sample rows spread evenly over the
/// store (every `count / 10,000`-th, shuffled), the ranges' starts and the
/// updated range.
struct ScalePlan {
    let count: Int
    let samples: [Int]
    let rangeStarts: [Int]
    let updateRange: Range<Int>
    static let batch = 10_000
    static let lookups = 10_000
    static let ranges = 100
    static let rangeLength = 100
    static let singles = 300

    init(count: Int) {
        self.count = count
        var random = SeededRandom(seed: 44)
        let stride = max(1, count / Self.lookups)
        var samples = Array(Swift.stride(from: 0, to: count, by: stride).prefix(Self.lookups))
        samples.shuffle(using: &random)
        self.samples = samples
        let span = max(1, count - Self.rangeLength)
        rangeStarts = (0..<Self.ranges).map { _ in Int(random.next() % UInt64(span)) }
        let length = max(1, count / 100)
        let start = count / 2
        updateRange = start..<min(count, start + length)
    }
}

func scaleWorkloads(side: String, count: Int, in directory: URL) throws {
    let plan = ScalePlan(count: count)
    let figures: ScaleFigures
    switch side {
    case "strata": figures = try strataScale(plan, in: directory)
    case "grdb": figures = try grdbScale(plan, in: directory)
    default: throw BenchFailure(message: "--scale takes strata or grdb, not \(side)")
    }
    print(figures.line(side: side, count: count))
}

/// `--profile-lookups R`: a store of `count` tickets, then R rounds of the
/// scale curve's fetches by identifier, timed, for `perf record`.
func profileLookups(count: Int, rounds: Int, in directory: URL) throws {
    let plan = ScalePlan(count: count)
    let url = directory.appendingPathComponent("lookups.store")
    let container = try ModelContainer(for: Ticket.self, configurations: ModelConfiguration(url: url))
    let identifiers = try strataLoad(plan, into: container).sorted { $0.key < $1.key }.map(\.value)
    for round in 0..<rounds {
        var found = 0
        let time = try seconds {
            let context = ModelContext(container)
            for id in identifiers {
                let ticket: Ticket? = try context.existingModel(for: id)
                found &+= ticket?.number ?? 0
            }
        }
        print(String(format: "round %d: %.3f µs per fetch (%d)", round, time / Double(identifiers.count) * 1e6, found))
    }
}

/// Inserts the plan's tickets in saves of `ScalePlan.batch`, each in a new
/// context; returns the identifiers of the sampled ones by number.
private func strataLoad(_ plan: ScalePlan, into container: ModelContainer) throws -> [Int: PersistentIdentifier] {
    let sampled = Set(plan.samples)
    var identifiers: [Int: PersistentIdentifier] = [:]
    var next = 0
    while next < plan.count {
        let context = ModelContext(container)
        var batch: [(Int, Ticket)] = []
        for i in next..<min(plan.count, next + ScalePlan.batch) {
            let f = ticketFields(i)
            let ticket = Ticket(number: f.0, bucket: f.1, title: f.2, opened: f.3)
            context.insert(ticket)
            if sampled.contains(i) { batch.append((i, ticket)) }
        }
        try context.save()
        for (i, ticket) in batch { identifiers[i] = ticket.persistentModelID }
        next += ScalePlan.batch
    }
    return identifiers
}

private func strataScale(_ plan: ScalePlan, in directory: URL) throws -> ScaleFigures {
    let count = plan.count
    let url = directory.appendingPathComponent("scale.store")
    var figures = ScaleFigures()
    let container = try ModelContainer(for: Ticket.self, configurations: ModelConfiguration(url: url))
    var identifiers: [Int: PersistentIdentifier] = [:]
    figures.insert = try seconds { identifiers = try strataLoad(plan, into: container) } / Double(count)
    figures.loaded()
    var found = 0
    func fetchByID() throws -> Double {
        try seconds {
            let context = ModelContext(container)
            for i in plan.samples {
                guard let id = identifiers[i] else { continue }
                let ticket: Ticket? = try context.existingModel(for: id)
                found &+= ticket?.number ?? 0
            }
        } / Double(plan.samples.count)
    }
    try figures.timeFetchesByID(fetchByID)
    figures.byUnique =
        try seconds {
            let context = ModelContext(container)
            for i in plan.samples {
                let tickets = try context.fetch(FetchDescriptor<Ticket>(predicate: #Predicate { $0.number == i }))
                found &+= tickets.first?.bucket ?? 0
            }
        } / Double(plan.samples.count)
    var inRanges = 0
    figures.range = try seconds {
        let context = ModelContext(container)
        for lo in plan.rangeStarts {
            let hi = lo + ScalePlan.rangeLength
            let tickets = try context.fetch(FetchDescriptor<Ticket>(predicate: #Predicate { $0.number >= lo && $0.number < hi }))
            inRanges += tickets.count
        }
    }
    figures.range /= Double(max(1, inRanges))
    figures.sampleMemory()
    let lo = plan.updateRange.lowerBound
    let hi = plan.updateRange.upperBound
    figures.update =
        try seconds {
            let context = ModelContext(container)
            let tickets = try context.fetch(FetchDescriptor<Ticket>(predicate: #Predicate { $0.number >= lo && $0.number < hi }))
            for ticket in tickets { ticket.title = "Reopened \(ticket.number)" }
            try context.save()
        } / Double(plan.updateRange.count)
    figures.sampleMemory()
    var enumerated = 0
    figures.enumerate =
        try seconds {
            let context = ModelContext(container)
            try context.enumerate(FetchDescriptor<Ticket>(), batchSize: 5_000) { ticket in
                enumerated += 1
                found &+= ticket.bucket
            }
        } / Double(count)
    figures.sampleMemory()
    figures.single =
        try seconds {
            let context = ModelContext(container)
            for i in count..<(count + ScalePlan.singles) {
                let f = ticketFields(i)
                context.insert(Ticket(number: f.0, bucket: f.1, title: f.2, opened: f.3))
                try context.save()
            }
        } / Double(ScalePlan.singles)
    figures.sampleMemory()
    guard enumerated == count, inRanges == ScalePlan.ranges * min(count, ScalePlan.rangeLength) else {
        throw BenchFailure(message: "Strata enumerated \(enumerated) and found \(inRanges) in the ranges")
    }
    figures.bytes = fileBytes([url, URL(fileURLWithPath: url.path + "-wal")])
    _ = found
    return figures
}

private func grdbScale(_ plan: ScalePlan, in directory: URL) throws -> ScaleFigures {
    let count = plan.count
    let path = directory.appendingPathComponent("scale.sqlite").path
    var figures = ScaleFigures()
    let pool = try durablePool(path: path)
    try pool.write { db in try TicketRecord.createTable(db) }
    let sampled = Set(plan.samples)
    var rowIDs: [Int: Int64] = [:]
    figures.insert =
        try seconds {
            var next = 0
            while next < count {
                try pool.write { db in
                    for i in next..<min(count, next + ScalePlan.batch) {
                        let f = ticketFields(i)
                        var record = TicketRecord(id: nil, number: f.0, bucket: f.1, title: f.2, opened: f.3)
                        try record.insert(db)
                        if sampled.contains(i) { rowIDs[i] = record.id }
                    }
                }
                next += ScalePlan.batch
            }
        } / Double(count)
    figures.loaded()
    var found = 0
    func fetchByID() throws -> Double {
        try seconds {
            try pool.read { db in
                for i in plan.samples {
                    guard let id = rowIDs[i] else { continue }
                    found &+= try TicketRecord.fetchOne(db, key: id)?.number ?? 0
                }
            }
        } / Double(plan.samples.count)
    }
    try figures.timeFetchesByID(fetchByID)
    figures.byUnique =
        try seconds {
            try pool.read { db in
                for i in plan.samples {
                    found &+= try TicketRecord.filter(Column("number") == i).fetchOne(db)?.bucket ?? 0
                }
            }
        } / Double(plan.samples.count)
    var inRanges = 0
    figures.range = try seconds {
        try pool.read { db in
            for lo in plan.rangeStarts {
                let hi = lo + ScalePlan.rangeLength
                inRanges += try TicketRecord.filter(Column("number") >= lo && Column("number") < hi).fetchAll(db).count
            }
        }
    }
    figures.range /= Double(max(1, inRanges))
    figures.update =
        try seconds {
            try pool.write { db in
                try db.execute(
                    sql: "UPDATE ticket SET title = 'Reopened ' || number WHERE number >= ? AND number < ?",
                    arguments: [plan.updateRange.lowerBound, plan.updateRange.upperBound])
            }
        } / Double(plan.updateRange.count)
    figures.sampleMemory()
    var enumerated = 0
    figures.enumerate =
        try seconds {
            try pool.read { db in
                let cursor = try TicketRecord.fetchCursor(db)
                while let record = try cursor.next() {
                    enumerated += 1
                    found &+= record.bucket
                }
            }
        } / Double(count)
    figures.sampleMemory()
    figures.single =
        try seconds {
            for i in count..<(count + ScalePlan.singles) {
                let f = ticketFields(i)
                try pool.write { db in
                    var record = TicketRecord(id: nil, number: f.0, bucket: f.1, title: f.2, opened: f.3)
                    try record.insert(db)
                }
            }
        } / Double(ScalePlan.singles)
    figures.sampleMemory()
    guard enumerated == count, inRanges == ScalePlan.ranges * min(count, ScalePlan.rangeLength) else {
        throw BenchFailure(message: "GRDB enumerated \(enumerated) and found \(inRanges) in the ranges")
    }
    figures.bytes = fileBytes([URL(fileURLWithPath: path), URL(fileURLWithPath: path + "-wal")])
    _ = found
    return figures
}
