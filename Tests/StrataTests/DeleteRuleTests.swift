import Foundation
import StrataTesting
import XCTest

@testable import Strata

@Model
final class Country {
    var name: String
    @Relationship(deleteRule: .cascade) var cities: [City] = []
    init(name: String) { self.name = name }
}

@Model
final class City {
    var name: String
    var country: Country?
    @Relationship(deleteRule: .cascade) var streets: [Street] = []
    init(name: String) { self.name = name }
}

@Model
final class Street {
    var name: String
    var city: City?
    init(name: String) { self.name = name }
}

@Model
final class Library {
    var name: String
    @Relationship(deleteRule: .deny) var books: [Book] = []
    init(name: String) { self.name = name }
}

@Model
final class Shelf {
    var label: String
    @Relationship(minimumModelCount: 1, maximumModelCount: 2) var books: [Book] = []
    init(label: String) { self.label = label }
}

@Model
final class Book {
    var title: String
    var library: Library?
    var shelf: Shelf?
    init(title: String) { self.title = title }
}

/// A linked list: `next` has no inverse; cascade around a cycle must end.
@Model
final class Link {
    var label: String
    @Relationship(deleteRule: .cascade) var next: Link?
    init(label: String) { self.label = label }
}

/// Plain references without an inverse, cleared when their target goes.
@Model
final class Pointer {
    var label: String
    var target: Link?
    init(label: String, target: Link?) {
        self.label = label
        self.target = target
    }
}

@Model
final class Parent {
    var name: String
    @Relationship(deleteRule: .noAction, inverse: \Kid.parent) var kids: [Kid] = []
    init(name: String) { self.name = name }
}

@Model
final class Kid {
    var name: String
    var parent: Parent?
    init(name: String) { self.name = name }
}

final class DeleteRuleTests: StoreTestCase {
    func container() throws -> ModelContainer {
        try container(for: [
            Country.self, Library.self, Shelf.self, Link.self, Pointer.self, Parent.self, Trip.self, Student.self,
        ])
    }

