import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// Random inserts, deletes (of models, and by predicate) and relationship
/// edits against a plain model of the object graph. After every save: the integrity check passes, and a
/// fresh context reads back exactly the reference graph (one-to-many with
/// cascade, one-to-one with cascade, many-to-many with nullify). The seed
/// is printed; replay with `STRATA_SEED`, lengthen with `STRATA_GRAPH_OPS`.
final class GraphRandomTests: StoreTestCase {
    /// The reference: names only.
    struct Graph: Equatable {
        var trips: [String: Set<String>] = [:]  // trip → items
        var stays: [String: String] = [:]  // trip → accommodation
        var loose: Set<String> = []  // items without a trip
        var enrolment: [String: Set<String>] = [:]  // student → courses
        var courses: Set<String> = []
    }

    func testRandomGraphEditsMatchTheReference() throws {
        var random = SeededRandom(seed: SeededRandom.seed(fromEnvironment: "STRATA_SEED", label: "GraphRandomTests"))
        let operations = Int(environmentValue("STRATA_GRAPH_OPS") ?? "") ?? 600
        let container = try container(for: [Trip.self, Student.self])
        var context = ModelContext(container)
        var reference = Graph()
        var counter = 0
        func name(_ prefix: String) -> String {
            counter += 1
            return "\(prefix)\(counter)"
        }
        // Dictionary and Set order differs between runs: pick from sorted
        // names so that a seed replays exactly.
        func pick(_ values: some Collection<String>) -> String? {
            let sorted = values.sorted()
            return sorted.isEmpty ? nil : sorted[Int.random(in: 0..<sorted.count, using: &random)]
        }
        func fetch<T: PersistentModel>(_ type: T.Type) throws -> [T] { try context.fetch(FetchDescriptor<T>()) }
        func trip(_ name: String) throws -> Trip? { try fetch(Trip.self).first { $0.name == name } }
        func item(_ title: String) throws -> BucketListItem? { try fetch(BucketListItem.self).first { $0.title == title } }

        for step in 0..<operations {
            switch Int.random(in: 0..<13, using: &random) {
            case 0:  // a new trip with items
                let trip = Trip(name: name("t"), destination: "d")
                let titles = (0..<Int.random(in: 0...3, using: &random)).map { _ in name("i") }
                trip.bucketList = titles.map { BucketListItem(title: $0, details: "", hasReservation: false, isInPlan: true) }
                context.insert(trip)
                reference.trips[trip.name] = Set(titles)
            case 1:  // a new item under a trip, set from the item's side
                guard let tripName = pick(reference.trips.keys), let trip = try trip(tripName) else { continue }
                let item = BucketListItem(title: name("i"), details: "", hasReservation: false, isInPlan: false)
                context.insert(item)
                item.trip = trip
                reference.trips[tripName, default: []].insert(item.title)
            case 2:  // move an item, from the to-many side
                guard let from = pick(reference.trips.keys), let title = pick(reference.trips[from] ?? []),
                    let to = pick(reference.trips.keys), let target = try trip(to), let moved = try item(title)
                else { continue }
                target.bucketList.append(moved)
                reference.trips[from]?.remove(title)
                reference.trips[to, default: []].insert(title)
            case 3:  // detach an item
                guard let from = pick(reference.trips.keys), let title = pick(reference.trips[from] ?? []),
                    let detached = try item(title)
                else { continue }
                detached.trip = nil
                reference.trips[from]?.remove(title)
                reference.loose.insert(title)
            case 4:  // delete an item (nullify)
                let all = reference.trips.values.flatMap { $0 } + reference.loose
                guard let title = pick(all), let doomed = try item(title) else { continue }
                context.delete(doomed)
                for key in reference.trips.keys { reference.trips[key]?.remove(title) }
                reference.loose.remove(title)
            case 5:  // delete a trip (cascade to items and its accommodation)
                guard let tripName = pick(reference.trips.keys), let doomed = try trip(tripName) else { continue }
                context.delete(doomed)
                reference.trips[tripName] = nil
                reference.stays[tripName] = nil
            case 6:  // give a trip an accommodation, or move one
                guard let tripName = pick(reference.trips.keys), let owner = try trip(tripName) else { continue }
                if let from = pick(reference.stays.keys), from != tripName, Bool.random(using: &random),
                    let stay = try fetch(LivingAccommodation.self).first(where: { $0.placeName == reference.stays[from] })
                {
                    owner.livingAccommodation = stay
                    reference.stays[tripName] = reference.stays[from]
                    reference.stays[from] = nil
                } else if reference.stays[tripName] == nil {
                    let place = name("a")
                    owner.livingAccommodation = LivingAccommodation(address: "x", placeName: place)
                    reference.stays[tripName] = place
                }
            case 7:  // a student enrols in courses
                let student = Student(name: name("s"))
                context.insert(student)
                reference.enrolment[student.name] = []
                let courses = try fetch(Course.self).sorted { $0.title < $1.title }
                for course in courses where Bool.random(using: &random) {
                    student.courses.append(course)
                    reference.enrolment[student.name, default: []].insert(course.title)
                }
            case 8:  // a new course, with students added from the course's side
                let course = Course(title: name("c"))
                context.insert(course)
                reference.courses.insert(course.title)
                for student in try fetch(Student.self).sorted(by: { $0.name < $1.name }) where Bool.random(using: &random) {
                    course.students.append(student)
                    reference.enrolment[student.name, default: []].insert(course.title)
                }
            case 9:  // drop a course (nullify both sides) or unenrol one student
                guard let title = pick(reference.courses),
                    let course = try fetch(Course.self).first(where: { $0.title == title })
                else { continue }
                if Bool.random(using: &random) {
                    context.delete(course)
                    reference.courses.remove(title)
                    for key in reference.enrolment.keys { reference.enrolment[key]?.remove(title) }
                } else if let name = pick(course.students.map(\.name)),
                    let student = course.students.first(where: { $0.name == name })
                {
                    student.courses.removeAll { $0 === course }
                    reference.enrolment[student.name]?.remove(title)
                }
            case 10:  // delete a trip by predicate (by row id when it is not loaded)
                guard let tripName = pick(reference.trips.keys) else { continue }
                try context.delete(model: Trip.self, where: #Predicate { $0.name == tripName })
                reference.trips[tripName] = nil
                reference.stays[tripName] = nil
            case 11:  // delete an item or a course by predicate (nullify)
                if Bool.random(using: &random) {
                    let all = reference.trips.values.flatMap { $0 } + reference.loose
                    guard let title = pick(all) else { continue }
                    try context.delete(model: BucketListItem.self, where: #Predicate { $0.title == title })
                    for key in reference.trips.keys { reference.trips[key]?.remove(title) }
                    reference.loose.remove(title)
                } else {
                    guard let title = pick(reference.courses) else { continue }
                    try context.delete(model: Course.self, where: #Predicate { $0.title == title })
                    reference.courses.remove(title)
                    for key in reference.enrolment.keys { reference.enrolment[key]?.remove(title) }
                }
            default:  // save, check, and continue in a fresh context
                try context.save()
                XCTAssertEqual(try container.checkIntegrity(), [], "after step \(step)")
                context = ModelContext(container)
                XCTAssertEqual(try read(ModelContext(container)), reference, "after step \(step)")
            }
        }
        try context.save()
        XCTAssertEqual(try container.checkIntegrity(), [])
        XCTAssertEqual(try read(ModelContext(container)), reference)
    }

    /// The graph as stored, read through a fresh context.
    func read(_ context: ModelContext) throws -> Graph {
        var graph = Graph()
        for trip in try context.fetch(FetchDescriptor<Trip>()) {
            graph.trips[trip.name] = Set(trip.bucketList.map(\.title))
            if let stay = trip.livingAccommodation { graph.stays[trip.name] = stay.placeName }
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
