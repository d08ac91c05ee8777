import BenchSupport
import Foundation
import GRDB
import Strata

// model-bench's filing workload (issue 44): `count` memos filed into
// shelves through the memo's to-one (`memo.shelf = shelf`, the inverse
// to-many `shelf.memos` kept in step), in saves of 1,000, durably:
//
// - into one shelf whose memos are not loaded;
// - into one shelf whose memos were read first (a list on screen);
// - into `count` shelves, one memo each;
// - GRDB: the same rows with a foreign key `shelfId` and an index on it,
//   one transaction per 1,000.
//
// The shelves are saved before the clock starts; each side reads its
// filed memos back by shelf at the end to check them.

struct FilingFigures {
    var oneShelf = 0.0
    var oneShelfLoaded = 0.0
    var manyShelves = 0.0
}

let filingBatch = 1_000

/// Runs the timed part of a filing shape; not inlined, so that a profile
/// can collect it alone (`valgrind --tool=callgrind --toggle-collect=` its
/// symbol, with `--profile-filing`).
@inline(never) func filingTimed(_ body: () throws -> Void) rethrows { try body() }

func strataFiling(count: Int, shapes: [Int] = [0, 1, 2], in directory: URL) throws -> FilingFigures {
    var figures = FilingFigures()
    for shape in shapes {
        let url = directory.appendingPathComponent("filing-\(shape).store")
        let container = try ModelContainer(for: Shelf.self, Memo.self, configurations: ModelConfiguration(url: url))
        let shelves = shape == 2 ? count : 1
        try {
            let context = ModelContext(container)
            for i in 0..<shelves { context.insert(Shelf(name: "Shelf \(i)")) }
            try context.save()
        }()
        let context = ModelContext(container)
        let all = try context.fetch(FetchDescriptor<Shelf>(sortBy: [SortDescriptor(\.name)]))
        let byRow = try context.fetch(FetchDescriptor<Shelf>())
        if shape == 1 { _ = all[0].memos.count }
        let time = try seconds {
            try filingTimed {
                for batch in stride(from: 0, to: count, by: filingBatch) {
                    for i in batch..<min(batch + filingBatch, count) {
                        let memo = Memo(title: "Memo \(i)")
                        context.insert(memo)
                        memo.shelf = shape == 2 ? byRow[i] : all[0]
                    }
                    try context.save()
                }
            }
        }
        switch shape {
        case 0: figures.oneShelf = time
        case 1: figures.oneShelfLoaded = time
        default: figures.manyShelves = time
        }
        let check = ModelContext(container)
        let first = try check.fetch(FetchDescriptor<Shelf>(sortBy: [SortDescriptor(\.name)]))[0]
        let expected = shape == 2 ? 1 : count
        guard first.memos.count == expected, all[0].memos.count == expected else {
            throw BenchFailure(message: "Strata: shelf 0 holds \(first.memos.count) memos, not \(expected)")
        }
    }
    return figures
}

func grdbFiling(count: Int, in directory: URL) throws -> FilingFigures {
    var figures = FilingFigures()
    for shape in [0, 2] {
        let pool = try durablePool(path: directory.appendingPathComponent("filing-\(shape).sqlite").path)
        let shelves = shape == 2 ? count : 1
        var ids: [Int64] = []
        try pool.write { db in
            try db.create(table: "shelf") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull()
            }
            try db.create(table: "memo") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("title", .text).notNull()
                t.column("shelfId", .integer).references("shelf", onDelete: .cascade).indexed()
            }
            for i in 0..<shelves {
                var shelf = ShelfRecord(id: nil, name: "Shelf \(i)")
                try shelf.insert(db)
                ids.append(shelf.id ?? 0)
            }
        }
        let time = try seconds {
            for batch in stride(from: 0, to: count, by: filingBatch) {
                try pool.write { db in
                    for i in batch..<min(batch + filingBatch, count) {
                        var memo = MemoRecord(id: nil, title: "Memo \(i)", shelfId: shape == 2 ? ids[i] : ids[0])
                        try memo.insert(db)
                    }
                }
            }
        }
        if shape == 0 { figures.oneShelf = time } else { figures.manyShelves = time }
        let filed = try pool.read { db in
            try MemoRecord.filter(Column("shelfId") == ids[0]).fetchCount(db)
        }
        guard filed == (shape == 2 ? 1 : count) else { throw BenchFailure(message: "GRDB: shelf 0 holds \(filed) memos") }
    }
    figures.oneShelfLoaded = figures.oneShelf
    return figures
}

/// Runs both sides' filing workloads in `rounds` alternating rounds (each
/// on new files) and prints each shape's median: on a shared machine one
/// run of a shape can take half again as long as the next.
func filingWorkloads(count: Int, rounds: Int = 3, in directory: URL) throws {
    var strata: [FilingFigures] = []
    var grdb: [FilingFigures] = []
    for round in 0..<rounds {
        let files = directory.appendingPathComponent("filing-round-\(round)")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: files) }
        strata.append(try strataFiling(count: count, in: files))
        grdb.append(try grdbFiling(count: count, in: files))
    }
    func middle(_ figures: [FilingFigures], _ value: (FilingFigures) -> Double) -> Double {
        let sorted = figures.map(value).sorted()
        return sorted[sorted.count / 2]
    }
    let one = (middle(strata, \.oneShelf), middle(grdb, \.oneShelf))
    let loaded = (middle(strata, \.oneShelfLoaded), middle(grdb, \.oneShelfLoaded))
    let many = (middle(strata, \.manyShelves), middle(grdb, \.manyShelves))
    ratioRow("filing \(count) memos into 1 shelf, saves of \(filingBatch)", one.0, one.1)
    ratioRow("the same, the shelf's memos loaded first", loaded.0, loaded.1)
    ratioRow("filing \(count) memos into \(count) shelves", many.0, many.1)
    // Per round, so that the spread shows beside the medians.
    let apart = strata.map { $0.manyShelves / $0.oneShelf }.sorted()
    print(
        String(
            format: "| \(count) shelves over 1 shelf (Strata, median of %d rounds; range %.2f–%.2f×) | %.2f× | | |",
            rounds, apart.first ?? 0, apart.last ?? 0, many.0 / one.0))
}
