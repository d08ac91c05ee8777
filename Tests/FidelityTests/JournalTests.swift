import FidelitySupport
import Foundation
import Strata
import XCTest

nonisolated final class JournalTests: FidelityTestCase {
    func testLetPropertiesAndARequiredToOneRoundTrip() throws {
        let id: UUID
        let created: Date
        do {
            let context = ModelContext(try container(Journal.self))
            let journal = Journal(title: "Travel")
            journal.mood = .happy
            context.insert(journal)
            journal.entries.append(Entry(text: "Day one in Lisbon", journal: journal))
            let second = Entry(text: "Rain", journal: journal)
            context.insert(second)
            XCTAssertEqual(journal.entries.count, 2, "the inverse of a required to-one is kept")
            try context.save()
            id = journal.id
            created = journal.createdAt
        }
        let context = ModelContext(try container(Journal.self))
        let journal = try XCTUnwrap(try context.fetch(FetchDescriptor<Journal>()).first)
        XCTAssertEqual(journal.id, id, "a let is read back")
        XCTAssertEqual(journal.createdAt, created)
        XCTAssertEqual(journal.mood, .happy)
        XCTAssertEqual(journal.entryCount, 2)
        let entries = try context.fetch(FetchDescriptor<Entry>(sortBy: [SortDescriptor(\.words)]))
        XCTAssertEqual(entries.map(\.words), [1, 4])
        XCTAssertTrue(entries.allSatisfy { $0.journal === journal }, "the required to-one loads with the model")
        XCTAssertEqual(
            try context.fetchCount(FetchDescriptor<Journal>(predicate: #Predicate { $0.id == id && $0.createdAt == created })), 1)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Entry>(predicate: #Predicate { $0.journal.title == "Travel" })), 2)

        // Moving an entry to another journal.
        let work = Journal(title: "Work")
        context.insert(work)
        entries[0].journal = work
        XCTAssertEqual(journal.entries.count, 1)
        try context.save()
        let again = ModelContext(try container(Journal.self))
        let moved = try XCTUnwrap(try again.fetch(FetchDescriptor<Entry>(predicate: #Predicate { $0.words == 1 })).first)
        XCTAssertEqual(moved.journal.title, "Work")
    }

    func testNullifyCannotLeaveARequiredToOneEmpty() throws {
        let context = ModelContext(try container(Journal.self))
        let journal = Journal(title: "Travel")
        context.insert(journal)
        context.insert(Entry(text: "Lisbon", journal: journal))
        try context.save()

        context.delete(journal)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .modelValidationFailure)
            XCTAssertTrue("\(error)".contains("Entry.journal is non-optional"), "\(error)")
        }
        context.rollback()
        let other = ModelContext(try container(Journal.self))
        XCTAssertEqual(try other.fetchCount(FetchDescriptor<Journal>()), 1, "the store is unchanged")

        // Pointed elsewhere first, the journal can go.
        let entry = try XCTUnwrap(try context.fetch(FetchDescriptor<Entry>()).first)
        let work = Journal(title: "Work")
        context.insert(work)
        entry.journal = work
        context.delete(journal)
        try context.save()
        XCTAssertEqual(try other.fetch(FetchDescriptor<Journal>()).map(\.title), ["Work"])
    }

    func testALetRelationshipIsRefusedAtContainerCreation() {
        XCTAssertThrowsError(try container(Badge.self)) { error in
            XCTAssertTrue("\(error)".contains("Badge.holder: a relationship must be declared 'var'"), "\(error)")
        }
    }

    func testARequiredToOneWithoutInverseKeepsItsTarget() throws {
        let context = ModelContext(try container(Journal.self, Stamp.self))
        let journal = Journal(title: "Travel")
        context.insert(journal)
        context.insert(Stamp(label: "Lisbon", journal: journal))
        try context.save()
        context.delete(journal)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertTrue("\(error)".contains("Stamp.journal is non-optional and still refers to it"), "\(error)")
        }
        context.rollback()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Journal>()), 1)
        XCTAssertEqual(try context.fetch(FetchDescriptor<Stamp>()).first?.journal.title, "Travel")
    }

    func testTakingAModelOutOfARequiredInverseFailsTheSave() throws {
        let context = ModelContext(try container(Journal.self))
        let journal = Journal(title: "Travel")
        context.insert(journal)
        journal.entries.append(Entry(text: "Lisbon", journal: journal))
        try context.save()
        journal.entries.removeAll()
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .modelValidationFailure)
        }
    }

    func testImplicitlyUnwrappedToManyInSwift5Mode() throws {
        do {
            let context = ModelContext(try container(Shelf.self))
            let shelf = Shelf(label: "top")
            context.insert(shelf)
            shelf.books.append(Book(title: "Dune"))
            try context.save()
        }
        let context = ModelContext(try container(Shelf.self))
        let shelf = try XCTUnwrap(try context.fetch(FetchDescriptor<Shelf>()).first)
        XCTAssertEqual(shelf.books.map(\.title), ["Dune"])
        XCTAssertEqual(shelf.books.first?.shelf?.label, "top")
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Book>(predicate: #Predicate { $0.title == "Dune" })), 1)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Shelf>(predicate: #Predicate { $0.label == "top" })), 1)
        context.delete(shelf)
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Shelf>()), 0)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Book>(predicate: #Predicate { $0.shelf == nil })), 1)
    }
}
