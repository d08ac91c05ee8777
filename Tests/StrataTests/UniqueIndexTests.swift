import Foundation
import StrataTesting
import XCTest

@testable import Strata

@Model
final class Member {
    #Unique<Member>([\.email], [\.team, \.number])
    #Index<Member>([\.nickname], [\.status, \.joined])

    var email: String
    var team: String
    var number: Int
    var nickname: String?
    var status: Status
    var joined: Date
    var score = 0

    init(email: String, team: String, number: Int, nickname: String? = nil, status: Status = .planned) {
        self.email = email
        self.team = team
        self.number = number
        self.nickname = nickname
        self.status = status
        self.joined = Date(timeIntervalSinceReferenceDate: Double(number))
    }
}

@Model
final class Tag {
    @Attribute(.unique) var name: String
    var uses: Int

    init(name: String, uses: Int) {
        self.name = name
        self.uses = uses
    }
}

@Model
final class BadlyIndexed {
    #Index<BadlyIndexed>([\.address])
    var address: Address
    init(address: Address) { self.address = address }
}

/// Unique constraints (upsert, violations) and indexes (maintenance, the
/// object-layer check).
final class UniqueIndexTests: StoreTestCase {
    func container() throws -> ModelContainer { try container(for: [Member.self, Tag.self]) }

    func assertHealthy(_ container: ModelContainer, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(try container.checkIntegrity(), [], file: file, line: line)
    }

    /// The values of index key `key`, checking that it ends with a row.
    func indexValues(_ key: [UInt8]) throws -> [KeyEncoding.Element] {
        try key.withUnsafeBytes { raw in
            XCTAssertNotNil(KeyGroup.row(inIndexKey: raw), "\(key) ends with a row")
            return try KeyEncoding.decode(Array(KeyGroup.values(inIndexKey: raw)))
        }
    }

