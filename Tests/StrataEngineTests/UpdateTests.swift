import StrataEngine
import StrataTesting
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// `WriteTransaction.update(_:in:_:)`: a value rewritten from the stored
/// one with one search, against a dictionary of what each key holds.
final class UpdateTests: EngineTestCase {
    private func key(_ i: Int) -> [UInt8] { Array(String(format: "key-%06d", i).utf8) }

    /// The body sees the stored value and its result replaces it; an
    /// absent key calls nothing and changes nothing.
    func testAnUpdateRewritesTheStoredValueAndSkipsAnAbsentKey() throws {
        let db = try open()
        try db.write { tx in
            let tree = try tx.createTree("t")
            try tx.put(key(1), bytes("one"), in: tree)
            var seen: [UInt8] = []
            XCTAssertTrue(
                try tx.update(key(1), in: tree) { old in
                    seen = Array(old)
                    return Array(old) + bytes("+more")
                })
            XCTAssertEqual(seen, bytes("one"))
            var called = false
            XCTAssertFalse(
                try tx.update(key(2), in: tree) { _ in
                    called = true
                    return []
                })
            XCTAssertFalse(called)
            XCTAssertEqual(try tx.count(tree), 1)
        }
        try db.read { rx in
            let tree = try rx.tree("t")
            XCTAssertEqual(try rx.get(key(1), in: tree), bytes("one+more"))
            XCTAssertNil(try rx.get(key(2), in: tree))
        }
        XCTAssertTrue(try db.check().isHealthy)
    }

    private struct Refused: Error, Equatable {}

    /// An error the body throws comes back as it was, with the value as
    /// stored and the transaction usable; so does a result too large to
    /// store.
    func testAnUpdateWhoseBodyThrowsChangesNothing() throws {
        let db = try open()
        try db.write { tx in
            let tree = try tx.createTree("t")
            try tx.put(key(1), bytes("kept"), in: tree)
            XCTAssertThrowsError(try tx.update(key(1), in: tree) { _ in throw Refused() }) { error in
                XCTAssertEqual(error as? Refused, Refused())
            }
            XCTAssertThrowsError(
                try tx.update(key(1), in: tree) { _ in [UInt8](repeating: 1, count: Database.maxValueLength + 1) }
            ) { error in
                guard case .valueTooLarge? = error as? StorageError else {
                    return XCTFail("expected valueTooLarge, got \(error)")
                }
            }
            XCTAssertEqual(try tx.get(key(1), in: tree), bytes("kept"))
            try tx.put(key(2), bytes("after"), in: tree)
        }
        try db.read { rx in
            let tree = try rx.tree("t")
            XCTAssertEqual(try rx.get(key(1), in: tree), bytes("kept"))
            XCTAssertEqual(try rx.get(key(2), in: tree), bytes("after"))
        }
    }

    /// A body that uses the transaction (it should not): its changes stand,
    /// the update's value is put afterwards (the index the search found no
    /// longer holds the key once the leaf split), and the tree stays whole.
    /// A body that ends the transaction makes the update throw.
    func testABodyThatChangesTheTransactionLeavesAWholeTree() throws {
        let db = try open()
        try db.write { tx in
            let tree = try tx.createTree("t")
            for i in 0..<400 { try tx.put(key(i), bytes("v\(i)"), in: tree) }
            XCTAssertTrue(
                try tx.update(key(200), in: tree) { old in
                    // Neighbours that split the key's leaf, and a delete
                    // of the key itself.
                    for j in 0..<200 {
                        try tx.put(key(200) + bytes("-\(j)"), [UInt8](repeating: 7, count: 100), in: tree)
                    }
                    XCTAssertTrue(try tx.delete(key(200), in: tree))
                    return Array(old) + bytes("!")
                })
            XCTAssertEqual(try tx.get(key(200), in: tree), bytes("v200!"))
            XCTAssertEqual(try tx.get(key(199), in: tree), bytes("v199"))
            XCTAssertEqual(try tx.get(key(201), in: tree), bytes("v201"))
            XCTAssertEqual(try tx.count(tree), 600)
        }
        XCTAssertTrue(try db.check().isHealthy)
        let tx = try db.beginWrite()
        let tree = try tx.tree("t")
        XCTAssertThrowsError(
            try tx.update(key(1), in: tree) { old in
                try tx.commit()
                return Array(old) + bytes("?")
            }
        ) { error in
            guard case .transactionEnded? = error as? StorageError else {
                return XCTFail("expected transactionEnded, got \(error)")
            }
        }
        XCTAssertEqual(try db.read { try $0.get(key(1), in: try $0.tree("t")) }, bytes("v1"))
        XCTAssertTrue(try db.check().isHealthy)
    }

    /// A key longer than a tree holds is refused the same way whether the
    /// transaction spilled or not, before the body is called.
    func testAKeyTooLongIsRefusedWithOrWithoutASpill() throws {
        let db = try open("long.strata", DatabaseOptions(durability: .none, cacheSizeBytes: 16 * 4096))
        let long = [UInt8](repeating: 1, count: Database.maxKeyLength + 1)
        let tx = try db.beginWrite()
        let tree = try tx.createTree("t")
        for spilled in [false, true] {
            if spilled {
                for i in 0..<1200 { try tx.put(key(i), [UInt8](repeating: 3, count: 100), in: tree) }
                XCTAssertGreaterThan(db.statistics.spilledPages, 0)
            }
            XCTAssertThrowsError(
                try tx.update(long, in: tree) { _ in
                    XCTFail("called")
                    return []
                }
            ) { error in
                guard case .keyTooLong? = error as? StorageError else {
                    return XCTFail("spilled \(spilled): expected keyTooLong, got \(error)")
                }
            }
        }
        try tx.commit()
        XCTAssertTrue(try db.check().isHealthy)
    }

