import Foundation
import Strata
import StrataTesting
import XCTest

/// The model layer used as a SwiftData user uses it.
final class ModelContextTests: StoreTestCase {
    func container(_ url: URL? = nil, allowsSave: Bool = true) throws -> ModelContainer {
        try track(
            ModelContainer(
                for: Trip.self, Everything.self,
                configurations: ModelConfiguration(url: url ?? storeURL(), allowsSave: allowsSave)))
    }

    func testEveryAttributeTypeRoundTrips() throws {
        let seeds = Array(0..<40)
        var originals: [Int: Everything] = [:]
        do {
            let context = ModelContext(try container())
            for seed in seeds {
                let model = Everything(seed: seed)
                model.counter = seed
                originals[seed] = model
                context.insert(model)
            }
            try context.save()
        }
        let fetched = try ModelContext(try container()).fetch(FetchDescriptor<Everything>(sortBy: [SortDescriptor(\.counter)]))
        XCTAssertEqual(fetched.count, seeds.count)
        for model in fetched {
            let original = try XCTUnwrap(originals[model.counter])
            XCTAssertEqual(model.bool, original.bool)
            XCTAssertEqual(model.int, original.int)
            XCTAssertEqual(model.int8, original.int8)
            XCTAssertEqual(model.int16, original.int16)
            XCTAssertEqual(model.int32, original.int32)
            XCTAssertEqual(model.int64, original.int64)
            XCTAssertEqual(model.uint, original.uint)
            XCTAssertEqual(model.uint8, original.uint8)
            XCTAssertEqual(model.uint16, original.uint16)
            XCTAssertEqual(model.uint32, original.uint32)
            XCTAssertEqual(model.uint64, original.uint64)
            XCTAssertEqual(model.float.bitPattern, original.float.bitPattern)
            XCTAssertEqual(model.double.bitPattern, original.double.bitPattern)
            XCTAssertEqual(model.decimal, original.decimal)
            XCTAssertEqual(model.string, original.string)
            XCTAssertEqual(model.date, original.date)
            XCTAssertEqual(model.data, original.data)
            XCTAssertEqual(model.url, original.url)
            XCTAssertEqual(model.uuid, original.uuid)
            XCTAssertEqual(model.status, original.status)
            XCTAssertEqual(model.priority, original.priority)
            XCTAssertEqual(model.shape, original.shape)
            XCTAssertEqual(model.address, original.address)
            XCTAssertEqual(model.tags, original.tags)
            XCTAssertEqual(model.scores, original.scores)
            XCTAssertEqual(model.matrix, original.matrix)
            XCTAssertEqual(model.addresses, original.addresses)
            XCTAssertEqual(model.optionalInt, original.optionalInt)
            XCTAssertEqual(model.optionalString, original.optionalString)
            XCTAssertEqual(model.optionalDate, original.optionalDate)
            XCTAssertEqual(model.optionalStatus, original.optionalStatus)
            XCTAssertEqual(model.optionalAddress, original.optionalAddress)
            XCTAssertEqual(model.optionalTags, original.optionalTags)
            XCTAssertEqual(model.ratio, 0.5)
            XCTAssertEqual(model.label, "none")
        }
    }

    func testSecondContextSeesWhatTheFirstSaved() throws {
        let container = try container()
        let first = ModelContext(container)
        let second = ModelContext(container)
        let trip = Trip(name: "Alps", destination: "Zermatt")
        first.insert(trip)
        XCTAssertEqual(try second.fetchCount(FetchDescriptor<Trip>()), 0)
        XCTAssertEqual(try first.fetchCount(FetchDescriptor<Trip>()), 1, "pending inserts count in their own context")
        try first.save()
        let seen = try second.fetch(FetchDescriptor<Trip>())
        XCTAssertEqual(seen.map(\.name), ["Alps"])
        XCTAssertEqual(seen.first?.persistentModelID, trip.persistentModelID)
        XCTAssertFalse(seen.first === trip, "each context has its own instance")
    }

    func testIdentityMapGivesOneInstancePerRow() throws {
        let container = try container()
        let writer = ModelContext(container)
        writer.insert(Trip(name: "A", destination: "X"))
        try writer.save()
        let context = ModelContext(container)
        let first = try context.fetch(FetchDescriptor<Trip>())
        let second = try context.fetch(FetchDescriptor<Trip>())
        XCTAssertTrue(first[0] === second[0])
        let id = first[0].persistentModelID
        XCTAssertTrue(context.model(for: id) as? Trip === first[0])
        XCTAssertTrue((context.registeredModel(for: id) as Trip?) === first[0])
        XCTAssertNil(ModelContext(container).registeredModel(for: id) as Trip?)
        let loaded: Trip? = try ModelContext(container).existingModel(for: id)
        XCTAssertEqual(loaded?.name, "A")
    }