    func testDuplicateInsertsInOneSaveUpsertIntoOneRow() throws {
        let container = try container()
        let context = ModelContext(container)
        let first = Tag(name: "swift", uses: 1)
        let second = Tag(name: "swift", uses: 2)
        context.insert(first)
        context.insert(second)
        try context.save()
        XCTAssertEqual(first.persistentModelID, second.persistentModelID, "both stand for the one row")
        let fresh = ModelContext(container)
        let tags = try fresh.fetch(FetchDescriptor<Tag>())
        XCTAssertEqual(tags.map(\.uses), [2], "the later insert's values win")
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Tag>()), 1)
        try assertHealthy(container)
    }

    func testInsertMatchingASavedRowUpdatesItAndKeepsItsIdentifier() throws {
        let container = try container()
        let context = ModelContext(container)
        let original = Tag(name: "db", uses: 1)
        context.insert(original)
        try context.save()
        let id = original.persistentModelID

        let duplicate = Tag(name: "db", uses: 7)
        context.insert(duplicate)
        let log = EventLog()
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: context, queue: nil) {
            let info = $0.userInfo
            let key = ModelContext.NotificationKey.self
            log.append("inserted \(info?[key.insertedIdentifiers.rawValue] as? [PersistentIdentifier] ?? [])")
            log.append("updated \(info?[key.updatedIdentifiers.rawValue] as? [PersistentIdentifier] ?? [])")
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try context.save()
        XCTAssertEqual(duplicate.persistentModelID, id, "the surviving row keeps its identifier")
        XCTAssertEqual(log.events, ["inserted []", "updated \([id])"])
        XCTAssertEqual(original.uses, 7, "the instance already registered shows the saved values")
        let registered: Tag? = context.registeredModel(for: id)
        XCTAssertTrue(registered === duplicate)
        let tags = try ModelContext(container).fetch(FetchDescriptor<Tag>())
        XCTAssertEqual(tags.map(\.uses), [7])
        XCTAssertEqual(tags.map(\.persistentModelID), [id])
        try assertHealthy(container)
    }

    func testUpsertAcrossContexts() throws {
        let container = try container()
        let first = ModelContext(container)
        first.insert(Tag(name: "shared", uses: 1))
        try first.save()
        let id = try XCTUnwrap(first.fetch(FetchDescriptor<Tag>()).first?.persistentModelID)

        let second = ModelContext(container)
        let other = Tag(name: "shared", uses: 3)
        second.insert(other)
        second.insert(Tag(name: "new", uses: 1))
        try second.save()
        XCTAssertEqual(other.persistentModelID, id)
        let names = try ModelContext(container).fetch(FetchDescriptor<Tag>(sortBy: [SortDescriptor(\.name)])).map {
            "\($0.name)=\($0.uses)"
        }
        XCTAssertEqual(names, ["new=1", "shared=3"])
        try assertHealthy(container)
    }

    /// An upsert in the context that holds the row's model: the instance
    /// it displaced stays usable, and another context's update and delete
    /// of the row reach it as they reach the upserted one. Before, it
    /// missed them, and a later change to it (a nullify included) made
    /// the context's saves throw `modelDeleted` for good.
    func testTheModelAnUpsertDisplacedFollowsOtherSaves() throws {
        let container = try container()
        let context = ModelContext(container)
        let held = Tag(name: "shared", uses: 1)
        context.insert(held)
        try context.save()
        let upserted = Tag(name: "shared", uses: 2)
        context.insert(upserted)
        try context.save()
        XCTAssertEqual(upserted.persistentModelID, held.persistentModelID)
        XCTAssertEqual(held.uses, 2, "the displaced model shows the saved values")

        let other = ModelContext(container)
        let stored = try XCTUnwrap(other.fetch(FetchDescriptor<Tag>()).first)
        stored.uses = 5
        try other.save()
        XCTAssertEqual(try context.fetch(FetchDescriptor<Tag>()).map(\.uses), [5])
        XCTAssertEqual(held.uses, 5, "another context's update reaches the displaced model")

        other.delete(stored)
        try other.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Tag>()), 0)
        XCTAssertTrue(held.isDeleted, "another context's delete reaches the displaced model")
        XCTAssertTrue(upserted.isDeleted)
        held.uses = 9
        context.delete(held)
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Tag>()), 0)

        // Deleting the displaced instance in its own context takes the
        // upserted one with it.
        let again = Tag(name: "again", uses: 1)
        context.insert(again)
        try context.save()
        let upsertedAgain = Tag(name: "again", uses: 2)
        context.insert(upsertedAgain)
        try context.save()
        context.delete(again)
        try context.save()
        XCTAssertNil(upsertedAgain.modelContext)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Tag>()), 0)
        context.insert(Tag(name: "later", uses: 1))
        try context.save()
        try assertHealthy(container)
    }

    func testInsertMatchingTwoRowsIsAViolationAndWritesNothing() throws {
        let container = try container()
        let context = ModelContext(container)
        context.insert(Member(email: "a@x", team: "red", number: 1))
        context.insert(Member(email: "b@x", team: "blue", number: 2))
        try context.save()

        // Email of the first, team and number of the second.
        let clash = Member(email: "a@x", team: "blue", number: 2)
        context.insert(clash)
        context.insert(Tag(name: "unrelated", uses: 1))
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .uniqueConstraintViolation)
            XCTAssertTrue("\(error)".contains("Member"), "\(error)")
        }
        XCTAssertTrue(context.hasChanges, "the pending changes are kept")
        XCTAssertEqual(context.insertedModelsArray.count, 2)
        XCTAssertTrue(clash.persistentModelID.rowID > 2, "the failed upsert gave the row back")
        let fresh = ModelContext(container)
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Member>()), 2)
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Tag>()), 0, "nothing of the failed save was written")
        try assertHealthy(container)
    }

    func testChangingAModelToAnotherRowsUniqueValuesIsAViolation() throws {
        let container = try container()
        let context = ModelContext(container)
        let a = Tag(name: "a", uses: 1)
        let b = Tag(name: "b", uses: 1)
        context.insert(a)
        context.insert(b)
        try context.save()
        b.name = "a"
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .uniqueConstraintViolation)
            XCTAssertTrue("\(error)".contains("\"a\""), "the message names the values: \(error)")
        }
        XCTAssertTrue(b.hasChanges)
        let names = try ModelContext(container).fetch(FetchDescriptor<Tag>(sortBy: [SortDescriptor(\.name)])).map(\.name)
        XCTAssertEqual(names, ["a", "b"])
        // Swapping through a free value works.
        b.name = "c"
        try context.save()
        try assertHealthy(container)
    }

    /// One save may move unique values between its changed models: a
    /// swap, a rotation of three, a compound key handed on. Each holds at
    /// the end of the save, so it is no violation.
    func testOneSaveSwapsAndRotatesUniqueValues() throws {
        let container = try container()
        let context = ModelContext(container)
        let tags = ["a", "b", "c"].map { Tag(name: $0, uses: 0) }
        for tag in tags { context.insert(tag) }
        let first = Member(email: "1@x", team: "red", number: 1)
        let second = Member(email: "2@x", team: "red", number: 2)
        context.insert(first)
        context.insert(second)
        try context.save()
        (tags[0].name, tags[1].name) = ("b", "a")
        try context.save()
        (tags[0].name, tags[1].name, tags[2].name) = ("c", "b", "a")
        (first.number, second.number) = (2, 1)
        try context.save()
        let names = try ModelContext(container).fetch(FetchDescriptor<Tag>(sortBy: [SortDescriptor(\.uses)]))
        XCTAssertEqual(Set(names.map(\.name)), ["a", "b", "c"])
        XCTAssertEqual(tags.map(\.name), ["c", "b", "a"])
        let fresh = ModelContext(container)
        let byNumber = try fresh.fetch(FetchDescriptor<Member>(sortBy: [SortDescriptor(\.number)])).map(\.email)
        XCTAssertEqual(byNumber, ["2@x", "1@x"])
        // A value given up by no one is still a violation, and the
        // released keys come back with the rolled-back save.
        tags[0].name = "a"
        tags[1].name = "z"
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .uniqueConstraintViolation)
        }
        try assertHealthy(container)
    }

    func testDeleteThenInsertTheSameUniqueValuesInOneSave() throws {
        let container = try container()
        let context = ModelContext(container)
        let old = Tag(name: "x", uses: 1)
        context.insert(old)
        try context.save()
        context.delete(old)
        let replacement = Tag(name: "x", uses: 2)
        context.insert(replacement)
        try context.save()
        XCTAssertNotEqual(replacement.persistentModelID, old.persistentModelID, "a new row, not an upsert into a deleted one")
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Tag>()).map(\.uses), [2])
        try assertHealthy(container)
    }

    /// A model renamed away from a unique value in the save that inserts
    /// a new model with it gives the value up, as a delete would: the
    /// insert gets a row of its own, and the renamed model keeps its other
    /// values. Before, the insert took the renamed model's row (its stored
    /// key was still there), and the renamed model's values were lost.
    func testRenameThenInsertTheOldUniqueValuesInOneSave() throws {
        let container = try container()
        for insertFirst in [true, false] {
            let (x, y) = ("x\(insertFirst)", "y\(insertFirst)")
            let context = ModelContext(container)
            let old = Tag(name: x, uses: 1)
            context.insert(old)
            try context.save()
            let replacement = Tag(name: x, uses: 2)
            if insertFirst { context.insert(replacement) }
            old.name = y
            if !insertFirst { context.insert(replacement) }
            try context.save()
            XCTAssertNotEqual(replacement.persistentModelID, old.persistentModelID, "insert first: \(insertFirst)")
            let stored = try ModelContext(container).fetch(
                FetchDescriptor<Tag>(
                    predicate: #Predicate { $0.name == x || $0.name == y }, sortBy: [SortDescriptor(\.uses)]))
            XCTAssertEqual(stored.map(\.name), [y, x], "insert first: \(insertFirst)")
            try assertHealthy(container)
        }
    }

    func testIndexesFollowInsertsUpdatesAndDeletes() throws {
        let container = try container()
        let context = ModelContext(container)
        var members: [Member] = []
        for i in 0..<40 {
            let member = Member(
                email: "m\(i)@x", team: "t\(i % 4)", number: i, nickname: i % 3 == 0 ? nil : "n\(i % 7)",
                status: Status.allCases[i % 3])
            members.append(member)
            context.insert(member)
        }
        try context.save()
        try assertHealthy(container)

        for member in members where member.number % 5 == 0 {
            member.nickname = member.nickname == nil ? "now" : nil
            member.status = .done
            member.score += 1  // not indexed
        }
        for member in members where member.number % 7 == 0 { context.delete(member) }
        try context.save()
        try assertHealthy(container)

        // The nickname index lists every row, nil first, in value order.
        let entries = try container.store.database.read { tx in
            try tx.scan(XCTUnwrap(tx.treeIfPresent("i.Member.nickname"))).map { try self.indexValues($0.key) }
        }
        let remaining = members.filter { $0.number % 7 != 0 }
        // Enum values are keyed by their raw value, dates as seconds.
        let statusEntries = try container.store.database.read { tx in
            try tx.scan(XCTUnwrap(tx.treeIfPresent("i.Member.status+joined"))).map { try self.indexValues($0.key) }
        }
        XCTAssertEqual(
            Set(statusEntries.map { $0[0] }), Set(Set(remaining.map(\.status.rawValue)).map { KeyEncoding.Element.string($0) }))
        XCTAssertTrue(statusEntries.allSatisfy { if case .double = $0[1] { true } else { false } })
        XCTAssertEqual(entries.count, remaining.count)
        let stored = entries.map { $0[0] }
        let expected = remaining.map { $0.nickname.map { KeyEncoding.Element.string($0) } ?? .null }
        XCTAssertEqual(
            stored.map { KeyEncoding.encode([$0]) },
            expected.map { KeyEncoding.encode([$0]) }.sorted { $0.lexicographicallyPrecedes($1) })
    }

    func testIntegrityCheckFindsMissingAndStrayEntries() throws {
        let container = try container()
        let context = ModelContext(container)
        for i in 0..<5 { context.insert(Member(email: "m\(i)@x", team: "t", number: i, nickname: "n\(i)")) }
        try context.save()
        try assertHealthy(container)
        skipIntegrityCheck(of: container, because: "index and unique entries are removed and added, as checked here")
        try container.store.database.write { tx in
            let index = try tx.tree("i.Member.nickname")
            let first = try XCTUnwrap(tx.scan(index).first?.key)
            try tx.delete(first, in: index)
            var ghost = KeyEncoding.encode([.string("ghost")])
            KeyGroup.appendRow(99, to: &ghost)
            try tx.put(ghost, [], in: index)
            let unique = try tx.tree("u.Member.email")
            try tx.put(KeyEncoding.encode([.string("nobody@x")]), KeyGroup.uniqueValue(3), in: unique)
        }
        let problems = try container.checkIntegrity()
        let reasons = problems.map(\.description)
        XCTAssertEqual(problems.count, 3, "\(reasons)")
        XCTAssertTrue(reasons.contains { $0.contains("i.Member.nickname row 1") && $0.contains("no entry") }, "\(reasons)")
        XCTAssertTrue(reasons.contains { $0.contains("i.Member.nickname") && $0.contains("matches no record") }, "\(reasons)")
        XCTAssertTrue(reasons.contains { $0.contains("u.Member.email row 3") }, "\(reasons)")
    }

    func testIntegrityCheckFindsDanglingRelationships() throws {
        let container = try container(for: [Trip.self], name: "trips.store")
        let context = ModelContext(container)
        let trip = Trip(name: "Oslo", destination: "Norway")
        trip.livingAccommodation = LivingAccommodation(address: "Gate 1", placeName: "Hytte")
        context.insert(trip)
        try context.save()
        try assertHealthy(container)
        skipIntegrityCheck(of: container, because: "the accommodation records are removed, as checked here")
        try container.store.database.write { tx in
            let tree = try tx.tree("e.LivingAccommodation")
            for (key, _) in try tx.scan(tree) { try tx.delete(key, in: tree) }
        }
        // The trip's reference dangles, and the removed record's reverse-index
        // entry is left without its to-one.
        let problems = try container.checkIntegrity().map(\.description)
        XCTAssertEqual(problems.count, 2, "\(problems)")
        XCTAssertTrue(problems.contains { $0.contains("livingAccommodation refers to row") }, "\(problems)")
        XCTAssertTrue(problems.contains { $0.hasPrefix("r.LivingAccommodation.trip") }, "\(problems)")
    }

    func testAnIndexOnAnUnkeyableAttributeIsRefused() {
        XCTAssertThrowsError(
            try ModelContainer(for: BadlyIndexed.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .unknownSchema)
            XCTAssertTrue("\(error)".contains("BadlyIndexed.address"), "\(error)")
        }
    }
}
