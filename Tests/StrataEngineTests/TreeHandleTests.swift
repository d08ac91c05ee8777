import StrataEngine
import StrataTesting
import XCTest

/// A `Tree` handle is tied to the tree it was resolved for, in the
/// transaction that returned it. A handle resolved by name alone wrote,
/// after its tree was dropped, into the old root page: into whatever tree
/// had been given that page since, and at commit it pointed the catalog
/// entry of its name back at that page.
final class TreeHandleTests: EngineTestCase {
    func expectStale(
        _ body: @autoclosure () throws -> some Any, _ reason: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            guard case StorageError.staleTree(let name, let why) = error else {
                return XCTFail("expected staleTree, got \(error)", file: file, line: line)
            }
            XCTAssertEqual(name, "t", file: file, line: line)
            XCTAssertTrue(why.contains(reason), why, file: file, line: line)
        }
    }

    /// Drop "t", give its root page to a new tree "u", create "t" again:
    /// every use of the old handle throws, nothing is written through it,
    /// and the transaction goes on and commits a healthy store.
    func testHandleOfADroppedTreeIsStaleInItsTransaction() throws {
        let db = try open("dropped.strata", DatabaseOptions(durability: .none))
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<10 { try tx.put(bytes("k\(i)"), bytes("old"), in: t) }
        }
        try db.write { tx in
            let old = try tx.tree("t")
            XCTAssertTrue(try tx.dropTree("t"))
            let u = try tx.createTree("u")  // the lowest free page: t's old root
            let t = try tx.createTree("t")
            XCTAssertNotEqual(t, old)
            expectStale(try tx.get(bytes("k0"), in: old), "dropped or renamed")
            expectStale(try tx.count(old), "dropped or renamed")
            expectStale(try tx.cursor(old), "dropped or renamed")
            expectStale(try tx.scan(old), "dropped or renamed")
            expectStale(try tx.clear(old), "dropped or renamed")
            expectStale(try tx.delete(bytes("k1"), in: old), "dropped or renamed")
            // This one wrote into u's root and, at commit, pointed t's
            // catalog entry at it, leaving u's count wrong.
            expectStale(try tx.put(bytes("k0"), bytes("through the old handle"), in: old), "dropped or renamed")
            // The errors changed nothing: the transaction goes on.
            try tx.put(bytes("k0"), bytes("new"), in: t)
            XCTAssertEqual(try tx.count(t), 1)
            XCTAssertEqual(try tx.count(u), 0)
            XCTAssertEqual(try tx.tree("t"), t)
        }
        try db.read { tx in
            XCTAssertEqual(try tx.scan(try tx.tree("t")).map(\.value), [bytes("new")])
            XCTAssertEqual(try tx.count(try tx.tree("u")), 0)
        }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
    }

    /// A transaction keeps the last trees it found by name; a rename, a
    /// drop or a creation since is never answered from them.
    func testLookupsByNameFollowChangesInTheTransaction() throws {
        let db = try open("lookups.strata", DatabaseOptions(durability: .none))
        try db.write { tx in
            try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("t"))
            try tx.createTree("u")
        }
        try db.write { tx in
            let t = try tx.tree("t")
            XCTAssertEqual(try tx.tree("t"), t)
            _ = try tx.tree("u")
            try tx.renameTree("t", to: "v")
            XCTAssertNil(try tx.treeIfPresent("t"))
            XCTAssertEqual(try tx.count(try tx.tree("v")), 1)
            let created = try tx.createTree("t")
            XCTAssertEqual(try tx.tree("t"), created)
            XCTAssertEqual(try tx.count(try tx.tree("t")), 0)
            XCTAssertTrue(try tx.dropTree("u"))
            XCTAssertNil(try tx.treeIfPresent("u"))
            // Nine other names push "v" out of the few kept: found again.
            for i in 0..<9 { _ = try tx.tree(try tx.createTree("w\(i)").name) }
            XCTAssertEqual(try tx.count(try tx.tree("v")), 1)
            // Two spellings of one Unicode name are two trees, as the
            // catalog keys them by their bytes.
            let composed = try tx.createTree("caf\u{E9}")
            try tx.put(bytes("x"), bytes("1"), in: try tx.tree("caf\u{E9}"))
            let decomposed = try tx.createTree("cafe\u{301}")
            XCTAssertNotEqual(decomposed, composed)
            XCTAssertEqual(try tx.count(decomposed), 0)
            XCTAssertEqual(try tx.count(try tx.tree("caf\u{E9}")), 1)
        }
        try db.read { tx in
            XCTAssertEqual(try tx.count(try tx.tree("v")), 1)
            XCTAssertEqual(try tx.tree("v"), try tx.tree("v"))
            XCTAssertNil(try tx.treeIfPresent("u"))
        }
    }

    /// Tree names are their bytes: two spellings of one Unicode name
    /// (precomposed, decomposed) name two trees, in lookups the handle's
    /// shared catalog cache answers as in the catalog itself. The cache
    /// keyed them by `String`, whose equality takes them as one.
    func testTwoSpellingsOfOneNameAreTwoTrees() throws {
        let db = try open("spellings.strata", DatabaseOptions(durability: .none))
        try db.write { tx in try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("caf\u{E9}")) }
        // Fills the shared cache at this position.
        try db.read { tx in XCTAssertEqual(try tx.count(try tx.tree("caf\u{E9}")), 1) }
        try db.read { tx in XCTAssertNil(try tx.treeIfPresent("cafe\u{301}")) }
        try db.write { tx in
            let decomposed = try tx.createTree("cafe\u{301}")
            XCTAssertEqual(try tx.count(decomposed), 0)
            try tx.put(bytes("b"), bytes("2"), in: decomposed)
        }
        try db.read { tx in
            XCTAssertEqual(try tx.scan(try tx.tree("caf\u{E9}")).map(\.key), [bytes("a")])
            XCTAssertEqual(try tx.scan(try tx.tree("cafe\u{301}")).map(\.key), [bytes("b")])
        }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
    }

    /// Deletes that follow one another in a tree skip its bookkeeping
    /// lookups, as puts do: deletes and puts alternating between two trees,
    /// a delete as a tree's first change (its count read from the
    /// catalog), an absent key, and a rename between deletes each leave
    /// every tree's count and catalog entry right.
    func testInterleavedDeletesKeepEveryTreesCountAndEntry() throws {
        let db = try open("interleaved.strata", DatabaseOptions(durability: .none))
        try db.write { tx in
            let a = try tx.createTree("a")
            let b = try tx.createTree("b")
            let d = try tx.createTree("d")
            for i in 0..<50 {
                try tx.put(bytes("k\(i)"), bytes("\(i)"), in: a)
                try tx.put(bytes("k\(i)"), bytes("\(i)"), in: b)
                try tx.put(bytes("k\(i)"), bytes("\(i)"), in: d)
            }
        }
        try db.write { tx in
            let a = try tx.tree("a")
            let b = try tx.tree("b")
            XCTAssertTrue(try tx.delete(bytes("k0"), in: a))
            XCTAssertTrue(try tx.delete(bytes("k1"), in: a))
            XCTAssertFalse(try tx.delete(bytes("absent"), in: a))
            // A tree only deleted from.
            let d = try tx.tree("d")
            XCTAssertTrue(try tx.delete(bytes("k9"), in: d))
            XCTAssertTrue(try tx.delete(bytes("k8"), in: d))
            XCTAssertTrue(try tx.delete(bytes("k0"), in: b))
            try tx.put(bytes("new"), bytes("x"), in: b)
            XCTAssertTrue(try tx.delete(bytes("k2"), in: a))
            XCTAssertTrue(try tx.delete(bytes("k1"), in: b))
            let c = try tx.renameTree("a", to: "c")
            XCTAssertTrue(try tx.delete(bytes("k3"), in: c))
            XCTAssertTrue(try tx.delete(bytes("k4"), in: c))
            XCTAssertEqual(try tx.count(c), 45)
            XCTAssertEqual(try tx.count(b), 49)
            XCTAssertEqual(try tx.count(d), 48)
        }
        try db.close()
        let reopened = try open("interleaved.strata", DatabaseOptions(durability: .none))
        try reopened.read { tx in
            XCTAssertNil(try tx.treeIfPresent("a"))
            XCTAssertEqual(try tx.count(try tx.tree("c")), 45)
            XCTAssertEqual(try tx.scan(try tx.tree("c")).count, 45)
            XCTAssertEqual(try tx.count(try tx.tree("b")), 49)
            XCTAssertEqual(try tx.scan(try tx.tree("b")).count, 49)
            XCTAssertEqual(try tx.count(try tx.tree("d")), 48)
            XCTAssertEqual(try tx.scan(try tx.tree("d")).count, 48)
        }
        let report = try reopened.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
        try reopened.close()
    }

    /// Dropped and created again on the same root page: the new tree's
    /// handle works, the old one is stale.
    func testHandleOfATreeCreatedAgainOnTheSameRootIsStale() throws {
        let db = try open("again.strata", DatabaseOptions(durability: .none))
        try db.write { tx in try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("t")) }
        try db.write { tx in
            let old = try tx.tree("t")
            try tx.dropTree("t")
            let t = try tx.createTree("t")
            expectStale(try tx.put(bytes("b"), bytes("2"), in: old), "dropped or renamed")
            XCTAssertEqual(try tx.count(t), 0)
        }
        try db.read { tx in XCTAssertEqual(try tx.count(try tx.tree("t")), 0) }
    }

    /// A handle from an earlier transaction is refused, whatever happened
    /// to its tree since; so is one from a write transaction in a reader.
    func testHandleFromAnotherTransactionIsStale() throws {
        let db = try open("other.strata", DatabaseOptions(durability: .none))
        let first = try db.write { tx in
            let t = try tx.createTree("t")
            try tx.put(bytes("a"), bytes("1"), in: t)
            return t
        }
        try db.write { tx in
            try tx.dropTree("t")
            try tx.put(bytes("b"), bytes("2"), in: try tx.createTree("t"))
        }
        try db.write { tx in expectStale(try tx.put(bytes("c"), bytes("3"), in: first), "another transaction") }
        try db.read { tx in expectStale(try tx.get(bytes("a"), in: first), "another transaction") }
        let reader = try db.read { tx in try tx.tree("t") }
        try db.read { tx in expectStale(try tx.count(reader), "another transaction") }
        try db.read { tx in XCTAssertEqual(try tx.scan(try tx.tree("t")).map(\.key), [bytes("b")]) }
    }

    /// After a rename the old name's handle is stale and the one
    /// `renameTree` returned works; a cursor over a tree dropped under it
    /// throws instead of reading freed pages.
    func testRenamedAndDroppedUnderACursor() throws {
        let db = try open("renamed.strata", DatabaseOptions(durability: .none))
        try db.write { tx in
            let t = try tx.createTree("t")
            for i in 0..<500 { try tx.put(bytes("k\(i)"), [UInt8](repeating: 1, count: 100), in: t) }
        }
        try db.write { tx in
            let old = try tx.tree("t")
            let renamed = try tx.renameTree("t", to: "r")
            XCTAssertEqual(try tx.count(renamed), 500)
            expectStale(try tx.count(old), "dropped or renamed")
            let back = try tx.renameTree("r", to: "t")
            expectStale(try tx.count(old), "dropped or renamed")
            XCTAssertEqual(try tx.count(back), 500)

            let cursor = try tx.cursor(back)
            XCTAssertTrue(try cursor.first())
            XCTAssertTrue(try cursor.next())
            try tx.dropTree("t")
            expectStale(try cursor.next(), "dropped or renamed")
            expectStale(try cursor.first(), "dropped or renamed")
        }
        try db.read { tx in XCTAssertEqual(try tx.treeNames(), []) }
    }

    /// Handles that stay valid: drops and renames of other trees do not
    /// touch them, and a tree looked up twice gives equal handles.
    func testHandlesOfOtherTreesStayValid() throws {
        let db = try open("others.strata", DatabaseOptions(durability: .none))
        try db.write { tx in
            try tx.put(bytes("a"), bytes("1"), in: try tx.createTree("t"))
            try tx.createTree("x")
            try tx.createTree("y")
        }
        try db.write { tx in
            let t = try tx.tree("t")
            let created = try tx.createTree("c")
            try tx.dropTree("x")
            try tx.renameTree("y", to: "z")
            try tx.put(bytes("b"), bytes("2"), in: t)
            try tx.put(bytes("b"), bytes("2"), in: created)
            XCTAssertEqual(try tx.tree("t"), t)
            XCTAssertEqual(try tx.tree("c"), created)
            XCTAssertEqual(try tx.count(t), 2)
        }
        try db.read { tx in
            XCTAssertEqual(try tx.tree("t"), try tx.tree("t"))
            XCTAssertEqual(try tx.treeNames(), ["c", "t", "z"])
        }
    }

    /// Transactions share the catalog entries (root, count) they looked up,
    /// keyed by the commit they start from, and a commit that created,
    /// dropped or renamed no tree carries them forward with its new
    /// counts: every lookup after any kind of commit sees that commit's
    /// catalog, absent trees included.
    func testCatalogLookupsFollowEveryKindOfCommit() throws {
        let db = try open("catalog.strata", DatabaseOptions(durability: .none))
        func counts() throws -> [String: Int] {
            try db.read { tx in
                var found: [String: Int] = [:]
                for name in ["t", "u", "v"] {
                    if let tree = try tx.treeIfPresent(name) { found[name] = try tx.count(tree) }
                }
                return found
            }
        }
        try db.write { tx in try tx.put(bytes("a"), [], in: try tx.createTree("t")) }
        XCTAssertEqual(try counts(), ["t": 1])
        // Counts only: the next writer and the readers start from the
        // entries this commit carried forward.
        for round in 2...4 {
            try db.write { tx in
                XCTAssertNil(try tx.treeIfPresent("u"))
                let t = try tx.tree("t")
                XCTAssertEqual(try tx.count(t), round - 1)
                try tx.put(bytes("k\(round)"), [], in: t)
            }
            XCTAssertEqual(try counts(), ["t": round])
        }
        // A tree created where an absent one was looked up.
        try db.write { tx in
            XCTAssertNil(try tx.treeIfPresent("u"))
            try tx.put(bytes("a"), [], in: try tx.createTree("u"))
            try tx.put(bytes("z"), [], in: try tx.tree("t"))
        }
        XCTAssertEqual(try counts(), ["t": 5, "u": 1])
        try db.write { tx in
            try tx.renameTree("u", to: "v")
            XCTAssertNil(try tx.treeIfPresent("u"))
        }
        XCTAssertEqual(try counts(), ["t": 5, "v": 1])
        try db.write { tx in try tx.put(bytes("b"), [], in: try tx.tree("v")) }
        XCTAssertEqual(try counts(), ["t": 5, "v": 2])
        try db.write { tx in XCTAssertTrue(try tx.dropTree("t")) }
        XCTAssertEqual(try counts(), ["v": 2])
        // A rolled-back writer's lookups leave the next one's right.
        let tx = try db.beginWrite()
        try tx.put(bytes("c"), [], in: try tx.tree("v"))
        XCTAssertEqual(try tx.count(try tx.tree("v")), 3)
        tx.rollback()
        XCTAssertEqual(try counts(), ["v": 2])
        try db.write { tx in XCTAssertEqual(try tx.count(try tx.tree("v")), 2) }
        let report = try db.check()
        XCTAssertTrue(report.isHealthy, "\(report)")
    }

    /// A reader keeps its first tree's count apart from the others'
    /// (`rememberCount`): every tree counts its own entries, whichever
    /// was looked up first, asked again, or asked through a handle of
    /// another transaction's lookup of the same snapshot.
    func testAReaderCountsEachOfSeveralTrees() throws {
        let db = try open("counts.strata", DatabaseOptions(durability: .none))
        let sizes = ["a": 3, "b": 5, "c": 8]
        try db.write { tx in
            for (name, size) in sizes {
                let tree = try tx.createTree(name)
                for i in 0..<size { try tx.put(bytes("\(name)\(i)"), bytes("v"), in: tree) }
            }
        }
        for order in [["a", "b", "c"], ["c", "a", "b"], ["b", "b", "a", "c", "a"]] {
            try db.read { tx in
                // Looked up first, then counted in the reverse order.
                let trees = try order.map { try tx.tree($0) }
                for tree in trees.reversed() {
                    XCTAssertEqual(try tx.count(tree), sizes[tree.name], "\(order): \(tree.name)")
                }
                // Counted as each is looked up.
                for name in order.reversed() {
                    XCTAssertEqual(try tx.count(try tx.tree(name)), sizes[name], "\(order): \(name) again")
                }
            }
        }
        // A reader that counts a tree it never looked up by name first.
        try db.read { tx in
            XCTAssertEqual(try tx.count(try tx.tree("b")), 5)
            XCTAssertNil(try tx.treeIfPresent("missing"))
            XCTAssertEqual(try tx.count(try tx.tree("c")), 8)
            XCTAssertEqual(try tx.count(try tx.tree("b")), 5)
        }
        try db.close()
    }
}
