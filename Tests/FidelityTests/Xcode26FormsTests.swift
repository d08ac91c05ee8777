import FidelitySupport
import Foundation
import Strata
import XCTest

nonisolated final class Xcode26FormsTests: FidelityTestCase {
    func testAModelActorFetchesReadsAndChangesModels() async throws {
        let container = try container(Location.self, Visit.self)
        let service = LocationService(modelContainer: container)
        let lisbon = try await service.add("Lisbon", kind: .city, daysAgo: 3)
        _ = try await service.add("Retiro", kind: .park, daysAgo: 1)
        _ = try await service.add("Prado", kind: .museum, daysAgo: 2)
        _ = try await service.add("Monsanto", kind: .park, daysAgo: 5)

        let recent = try await service.recentNames()
        XCTAssertEqual(recent, ["Retiro", "Prado", "Lisbon", "Monsanto"])
        let parks = try await service.parkNames()
        XCTAssertEqual(parks, ["Monsanto", "Retiro"])
        let renamed = try await service.rename(lisbon, to: "Lisboa")
        XCTAssertTrue(renamed)
        let longitude = try await service.longitude(of: lisbon)
        XCTAssertEqual(longitude, 3)
        let history = try await service.historyCount()
        XCTAssertEqual(history, 5, "four inserts and a rename")

        // Another context sees what the actor saved.
        let context = ModelContext(container)
        let names = try context.fetch(Location.recent).map(\.name)
        XCTAssertEqual(names, ["Retiro", "Prado", "Lisboa", "Monsanto"])
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Visit>(predicate: #Predicate { $0.location?.name == "Lisboa" })), 1)
    }

    func testTheActorsSubscriptIsNilForAnotherTypeOrAMissingModel() async throws {
        let container = try container(Location.self, Visit.self)
        let service = LocationService(modelContainer: container)
        let id = try await service.add("Porto", kind: .city, daysAgo: 0)
        let context = ModelContext(container)
        let location = try XCTUnwrap(context.model(for: id) as? Location)
        context.delete(location)
        try context.save()
        let renamed = try await service.rename(id, to: "gone")
        XCTAssertFalse(renamed, "a deleted model is nil, not a trap")
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Location>()), 0)
    }

    @MainActor
    func testTheMainContextAutosavesOnTheMainActor() async throws {
        let container = try container(Location.self, Visit.self)
        let main = container.mainContext
        main.insert(Location(name: "Main", point: GeoPoint(latitude: 0, longitude: 0)))
        for _ in 0..<200 where main.hasChanges {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        XCTAssertFalse(main.hasChanges)
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Location>()), 1)
    }
}