    /// A stored value that cannot be read (its overflow pages damaged on
    /// disk) fails the update as a damaged page fails any change: the error
    /// says what is corrupt, the body is not called, and the transaction is
    /// failed (it was left usable before, the read's error taken for the
    /// body's).
    func testADamagedOverflowValueFailsTheTransaction() throws {
        let path = directory.file("damaged.strata")
        var db = try Database.open(path: path, options: DatabaseOptions())
        try db.write { tx in
            try tx.put(key(1), [UInt8](repeating: 0xab, count: 12_000), in: try tx.createTree("t"))
        }
        try db.close()
        // Every page full of the value's bytes is an overflow page: one
        // byte in each is changed, so its checksum no longer holds.
        let file = try XCTUnwrap(FileManager.default.contents(atPath: path))
        let fd = Glibc.open(path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var damaged = 0
        for start in stride(from: 4096, to: file.count, by: 4096)
        where file[(start + 2048)..<(start + 2112)].allSatisfy({ $0 == 0xab }) {
            var byte: UInt8 = 0x54
            XCTAssertEqual(pwrite(fd, &byte, 1, off_t(start + 2048)), 1)
            damaged += 1
        }
        Glibc.close(fd)
        XCTAssertGreaterThan(damaged, 0)
        expectDamaged(path, because: "its overflow pages are damaged to be found")
        db = try Database.open(path: path, options: DatabaseOptions())
        let tx = try db.beginWrite()
        let tree = try tx.tree("t")
        XCTAssertThrowsError(
            try tx.update(key(1), in: tree) { _ in
                XCTFail("called")
                return []
            }
        ) { error in
            guard case .corrupt? = error as? StorageError else { return XCTFail("expected corrupt, got \(error)") }
        }
        XCTAssertThrowsError(try tx.put(key(2), bytes("x"), in: tree)) { error in
            guard case .transactionFailed? = error as? StorageError else {
                return XCTFail("expected transactionFailed, got \(error)")
            }
        }
        tx.rollback()
        try db.close()
    }

    /// Updates in transactions that fit the budget: one search each.
    func testUpdatesMatchADictionaryAcrossSplitsAndOverflow() throws {
        let db = try open("fits.strata", DatabaseOptions(durability: .none))
        try runUpdates(db, label: "updates that fit")
        XCTAssertEqual(db.statistics.spilledPages, 0, "a transaction spilled")
    }

    /// Updates in transactions that spill (a budget of 32 pages): a read
    /// and a buffered put each.
    func testUpdatesMatchADictionaryInTransactionsThatSpill() throws {
        let db = try open("spills.strata", DatabaseOptions(durability: .none, cacheSizeBytes: 32 * 4096))
        try runUpdates(db, label: "updates that spill")
        XCTAssertGreaterThan(db.statistics.spilledPages, 0, "no transaction spilled")
    }

    /// Seeded rounds of updates among puts and deletes, with values that
    /// grow, shrink, move into overflow pages and back: every key holds
    /// what the dictionary says after each commit, a rolled-back
    /// transaction leaves nothing, and the store checks healthy.
    private func runUpdates(_ db: Database, label: String) throws {
        let seed = SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: label)
        var random = SeededRandom(seed: seed)
        var expected: [[UInt8]: [UInt8]] = [:]
        func value(_ size: Int) -> [UInt8] {
            (0..<size).map { _ in UInt8(random.choose(256)) }
        }
        func size() -> Int {
            switch random.choose(10) {
            case 0: return 0
            case 1: return 3000 + random.choose(9000)  // overflow pages
            default: return random.choose(120)
            }
        }
        for round in 0..<40 {
            let tx = try db.beginWrite()
            let tree = try tx.createTree("t")
            var pending = expected
            let changes = round % 8 == 7 ? 3000 : 1 + random.choose(300)
            for _ in 0..<changes {
                let k = key(random.choose(4000))
                switch random.choose(10) {
                case 0...3:
                    let v = value(size())
                    try tx.put(k, v, in: tree)
                    pending[k] = v
                case 4:
                    XCTAssertEqual(try tx.delete(k, in: tree), pending.removeValue(forKey: k) != nil, "seed \(seed)")
                default:
                    // Half the old value kept, then new bytes: made from
                    // what the body is handed.
                    let grown = size()
                    let tail = value(grown - grown / 2)
                    var seen: [UInt8]?
                    let found = try tx.update(k, in: tree) { old in
                        seen = Array(old)
                        return Array(old.prefix(grown / 2)) + tail
                    }
                    XCTAssertEqual(found, pending[k] != nil, "seed \(seed)")
                    XCTAssertEqual(seen, pending[k], "seed \(seed)")
                    if let old = pending[k] {
                        pending[k] = Array(old.prefix(grown / 2)) + tail
                        XCTAssertEqual(try tx.get(k, in: tree), pending[k], "seed \(seed)")
                    }
                }
            }
            if round % 10 == 9 {
                tx.rollback()
            } else {
                try tx.commit()
                expected = pending
            }
            try db.read { rx in
                let tree = try rx.tree("t")
                XCTAssertEqual(try rx.count(tree), expected.count, "seed \(seed) round \(round)")
                for (k, v) in expected where try rx.get(k, in: tree) != v {
                    return XCTFail("seed \(seed) round \(round): \(String(decoding: k, as: UTF8.self)) differs")
                }
            }
        }
        XCTAssertTrue(try db.check().isHealthy, "seed \(seed)")
    }
}
