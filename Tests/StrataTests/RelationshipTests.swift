import Foundation
import StrataTesting
import XCTest

@testable import Strata

@Model
final class Student {
    var name: String
    var courses: [Course] = []
    init(name: String) { self.name = name }
}

@Model
final class Course {
    var title: String
    var students: [Student] = []
    init(title: String) { self.title = title }
}

/// Both sides of a relationship agree in memory the moment either side
/// changes, before any save, and stay so through save and reload.
final class RelationshipTests: StoreTestCase {
    func container() throws -> ModelContainer { try container(for: [Trip.self, Student.self]) }

    func item(_ title: String) -> BucketListItem {
        BucketListItem(title: title, details: "", hasReservation: false, isInPlan: true)
    }

    func titles(_ trip: Trip) -> [String] { trip.bucketList.map(\.title) }

    func testInversesAreFound() {
        let explicit = InverseGraph.inverse(of: Trip.self, field: 4)
        XCTAssertTrue(explicit?.type == BucketListItem.self)
        XCTAssertEqual(explicit?.isToOne, true)
        // Declared on the other side only.
        XCTAssertEqual(InverseGraph.inverse(of: BucketListItem.self, field: 4)?.field, 4)
        // Inferred: one relationship each way.
        XCTAssertTrue(InverseGraph.inverse(of: Student.self, field: 1)?.type == Course.self)
        XCTAssertEqual(InverseGraph.inverse(of: Course.self, field: 1)?.isToOne, false)
    }

    func testSettingTheToOneSideUpdatesTheToManySide() {
        let lisbon = Trip(name: "Lisbon", destination: "PT")
        let porto = Trip(name: "Porto", destination: "PT")
        let tram = item("Tram 28")
        tram.trip = lisbon
        XCTAssertEqual(titles(lisbon), ["Tram 28"])
        tram.trip = porto
        XCTAssertEqual(titles(lisbon), [])
        XCTAssertEqual(titles(porto), ["Tram 28"])
        tram.trip = nil
        XCTAssertEqual(titles(porto), [])
    }

    func testChangingTheToManySideUpdatesTheToOneSide() {
        let lisbon = Trip(name: "Lisbon", destination: "PT")
        let porto = Trip(name: "Porto", destination: "PT")
        let tram = item("Tram 28")
        let fado = item("Fado")
        lisbon.bucketList.append(tram)
        lisbon.bucketList.append(fado)
        XCTAssertTrue(tram.trip === lisbon)
        XCTAssertTrue(fado.trip === lisbon)
        porto.bucketList = [tram]
        XCTAssertTrue(tram.trip === porto, "moving an item moves its to-one")
        XCTAssertEqual(titles(lisbon), ["Fado"], "and takes it out of its old trip")
        porto.bucketList.removeAll()
        XCTAssertNil(tram.trip)
    }

    func testOneToOneMovesBetweenOwners() {
        let lisbon = Trip(name: "Lisbon", destination: "PT")
        let porto = Trip(name: "Porto", destination: "PT")
        let flat = LivingAccommodation(address: "Rua 1", placeName: "Flat")
        lisbon.livingAccommodation = flat
        XCTAssertTrue(flat.trip === lisbon)
        porto.livingAccommodation = flat
        XCTAssertTrue(flat.trip === porto)
        XCTAssertNil(lisbon.livingAccommodation, "the previous owner lets go")
        flat.trip = nil
        XCTAssertNil(porto.livingAccommodation)
    }

    func testManyToManyBothWays() {
        let ada = Student(name: "Ada")
        let alan = Student(name: "Alan")
        let logic = Course(title: "Logic")
        let math = Course(title: "Math")
        ada.courses = [logic, math]
        alan.courses.append(logic)
        XCTAssertEqual(Set(logic.students.map(\.name)), ["Ada", "Alan"])
        XCTAssertEqual(math.students.map(\.name), ["Ada"])
        logic.students.removeAll { $0 === ada }
        XCTAssertEqual(ada.courses.map(\.title), ["Math"])
        XCTAssertEqual(alan.courses.map(\.title), ["Logic"])
    }

