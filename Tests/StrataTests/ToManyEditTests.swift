import Foundation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

/// A to-many kept in step with its inverse costs O(1) per change: filing a
/// model through its to-one neither loads nor copies the other side's list
/// (the edit waits, on the list, until it is read), and a list that is
/// loaded changes in place. Checked against a plain reference of the graph
/// in every state the list can be in: not loaded, loaded, edited from
/// either side, saved, rolled back, undone, and changed by two contexts.
final class ToManyEditTests: StoreTestCase {
    func container() throws -> ModelContainer { try container(for: [Trip.self, Student.self]) }

    func item(_ title: String) -> BucketListItem {
        BucketListItem(title: title, details: "", hasReservation: false, isInPlan: true)
    }

    func trip(_ name: String, in context: ModelContext) throws -> Trip {
        try XCTUnwrap(try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == name })).first)
    }

    func isLoaded(_ model: some PersistentModel, field: Int) -> Bool { model._strataState.faults[field] == nil }

    /// The field of `Trip.bucketList` and of `Student.courses`.
    var bucketListField: Int { Trip.schemaMetadata.firstIndex { $0.name == "bucketList" }! }
    var coursesField: Int { Student.schemaMetadata.firstIndex { $0.name == "courses" }! }

    func testFilingThroughTheToOneLeavesTheListNotLoaded() throws {
        let container = try container()
        let setup = ModelContext(container)
        setup.insert(Trip(name: "Lisbon", destination: "PT"))
        try setup.save()

        let context = ModelContext(container)
        let lisbon = try trip("Lisbon", in: context)
        XCTAssertFalse(isLoaded(lisbon, field: bucketListField))
        for i in 0..<500 {
            let filed = item("i\(i)")
            context.insert(filed)
            filed.trip = lisbon
        }
        // Filing did not load the list; the trip is changed all the same.
        XCTAssertFalse(isLoaded(lisbon, field: bucketListField))
        XCTAssertTrue(lisbon.hasChanges)
        try context.save()
        XCTAssertFalse(isLoaded(lisbon, field: bucketListField))

        // More filed after the save, one taken out again: read at last,
        // the list is the stored one with the edits since.
        let extra = item("extra")
        context.insert(extra)
        extra.trip = lisbon
        let first = try XCTUnwrap(
            try context.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == "i0" })).first)
        first.trip = nil
        XCTAssertFalse(isLoaded(lisbon, field: bucketListField))
        let titles = Set(lisbon.bucketList.map(\.title))
        XCTAssertEqual(titles.count, 500)
        XCTAssertTrue(titles.contains("extra"))
        XCTAssertFalse(titles.contains("i0"))
        XCTAssertEqual(lisbon.bucketList.count, 500, "no member twice")
        try context.save()
        XCTAssertEqual(Set(try trip("Lisbon", in: ModelContext(container)).bucketList.map(\.title)), titles)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testADetachedModelFiledIntoAListIsInsertedBySave() throws {
        let container = try container()
        let setup = ModelContext(container)
        setup.insert(Trip(name: "Lisbon", destination: "PT"))
        try setup.save()
        for loadFirst in [false, true] {
            let context = ModelContext(container)
            let lisbon = try trip("Lisbon", in: context)
            if loadFirst { _ = lisbon.bucketList.count }
            try context.save()  // a save between: the list is read again only when it must be
            let loose = item("loose \(loadFirst)")
            loose.trip = lisbon
            XCTAssertNil(loose.modelContext)
            try context.save()
            XCTAssertTrue(loose.modelContext === context)
            let titles = try trip("Lisbon", in: ModelContext(container)).bucketList.map(\.title)
            XCTAssertTrue(titles.contains("loose \(loadFirst)"), "\(titles)")
            // A to-one set to a detached model inserts it too.
            let porto = Trip(name: "Porto \(loadFirst)", destination: "PT")
            loose.trip = porto
            try context.save()
            XCTAssertTrue(porto.modelContext === context)
            XCTAssertEqual(try trip("Porto \(loadFirst)", in: ModelContext(container)).bucketList.count, 1)
        }
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testAManyToManyEditedWithoutLoadingWritesOnlyItsPairs() throws {
        let container = try container()
        let setup = ModelContext(container)
        let ada = Student(name: "Ada")
        let math = Course(title: "Math")
        let art = Course(title: "Art")
        setup.insert(ada)
        setup.insert(math)
        setup.insert(art)
        ada.courses = [math]
        try setup.save()

        let context = ModelContext(container)
        let student = try XCTUnwrap(try context.fetch(FetchDescriptor<Student>()).first)
        let courses = try context.fetch(FetchDescriptor<Course>(sortBy: [SortDescriptor(\.title)]))
        // From the course's side: the student's list is edited, not loaded.
        courses[0].students.append(student)  // Art
        courses[1].students.removeAll { $0 === student }  // Math
        XCTAssertFalse(isLoaded(student, field: coursesField))
        try context.save()
        let fresh = ModelContext(container)
        XCTAssertEqual(try fresh.fetch(FetchDescriptor<Student>()).first?.courses.map(\.title), ["Art"])
        XCTAssertEqual(
            try fresh.fetch(FetchDescriptor<Course>(sortBy: [SortDescriptor(\.title)])).map { $0.students.map(\.name) },
            [["Ada"], []])
        XCTAssertEqual(student.courses.map(\.title), ["Art"])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testTwoContextsFilingIntoOneListKeepBothAndARemovalWins() throws {
        let container = try container()
        let setup = ModelContext(container)
        let lisbon = Trip(name: "Lisbon", destination: "PT")
        setup.insert(lisbon)
        lisbon.bucketList = [item("stale"), item("kept")]
        let ada = Student(name: "Ada")
        setup.insert(ada)
        let courses = ["Art", "Math", "Law"].map(Course.init(title:))
        for course in courses { setup.insert(course) }
        ada.courses = [courses[2]]
        try setup.save()

        for loadFirst in [false, true] {
            let a = ModelContext(container)
            let b = ModelContext(container)
            let tripA = try self.trip("Lisbon", in: a)
            let tripB = try self.trip("Lisbon", in: b)
            let adaA = try XCTUnwrap(try a.fetch(FetchDescriptor<Student>()).first)
            let adaB = try XCTUnwrap(try b.fetch(FetchDescriptor<Student>()).first)
            if loadFirst {
                _ = tripA.bucketList.count
                _ = tripB.bucketList.count
                _ = adaA.courses.count
                _ = adaB.courses.count
            }
            let fromA = item("a\(loadFirst)")
            a.insert(fromA)
            fromA.trip = tripA
            let artA = try XCTUnwrap(try a.fetch(FetchDescriptor<Course>(predicate: #Predicate { $0.title == "Art" })).first)
            artA.students.append(adaA)
            try a.save()

            let fromB = item("b\(loadFirst)")
            b.insert(fromB)
            fromB.trip = tripB
            let mathB = try XCTUnwrap(try b.fetch(FetchDescriptor<Course>(predicate: #Predicate { $0.title == "Math" })).first)
            mathB.students.append(adaB)
            try b.save()

            let read = ModelContext(container)
            let titles = Set(try self.trip("Lisbon", in: read).bucketList.map(\.title))
            XCTAssertTrue(titles.isSuperset(of: ["a\(loadFirst)", "b\(loadFirst)", "kept"]), "\(titles)")
            let enrolled = Set(try read.fetch(FetchDescriptor<Student>()).first?.courses.map(\.title) ?? [])
            XCTAssertTrue(enrolled.isSuperset(of: ["Art", "Math", "Law"]), "\(enrolled)")
        }

        // A removes the stale item and saves; B, whose list still holds it,
        // files another and saves: the removal stays.
        let a = ModelContext(container)
        let b = ModelContext(container)
        let tripB = try trip("Lisbon", in: b)
        XCTAssertTrue(tripB.bucketList.contains { $0.title == "stale" })
        let staleA = try XCTUnwrap(
            try a.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == "stale" })).first)
        staleA.trip = nil
        try a.save()
        let late = item("late")
        b.insert(late)
        late.trip = tripB
        try b.save()
        let titles = Set(try trip("Lisbon", in: ModelContext(container)).bucketList.map(\.title))
        XCTAssertFalse(titles.contains("stale"))
        XCTAssertTrue(titles.contains("late"))
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    #if !canImport(Darwin)
        func testUndoingAFilingIntoAListNotLoaded() throws {
            let container = try container()
            let setup = ModelContext(container)
            setup.insert(Trip(name: "Lisbon", destination: "PT"))
            setup.insert(Trip(name: "Porto", destination: "PT"))
            let tram = item("Tram")
            setup.insert(tram)
            try setup.save()

            let context = ModelContext(container)
            let undo = UndoManager()
            context.undoManager = undo
            let lisbon = try trip("Lisbon", in: context)
            let porto = try trip("Porto", in: context)
            _ = porto.bucketList.count  // one list loaded, one not
            let moved = try XCTUnwrap(try context.fetch(FetchDescriptor<BucketListItem>()).first)
            undo.beginUndoGrouping()
            moved.trip = lisbon
            undo.endUndoGrouping()
            undo.beginUndoGrouping()
            moved.trip = porto
            undo.endUndoGrouping()
            XCTAssertEqual(porto.bucketList.map(\.title), ["Tram"])
            undo.undo()
            XCTAssertTrue(moved.trip === lisbon)
            XCTAssertEqual(porto.bucketList.map(\.title), [])
            XCTAssertEqual(lisbon.bucketList.map(\.title), ["Tram"])
            undo.undo()
            XCTAssertNil(moved.trip)
            XCTAssertEqual(lisbon.bucketList.map(\.title), [])
            undo.redo()
            XCTAssertEqual(lisbon.bucketList.map(\.title), ["Tram"])
            try context.save()
            XCTAssertEqual(try trip("Lisbon", in: ModelContext(container)).bucketList.map(\.title), ["Tram"])
            XCTAssertEqual(try container.checkIntegrity(), [])
        }
    #endif

    func testTheMembersOfALargeListArePagedAndCountedThroughTheIndex() throws {
        let container = try container()
        let context = ModelContext(container)
        let big = Trip(name: "Big", destination: "d")
        let small = Trip(name: "Small", destination: "d")
        context.insert(big)
        context.insert(small)
        for i in 0..<3_000 {
            let filed = item(String(format: "i%05d", i))
            context.insert(filed)
            filed.trip = i < 2_900 ? big : small
        }
        try context.save()

        let reader = ModelContext(container)
        let id = big.persistentModelID
        var descriptor = FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.trip?.persistentModelID == id })
        let plan = try reader.explain(descriptor)
        XCTAssertTrue(plan.hasPrefix("rows ") && plan.contains("(2900 rows)"), plan)
        XCTAssertEqual(try reader.fetchCount(descriptor), 2_900)
        descriptor.fetchOffset = 100
        descriptor.fetchLimit = 10
        let page = try reader.fetch(descriptor)
        XCTAssertEqual(page.count, 10)
        XCTAssertTrue(page.allSatisfy { $0.trip?.name == "Big" })
        descriptor.sortBy = [SortDescriptor(\.title, order: .reverse)]
        XCTAssertEqual(try reader.fetch(descriptor).map(\.title), (2_790..<2_800).reversed().map { String(format: "i%05d", $0) })

        // Unsaved moves count as the fetch sees them, as for any predicate.
        let moved = try XCTUnwrap(
            try reader.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == "i02950" })).first)
        let bigHere = try trip("Big", in: reader)
        moved.trip = bigHere
        let leaving = try XCTUnwrap(page.first)
        leaving.trip = nil
        var all = FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.trip?.persistentModelID == id })
        XCTAssertEqual(try reader.fetchCount(all), 2_900)
        XCTAssertTrue(try reader.fetch(all).contains { $0 === moved })
        XCTAssertFalse(try reader.fetch(all).contains { $0 === leaving })
        // Another trip's identifier reads that trip's members only.
        let other = small.persistentModelID
        all.predicate = #Predicate { $0.trip?.persistentModelID == other }
        XCTAssertEqual(try reader.fetchCount(all), 99)

        // As `==` compares identifiers: a trip of another store with the
        // same row, or a model of another entity with the same row, names
        // no member here.
        let elsewhere = try self.container(for: [Trip.self, Student.self], name: "other.store")
        let foreignContext = ModelContext(elsewhere)
        let foreignTrip = Trip(name: "Foreign", destination: "d")
        foreignContext.insert(foreignTrip)
        try foreignContext.save()
        let foreign = foreignTrip.persistentModelID
        XCTAssertEqual(foreign.rowID, id.rowID, "the same row in another store")
        XCTAssertNotEqual(foreign, id)
        all.predicate = #Predicate { $0.trip?.persistentModelID == foreign }
        XCTAssertEqual(try reader.fetchCount(all), 0)
        XCTAssertEqual(try reader.fetch(all).count, 0)
        let member = try XCTUnwrap(
            try reader.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == "i00000" })).first)
        let sameRowOtherEntity = PersistentIdentifier(
            storeIdentifier: member.persistentModelID.storeIdentifier, entityName: "BucketListItem", rowID: id.rowID)
        all.predicate = #Predicate { $0.trip?.persistentModelID == sameRowOtherEntity }
        XCTAssertEqual(try reader.fetchCount(all), 0)
        XCTAssertEqual(try reader.fetch(all).count, 0)
    }

    /// Power loss at every sync point of a save that moves children
    /// between two large parents (one list loaded, one not) and changes a
    /// many-to-many without loading it: the store holds the graph from
    /// before the save or the whole graph after it, never a part.
    func testCrashAtEverySyncPointOfASaveMovingChildrenBetweenLargeParents() throws {
        let url = URL(fileURLWithPath: "/crash/trips.store")
        let base = MemoryFileSystem()
        func open(_ fs: MemoryFileSystem) throws -> ModelContainer {
            try ModelContainer(for: Trip.self, Student.self, configurations: ModelConfiguration(url: url, fileSystem: fs))
        }
        do {
            let context = ModelContext(try open(base))
            for name in ["A", "B"] {
                let trip = Trip(name: name, destination: "d")
                context.insert(trip)
                for i in 0..<1_500 {
                    let filed = item("\(name)\(i)")
                    context.insert(filed)
                    filed.trip = trip
                }
            }
            let ada = Student(name: "Ada")
            context.insert(ada)
            for i in 0..<300 {
                let course = Course(title: "c\(i)")
                context.insert(course)
                if i % 2 == 0 { course.students.append(ada) }
            }
            try context.save()
        }
        func state(_ fs: MemoryFileSystem) throws -> [String] {
            let container = try open(fs)
            XCTAssertEqual(try container.checkIntegrity(), [])
            let context = ModelContext(container)
            let trips = try context.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
            let courses = try context.fetch(FetchDescriptor<Student>()).first?.courses.map(\.title).sorted() ?? []
            return trips.map { "\($0.name): \($0.bucketList.map(\.title).sorted())" } + [courses.joined(separator: ",")]
        }
        func save(_ fs: MemoryFileSystem) throws {
            let context = ModelContext(try open(fs))
            let a = try trip("A", in: context)
            let b = try trip("B", in: context)
            _ = a.bucketList.count  // A's list loaded, B's not
            let moving = try context.fetch(
                FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title.starts(with: "A1") }))
            for (n, moved) in moving.enumerated() {
                if n % 2 == 0 { moved.trip = b } else { b.bucketList.append(moved) }
            }
            let ada = try XCTUnwrap(try context.fetch(FetchDescriptor<Student>()).first)
            for course in try context.fetch(FetchDescriptor<Course>()) {
                if course.title.hasSuffix("1") { course.students.append(ada) }
                if course.title.hasSuffix("2") { course.students.removeAll { $0 === ada } }
            }
            XCTAssertFalse(isLoaded(ada, field: coursesField))
            try context.save()
        }
        try assertEveryCrashLeavesBeforeOrAfter(base, seeds: 2, state: state, save: save)
    }

    /// The reference: trip → item titles, student → course titles.
    struct Graph: Equatable {
        var trips: [String: Set<String>] = [:]
        var loose: Set<String> = []
        var enrolment: [String: Set<String>] = [:]
        var courses: Set<String> = []
    }

    func testRandomToManyEditsMatchTheReference() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "ToManyEditTests"))
        let operations = Int(environmentValue("STRATA_GRAPH_OPS") ?? "") ?? 800
        let container = try container()
        var context = ModelContext(container)
        var reference = Graph()
        var saved = Graph()
        var counter = 0
        func name(_ prefix: String) -> String {
            counter += 1
            return "\(prefix)\(counter)"
        }
        func pick(_ values: some Collection<String>) -> String? {
            let sorted = values.sorted()
            return sorted.isEmpty ? nil : sorted[Int.random(in: 0..<sorted.count, using: &random)]
        }
        func one<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> T? { try context.fetch(descriptor).first }
        func trip(_ name: String) throws -> Trip? { try one(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == name })) }
        func item(_ title: String) throws -> BucketListItem? {
            try one(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == title }))
        }
        func student(_ name: String) throws -> Student? {
            try one(FetchDescriptor<Student>(predicate: #Predicate { $0.name == name }))
        }
        func course(_ title: String) throws -> Course? {
            try one(FetchDescriptor<Course>(predicate: #Predicate { $0.title == title }))
        }
        func owner(of title: String) -> String? { reference.trips.first { $0.value.contains(title) }?.key }

        for step in 0..<operations {
            switch Int.random(in: 0..<14, using: &random) {
            case 0:  // a trip, sometimes with items set before it is inserted
                let trip = Trip(name: name("t"), destination: "d")
                let titles = (0..<Int.random(in: 0...2, using: &random)).map { _ in name("i") }
                trip.bucketList = titles.map { self.item($0) }
                context.insert(trip)
                reference.trips[trip.name] = Set(titles)
            case 1, 2:  // file an item, new or not, through its to-one
                guard let to = pick(reference.trips.keys), let target = try trip(to) else { continue }
                let all = reference.trips.values.flatMap { $0 } + reference.loose
                if Bool.random(using: &random), let title = pick(all), let moved = try item(title) {
                    moved.trip = target
                    if let from = owner(of: title) { reference.trips[from]?.remove(title) }
                    reference.loose.remove(title)
                    reference.trips[to, default: []].insert(title)
                } else {
                    let filed = self.item(name("i"))
                    if Bool.random(using: &random) {
                        context.insert(filed)
                        filed.trip = target
                    } else {
                        filed.trip = target  // inserted with its trip
                    }
                    reference.trips[to, default: []].insert(filed.title)
                }
            case 3:  // move an item from the to-many side
                guard let to = pick(reference.trips.keys), let title = pick(reference.trips.values.flatMap { $0 }),
                    let target = try trip(to), let moved = try item(title)
                else { continue }
                if !target.bucketList.contains(where: { $0 === moved }) { target.bucketList.append(moved) }
                if let from = owner(of: title) { reference.trips[from]?.remove(title) }
                reference.trips[to, default: []].insert(title)
            case 4:  // take an item out, from either side
                guard let from = pick(reference.trips.keys), let title = pick(reference.trips[from] ?? []),
                    let moved = try item(title)
                else { continue }
                if Bool.random(using: &random) {
                    moved.trip = nil
                } else if let holder = try trip(from) {
                    holder.bucketList.removeAll { $0 === moved }
                }
                reference.trips[from]?.remove(title)
                reference.loose.insert(title)
            case 5:  // delete an item
                let all = reference.trips.values.flatMap { $0 } + reference.loose
                guard let title = pick(all), let doomed = try item(title) else { continue }
                context.delete(doomed)
                if let from = owner(of: title) { reference.trips[from]?.remove(title) }
                reference.loose.remove(title)
            case 6:  // read a list (loads it) and compare
                guard let name = pick(reference.trips.keys), let trip = try trip(name) else { continue }
                // As in SwiftData, a member deleted stays until the save.
                let members = trip.bucketList.filter { !$0.isDeleted }
                XCTAssertEqual(Set(members.map(\.title)), reference.trips[name] ?? [], "step \(step)")
                XCTAssertEqual(members.count, reference.trips[name]?.count ?? 0, "step \(step): no duplicates")
            case 7:  // a student or a course
                if Bool.random(using: &random) {
                    let student = Student(name: name("s"))
                    context.insert(student)
                    reference.enrolment[student.name] = []
                } else {
                    let course = Course(title: name("c"))
                    context.insert(course)
                    reference.courses.insert(course.title)
                }
            case 8:  // enrol from either side
                guard let s = pick(reference.enrolment.keys), let c = pick(reference.courses),
                    reference.enrolment[s]?.contains(c) == false, let student = try student(s), let course = try course(c)
                else { continue }
                if Bool.random(using: &random) { student.courses.append(course) } else { course.students.append(student) }
                reference.enrolment[s]?.insert(c)
            case 9:  // unenrol from either side
                guard let s = pick(reference.enrolment.keys), let c = pick(reference.enrolment[s] ?? []),
                    let student = try student(s), let course = try course(c)
                else { continue }
                if Bool.random(using: &random) {
                    student.courses.removeAll { $0 === course }
                } else {
                    course.students.removeAll { $0 === student }
                }
                reference.enrolment[s]?.remove(c)
            case 10:  // read a student's courses and compare
                guard let s = pick(reference.enrolment.keys), let student = try student(s) else { continue }
                XCTAssertEqual(Set(student.courses.map(\.title)), reference.enrolment[s] ?? [], "step \(step)")
                XCTAssertEqual(student.courses.count, reference.enrolment[s]?.count ?? 0, "step \(step)")
            case 11:  // roll back to the last save
                context.rollback()
                reference = saved
            case 12:  // save, keeping the context (and what it loaded)
                try context.save()
                saved = reference
            default:  // save, check the store, go on in a fresh context
                try context.save()
                saved = reference
                XCTAssertEqual(try container.checkIntegrity(), [], "after step \(step)")
                XCTAssertEqual(try read(ModelContext(container)), reference, "after step \(step)")
                context = ModelContext(container)
            }
        }
        try context.save()
        XCTAssertEqual(try container.checkIntegrity(), [])
        XCTAssertEqual(try read(context), reference, "the working context")
        XCTAssertEqual(try read(ModelContext(container)), reference, "a fresh context")
    }

    /// The graph as `context` reads it.
    func read(_ context: ModelContext) throws -> Graph {
        var graph = Graph()
        for trip in try context.fetch(FetchDescriptor<Trip>()) {
            graph.trips[trip.name] = Set(trip.bucketList.map(\.title))
            XCTAssertEqual(trip.bucketList.count, graph.trips[trip.name]?.count, "\(trip.name) holds a member twice")
            for item in trip.bucketList { XCTAssertTrue(item.trip === trip, "\(item.title) points elsewhere") }
        }
        for item in try context.fetch(FetchDescriptor<BucketListItem>()) where item.trip == nil {
            graph.loose.insert(item.title)
        }
        for student in try context.fetch(FetchDescriptor<Student>()) {
            graph.enrolment[student.name] = Set(student.courses.map(\.title))
        }
        graph.courses = Set(try context.fetch(FetchDescriptor<Course>()).map(\.title))
        return graph
    }
}
