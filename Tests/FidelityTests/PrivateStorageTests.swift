import FidelitySupport
import Foundation
import Strata
import XCTest

nonisolated final class PrivateStorageTests: FidelityTestCase {
    func testPrivateStoredPropertiesBehindComputedWrappers() throws {
        let day = Date(timeIntervalSince1970: 1_800_000_000)
        do {
            let context = ModelContext(try container(Habit.self))
            let walk = Habit(slug: "walk", title: "Walk", frequency: .weekly)
            walk.complete(on: day)
            walk.description = "outside"
            walk.type = "health"
            walk.order = 3
            walk.value = 1.5
            context.insert(walk)
            try context.save()
        }
        let context = ModelContext(try container(Habit.self))
        let walk = try XCTUnwrap(try context.fetch(FetchDescriptor<Habit>()).first)
        XCTAssertEqual(walk.frequency, .weekly)
        XCTAssertEqual(walk.completions, [day])
        XCTAssertEqual(walk.description, "outside")
        XCTAssertEqual(walk.type, "health")
        XCTAssertEqual(walk.order, 3)
        XCTAssertEqual(walk.value, 1.5)
        XCTAssertEqual(
            try context.fetchCount(FetchDescriptor<Habit>(predicate: #Predicate { $0.type == "health" && $0.order == 3 })),
            1)
        XCTAssertEqual(Habit.schemaMetadata.map(\.name).filter { $0.hasPrefix("_") }, ["_completions"])

        XCTAssertEqual(
            try context.fetchCount(
                FetchDescriptor<Habit>(
                    predicate: #Predicate {
                        $0.slug == "walk" && $0.title == "Walk" && $0.description == "outside" && $0.value == 1.5
                    })), 1)

        // The unique slug upserts.
        context.insert(Habit(slug: "walk", title: "Long walk"))
        try context.save()
        XCTAssertEqual(try context.fetch(FetchDescriptor<Habit>()).map(\.title), ["Long walk"])
        context.delete(try XCTUnwrap(try context.fetch(FetchDescriptor<Habit>()).first))
        try context.save()
        XCTAssertEqual(try ModelContext(try container(Habit.self)).fetchCount(FetchDescriptor<Habit>()), 0)
    }

    func testPublicModelActor() async throws {
        let importer = HabitImporter(modelContainer: try container(Habit.self))
        let count = try await importer.importHabits(["read", "run"])
        XCTAssertEqual(count, 2)
    }
}
