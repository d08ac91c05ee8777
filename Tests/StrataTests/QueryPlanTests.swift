import Foundation
import XCTest

@testable import Strata

/// Each predicate form the planner understands, with its pinned plan
/// (`explain`), and its results checked against `Predicate.evaluate` and a
/// reference sort over every model.
final class QueryPlanTests: StoreTestCase {
    var container: ModelContainer!
    var context: ModelContext!
    var all: [Gadget] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        container = try self.container(for: [Gadget.self, Maker.self, Part.self])
        let writer = ModelContext(container)
        let makers = (0..<10).map { Maker(name: "m\($0)", country: $0 % 2 == 0 ? "FR" : "DE") }
        for i in 0..<1000 {
            let gadget = Gadget(
                uid: 1000 + i, score: i % 100, name: i % 50 == 7 ? "Élan \(i % 50)" : "n\(i % 50)",
                rating: Double(i % 37) / 3, flag: i % 3 == 0, category: Status.allCases[i % 3])
            gadget.note = i % 4 == 0 ? nil : "note \(i % 10)"
            gadget.size = i % 5 == 0 ? nil : i % 20
            gadget.address = i % 2 == 0 ? Address(street: "s\(i)", city: "c\(i % 7)") : nil
            writer.insert(gadget)
            gadget.maker = makers[i % 10]
            if i % 10 == 0 {
                gadget.parts = [Part(label: "p\(i)", weight: i % 13), Part(label: "q\(i)", weight: 5)]
            }
        }
        try writer.save()
        context = ModelContext(container)
        all = try context.fetch(FetchDescriptor<Gadget>())
        XCTAssertEqual(all.count, 1000)
    }

    /// Asserts the plan of `descriptor`, and that its results, count and
    /// identifiers equal the reference.
    func check(
        _ descriptor: FetchDescriptor<Gadget>, plan expected: String, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let plan = try context.explain(descriptor)
        XCTAssertEqual(plan, expected, "plan was:\n\(plan)", file: file, line: line)
        let fetched = try context.fetch(descriptor)
        let reference = try Self.reference(all, descriptor)
        if descriptor.sortBy.isEmpty && descriptor.fetchLimit == nil {
            XCTAssertEqual(
                Set(fetched.map(\.uid)), Set(reference.map(\.uid)), "results differ", file: file, line: line)
        } else if descriptor.sortBy.isEmpty {
            XCTAssertEqual(fetched.count, reference.count, file: file, line: line)
            XCTAssertTrue(Set(fetched.map(\.uid)).isSubset(of: Set(try Self.reference(all, descriptor, paged: false).map(\.uid))))
        } else {
            XCTAssertEqual(fetched.map(\.uid), reference.map(\.uid), "results differ", file: file, line: line)
        }
        XCTAssertEqual(try context.fetchCount(descriptor), reference.count, "count differs", file: file, line: line)
        XCTAssertEqual(
            try context.fetchIdentifiers(descriptor), fetched.map(\.persistentModelID), "identifiers differ", file: file,
            line: line)
    }

    /// `Predicate.evaluate` over `models`, sorted by the descriptors with
    /// ties in row order, then paged.
    static func reference(_ models: [Gadget], _ descriptor: FetchDescriptor<Gadget>, paged: Bool = true) throws -> [Gadget] {
        var matching = try models.filter { try descriptor.predicate?.evaluate($0) ?? true }
        matching.sort { a, b in
            for sort in descriptor.sortBy {
                let result = totalOrder(sort, a, b) ?? sort.compare(a, b)
                if result != .orderedSame { return result == .orderedAscending }
            }
            return a.persistentModelID.rowID < b.persistentModelID.rowID
        }
        guard paged else { return matching }
        let start = min(descriptor.fetchOffset ?? 0, matching.count)
        // A limit of 0 is no limit, as in SwiftData (Core Data).
        let limit = descriptor.fetchLimit == 0 ? nil : descriptor.fetchLimit
        let end = limit.map { min(start + $0, matching.count) } ?? matching.count
        return Array(matching[start..<end])
    }

    /// The order of a sort on a Double: IEEE 754 totalOrder (-0.0 before
    /// 0.0, NaN by sign outside the infinities), not `<`.
    static func totalOrder<M: PersistentModel>(_ sort: SortDescriptor<M>, _ a: M, _ b: M) -> ComparisonResult? {
        guard let path = sort.keyPath, let x = a[keyPath: path] as? Double, let y = b[keyPath: path] as? Double else {
            return nil
        }
        if x.bitPattern == y.bitPattern { return .orderedSame }
        let ascending = x.isTotallyOrdered(belowOrEqualTo: y) == (sort.order == .forward)
        return ascending ? .orderedAscending : .orderedDescending
    }

    func testNoPredicateScans() throws {
        try check(FetchDescriptor<Gadget>(), plan: "scan Gadget")
    }

    func testEqualityOnTheUniqueAttributeSeeksItsTree() throws {
        let uid = 1234
        try check(FetchDescriptor(predicate: #Predicate<Gadget> { $0.uid == uid }), plan: "unique u.Gadget.uid: uid == 1234")
    }

    func testEqualityOnAnIndexedStringAndOnAnEnum() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.name == "n3" }), plan: "index i.Gadget.name: name == \"n3\"")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { "Élan 7" == $0.name }),
            plan: "index i.Gadget.name: name == \"Élan 7\"")
        let active = Status.active
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.category == active && $0.score == 4 }),
            plan: "index i.Gadget.category+score: category == \"active\" && score == 4")
    }

    func testComparisonsAndRangesBecomeKeyRanges() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.score >= 10 && $0.score < 12 }),
            plan: "index i.Gadget.score: score >= 10 && score < 12")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { (20...22).contains($0.score) }),
            plan: "index i.Gadget.score: score in 20...22")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { (20..<22).contains($0.score) && $0.flag }),
            plan: "index i.Gadget.score: score in 20..<22\nfilter: $0.flag")
        let range = 1500...1510
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { range.contains($0.uid) }),
            plan: "unique u.Gadget.uid: uid in 1500...1510")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.uid > 1990 }), plan: "unique u.Gadget.uid: uid > 1990")
    }

    func testCompoundIndexTakesAnEqualityThenARange() throws {
        let done = Status.done
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.category == done && $0.score > 90 }),
            plan: "index i.Gadget.category+score: category == \"done\" && score > 90")
    }

    func testCapturedArrayIsAnInList() throws {
        let names = ["n1", "n2", "nothing"]
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { names.contains($0.name) }),
            plan: "index i.Gadget.name: name in [\"n1\", \"n2\", \"nothing\"], 3 ranges")
    }

    func testPrefixIsARangeRecheckedOnRecords() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.name.starts(with: "n4") }),
            plan: "index i.Gadget.name: name starts with \"n4\"\nfilter: $0.name.starts(with: \"n4\")")
    }

    /// Without a sort, a limit or an offset, the rows an index range finds
    /// are read in row order (sorted before their records are looked up);
    /// with a limit they stay in index order, so the scan can stop early,
    /// and pages fetched with an offset and a limit agree with each other.
    func testUnsortedIndexScanReadsRecordsInRowOrder() throws {
        let predicate = #Predicate<Gadget> { $0.name.starts(with: "n1") }
        let fetched = try context.fetch(FetchDescriptor(predicate: predicate)).map(\.uid)
        XCTAssertEqual(fetched.count, 20 * 11)
        XCTAssertEqual(fetched, fetched.sorted(), "row order (uids were inserted ascending)")

        var limited = FetchDescriptor(predicate: predicate)
        limited.fetchLimit = 5
        XCTAssertEqual(try context.fetch(limited).map(\.uid), [1001, 1051, 1101, 1151, 1201], "index order: \"n1\" first")

        var pages: [Int] = []
        for page in 0..<12 {
            var descriptor = FetchDescriptor(predicate: predicate)
            (descriptor.fetchOffset, descriptor.fetchLimit) = (page * 20, 20)
            pages += try context.fetch(descriptor).map(\.uid)
        }
        XCTAssertEqual(pages.count, fetched.count)
        XCTAssertEqual(Set(pages), Set(fetched))
    }

    /// A model the context has registered comes back from an index scan
    /// without its record being read; a row another context deleted or
    /// moved out of the range since does not come back.
    func testRegisteredModelsComeBackAndRowsGoneFromTheIndexDoNot() throws {
        let descriptor = FetchDescriptor(predicate: #Predicate<Gadget> { $0.name == "n3" })
        let first = try context.fetch(descriptor)
        XCTAssertEqual(first.count, 20)
        let other = ModelContext(container)
        let theirs = try other.fetch(descriptor)
        other.delete(theirs[0])
        theirs[1].name = "moved"
        try other.save()
        let again = try context.fetch(descriptor)
        XCTAssertEqual(again.count, 18)
        XCTAssertTrue(again.allSatisfy { model in first.contains { $0 === model } }, "the registered models")
        XCTAssertFalse(again.contains { $0.uid == theirs[0].uid || $0.uid == theirs[1].uid })
    }

    func testDisjunctionOfIndexedConditionsIsAUnion() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.uid == 1001 || $0.name == "n9" }),
            plan: """
                union
                  unique u.Gadget.uid: uid == 1001
                  index i.Gadget.name: name == "n9"
                filter: ($0.uid == 1001 || $0.name == "n9")
                """)
    }

    func testSelectiveConditionsOnTwoIndexesIntersect() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.score == 3 && $0.name == "n3" }),
            plan: """
                intersection
                  index i.Gadget.score: score == 3
                  index i.Gadget.name: name == "n3"
                """)
    }

    func testUnindexedConditionsAreFilteredOnRecords() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.rating > 10.5 && $0.note != nil }),
            plan: "scan Gadget\nfilter: ($0.rating > 10.5 && $0.note != nil)")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { !($0.flag) || $0.score != 3 }),
            plan: "scan Gadget\nfilter: (!($0.flag) || $0.score != 3)")
    }

    func testSubstringArithmeticConditionalAndNilCoalescing() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.name.contains("4") }),
            plan: "scan Gadget\nfilter: $0.name.contains(\"4\")")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.score * 2 + 1 > 150 }),
            plan: "scan Gadget\nfilter: (($0.score * 2) + 1) > 150")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { ($0.flag ? $0.score : 0) > 50 }),
            plan: "scan Gadget\nfilter: ($0.flag ? $0.score : 0) > 50")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { ($0.size ?? 100) < 3 }),
            plan: "scan Gadget\nfilter: ($0.size ?? 100) < 3")
    }

    func testOptionalsNilLiteralFlatMapAndForcedUnwrap() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.size == nil }), plan: "index i.Gadget.size: size == nil")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.note.flatMap { $0.starts(with: "note 3") } == true }),
            plan: "scan Gadget\nfilter: $0.note.flatMap { $1 in $1.starts(with: \"note 3\") } == true")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.size != nil && $0.size! > 17 }),
            plan: "scan Gadget\nfilter: ($0.size != nil && $0.size! > 17)")
    }

    func testToOneChainsAndToManyCountsAndConditions() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.maker?.name == "m3" }),
            plan: "scan Gadget\nfilter: $0.maker.flatMap { $1 in $1.name } == \"m3\"")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.parts.count == 2 && $0.score < 30 }),
            plan: "index i.Gadget.score: score < 30\nfilter: $0.parts.count == 2")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.parts.isEmpty == false }),
            plan: "scan Gadget\nfilter: $0.parts.isEmpty == false")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.parts.contains { $0.weight > 10 } }),
            plan: "scan Gadget\nfilter: $0.parts.contains { $1 in $1.weight > 10 }")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.parts.allSatisfy { $0.weight == 5 } }),
            plan: "scan Gadget\nfilter: $0.parts.allSatisfy { $1 in $1.weight == 5 }")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.parts.filter { $0.weight < 3 }.count > 0 }),
            plan: "scan Gadget\nfilter: $0.parts.filter { $1 in $1.weight < 3 }.count > 0")
    }

    func testCodableStructMembersAndComputedProperties() throws {
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.address?.city == "c3" }),
            plan: "scan Gadget\nfilter: $0.address.flatMap { $1 in $1.city } == \"c3\"")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.doubledScore == 8 && $0.score < 10 }),
            plan: "index i.Gadget.score: score < 10\nfilter on models: $0.<computed (Int)> == 8")
    }

    func testUntranslatedFormsAreLeftToFoundation() throws {
        // A member of a String is not translated: Predicate.evaluate runs
        // the predicate on the models the indexed conjunct selects.
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.score == 5 && $0.name.utf8.count > 2 }),
            plan: "index i.Gadget.score: score == 5\nthen Predicate.evaluate on models")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.score == 5 && $0.category.rawValue > "b" }),
            plan: "index i.Gadget.score: score == 5\nthen Predicate.evaluate on models")
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.score == 5 || $0.name.utf8.count > 5 }),
            plan: "scan Gadget\nthen Predicate.evaluate on models")
    }

    func testIdentifierEqualityReadsTheRow() throws {
        let id = all[10].persistentModelID
        try check(
            FetchDescriptor(predicate: #Predicate<Gadget> { $0.persistentModelID == id }),
            plan: "rows \(id.rowID) of Gadget")
    }

    func testSortsUseTheIndexUnderALimit() throws {
        var descriptor = FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.score, order: .reverse)])
        descriptor.fetchLimit = 20
        try check(descriptor, plan: "index i.Gadget.score: every entry, reversed\norder: index order, reversed\nlimit 20")
        descriptor.fetchOffset = 15
        try check(
            descriptor, plan: "index i.Gadget.score: every entry, reversed\norder: index order, reversed\noffset 15\nlimit 20")
        let planned = Status.planned
        var ranged = FetchDescriptor<Gadget>(
            predicate: #Predicate { $0.category == planned && $0.score > 40 }, sortBy: [SortDescriptor(\.score)])
        ranged.fetchLimit = 5
        try check(
            ranged, plan: "index i.Gadget.category+score: category == \"planned\" && score > 40\norder: index order\nlimit 5")
    }

    func testSortsInMemoryByKeysOrByModels() throws {
        var descriptor = FetchDescriptor<Gadget>(
            predicate: #Predicate { $0.score < 50 }, sortBy: [SortDescriptor(\.name), SortDescriptor(\.rating, order: .reverse)])
        descriptor.fetchLimit = 30
        try check(
            descriptor,
            plan: "scan Gadget\nfilter: $0.score < 50\norder: sort by name, rating descending (top 30)\nlimit 30")
        descriptor.predicate = #Predicate { $0.score < 5 }
        try check(
            descriptor, plan: "index i.Gadget.score: score < 5\norder: sort by name, rating descending (top 30)\nlimit 30")
        let byMaker = FetchDescriptor<Gadget>(
            predicate: #Predicate { $0.score < 5 }, sortBy: [SortDescriptor(\.maker?.name), SortDescriptor(\.uid)])
        try check(byMaker, plan: "index i.Gadget.score: score < 5\norder: sort models by descriptors")
    }

    func testTrappingFormsAreRefusedWithTypedErrors() throws {
        let subscripted = FetchDescriptor(predicate: #Predicate<Gadget> { $0.name.utf8.count > 0 && [1, 2][$0.score] == 1 })
        XCTAssertThrowsError(try context.fetch(subscripted)) { error in
            XCTAssertEqual(error as? SwiftDataError, .unsupportedPredicate)
            XCTAssertTrue("\(error)".contains("subscript"), "\(error)")
        }
        let big = Int.max
        let overflow = FetchDescriptor(predicate: #Predicate<Gadget> { $0.score * big > 0 })
        XCTAssertThrowsError(try context.fetch(overflow)) { error in
            XCTAssertEqual(error as? SwiftDataError, .unsupportedPredicate)
            XCTAssertTrue("\(error)".contains("overflows"), "\(error)")
        }
        let unwrap = FetchDescriptor(predicate: #Predicate<Gadget> { $0.note! == "x" })
        XCTAssertThrowsError(try context.fetch(unwrap)) { error in
            XCTAssertEqual(error as? SwiftDataError, .unsupportedPredicate)
        }
        let division = FetchDescriptor(predicate: #Predicate<Gadget> { $0.score / ($0.score - $0.score) == 1 })
        XCTAssertThrowsError(try context.fetchCount(division)) { error in
            XCTAssertTrue("\(error)".contains("divides by zero"), "\(error)")
        }
        let sliced = FetchDescriptor(predicate: #Predicate<Gadget> { [1, 2, 3][0..<$0.score].isEmpty })
        XCTAssertThrowsError(try context.fetch(sliced)) { error in
            XCTAssertEqual(error as? SwiftDataError, .unsupportedPredicate)
            XCTAssertTrue("\(error)".contains("range subscript"), "\(error)")
        }
        let forced = FetchDescriptor(predicate: #Predicate<Gadget> { ($0.size as Any) as! Int == 3 })
        XCTAssertThrowsError(try context.fetch(forced)) { error in
            XCTAssertEqual(error as? SwiftDataError, .unsupportedPredicate)
            XCTAssertTrue("\(error)".contains("forced cast"), "\(error)")
        }
        // Left to Foundation (a member of a String), but with integer
        // arithmetic Foundation would trap on overflow: refused.
        let risky = FetchDescriptor(predicate: #Predicate<Gadget> { $0.name.utf8.count + $0.score > 3 })
        XCTAssertThrowsError(try context.fetch(risky)) { error in
            XCTAssertEqual(error as? SwiftDataError, .unsupportedPredicate)
            XCTAssertTrue("\(error)".contains("integer overflow"), "\(error)")
        }
    }

    func testPendingChangesAreMergedIntoIndexedFetches() throws {
        let changed = try XCTUnwrap(all.first { $0.uid == 1003 })
        changed.score = 77_777
        let deleted = try XCTUnwrap(all.first { $0.uid == 1004 })
        context.delete(deleted)
        let inserted = Gadget(uid: 5000, score: 77_777, name: "new", rating: 1, flag: true, category: .done)
        context.insert(inserted)
        let descriptor = FetchDescriptor(predicate: #Predicate<Gadget> { $0.score == 77_777 || $0.uid == 1004 })
        XCTAssertEqual(Set(try context.fetch(descriptor).map(\.uid)), [1003, 5000])
        XCTAssertEqual(try context.fetchCount(descriptor), 2)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor(predicate: #Predicate<Gadget> { $0.score == 3 })), 9)
        var stored = descriptor
        stored.includePendingChanges = false
        XCTAssertEqual(Set(try context.fetch(stored).map(\.uid)), [1004])
        var sorted = FetchDescriptor<Gadget>(sortBy: [SortDescriptor(\.score, order: .reverse)])
        sorted.fetchLimit = 3
        XCTAssertEqual(try context.fetch(sorted).map(\.uid).prefix(2), [1003, 5000])
    }

    func testBatchedFetchAndEnumerate() throws {
        let descriptor = FetchDescriptor<Gadget>(predicate: #Predicate { $0.score < 10 }, sortBy: [SortDescriptor(\.uid)])
        let fresh = ModelContext(container)
        let lazy = try fresh.fetch(descriptor, batchSize: 7)
        XCTAssertEqual(lazy.count, 100)
        XCTAssertEqual(lazy.map(\.uid), try Self.reference(all, descriptor).map(\.uid))
        XCTAssertEqual(lazy[99].uid, lazy.last?.uid)

        var seen: [Int] = []
        let enumerating = ModelContext(container)
        try enumerating.enumerate(descriptor, batchSize: 16) { seen.append($0.uid) }
        XCTAssertEqual(seen, lazy.map(\.uid))
        XCTAssertEqual(enumerating.registeredCount(of: Gadget.self), 0, "every batch was released")

        // A scan in row order is read batch by batch; paging still applies.
        var paged = FetchDescriptor<Gadget>(predicate: #Predicate { $0.rating > 5 })
        paged.fetchOffset = 7
        paged.fetchLimit = 40
        var pagedSeen: [Int] = []
        try enumerating.enumerate(paged, batchSize: 9) { pagedSeen.append($0.uid) }
        XCTAssertEqual(pagedSeen, try enumerating.fetch(paged).map(\.uid))
        XCTAssertEqual(pagedSeen.count, 40)
        var everything: [Int] = []
        try ModelContext(container).enumerate(FetchDescriptor<Gadget>(predicate: #Predicate { $0.rating > 5 }), batchSize: 9) {
            everything.append($0.uid)
        }
        XCTAssertEqual(everything, try Self.reference(all, FetchDescriptor(predicate: #Predicate { $0.rating > 5 })).map(\.uid))

        XCTAssertThrowsError(try enumerating.enumerate(descriptor, batchSize: 16) { $0.score += 1 }) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
        }
        enumerating.rollback()
        try enumerating.enumerate(descriptor, batchSize: 16, allowEscapingMutations: true) { $0.flag = true }
        XCTAssertTrue(enumerating.hasChanges)

        enumerating.insert(Gadget(uid: 9999, score: 1, name: "x", rating: 0, flag: true, category: .done))
        XCTAssertThrowsError(try enumerating.fetch(descriptor, batchSize: 10)) { error in
            XCTAssertEqual(error as? SwiftDataError, .includePendingChangesWithBatchSize)
        }
    }
}

extension ModelContext {
    /// How many models of `type` the identity map holds.
    func registeredCount<T: PersistentModel>(of type: T.Type) -> Int {
        guard let entity = container.schema.entity(for: T.self) else { return 0 }
        return registry[entity.ordinal].count
    }
}

/// Sorting by a Double or Float attribute gives one order however the
/// fetch runs — through an index (a limit, or a range on the sorted
/// attribute) or sorted in memory (no index, no limit, unsaved changes
/// merged in): IEEE 754 totalOrder, the order of the attribute's index
/// keys. Negative NaN first, then -infinity, the negatives, -0.0, 0.0,
/// the positives, infinity, NaN last; ties (equal bit patterns) in row
/// order, in both directions. Predicates keep Swift's `==` and `<`.
final class FloatingSortTests: StoreTestCase {
    static let values: [Double] = [
        1, .nan, -0.0, .infinity, -.nan, 0.0, -1, -.infinity, .nan, 0.0, -0.0, .greatestFiniteMagnitude,
        -.leastNonzeroMagnitude, Double(nan: 7, signaling: false), -.nan, 2.5, -.greatestFiniteMagnitude, 0.0,
    ]

    var container: ModelContainer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        container = try self.container(for: [Measure.self])
        let context = ModelContext(container)
        for (uid, value) in Self.values.enumerated() { context.insert(Measure(uid: uid, value: value)) }
        try context.save()
    }

    /// The uids of `values` (uid = position = row order) in totalOrder.
    static func expected(_ values: [Double], float: Bool, reverse: Bool, where keep: (Double) -> Bool = { _ in true })
        -> [Int]
    {
        func compare(_ a: Double, _ b: Double) -> ComparisonResult {
            if float {
                let (x, y) = (Float(a), Float(b))
                if x.bitPattern == y.bitPattern { return .orderedSame }
                return x.isTotallyOrdered(belowOrEqualTo: y) ? .orderedAscending : .orderedDescending
            }
            if a.bitPattern == b.bitPattern { return .orderedSame }
            return a.isTotallyOrdered(belowOrEqualTo: b) ? .orderedAscending : .orderedDescending
        }
        return values.indices.filter { keep(values[$0]) }.sorted { i, j in
            var result = compare(values[i], values[j])
            if reverse {
                result =
                    result == .orderedAscending
                    ? .orderedDescending : result == .orderedDescending ? .orderedAscending : .orderedSame
            }
            return result == .orderedSame ? i < j : result == .orderedAscending
        }
    }

    /// The four sorted attributes: Double and Float, indexed and plain.
    private struct Sorted {
        static let all = [
            Sorted(name: "indexed"), Sorted(name: "plain"), Sorted(name: "indexedFloat"), Sorted(name: "plainFloat"),
        ]
        let name: String
        var isFloat: Bool { name.hasSuffix("Float") }

        func descriptor(_ order: SortOrder) -> SortDescriptor<Measure> {
            switch name {
            case "indexed": return SortDescriptor(\.indexed, order: order)
            case "plain": return SortDescriptor(\.plain, order: order)
            case "indexedFloat": return SortDescriptor(\.indexedFloat, order: order)
            default: return SortDescriptor(\.plainFloat, order: order)
            }
        }
    }

    func testEverySortAndPageAgreesWithTotalOrder() throws {
        let context = ModelContext(container)
        let low = -Double.infinity
        let lowFloat = -Float.infinity
        let predicates: [(name: String, predicate: Predicate<Measure>?, keep: (Double) -> Bool)] = [
            ("none", nil, { _ in true }),
            ("indexed >= -inf", #Predicate<Measure> { $0.indexed >= low }, { $0 >= low }),
            ("plain >= -inf", #Predicate<Measure> { $0.plain >= low }, { $0 >= low }),
            ("indexedFloat >= -inf", #Predicate<Measure> { $0.indexedFloat >= lowFloat }, { Float($0) >= lowFloat }),
        ]
        var checked = 0
        var plans: Set<String> = []
        for sorted in Sorted.all {
            let float = sorted.isFloat
            for order in [SortOrder.forward, .reverse] {
                for (predicateName, predicate, keep) in predicates {
                    let all = Self.expected(Self.values, float: float, reverse: order == .reverse, where: keep)
                    for limit in [nil, 0, 1, 3, 7, 100] as [Int?] {
                        for offset in [nil, 0, 2, 5] as [Int?] {
                            var descriptor = FetchDescriptor<Measure>(predicate: predicate, sortBy: [sorted.descriptor(order)])
                            descriptor.fetchLimit = limit
                            descriptor.fetchOffset = offset
                            let start = min(offset ?? 0, all.count)
                            let end = (limit == 0 ? nil : limit).map { min(start + $0, all.count) } ?? all.count
                            let note =
                                "sort \(sorted.name) \(order), where \(predicateName), limit \(limit ?? -1), offset \(offset ?? -1)\n"
                                + ((try? context.explain(descriptor)) ?? "")
                            plans.insert(try context.explain(descriptor).components(separatedBy: "\n")[0])
                            let fetched = try context.fetch(descriptor)
                            XCTAssertEqual(fetched.map(\.uid), Array(all[start..<end]), note)
                            XCTAssertEqual(try context.fetchIdentifiers(descriptor), fetched.map(\.persistentModelID), note)
                            checked += 1
                        }
                    }
                }
            }
        }
        XCTAssertEqual(checked, 4 * 2 * 4 * 6 * 4)
        // Both access paths ran: index scans and plain scans.
        XCTAssertTrue(plans.contains { $0.contains("i.Measure.indexed") }, "\(plans)")
        XCTAssertTrue(plans.contains { $0.hasPrefix("scan") }, "\(plans)")
    }

    /// Unsaved inserts merged into an index-ordered fetch are sorted in
    /// memory with the stored rows: still totalOrder.
    func testPendingInsertsMergeInTotalOrder() throws {
        let context = ModelContext(container)
        let added: [Double] = [-.nan, .nan, -0.0, 0.0, -.infinity]
        for (offset, value) in added.enumerated() { context.insert(Measure(uid: Self.values.count + offset, value: value)) }
        let values = Self.values + added
        for sorted in Sorted.all {
            let float = sorted.isFloat
            for order in [SortOrder.forward, .reverse] {
                let all = Self.expected(values, float: float, reverse: order == .reverse)
                for limit in [nil, 4, 30] as [Int?] {
                    var descriptor = FetchDescriptor<Measure>(sortBy: [sorted.descriptor(order)])
                    descriptor.fetchLimit = limit
                    let note = "sort \(sorted.name) \(order), limit \(limit ?? -1)"
                    XCTAssertEqual(try context.fetch(descriptor).map(\.uid), Array(all.prefix(limit ?? all.count)), note)
                }
            }
        }
    }

    /// A sort on a Double after one the stored values cannot give (a
    /// computed property) sorts models in memory: the Double still sorts
    /// in totalOrder.
    func testModelSortUsesTotalOrderToo() throws {
        let context = ModelContext(container)
        for sorted in Sorted.all {
            let float = sorted.isFloat
            for order in [SortOrder.forward, .reverse] {
                for limit in [nil, 5] as [Int?] {
                    var descriptor = FetchDescriptor<Measure>(sortBy: [SortDescriptor(\.constant), sorted.descriptor(order)])
                    descriptor.fetchLimit = limit
                    let plan = try context.explain(descriptor)
                    XCTAssertTrue(plan.contains("sort models by descriptors"), plan)
                    let expected = Self.expected(Self.values, float: float, reverse: order == .reverse)
                    XCTAssertEqual(
                        try context.fetch(descriptor).map(\.uid), Array(expected.prefix(limit ?? expected.count)),
                        "sort \(sorted.name) \(order), limit \(limit ?? -1)")
                }
            }
        }
    }

    /// Predicates compare with Swift's operators: -0.0 equals 0.0, NaN
    /// equals nothing, through an index or not.
    func testPredicatesKeepSwiftEquality() throws {
        let context = ModelContext(container)
        let zero = 0.0
        let negativeZero = -0.0
        let nan = Double.nan
        let zeros = Set(Self.values.indices.filter { Self.values[$0] == 0 })
        XCTAssertEqual(zeros.count, 5)
        func uids(_ predicate: Predicate<Measure>) throws -> Set<Int> {
            Set(try context.fetch(FetchDescriptor(predicate: predicate)).map(\.uid))
        }
        XCTAssertEqual(try uids(#Predicate { $0.indexed == zero }), zeros)
        XCTAssertEqual(try uids(#Predicate { $0.plain == zero }), zeros)
        XCTAssertEqual(try uids(#Predicate { $0.indexed == negativeZero }), zeros)
        XCTAssertEqual(try uids(#Predicate { $0.plain == negativeZero }), zeros)
        XCTAssertEqual(try uids(#Predicate { $0.indexed == nan }), [])
        XCTAssertEqual(try uids(#Predicate { $0.plain == nan }), [])
        let negatives = Set(Self.values.indices.filter { Self.values[$0] < 0 })
        XCTAssertEqual(try uids(#Predicate { $0.indexed < zero }), negatives)
        XCTAssertEqual(try uids(#Predicate { $0.plain < zero }), negatives)
        // As Floats, -leastNonzeroMagnitude rounds to -0.0.
        let floatZero: Float = 0
        let floatZeros = Set(Self.values.indices.filter { Float(Self.values[$0]) == 0 })
        XCTAssertEqual(floatZeros.count, 6)
        XCTAssertEqual(try uids(#Predicate { $0.indexedFloat == floatZero }), floatZeros)
        XCTAssertEqual(try uids(#Predicate { $0.plainFloat == floatZero }), floatZeros)
    }
}

/// `fetch(_:batchSize:)` returns one consistent result with a fixed count:
/// rows another context deletes after the fetch, and records damaged
/// after it, never make reading the collection trap; a record that does
/// not decode when the fetch runs fails the fetch.
final class BatchedFetchTests: StoreTestCase {
    var container: ModelContainer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        container = try self.container(for: [Measure.self])
        let writer = ModelContext(container)
        for uid in 0..<20 { writer.insert(Measure(uid: uid, value: Double(uid))) }
        try writer.save()
    }

    func testRowsDeletedAfterTheFetchKeepTheirPlace() throws {
        let reader = ModelContext(container)
        let results = try reader.fetch(FetchDescriptor<Measure>(sortBy: [SortDescriptor(\.uid)]), batchSize: 3)
        // Another context deletes rows of every batch but the first.
        let doomed = [4, 5, 9, 13, 14, 19]
        let deleter = ModelContext(container)
        for model in try deleter.fetch(FetchDescriptor<Measure>()) where doomed.contains(model.uid) {
            deleter.delete(model)
        }
        try deleter.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Measure>()), 14)

        XCTAssertEqual(results.count, 20)
        XCTAssertEqual(results.map(\.uid), Array(0..<20))
        XCTAssertEqual(results[19].indexed, 19)
        XCTAssertEqual(Array(results.reversed()).map(\.uid), Array((0..<20).reversed()))
        reader.processPendingChanges()
        XCTAssertEqual(results.filter(\.isDeleted).map(\.uid), doomed)
        XCTAssertEqual(results.count, 20)
    }

    func testDamagedRecordsFailTheFetchNotTheCollection() throws {
        let tree = Store.treeName(entityName: "Measure")
        let database = container.store.database
        let original = try XCTUnwrap(try database.read { tx in try tx.get(RowKey.encode(5), in: tx.tree(tree)) })
        func damage(_ record: [UInt8]) throws {
            try database.write { tx in try tx.put(RowKey.encode(5), record, in: tx.tree(tree)) }
        }

        // Fetched, then damaged: the collection holds what the fetch read.
        let results = try ModelContext(container).fetch(FetchDescriptor<Measure>(), batchSize: 4)
        try damage([])
        XCTAssertEqual(results.map(\.uid).sorted(), Array(0..<20))

        // Damaged when the fetch runs: the fetch throws.
        XCTAssertThrowsError(try ModelContext(container).fetch(FetchDescriptor<Measure>(), batchSize: 4)) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .corruptRecord, "\(error)")
        }
        try damage(original)
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Measure>(), batchSize: 4).count, 20)
    }

    func testARowThatCannotBeReadAgainGetsAStandInNotATrap() throws {
        let context = ModelContext(container)
        let rowOfNine = try XCTUnwrap(
            try ModelContext(container).fetch(FetchDescriptor<Measure>(predicate: #Predicate { $0.uid == 9 })).first
        )
        .persistentModelID.rowID
        let results = try context.fetch(FetchDescriptor<Measure>(sortBy: [SortDescriptor(\.uid)]), batchSize: 4)
        XCTAssertNil(results.readFailure)
        results.failReads(of: [rowOfNine])

        let read = results.map { $0 }
        XCTAssertEqual(read.count, 20)
        for (position, model) in read.enumerated() where position != 9 {
            XCTAssertEqual(model.uid, position)
            XCTAssertFalse(model.isDeleted)
        }
        let standIn = read[9]
        XCTAssertTrue(standIn.isDeleted)
        XCTAssertNil(standIn.modelContext)
        XCTAssertEqual((results.readFailure as? SwiftDataError)?.code, .corruptRecord)
        // The context is unharmed: the row reads from the store as it is.
        XCTAssertEqual(try context.fetch(FetchDescriptor<Measure>(predicate: #Predicate { $0.uid == 9 })).count, 1)
    }
}
