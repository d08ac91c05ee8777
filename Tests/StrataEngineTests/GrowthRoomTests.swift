import StrataEngine
import StrataTesting
import XCTest

/// `leaveRoomToGrow(in:)`: appends at a tree's right edge leave a sixteenth
/// of each leaf free, so that values replaced by slightly longer ones later
/// fit where they are instead of splitting their leaf.
final class GrowthRoomTests: EngineTestCase {
    private static let count = 20_000

    /// 8-byte ascending keys (row numbers, as the object layer's records).
    private func key(_ i: Int) -> [UInt8] { withUnsafeBytes(of: UInt64(i).bigEndian) { Array($0) } }

    /// A value of `length` bytes derived from `i`.
    private func value(_ i: Int, length: Int) -> [UInt8] {
        (0..<length).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0) }
    }

    /// How the entries went in.
    private enum Load {
        /// One `put` each, in transactions of `batch`.
        case puts(batch: Int)
        /// `put(sortedKeys:values:in:)`, one transaction.
        case sorted
    }

    /// Loads `count` entries with 40-byte values in ascending key order, in
    /// a tree left room to grow in or not, and returns the store's pages.
    private func load(_ db: Database, room: Bool, _ how: Load) throws -> Int {
        func begin(_ tx: WriteTransaction) throws -> Tree {
            let tree = try tx.createTree("t")
            if room { try tx.leaveRoomToGrow(in: tree) }
            return tree
        }
        switch how {
        case .puts(let batch):
            for start in stride(from: 0, to: Self.count, by: batch) {
                try db.write { tx in
                    let tree = try begin(tx)
                    for i in start..<min(start + batch, Self.count) { try tx.put(key(i), value(i, length: 40), in: tree) }
                }
            }
        case .sorted:
            try db.write { tx in
                let tree = try begin(tx)
                let keys = KeyBatch((0..<Self.count).map(key))
                try tx.put(sortedKeys: keys, values: { self.value($0, length: 40) }, in: tree)
            }
        }
        return db.statistics.pageCount
    }

    /// Replaces every value by one `by` bytes longer, in one transaction.
    private func grow(_ db: Database, by extra: Int, room: Bool) throws -> Int {
        try db.write { tx in
            let tree = try tx.tree("t")
            if room { try tx.leaveRoomToGrow(in: tree) }
            for i in 0..<Self.count { try tx.put(key(i), value(i, length: 40 + extra), in: tree) }
        }
        return db.statistics.pageCount
    }

    private func assertHolds(_ db: Database, length: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        try assertTree(db, holds: (0..<Self.count).map { (key($0), value($0, length: length)) }, file: file, line: line)
    }

    /// Values that grow by 2 bytes after an append-ordered load: a tree
    /// left room to grow in keeps every leaf (the load costs about a
    /// fifteenth more pages); a tree packed densely splits most of its
    /// leaves, and ends larger.
    func testGrowingValuesFitTheRoomLeftByAppends() throws {
        for how in [Load.puts(batch: 20_000), .puts(batch: 100), .sorted] {
            let dense = try open("dense-\(how).strata", DatabaseOptions(durability: .none))
            let roomy = try open("roomy-\(how).strata", DatabaseOptions(durability: .none))
            let denseLoaded = try load(dense, room: false, how)
            let roomyLoaded = try load(roomy, room: true, how)
            // 50-byte cells and 2-byte slots: 78 fit a 4 KiB leaf, 73 with
            // a sixteenth left free (257 and 274 leaves; 260 and 279 pages
            // with the branches). Two bytes more for each of 73 cells (146)
            // fit the sixteenth (256); a dense leaf has room for less than
            // one more cell.
            XCTAssertGreaterThan(roomyLoaded, denseLoaded + 10, "\(how)")
            XCTAssertLessThan(Double(roomyLoaded), Double(denseLoaded) * 1.1, "\(how)")
            let denseGrown = try grow(dense, by: 2, room: false)
            let roomyGrown = try grow(roomy, by: 2, room: true)
            XCTAssertEqual(roomyGrown, roomyLoaded, "\(how): a leaf left room split")
            XCTAssertGreaterThan(denseGrown, denseLoaded + denseLoaded / 4, "\(how)")
            XCTAssertLessThan(roomyGrown, denseGrown, "\(how)")
            try assertHolds(dense, length: 42)
            try assertHolds(roomy, length: 42)
        }
    }

    /// The room is kept only at the right edge: random inserts, and
    /// appends to a tree not marked, fill leaves as before.
    func testRandomInsertsAndUnmarkedTreesAreUnchanged() throws {
        var rng = SeededRandom(seed: 0x6_0017)
        let order = (0..<Self.count).shuffled(using: &rng)
        var pages: [Int] = []
        for room in [false, true] {
            let db = try open("random-\(room).strata", DatabaseOptions(durability: .none))
            try db.write { tx in
                let tree = try tx.createTree("t")
                if room { try tx.leaveRoomToGrow(in: tree) }
                for i in order { try tx.put(key(i), value(i, length: 40), in: tree) }
                // Another tree, appended to, not marked: packed densely.
                let other = try tx.createTree("other")
                for i in 0..<Self.count { try tx.put(key(i), value(i, length: 40), in: other) }
            }
            pages.append(db.statistics.pageCount)
            try assertHolds(db, length: 40)
        }
        XCTAssertEqual(pages[0], pages[1])
    }

    /// A mark lasts for its transaction: appends in the next one, unmarked,
    /// fill the last leaf to the full page again.
    func testTheMarkLastsForItsTransaction() throws {
        let marked = try open("marked.strata", DatabaseOptions(durability: .none))
        let once = try open("once.strata", DatabaseOptions(durability: .none))
        for (db, markEach) in [(marked, true), (once, false)] {
            for (n, start) in stride(from: 0, to: Self.count, by: 5_000).enumerated() {
                try db.write { tx in
                    let tree = n == 0 ? try tx.createTree("t") : try tx.tree("t")
                    if n == 0 || markEach { try tx.leaveRoomToGrow(in: tree) }
                    for i in start..<(start + 5_000) { try tx.put(key(i), value(i, length: 40), in: tree) }
                }
            }
            try assertHolds(db, length: 40)
        }
        XCTAssertGreaterThan(marked.statistics.pageCount, once.statistics.pageCount + 5)
    }

    /// Random work on a marked tree, against a dictionary: appends past
    /// the last key (one by one and in sorted runs, values from empty to
    /// overflow-sized), values replaced by longer and shorter ones,
    /// deletes, and transactions rolled back. Every entry reads back as
    /// last committed and the store checks healthy after each transaction.
    func testRandomWorkOnAMarkedTreeMatchesAModel() throws {
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "growth room")
        var random = SeededRandom(seed: seed)
        var options = DatabaseOptions(durability: .none)
        options.cacheSizeBytes = 64 * 4096  // small: spills and reads back
        let db = try open("random-work.strata", options)
        var model: [Int: [UInt8]] = [:]
        var next = 0
        func randomValue() -> [UInt8] {
            let length =
                switch Int.random(in: 0..<40, using: &random) {
                case 0: 0
                case 1: 4096 + Int.random(in: 0..<8192, using: &random)
                default: Int.random(in: 1..<120, using: &random)
                }
            return [UInt8](repeating: UInt8.random(in: 0...255, using: &random), count: length)
        }
        for round in 0..<40 {
            var pending = model
            let tx = try db.beginWrite()
            let tree = try tx.treeIfPresent("t") ?? tx.createTree("t")
            if round % 7 != 3 { try tx.leaveRoomToGrow(in: tree) }
            for _ in 0..<Int.random(in: 1..<200, using: &random) {
                switch Int.random(in: 0..<10, using: &random) {
                case 0...3:
                    let value = randomValue()
                    try tx.put(key(next), value, in: tree)
                    pending[next] = value
                    next += 1
                case 4:
                    let run = Int.random(in: 1..<200, using: &random)
                    let values = (0..<run).map { _ in randomValue() }
                    try tx.put(sortedKeys: KeyBatch((next..<(next + run)).map(key)), values: { values[$0] }, in: tree)
                    for (i, value) in values.enumerated() { pending[next + i] = value }
                    next += run
                case 5...7:
                    guard let i = pending.keys.randomElement(using: &random) else { continue }
                    let old = pending[i]!
                    let value = [UInt8](
                        repeating: UInt8(truncatingIfNeeded: round),
                        count: max(0, old.count + Int.random(in: -3...6, using: &random)))
                    try tx.put(key(i), value, in: tree)
                    pending[i] = value
                default:
                    let i = Int.random(in: 0..<max(1, next), using: &random)
                    XCTAssertEqual(try tx.delete(key(i), in: tree), pending.removeValue(forKey: i) != nil, "seed \(seed)")
                }
            }
            if round % 11 == 5 {
                tx.rollback()
            } else {
                try tx.commit()
                model = pending
            }
            try assertTree(
                db, holds: model.keys.sorted().map { (key($0), model[$0]!) }, context: "round \(round), seed \(seed)")
        }
    }

    /// A handle the transaction cannot use gets the typed error every other
    /// call gives, as does a transaction that ended.
    func testBadHandlesAndEndedTransactionsThrow() throws {
        let db = try open("bad.strata", DatabaseOptions(durability: .none))
        var stale: Tree?
        try db.write { tx in stale = try tx.createTree("t") }
        try db.write { tx in
            XCTAssertThrowsError(try tx.leaveRoomToGrow(in: stale!)) { error in
                guard case StorageError.staleTree = error else { return XCTFail("\(error)") }
            }
        }
        let tx = try db.beginWrite()
        let tree = try tx.tree("t")
        tx.rollback()
        XCTAssertThrowsError(try tx.leaveRoomToGrow(in: tree)) { error in
            guard case StorageError.transactionEnded = error else { return XCTFail("\(error)") }
        }
    }
}