    func testChangesAreTrackedAndSaved() throws {
        let container = try container()
        let context = ModelContext(container)
        let trip = Trip(name: "A", destination: "X")
        XCTAssertFalse(context.hasChanges)
        context.insert(trip)
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(context.insertedModelsArray.count, 1)
        XCTAssertTrue(trip.hasChanges)
        XCTAssertTrue(trip.modelContext === context)
        try context.save()
        XCTAssertFalse(context.hasChanges)
        XCTAssertFalse(trip.hasChanges)
        trip.destination = "Y"
        XCTAssertTrue(trip.hasChanges)
        XCTAssertEqual(context.changedModelsArray.count, 1)
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Trip>()).first?.destination, "Y")
    }

    func testDelete() throws {
        let container = try container()
        let context = ModelContext(container)
        let unsaved = Trip(name: "never saved", destination: "X")
        context.insert(unsaved)
        context.delete(unsaved)
        XCTAssertFalse(context.hasChanges, "deleting an unsaved insert discards it")
        let kept = Trip(name: "kept", destination: "X")
        let gone = Trip(name: "gone", destination: "X")
        context.insert(kept)
        context.insert(gone)
        try context.save()
        context.delete(gone)
        XCTAssertTrue(gone.isDeleted)
        XCTAssertEqual(context.deletedModelsArray.count, 1)
        XCTAssertEqual(try context.fetch(FetchDescriptor<Trip>()).map(\.name), ["kept"], "pending deletes are excluded")
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Trip>()), 1)
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()), 2, "not saved yet")
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name), ["kept"])
        try context.delete(model: Trip.self, where: #Predicate { $0.name == "kept" })
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()), 0)
    }

    func testRollbackRestoresSavedState() throws {
        let container = try container()
        let context = ModelContext(container)
        let changed = Trip(name: "changed", destination: "before")
        let deleted = Trip(name: "deleted", destination: "X")
        context.insert(changed)
        context.insert(deleted)
        try context.save()
        changed.destination = "after"
        context.delete(deleted)
        let inserted = Trip(name: "inserted", destination: "X")
        context.insert(inserted)
        context.rollback()
        XCTAssertFalse(context.hasChanges)
        XCTAssertEqual(changed.destination, "before")
        XCTAssertFalse(deleted.isDeleted)
        XCTAssertNil(inserted.modelContext)
        XCTAssertEqual(Set(try context.fetch(FetchDescriptor<Trip>()).map(\.name)), ["changed", "deleted"])
    }

    func testFetchWithPredicateSortAndPaging() throws {
        let context = ModelContext(try container())
        let base = Date(timeIntervalSinceReferenceDate: 0)
        for i in 0..<20 {
            context.insert(
                Trip(
                    name: "trip \(i % 5)", destination: i % 2 == 0 ? "even" : "odd",
                    startDate: base.addingTimeInterval(Double(20 - i) * 86_400)))
        }
        try context.save()
        context.insert(Trip(name: "pending", destination: "even", startDate: base))
        let even = try context.fetch(
            FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "even" }, sortBy: [SortDescriptor(\.startDate)]))
        XCTAssertEqual(even.count, 11)
        XCTAssertEqual(even.first?.name, "pending")
        XCTAssertEqual(even.map(\.startDate), even.map(\.startDate).sorted())
        var page = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name, order: .reverse), SortDescriptor(\.startDate)])
        page.fetchOffset = 2
        page.fetchLimit = 3
        let names = try context.fetch(page).map(\.name)
        XCTAssertEqual(names, ["trip 4", "trip 4", "trip 3"])
        var saved = FetchDescriptor<Trip>()
        saved.includePendingChanges = false
        XCTAssertEqual(try context.fetch(saved).count, 20)
        XCTAssertEqual(try context.fetchCount(saved), 20)
        var limited = FetchDescriptor<Trip>()
        limited.fetchLimit = 4
        XCTAssertEqual(try context.fetch(limited).count, 4)
        XCTAssertEqual(try context.fetchCount(limited), 4)
        XCTAssertEqual(try context.fetchIdentifiers(limited).count, 4)
    }

    func testRelationshipsPersistAndLoadLazily() throws {
        let container = try container()
        let context = ModelContext(container)
        let trip = Trip(name: "Rome", destination: "Italy")
        trip.bucketList = [
            BucketListItem(title: "Colosseum", details: "", hasReservation: true, isInPlan: true),
            BucketListItem(title: "Pantheon", details: "", hasReservation: false, isInPlan: true),
        ]
        trip.livingAccommodation = LivingAccommodation(address: "Via Roma 1", placeName: "Hotel")
        context.insert(trip)
        XCTAssertEqual(context.insertedModelsArray.count, 4, "inserting a model inserts what it reaches")
        try context.save()

        let other = ModelContext(container)
        let loaded = try XCTUnwrap(other.fetch(FetchDescriptor<Trip>()).first)
        XCTAssertEqual(loaded.bucketList.map(\.title), ["Colosseum", "Pantheon"])
        XCTAssertEqual(loaded.livingAccommodation?.placeName, "Hotel")
        XCTAssertEqual(try other.fetchCount(FetchDescriptor<BucketListItem>()), 2)
    }

    func testReadOnlyConfigurationRefusesToSaveAndKeepsChanges() throws {
        let url = storeURL()
        do {
            let context = ModelContext(try container(url))
            context.insert(Trip(name: "A", destination: "X"))
            try context.save()
        }
        let readOnly = ModelContext(try container(url, allowsSave: false))
        XCTAssertEqual(try readOnly.fetchCount(FetchDescriptor<Trip>()), 1)
        readOnly.insert(Trip(name: "B", destination: "Y"))
        XCTAssertThrowsError(try readOnly.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .readOnlyStore)
        }
        XCTAssertTrue(readOnly.hasChanges, "a failed save keeps the pending changes")
        XCTAssertEqual(try ModelContext(try container(url, allowsSave: false)).fetchCount(FetchDescriptor<Trip>()), 1)
    }

    func testUnknownModelTypeIsATypedError() throws {
        let container = try track(
            ModelContainer(for: Everything.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
        let context = ModelContext(container)
        XCTAssertThrowsError(try context.fetch(FetchDescriptor<Trip>())) { error in
            XCTAssertEqual(error as? SwiftDataError, .unknownModelType)
        }
        context.insert(Everything(seed: 1))
        context.insert(Trip(name: "A", destination: "X"))
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .unknownModelType)
            XCTAssertTrue("\(error)".contains("Trip"), "\(error)")
        }
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Everything>()), 0, "nothing was written")
    }

    func testDifferentSchemaWithoutMigrationIsATypedError() throws {
        let url = storeURL()
        do {
            let context = ModelContext(try track(ModelContainer(for: V1.Note.self, configurations: ModelConfiguration(url: url))))
            context.insert(V1.Note(text: "hello"))
            try context.save()
        }
        XCTAssertThrowsError(try ModelContainer(for: V2.Note.self, configurations: ModelConfiguration(url: url))) { error in
            XCTAssertEqual(error as? SwiftDataError, .loadIssueModelContainer)
            XCTAssertTrue("\(error)".contains("Note"), "\(error)")
        }
        let context = ModelContext(try track(ModelContainer(for: V1.Note.self, configurations: ModelConfiguration(url: url))))
        XCTAssertEqual(try context.fetch(FetchDescriptor<V1.Note>()).map(\.text), ["hello"], "the data stays readable")
    }

    func testDamagedRecordIsATypedError() throws {
        let url = storeURL()
        do {
            let context = ModelContext(try container(url))
            context.insert(Trip(name: "A", destination: "X"))
            try context.save()
        }
        let database = try Database.open(path: url.path)
        try database.write { tx in
            let tree = try tx.tree("e.Trip")
            let key = try XCTUnwrap(tx.scan(tree).first?.key)
            try tx.put(key, [1, 0x0A, 0xFF, 0xFF, 0xFF], in: tree)
        }
        try database.close()
        let damaged = try container(url)
        skipIntegrityCheck(of: damaged, because: "the Trip record is overwritten with bytes that do not decode")
        let context = ModelContext(damaged)
        XCTAssertThrowsError(try context.fetch(FetchDescriptor<Trip>())) { error in
            XCTAssertEqual(error as? SwiftDataError, .corruptRecord)
            XCTAssertTrue("\(error)".contains("Trip row 1"), "\(error)")
        }
    }

    /// The save looks at the record tree's last key to move inserts off
    /// rows other processes took. A damaged last key (another handle wrote
    /// five bytes where a row id's eight belong) was skipped, so the check
    /// did not run; the save now fails with a typed error and the context
    /// keeps its insert.
    func testADamagedLastRowKeyFailsTheSave() throws {
        let url = storeURL()
        let opened = try container(url)
        skipIntegrityCheck(of: opened, because: "a five-byte key is written into the Trip records")
        let context = ModelContext(opened)
        context.insert(Trip(name: "A", destination: "X"))
        try context.save()
        let database = try Database.open(path: url.path)
        try database.write { tx in try tx.put([0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0], in: try tx.tree("e.Trip")) }
        try database.close()
        context.insert(Trip(name: "B", destination: "Y"))
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .corruptRecord, "\(error)")
            XCTAssertTrue("\(error)".contains("5 bytes"), "\(error)")
        }
        XCTAssertTrue(context.hasChanges, "the insert stays pending")
        XCTAssertEqual(context.insertedModelsArray.count, 1)
    }

    func testSaveNotificationsCarryIdentifiers() throws {
        let context = ModelContext(try container())
        let trip = Trip(name: "A", destination: "X")
        context.insert(trip)
        let log = EventLog()
        let center = NotificationCenter.default
        let will = center.addObserver(forName: ModelContext.willSave, object: context, queue: nil) { _ in log.append("will") }
        let did = center.addObserver(forName: ModelContext.didSave, object: context, queue: nil) { note in
            let ids = note.userInfo?[ModelContext.NotificationKey.insertedIdentifiers.rawValue] as? [PersistentIdentifier] ?? []
            log.append("did \(ids)")
        }
        defer {
            center.removeObserver(will)
            center.removeObserver(did)
        }
        context.author = "tests"
        try context.transaction { trip.destination = "Y" }
        XCTAssertEqual(log.events, ["will", "did \([trip.persistentModelID])"])
        XCTAssertFalse(context.hasChanges, "transaction saves")
    }

    func testPersistentIdentifierIsCodableAndStable() throws {
        let context = ModelContext(try container())
        let trip = Trip(name: "A", destination: "X")
        XCTAssertTrue(trip.persistentModelID.isTemporary)
        context.insert(trip)
        let id = trip.persistentModelID
        XCTAssertFalse(id.isTemporary)
        try context.save()
        XCTAssertEqual(trip.persistentModelID, id, "the identifier given at insert is permanent")
        let decoded = try JSONDecoder().decode(PersistentIdentifier.self, from: JSONEncoder().encode(id))
        XCTAssertEqual(decoded, id)
        XCTAssertEqual(decoded.hashValue, id.hashValue)
    }

    func testModelsAreObservable() throws {
        let trip = Trip(name: "A", destination: "X")
        let fired = LockedFlag()
        withObservationTracking {
            _ = trip.destination
        } onChange: {
            fired.set()
        }
        trip.name = "not observed"
        XCTAssertFalse(fired.value)
        trip.destination = "Y"
        XCTAssertTrue(fired.value)
    }

    func testRollbackNotifiesObservers() throws {
        let context = ModelContext(try container())
        let trip = Trip(name: "A", destination: "X")
        context.insert(trip)
        try context.save()
        trip.destination = "Y"
        let fired = LockedFlag()
        withObservationTracking {
            _ = trip.destination
        } onChange: {
            fired.set()
        }
        context.rollback()
        XCTAssertEqual(trip.destination, "X")
        XCTAssertTrue(fired.value, "observers see the value rollback restores")
    }

    func testInMemoryConfigurationKeepsNothingOnDisk() throws {
        let container = try track(ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
        let context = ModelContext(container)
        context.insert(Trip(name: "A", destination: "X"))
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()), 1)
        let other = try track(ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true)))
        XCTAssertEqual(try ModelContext(other).fetchCount(FetchDescriptor<Trip>()), 0)
    }

    func testDefaultConfigurationUsesTheDataDirectory() throws {
        setenv("XDG_DATA_HOME", directory.path + "/data", 1)
        defer { unsetenv("XDG_DATA_HOME") }
        let configuration = ModelConfiguration()
        XCTAssertEqual(configuration.url.path, directory.path + "/data/default.store")
        let context = ModelContext(try track(ModelContainer(for: Trip.self, configurations: configuration)))
        context.insert(Trip(name: "A", destination: "X"))
        try context.save()
        XCTAssertTrue(FileManager.default.fileExists(atPath: configuration.url.path))
    }

    func testModelActorWorksInTheBackground() async throws {
        let container = try container()
        let importer = TripImporter(modelContainer: container)
        let count = try await importer.importTrips(25)
        XCTAssertEqual(count, 25)
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()), 25)
    }

    @MainActor
    func testMainContextAutosaves() async throws {
        let container = try container()
        container.mainContext.insert(Trip(name: "autosaved", destination: "X"))
        for _ in 0..<100 where container.mainContext.hasChanges {
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        XCTAssertFalse(container.mainContext.hasChanges)
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()), 1)
    }
}

@ModelActor
actor TripImporter {
    func importTrips(_ count: Int) throws -> Int {
        for i in 0..<count { modelContext.insert(Trip(name: "trip \(i)", destination: "somewhere")) }
        try modelContext.save()
        return try modelContext.fetchCount(FetchDescriptor<Trip>())
    }
}

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    var events: [String] { lock.withLock { list } }
    func append(_ event: String) { lock.withLock { list.append(event) } }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool { lock.withLock { flag } }
    func set() { lock.withLock { flag = true } }
}

enum V1 {
    @Model final class Note {
        var text: String
        init(text: String) { self.text = text }
    }
}

enum V2 {
    @Model final class Note {
        var text: String
        var pinned: Bool
        init(text: String) {
            self.text = text
            pinned = false
        }
    }
}