    func testCascadeThroughThreeLevels() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            for c in 0..<2 {
                let country = Country(name: "C\(c)")
                for i in 0..<3 {
                    let city = City(name: "C\(c)-\(i)")
                    city.streets = (0..<4).map { Street(name: "S\($0)") }
                    country.cities.append(city)
                }
                context.insert(country)
            }
            try context.save()
        }
        XCTAssertEqual(try count(Street.self, in: container), 24)
        let context = ModelContext(container)
        let first = try XCTUnwrap(context.fetch(FetchDescriptor<Country>(predicate: #Predicate { $0.name == "C0" })).first)
        context.delete(first)
        try context.save()
        XCTAssertEqual(try count(Country.self, in: container), 1)
        XCTAssertEqual(try count(City.self, in: container), 3)
        XCTAssertEqual(try count(Street.self, in: container), 12)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testCascadeAroundACycleEnds() throws {
        let container = try container()
        let context = ModelContext(container)
        let a = Link(label: "a")
        let b = Link(label: "b")
        let c = Link(label: "c")
        a.next = b
        b.next = c
        c.next = a
        context.insert(a)
        try context.save()
        XCTAssertEqual(try count(Link.self, in: container), 3)
        context.delete(b)
        try context.save()
        XCTAssertEqual(try count(Link.self, in: container), 0)
        XCTAssertTrue(a.isDeleted || a.modelContext == nil)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testDenyRefusesTheSaveAndWritesNothing() throws {
        let container = try container()
        let context = ModelContext(container)
        let library = Library(name: "Central")
        library.books = [Book(title: "Dune"), Book(title: "Emma")]
        context.insert(library)
        try context.save()

        context.delete(library)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
            let message = "\(error)"
            XCTAssertTrue(message.contains("Library") && message.contains("books"), message)
        }
        XCTAssertTrue(context.deletedModelsArray.contains { $0 === library }, "the pending delete is kept")
        XCTAssertEqual(try count(Library.self, in: container), 1)
        XCTAssertEqual(try count(Book.self, in: container), 2)

        // Once the books are gone (deleted in the same save), the library may go.
        for book in library.books { context.delete(book) }
        try context.save()
        XCTAssertEqual(try count(Library.self, in: container), 0)
        XCTAssertEqual(try count(Book.self, in: container), 0)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testMaximumModelCountIsValidatedAtSave() throws {
        let container = try container()
        let context = ModelContext(container)
        let shelf = Shelf(label: "A")
        shelf.books = [Book(title: "1"), Book(title: "2"), Book(title: "3")]
        context.insert(shelf)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
            XCTAssertTrue("\(error)".contains("books holds 3"), "\(error)")
        }
        XCTAssertEqual(try count(Shelf.self, in: container), 0, "nothing written")
        shelf.books.removeLast()
        try context.save()
        XCTAssertEqual(try count(Book.self, in: container), 3, "the removed book is still inserted, without a shelf")
    }

    func testMinimumModelCountIsValidatedAtSave() throws {
        let container = try container()
        let context = ModelContext(container)
        let shelf = Shelf(label: "empty")
        context.insert(shelf)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
            XCTAssertTrue("\(error)".contains("books holds 0 model(s); it must hold at least 1"), "\(error)")
        }
        XCTAssertEqual(try count(Shelf.self, in: container), 0, "nothing written")
        shelf.books = [Book(title: "1")]
        try context.save()
        XCTAssertEqual(try count(Shelf.self, in: container), 1)
    }

    func testNullifyTakesTheDeletedModelOutOfTheOtherSide() throws {
        let container = try container()
        let context = ModelContext(container)
        let trip = Trip(name: "Rome", destination: "IT")
        trip.bucketList = [
            BucketListItem(title: "Forum", details: "", hasReservation: false, isInPlan: true),
            BucketListItem(title: "Vatican", details: "", hasReservation: true, isInPlan: true),
        ]
        context.insert(trip)
        try context.save()
        let forum = try XCTUnwrap(trip.bucketList.first { $0.title == "Forum" })
        context.delete(forum)
        try context.save()
        XCTAssertEqual(trip.bucketList.map(\.title), ["Vatican"])
        let reloaded = try XCTUnwrap(ModelContext(container).fetch(FetchDescriptor<Trip>()).first)
        XCTAssertEqual(reloaded.bucketList.map(\.title), ["Vatican"])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testManyToManyRemovalOnDelete() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            let ada = Student(name: "Ada")
            let alan = Student(name: "Alan")
            let logic = Course(title: "Logic")
            ada.courses = [logic, Course(title: "Math")]
            alan.courses = [logic]
            context.insert(ada)
            context.insert(alan)
            try context.save()
        }
        let context = ModelContext(container)
        let logic = try XCTUnwrap(context.fetch(FetchDescriptor<Course>(predicate: #Predicate { $0.title == "Logic" })).first)
        context.delete(logic)
        try context.save()
        let students = try ModelContext(container).fetch(FetchDescriptor<Student>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(students.map { $0.courses.map(\.title) }, [["Math"], []])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testReferencesWithoutInverseAreCleared() throws {
        let container = try container()
        let context = ModelContext(container)
        let target = Link(label: "t")
        let stored = Pointer(label: "stored", target: target)
        context.insert(stored)
        try context.save()
        let pending = Pointer(label: "pending", target: target)
        context.insert(pending)
        context.delete(target)
        try context.save()
        XCTAssertNil(pending.target)
        let pointers = try ModelContext(container).fetch(FetchDescriptor<Pointer>(sortBy: [SortDescriptor(\.label)]))
        XCTAssertEqual(pointers.map { $0.target == nil }, [true, true])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testNoActionLeavesTheOtherSideDangling() throws {
        let container = try container()
        let context = ModelContext(container)
        let parent = Parent(name: "P")
        parent.kids = [Kid(name: "K")]
        context.insert(parent)
        try context.save()
        context.delete(parent)
        try context.save()
        skipIntegrityCheck(of: container, because: "noAction leaves the kid's parent dangling, as checked here")
        let problems = try container.checkIntegrity()
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertTrue(problems.first?.reason.contains("parent refers to row") == true, "\(problems)")
    }

    func testBatchDeleteAppliesTheRules() throws {
        let container = try container()
        let context = ModelContext(container)
        for name in ["A", "B"] {
            let trip = Trip(name: name, destination: "X")
            trip.bucketList = [BucketListItem(title: name, details: "", hasReservation: false, isInPlan: false)]
            context.insert(trip)
        }
        try context.save()
        try context.delete(model: Trip.self, where: #Predicate { $0.name == "A" })
        try context.save()
        let items = try ModelContext(container).fetch(FetchDescriptor<BucketListItem>()).map(\.title)
        XCTAssertEqual(items, ["B"], "A's items went with it (cascade)")
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}

extension DeleteRuleTests {
    /// A cascade over rows this context has loaded and rows it has not:
    /// loaded ones end deleted in memory, the rest go without being built,
    /// and `didSave` names them all.
    func testCascadeMixesLoadedModelsAndStoredRows() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            let country = Country(name: "N")
            for i in 0..<3 {
                let city = City(name: "N-\(i)")
                city.streets = [Street(name: "S")]
                country.cities.append(city)
            }
            context.insert(country)
            try context.save()
        }
        let context = ModelContext(container)
        let loadedCity = try XCTUnwrap(context.fetch(FetchDescriptor<City>(predicate: #Predicate { $0.name == "N-1" })).first)
        let country = try XCTUnwrap(context.fetch(FetchDescriptor<Country>()).first)
        let log = EventLog()
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: context, queue: nil) {
            let ids = $0.userInfo?[ModelContext.NotificationKey.deletedIdentifiers.rawValue] as? [PersistentIdentifier] ?? []
            log.append("\(ids.count)")
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        context.delete(country)
        try context.save()
        XCTAssertEqual(log.events, ["7"], "1 country, 3 cities, 3 streets")
        XCTAssertTrue(loadedCity.modelContext == nil, "the loaded city was deleted and let go")
        XCTAssertEqual(try count(City.self, in: container), 0)
        XCTAssertEqual(try count(Street.self, in: container), 0)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}

extension DeleteRuleTests {
    /// Found by GraphRandomTests: an item inserted and deleted before any
    /// save stayed in its trip's list, and the save inserted it again.
    func testDeletingAnUnsavedModelTakesItOutOfTheGraph() throws {
        let container = try container()
        let context = ModelContext(container)
        let trip = Trip(name: "Oslo", destination: "NO")
        let item = BucketListItem(title: "Fjord", details: "", hasReservation: false, isInPlan: true)
        trip.bucketList = [item]
        context.insert(trip)
        context.delete(item)
        XCTAssertEqual(trip.bucketList.count, 0)
        try context.save()
        XCTAssertEqual(try count(BucketListItem.self, in: container), 0)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}

extension DeleteRuleTests {
    /// A cascade over thousands of stored rows, followed in batches (more
    /// than one chunk of the merge join), with some of the reached rows
    /// loaded as models (4,500 cities in one batch) and countries that
    /// stay: exactly the doomed rows
    /// go, with their reverse-index entries.
    func testLargeBatchedCascadeDeletesExactlyTheReachedRows() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            for c in 0..<7 {
                let country = Country(name: "C\(c)")
                for i in 0..<900 {
                    let city = City(name: "C\(c)-\(i)")
                    if i % 3 == 0 { city.streets = [Street(name: "S\(c)-\(i)"), Street(name: "T\(c)-\(i)")] }
                    country.cities.append(city)
                }
                context.insert(country)
            }
            try context.save()
        }
        let context = ModelContext(container)
        // Some cities of doomed countries are loaded; one is changed.
        let loaded = try context.fetch(FetchDescriptor<City>(predicate: #Predicate { $0.name.starts(with: "C2-1") }))
        XCTAssertFalse(loaded.isEmpty)
        loaded[0].name = "renamed"
        try context.delete(model: Country.self, where: #Predicate { $0.name != "C1" && $0.name != "C4" })
        try context.save()
        XCTAssertEqual(try count(Country.self, in: container), 2)
        XCTAssertEqual(try count(City.self, in: container), 1_800)
        XCTAssertEqual(try count(Street.self, in: container), 1_200)
        XCTAssertTrue(loaded.allSatisfy { $0.modelContext == nil })
        let survivors = try ModelContext(container).fetch(FetchDescriptor<City>()).map(\.name)
        XCTAssertTrue(survivors.allSatisfy { $0.hasPrefix("C1-") || $0.hasPrefix("C4-") })
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}
