import FidelitySupport
import Foundation
import Strata
import Testing
import XCTest

nonisolated final class RealCodeFormsTests: FidelityTestCase {
    func testTheChoresDataLayer() throws {
        let container = try container(Chore.self, ChoreStep.self, Room.self)
        let context = ModelContext(container)
        let kitchen = Room(label: "kitchen")
        context.insert(kitchen)
        for chore in Chore.sample() {
            context.insert(chore)
            chore.room = kitchen
        }
        let urgent = Chore(name: "Fix the sink", dueDate: .distantPast, priority: .high)
        context.insert(urgent)
        urgent.steps.append(ChoreStep(text: "buy a washer"))
        urgent.steps.append(ChoreStep(text: "fit it"))
        context.insert(Chore())
        try context.save()

        XCTAssertEqual(urgent.stepCount, 2)
        XCTAssertTrue(urgent.isOverdue)
        XCTAssertEqual(kitchen.chores?.count, 2)
        XCTAssertEqual(urgent.steps.first?.chore, urgent, "the inverse of an unannotated to-many")

        let repository = Repository<Chore>(context: context)
        XCTAssertEqual(try repository.count(), 4)
        XCTAssertEqual(try repository.count(where: Chore.urgent), 1)
        XCTAssertEqual(
            try repository.all(sortedBy: [SortDescriptor(\.name)]).map(\.name), ["Dishes", "Fix the sink", "Laundry", "Untitled"])
        let ids = Set(try repository.all().map(\.id))
        XCTAssertEqual(ids.count, 4, "an own UUID id")
        let wanted = urgent.id
        XCTAssertEqual(try context.fetch(FetchDescriptor<Chore>(predicate: #Predicate { $0.id == wanted })).first, urgent)
        let names = ["Dishes", "Laundry"]
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Chore>(predicate: #Predicate { names.contains($0.name) })), 2)
        XCTAssertEqual(
            try context.fetchCount(FetchDescriptor<Chore>(predicate: #Predicate { $0.room?.label == "kitchen" })), 2)

        // Data, in the record and outside it.
        urgent.photo = Data(repeating: 7, count: 200_000)
        urgent.checksum = Data([1, 2, 3])
        try context.save()
        let other = ModelContext(container)
        let reread = try XCTUnwrap(try other.fetch(FetchDescriptor<Chore>(predicate: #Predicate { $0.id == wanted })).first)
        XCTAssertEqual(reread.photo?.count, 200_000)
        XCTAssertEqual(reread.checksum, Data([1, 2, 3]))

        urgent.complete()
        XCTAssertTrue(urgent.steps.allSatisfy(\.isDone))
        // Deleting the room nullifies its chores' room.
        context.delete(kitchen)
        try context.save()
        XCTAssertTrue(try repository.all().allSatisfy { $0.room == nil })

        // The versioned schema and the typealias an app keeps for its models.
        XCTAssertEqual(Schema(versionedSchema: ChoresSchemaV1.self).entities.count, 3)
        XCTAssertTrue(CurrentInventoryItem.self == InventoryV2.Item.self)
    }

    @MainActor
    func testASharedPreviewContainerAndChangeNotifications() throws {
        let context = ModelContext(ChoresStore.preview)
        let saved = LockedBox<[PersistentIdentifier]>([])
        let observer = NotificationCenter.default.addObserver(
            forName: ModelContext.didSave, object: context, queue: nil
        ) { notification in
            let inserted = notification.userInfo?[ModelContext.NotificationKey.insertedIdentifiers.rawValue]
            saved.set((inserted as? [PersistentIdentifier]) ?? [])
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let chore = Chore(name: "Shared")
        context.insert(chore)
        try context.save()
        XCTAssertEqual(saved.value, [chore.persistentModelID])
        // Values around models, as data layers write them.
        let data = try JSONEncoder().encode(["id": chore.id.uuidString, "name": chore.name])
        let decoded = try JSONDecoder().decode([String: String].self, from: data)
        XCTAssertEqual(decoded["id"].flatMap(UUID.init(uuidString:)), chore.id)
        try context.delete(model: Chore.self, where: #Predicate { $0.name == "Shared" })
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Chore>()), 0)
    }

    @MainActor
    func testAnObservableMainActorListOverTheMainContext() async throws {
        let container = try container(Chore.self, ChoreStep.self, Room.self)
        let list = ChoreList(container: container)
        list.add("Water the plants")
        list.add("Bins")
        XCTAssertEqual(list.chores.map(\.name), ["Water the plants", "Bins"])
        XCTAssertNil(list.lastError)
        let count = try await Task.detached {
            try ModelContext(container).fetchCount(FetchDescriptor<Chore>())
        }.value
        XCTAssertEqual(count, 2)
    }
}

/// The same data layer driven from Swift Testing, as 8% of the surveyed
/// files do.
@Suite struct ChoresSwiftTesting {
    @Test func aChoreRoundTripsThroughAnInMemoryStore() throws {
        let container = try ModelContainer(
            for: Chore.self, ChoreStep.self, Room.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let context = ModelContext(container)
        context.insert(Chore(name: "Test", inDays: 1))
        try context.save()
        let fetched = try context.fetch(FetchDescriptor<Chore>())
        #expect(fetched.map(\.name) == ["Test"])
        #expect(fetched.first?.isOverdue == false)
    }
}