    func testSyncSurvivesSaveAndLazyLoading() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            let lisbon = Trip(name: "Lisbon", destination: "PT")
            let porto = Trip(name: "Porto", destination: "PT")
            let tram = item("Tram 28")
            tram.trip = lisbon
            context.insert(lisbon)
            context.insert(porto)
            try context.save()
        }
        do {
            // Both trips are faults in a new context; moving the item loads them.
            let context = ModelContext(container)
            let tram = try XCTUnwrap(context.fetch(FetchDescriptor<BucketListItem>()).first)
            let porto = try XCTUnwrap(context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Porto" })).first)
            tram.trip = porto
            XCTAssertEqual(titles(porto), ["Tram 28"])
            try context.save()
        }
        let context = ModelContext(container)
        let trips = try context.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(trips.map(titles), [[], ["Tram 28"]])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testInverseChangeIsObserved() {
        let lisbon = Trip(name: "Lisbon", destination: "PT")
        let tram = item("Tram 28")
        let fired = LockedFlag()
        withObservationTracking {
            _ = lisbon.bucketList
        } onChange: {
            fired.set()
        }
        tram.trip = lisbon
        XCTAssertTrue(fired.value)
    }
}

extension RelationshipTests {
    func testToManyRelationshipsPersistThroughIndexAndJoinTrees() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            let ada = Student(name: "Ada")
            let alan = Student(name: "Alan")
            let logic = Course(title: "Logic")
            let math = Course(title: "Math")
            ada.courses = [logic, math]
            alan.courses = [logic]
            let lisbon = Trip(name: "Lisbon", destination: "PT")
            lisbon.bucketList = [item("Tram 28"), item("Fado")]
            context.insert(ada)
            context.insert(alan)
            context.insert(lisbon)
            try context.save()
        }
        XCTAssertEqual(try container.checkIntegrity(), [])
        do {
            let context = ModelContext(container)
            let courses = try context.fetch(FetchDescriptor<Course>(sortBy: [SortDescriptor(\.title)]))
            XCTAssertEqual(courses.map { $0.students.map(\.name).sorted() }, [["Ada", "Alan"], ["Ada"]])
            let students = try context.fetch(FetchDescriptor<Student>(sortBy: [SortDescriptor(\.name)]))
            XCTAssertEqual(students.map { $0.courses.map(\.title).sorted() }, [["Logic", "Math"], ["Logic"]])
            let trip = try XCTUnwrap(context.fetch(FetchDescriptor<Trip>()).first)
            XCTAssertEqual(Set(titles(trip)), ["Tram 28", "Fado"])
            // Edit from the mirror side and from the derived side.
            courses[0].students.removeAll { $0.name == "Alan" }
            trip.bucketList.removeAll { $0.title == "Fado" }
            try context.save()
        }
        XCTAssertEqual(try container.checkIntegrity(), [])
        let context = ModelContext(container)
        let alan = try XCTUnwrap(context.fetch(FetchDescriptor<Student>(predicate: #Predicate { $0.name == "Alan" })).first)
        XCTAssertEqual(alan.courses.map(\.title), [])
        let trip = try XCTUnwrap(context.fetch(FetchDescriptor<Trip>()).first)
        XCTAssertEqual(titles(trip), ["Tram 28"])
        let fado = try XCTUnwrap(
            context.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == "Fado" })).first)
        XCTAssertNil(fado.trip, "the removed item no longer refers to the trip")
    }

    func testIntegrityCheckFindsABrokenJoinMirror() throws {
        let container = try container()
        let context = ModelContext(container)
        let ada = Student(name: "Ada")
        ada.courses = [Course(title: "Logic")]
        context.insert(ada)
        try context.save()
        skipIntegrityCheck(of: container, because: "the join's mirror tree is emptied, as checked here")
        try container.store.database.write { tx in
            let mirror = try tx.tree("m.Course.students")
            for (key, _) in try tx.scan(mirror) { try tx.delete(key, in: mirror) }
        }
        let problems = try container.checkIntegrity()
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertTrue(problems.first?.reason.contains("mirror lacks") == true, "\(problems)")
    }
}

extension RelationshipTests {
    func testRelationshipsLoadAfterTheirContextIsGone() throws {
        let container = try container()
        do {
            let context = ModelContext(container)
            let trip = Trip(name: "Rome", destination: "IT")
            trip.bucketList = [item("Forum")]
            trip.livingAccommodation = LivingAccommodation(address: "Via 1", placeName: "Casa")
            context.insert(trip)
            try context.save()
        }
        // The fetching context is released at the end of the statement.
        let trip = try XCTUnwrap(ModelContext(container).fetch(FetchDescriptor<Trip>()).first)
        XCTAssertEqual(titles(trip), ["Forum"])
        XCTAssertEqual(trip.livingAccommodation?.placeName, "Casa")
    }
}
